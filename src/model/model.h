#pragma once
// The model interface: everything the engine (runtime, trainers, references, checkpoints,
// profiler) may know about a model. A model is an ordered list of stage-cuttable layers; a
// pipeline stage holds the layers [first, last) as one StageModule the model builds. GPT is one
// implementation (model/gpt_model.h); model/registry.h picks one by model.kind.
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "model/parameter_role.h"
#include "model/slice_cache.h"

namespace pipetrain {

// The shape and element type of a tensor a microbatch of `rows` samples brings or produces.
struct TensorSpec {
  std::vector<int64_t> shape;
  torch::ScalarType dtype = torch::kFloat32;
};

// What one microbatch brings: the first layer's input and what the last layer's loss reads.
struct Microbatch {
  torch::Tensor inputs, labels;
};


// One parameter used by several layers (GPT's token embedding and its head), possibly on
// different stages. A stage holding some of the copies' layers holds one tensor, named as the
// first of them it holds; the copies' gradients are summed wherever they live (so identical
// updates keep them equal), and the parameter enters the global gradient norm and the
// single-process checkpoint once, under copies[0].
struct SharedParameter {
  struct Copy {
    int64_t layer;
    std::string name;  // the parameter's full name in a StageModule holding `layer`
  };
  std::vector<Copy> copies;
};

// Analytic work of one layer for one microbatch (the planner's balance).
struct LayerWork {
  double forward_flops = 0;
  // The rows its matrix products run over (a transformer's tokens in the microbatch): with few a
  // device reaches less of its rate (plan::ClusterSpec::sustained_flops). 0 = many, no slowdown.
  double product_rows = 0;
  double parameters = 0;
  double output_values = 0;  // the activation it hands to the next layer
  // Values its forward's memory-bound passes read and write beyond its output (a BatchNorm's
  // statistics and normalisation, a ReLU, a residual sum), in activation values: their time is
  // the memory bandwidth's, not the products'. 0 = none counted.
  double forward_traffic_values = 0;
  // Its backward's products and memory-bound values; < 0: twice the forward's (a linear's input
  // and weight gradients). A layer that does backward work in its forward (the sample-wise
  // transducer loss pushes each utterance's gradient through the joint at once) counts it there.
  double backward_flops = -1, backward_traffic_values = -1;
  // The operators its forward and its backward call (counted_work's): each costs a device a fixed
  // time however little it does (a cluster's operator_us, launch_us). 0 = none counted.
  double forward_operators = 0, backward_operators = 0;
  // Where a GPU does part of the layer in kernels of its own that a CPU does in ATen operators
  // (the GPT head's fused loss: one kernel each way, where a CPU runs several a block of rows),
  // the passes' traffic and operators on a GPU; < 0: the same as above.
  struct GpuPasses {
    double forward_traffic_values = -1, backward_traffic_values = -1;
    double forward_operators = -1, backward_operators = -1;
  } on_gpu;
  // Memory, in values of the activation dtype (under mixed precision a float32 element counts
  // as two bfloat16 values; the planner's memory model; 0 = unknown: the
  // planner then counts output_values). Values its forward keeps for its backward, its output
  // included and its input not (the previous layer counts that); and the transient values its
  // forward or backward needs at their peak on top of those.
  double stashed_values = 0, workspace_values = 0;
  // A whole backward's transient values where they are fewer than workspace_values (its forward's
  // then: chunked cross-entropy's), which the planner holds beside the gradients; < 0: the same.
  double backward_workspace_values = -1;
  // A parameter it shares with layer `shared_with` (a SharedParameter): held a second time, with
  // its gradient and optimizer state, when that layer sits on another stage.
  double shared_values = 0;
  int64_t shared_with = -1;
  // Its largest parameter tensor (0 = all its parameters): the optimizer's step makes
  // temporaries of that size (AdamW: two).
  double largest_parameter_values = 0;
  // Zero-bubble's split backward: the output gradients its B pass records at the weights'
  // junctions for the W pass (runtime::SplitBackward::held_gradient_bytes), held from one to the
  // other; 0 = unknown or none.
  double weight_pass_values = 0;
  // Zero-bubble's B pass: its high-water mark above its start, the output gradients it records
  // and its input's gradient included; 0 = unknown: the planner then counts weight_pass_values
  // and workspace_values.
  double input_pass_values = 0;
  // Zero-bubble's W pass, when the weights already hold gradients: the transient values it makes
  // beyond what it holds at its start (a weight gradient before it is added to the accumulated
  // one); 0 = unknown: the planner then counts workspace_values.
  double weight_workspace_values = 0;
  // Zero-bubble's W: the weight gradients' products (a linear's X^T dY, as many FLOPs as its
  // forward product; attention's score products have no weights, so their backward is all B);
  // 0 = unknown: half the backward.
  double weight_gradient_flops = 0;
  // Forward work its backward redoes (chunked cross-entropy's logits, a chunk at a time): its
  // products and the values it writes (in activation values: the logits, float32); a split
  // backward redoes it in each of its passes, B and W.
  double backward_recompute_flops = 0;
  double backward_recompute_values = 0;
};

// Capability: TeraPipe token slices. Inputs, labels and every boundary activation hold the
// sequence in dimension 1; slices of one sequence run in order and each sees the earlier ones
// through `cache` (model/slice_cache.h).
class TokenSlicedStage {
 public:
  virtual ~TokenSlicedStage() = default;
  virtual torch::Tensor forward_slice(const torch::Tensor& input, int64_t start,
                                      SequenceKvCache& cache) = 0;
};

// Capability: sampling text from a stage that holds the whole model.
class TextGenerator {
 public:
  virtual ~TextGenerator() = default;
  // `count` token ids after `prompt` (temperature sampling from a generator seeded by `seed`).
  virtual std::vector<int64_t> generate(std::vector<int64_t> prompt, int64_t count,
                                        double temperature, uint64_t seed) = 0;
};

// The layers [first, last) of a model. Parameter names are the same whatever the partition,
// so a stage loads its layers from any partition's checkpoint.
class StageModule : public torch::nn::Module {
 public:
  // The activation handed to the next stage; on the stage holding the last layer, what loss()
  // reads (which need not be the model's final output: GPT's chunked loss takes the head input).
  virtual torch::Tensor forward(const torch::Tensor& input) = 0;
  // The mean loss of a microbatch; only on the stage holding the last layer.
  virtual torch::Tensor loss(const torch::Tensor& output, const torch::Tensor& labels) = 0;
  // Means over a validation microbatch reported beside its loss, by name: {"accuracy", 0.91}
  // becomes val_accuracy in metrics.jsonl and summary.json. Only on the last stage; none by default.
  virtual std::vector<std::pair<std::string, double>> validation_measures(
      const torch::Tensor& /*output*/, const torch::Tensor& /*labels*/) {
    return {};
  }
  // The first `count` rows of a validation microbatch in words, what the model makes of each
  // beside what was expected (a recognizer's transcript next to its reference), shown at the end
  // of a run. On a stage holding the whole model; "" by default.
  virtual std::string describe_examples(const Microbatch& /*batch*/, int64_t /*count*/) { return ""; }
  virtual TokenSlicedStage* token_sliced() { return nullptr; }
  virtual TextGenerator* text_generator() { return nullptr; }
};

class Model {
 public:
  virtual ~Model() = default;
  virtual std::string kind() const = 0;
  virtual std::string describe() const = 0;  // one line for logs: the model's shape
  virtual int64_t layer_count() const = 0;
  virtual std::string layer_name(int64_t layer) const = 0;  // "embedding", "block3", ...
  // Layers [first, last), 0 <= first < last <= layer_count(), with their initial weights:
  // every layer starts the same whichever stage builds it.
  virtual std::shared_ptr<StageModule> make_stage(int64_t first, int64_t last) const = 0;
  std::shared_ptr<StageModule> make_whole() const { return make_stage(0, layer_count()); }

  // What a microbatch of `rows` samples brings, and the activation crossing boundary b (the
  // output of layer b - 1, 0 < b < layer_count()): receivers allocate from it.
  virtual TensorSpec input_spec(int64_t rows) const = 0;
  virtual TensorSpec label_spec(int64_t rows) const = 0;
  virtual TensorSpec boundary_spec(int64_t boundary, int64_t rows) const = 0;

  virtual std::vector<SharedParameter> shared_parameters() const { return {}; }
  // What the optimizer makes of a parameter (Muon orthogonalises the Hidden ones), from its name
  // in a StageModule and its shape; by default default_parameter_role (model/parameter_role.h).
  virtual ParameterRole role_of(const std::string& parameter, const std::vector<int64_t>& shape) const {
    return default_parameter_role(parameter, shape, layer_count());
  }
  virtual LayerWork layer_work(int64_t layer, int64_t rows) const = 0;
  // Random valid inputs and labels (the profiler's).
  virtual Microbatch example(int64_t rows, torch::Generator& generator) const = 0;
  // TeraPipe token slices: the sequence length in dimension 1, or 0 without the capability.
  virtual int64_t sliceable_length() const { return 0; }
  // "" when a batch trains the same whatever its split into microbatches; else why not (layers
  // that normalise over the microbatch): a plan then keeps the run's microbatch size.
  virtual std::string microbatch_dependence() const { return ""; }
  // The data formats it trains on (empty: any, its batches checked against its specs): another
  // one is refused by name before its reader's own checks give advice meant for other models.
  virtual std::vector<std::string> data_formats() const { return {}; }
};

// Parameter names that are copies of a shared parameter other than its first (the head's own
// copy of GPT's embedding): left out of the global norm and of single-process checkpoints.
std::vector<std::string> secondary_copies(const Model& model);

int64_t parameter_count(torch::nn::Module& module);

// `model`'s role_of as a lookup for the optimizer and the checkpoint check; `model` must
// outlive it.
ParameterRoles roles_of(const Model& model);

}  // namespace pipetrain
