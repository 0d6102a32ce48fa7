#include "train/hf_export.h"

#include <filesystem>
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

void prepare_out_dir(const std::string& dir) {
  if (fs::exists(dir) && !fs::is_directory(dir)) fail("export: --out '{}' is a file, not a folder", dir);
  if (fs::is_directory(dir) && !fs::is_empty(dir)) {
    fail("export: --out '{}' already holds files; name a new or empty folder", dir);
  }
  if (dir.empty()) fail("export: --out must name a folder");
  std::error_code error;
  fs::create_directories(dir, error);
  if (error) fail("export: cannot make the folder --out '{}': {}", dir, error.message());
}

}  // namespace

std::vector<std::string> export_hf(const Config& config, const HfExportOptions& options) {
  const torch::ScalarType dtype = export_dtype(options.dtype, config);
  const nlohmann::json hf_config = hf::config_json_of(config.model, dtype_name(dtype));
  auto whole = make_model(config)->make_whole();
  load_module_entries(*whole, checkpoint_weights(options.checkpoint_dir), options.checkpoint_dir);
  const auto tensors = hf_entries(*whole, config.model, dtype);
  prepare_out_dir(options.out_dir);
  std::vector<std::string> files = {"config.json"};
  write_file_atomically((fs::path(options.out_dir) / "config.json").string(), hf_config.dump(2) + "\n");
  for (auto& file : hf::write_checkpoint(options.out_dir, tensors, options.shard_bytes)) files.push_back(file);
  return files;
}

}  // namespace pipetrain
