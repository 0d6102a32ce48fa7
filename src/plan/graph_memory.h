#pragma once
// What train.cuda_graphs on pipeline workers holds (device/pass_graphs.h): each slot of a chunk,
// one per microbatch it may hold at once, is captured into a memory pool of its own that keeps
// what its passes needed at their peak, whether a microbatch is in the slot or not: the
// microbatch's activations, the backward's temporaries and the outputs left in the pool. A
// recomputing chunk whose backward is whole keeps nothing in a pool from one pass to the next,
// and all such slots share one pool: one pass's working memory, as the eager run.
#include <vector>

#include "plan/partition.h"

namespace pipetrain::plan {

struct GraphedChunk {
  StageMemoryParts parts;    // per_microbatch includes the slot's fixed copy of the input
  double input_bytes = 0;    // the input's gradient, made in the pool
  double output_bytes = 0;   // the output, made in the pool
  double slots = 0;          // schedule::most_in_flight (the partitioner: its in-flight count)
  bool shared_pool = false;  // recomputed, whole backward (device::Passes::independent)
};

// The bytes a worker's slots hold for the whole run.
double graphed_slot_bytes(const std::vector<GraphedChunk>& chunks);

// Between the replays the transfers stay eager: a received input before it is copied into its
// slot, an output and an input gradient copied out of one until their sends finish.
double graphed_transfer_bytes(const std::vector<GraphedChunk>& chunks);

// A worker's memory besides its weights and optimizer state: the slots, the transfers, and the
// optimizer's workspace (the update is eager, outside the pools); a no-flush schedule captures
// with microbatches in flight, so its capture step holds `eager_at_capture`, the eager run's
// memory besides weights and optimizer state, with the slots (0 for a flushing schedule).
double graphed_held_bytes(const std::vector<GraphedChunk>& chunks, double optimizer_workspace,
                          double eager_at_capture);

}  // namespace pipetrain::plan
