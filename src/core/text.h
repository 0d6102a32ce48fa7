#pragma once
// Small string helpers shared by config parsing, logging and reports.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace pipetrain {

std::string join(const std::vector<std::string>& parts, const std::string& separator);
std::vector<std::string> split(const std::string& text, char separator);

// Strict parses: the whole string must be a plain decimal number ("-12", "2.5e-3"; no '+',
// blanks, hex, inf or nan), in range.
std::optional<int64_t> parse_int(const std::string& text);
std::optional<double> parse_double(const std::string& text);

// The candidate with the smallest edit distance, if it is close enough to be a likely typo.
std::string closest_match(const std::string& word, const std::vector<std::string>& candidates);

std::string format_toml_double(double value);  // always has a '.' or exponent: "3.0", "0.0003"
std::string toml_quote(const std::string& value);
std::string format_duration(double seconds);    // "42s", "3m05s", "1h02m"
std::string format_count(double value);         // "950", "12.3k", "4.56M"
std::string format_bytes(double bytes);         // "512 B", "3.2 MiB"
// "2GiB", "1.5 GB", "800MiB", "1048576" (bytes): nullopt for anything else or a negative size.
std::optional<double> parse_bytes(const std::string& text);

// UTF-8, the one rule the config reader and tokenize share: the length of the sequence a lead
// byte starts (0: no sequence starts with it), and whether `length` bytes at `bytes` (all there)
// are that sequence (continuation bytes 10xxxxxx).
inline size_t utf8_sequence_length(unsigned char lead) {
  return lead < 0x80 ? 1 : (lead >> 5) == 0x6 ? 2 : (lead >> 4) == 0xE ? 3 : (lead >> 3) == 0x1E ? 4 : 0;
}
inline bool utf8_sequence_valid(const char* bytes, size_t length) {
  if (length == 0) return false;
  for (size_t k = 1; k < length; ++k) {
    if ((static_cast<unsigned char>(bytes[k]) & 0xC0) != 0x80) return false;
  }
  return true;
}

}  // namespace pipetrain
