#include "core/config.h"

#include <cmath>

#include "core/error.h"
#include "core/files.h"
#include "core/model_presets.h"
#include "core/rope_scaling.h"
#include "core/text.h"
#include "core/toml_parse.h"

namespace pipetrain {
namespace {

std::string unknown_field_message(const std::string& key, const std::string& origin) {
  std::vector<std::string> keys;
  for (const auto& field : config_fields()) keys.push_back(field.key);
  std::string message = fmt::format("{}: unknown config field '{}'", origin, key);
  const std::string near = closest_match(key, keys);
  if (!near.empty()) message += fmt::format(" (did you mean '{}'?)", near);
  return message;
}

void check_bounds(const FieldSpec& field, double value, const std::string& origin) {
  if (!std::isfinite(value)) fail("{}: {} must be a finite number", origin, field.key);
  if (value < field.min || (field.min_excluded && value == field.min)) {
    fail("{}: {} must be {} {:.15g}, got {:.15g}", origin, field.key, field.min_excluded ? ">" : ">=", field.min, value);
  }
  if (value > field.max || (field.max_excluded && value == field.max)) {
    fail("{}: {} must be {} {:.15g}, got {:.15g}", origin, field.key, field.max_excluded ? "<" : "<=", field.max, value);
  }
}

void check_choice(const FieldSpec& field, const std::string& value, const std::string& origin) {
  if (field.choices.empty()) return;
  for (const auto& choice : field.choices) {
    if (choice == value) return;
  }
  fail("{}: {} must be one of {}, got '{}'", origin, field.key, join(field.choices, ", "), value);
}

void set_from_toml(Config& config, const FieldSpec& field, const toml::node& node,
                   const std::string& origin) {
  FieldPtr ptr = field.locate(config);
  if (auto** i = std::get_if<int64_t*>(&ptr)) {
    if (!node.is_integer()) fail("{}: {} must be an integer", origin, field.key);
    **i = node.as_integer()->get();
    check_bounds(field, static_cast<double>(**i), origin);
  } else if (auto** d = std::get_if<double*>(&ptr)) {
    if (node.is_integer()) {
      **d = static_cast<double>(node.as_integer()->get());
    } else if (node.is_floating_point()) {
      **d = node.as_floating_point()->get();
    } else {
      fail("{}: {} must be a number", origin, field.key);
    }
    check_bounds(field, **d, origin);
  } else {
    if (!node.is_string()) fail("{}: {} must be a string", origin, field.key);
    auto** s = std::get_if<std::string*>(&ptr);
    **s = node.as_string()->get();
    check_choice(field, **s, origin);
  }
}

}  // namespace

void apply_model_preset(Config& config, const std::string& name, const std::string& origin) {
  config.model.preset = name;
  if (name.empty()) return;
  const ModelPreset* preset = find_model_preset(name);
  if (preset == nullptr) {
    fail("{}: model.preset must be one of {}, got '{}'", origin, join(model_preset_names(), ", "), name);
  }
  config.model.layers = preset->layers;
  config.model.d_model = preset->d_model;
  config.model.heads = preset->heads;
  config.model.seq_len = preset->seq_len;
  config.model.vocab_size = preset->vocab_size;
  config.model.kind = preset->kind;
  config.model.kv_heads = preset->kv_heads;
  config.model.ffn_hidden = preset->ffn_hidden;
  config.model.rope_theta = preset->rope_theta;
  config.model.rope_scaling = preset->rope_scaling;
  config.model.head = preset->head;
  config.model.norm_eps = preset->norm_eps;
}

Config parse_config_toml(const std::string& text, const std::string& origin) {
  const toml::table root = parse_toml_or_fail(text, origin);
  Config config;
  // The preset first: the file's own shape fields override it, wherever they stand.
  if (const auto* preset = root["model"]["preset"].node()) {
    if (!preset->is_string()) fail("{}: model.preset must be a string", origin);
    apply_model_preset(config, preset->as_string()->get(), origin);
  }
  for (const auto& [section_key, section_node] : root) {
    const std::string section(section_key.str());
    const auto* table = section_node.as_table();
    if (table == nullptr) {
      fail("{}: '{}' must be a [section] table of fields", origin, section);
    }
    for (const auto& [name_key, node] : *table) {
      const std::string key = section + "." + std::string(name_key.str());
      const FieldSpec* field = find_field(key);
      if (field == nullptr) throw UserError(unknown_field_message(key, origin));
      if (key != "model.preset") set_from_toml(config, *field, node, origin);
    }
  }
  validate(config);
  return config;
}

Config load_config_file(const std::string& path) {
  return parse_config_toml(read_regular_file(path, "config file"), path);
}

std::set<std::string> config_file_fields(const std::string& path) {
  std::set<std::string> keys;
  for (const auto& [section, node] : parse_toml_or_fail(read_regular_file(path, "config file"), path)) {
    if (const auto* table = node.as_table()) {
      for (const auto& [name, value] : *table) keys.insert(std::string(section.str()) + "." + std::string(name.str()));
    }
  }
  return keys;
}

void set_field_from_string(Config& config, const std::string& key, const std::string& value) {
  const FieldSpec* field = find_field(key);
  const std::string origin = "--" + key;
  if (field == nullptr) throw UserError(unknown_field_message(key, "command line"));
  if (key == "model.preset") return apply_model_preset(config, value, origin);
  FieldPtr ptr = field->locate(config);
  if (auto** i = std::get_if<int64_t*>(&ptr)) {
    auto parsed = parse_int(value);
    if (!parsed) fail("{}: expected an integer, got '{}'", origin, value);
    **i = *parsed;
    check_bounds(*field, static_cast<double>(**i), origin);
  } else if (auto** d = std::get_if<double*>(&ptr)) {
    auto parsed = parse_double(value);
    if (!parsed) fail("{}: expected a number, got '{}'", origin, value);
    **d = *parsed;
    check_bounds(*field, **d, origin);
  } else {
    **std::get_if<std::string*>(&ptr) = value;
    check_choice(*field, value, origin);
  }
}

namespace {

// The fields only the decoders (gpt, llama) read, checked against each other.
void validate_decoder_shape(const ModelConfig& m) {
  const int64_t kv_heads = key_value_heads(m);
  if (m.heads % kv_heads != 0) {
    fail("model.kv_heads ({}) must divide model.heads ({})", kv_heads, m.heads);
  }
  if (m.kind != "llama" && kv_heads != m.heads) {
    fail("model.kv_heads ({}) is for model.kind = \"llama\" (grouped-query attention); model.kind "
         "\"{}\" has as many key/value heads as heads", m.kv_heads, m.kind);
  }
  if (position_rows(m) < m.seq_len) {
    fail("model.positions ({}) must be at least model.seq_len ({})", m.positions, m.seq_len);
  }
  if (m.kind == "llama" && (m.d_model / m.heads) % 2 != 0) {
    fail("model.kind = \"llama\" needs an even head width for its rotary positions: model.d_model "
         "({}) / model.heads ({}) is {}", m.d_model, m.heads, m.d_model / m.heads);
  }
  if (m.kind == "llama" && m.activation == "gelu_tanh") {
    fail("model.activation = \"gelu_tanh\" is for model.kind = \"gpt\"; llama's MLP is SwiGLU");
  }
  parse_rope_scaling(m.rope_scaling, "model.rope_scaling");
}

}  // namespace

int64_t default_ffn_hidden(const ModelConfig& model) {
  if (model.ffn_hidden > 0) return model.ffn_hidden;
  if (model.kind == "llama") return (8 * model.d_model / 3 + 63) / 64 * 64;
  return 4 * model.d_model;
}

int64_t key_value_heads(const ModelConfig& model) {
  return model.kv_heads > 0 ? model.kv_heads : model.heads;
}

int64_t position_rows(const ModelConfig& model) {
  return model.positions > 0 ? model.positions : model.seq_len;
}

bool head_is_tied(const ModelConfig& model) {
  if (model.head == "auto") return model.kind != "llama";
  return model.head == "tied";
}

void validate(const Config& c) {
  if (c.model.d_model % c.model.heads != 0) {
    fail("model.heads ({}) must divide model.d_model ({})", c.model.heads, c.model.d_model);
  }
  validate_decoder_shape(c.model);
  if (c.train.batch_size % c.train.microbatches != 0) {
    fail("train.microbatches ({}) must divide train.batch_size ({})", c.train.microbatches,
         c.train.batch_size);
  }
  if (c.train.min_lr > c.train.lr && c.train.lr == 0) {  // (weights that never move: allowed)
    fail("train.lr = 0 holds the weights still, but the schedule's floor train.min_lr is {:g}: set "
         "train.min_lr = 0 too, or give train.lr > 0", c.train.min_lr);
  }
  if (c.train.min_lr > c.train.lr) {
    fail("train.min_lr ({:g}) must not exceed train.lr ({:g})", c.train.min_lr, c.train.lr);
  }
  if (c.log.profile_step > c.train.steps) {
    fail("log.profile_step {} is after the run's last step (train.steps {}): nothing would be profiled",
         c.log.profile_step, c.train.steps);
  }
  if (c.data.path.empty()) fail("data.path must not be empty");
  if (c.data.format == "bytes" && c.model.vocab_size < 256) {
    fail("model.vocab_size must be >= 256 for byte-level text (data.format = \"bytes\"), got {}",
         c.model.vocab_size);
  }
  if (c.data.val_split != "validation" && c.data.format != "speech") {
    fail("data.val_split = \"{}\" reads a speech feature file's other held-out splits; data.format "
         "\"{}\" holds out one, its validation split", c.data.val_split, c.data.format);
  }
  if (c.data.format == "bytes" && !c.data.tokenizer.empty()) {
    fail("data.tokenizer is for token files: set data.format = \"tokens\" too (docs/data.md)");
  }
  if (c.train.optimizer == "muon" && c.train.lr <= 0) {
    fail("train.optimizer = \"muon\" needs train.lr > 0 (Muon's learning rate follows its schedule)");
  }
  if (c.train.optimizer == "muon" && c.pipeline.zero1 == 1) {
    fail("train.optimizer = \"muon\" cannot run with pipeline.zero1 = 1 (Muon orthogonalises "
         "whole matrices; ZeRO-1 shards a flat buffer): use pipeline.zero1 = 0");
  }
  if (c.pipeline.zero1 == 1 && c.pipeline.dp_width < 2) {
    fail("pipeline.zero1 = 1 shards the optimizer state over data-parallel replicas: it needs "
         "pipeline.dp_width >= 2 (got {})", c.pipeline.dp_width);
  }
}

std::string field_value_string(const Config& config, const FieldSpec& field) {
  FieldPtr ptr = field.locate(const_cast<Config&>(config));
  if (auto** i = std::get_if<int64_t*>(&ptr)) return std::to_string(**i);
  if (auto** d = std::get_if<double*>(&ptr)) return format_toml_double(**d);
  return toml_quote(**std::get_if<std::string*>(&ptr));
}

std::string to_toml(const Config& config) {
  std::string out;
  std::string section;
  for (const auto& field : config_fields()) {
    const auto dot = field.key.find('.');
    const std::string this_section = field.key.substr(0, dot);
    if (this_section != section) {
      out += (section.empty() ? "" : "\n") + fmt::format("[{}]\n", this_section);
      section = this_section;
    }
    out += fmt::format("{} = {}\n", field.key.substr(dot + 1), field_value_string(config, field));
  }
  return out;
}

std::string config_reference_markdown() {
  const Config defaults;
  std::string out =
      "# Configuration reference\n\n"
      "Generated by `pipetrain config --reference`; a test keeps this file equal to it.\n"
      "Every field can be set in a TOML file (`[section]` then `field = value`) or on the\n"
      "command line as `--section.field VALUE`. Unknown fields and wrong types are errors.\n\n"
      "| field | type | default | meaning |\n|---|---|---|---|\n";
  for (const auto& field : config_fields()) {
    FieldPtr ptr = field.locate(const_cast<Config&>(defaults));
    std::string type = std::holds_alternative<int64_t*>(ptr)  ? "integer"
                       : std::holds_alternative<double*>(ptr) ? "number"
                                                              : "string";
    std::string meaning = field.help;
    if (!field.choices.empty()) meaning += " (one of: " + join(field.choices, ", ") + ")";
    const bool number = !std::holds_alternative<std::string*>(ptr);
    const char* above = field.min_excluded ? ">" : ">=";
    if (number && field.min > -1e300 && field.max < 1e300) {
      meaning += field.min_excluded || field.max_excluded
                     ? fmt::format("; {} {:.15g} and {} {:.15g}", above, field.min, field.max_excluded ? "<" : "<=", field.max)
                     : fmt::format("; {:.15g} to {:.15g}", field.min, field.max);
    } else if (number && field.min > -1e300) {
      meaning += fmt::format("; {} {:.15g}", above, field.min);
    }
    out += fmt::format("| `{}` | {} | `{}` | {} |\n", field.key, type,
                       field_value_string(defaults, field), meaning);
  }
  return out;
}

}  // namespace pipetrain
