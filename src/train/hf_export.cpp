#include "train/hf_export.h"

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <utility>

#include "core/error.h"
#include "core/files.h"
#include "hf/hf_checkpoint.h"
#include "hf/hf_config.h"
#include "model/hf_weights.h"
#include "model/registry.h"
#include "model/state_io.h"
#include "train/checkpoint_evaluation.h"

namespace pipetrain {
namespace {

namespace fs = std::filesystem;

// The dtypes an export writes, by transformers' names (config.json "dtype", --dtype).
constexpr std::pair<const char*, torch::ScalarType> kExportDtypes[] = {
    {"float32", torch::kFloat32}, {"float64", torch::kFloat64},
    {"bfloat16", torch::kBFloat16}, {"float16", torch::kFloat16}};

torch::ScalarType export_dtype(const std::string& name, const Config& config) {
  if (name.empty()) return compute_dtype(config.model);  // the weights' own (bfloat16 runs: float32)
  for (const auto& [known, dtype] : kExportDtypes) {
    if (name == known) return dtype;
  }
  fail("export: --dtype must be float32, float64, bfloat16 or float16, got '{}'", name);
}

std::string dtype_name(torch::ScalarType dtype) {
  for (const auto& [name, known] : kExportDtypes) {
    if (dtype == known) return name;
  }
  throw std::logic_error("hf export: no transformers name for this dtype");
}

// An export is written whole or not at all: into OUT.partial (marked as an export's), renamed
// to OUT when complete. An interrupted export leaves OUT as it was and its OUT.partial, which
// the next export into OUT clears.
constexpr const char* kPartialMarker = ".pipetrain-export-in-progress";

std::string partial_of(const std::string& dir) { return dir + ".partial"; }

void require_out_dir(const std::string& dir) {
  if (dir.empty()) fail("export: --out must name a folder");
  if (fs::exists(dir) && !fs::is_directory(dir)) fail("export: --out '{}' is a file, not a folder", dir);
  if (fs::is_directory(dir) && !fs::is_empty(dir)) {
    fail("export: --out '{}' already holds files; name a new or empty folder", dir);
  }
  const fs::path partial = partial_of(dir);
  if (fs::exists(partial) && !fs::exists(partial / kPartialMarker)) {
    fail("export: '{}' exists and is not an interrupted export's; move it away", partial.string());
  }
}

fs::path start_partial_dir(const std::string& dir) {
  const fs::path partial = partial_of(dir);
  std::error_code error;
  fs::remove_all(partial, error);  // an interrupted export's (require_out_dir checked the marker)
  fs::create_directories(partial, error);
  if (error) fail("export: cannot make the folder '{}': {}", partial.string(), error.message());
  std::ofstream(partial / kPartialMarker) << "pipetrain export in progress\n";
  return partial;
}

void finish_partial_dir(const fs::path& partial, const std::string& dir) {
  std::error_code error;
  fs::remove(partial / kPartialMarker, error);
  if (fs::is_directory(dir)) fs::remove(dir, error);  // empty (require_out_dir)
  fs::rename(partial, dir, error);
  if (error) fail("export: cannot rename '{}' to '{}': {}", partial.string(), dir, error.message());
}

// The tokenizer and generation files of the checkpoint the run started from, copied into
// `partial`; the names copied.
std::vector<std::string> copy_companion_files(const std::string& started_from, const fs::path& partial) {
  std::vector<std::string> copied;
  if (started_from.empty()) return copied;
  for (const std::string& name : hf::companion_files()) {
    const fs::path source = fs::path(started_from) / name;
    if (!fs::is_regular_file(source)) continue;
    std::error_code error;
    fs::copy_file(source, partial / name, fs::copy_options::overwrite_existing, error);
    if (error) fail("export: cannot copy '{}' into the export: {}", source.string(), error.message());
    copied.push_back(name);
  }
  return copied;
}

}  // namespace

std::vector<std::string> export_hf(const Config& config, const HfExportOptions& options) {
  require_out_dir(options.out_dir);  // before the checkpoint is read
  require_checkpoint_of_model(config, options.checkpoint_dir);
  const torch::ScalarType dtype = export_dtype(options.dtype, config);
  const nlohmann::json hf_config = hf::config_json_of(config.model, dtype_name(dtype), options.started_from);
  auto whole = make_model(config)->make_whole();
  load_module_entries(*whole, checkpoint_weights(options.checkpoint_dir), options.checkpoint_dir);
  const auto tensors = hf_entries(*whole, config.model, dtype);
  const fs::path partial = start_partial_dir(options.out_dir);
  std::vector<std::string> files = {"config.json"};
  write_file_atomically((partial / "config.json").string(), hf_config.dump(2) + "\n");
  for (auto& file : hf::write_checkpoint(partial.string(), tensors, options.shard_bytes)) files.push_back(file);
  for (auto& file : copy_companion_files(options.started_from, partial)) files.push_back(file);
  finish_partial_dir(partial, options.out_dir);
  return files;
}

}  // namespace pipetrain
