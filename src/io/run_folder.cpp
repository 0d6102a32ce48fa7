#include "io/run_folder.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/files.h"

namespace fs = std::filesystem;

namespace pipetrain {
namespace {

// What a run writes at the top of its folder besides config.toml, metrics.jsonl and the
// checkpoint folders: the name `train`'s last line shows ("" for its working files), and the
// name as a regular expression over file names (an atomic write's temp file adds .tmp.PID,
// core/files.h).
struct RunOutput {
  const char* shown;
  const char* pattern;
};
constexpr RunOutput kOtherOutputList[] = {
    {"loss.svg", R"(loss\.svg)"},        {"sample.txt", R"(sample\.txt)"},
    {"summary.json", R"(summary\.json)"}, {"trace.json", R"(trace\.json)"},
    {"timeline.svg", R"(timeline\.svg)"}, {"plan.json", R"(plan\.json)"},
    {"", R"(trace-rank[0-9]+\.json)"},    {"", R"(workers\.pid)"},
    {"", R"(launch-node[0-9]+\.json)"}};
const char* const kMetrics = R"(metrics\.jsonl)";
const char* const kConfig = R"(config\.toml)";

std::string other_outputs_pattern() {
  std::string out;
  for (const auto& output : kOtherOutputList) out += (out.empty() ? "" : "|") + std::string(output.pattern);
  return out;
}
const std::string kOtherOutputs = other_outputs_pattern();
const char* const kCheckpointFiles =
    R"(((model|optimizer|stage[0-9]+|stage[0-9]+\.optimizer|stage[0-9]+\.version[0-9]+)\.safetensors|)"
    R"(checkpoint\.json))";
const char* const kStepFolder = R"(step-[0-9]+)";
const char* const kTempSuffix = R"(\.tmp\.[0-9]+)";

bool matches(const fs::path& path, const std::string& pattern) {
  return std::regex_match(path.filename().string(), std::regex(pattern));
}

// Removes the entries of `dir` whose names match `pattern`; `dir` itself too if that leaves
// it empty and `remove_dir_if_empty`.
void remove_matching(const fs::path& dir, const std::string& pattern, bool remove_dir_if_empty) {
  std::error_code error;
  if (!fs::is_directory(dir, error)) return;
  std::vector<fs::path> doomed;
  for (const auto& entry : fs::directory_iterator(dir, error)) {
    if (matches(entry.path(), pattern)) doomed.push_back(entry.path());
  }
  for (const auto& path : doomed) fs::remove_all(path, error);
  if (remove_dir_if_empty && fs::is_empty(dir, error)) fs::remove(dir, error);
}

std::string with_temp(const std::string& names) { return "(" + names + ")" + kTempSuffix; }

std::string any_of(std::initializer_list<std::string> names) {
  std::string out;
  for (const auto& name : names) out += (out.empty() ? "" : "|") + name;
  return out;
}

}  // namespace

RunFolderLock::RunFolderLock(const std::string& run_dir) {
  std::error_code error;
  fs::create_directories(run_dir, error);
  const std::string path = (fs::path(run_dir) / "run.lock").string();
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) fail("cannot lock run folder '{}': {}", run_dir, std::strerror(errno));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    char holder[32] = {};
    const ssize_t n = ::pread(fd_, holder, sizeof holder - 1, 0);
    ::close(fd_);
    fd_ = -1;
    std::string pid(holder, size_t(std::max<ssize_t>(n, 0)));
    while (!pid.empty() && (pid.back() == '\n' || pid.back() == ' ')) pid.pop_back();
    fail("run folder '{}' is in use: a run (pid {}) is training in it; wait for it to end, or "
         "stop it (SIGINT writes a checkpoint) before resuming", run_dir, pid.empty() ? "?" : pid);
  }
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, pid.data(), pid.size(), 0) != ssize_t(pid.size())) {
    // The lock holds without the pid: only the message of a refused second run loses it.
  }
}

RunFolderLock::RunFolderLock(RunFolderLock&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }

RunFolderLock::~RunFolderLock() {
  if (fd_ >= 0) ::close(fd_);  // releases the flock
}

void refuse_run_folder_in_use(const std::string& run_dir) {
  if (fs::is_directory(run_dir)) RunFolderLock probe(run_dir);
}

RunFolderLock prepare_run_folder(const std::string& run_dir, bool resume, bool overwrite) {
  if (!resume) prepare_run_dir(run_dir, overwrite);  // refuses a folder with a run before locking it
  RunFolderLock lock(run_dir);
  if (overwrite && !resume) remove_previous_run(run_dir);
  remove_interrupted_writes(run_dir);
  return lock;
}

void remove_previous_run(const std::string& run_dir) {
  const fs::path dir(run_dir);
  if (!fs::exists(dir / "metrics.jsonl")) return;  // not a run folder of ours
  const std::string step_entries = std::string(kStepFolder) + R"((\.partial|\.old)?|latest()" +
                                   kTempSuffix + ")?";
  remove_matching(dir / "checkpoints", step_entries, true);
  remove_matching(dir / "checkpoint", std::string("(") + kCheckpointFiles + ")(" + kTempSuffix + ")?", true);
  remove_matching(dir, with_temp(any_of({kMetrics, kOtherOutputs, kConfig})), false);
  remove_matching(dir, kOtherOutputs, false);
  // metrics.jsonl last: until it goes, the folder is still recognised as a run.
  remove_matching(dir, kMetrics, false);
}

void remove_interrupted_writes(const std::string& run_dir) {
  const fs::path dir(run_dir);
  remove_matching(dir / "checkpoints",
                  std::string(kStepFolder) + R"(\.(partial|old)|latest)" + kTempSuffix, false);
  remove_matching(dir / "checkpoint", with_temp(kCheckpointFiles), false);
  remove_matching(dir, with_temp(any_of({kMetrics, kOtherOutputs, kConfig})), false);
}

std::string run_folder_outputs(const std::string& run_dir) {
  std::vector<std::string> shown = {"metrics.jsonl", "config.toml", "checkpoint", "checkpoints"};
  for (const auto& output : kOtherOutputList) {
    if (*output.shown != 0) shown.push_back(output.shown);
  }
  std::string present;
  for (const auto& name : shown) {
    const fs::path path = fs::path(run_dir) / name;
    if (!fs::exists(path)) continue;
    present += (present.empty() ? "" : ", ") + name + (fs::is_directory(path) ? "/" : "");
  }
  return present;
}

}  // namespace pipetrain
