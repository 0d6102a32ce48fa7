#pragma once
// Where the engine draws batches from: a step's global batch (or a validation batch) as the
// tensors a model consumes, whatever they are (token ids, images, features), rows first.
// Batches are a pure function of (seed, step) or of the validation index, so every worker,
// partition and resumed run sees the same data without shared state.
#include <cstdint>
#include <string>
#include <vector>

#include "model/model.h"

namespace pipetrain {

class BatchSource {
 public:
  virtual ~BatchSource() = default;
  virtual Microbatch train_batch(uint64_t seed, int64_t step, int64_t rows) const = 0;
  virtual Microbatch val_batch(int64_t index, int64_t rows) const = 0;
  // One line for logs: where the data come from and how much there is.
  virtual std::string describe() const = 0;
  // What a row counts for throughput (tokens/s): its tokens for text, 1 for an image.
  virtual int64_t tokens_per_row() const = 0;
  // What those counts are, for throughput lines ("tokens", "images", "utterances").
  virtual std::string throughput_unit() const { return "rows"; }
};

// The rows of training batch `step` (of `rows` rows) over a split of `count` rows visited epoch
// by epoch, each epoch in its own order, a permutation seeded by (seed ^ salt, epoch): a pure
// function of (seed, step), so every worker and a resumed run draw the same rows.
std::vector<int64_t> epoch_ordered_rows(uint64_t seed, uint64_t salt, int64_t step, int64_t rows,
                                        int64_t count);

// Rows [first, first + count) of `batch` (a microbatch; views, no copy).
Microbatch rows_of(const Microbatch& batch, int64_t first, int64_t count);
// Microbatch `index` of `microbatches` on data-parallel replica `replica` of a global batch:
// each replica takes a contiguous share of the rows, m microbatches of `rows` rows each.
Microbatch replica_microbatch(const Microbatch& batch, int64_t replica, int64_t index, int64_t microbatches,
                              int64_t rows);
// `batch` on `device` (device/placement.h's to_device: asynchronous from pinned host memory).
Microbatch on_device(const Microbatch& batch, const c10::Device& device);

}  // namespace pipetrain
