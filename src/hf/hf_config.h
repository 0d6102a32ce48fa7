#pragma once
// Hugging Face config.json <-> pipetrain's model fields, for the two decoder families pipetrain
// reads and writes: GPT-2 (GPT2LMHeadModel, model.kind "gpt") and Llama (LlamaForCausalLM,
// model.kind "llama"). Torch-free: the shapes only; hf/hf_names.h maps the tensors.
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/config.h"

namespace pipetrain::hf {

// The model fields a config.json sets, as (key, value) pairs ready for set_field_from_string:
// model.kind and the shape. UserError naming `origin` for an architecture or a feature
// pipetrain does not compute (attention biases in Llama, yarn rotary scaling, ...).
std::vector<std::pair<std::string, std::string>> model_fields_of(const nlohmann::json& config,
                                                                 const std::string& origin);

// model.init_from: reads DIR/config.json and sets the fields it describes. A field the user
// gave (`given_fields`: the config file's and the command line's keys, "model.layers") must
// agree, whatever its value (the default's too), or it is a UserError naming both values.
// Nothing to do when model.init_from is empty.
void apply_init_from(Config& config, const std::set<std::string>& given_fields);

// What a config.json says beyond the fields pipetrain keeps, for the model's export: a model
// started from a Hugging Face checkpoint (`started_from`: the run's model.init_from) keeps that
// checkpoint's special-token ids (bos, eos, pad: its tokenizer's) and, for Llama, the longer of
// the context it was made for (max_position_embeddings) and model.seq_len. A model trained from
// scratch has no special tokens (pipetrain's data carry none), so bos and eos are null, not
// transformers' defaults (GPT-2's 50256 lies past a byte-level model's 256 entries); so are they
// when `started_from` holds no config.json any more.
nlohmann::json fields_kept_from(const ModelConfig& model, const std::string& started_from);

// The files of a Hugging Face checkpoint folder beside its config and weights that describe
// what the weights do not: its tokenizer (tokenizers' tokenizer.json, SentencePiece's
// tokenizer.model, GPT-2's vocab.json and merges.txt, their settings) and its generation
// defaults. An export of a run started from such a folder carries over those it holds,
// unchanged, so the export is one folder for both AutoTokenizer and from_pretrained.
const std::vector<std::string>& companion_files();

// The config.json `from_pretrained` reads for the model `model` describes, its weights stored
// in `dtype` ("float32", "bfloat16", ...): its architecture and shape, and fields_kept_from.
nlohmann::json config_json_of(const ModelConfig& model, const std::string& dtype, const std::string& started_from = "");

}  // namespace pipetrain::hf
