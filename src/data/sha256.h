#pragma once
// SHA-256 (FIPS 180-4), to name a tokenizer model by its content: the digest equals what
// `sha256sum tok.model` prints, so a user can check a token folder's record by hand.
#include <string>
#include <string_view>

namespace pipetrain {

std::string sha256_hex(std::string_view bytes);           // 64 lowercase hex digits
std::string sha256_hex_of_file(const std::string& path);  // UserError if unreadable

}  // namespace pipetrain
