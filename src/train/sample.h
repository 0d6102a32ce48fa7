#pragma once
// The text sample at the end of a run (sample.tokens after sample.prompt), from a stage that
// holds the whole model, when the model can generate text (StageModule::text_generator); for
// data that are not text, a few validation rows in words (StageModule::describe_examples: a
// recognizer's transcripts beside their references) when the model has words for them.
#include <string>

#include "core/config.h"
#include "data/text_codec.h"
#include "model/batch_source.h"
#include "model/model.h"

namespace pipetrain {

// The prompt followed by the generated text, or "" (no sample wanted, or a model that cannot
// generate text: said on stderr).
// `codec` null: data that are not text: the examples of the first rows of validation batch 0
// (sample.tokens > 0 wants them too).
std::string sample_of(StageModule& whole, const Config& config, const TextCodec* codec,
                      const BatchSource& batches);

}  // namespace pipetrain
