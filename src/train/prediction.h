#pragma once
// Weight prediction from an optimizer's own state (PipeOptim, SpecTrain, 2BW with prediction):
// W_hat = W - lr * s * direction, where `direction` is the step the optimizer's next update
// would take per unit of learning rate if the gradient repeated its running average.
#include <torch/torch.h>

namespace pipetrain {

enum class PredictionKind {
  OptimizerUpdate,  // PipeOptim: SGD momentum buffer; Adam/AdamW m_hat / (sqrt(v_hat) + eps);
                    // Muon's matrices: its update with the momentum as gradient (train/muon.h)
  MomentumOnly,     // SpecTrain: SGD momentum buffer; Adam/AdamW m_hat (first moment only);
                    // Muon's matrices: the momentum
};

// The direction for `param` (a tensor the optimizer owns), or an undefined tensor before the
// optimizer's first step on it (nothing to extrapolate; also SGD without momentum). AdamW's
// decoupled weight decay is left out, as in the PipeOptim paper.
torch::Tensor prediction_direction(torch::optim::Optimizer& optimizer, const torch::Tensor& param,
                                   PredictionKind kind);

// The learning rate of the optimizer's (single) parameter group: the one its last step used.
double current_learning_rate(torch::optim::Optimizer& optimizer);

// weight -= lr * steps * direction, in place, without autograd; no-op for an undefined direction.
// The runtime and the reference trainer both predict through this, so they round alike.
void apply_prediction(const torch::Tensor& weight, const torch::Tensor& direction, double lr,
                      int steps);

}  // namespace pipetrain
