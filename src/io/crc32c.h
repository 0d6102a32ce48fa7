#pragma once
// CRC32C (Castagnoli, as in iSCSI, ext4 and LevelDB): the checksum each checkpoint file carries
// in checkpoint.json, so a flipped bit inside tensor data is refused instead of resumed.
#include <cstdint>
#include <string>
#include <string_view>

namespace pipetrain {

uint32_t crc32c(std::string_view bytes, uint32_t crc = 0);  // `crc`: of the bytes before
std::string crc32c_hex(std::string_view bytes);             // 8 lowercase hex digits
std::string format_crc32c(uint32_t crc);                    // as crc32c_hex writes it

}  // namespace pipetrain
