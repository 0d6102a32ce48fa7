#include "io/metrics.h"

#include <cerrno>
#include <cstring>
#include <fstream>

#include "core/error.h"

namespace pipetrain {

MetricsWriter::MetricsWriter(const std::string& path, bool append)
    : path_(path), file_(std::fopen(path.c_str(), append ? "a" : "w")) {
  if (file_ == nullptr) fail("cannot write metrics to '{}': {}", path, std::strerror(errno));
}

MetricsWriter::~MetricsWriter() { std::fclose(file_); }

void MetricsWriter::write(const nlohmann::json& record) {
  const std::string line = record.dump() + "\n";
  if (std::fwrite(line.data(), 1, line.size(), file_) != line.size() || std::fflush(file_) != 0) {
    fail("cannot write metrics to '{}': {}", path_, std::strerror(errno));
  }
}

std::vector<nlohmann::json> read_metrics(const std::string& path) {
  std::ifstream in(path);
  if (!in) fail("cannot read metrics '{}'", path);
  std::vector<nlohmann::json> records;
  std::string line;
  int line_number = 0;
  while (std::getline(in, line)) {
    ++line_number;
    if (line.empty()) continue;
    try {
      records.push_back(nlohmann::json::parse(line));
    } catch (const nlohmann::json::exception&) {
      fail("{}:{}: not a JSON object", path, line_number);
    }
  }
  return records;
}

}  // namespace pipetrain
