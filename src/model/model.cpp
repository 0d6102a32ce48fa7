#include "model/model.h"

#include "device/placement.h"

#include "model/batch_source.h"

#include <ATen/CPUGeneratorImpl.h>

namespace pipetrain {

std::vector<std::string> secondary_copies(const Model& model) {
  std::vector<std::string> names;
  for (const auto& shared : model.shared_parameters()) {
    for (size_t i = 1; i < shared.copies.size(); ++i) names.push_back(shared.copies[i].name);
  }
  return names;
}

namespace {

torch::Tensor epoch_permutation(uint64_t seed, int64_t epoch, int64_t count) {
  uint64_t z = seed * 0x9E3779B97F4A7C15ull + uint64_t(epoch + 1) * 0xD6E8FEB86659FD93ull;
  z = (z ^ (z >> 32)) * 0x94D049BB133111EBull;
  auto generator = at::detail::createCPUGenerator(z ^ (z >> 29));
  return torch::randperm(count, generator, torch::kInt64);
}

}  // namespace

std::vector<int64_t> epoch_ordered_rows(uint64_t seed, uint64_t salt, int64_t step, int64_t rows,
                                        int64_t count) {
  std::vector<int64_t> chosen;
  chosen.reserve(size_t(rows));
  torch::Tensor order;
  int64_t order_epoch = -1;
  for (int64_t k = step * rows; k < (step + 1) * rows; ++k) {
    if (k / count != order_epoch) {
      order_epoch = k / count;
      order = epoch_permutation(seed ^ salt, order_epoch, count);
    }
    chosen.push_back(order.data_ptr<int64_t>()[k % count]);
  }
  return chosen;
}

Microbatch rows_of(const Microbatch& batch, int64_t first, int64_t count) {
  return {batch.inputs.narrow(0, first, count), batch.labels.narrow(0, first, count)};
}

Microbatch replica_microbatch(const Microbatch& batch, int64_t replica, int64_t index, int64_t microbatches,
                              int64_t rows) {
  return rows_of(batch, (replica * microbatches + index) * rows, rows);
}

Microbatch on_device(const Microbatch& batch, const c10::Device& device) {
  return {device::to_device(batch.inputs, device), device::to_device(batch.labels, device)};
}

ParameterRoles roles_of(const Model& model) {
  return [&model](const std::string& name, const std::vector<int64_t>& shape) {
    return model.role_of(name, shape);
  };
}

int64_t parameter_count(torch::nn::Module& module) {
  int64_t count = 0;
  for (const auto& p : module.parameters()) count += p.numel();
  return count;
}

}  // namespace pipetrain
