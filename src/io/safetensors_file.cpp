#include "io/safetensors_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <numeric>
#include <set>

#include "core/error.h"
#include "core/files.h"
#include "io/crc32c.h"

namespace pipetrain {

SafetensorsFileWriter::SafetensorsFileWriter(const std::string& path,
                                             std::vector<TensorLayout> tensors,
                                             const std::map<std::string, std::string>& metadata)
    : file_(path), tensors_(std::move(tensors)) {
  write(safetensors_header(tensors_, metadata));
}

void SafetensorsFileWriter::write(std::string_view bytes) {
  crc_ = crc32c(bytes, crc_);
  file_.write(bytes);
}

void SafetensorsFileWriter::write_tensor(std::string_view bytes) {
  if (written_tensors_ == tensors_.size()) {
    fail("cannot write '{}': more tensors than its header lists", file_.path());
  }
  const TensorLayout& tensor = tensors_[written_tensors_];
  const uint64_t size = tensor_byte_size(tensor);
  if (bytes.size() != size) {
    fail("cannot write '{}': tensor '{}' has {} bytes, its shape needs {}", file_.path(),
         tensor.name, bytes.size(), size);
  }
  write(bytes);
  ++written_tensors_;
}

std::string SafetensorsFileWriter::commit() {
  if (written_tensors_ != tensors_.size()) {
    fail("cannot write '{}': {} of its {} tensors written", file_.path(), written_tensors_,
         tensors_.size());
  }
  file_.commit();
  return format_crc32c(crc_);
}

namespace {

// An open file read front to back, every byte read fed to a running CRC32C.
class ChecksummedReader {
 public:
  explicit ChecksummedReader(const std::string& path) : path_(path), fd_(open_without_waiting(path)) {
    if (fd_ < 0) fail_now(errno);
    struct stat info {};
    if (::fstat(fd_, &info) != 0) {
      const int error = errno;
      ::close(fd_);  // the destructor does not run for a constructor that throws
      fail_now(error);
    }
    if (!S_ISREG(info.st_mode)) {
      ::close(fd_);
      fail("cannot read '{}': not a regular file", path_);
    }
    size_ = uint64_t(info.st_size);
  }
  ~ChecksummedReader() { ::close(fd_); }
  ChecksummedReader(const ChecksummedReader&) = delete;
  ChecksummedReader& operator=(const ChecksummedReader&) = delete;

  uint64_t size() const { return size_; }
  uint64_t position() const { return position_; }
  uint32_t crc() const { return crc_; }

  // The next `count` bytes into `out` (a file that shrank meanwhile is a UserError).
  void read(char* out, uint64_t count) {
    for (uint64_t done = 0; done < count;) {
      const ssize_t n = ::pread(fd_, out + done, count - done, off_t(position_ + done));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) fail_now(errno);
      if (n == 0) fail("cannot read '{}': it ended early (changed while read?)", path_);
      done += uint64_t(n);
    }
    crc_ = crc32c({out, count}, crc_);
    position_ += count;
  }
  std::string read(uint64_t count) {
    std::string out(count, '\0');
    read(out.data(), count);
    return out;
  }
  // Reading goes on at `position` (the checksum then covers only what was read).
  void seek(uint64_t position) { position_ = position; }
  // Bytes no tensor holds (padding, gaps): read for the checksum only, in bounded pieces.
  void skip_to(uint64_t position) {
    std::string piece;
    while (position_ < position) piece = read(std::min<uint64_t>(position - position_, 1 << 20));
  }

 private:
  [[noreturn]] void fail_now(int error) { fail("cannot read '{}': {}", path_, std::strerror(error)); }

  std::string path_;
  int fd_;
  uint64_t size_ = 0, position_ = 0;
  uint32_t crc_ = 0;
};

}  // namespace

std::vector<TensorEntry> read_safetensors_file(const std::string& path, uint32_t* crc,
                                               std::map<std::string, std::string>* metadata) {
  ChecksummedReader file(path);
  const std::string start = file.read(std::min<uint64_t>(file.size(), 8));
  const uint64_t header_length = safetensors_header_length(start, file.size(), path);
  const uint64_t data_start = 8 + header_length;
  auto placements = parse_safetensors_header(file.read(header_length), file.size() - data_start,
                                             path, metadata);
  std::vector<TensorEntry> tensors(placements.size());
  std::vector<size_t> by_offset(placements.size());
  std::iota(by_offset.begin(), by_offset.end(), size_t(0));
  std::sort(by_offset.begin(), by_offset.end(),
            [&](size_t a, size_t b) { return placements[a].begin < placements[b].begin; });
  for (const size_t i : by_offset) {  // in file order: one pass, the checksum in order
    TensorPlacement& placement = placements[i];
    file.skip_to(data_start + placement.begin);
    tensors[i] = {std::move(placement.layout.name), std::move(placement.layout.dtype),
                  std::move(placement.layout.shape), file.read(placement.end - placement.begin)};
  }
  file.skip_to(file.size());
  if (crc) *crc = file.crc();
  return tensors;
}

namespace {

struct OpenedSafetensors {
  uint64_t data_start = 0;
  std::vector<TensorPlacement> placements;
};

OpenedSafetensors read_header(ChecksummedReader& file, const std::string& path) {
  const std::string start = file.read(std::min<uint64_t>(file.size(), 8));
  const uint64_t header_length = safetensors_header_length(start, file.size(), path);
  OpenedSafetensors opened;
  opened.data_start = 8 + header_length;
  opened.placements = parse_safetensors_header(file.read(header_length),
                                               file.size() - opened.data_start, path, nullptr);
  return opened;
}

}  // namespace

std::vector<TensorLayout> read_safetensors_layout(const std::string& path) {
  ChecksummedReader file(path);
  std::vector<TensorLayout> layouts;
  for (auto& placement : read_header(file, path).placements) layouts.push_back(std::move(placement.layout));
  return layouts;
}

std::vector<TensorEntry> read_safetensors_tensors(const std::string& path,
                                                  const std::vector<std::string>& names) {
  ChecksummedReader file(path);
  const OpenedSafetensors opened = read_header(file, path);
  std::set<std::string> wanted(names.begin(), names.end());
  std::vector<TensorEntry> tensors;
  for (const auto& placement : opened.placements) {
    if (wanted.erase(placement.layout.name) == 0) continue;
    file.seek(opened.data_start + placement.begin);
    tensors.push_back({placement.layout.name, placement.layout.dtype, placement.layout.shape,
                       file.read(placement.end - placement.begin)});
  }
  if (!wanted.empty()) fail("'{}' holds no tensor '{}'", path, *wanted.begin());
  return tensors;
}

}  // namespace pipetrain
