#include "data/idx_file.h"

#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <memory>

#include "core/error.h"

namespace pipetrain {
namespace {

// The whole file's bytes, decompressed when it is gzip (zlib reads plain files unchanged).
std::vector<uint8_t> read_maybe_gzipped(const std::string& path) {
  if (!std::filesystem::is_regular_file(path)) fail("IDX file {}: not found", path);
  std::unique_ptr<gzFile_s, int (*)(gzFile)> file(gzopen(path.c_str(), "rb"), gzclose);
  if (!file) fail("IDX file {}: cannot be opened", path);
  std::vector<uint8_t> bytes;
  std::vector<uint8_t> chunk(1 << 20);
  for (;;) {
    const int got = gzread(file.get(), chunk.data(), unsigned(chunk.size()));
    if (got < 0) {
      int code = 0;
      fail("IDX file {}: corrupt gzip data ({})", path, gzerror(file.get(), &code));
    }
    if (got == 0) break;
    bytes.insert(bytes.end(), chunk.begin(), chunk.begin() + got);
  }
  return bytes;
}

}  // namespace

IdxArray read_idx(const std::string& path) {
  const std::vector<uint8_t> bytes = read_maybe_gzipped(path);
  if (bytes.size() < 4) fail("IDX file {}: truncated header ({} bytes)", path, bytes.size());
  if (bytes[0] != 0 || bytes[1] != 0) {
    fail("IDX file {}: wrong magic {:02x}{:02x}{:02x}{:02x} (expected 0000 then type and rank)", path,
         bytes[0], bytes[1], bytes[2], bytes[3]);
  }
  if (bytes[2] != 0x08) fail("IDX file {}: element type 0x{:02x}; only unsigned bytes (0x08) are read", path, bytes[2]);
  const int rank = bytes[3];
  if (rank < 1 || rank > 4) fail("IDX file {}: {} dimensions (1 to 4 expected)", path, rank);
  const size_t header = 4 + 4 * size_t(rank);
  if (bytes.size() < header) fail("IDX file {}: truncated header ({} bytes)", path, bytes.size());
  IdxArray array;
  size_t count = 1;
  for (int d = 0; d < rank; ++d) {
    const uint8_t* p = bytes.data() + 4 + 4 * d;
    const uint32_t dim = uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | p[3];
    if (dim == 0 || dim > (1u << 28)) fail("IDX file {}: dimension {} is {}", path, d, dim);
    array.dims.push_back(int64_t(dim));
    count *= dim;
  }
  if (bytes.size() - header != count) {
    fail("IDX file {}: {} element bytes for dimensions that need {} ({})", path, bytes.size() - header,
         count, bytes.size() - header < count ? "truncated" : "trailing bytes");
  }
  array.values.assign(bytes.begin() + std::ptrdiff_t(header), bytes.end());
  return array;
}

void write_idx(const std::string& path, const IdxArray& array) {
  std::ofstream out(path, std::ios::binary);
  const uint8_t magic[4] = {0, 0, 0x08, uint8_t(array.dims.size())};
  out.write(reinterpret_cast<const char*>(magic), 4);
  for (int64_t dim : array.dims) {
    const uint8_t be[4] = {uint8_t(dim >> 24), uint8_t(dim >> 16), uint8_t(dim >> 8), uint8_t(dim)};
    out.write(reinterpret_cast<const char*>(be), 4);
  }
  out.write(reinterpret_cast<const char*>(array.values.data()), std::streamsize(array.values.size()));
  if (!out) fail("cannot write {}", path);
}

}  // namespace pipetrain
