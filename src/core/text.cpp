#include "core/text.h"

#include <utility>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>

#include <fmt/format.h>

namespace pipetrain {

std::string join(const std::vector<std::string>& parts, const std::string& separator) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i > 0) out += separator;
    out += parts[i];
  }
  return out;
}

std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> parts(1);
  for (char c : text) {
    if (c == separator) {
      parts.emplace_back();
    } else {
      parts.back() += c;
    }
  }
  return parts;
}

namespace {
size_t digits_from(const std::string& text, size_t at) {
  size_t end = at;
  while (end < text.size() && text[end] >= '0' && text[end] <= '9') ++end;
  return end - at;
}

// A plain decimal: [-]digits, or with a fraction and exponent [-]digits[.digits][e[+-]digits]
// (".5" and "5." too). No sign '+', no blanks, no hex, inf or nan, which strtod would take.
bool is_plain_decimal(const std::string& text, bool integer) {
  size_t at = text.rfind('-', 0) == 0 ? 1 : 0;
  const size_t whole = digits_from(text, at);
  at += whole;
  if (integer) return whole > 0 && at == text.size();
  size_t fraction = 0;
  if (at < text.size() && text[at] == '.') fraction = digits_from(text, ++at), at += fraction;
  if (whole + fraction == 0) return false;
  if (at < text.size() && (text[at] == 'e' || text[at] == 'E')) {
    ++at;
    if (at < text.size() && (text[at] == '+' || text[at] == '-')) ++at;
    const size_t exponent = digits_from(text, at);
    if (exponent == 0) return false;
    at += exponent;
  }
  return at == text.size();
}
}  // namespace

std::optional<int64_t> parse_int(const std::string& text) {
  if (!is_plain_decimal(text, /*integer=*/true)) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  const long long value = std::strtoll(text.c_str(), &end, 10);
  if (errno != 0 || end != text.c_str() + text.size()) return std::nullopt;
  return static_cast<int64_t>(value);
}

std::optional<double> parse_double(const std::string& text) {
  if (!is_plain_decimal(text, /*integer=*/false)) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (errno != 0 || end != text.c_str() + text.size() || !std::isfinite(value)) {
    return std::nullopt;
  }
  return value;
}

namespace {
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] != b[j - 1] ? 1 : 0)});
      diagonal = above;
    }
  }
  return row[b.size()];
}
}  // namespace

std::string closest_match(const std::string& word, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_distance = word.size() / 3 + 2;  // farther than this is not a typo
  for (const auto& candidate : candidates) {
    const size_t distance = edit_distance(word, candidate);
    if (distance < best_distance) {
      best_distance = distance;
      best = candidate;
    }
  }
  return best;
}

std::string format_toml_double(double value) {
  std::string text = fmt::format("{}", value);  // shortest round-trip form
  if (text.find_first_of(".eEn") == std::string::npos) text += ".0";
  return text;
}

std::string toml_quote(const std::string& value) {
  std::string out = "\"";
  for (char c : value) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += fmt::format("\\u{:04x}", static_cast<int>(c));
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const auto total = static_cast<int64_t>(std::llround(seconds));
  if (total < 60) return fmt::format("{}s", total);
  if (total < 3600) return fmt::format("{}m{:02d}s", total / 60, total % 60);
  return fmt::format("{}h{:02d}m", total / 3600, (total % 3600) / 60);
}

std::string format_count(double value) {
  if (value < 1e3) return fmt::format("{:.0f}", value);
  if (value < 1e6) return fmt::format("{:.1f}k", value / 1e3);
  if (value < 1e9) return fmt::format("{:.2f}M", value / 1e6);
  return fmt::format("{:.2f}G", value / 1e9);
}

std::string format_bytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB", "ZiB", "YiB"};
  int unit = 0;
  while (bytes >= 1024 && unit < 8) {
    bytes /= 1024;
    ++unit;
  }
  return unit == 0 ? fmt::format("{:.0f} B", bytes) : fmt::format("{:.1f} {}", bytes, units[unit]);
}

std::optional<double> parse_bytes(const std::string& text) {
  static const std::pair<const char*, double> units[] = {
      {"KiB", 1024.0}, {"MiB", 1024.0 * 1024}, {"GiB", 1024.0 * 1024 * 1024},
      {"TiB", 1024.0 * 1024 * 1024 * 1024}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
      {"B", 1.0}};
  const auto strip = [](const std::string& t) {
    const auto first = t.find_first_not_of(" \t"), last = t.find_last_not_of(" \t");
    return first == std::string::npos ? std::string() : t.substr(first, last - first + 1);
  };
  std::string number = strip(text);
  double scale = 1;
  for (const auto& [suffix, factor] : units) {
    const std::string unit(suffix);
    if (number.size() > unit.size() && number.compare(number.size() - unit.size(), unit.size(), unit) == 0) {
      number = strip(number.substr(0, number.size() - unit.size()));
      scale = factor;
      break;
    }
  }
  const auto value = parse_double(number);
  if (!value || *value < 0) return std::nullopt;
  return *value * scale;
}

}  // namespace pipetrain
