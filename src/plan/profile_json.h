#pragma once
// A measured model profile (`pipetrain profile` writes it): per layer and microbatch size, the
// forward, backward and weight-gradient times and the bytes the planner needs.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "plan/analytic.h"
#include "plan/partition.h"

namespace pipetrain::plan {

struct LayerMeasurement {
  int64_t microbatch = 1;
  double forward_s = 0, backward_s = 0;
  double weight_s = 0;  // the split backward's W pass (older profiles: backward_s less B)
  double activation_bytes = 0, output_bytes = 0;
  // Zero-bubble: the output gradients its split backward holds from B to W (measured; older
  // profiles: 0, counted as none).
  double weight_pass_bytes = 0;
  // The split backward's B pass (older profiles: -1, taken as backward_s - weight_s). B + W can
  // exceed backward_s: chunked cross-entropy recomputes its logits in each pass.
  double input_s = -1;
  // What the layer's passes hold for a moment beyond what they keep (Model::layer_work's
  // workspace: a convolution's scratch, a loss's logits); older profiles: 0.
  double workspace_bytes = 0;
  // Values one forward (the last layer's with its loss) and one backward read on the host
  // (device/host_reads.h): each makes a GPU's host wait, and stops a CUDA graph capturing the
  // pass. Older profiles: -1, not counted.
  int64_t host_reads_forward = -1, host_reads_backward = -1;
};

struct LayerProfile {
  std::string name;
  double param_bytes = 0;
  double optimizer_s = 0;  // one AdamW step over the layer's parameters
  std::vector<LayerMeasurement> by_microbatch;  // ascending microbatch size
};

// time(bytes) = latency_s + bytes / bandwidth (bytes/s), with the fit's worst relative error.
struct LinkFit {
  double latency_s = 0, bandwidth = 0, max_error = 0;
};

struct LinkProfile {
  bool measured = false;
  LinkFit p2p;         // one send/recv between two workers
  LinkFit all_reduce;  // a 2-worker all-reduce (bytes = the buffer size)
  // The sender's own time to post a send (Gloo writes to the socket in the caller's thread);
  // zero in profiles written before it was measured.
  LinkFit send_post;
};

struct ModelProfile {
  std::string description;  // model shape and machine
  GptShape shape;  // a GPT's shape; any other model: its name with layers = 0
  std::string model_kind = "gpt";  // model.kind (older profiles: GPTs)
  // A model that trains differently at each microbatch size (BatchNorm) is profiled at its run's
  // microbatch, which its plans keep (0: any size; older profiles); the reason, for messages.
  int64_t fixed_microbatch = 0;
  std::string microbatch_dependence;
  int threads = 1;
  std::string device = "cpu";  // where the layers were timed ("cpu", "cuda"); older profiles: cpu
  std::vector<LayerProfile> layers;
  LinkProfile links;  // absent from profiles written before links were measured
  // The `--section.field VALUE` overrides `pipetrain profile` was given (the model measured, as
  // the run config gives it): a plan from the profile carries them, as `plan --config` carries
  // its own, so `train RUN.toml --plan plan.json` trains the precision and loss that were timed.
  std::vector<std::pair<std::string, std::string>> config_fields;
};

nlohmann::json to_json(const ModelProfile& profile);
ModelProfile model_profile_from_json(const nlohmann::json& json, const std::string& origin);

// LayerCost list for a microbatch size the profile holds (UserError otherwise); optimizer
// bytes = `optimizer_bytes_per_param_byte` x param bytes (3: fp32 gradient, Adam m and v).
std::vector<LayerCost> layer_costs(const ModelProfile& profile, int64_t microbatch,
                                   double optimizer_bytes_per_param_byte = 3);

// Full recomputation: each layer stashes only its input and runs its forward again in backward.
std::vector<LayerCost> with_recomputation(std::vector<LayerCost> layers);

}  // namespace pipetrain::plan
