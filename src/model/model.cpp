#include "model/model.h"

namespace pipetrain {

std::vector<std::string> secondary_copies(const Model& model) {
  std::vector<std::string> names;
  for (const auto& shared : model.shared_parameters()) {
    for (size_t i = 1; i < shared.copies.size(); ++i) names.push_back(shared.copies[i].name);
  }
  return names;
}

int64_t parameter_count(torch::nn::Module& module) {
  int64_t count = 0;
  for (const auto& p : module.parameters()) count += p.numel();
  return count;
}

}  // namespace pipetrain
