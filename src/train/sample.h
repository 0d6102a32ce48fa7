#pragma once
// The text sample at the end of a run (sample.tokens after sample.prompt), from a stage that
// holds the whole model, when the model can generate text (StageModule::text_generator).
#include <string>

#include "core/config.h"
#include "data/text_codec.h"
#include "model/model.h"

namespace pipetrain {

// The prompt followed by the generated text, or "" (no sample wanted, or a model that cannot
// generate text: said on stderr).
// `codec` null: data that are not text, no sample either.
std::string sample_of(StageModule& whole, const Config& config, const TextCodec* codec);

}  // namespace pipetrain
