#pragma once
// The small models the exactness proofs train beside their default GPT, as config fields laid
// over a GPT case's (the same list sets the reference Config and the workers' command line).
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "tiny_images.h"
#include "tiny_speech.h"

namespace pipetrain::testing {

using ConfigFields = std::vector<std::pair<std::string, std::string>>;

// `key` takes `value`: in its place if the list sets it, at the end if not.
inline void set_field(ConfigFields& fields, const std::string& key, const std::string& value) {
  for (auto& [given, old] : fields) {
    if (given == key) {
      old = value;
      return;
    }
  }
  fields.emplace_back(key, value);
}

// gpt: as given. cnn: 2 base channels (2, 4, 8 through the blocks) on the tiny image folder.
// transducer: width 8 over the tiny speech file's ragged utterances (9..37 frames, 1..6
// labels). llama, llama_tied: 2 query heads sharing 1 key/value head, rotary base 5000, its own
// head or the embedding's.
inline void use_model(ConfigFields& fields, const std::string& model) {
  if (model == "gpt") return;
  if (model == "cnn") {
    for (const auto& [key, value] : ConfigFields{{"model.kind", "cnn"}, {"model.d_model", "2"},
                                                 {"data.format", "fashion-mnist"}, {"data.path", tiny_image_folder()}}) {
      set_field(fields, key, value);
    }
  } else if (model == "transducer") {
    for (const auto& [key, value] : ConfigFields{{"model.kind", "transducer"}, {"model.d_model", "8"},
                                                 {"model.seq_len", "40"}, {"model.max_labels", "6"},
                                                 {"data.format", "speech"}, {"data.path", tiny_speech_file()}}) {
      set_field(fields, key, value);
    }
  } else if (model == "llama" || model == "llama_tied") {
    for (const auto& [key, value] : ConfigFields{{"model.kind", "llama"}, {"model.kv_heads", "1"},
                                                 {"model.rope_theta", "5000"},
                                                 {"model.head", model == "llama_tied" ? "tied" : "untied"}}) {
      set_field(fields, key, value);
    }
  } else {
    ADD_FAILURE() << "no exactness model '" << model << "'";
  }
}

}  // namespace pipetrain::testing
