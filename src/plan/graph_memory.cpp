#include "plan/graph_memory.h"

#include <algorithm>

namespace pipetrain::plan {

double graphed_slot_bytes(const std::vector<GraphedChunk>& chunks) {
  double slots = 0, shared = 0;
  for (const auto& chunk : chunks) {
    // One pass's peak: the activations a recomputing backward rebuilds, and the temporaries.
    const double pass = chunk.parts.once + chunk.parts.workspace;
    const double left_in_pool = chunk.input_bytes + chunk.output_bytes;
    slots += chunk.slots * (chunk.parts.per_microbatch + left_in_pool + (chunk.shared_pool ? 0 : pass));
    if (chunk.shared_pool) shared = std::max(shared, pass);
  }
  return slots + shared;
}

double graphed_transfer_bytes(const std::vector<GraphedChunk>& chunks) {
  double bytes = 0;
  for (const auto& chunk : chunks) bytes += 2 * chunk.input_bytes + chunk.output_bytes;
  return bytes;
}

double graphed_held_bytes(const std::vector<GraphedChunk>& chunks, double optimizer_workspace,
                          double eager_at_capture) {
  return graphed_slot_bytes(chunks) + graphed_transfer_bytes(chunks) +
         std::max(optimizer_workspace, eager_at_capture);
}

}  // namespace pipetrain::plan
