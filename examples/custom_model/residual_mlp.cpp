#include "residual_mlp.h"

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include <ATen/CPUGeneratorImpl.h>

namespace residual_mlp {
namespace {

struct MlpShape {
  int64_t width = 0, blocks = 0;
  torch::ScalarType dtype = torch::kFloat32;
  int64_t layer_count() const { return blocks + 2; }
};

// Unrelated streams for neighbouring (seed, index) pairs (splitmix-style mixing).
torch::Generator mixed_generator(uint64_t seed, uint64_t index) {
  uint64_t z = seed * 0x9E3779B97F4A7C15ull + (index + 1) * 0xBF58476D1CE4E5B9ull;
  return at::detail::createCPUGenerator(z ^ (z >> 31));
}

// Weights ~ N(0, 1/fan_in), biases 0: drawn in float64 so both dtypes start from the same values.
torch::nn::Linear mlp_linear(int64_t in, int64_t out, torch::Generator& generator,
                             torch::ScalarType dtype) {
  torch::nn::Linear linear(torch::nn::LinearOptions(in, out));
  linear->to(dtype);
  torch::NoGradGuard no_grad;
  linear->weight.copy_(torch::randn({out, in}, generator, torch::kFloat64) / std::sqrt(double(in)));
  linear->bias.zero_();
  return linear;
}

struct ResidualBlockImpl : torch::nn::Module {
  ResidualBlockImpl(int64_t width, torch::Generator& generator, torch::ScalarType dtype)
      : fc1(register_module("fc1", mlp_linear(width, width, generator, dtype))),
        fc2(register_module("fc2", mlp_linear(width, width, generator, dtype))) {}
  torch::Tensor forward(const torch::Tensor& x) { return x + fc2(torch::tanh(fc1(x))); }
  torch::nn::Linear fc1, fc2;
};
TORCH_MODULE(ResidualBlock);

// Layers [first, last), registered as "layer<i>" so names do not depend on the partition.
class MlpStage : public pipetrain::StageModule {
 public:
  MlpStage(const MlpShape& shape, uint64_t seed, int64_t first, int64_t last) {
    for (int64_t i = first; i < last; ++i) {
      auto generator = mixed_generator(seed, uint64_t(i));
      const std::string name = "layer" + std::to_string(i);
      if (i == 0) {
        auto input = register_module(name, mlp_linear(kFeatures, shape.width, generator, shape.dtype));
        layers_.push_back([input](const torch::Tensor& x) { return input->forward(x); });
      } else if (i == shape.layer_count() - 1) {
        auto head = register_module(name, mlp_linear(shape.width, kClasses, generator, shape.dtype));
        layers_.push_back([head](const torch::Tensor& x) { return head->forward(x); });
      } else {
        auto block = register_module(name, ResidualBlock(shape.width, generator, shape.dtype));
        layers_.push_back([block](const torch::Tensor& x) { return block->forward(x); });
      }
    }
  }
  torch::Tensor forward(const torch::Tensor& input) override {
    torch::Tensor x = input;
    for (const auto& layer : layers_) x = layer(x);
    return x;
  }
  torch::Tensor loss(const torch::Tensor& logits, const torch::Tensor& labels) override {
    return torch::nn::functional::cross_entropy(logits, labels);
  }

 private:
  std::vector<std::function<torch::Tensor(const torch::Tensor&)>> layers_;
};

class MlpModel : public pipetrain::Model {
 public:
  MlpModel(const MlpShape& shape, uint64_t seed) : shape_(shape), seed_(seed) {}
  std::string kind() const override { return "mlp"; }
  std::string describe() const override {
    return "residual MLP, " + std::to_string(shape_.blocks) + " blocks of width " +
           std::to_string(shape_.width);
  }
  int64_t layer_count() const override { return shape_.layer_count(); }
  std::string layer_name(int64_t layer) const override {
    if (layer == 0) return "input";
    if (layer == layer_count() - 1) return "head";
    return "block" + std::to_string(layer - 1);
  }
  std::shared_ptr<pipetrain::StageModule> make_stage(int64_t first, int64_t last) const override {
    return std::make_shared<MlpStage>(shape_, seed_, first, last);
  }
  pipetrain::TensorSpec input_spec(int64_t rows) const override {
    return {{rows, kFeatures}, shape_.dtype};
  }
  pipetrain::TensorSpec label_spec(int64_t rows) const override { return {{rows}, torch::kInt64}; }
  pipetrain::TensorSpec boundary_spec(int64_t, int64_t rows) const override {
    return {{rows, shape_.width}, shape_.dtype};
  }
  pipetrain::LayerWork layer_work(int64_t layer, int64_t rows) const override {
    const double b = double(rows), w = double(shape_.width);
    const double in = layer == 0 ? double(kFeatures) : w;
    const double out = layer == layer_count() - 1 ? double(kClasses) : w;
    const double matrices = layer == 0 || layer == layer_count() - 1 ? 1 : 2;
    pipetrain::LayerWork work;
    work.forward_flops = 2 * b * in * out * matrices;
    work.parameters = (in * out + out) * matrices;
    work.output_values = b * out;
    return work;
  }
  pipetrain::Microbatch example(int64_t rows, torch::Generator& generator) const override {
    return {torch::randn({rows, kFeatures}, generator, torch::kFloat64).to(shape_.dtype),
            torch::randint(0, kClasses, {rows}, generator, torch::kInt64)};
  }

 private:
  MlpShape shape_;
  uint64_t seed_;
};

// Gaussian features labelled by argmax(x T) for a fixed teacher T: learnable, never exhausted.
class TeacherBatches : public pipetrain::BatchSource {
 public:
  explicit TeacherBatches(torch::ScalarType dtype) : dtype_(dtype) {
    auto generator = mixed_generator(7, 0);
    teacher_ = torch::randn({kFeatures, kClasses}, generator, torch::kFloat64);
  }
  pipetrain::Microbatch train_batch(uint64_t seed, int64_t step, int64_t rows) const override {
    return draw(mixed_generator(seed, uint64_t(step)), rows);
  }
  pipetrain::Microbatch val_batch(int64_t index, int64_t rows) const override {
    return draw(mixed_generator(~uint64_t(0), uint64_t(index)), rows);  // apart from any train seed
  }
  std::string describe() const override { return "teacher: synthetic Gaussian features, 4 classes"; }
  int64_t tokens_per_row() const override { return 1; }

 private:
  pipetrain::Microbatch draw(torch::Generator generator, int64_t rows) const {
    const auto x = torch::randn({rows, kFeatures}, generator, torch::kFloat64);
    return {x.to(dtype_), x.matmul(teacher_).argmax(1)};
  }
  torch::ScalarType dtype_;
  torch::Tensor teacher_;
};

}  // namespace

void register_with_pipetrain() {
  pipetrain::register_model_kind("mlp", [](const pipetrain::Config& config) {
    if (config.data.format != "teacher") {
      pipetrain::fail("model.kind = \"mlp\" trains on data.format = \"teacher\", got '{}'",
                      config.data.format);
    }
    // The blocks compute in their weights' dtype: under model.dtype = "bfloat16" they would run
    // in float32 while the run reports mixed precision, so refuse it (docs/models.md shows how a
    // model supports it).
    pipetrain::require_full_precision(config.model, "the example computes in its weights' dtype");
    const MlpShape shape{config.model.d_model, config.model.layers,
                         pipetrain::compute_dtype(config.model)};
    return std::make_shared<MlpModel>(shape, uint64_t(config.train.seed));
  });
  pipetrain::register_data_format("teacher", [](const pipetrain::Config& config, const std::string&) {
    return std::make_shared<TeacherBatches>(pipetrain::compute_dtype(config.model));
  });
}

}  // namespace residual_mlp
