#include "model/tensor_file_batch.h"

#include <map>

#include "core/error.h"
#include "core/files.h"
#include "model/registry.h"
#include "model/state_io.h"

namespace pipetrain {
namespace {

class TensorFileBatches : public BatchSource {
 public:
  TensorFileBatches(const std::string& path, torch::ScalarType dtype) : path_(path) {
    std::map<std::string, torch::Tensor> named;
    for (const auto& entry : decode_safetensors(read_regular_file(path, "data file"), path)) {
      torch::Tensor tensor = from_entry(entry);
      named[entry.name] = tensor.is_floating_point() ? tensor.to(dtype) : tensor;
    }
    const auto take = [&](const std::string& name) {
      const auto found = named.find(name);
      if (found == named.end() || found->second.dim() == 0 || found->second.size(0) == 0) {
        fail("data.path {}: no tensor '{}' with rows (data.format = \"safetensors\" needs "
             "train_inputs, train_labels, val_inputs, val_labels)", path, name);
      }
      return found->second;
    };
    train_ = {take("train_inputs"), take("train_labels")};
    val_ = {take("val_inputs"), take("val_labels")};
    for (const Microbatch* split : {&train_, &val_}) {
      if (split->inputs.size(0) != split->labels.size(0)) {
        fail("data.path {}: inputs and labels have different row counts ({} and {})", path,
             split->inputs.size(0), split->labels.size(0));
      }
    }
  }
  Microbatch train_batch(uint64_t, int64_t step, int64_t rows) const override {
    return rows_from(train_, step * rows, rows);
  }
  Microbatch val_batch(int64_t index, int64_t rows) const override {
    return rows_from(val_, index * rows, rows);
  }
  std::string describe() const override {
    return fmt::format("{}: {} training rows, {} validation rows", path_, train_.inputs.size(0),
                       val_.inputs.size(0));
  }
  int64_t tokens_per_row() const override { return 1; }

 private:
  // Rows first .. first + count - 1, wrapping around the split.
  static Microbatch rows_from(const Microbatch& split, int64_t first, int64_t count) {
    const auto index = torch::arange(first, first + count, torch::kInt64).remainder(split.inputs.size(0));
    return {split.inputs.index_select(0, index), split.labels.index_select(0, index)};
  }
  std::string path_;
  Microbatch train_, val_;
};

}  // namespace

std::shared_ptr<const BatchSource> make_tensor_file_batches(const Config& config,
                                                            const std::string& data_root) {
  return std::make_shared<TensorFileBatches>(resolve_existing_path(config.data.path, data_root),
                                             compute_dtype(config.model));
}

}  // namespace pipetrain
