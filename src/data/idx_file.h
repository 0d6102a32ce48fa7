#pragma once
// IDX files (the MNIST / Fashion-MNIST format), plain or gzip-compressed: a 4-byte magic
// (0, 0, element type, dimension count), the dimensions as big-endian int32, then the elements.
// Only unsigned bytes (type 0x08) are read: images and labels both use them.
#include <cstdint>
#include <string>
#include <vector>

namespace pipetrain {

struct IdxArray {
  std::vector<int64_t> dims;
  std::vector<uint8_t> values;  // row-major, product(dims) elements
};

// UserError, one line naming the file, on a missing, corrupt (gzip) or truncated file, a wrong
// magic, element type or dimension count, or bytes after the last element.
IdxArray read_idx(const std::string& path);
// Writes `array` as a plain (uncompressed) IDX file: tests, and data users make themselves.
void write_idx(const std::string& path, const IdxArray& array);

}  // namespace pipetrain
