#pragma once
// metrics.jsonl: one JSON object per line, flushed as written so a crash loses nothing.
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace pipetrain {

class MetricsWriter {
 public:
  // A new run starts the file afresh; a resumed run appends. UserError if not writable.
  MetricsWriter(const std::string& path, bool append);
  ~MetricsWriter();
  MetricsWriter(const MetricsWriter&) = delete;
  MetricsWriter& operator=(const MetricsWriter&) = delete;
  void write(const nlohmann::json& record);

 private:
  std::string path_;
  std::FILE* file_;
};

std::vector<nlohmann::json> read_metrics(const std::string& path);

}  // namespace pipetrain
