#include "model/model.h"

#include "model/batch_source.h"

namespace pipetrain {

std::vector<std::string> secondary_copies(const Model& model) {
  std::vector<std::string> names;
  for (const auto& shared : model.shared_parameters()) {
    for (size_t i = 1; i < shared.copies.size(); ++i) names.push_back(shared.copies[i].name);
  }
  return names;
}

Microbatch rows_of(const Microbatch& batch, int64_t first, int64_t count) {
  return {batch.inputs.narrow(0, first, count), batch.labels.narrow(0, first, count)};
}

int64_t parameter_count(torch::nn::Module& module) {
  int64_t count = 0;
  for (const auto& p : module.parameters()) count += p.numel();
  return count;
}

}  // namespace pipetrain
