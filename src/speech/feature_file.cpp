#include "speech/feature_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "core/error.h"
#include "core/files.h"
#include "io/crc32c.h"

namespace pipetrain::speech {
namespace {

constexpr char kSpeechMagic[8] = {'P', 'T', 'S', 'P', 'E', 'E', 'C', 'H'};
constexpr uint64_t kFileBytesOffset = 12;  // after the magic and the version

// Streams the file to a temporary name, checksumming as it goes; commit() renames it into place.
class SpeechFileWriter {
 public:
  explicit SpeechFileWriter(const std::string& path)
      : path_(path), temp_(path + ".tmp." + std::to_string(::getpid())) {
    file_ = std::fopen(temp_.c_str(), "wb");
    if (file_ == nullptr) fail("cannot write '{}': {}", path_, std::strerror(errno));
  }
  ~SpeechFileWriter() {
    if (file_ != nullptr) std::fclose(file_);
    if (!committed_) ::unlink(temp_.c_str());
  }
  void write(const void* data, size_t bytes) {
    crc_ = crc32c(std::string_view(static_cast<const char*>(data), bytes), crc_);
    if (std::fwrite(data, 1, bytes, file_) != bytes) fail_write();
    written_ += bytes;
  }
  template <typename Value>
  void put(Value value) {
    write(&value, sizeof value);
  }
  void put_string(const std::string& text) {
    put(uint32_t(text.size()));
    write(text.data(), text.size());
  }
  void pad_to_4() {
    const char zeros[4] = {};
    write(zeros, (4 - written_ % 4) % 4);
  }
  uint64_t written() const { return written_; }
  void commit() {
    const uint32_t crc = crc_;
    if (std::fwrite(&crc, 1, sizeof crc, file_) != sizeof crc) fail_write();
    if (std::fflush(file_) != 0 || ::fsync(::fileno(file_)) != 0) fail_write();
    const int closed = std::fclose(file_);
    file_ = nullptr;
    if (closed != 0 || ::rename(temp_.c_str(), path_.c_str()) != 0) fail_write();
    committed_ = true;
  }

 private:
  [[noreturn]] void fail_write() { fail("cannot write '{}': {}", path_, std::strerror(errno)); }
  std::string path_, temp_;
  std::FILE* file_ = nullptr;
  uint32_t crc_ = 0;
  uint64_t written_ = 0;
  bool committed_ = false;
};

uint64_t speech_header_bytes(const SpeechCorpusInfo& info) {
  uint64_t bytes = 8 + 4 + 8 + 4 * 7 + 8 * kSpeechSplitCount;
  for (const auto& s : info.vocabulary) bytes += 4 + s.size();
  for (const auto& s : info.voices) bytes += 4 + s.size();
  return (bytes + 3) / 4 * 4;
}

}  // namespace

// Reads fields of the mapped file in order; the file size was checked against the header's, so
// running past the end means the header itself is inconsistent. (Declared in the header: the
// reader's parsing steps take it.)
class SpeechByteCursor {
 public:
  SpeechByteCursor(const unsigned char* bytes, uint64_t size, const std::string& path)
      : bytes_(bytes), size_(size), path_(path) {}
  template <typename Value>
  Value take() {
    Value value;
    std::memcpy(&value, bytes_ + claim(sizeof value), sizeof value);
    return value;
  }
  std::string take_string() {
    const auto length = take<uint32_t>();
    const uint64_t at = claim(length);
    return std::string(reinterpret_cast<const char*>(bytes_ + at), length);
  }
  uint64_t claim(uint64_t bytes) {
    if (bytes > size_ - offset_) fail_too_large();
    offset_ += bytes;
    return offset_ - bytes;
  }
  // `rows` x `row_bytes`, checked before the product: a crafted header's (frames x mel bins,
  // 32 bits each) can wrap around to a size that fits.
  uint64_t claim_rows(uint64_t rows, uint64_t row_bytes) {
    if (row_bytes > 0 && rows > (size_ - offset_) / row_bytes) fail_too_large();
    return claim(rows * row_bytes);
  }
  void align_to_4() { claim((4 - offset_ % 4) % 4); }
  uint64_t offset() const { return offset_; }

 private:
  [[noreturn]] void fail_too_large() const {
    fail("speech feature file '{}' is corrupt: its header describes more data than the file "
         "holds (prepare it again)",
         path_);
  }
  const unsigned char* bytes_;
  uint64_t size_;
  const std::string& path_;
  uint64_t offset_ = 0;
};

std::string_view speech_split_name(SpeechSplit split) {
  static constexpr std::string_view names[kSpeechSplitCount] = {"train", "validation", "test",
                                                                "unseen-voice"};
  return names[size_t(split)];
}

double SpeechCorpusInfo::hours(SpeechSplit split) const {
  return double(frames[size_t(split)]) * hop_length / sample_rate / 3600.0;
}

void write_speech_features(const std::string& path, SpeechCorpusInfo info,
                           const std::vector<SpeechUtterance>& utterances) {
  info.utterances = {};
  uint64_t data_bytes = 0;
  for (size_t i = 0; i < utterances.size(); ++i) {
    const SpeechUtterance& u = utterances[i];
    if (i > 0 && u.split < utterances[i - 1].split) {
      throw std::logic_error("write_speech_features: utterances not grouped by split");
    }
    ++info.utterances[size_t(u.split)];
    data_bytes += 4 * uint64_t(u.labels.numel()) + 4 * uint64_t(u.features.numel());
  }
  const uint64_t file_bytes = speech_header_bytes(info) + 16 * utterances.size() + data_bytes + 4;
  SpeechFileWriter out(path);
  out.write(kSpeechMagic, sizeof kSpeechMagic);
  out.put(kSpeechFileVersion);
  out.put(file_bytes);
  for (const uint32_t field : {info.mel_bins, info.sample_rate, info.win_length, info.hop_length,
                               info.max_frames, uint32_t(info.vocabulary.size()),
                               uint32_t(info.voices.size())}) {
    out.put(field);
  }
  for (const uint64_t count : info.utterances) out.put(count);
  for (const auto& entry : info.vocabulary) out.put_string(entry);
  for (const auto& voice : info.voices) out.put_string(voice);
  out.pad_to_4();
  for (const SpeechUtterance& u : utterances) {
    for (const uint32_t field : {uint32_t(u.features.size(0)), uint32_t(u.labels.numel()),
                                 u.voice, u.text_line}) {
      out.put(field);
    }
  }
  for (const SpeechUtterance& u : utterances) {
    const auto labels = u.labels.to(torch::kInt64).contiguous();
    for (int64_t i = 0; i < labels.numel(); ++i) out.put(uint32_t(labels.data_ptr<int64_t>()[i]));
    const auto features = u.features.to(torch::kFloat32).contiguous();
    out.write(features.data_ptr<float>(), 4 * size_t(features.numel()));
  }
  if (out.written() + 4 != file_bytes) throw std::logic_error("speech file size miscounted");
  out.commit();
}

SpeechFeatureFile::SpeechFeatureFile(const std::string& path, const SpeechReadOptions& options)
    : path_(path) {
  const int fd = open_without_waiting(path);
  if (fd < 0) {
    fail("cannot read speech feature file '{}': {} (make it with `pipetrain prepare-speech`)",
         path, std::strerror(errno));
  }
  struct stat status {};
  if (::fstat(fd, &status) != 0 || !S_ISREG(status.st_mode)) {
    ::close(fd);
    fail("speech feature file '{}' is not a regular file", path);
  }
  size_ = uint64_t(status.st_size);
  if (size_ > 0) {
    report_shrunk_mapped_files();  // a file rewritten under the run: one line, not a silent SIGBUS
    void* mapped = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (mapped == MAP_FAILED) {
      ::close(fd);
      fail("cannot map speech feature file '{}': {}", path, std::strerror(errno));
    }
    bytes_ = static_cast<const unsigned char*>(mapped);
  }
  ::close(fd);
  try {
    parse(options);
  } catch (...) {
    if (bytes_ != nullptr) ::munmap(const_cast<unsigned char*>(bytes_), size_);
    throw;
  }
}

SpeechFeatureFile::~SpeechFeatureFile() {
  if (bytes_ != nullptr) ::munmap(const_cast<unsigned char*>(bytes_), size_);
}

void SpeechFeatureFile::parse(const SpeechReadOptions& options) {
  SpeechByteCursor cursor(bytes_, size_, path_);
  check_envelope(cursor);
  const uint64_t total = read_header(cursor);
  read_entries(cursor, total);
  size_t split = 0;
  for (uint64_t i = 0; i < total; ++i) {
    Entry& e = entries_[i];
    while (split + 1 < kSpeechSplitCount && i >= first_[split + 1]) ++split;
    e.offset = cursor.claim(4 * uint64_t(e.labels));
    cursor.claim_rows(e.frames, 4 * uint64_t(info_.mel_bins));
    info_.frames[split] += e.frames;
    check_utterance(e, SpeechSplit(split), int64_t(i - first_[split]), options);
  }
  if (cursor.offset() + 4 != size_) {
    fail("speech feature file '{}' is corrupt: its header describes {} bytes of {} (prepare it "
         "again)",
         path_, cursor.offset() + 4, size_);
  }
}

// The magic, the format version, the recorded size (read through `cursor`) and the CRC32C over
// everything before it.
void SpeechFeatureFile::check_envelope(SpeechByteCursor& cursor) const {
  const std::string& path = path_;
  const uint64_t magic_bytes = std::min<uint64_t>(size_, sizeof kSpeechMagic);
  if (magic_bytes == 0 || std::memcmp(bytes_, kSpeechMagic, magic_bytes) != 0) {
    fail("'{}' is not a pipetrain speech feature file (it does not start with PTSPEECH)", path);
  }
  if (size_ < kFileBytesOffset + 8) {
    fail("speech feature file '{}' is truncated: {} bytes", path, size_);
  }
  cursor.claim(sizeof kSpeechMagic);
  const auto version = cursor.take<uint32_t>();
  if (version != kSpeechFileVersion) {
    fail("speech feature file '{}' has format version {}; this pipetrain reads version {} "
         "(prepare it again)",
         path, version, kSpeechFileVersion);
  }
  const auto file_bytes = cursor.take<uint64_t>();
  if (size_ < file_bytes) {
    fail("speech feature file '{}' is truncated: {} bytes of the {} its header records "
         "(prepare it again)",
         path, size_, file_bytes);
  }
  if (size_ > file_bytes) {
    fail("speech feature file '{}' is corrupt: {} bytes, its header records {} (prepare it again)",
         path, size_, file_bytes);
  }
  uint32_t stored_crc;
  std::memcpy(&stored_crc, bytes_ + size_ - 4, 4);
  const uint32_t crc = crc32c(std::string_view(reinterpret_cast<const char*>(bytes_), size_ - 4));
  if (crc != stored_crc) {
    fail("speech feature file '{}' is corrupt: CRC32C {:08x}, it records {:08x} (prepare it "
         "again)",
         path, crc, stored_crc);
  }
}

// The features' settings, the split counts, the vocabulary and the voices; the utterance count.
uint64_t SpeechFeatureFile::read_header(SpeechByteCursor& cursor) {
  info_.mel_bins = cursor.take<uint32_t>();
  info_.sample_rate = cursor.take<uint32_t>();
  info_.win_length = cursor.take<uint32_t>();
  info_.hop_length = cursor.take<uint32_t>();
  info_.max_frames = cursor.take<uint32_t>();
  const auto vocabulary_size = cursor.take<uint32_t>();
  const auto voice_count = cursor.take<uint32_t>();
  uint64_t total = 0;
  const uint64_t most = size_ / 16;  // an utterance's entry alone takes 16 bytes
  for (size_t s = 0; s < kSpeechSplitCount; ++s) {
    first_[s] = total;
    info_.utterances[s] = cursor.take<uint64_t>();
    // Checked one by one, before the sum: counts that wrap it (a valid CRC over a crafted
    // header) used to pass the total's check and index past the entries (a segfault).
    if (info_.utterances[s] > most - total) {
      fail("speech feature file '{}' is corrupt: its {} split counts {} utterances, more than "
           "{} bytes can hold (prepare it again)", path_, speech_split_name(SpeechSplit(s)),
           info_.utterances[s], size_);
    }
    total += info_.utterances[s];
  }
  for (uint32_t i = 0; i < vocabulary_size; ++i) info_.vocabulary.push_back(cursor.take_string());
  for (uint32_t i = 0; i < voice_count; ++i) info_.voices.push_back(cursor.take_string());
  cursor.align_to_4();
  return total;
}

void SpeechFeatureFile::read_entries(SpeechByteCursor& cursor, uint64_t total) {
  if (total > (size_ - cursor.offset()) / 16) {
    fail("speech feature file '{}' is corrupt: it counts {} utterances (prepare it again)", path_,
         total);
  }
  entries_.resize(total);
  for (Entry& e : entries_) {
    e.frames = cursor.take<uint32_t>();
    e.labels = cursor.take<uint32_t>();
    e.voice = cursor.take<uint32_t>();
    e.text_line = cursor.take<uint32_t>();
  }
}

// An utterance within the reader's maxima, its labels within the vocabulary.
void SpeechFeatureFile::check_utterance(const Entry& e, SpeechSplit split, int64_t index,
                                        const SpeechReadOptions& options) const {
  const auto name = speech_split_name(split);
  if (options.max_frames > 0 && int64_t(e.frames) > options.max_frames) {
    fail("speech feature file '{}': utterance {} of {} has {} frames, more than the maximum "
         "{} (prepare with --max-frames {} to drop longer ones, or raise {})",
         path_, index, name, e.frames, options.max_frames, options.max_frames,
         options.max_frames_setting);
  }
  if (options.max_labels > 0 && int64_t(e.labels) > options.max_labels) {
    fail("speech feature file '{}': utterance {} of {} has {} labels, more than the maximum {} "
         "(raise {})",
         path_, index, name, e.labels, options.max_labels, options.max_labels_setting);
  }
  const auto vocabulary_size = uint32_t(info_.vocabulary.size());
  for (uint32_t j = 0; j < e.labels; ++j) {
    uint32_t label;
    std::memcpy(&label, bytes_ + e.offset + 4 * j, 4);
    if (label == 0 || label >= vocabulary_size) {
      fail("speech feature file '{}': utterance {} of {} has label {}, outside the vocabulary "
           "(ids 1..{}; 0 is the blank)",
           path_, index, name, label, int64_t(vocabulary_size) - 1);
    }
  }
}

const SpeechFeatureFile::Entry& SpeechFeatureFile::entry(SpeechSplit split, int64_t index) const {
  if (index < 0 || index >= count(split)) {
    throw std::out_of_range(fmt::format("speech utterance {} of {} (has {})", index,
                                        speech_split_name(split), count(split)));
  }
  return entries_[first_[size_t(split)] + uint64_t(index)];
}

SpeechUtterance SpeechFeatureFile::utterance(SpeechSplit split, int64_t index) const {
  const Entry& e = entry(split, index);
  SpeechUtterance u;
  u.split = split;
  u.voice = e.voice;
  u.text_line = e.text_line;
  auto* labels = const_cast<unsigned char*>(bytes_ + e.offset);
  u.labels = torch::from_blob(labels, {int64_t(e.labels)}, torch::kInt32).to(torch::kInt64);
  u.features = torch::from_blob(labels + 4 * uint64_t(e.labels),
                                {int64_t(e.frames), int64_t(info_.mel_bins)}, torch::kFloat32)
                   .clone();
  return u;
}

std::vector<SpeechUtterance> SpeechFeatureFile::load_split(SpeechSplit split) const {
  std::vector<SpeechUtterance> utterances;
  utterances.reserve(size_t(count(split)));
  for (int64_t i = 0; i < count(split); ++i) utterances.push_back(utterance(split, i));
  return utterances;
}

}  // namespace pipetrain::speech
