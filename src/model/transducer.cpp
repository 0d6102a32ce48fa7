#include "model/transducer.h"

#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>

#include "core/error.h"
#include "loss/transducer.h"
#include "model/edit_distance.h"
#include "model/transducer_layers.h"
#include "speech/corpus_text.h"

namespace pipetrain {
namespace {

// Labels a frame may emit before greedy decoding moves on (a guard against endless emission).
constexpr int64_t kMaxSymbolsPerFrame = 4;

torch::Generator transducer_layer_generator(uint64_t seed, int64_t layer) {
  uint64_t z = (seed ^ 0x5EECu) * 0x9E3779B97F4A7C15ull +
               static_cast<uint64_t>(layer + 1) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 30)) * 0x94D049BB133111EBull;
  return at::detail::createCPUGenerator(z ^ (z >> 31));
}

// Row `row` of labels [rows, 1 + max_labels]: its reference labels.
std::vector<int64_t> reference_of(const torch::Tensor& labels, int64_t row) {
  const auto count = labels[row][0].item<int64_t>();
  const auto values = labels[row].narrow(0, 1, count).to(torch::kCPU).contiguous();
  return {values.data_ptr<int64_t>(), values.data_ptr<int64_t>() + count};
}

std::string transducer_text(const std::vector<int64_t>& labels) {
  return speech::text_of_labels(std::vector<uint32_t>(labels.begin(), labels.end()));
}

}  // namespace

TransducerStack::TransducerStack(const TransducerConfig& config, uint64_t seed, int64_t first,
                                 int64_t last)
    : config_(config) {
  if (first < 0 || last > config.layer_count() || first >= last) {
    fail("layer range [{}, {}) is outside the model's {} layers", first, last,
         config.layer_count());
  }
  for (int64_t i = first; i < last; ++i) {
    auto generator = transducer_layer_generator(seed, i);
    layers_.push_back(
        register_module("layer" + std::to_string(i), make_transducer_layer(config, i, generator)));
  }
  to(config.dtype);  // initialised in float32, converted exactly
}

// Mixed precision: each layer computes under autocast and its output (the frame mask too, which
// stays exact) is rounded to the activation dtype, so a stage boundary rounds what the single
// process rounds there (device/precision.h).
torch::Tensor TransducerStack::forward(const torch::Tensor& input) {
  device::ComputeScope scope(config_.precision, input.device().type());
  torch::Tensor x = input;
  for (auto& layer : layers_) x = device::at_boundary(layer->forward(x), config_.precision);
  return x;
}

TransducerJoint& TransducerStack::joint() const {
  auto* last = dynamic_cast<TransducerJoint*>(layers_.back().get());
  if (last == nullptr)
    throw std::logic_error("transducer: the loss needs the stage holding the joint layer");
  return *last;
}

// Encoder frames and labels are cut to the microbatch's longest: the batched reference then
// builds the [rows, frames, labels + 1, vocabulary] joint output a batched trainer would.
// Mixed precision: the predictor and the joint compute under autocast, the sample-wise loss reads
// the joint's bfloat16 logits (accumulating in float64) and returns a float32 loss; the batched
// reference widens its logits to float32 first, as a log-softmax in bfloat16 would lose the small
// probabilities.
torch::Tensor TransducerStack::loss(const torch::Tensor& output, const torch::Tensor& labels) {
  device::ComputeScope scope(config_.precision, output.device().type());
  const auto [encoded, frames] = split_frame_counts(output);
  const auto label_counts = labels.select(1, 0);
  const int64_t longest = label_counts.max().item<int64_t>();
  const auto targets = labels.narrow(1, 1, longest);
  const auto enc = encoded.narrow(1, 0, frames.max().item<int64_t>());
  const auto pred = joint().predict(targets);
  if (config_.sample_wise) {
    return loss::sample_wise_transducer_loss(joint().network, enc, pred, targets, frames,
                                             label_counts);
  }
  return loss::transducer_loss_batched(device::at_least_float32(joint().network(enc, pred)), targets,
                                       frames, label_counts);
}

// Greedy: at each encoder frame, emit the joint's best label and advance the predictor until it
// prefers the blank (or kMaxSymbolsPerFrame labels), then move to the next frame.
std::vector<std::vector<int64_t>> TransducerStack::decode(const torch::Tensor& output) {
  torch::NoGradGuard no_grad;
  const auto [encoded, frames] = split_frame_counts(output);
  auto& parts = joint();
  std::vector<std::vector<int64_t>> hypotheses;
  for (int64_t row = 0; row < encoded.size(0); ++row) {
    auto state = parts.initial_state();
    auto predicted = parts.predict_step(0, state);
    std::vector<int64_t> labels;
    for (int64_t t = 0; t < frames[row].item<int64_t>(); ++t) {
      const auto frame = encoded[row][t];
      for (int64_t emitted = 0; emitted < kMaxSymbolsPerFrame; ++emitted) {
        const auto best =
            parts.network->output(torch::tanh(frame + predicted)).argmax().item<int64_t>();
        if (best == 0) break;
        labels.push_back(best);
        predicted = parts.predict_step(best, state);
      }
    }
    hypotheses.push_back(std::move(labels));
  }
  return hypotheses;
}

std::vector<std::pair<std::string, double>> TransducerStack::validation_measures(
    const torch::Tensor& output, const torch::Tensor& labels) {
  const auto hypotheses = decode(output);
  int64_t errors = 0, characters = 0;
  for (int64_t row = 0; row < labels.size(0); ++row) {
    const auto reference = reference_of(labels, row);
    errors += edit_distance(hypotheses[size_t(row)], reference);
    characters += int64_t(reference.size());
  }
  return {{"cer", double(errors) / double(std::max<int64_t>(characters, 1))}};
}

std::string TransducerStack::describe_examples(const Microbatch& batch, int64_t count) {
  const auto hypotheses = decode(forward(batch.inputs));
  std::string text;
  for (int64_t row = 0; row < std::min(count, batch.labels.size(0)); ++row) {
    const auto reference = reference_of(batch.labels, row);
    text += fmt::format("{}reference: {}\ndecoded:   {}  ({} of {} characters wrong)\n",
                        row == 0 ? "" : "\n", transducer_text(reference),
                        transducer_text(hypotheses[size_t(row)]),
                        edit_distance(hypotheses[size_t(row)], reference), reference.size());
  }
  return text;
}

}  // namespace pipetrain
