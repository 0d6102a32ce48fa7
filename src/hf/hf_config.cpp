#include "hf/hf_config.h"

#include <algorithm>
#include <cstdint>
#include <filesystem>

#include <fmt/format.h>

#include "core/error.h"
#include "core/files.h"
#include "core/rope_scaling.h"

namespace pipetrain::hf {
namespace {

using Fields = std::vector<std::pair<std::string, std::string>>;

// A config.json number or flag, checked: the field names what transformers calls it.
class ConfigReader {
 public:
  ConfigReader(const nlohmann::json& config, std::string origin)
      : config_(config), origin_(std::move(origin)) {}

  bool has(const std::string& key) const { return config_.contains(key) && !config_[key].is_null(); }
  int64_t integer(const std::string& key) const {
    if (!has(key) || !config_[key].is_number_integer() || config_[key].get<int64_t>() <= 0) {
      fail("{}: '{}' must be a positive integer", origin_, key);
    }
    return config_[key].get<int64_t>();
  }
  int64_t integer_or(const std::string& key, int64_t fallback) const {
    return has(key) ? integer(key) : fallback;
  }
  double number_or(const std::string& key, double fallback) const {
    if (!has(key)) return fallback;
    if (!config_[key].is_number()) fail("{}: '{}' must be a number", origin_, key);
    return config_[key].get<double>();
  }
  bool flag_or(const std::string& key, bool fallback) const {
    if (!has(key)) return fallback;
    if (!config_[key].is_boolean()) fail("{}: '{}' must be true or false", origin_, key);
    return config_[key].get<bool>();
  }
  std::string text_or(const std::string& key, const std::string& fallback) const {
    if (!has(key)) return fallback;
    if (!config_[key].is_string()) fail("{}: '{}' must be a string", origin_, key);
    return config_[key].get<std::string>();
  }
  // A feature pipetrain does not compute, refused by its transformers name.
  void refuse_if(bool present, const std::string& what) const {
    if (present) fail("{}: {} is not supported (pipetrain's decoders do not compute it)", origin_, what);
  }
  const nlohmann::json& json() const { return config_; }
  const std::string& origin() const { return origin_; }

 private:
  const nlohmann::json& config_;
  std::string origin_;
};

std::string number_text(double value) { return fmt::format("{}", value); }

Fields gpt2_fields(const ConfigReader& c) {
  const int64_t d = c.integer("n_embd");
  const std::string activation = c.text_or("activation_function", "gelu_new");
  std::string pipetrain_activation;
  if (activation == "gelu_new" || activation == "gelu_pytorch_tanh") {
    pipetrain_activation = "gelu_tanh";
  } else if (activation == "gelu") {
    pipetrain_activation = "gelu";
  } else {
    c.refuse_if(true, fmt::format("activation_function '{}'", activation));
  }
  c.refuse_if(c.flag_or("scale_attn_by_inverse_layer_idx", false), "scale_attn_by_inverse_layer_idx");
  c.refuse_if(!c.flag_or("scale_attn_weights", true), "scale_attn_weights = false");
  c.refuse_if(c.flag_or("add_cross_attention", false), "add_cross_attention");
  return {{"model.kind", "gpt"},
          {"model.vocab_size", std::to_string(c.integer("vocab_size"))},
          {"model.d_model", std::to_string(d)},
          {"model.heads", std::to_string(c.integer("n_head"))},
          {"model.layers", std::to_string(c.integer("n_layer"))},
          {"model.positions", std::to_string(c.integer("n_positions"))},
          {"model.ffn_hidden", std::to_string(c.integer_or("n_inner", 4 * d))},
          {"model.norm_eps", number_text(c.number_or("layer_norm_epsilon", 1e-5))},
          {"model.activation", pipetrain_activation},
          {"model.head", c.flag_or("tie_word_embeddings", true) ? "tied" : "untied"}};
}

// transformers 5's rope_parameters, or the older top-level rope_theta and rope_scaling.
std::pair<double, std::string> llama_rope(const ConfigReader& c) {
  const auto& json = c.json();
  nlohmann::json parameters = nlohmann::json::object();
  if (json.contains("rope_parameters") && json["rope_parameters"].is_object()) {
    parameters = json["rope_parameters"];
  } else if (json.contains("rope_scaling") && json["rope_scaling"].is_object()) {
    parameters = json["rope_scaling"];
  }
  ConfigReader rope(parameters, c.origin() + " (rope_parameters)");
  const double theta = rope.number_or("rope_theta", c.number_or("rope_theta", 10000));
  const std::string type = rope.text_or("rope_type", rope.text_or("type", "default"));
  if (type == "default") return {theta, ""};
  if (type == "linear") return {theta, "linear:" + number_text(rope.number_or("factor", 1))};
  if (type == "llama3") {
    return {theta, fmt::format("llama3:{},{},{},{}", rope.number_or("factor", 8),
                               rope.number_or("low_freq_factor", 1), rope.number_or("high_freq_factor", 4),
                               rope.integer("original_max_position_embeddings"))};
  }
  fail("{}: rotary scaling '{}' is not supported; pipetrain computes \"default\", \"linear\" and "
       "\"llama3\"", c.origin(), type);
}

Fields llama_fields(const ConfigReader& c) {
  const int64_t d = c.integer("hidden_size"), heads = c.integer("num_attention_heads");
  c.refuse_if(c.flag_or("attention_bias", false), "attention_bias = true");
  c.refuse_if(c.flag_or("mlp_bias", false), "mlp_bias = true");
  const std::string act = c.text_or("hidden_act", "silu");
  c.refuse_if(act != "silu", fmt::format("hidden_act '{}' (Llama's SwiGLU uses silu)", act));
  c.refuse_if(c.has("head_dim") && c.integer("head_dim") * heads != d,
              "a head_dim other than hidden_size / num_attention_heads");
  const auto [theta, scaling] = llama_rope(c);
  return {{"model.kind", "llama"},
          {"model.vocab_size", std::to_string(c.integer("vocab_size"))},
          {"model.d_model", std::to_string(d)},
          {"model.heads", std::to_string(heads)},
          {"model.kv_heads", std::to_string(c.integer_or("num_key_value_heads", heads))},
          {"model.layers", std::to_string(c.integer("num_hidden_layers"))},
          {"model.ffn_hidden", std::to_string(c.integer("intermediate_size"))},
          {"model.norm_eps", number_text(c.number_or("rms_norm_eps", 1e-6))},
          {"model.rope_theta", number_text(theta)},
          {"model.rope_scaling", scaling},
          {"model.head", c.flag_or("tie_word_embeddings", false) ? "tied" : "untied"}};
}

nlohmann::json rope_parameters_of(const ModelConfig& model) {
  const RopeScaling s = parse_rope_scaling(model.rope_scaling, "model.rope_scaling");
  nlohmann::json rope = {{"rope_theta", model.rope_theta}, {"rope_type", "default"}};
  if (s.kind == RopeScaling::Kind::Linear) {
    rope["rope_type"] = "linear";
    rope["factor"] = s.factor;
  } else if (s.kind == RopeScaling::Kind::Llama3) {
    rope["rope_type"] = "llama3";
    rope["factor"] = s.factor;
    rope["low_freq_factor"] = s.low_freq_factor;
    rope["high_freq_factor"] = s.high_freq_factor;
    rope["original_max_position_embeddings"] = s.original_context;
  }
  return rope;
}

}  // namespace

Fields model_fields_of(const nlohmann::json& config, const std::string& origin) {
  if (!config.is_object()) fail("{}: not a JSON object", origin);
  const ConfigReader reader(config, origin);
  const std::string type = reader.text_or("model_type", "");
  if (type == "gpt2") return gpt2_fields(reader);
  if (type == "llama") return llama_fields(reader);
  std::string architectures = "none named";
  if (config.contains("architectures")) architectures = config["architectures"].dump();
  fail("{}: model_type '{}' (architectures {}) is not supported; pipetrain reads \"gpt2\" "
       "(GPT2LMHeadModel) and \"llama\" (LlamaForCausalLM)", origin, type, architectures);
}

namespace {

// model.init_from's config.json, and its path for messages.
std::pair<nlohmann::json, std::string> init_from_config(const std::string& dir) {
  if (!std::filesystem::is_directory(dir)) {
    fail("model.init_from: '{}' is not a folder (a Hugging Face checkpoint: config.json and "
         "model.safetensors)", dir);
  }
  const std::string path = (std::filesystem::path(dir) / "config.json").string();
  if (!std::filesystem::exists(path)) fail("model.init_from: '{}' holds no config.json", dir);
  try {
    return {nlohmann::json::parse(read_regular_file(path, "Hugging Face config")), path};
  } catch (const nlohmann::json::exception& error) {
    fail("{}: not valid JSON ({})", path, error.what());
  }
}

}  // namespace

void apply_init_from(Config& config, const std::set<std::string>& given_fields) {
  if (config.model.init_from.empty()) return;
  const auto [json, path] = init_from_config(config.model.init_from);
  for (const auto& [key, value] : model_fields_of(json, path)) {
    const FieldSpec& field = *find_field(key);
    Config wanted = config;
    set_field_from_string(wanted, key, value);
    const std::string given = field_value_string(config, field);
    const std::string described = field_value_string(wanted, field);
    if (given != described && given_fields.count(key) > 0) {
      fail("{} = {} is given beside model.init_from, whose {} says {}: leave it out or make "
           "them agree", key, given, path, described);
    }
    config = wanted;
  }
}

namespace {

// The architecture and shape of the model, its weights stored in `dtype`.
nlohmann::json architecture_json_of(const ModelConfig& model, const std::string& dtype) {
  const bool tied = head_is_tied(model);
  if (model.kind == "gpt") {
    return {{"architectures", {"GPT2LMHeadModel"}},
            {"model_type", "gpt2"},
            {"vocab_size", model.vocab_size},
            {"n_embd", model.d_model},
            {"n_head", model.heads},
            {"n_layer", model.layers},
            {"n_positions", position_rows(model)},
            {"n_inner", default_ffn_hidden(model)},
            {"layer_norm_epsilon", model.norm_eps},
            {"activation_function", model.activation == "gelu_tanh" ? "gelu_new" : "gelu"},
            // pipetrain trains without dropout: the exported model computes what it trained
            {"resid_pdrop", 0.0}, {"embd_pdrop", 0.0}, {"attn_pdrop", 0.0},
            {"tie_word_embeddings", tied},
            {"dtype", dtype}};
  }
  if (model.kind == "llama") {
    return {{"architectures", {"LlamaForCausalLM"}},
            {"model_type", "llama"},
            {"vocab_size", model.vocab_size},
            {"hidden_size", model.d_model},
            {"intermediate_size", default_ffn_hidden(model)},
            {"num_hidden_layers", model.layers},
            {"num_attention_heads", model.heads},
            {"num_key_value_heads", key_value_heads(model)},
            {"head_dim", model.d_model / model.heads},
            {"hidden_act", "silu"},
            {"max_position_embeddings", model.seq_len},
            {"rms_norm_eps", model.norm_eps},
            {"rope_parameters", rope_parameters_of(model)},
            {"attention_bias", false},
            {"mlp_bias", false},
            {"attention_dropout", 0.0},
            {"tie_word_embeddings", tied},
            {"dtype", dtype}};
  }
  fail("export --format hf: model.kind '{}' has no Hugging Face form; gpt and llama do", model.kind);
}

}  // namespace

nlohmann::json fields_kept_from(const ModelConfig& model, const std::string& started_from) {
  nlohmann::json kept = {{"bos_token_id", nullptr}, {"eos_token_id", nullptr}};
  if (started_from.empty() || !std::filesystem::exists(std::filesystem::path(started_from) / "config.json")) {
    return kept;
  }
  const nlohmann::json original = init_from_config(started_from).first;
  for (const char* key : {"bos_token_id", "eos_token_id", "pad_token_id"}) {
    if (original.contains(key)) kept[key] = original[key];
  }
  // Llama's context: the longer of the one it was made for and the one it was trained at.
  // (GPT-2's position table is model.positions, which init_from sets.)
  const auto context = original.find("max_position_embeddings");
  if (model.kind == "llama" && context != original.end() && context->is_number_integer()) {
    kept["max_position_embeddings"] = std::max(context->get<int64_t>(), model.seq_len);
  }
  return kept;
}

const std::vector<std::string>& companion_files() {
  static const std::vector<std::string> names = {
      "tokenizer.json",     "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json",
      "tokenizer.model",    "vocab.json",            "merges.txt",              "chat_template.jinja",
      "generation_config.json"};
  return names;
}

nlohmann::json config_json_of(const ModelConfig& model, const std::string& dtype, const std::string& started_from) {
  nlohmann::json json = architecture_json_of(model, dtype);
  json.update(fields_kept_from(model, started_from));
  return json;
}

}  // namespace pipetrain::hf
