#include "runtime/stage_executor.h"

#include <chrono>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "train/lr_schedule.h"
#include "train/optim.h"

namespace pipetrain::runtime {
namespace {

using schedule::ActionKind;

// Tags keep a mismatched pair from silently exchanging the wrong tensor.
int activation_tag(int microbatch) { return 2 * microbatch; }
int gradient_tag(int microbatch) { return 2 * microbatch + 1; }
constexpr int kEvalTagBase = 1 << 24;

}  // namespace

StageExecutor::StageExecutor(const Config& config, const TextDataset* data, Comm& comm,
                             const std::vector<StageRange>& ranges, schedule::Schedule schedule)
    : config_(config),
      data_(data),
      comm_(comm),
      stage_(comm.rank()),
      stages_(int(ranges.size())),
      schedule_(std::move(schedule)) {
  const StageRange range = ranges.at(stage_);
  model_ = std::make_shared<GptStack>(gpt_config_from(config.model),
                                      static_cast<uint64_t>(config.train.seed), range.first,
                                      range.last);
  optimizer_ = make_optimizer(model_->parameters(), config.train);
  const std::string head_copy = fmt::format("layer{}.tied_weight", config.model.layers + 1);
  for (const auto& item : model_->named_parameters()) {
    if (stages_ > 1 && first() && item.key() == "layer0.token_weight") tied_weight_ = item.value();
    if (stages_ > 1 && last() && item.key() == head_copy) {
      tied_weight_ = item.value();
      continue;  // the tied weight enters the global norm once, on the first stage
    }
    norm_params_.push_back(item.value());
  }
}

std::vector<int64_t> StageExecutor::activation_shape(int64_t rows) const {
  return {rows, config_.model.seq_len, config_.model.d_model};
}

StepResult StageExecutor::train_step(int64_t step) {
  const auto& train = config_.train;
  TokenBatch batch;
  if (data_ != nullptr) batch = data_->train_batch(uint64_t(train.seed), step, train.batch_size);
  current_step_ = step;
  optimizer_->zero_grad();
  loss_sum_ = 0;
  result_ = StepResult{};
  for (const auto& action : schedule_.actions.at(stage_)) {
    const auto start = std::chrono::steady_clock::now();
    run_action(action, batch);
    if (step >= traced_steps) continue;
    const auto ms = [](std::chrono::steady_clock::time_point t) {
      return std::chrono::duration<double, std::milli>(t.time_since_epoch()).count();
    };
    const double begin = ms(start);
    events_.push_back({fmt::format("{}{}{}", stage_, schedule::kind_token(action.kind),
                                   action.microbatch),
                       std::string(schedule::kind_name(action.kind)), begin,
                       ms(std::chrono::steady_clock::now()) - begin, action.microbatch});
  }
  if (!in_flight_.empty()) throw std::logic_error("schedule left microbatches in flight");
  result_.loss = last() ? loss_sum_ / double(train.microbatches)
                        : std::numeric_limits<double>::quiet_NaN();
  return result_;
}

void StageExecutor::run_action(const schedule::Action& action, const TokenBatch& batch) {
  const int mb = action.microbatch;
  const int64_t rows = config_.train.batch_size / config_.train.microbatches;
  switch (action.kind) {
    case ActionKind::Forward:
      return forward(mb, batch);
    case ActionKind::Backward:
      return backward(mb);
    case ActionKind::SendActivation:
      return comm_.send(in_flight_.at(mb).output, action.peer, activation_tag(mb));
    case ActionKind::RecvActivation:
      in_flight_[mb].input = comm_.recv(activation_shape(rows), torch::kFloat32, action.peer,
                                        activation_tag(mb));
      return;
    case ActionKind::SendGrad: {
      // The input gradient leaves the stage: this microbatch's activations can go.
      auto grad = in_flight_.at(mb).input.grad();
      in_flight_.erase(mb);
      return comm_.send(grad, action.peer, gradient_tag(mb));
    }
    case ActionKind::RecvGrad:
      in_flight_.at(mb).output_grad = comm_.recv(activation_shape(rows), torch::kFloat32,
                                                 action.peer, gradient_tag(mb));
      return;
    case ActionKind::OptimizerStep:
      return optimizer_step();
    default:
      fail("the runtime cannot execute {} actions yet (schedule '{}')",
           schedule::kind_name(action.kind), schedule_.name);
  }
}

void StageExecutor::forward(int microbatch, const TokenBatch& batch) {
  const auto& train = config_.train;
  const int64_t rows = train.batch_size / train.microbatches;
  InFlight& state = in_flight_[microbatch];
  TokenBatch micro;
  if (data_ != nullptr) micro = batch.rows(microbatch * rows, rows);
  if (first()) {
    state.input = to_tensor(micro.inputs, rows, micro.seq_len);
  } else {
    state.input.requires_grad_(true);
  }
  auto output = model_->forward(state.input);
  if (last()) {
    auto loss = lm_loss(output, to_tensor(micro.targets, rows, micro.seq_len));
    loss_sum_ += loss.item<double>();
    state.scaled_loss = loss / double(train.microbatches);  // exactly the Trainer's scaling
  } else {
    state.output = output;
  }
}

void StageExecutor::backward(int microbatch) {
  InFlight& state = in_flight_.at(microbatch);
  if (last()) {
    state.scaled_loss.backward();
  } else {
    state.output.backward(state.output_grad);
  }
  state.output = torch::Tensor();
  state.scaled_loss = torch::Tensor();
  if (first()) in_flight_.erase(microbatch);  // nothing to send upstream
}

void StageExecutor::optimizer_step() {
  comm_.wait_sends();
  // The tied embedding/head weight: both copies get the summed gradient, so the identical
  // optimizer updates keep them equal.
  if (tied_weight_.defined()) comm_.pair_all_reduce_sum(tied_weight_.mutable_grad());
  const double global_norm = std::sqrt(comm_.all_reduce_sum(squared_grad_norm(norm_params_)));
  const auto params = model_->parameters();
  scale_grads_to_norm(params, global_norm, config_.train.grad_clip);
  result_.grad_norm = global_norm;
  result_.lr = learning_rate_at(config_.train, current_step_);
  set_learning_rate(*optimizer_, result_.lr);
  optimizer_->step();
}

double StageExecutor::evaluate() {
  torch::NoGradGuard no_grad;
  const int64_t rows = config_.train.batch_size;
  double total = 0;
  for (int64_t i = 0; i < config_.eval.batches; ++i) {
    TokenBatch batch;
    if (data_ != nullptr) batch = data_->val_batch(i, rows);
    const int tag = kEvalTagBase + int(i);
    auto input = first() ? to_tensor(batch.inputs, rows, batch.seq_len)
                         : comm_.recv(activation_shape(rows), torch::kFloat32, stage_ - 1, tag);
    auto output = model_->forward(input);
    if (last()) {
      total += lm_loss(output, to_tensor(batch.targets, rows, batch.seq_len)).item<double>();
    } else {
      comm_.send(output, stage_ + 1, tag);
      comm_.wait_sends();
    }
  }
  return last() ? total / double(config_.eval.batches) : std::numeric_limits<double>::quiet_NaN();
}

}  // namespace pipetrain::runtime
