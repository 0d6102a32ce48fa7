#include "plan/profile_json.h"

#include <cmath>

#include "core/error.h"
#include "plan/plan_file.h"

namespace pipetrain::plan {
namespace {

// An unbounded bandwidth (a fit with no per-byte part) is written as null: JSON has no infinity.
nlohmann::json link_json(const LinkFit& fit) {
  nlohmann::json bandwidth = std::isfinite(fit.bandwidth) ? nlohmann::json(fit.bandwidth) : nullptr;
  return {{"latency_s", fit.latency_s}, {"bandwidth_bytes_per_s", bandwidth},
          {"max_fit_error", fit.max_error}};
}

LinkFit link_from_json(const nlohmann::json& json) {
  const auto& bandwidth = json.at("bandwidth_bytes_per_s");
  return {json.at("latency_s").get<double>(), bandwidth.is_null() ? INFINITY : bandwidth.get<double>(),
          json.at("max_fit_error").get<double>()};
}

}  // namespace

nlohmann::json to_json(const ModelProfile& profile) {
  nlohmann::json layers = nlohmann::json::array();
  for (const auto& layer : profile.layers) {
    nlohmann::json sizes = nlohmann::json::array();
    for (const auto& m : layer.by_microbatch) {
      sizes.push_back({{"microbatch", m.microbatch}, {"forward_s", m.forward_s},
                       {"backward_s", m.backward_s}, {"weight_s", m.weight_s},
                       {"activation_bytes", m.activation_bytes}, {"output_bytes", m.output_bytes},
                       {"weight_pass_bytes", m.weight_pass_bytes}, {"input_s", m.input_s},
                       {"workspace_bytes", m.workspace_bytes},
                       {"host_reads_forward", m.host_reads_forward},
                       {"host_reads_backward", m.host_reads_backward}});
    }
    layers.push_back({{"name", layer.name}, {"param_bytes", layer.param_bytes},
                      {"optimizer_s", layer.optimizer_s}, {"by_microbatch", sizes}});
  }
  const GptShape& shape = profile.shape;
  nlohmann::json json = {{"format", "pipetrain-profile-1"},
          {"description", profile.description},
          {"shape", {{"name", shape.name}, {"layers", shape.layers}, {"hidden", shape.hidden},
                     {"heads", shape.heads}, {"seq_len", shape.seq_len}, {"vocab", shape.vocab}}},
          {"model_kind", profile.model_kind},
          {"threads", profile.threads},
          {"device", profile.device},
          {"layers", layers}};
  if (profile.fixed_microbatch > 0) {
    json["fixed_microbatch"] = {{"microbatch", profile.fixed_microbatch}, {"why", profile.microbatch_dependence}};
  }
  if (!profile.config_fields.empty()) json["config_fields"] = config_fields_to_json(profile.config_fields);
  if (profile.links.measured) {
    json["links"] = {{"p2p", link_json(profile.links.p2p)},
                     {"all_reduce", link_json(profile.links.all_reduce)},
                     {"send_post", link_json(profile.links.send_post)}};
  }
  return json;
}

ModelProfile model_profile_from_json(const nlohmann::json& json, const std::string& origin) {
  ModelProfile profile;
  try {
    if (json.at("format") != "pipetrain-profile-1") fail("{}: not a pipetrain profile", origin);
    profile.description = json.at("description").get<std::string>();
    profile.threads = json.at("threads").get<int>();
    profile.device = json.value("device", std::string("cpu"));
    profile.model_kind = json.value("model_kind", std::string("gpt"));
    const auto& shape = json.at("shape");
    profile.shape = {shape.at("name").get<std::string>(), shape.at("layers").get<int64_t>(),
                     shape.at("hidden").get<int64_t>(), shape.at("heads").get<int64_t>(),
                     shape.at("seq_len").get<int64_t>(), shape.at("vocab").get<int64_t>()};
    for (const auto& layer : json.at("layers")) {
      LayerProfile parsed;
      parsed.name = layer.at("name").get<std::string>();
      parsed.param_bytes = layer.at("param_bytes").get<double>();
      parsed.optimizer_s = layer.at("optimizer_s").get<double>();
      for (const auto& m : layer.at("by_microbatch")) {
        // By name, not by position: a field added to LayerMeasurement cannot shift the others.
        LayerMeasurement read;
        read.microbatch = m.at("microbatch").get<int64_t>();
        read.forward_s = m.at("forward_s").get<double>();
        read.backward_s = m.at("backward_s").get<double>();
        read.weight_s = m.at("weight_s").get<double>();
        read.activation_bytes = m.at("activation_bytes").get<double>();
        read.output_bytes = m.at("output_bytes").get<double>();
        read.weight_pass_bytes = m.value("weight_pass_bytes", 0.0);
        read.input_s = m.value("input_s", -1.0);
        read.workspace_bytes = m.value("workspace_bytes", 0.0);
        read.host_reads_forward = m.value("host_reads_forward", int64_t(-1));
        read.host_reads_backward = m.value("host_reads_backward", int64_t(-1));
        parsed.by_microbatch.push_back(read);
      }
      profile.layers.push_back(std::move(parsed));
    }
    if (json.contains("fixed_microbatch")) {
      profile.fixed_microbatch = json["fixed_microbatch"].at("microbatch").get<int64_t>();
      profile.microbatch_dependence = json["fixed_microbatch"].at("why").get<std::string>();
    }
    if (json.contains("links")) {
      const auto& links = json["links"];
      profile.links = {true, link_from_json(links.at("p2p")), link_from_json(links.at("all_reduce")),
                       links.contains("send_post") ? link_from_json(links.at("send_post")) : LinkFit{}};
    }
  } catch (const nlohmann::json::exception& error) {
    fail("{}: malformed profile: {}", origin, error.what());
  }
  if (profile.layers.empty()) fail("{}: the profile has no layers", origin);
  profile.config_fields = config_fields_from_json(json, origin);
  return profile;
}

std::vector<LayerCost> layer_costs(const ModelProfile& profile, int64_t microbatch,
                                   double optimizer_bytes_per_param_byte) {
  std::vector<LayerCost> costs;
  for (const auto& layer : profile.layers) {
    const LayerMeasurement* found = nullptr;
    for (const auto& m : layer.by_microbatch) {
      if (m.microbatch == microbatch) found = &m;
    }
    if (found == nullptr) fail("the profile has no measurements at microbatch size {}", microbatch);
    costs.push_back({layer.name, found->forward_s, found->backward_s, layer.param_bytes,
                     optimizer_bytes_per_param_byte * layer.param_bytes, found->activation_bytes,
                     found->output_bytes, layer.optimizer_s});
    if (found->weight_s > 0) costs.back().weight_s = found->weight_s;
    costs.back().input_s = found->input_s;
    costs.back().weight_pass_bytes = found->weight_pass_bytes;
    costs.back().workspace_bytes = found->workspace_bytes;
  }
  return costs;
}

std::vector<LayerCost> with_recomputation(std::vector<LayerCost> layers) {
  double input_bytes = 0;  // the embedding's input is token ids: negligible
  for (auto& layer : layers) {
    layer.input_s = input_gradient_s(layer) + layer.forward_s;  // the recomputed forward is B's
    layer.weight_s = weight_gradient_s(layer);
    layer.backward_s += layer.forward_s;
    layer.activation_bytes = input_bytes;
    input_bytes = layer.output_bytes;
  }
  return layers;
}

}  // namespace pipetrain::plan
