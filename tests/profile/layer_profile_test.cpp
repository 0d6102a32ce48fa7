#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "plan/plan_file.h"
#include "plan/plan_report.h"
#include "plan/planner.h"
#include "profile/layer_profile.h"
#include "profile/link_profile.h"

namespace pipetrain {
namespace {

Config tiny() {
  Config c;
  c.model.layers = 2;
  c.model.d_model = 32;
  c.model.heads = 4;
  c.model.seq_len = 16;
  return c;
}

const plan::ModelProfile& tiny_profile() {
  static const plan::ModelProfile profile = [] {
    profile::ProfileOptions options;
    options.microbatch_sizes = {1, 4};
    options.repeats = 1;
    return profile::profile_model_layers(tiny(), options, nullptr);
  }();
  return profile;
}

TEST(LayerProfile, MeasuresEveryLayerAtEverySize) {
  const auto& profile = tiny_profile();
  ASSERT_EQ(profile.layers.size(), 4u);  // embedding, 2 blocks, head
  EXPECT_EQ(profile.layers.front().name, "embedding");
  EXPECT_EQ(profile.layers.back().name, "head");
  EXPECT_DOUBLE_EQ(profile.layers[0].param_bytes, 4.0 * (256 + 16) * 32);
  EXPECT_DOUBLE_EQ(profile.layers[1].param_bytes, 4.0 * (12 * 32 * 32 + 13 * 32));
  EXPECT_DOUBLE_EQ(profile.layers[3].param_bytes, 4.0 * (256 * 32 + 2 * 32));  // tied copy + norm
  for (const auto& layer : profile.layers) {
    ASSERT_EQ(layer.by_microbatch.size(), 2u);
    for (const auto& m : layer.by_microbatch) {
      EXPECT_GT(m.forward_s, 0) << layer.name;
      EXPECT_GT(m.backward_s, 0) << layer.name;
      EXPECT_GT(m.weight_s, 0) << layer.name;  // the split's passes, each timed
      if (layer.name != "embedding") {
        EXPECT_GT(m.input_s, 0) << layer.name;
      }
    }
    EXPECT_DOUBLE_EQ(layer.by_microbatch[1].output_bytes, 4 * layer.by_microbatch[0].output_bytes);
    for (const auto& m : layer.by_microbatch) {  // a GPT's passes never wait for a GPU
      EXPECT_EQ(m.host_reads_forward, 0) << layer.name;
      EXPECT_EQ(m.host_reads_backward, 0) << layer.name;
    }
  }
  // The token input takes no gradient: the embedding's B does nothing, its W is its backward.
  for (const auto& m : profile.layers[0].by_microbatch) {
    EXPECT_EQ(m.input_s, 0);
    EXPECT_EQ(m.weight_s, m.backward_s);
  }
}

// What a zero-bubble B pass holds for its W pass, measured on each layer: per token, a block's
// output gradients of q/k/v, the projection, fc and fc_out, one at each linear's addmm, plus the
// two norms' (5 h + 4 h + 2 h = 11 h), the head's norm and logits (h + V), the embedding none
// (token input: its whole backward is W).
TEST(LayerProfile, MeasuresTheWeightPassGradientsEachLayerHolds) {
  const auto& profile = tiny_profile();
  const double h = 32, vocab = 256;
  for (const auto& m : profile.layers[0].by_microbatch) EXPECT_EQ(m.weight_pass_bytes, 0);
  for (size_t i = 0; i < 2; ++i) {
    const auto& block = profile.layers[1].by_microbatch[i];
    const double tokens = double(block.microbatch) * 16;
    EXPECT_DOUBLE_EQ(block.weight_pass_bytes, 4 * tokens * 11 * h);
    EXPECT_DOUBLE_EQ(profile.layers[3].by_microbatch[i].weight_pass_bytes, 4 * tokens * (h + vocab));
  }
  EXPECT_DOUBLE_EQ(plan::layer_costs(profile, 4)[2].weight_pass_bytes,
                   profile.layers[2].by_microbatch[1].weight_pass_bytes);
}

TEST(LayerProfile, JsonRoundTripAndLayerCosts) {
  const auto& profile = tiny_profile();
  const auto parsed = plan::model_profile_from_json(plan::to_json(profile), "mem");
  EXPECT_EQ(plan::to_json(parsed), plan::to_json(profile));
  EXPECT_EQ(parsed.shape.layers, 2);
  EXPECT_EQ(parsed.shape.name, "gpt");  // a GPT's shape, which `train --plan` sets
  EXPECT_EQ(parsed.fixed_microbatch, 0);  // any size trains the same model
  EXPECT_EQ(parsed.device, "cpu");  // where tiny_profile timed its layers
  auto older = plan::to_json(profile);
  older.erase("device");  // profiles written before the field: timed on the CPU
  EXPECT_EQ(plan::model_profile_from_json(older, "old").device, "cpu");
  const auto costs = plan::layer_costs(parsed, 4);
  ASSERT_EQ(costs.size(), 4u);
  EXPECT_DOUBLE_EQ(costs[1].forward_s, profile.layers[1].by_microbatch[1].forward_s);
  EXPECT_DOUBLE_EQ(costs[1].optimizer_bytes, 3 * costs[1].param_bytes);
  EXPECT_THROW(plan::layer_costs(parsed, 3), UserError);
  EXPECT_THROW(plan::model_profile_from_json({{"format", "other"}}, "x"), UserError);
  EXPECT_DOUBLE_EQ(costs[2].input_s, profile.layers[2].by_microbatch[1].input_s);
  // Profiles written before B was timed: B is what the backward leaves beside W; before the
  // host reads were counted: -1, not 0 (none).
  for (auto& layer : older["layers"])
    for (auto& m : layer["by_microbatch"]) m.erase("input_s"), m.erase("host_reads_forward");
  const auto older_parsed = plan::model_profile_from_json(older, "old");
  EXPECT_EQ(older_parsed.layers[1].by_microbatch[0].host_reads_forward, -1);
  EXPECT_EQ(older_parsed.layers[1].by_microbatch[0].host_reads_backward, 0);
  const auto older_costs = plan::layer_costs(older_parsed, 4);
  EXPECT_DOUBLE_EQ(plan::input_gradient_s(older_costs[2]), costs[2].backward_s - costs[2].weight_s);
  const auto recomputed = plan::with_recomputation(costs);
  EXPECT_DOUBLE_EQ(recomputed[2].backward_s, costs[2].backward_s + costs[2].forward_s);
  EXPECT_DOUBLE_EQ(recomputed[2].input_s, costs[2].input_s + costs[2].forward_s);  // B recomputes
  EXPECT_DOUBLE_EQ(recomputed[2].weight_s, costs[2].weight_s);
  EXPECT_DOUBLE_EQ(recomputed[2].activation_bytes, costs[1].output_bytes);
}

// BatchNorm trains differently at each microbatch size: the CNN is timed at its run's microbatch
// only (what its plans keep), and its profile names its kind without a GPT shape.
TEST(LayerProfile, ABatchNormModelIsTimedAtItsRunsMicrobatchOnly) {
  Config c;
  c.model.kind = "cnn";
  c.model.layers = 1;
  c.model.d_model = 2;
  c.train.batch_size = 12;
  c.train.microbatches = 2;  // 6 images a microbatch
  profile::ProfileOptions options;
  options.repeats = 1;
  const auto profile = profile::profile_model_layers(c, options, nullptr);
  EXPECT_EQ(profile.shape.name, "cnn");
  EXPECT_EQ(profile.shape.layers, 0);
  EXPECT_EQ(profile.fixed_microbatch, 6);
  EXPECT_NE(profile.microbatch_dependence.find("BatchNorm"), std::string::npos);
  ASSERT_EQ(profile.layers.size(), 3u);  // stem, 1 block, head
  for (const auto& layer : profile.layers) {
    ASSERT_EQ(layer.by_microbatch.size(), 1u) << layer.name;
    EXPECT_EQ(layer.by_microbatch[0].microbatch, 6) << layer.name;
  }
  const auto parsed = plan::model_profile_from_json(plan::to_json(profile), "mem");
  EXPECT_EQ(parsed.fixed_microbatch, 6);
  EXPECT_EQ(parsed.microbatch_dependence, profile.microbatch_dependence);
  options.microbatch_sizes = {4, 8};
  try {
    profile::profile_model_layers(c, options, nullptr);
    ADD_FAILURE() << "sizes without the run's microbatch were timed";
  } catch (const UserError& error) {
    EXPECT_NE(std::string(error.what()).find("--microbatch-sizes 4,8 leaves out the run's microbatch of 6 samples"),
              std::string::npos) << error.what();
  }
}

TEST(LayerProfile, PlannerRunsOnAMeasuredProfile) {
  plan::PlanRequest request;
  request.profile = tiny_profile();
  request.model = request.profile->shape;
  request.cluster = plan::load_cluster("this-machine", std::string(PIPETRAIN_SOURCE_DIR) + "/clusters");
  request.global_batch = 8;
  request.microbatch_sizes = {1, 4};
  const auto result = plan::plan_training(request);
  ASSERT_FALSE(result.ranked.empty());
  for (const auto& c : result.ranked) EXPECT_EQ(c.stages * c.dp_width, 2);
}

// The overrides a profile was measured with (its precision, its chunked loss) go with it into
// the plan's config_fields, which `train --plan` applies: the plan trains what was timed. The
// last value of a key given twice wins, as on the command line; a field the config does not know
// is blamed on the profile.
TEST(LayerProfile, APlanCarriesTheProfilesConfigFields) {
  plan::ModelProfile profile = tiny_profile();
  profile.config_fields = {{"model.dtype", "float32"}, {"model.loss_chunk_tokens", "8"}, {"model.dtype", "float64"}};
  const auto parsed = plan::model_profile_from_json(plan::to_json(profile), "mem");
  const std::vector<std::pair<std::string, std::string>> expected = {{"model.dtype", "float64"},
                                                                     {"model.loss_chunk_tokens", "8"}};
  EXPECT_EQ(parsed.config_fields, expected);
  plan::PlanRequest request;
  request.profile = parsed;
  request.model = parsed.shape;
  request.cluster = plan::load_cluster("this-machine", std::string(PIPETRAIN_SOURCE_DIR) + "/clusters");
  request.global_batch = 8;
  request.microbatch_sizes = {1, 4};
  const auto result = plan::plan_training(request);
  ASSERT_FALSE(result.ranked.empty());
  const auto json = plan::plan_to_json(request, result.ranked.front());
  EXPECT_EQ(json.at("config_fields"), (nlohmann::json{{"model.dtype", "float64"}, {"model.loss_chunk_tokens", "8"}}));
  const auto fields = plan::plan_config_overrides(json, "plan.json");
  EXPECT_NE(std::find(fields.begin(), fields.end(), std::pair<std::string, std::string>{"model.dtype", "float64"}),
            fields.end());
  auto unknown = plan::to_json(profile);
  unknown["config_fields"] = {{"model.dtypo", "float64"}};
  try {
    plan::model_profile_from_json(unknown, "p.json");
    ADD_FAILURE() << "an unknown field was read";
  } catch (const UserError& error) {
    EXPECT_STREQ(error.what(), "p.json: config_fields names an unknown config field 'model.dtypo'");
  }
}

// A GPU node's description (bench/gpu_check.sh plans from a GPU profile on it): 16 devices of
// 141 GB, NVLink inside (3600 Gbit/s = 450 GB/s), InfiniBand between nodes; the planner uses them
// all when the batch allows.
TEST(LayerProfile, PlansOnTheH200ClusterUseItsLinks) {
  const auto cluster = plan::load_cluster("hgx-h200-x2", std::string(PIPETRAIN_SOURCE_DIR) + "/clusters");
  EXPECT_EQ(cluster.nodes * cluster.devices_per_node, 16);
  EXPECT_DOUBLE_EQ(cluster.device_memory_bytes, 141e9);
  EXPECT_DOUBLE_EQ(cluster.intra_node_bandwidth, 450e9);
  plan::PlanRequest request;
  request.profile = tiny_profile();
  request.model = request.profile->shape;
  request.cluster = cluster;
  request.global_batch = 16;
  request.microbatch_sizes = {1};
  const auto result = plan::plan_training(request);
  ASSERT_FALSE(result.ranked.empty());
  EXPECT_EQ(result.ranked.front().stages * result.ranked.front().dp_width, 16);
}

}  // namespace
}  // namespace pipetrain

namespace pipetrain::profile {
namespace {

TEST(LinkProfile, FitRecoversLatencyAndBandwidth) {
  std::vector<LinkSample> samples;
  for (double bytes : {4e3, 6.4e4, 1e6, 1.6e7}) samples.push_back({bytes, 50e-6 + bytes / 2e9});
  const plan::LinkFit fit = fit_link(samples);
  EXPECT_NEAR(fit.latency_s, 50e-6, 1e-9);
  EXPECT_NEAR(fit.bandwidth, 2e9, 1e3);
  EXPECT_LT(fit.max_error, 1e-9);
  EXPECT_THROW(fit_link({samples[0]}), UserError);
}

// Every fit field survives JSON exactly, an infinite bandwidth (no per-byte part) too, which
// JSON has no number for.
TEST(LinkProfile, LinksRoundTripThroughJson) {
  plan::ModelProfile profile;
  profile.layers.resize(1);
  profile.links = {true, {5.5e-5, 2.75e9, 0.125}, {3.5e-4, 1.25e9, 0.25}, {2.5e-5, INFINITY, 0.5}};
  const auto back = plan::model_profile_from_json(plan::to_json(profile), "test").links;
  EXPECT_TRUE(back.measured);
  for (const auto& [read, written] : {std::pair{back.p2p, profile.links.p2p},
                                      std::pair{back.all_reduce, profile.links.all_reduce},
                                      std::pair{back.send_post, profile.links.send_post}}) {
    EXPECT_EQ(read.latency_s, written.latency_s);
    EXPECT_EQ(read.bandwidth, written.bandwidth);
    EXPECT_EQ(read.max_error, written.max_error);
  }
  EXPECT_TRUE(std::isinf(back.send_post.bandwidth));
  profile.links.measured = false;  // no links: none written, none read
  EXPECT_FALSE(plan::to_json(profile).contains("links"));
  EXPECT_FALSE(plan::model_profile_from_json(plan::to_json(profile), "test").links.measured);
}

// Two Gloo ranks on loopback: 16 MiB take far longer than 4 KiB on any machine, so each fit
// has a finite bandwidth and a finite error.
TEST(LinkProfile, LoopbackLinksAreMeasured) {
  const plan::LinkProfile links = measure_local_links(2);
  ASSERT_TRUE(links.measured);
  for (const auto& fit : {links.p2p, links.all_reduce}) {
    EXPECT_TRUE(std::isfinite(fit.bandwidth));
    EXPECT_GT(fit.bandwidth, 0);
    EXPECT_GE(fit.latency_s, 0);
    EXPECT_TRUE(std::isfinite(fit.max_error));
  }
}

}  // namespace
}  // namespace pipetrain::profile
