#include "train/sample.h"

#include <fmt/format.h>

namespace pipetrain {

std::string sample_of(StageModule& whole, const Config& config, const TextCodec* codec) {
  if (config.sample.tokens <= 0 || codec == nullptr) return "";
  TextGenerator* generator = whole.text_generator();
  if (generator == nullptr) {
    fmt::print(stderr, "pipetrain: model.kind '{}' does not generate text: no sample\n",
               config.model.kind);
    return "";
  }
  whole.eval();
  const auto tokens = generator->generate(codec->encode(config.sample.prompt), config.sample.tokens,
                                          config.sample.temperature, uint64_t(config.train.seed));
  return codec->sample_text(config.sample.prompt, tokens);
}

}  // namespace pipetrain
