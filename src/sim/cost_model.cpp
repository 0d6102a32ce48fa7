#include "sim/cost_model.h"

#include <stdexcept>

namespace pipetrain::sim {
using schedule::Action;
using schedule::ActionKind;

bool counts_as_busy(ActionKind kind) {
  return schedule::is_compute(kind) || kind == ActionKind::OptimizerStep;
}

double input_pass_ms(const StageCost& stage) {
  return stage.input_ms >= 0 ? stage.input_ms : stage.backward_ms - stage.weight_ms;
}

const StageCost& CostModel::stage(int index) const {
  if (stages.empty()) throw std::invalid_argument("cost model without stages");
  if (stages.size() == 1) return stages[0];
  if (index < 0 || index >= static_cast<int>(stages.size()))
    throw std::invalid_argument("cost model has no entry for stage " + std::to_string(index));
  return stages[index];
}

double CostModel::slice_share(int slice, int slices) const {
  if (static_cast<int>(slice_fraction.size()) == slices) return slice_fraction[slice];
  return 1.0 / slices;
}

double CostModel::duration_ms(const schedule::Schedule& s, int worker, const Action& a) const {
  const StageCost& c = stage(s.stage_of(worker, a.chunk));
  const double share = slice_share(a.slice, s.slices);
  switch (a.kind) {
    case ActionKind::Forward: return c.forward_ms * share;
    case ActionKind::Backward: return c.backward_ms * share;
    case ActionKind::BackwardInput: return input_pass_ms(c) * share;
    case ActionKind::BackwardWeight: return c.weight_ms * share;
    case ActionKind::AllReduceGrads: return s.dp_width > 1 ? c.allreduce_ms : 0.0;
    case ActionKind::OptimizerStep: return c.optimizer_ms;
    default: {
      double bytes = c.transfer_bytes * share;
      return p2p_latency_ms + (bandwidth_bytes_per_ms > 0 ? bytes / bandwidth_bytes_per_ms : 0.0);
    }
  }
}

double CostModel::send_post_duration_ms(const schedule::Schedule& s, int worker, const Action& a) const {
  const double bytes = stage(s.stage_of(worker, a.chunk)).transfer_bytes * slice_share(a.slice, s.slices);
  return send_post_ms + (send_post_bytes_per_ms > 0 ? bytes / send_post_bytes_per_ms : 0.0);
}

CostModel uniform_cost_model(const StageCost& w, int chunks) {
  StageCost c = w;
  const double v = chunks;
  c.forward_ms /= v;
  c.backward_ms /= v;
  c.weight_ms /= v;
  if (c.input_ms > 0) c.input_ms /= v;
  c.optimizer_ms /= v;
  c.allreduce_ms /= v;
  c.activation_bytes /= v;
  c.weight_pass_bytes /= v;
  c.weight_bytes /= v;
  CostModel model;
  model.stages = {c};
  return model;
}

}  // namespace pipetrain::sim
