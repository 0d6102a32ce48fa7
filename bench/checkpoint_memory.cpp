// Resident memory of writing one worker's checkpoint: the weights and AdamW state of a GPT
// stage (default 12 blocks, d_model 576: 48M parameters, files of 183 + 367 MiB), written the
// way checkpoints are written now (save_module_state: each file streamed from the tensors'
// own memory) and the way they were before (every tensor copied into an entry, then the whole
// file encoded into one string, then written).
//
//   checkpoint_memory [--layers L] [--d-model D] [--dir FOLDER]
//
// Each path runs in a fresh child process; a last one resumes from the files (reading, then
// loading them into a fresh model and optimizer). The child's high-water mark (VmHWM, which
// getrusage's ru_maxrss reports) is reset (/proc/self/clear_refs) just before the save, so the
// peak is the save's, not the optimizer step's that made the state.
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include <fmt/format.h>

#include "core/files.h"
#include "io/checkpoint_dir.h"
#include "io/crc32c.h"
#include "model/registry.h"
#include "model/state_io.h"
#include "peak_memory_child.h"
#include "train/checkpoint.h"
#include "train/optim.h"

namespace {

using namespace pipetrain;

double status_mb(const char* field) {  // a "VmRSS:   1234 kB" line of /proc/self/status
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind(field, 0) == 0) return std::stod(line.substr(std::strlen(field))) / 1024.0;
  }
  return -1;
}

double ru_maxrss_mb() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return double(usage.ru_maxrss) / 1024.0;  // KiB on Linux
}

bool reset_peak() {
  std::ofstream clear("/proc/self/clear_refs");
  clear << "5";
  return bool(clear.flush());
}

// The writer before streaming: entries copy every tensor, the encoder copies them all again,
// one file after the other. (Its encoder grew the string as it went; encode_safetensors now
// reserves it once, so this path's peak is, if anything, lower than the old writer's.)
void save_with_whole_file_copies(const std::string& dir, torch::nn::Module& module,
                                 torch::optim::Optimizer& optimizer) {
  {
    const std::string weights = encode_safetensors(module_entries(module));
    write_file_atomically(dir + "/model.safetensors", weights);
    crc32c_hex(weights);
  }
  std::vector<TensorEntry> state;
  for (const auto& [name, tensor] : optimizer_state_tensors(optimizer, module)) {
    state.push_back(to_entry(name, tensor));
  }
  const std::string encoded = encode_safetensors(state);
  write_file_atomically(dir + "/optimizer.safetensors", encoded);
  crc32c_hex(encoded);
}

// "parameters resident_before peak_during ru_maxrss_after".
std::string measure(const Config& config, const std::string& dir, bool streamed) {
  torch::set_num_threads(1);
  torch::manual_seed(0);
  const auto model = make_model(config);
  auto module = model->make_whole();
  const auto named = named_tensors(*module);
  auto optimizer = make_optimizer(named, config.train, roles_of(*model));
  int64_t parameters = 0;
  for (const auto& [name, p] : named) {
    parameters += p.numel();
    p.mutable_grad() = torch::full_like(p, 1e-3);
  }
  optimizer->step();  // AdamW's moments exist
  for (const auto& [name, p] : named) p.mutable_grad() = torch::Tensor();
  const double before = status_mb("VmRSS:");
  if (!reset_peak()) return "cannot reset the peak (/proc/self/clear_refs)";
  if (streamed) {
    save_module_state(dir, "model.safetensors", "optimizer.safetensors", *module, *optimizer);
  } else {
    save_with_whole_file_copies(dir, *module, *optimizer);
  }
  return fmt::format("{} {:.0f} {:.0f} {:.0f}", parameters, before, status_mb("VmHWM:"), ru_maxrss_mb());
}

// A resume of those files into a fresh model and optimizer, in two phases: reading them (as
// read_checkpoint_tensors: structure and CRC32C checked, every tensor decoded into an entry),
// then loading the entries (load_module_state). Per phase "resident_before peak resident_after".
std::string measure_resume(const Config& config, const std::string& dir) {
  torch::set_num_threads(1);
  const auto model = make_model(config);
  auto module = model->make_whole();
  auto optimizer = make_optimizer(named_tensors(*module), config.train, roles_of(*model));
  CheckpointInfo info;
  for (const char* file : {"model.safetensors", "optimizer.safetensors"}) {
    info.crc32c[file] = crc32c_hex(read_file(dir + "/" + file));
  }
  std::string report;
  const auto phase = [&](const std::function<void()>& work) {
    const double before = status_mb("VmRSS:");
    reset_peak();
    work();
    report += fmt::format("{:.0f} {:.0f} {:.0f} ", before, status_mb("VmHWM:"), status_mb("VmRSS:"));
  };
  CheckpointTensors tensors;
  phase([&] {
    tensors.weights = read_checkpoint_file(dir, "model.safetensors", info);
    tensors.optimizer = read_checkpoint_file(dir, "optimizer.safetensors", info);
  });
  phase([&] { load_module_state(tensors, dir, *module, *optimizer, model->shared_parameters()); });
  return report;
}

}  // namespace

int main(int argc, char** argv) {
  Config config;
  config.model.layers = 12;
  config.model.d_model = 576;
  config.model.heads = 9;
  config.train.optimizer = "adamw";
  std::string dir = (std::filesystem::temp_directory_path() / "pipetrain_checkpoint_memory").string();
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--layers")) config.model.layers = std::atol(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--d-model")) config.model.d_model = std::atol(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--dir")) dir = argv[i + 1];
    else {
      std::fprintf(stderr, "usage: %s [--layers L] [--d-model D] [--dir FOLDER]\n", argv[0]);
      return 2;
    }
  }
  config.model.heads = config.model.d_model % 64 == 0 ? config.model.d_model / 64 : 1;
  std::filesystem::create_directories(dir);
  std::printf("| writer | parameters | files (MiB) | resident before save (MiB) | peak during save (MiB) | "
              "over resident (MiB) | ru_maxrss after (MiB) |\n|---|---|---|---|---|---|---|\n");
  for (const bool streamed : {false, true}) {
    const auto result = pipetrain::bench::run_in_child([&] { return measure(config, dir, streamed); });
    long long parameters = 0;
    double before = 0, peak = 0, maxrss = 0;
    if (!result.ok || std::sscanf(result.report.c_str(), "%lld %lf %lf %lf", &parameters, &before,
                                  &peak, &maxrss) != 4) {
      std::fprintf(stderr, "error: %s\n", result.report.c_str());
      return 1;
    }
    double files = 0;
    for (const char* file : {"/model.safetensors", "/optimizer.safetensors"}) {
      files += double(std::filesystem::file_size(dir + file)) / (1 << 20);
    }
    std::printf("| %s | %lld | %.0f | %.0f | %.0f | %.0f | %.0f |\n",
                streamed ? "streamed (now)" : "whole-file copies (before)", parameters, files,
                before, peak, peak - before, maxrss);
  }
  const auto resume = pipetrain::bench::run_in_child([&] { return measure_resume(config, dir); });
  double v[6] = {};
  if (!resume.ok || std::sscanf(resume.report.c_str(), "%lf %lf %lf %lf %lf %lf", &v[0], &v[1], &v[2],
                                &v[3], &v[4], &v[5]) != 6) {
    std::fprintf(stderr, "error: %s\n", resume.report.c_str());
    return 1;
  }
  std::printf("\n| resume phase | resident before (MiB) | peak (MiB) | resident after (MiB) | "
              "peak over resident after (MiB) |\n|---|---|---|---|---|\n");
  const char* phases[] = {"read both files (read_checkpoint_file)", "load them (load_module_state)"};
  for (int p = 0; p < 2; ++p) {
    const double* x = v + 3 * p;
    std::printf("| %s | %.0f | %.0f | %.0f | %.0f |\n", phases[p], x[0], x[1], x[2], x[1] - x[2]);
  }
  std::filesystem::remove_all(dir);
  return 0;
}
