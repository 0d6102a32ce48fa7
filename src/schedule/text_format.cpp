#include "schedule/text_format.h"

#include <charconv>
#include <sstream>
#include <string_view>

#include "core/error.h"

namespace pipetrain::schedule {
namespace {

constexpr int kMaxWorkers = 4096;   // limits keep a hostile file from allocating the machine
constexpr int kMaxCount = 1 << 20;
constexpr const char* kHeader = "worker,kind,iteration,microbatch,slice,chunk,version,peer";

bool parse_int(std::string_view text, int* value) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t' || text.back() == '\r'))
    text.remove_suffix(1);
  if (text.empty()) return false;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), *value);
  return error == std::errc() && end == text.data() + text.size();
}

std::vector<std::string_view> split(std::string_view line, char separator) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (true) {
    size_t at = line.find(separator, start);
    parts.push_back(line.substr(start, at == std::string_view::npos ? at : at - start));
    if (at == std::string_view::npos) return parts;
    start = at + 1;
  }
}

void parse_metadata(std::string_view line, int number, Schedule& s, bool& have_sizes) {
  for (std::string_view field : split(line, ' ')) {
    if (field.empty() || field == "pipetrain-schedule" || field == "v1") continue;
    size_t eq = field.find('=');
    if (eq == std::string_view::npos) fail("line {}: expected key=value, got '{}'", number, field);
    std::string_view key = field.substr(0, eq), value = field.substr(eq + 1);
    if (key == "name") {
      s.name = std::string(value);
      continue;
    }
    if (key == "policy") {
      if (!parse_policy(value, &s.policy.kind))
        fail("line {}: unknown weight policy '{}'", number, value);
      continue;
    }
    if (key == "placement") {
      if (!parse_placement(value, &s.placement)) fail("line {}: unknown placement '{}'", number, value);
      continue;
    }
    int n = 0;
    if (!parse_int(value, &n)) fail("line {}: '{}' needs an integer, got '{}'", number, key, value);
    int limit = key == "workers" ? kMaxWorkers : kMaxCount;
    if (n < (key == "predict_backward" ? 0 : 1) || n > limit)
      fail("line {}: {}={} out of range", number, key, n);
    if (key == "workers") s.workers = n, have_sizes = true;
    else if (key == "chunks") s.chunks = n;
    else if (key == "microbatches") s.microbatches = n;
    else if (key == "slices") s.slices = n;
    else if (key == "iterations") s.iterations = n;
    else if (key == "dp_width") s.dp_width = n;
    else if (key == "predict_backward") s.policy.predict_backward = n != 0;
    else fail("line {}: unknown key '{}'", number, key);
  }
}

}  // namespace

std::string action_token(const Schedule& s, int worker, const Action& a, bool show_versions) {
  std::string token = std::to_string(s.stage_of(worker, a.chunk));
  token += kind_token(a.kind);
  if (a.kind == ActionKind::OptimizerStep) return token + std::to_string(a.version);
  if (a.kind == ActionKind::AllReduceGrads) return token;
  token += std::to_string(s.global_microbatch(a));
  if (s.slices > 1) token += "." + std::to_string(a.slice);
  if (show_versions && is_compute(a.kind)) token += "v" + std::to_string(a.version);
  return token;
}

std::string format_grid(const Schedule& s, const GridOptions& options) {
  bool all = options.show_transfers || options.mark_worker >= 0;
  std::string out;
  for (int w = 0; w < s.workers && w < static_cast<int>(s.actions.size()); ++w) {
    out += "w" + std::to_string(w) + ":";
    for (size_t k = 0; k < s.actions[w].size(); ++k) {
      const Action& a = s.actions[w][k];
      if (!all && !is_compute(a.kind)) continue;
      bool marked = w == options.mark_worker && static_cast<int>(k) == options.mark_position;
      std::string token = action_token(s, w, a, options.show_versions);
      out += marked ? " >>" + token + "<<" : " " + token;
    }
    out += "\n";
  }
  return out;
}

std::string to_csv(const Schedule& s) {
  std::ostringstream out;
  out << "# pipetrain-schedule v1\n";
  out << "# name=" << s.name << " workers=" << s.workers << " chunks=" << s.chunks
      << " microbatches=" << s.microbatches << " slices=" << s.slices
      << " iterations=" << s.iterations << " dp_width=" << s.dp_width << "\n";
  out << "# policy=" << policy_name(s.policy.kind)
      << " predict_backward=" << (s.policy.predict_backward ? 1 : 0)
      << " placement=" << placement_name(s.placement) << "\n";
  out << kHeader << "\n";
  for (int w = 0; w < s.workers; ++w) {
    for (const Action& a : s.actions[w]) {
      out << w << ',' << kind_name(a.kind) << ',' << a.iteration << ',' << a.microbatch << ','
          << a.slice << ',' << a.chunk << ',' << a.version << ',' << a.peer << '\n';
    }
  }
  return out.str();
}

Schedule parse_csv(const std::string& text) {
  Schedule s;
  s.name = "csv";
  bool have_sizes = false, have_header = false;
  int number = 0;
  long long total = 0;
  for (std::string_view line : split(text, '\n')) {
    ++number;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) continue;
    if (line.front() == '#') {
      if (have_header) fail("line {}: metadata after the header", number);
      parse_metadata(line.substr(1), number, s, have_sizes);
      continue;
    }
    if (!have_header) {
      if (line != kHeader) fail("line {}: expected the header '{}'", number, kHeader);
      if (!have_sizes) fail("line {}: metadata 'workers=' missing before the header", number);
      s.actions.assign(s.workers, {});
      have_header = true;
      continue;
    }
    auto fields = split(line, ',');
    if (fields.size() != 8) fail("line {}: expected 8 fields, got {}", number, fields.size());
    int worker = 0;
    if (!parse_int(fields[0], &worker) || worker < 0 || worker >= s.workers)
      fail("line {}: worker '{}' is not in 0..{}", number, fields[0], s.workers - 1);
    Action a;
    if (!parse_kind(fields[1], &a.kind)) fail("line {}: unknown action kind '{}'", number, fields[1]);
    int* targets[] = {&a.iteration, &a.microbatch, &a.slice, &a.chunk, &a.version, &a.peer};
    const char* names[] = {"iteration", "microbatch", "slice", "chunk", "version", "peer"};
    for (int i = 0; i < 6; ++i) {
      if (!parse_int(fields[2 + i], targets[i]) || *targets[i] < -1 || *targets[i] > kMaxCount)
        fail("line {}: {} '{}' is not an integer in -1..{}", number, names[i], fields[2 + i],
             kMaxCount);
    }
    if (++total > 4LL * kMaxCount) fail("line {}: too many actions", number);
    s.actions[worker].push_back(a);
  }
  if (!have_header) fail("line {}: no header line '{}' found", number, kHeader);
  return s;
}

}  // namespace pipetrain::schedule
