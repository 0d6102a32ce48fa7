#include "train/sample.h"

#include <fmt/format.h>

#include "core/stop_signal.h"

namespace pipetrain {

namespace {

// Validation rows shown at the end of a run by a model that describes them.
constexpr int64_t kExampleRows = 5;

}  // namespace

std::string sample_of(StageModule& whole, const Config& config, const TextCodec* codec,
                      const BatchSource& batches) {
  if (config.sample.tokens <= 0) return "";
  if (codec == nullptr) {
    whole.eval();
    torch::NoGradGuard no_grad;
    return whole.describe_examples(batches.val_batch(0, kExampleRows), kExampleRows);
  }
  TextGenerator* generator = whole.text_generator();
  if (generator == nullptr) {
    fmt::print(stderr, "pipetrain: model.kind '{}' does not generate text: no sample\n",
               config.model.kind);
    return "";
  }
  whole.eval();
  const auto tokens = generator->generate(codec->encode(config.sample.prompt), config.sample.tokens,
                                          config.sample.temperature, uint64_t(config.train.seed));
  if (int64_t(tokens.size()) < config.sample.tokens && stop_signal() != 0) {
    fmt::print(stderr, "pipetrain: sampling stopped by a signal after {} of {} tokens\n", tokens.size(),
               config.sample.tokens);
  }
  return codec->sample_text(config.sample.prompt, tokens);
}

}  // namespace pipetrain
