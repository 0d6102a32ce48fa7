// Two chunks per worker in a V (Placement::V: worker w holds stage w as chunk 0 and stage
// 2p-1-w as chunk 1, so worker 0 computes the loss): the orders of torch.distributed.pipelining's
// ScheduleZBVZeroBubble (the zero-bubble paper's ZB-V, arXiv 2401.10241 section 6) and
// ScheduleDualPipeV (DeepSeek's DualPipe cut in half), rank by rank, phase by phase.
#include <algorithm>
#include <deque>
#include <map>
#include <stdexcept>

#include "schedule/gen_common.h"

namespace pipetrain::schedule {
namespace {

// One worker's compute order; microbatches are numbered per (chunk, kind) in the order added, as
// torch's generators count them. A full Backward and a BackwardInput share one count.
class VOrder {
 public:
  void add(ActionKind kind, int chunk) {
    const ActionKind counted = kind == ActionKind::Backward ? ActionKind::BackwardInput : kind;
    const int microbatch = count_[{counted, chunk}]++;
    order_.push_back({kind, 0, microbatch, 0, chunk});
    if (kind == ActionKind::BackwardInput) pending_weights_.push_back(order_.back());
  }
  int count(ActionKind kind, int chunk) { return count_[{kind, chunk}]; }
  // The oldest W whose B has run, if any (DualPipeV's WeightGradStore queue).
  void add_pending_weight() {
    if (pending_weights_.empty()) return;
    ComputeItem w = pending_weights_.front();
    pending_weights_.pop_front();
    w.kind = ActionKind::BackwardWeight;
    order_.push_back(w);
    ++count_[{ActionKind::BackwardWeight, w.chunk}];
  }
  // DualPipeV's overlapped pair: a forward of one chunk and a full backward of the other, run
  // back to back (F&B = F + B on one compute stream).
  void add_forward_backward(int forward_chunk, int backward_chunk) {
    add(ActionKind::Forward, forward_chunk);
    add(ActionKind::Backward, backward_chunk);
  }
  const std::vector<ComputeItem>& items() const { return order_; }
  // Only the items of microbatches below m (ZB-V plans for at least 2p-1 and drops the rest).
  std::vector<ComputeItem> below(int m) const {
    std::vector<ComputeItem> kept;
    std::copy_if(order_.begin(), order_.end(), std::back_inserter(kept),
                 [m](const ComputeItem& item) { return item.microbatch < m; });
    return kept;
  }

 private:
  std::vector<ComputeItem> order_;
  std::map<std::pair<ActionKind, int>, int> count_;
  std::deque<ComputeItem> pending_weights_;
};

constexpr ActionKind F = ActionKind::Forward, I = ActionKind::BackwardInput,
                     W = ActionKind::BackwardWeight, B = ActionKind::Backward;

std::vector<ComputeItem> zb_v_worker_order(int r, int p, int m) {
  const int n = std::max(2 * p - 1, m);
  VOrder o;
  for (int i = 0; i < 2 * (p - r) - 1; ++i) o.add(F, 0);
  for (int i = 0; i < r; ++i) o.add(F, 1), o.add(F, 0);
  for (int i = 0; i < p - r; ++i) o.add(F, 1), o.add(I, 1), o.add(W, 1);
  while (o.count(F, 1) < o.count(F, 0) || o.count(F, 0) < n) {
    if (o.count(F, 0) < n) o.add(F, 0);
    o.add(I, 0), o.add(W, 0), o.add(F, 1), o.add(I, 1), o.add(W, 1);
  }
  for (int i = 0; i < r; ++i) o.add(I, 0), o.add(I, 1);
  for (int i = 0; i < p - r; ++i) o.add(I, 0), o.add(W, 0);
  while (o.count(W, 1) < o.count(I, 1)) o.add(W, 1);
  while (o.count(W, 0) < o.count(I, 0)) o.add(W, 0);
  return o.below(m);
}

std::vector<ComputeItem> dualpipev_worker_order(int r, int p, int m) {
  // Its phases assume m >= 2p (fewer would leave some microbatches without a forward).
  if (m < 2 * p) throw std::invalid_argument("DualPipeV needs at least 2 microbatches per worker");
  VOrder o;
  for (int i = 0; i < 2 * (p - r - 1); ++i) o.add(F, 0);
  for (int i = 0; i < r + 1; ++i) o.add(F, 0), o.add(F, 1);
  for (int i = 0; i < p - r - 1; ++i) o.add(I, 1), o.add_pending_weight(), o.add(F, 1);
  for (int i = 0; i < m - 2 * p + r + 1; ++i) {
    if (i == 0 && r == p - 1) {
      o.add(F, 0), o.add(B, 1);  // the last worker does not overlap its first pair
    } else {
      o.add_forward_backward(0, 1);
    }
    o.add_forward_backward(1, 0);
  }
  for (int i = 0; i < p - r - 1; ++i) o.add(B, 1), o.add_forward_backward(1, 0);
  // The second half of the remaining backwards is split (its W passes fill the tail).
  const int half = (r + 1) / 2;
  bool split = false;
  for (int i = 0; i < r + 1; ++i) {
    split |= i == half && r % 2 == 1;
    o.add(split ? I : B, 1);
    split |= i == half && r % 2 == 0;
    o.add(split ? I : B, 0);
  }
  for (int i = 0; i < p - r - 1; ++i) o.add_pending_weight(), o.add(split ? I : B, 0);
  for (int i = 0; i < r + 1; ++i) o.add_pending_weight();
  return o.items();
}

Schedule v_shape(const ScheduleSpec& spec, const char* name,
                 std::vector<ComputeItem> (*worker_order)(int, int, int)) {
  // Unchecked like every generator (make_schedule checks), but never out of bounds.
  if (spec.chunks != 2) throw std::invalid_argument("a V placement holds 2 chunks per worker");
  ComputeOrder order(spec.stages);
  for (int w = 0; w < spec.stages; ++w) order[w] = worker_order(w, spec.stages, spec.microbatches);
  Schedule header = detail::make_header(spec, name, WeightPolicyKind::Sync);
  header.placement = Placement::V;
  return lower_schedule(header, detail::repeat_iterations(order, spec.iterations), spec);
}

}  // namespace

Schedule make_zb_v_schedule(const ScheduleSpec& spec) { return v_shape(spec, "zb-v", zb_v_worker_order); }

Schedule make_dualpipev_schedule(const ScheduleSpec& spec) {
  return v_shape(spec, "dualpipev", dualpipev_worker_order);
}

}  // namespace pipetrain::schedule
