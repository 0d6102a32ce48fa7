// TorchScript layers exported from PyTorch (scripts/export_torchscript.py) train in pipetrain on
// 2 and 3 stages (and with replicas, chunks, recomputation) exactly as PyTorch trains the same
// model in one process: per-step losses and final weights in float64 to 1e-9 relative
// (tests/exactness.h). 2BW's delayed update rule is
// not PyTorch's: it is compared with pipetrain's AsyncReference. In bfloat16 a pipeline trains
// like its single process. Bad folders get one line.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "../pipetrain_run.h"
#include "../tensor_exactness.h"
#include "core/files.h"
#include "io/metrics.h"
#include "model/registry.h"
#include "model/state_io.h"
#include "runtime/run_spec.h"
#include "train/async_reference.h"

namespace pipetrain {
namespace {

namespace fs = std::filesystem;

constexpr int kSteps = 4, kBatch = 8;

// Exports the model and PyTorch's own training of it into a fresh folder.
fs::path export_layers(const std::string& python, const std::string& name) {
  const fs::path dir = testing::fresh_dir("torchscript_" + name);
  const auto result = testing::run_program(
      python, fmt::format("{}/scripts/export_torchscript.py --out {} --train-steps {} --batch-size {}",
                          PIPETRAIN_SOURCE_DIR, dir.string(), kSteps, kBatch),
      "", 300);
  EXPECT_EQ(result.exit_code, 0) << result.output;
  return dir;
}

std::string torchscript_args(const fs::path& layers) {
  return fmt::format(
      "--model.kind torchscript --model.torchscript {0} --data.format safetensors --data.path "
      "{0}/data.safetensors --model.dtype float64 --train.batch_size {1} --train.steps {2} "
      "--train.lr 1e-2 --train.min_lr 1e-2 --train.warmup_steps 0 --train.grad_clip 0 "
      "--train.optimizer adamw --train.weight_decay 0.01 --train.threads 1 --log.every 1 "
      "--eval.every 0 --eval.batches 1 --sample.tokens 0 --pipeline.timeout_s 60",
      layers.string(), kBatch, kSteps);
}

std::map<std::string, torch::Tensor> read_tensors(const fs::path& path) {
  std::map<std::string, torch::Tensor> tensors;
  for (const auto& entry : decode_safetensors(read_file(path.string()), path.string())) {
    tensors[entry.name] = from_entry(entry);
  }
  return tensors;
}

struct TorchScriptCase {
  std::string schedule;
  int stages, microbatches;
  int dp_width = 1, chunks = 1;
  std::string recompute = "none";
};

std::string torchscript_case_name(const ::testing::TestParamInfo<TorchScriptCase>& info) {
  const TorchScriptCase& c = info.param;
  return fmt::format("{}_p{}_m{}_w{}_v{}{}", c.schedule, c.stages, c.microbatches, c.dp_width,
                     c.chunks, c.recompute == "none" ? "" : "_recompute");
}

void PrintTo(const TorchScriptCase& c, std::ostream* out) {
  *out << torchscript_case_name({c, 0});
}

// Losses and final weights the run must reproduce: PyTorch's for a flushing schedule, the
// AsyncReference's for 2BW.
struct ExpectedRun {
  std::vector<double> losses;
  std::map<std::string, torch::Tensor> weights;
};

ExpectedRun expected_run(const TorchScriptCase& c, const fs::path& layers, const std::string& args) {
  ExpectedRun expected;
  if (c.schedule != "2bw") {
    const auto reference = nlohmann::json::parse(read_file((layers / "reference.json").string()));
    expected.losses = reference["losses"].get<std::vector<double>>();
    expected.weights = read_tensors(layers / "reference.safetensors");
    return expected;
  }
  Config config;
  std::istringstream in(args);
  for (std::string key, value; in >> key >> value;) set_field_from_string(config, key.substr(2), value);
  std::vector<std::pair<int64_t, int64_t>> stages;
  for (const auto& range : runtime::make_run_spec(config).ranges) stages.push_back({range.first, range.last});
  AsyncReference reference(config, make_batch_source(config, PIPETRAIN_SOURCE_DIR), stages);
  for (int64_t step = 0; step < kSteps; ++step) expected.losses.push_back(reference.train_step(step).loss);
  for (const auto& [name, weight] : reference.named_weights()) expected.weights[name] = weight;
  return expected;
}

class TorchScriptExactness : public ::testing::TestWithParam<TorchScriptCase> {};

TEST_P(TorchScriptExactness, TrainsAsPyTorchDoes) {
  // The .venv python (scripts/setup), whose torch is the libtorch pipetrain is built on: the
  // exporter and PyTorch's reference training run there.
  const std::string python = PIPETRAIN_PYTHON;
  const TorchScriptCase c = GetParam();
  const fs::path layers = export_layers(python, torchscript_case_name({c, 0}));
  const std::string args = torchscript_args(layers) +
                           fmt::format(" --train.microbatches {} --pipeline.stages {} --pipeline.schedule {} "
                                       "--pipeline.dp_width {} --pipeline.chunks {} --pipeline.recompute {}",
                                       c.microbatches, c.stages, c.schedule, c.dp_width, c.chunks,
                                       c.recompute);
  const fs::path run_dir = layers / "run";
  const auto run = testing::run_pipetrain("train --quiet " + args + " --run-dir " + run_dir.string());
  ASSERT_EQ(run.exit_code, 0) << run.output;

  torch::set_num_threads(1);
  const ExpectedRun expected = expected_run(c, layers, args);
  const auto pytorch = nlohmann::json::parse(read_file((layers / "reference.json").string()));
  const auto records = read_metrics((run_dir / "metrics.jsonl").string());
  ASSERT_EQ(records.size(), size_t(kSteps));
  ASSERT_EQ(expected.losses.size(), size_t(kSteps));
  double gap_to_pytorch = 0;
  for (int step = 0; step < kSteps; ++step) {
    const double loss = records[step]["loss"].get<double>();
    EXPECT_TRUE(testing::exactly_close(loss, expected.losses[step]))
        << "step " << step << ": loss " << loss << " vs " << expected.losses[step];
    gap_to_pytorch = std::max(gap_to_pytorch, std::abs(loss - pytorch["losses"][step].get<double>()));
  }
  // 2BW's one-step-delayed gradients must not be PyTorch's synchronous training in disguise.
  if (c.schedule == "2bw") {
    EXPECT_GT(gap_to_pytorch, 1e-6);
  }

  std::map<std::string, torch::Tensor> saved;
  for (int s = 0; s < c.stages * c.chunks; ++s) {
    for (auto& [name, tensor] : read_tensors(run_dir / "checkpoint" / fmt::format("stage{}.safetensors", s))) {
      saved[name] = tensor;
    }
  }
  EXPECT_EQ(saved.size(), expected.weights.size());
  for (const auto& [name, want] : expected.weights) {
    ASSERT_TRUE(saved.count(name)) << name;
    EXPECT_EQ(testing::elementwise_mismatch(saved[name], want), "") << name;
  }
  fs::remove_all(layers);
}

INSTANTIATE_TEST_SUITE_P(
    Model, TorchScriptExactness,
    ::testing::Values(TorchScriptCase{"gpipe", 2, 2}, TorchScriptCase{"1f1b", 2, 4},
                      TorchScriptCase{"gpipe", 3, 4}, TorchScriptCase{"1f1b", 3, 4},
                      TorchScriptCase{"2bw", 2, 2}, TorchScriptCase{"2bw", 3, 4},
                      TorchScriptCase{"1f1b", 2, 2, 2}, TorchScriptCase{"interleaved", 2, 4, 1, 2},
                      TorchScriptCase{"1f1b", 2, 4, 1, 1, "all"}),
    torchscript_case_name);

// The weights and buffers a finished run saved: model.safetensors of one process, the stage
// files of a pipeline.
std::map<std::string, torch::Tensor> saved_state(const fs::path& run_dir, int stages) {
  if (stages == 1) return read_tensors(run_dir / "checkpoint" / "model.safetensors");
  std::map<std::string, torch::Tensor> saved;
  for (int s = 0; s < stages; ++s) {
    for (auto& [name, tensor] : read_tensors(run_dir / "checkpoint" / fmt::format("stage{}.safetensors", s))) {
      saved[name] = tensor;
    }
  }
  return saved;
}

// A model with BatchNorm, its layers saved in eval mode (scripts/export_torchscript.py
// --batchnorm, as torchvision's ResNet-18 exported after evaluation is): on 1 and 2 stages it
// trains as PyTorch does in train mode (one microbatch a step: BatchNorm normalises each batch
// by its own statistics), its running statistics are saved and equal PyTorch's, validation runs
// in eval mode (PyTorch's eval-mode loss, not the train-mode one the layers gave before), and a
// run stopped at step 2 and resumed ends with the same weights and statistics. Before: the
// layers trained in eval mode, validation ran in train mode, and no checkpoint held the
// statistics.
TEST(TorchScriptBatchNorm, TrainsInTrainModeValidatesInEvalModeAndKeepsItsStatistics) {
  const fs::path layers = testing::fresh_dir("torchscript_batchnorm");
  const auto exported = testing::run_program(
      PIPETRAIN_PYTHON, fmt::format("{}/scripts/export_torchscript.py --out {} --train-steps {} --batch-size {} --batchnorm",
                                    PIPETRAIN_SOURCE_DIR, layers.string(), kSteps, kBatch), "", 300);
  ASSERT_EQ(exported.exit_code, 0) << exported.output;
  const auto reference = nlohmann::json::parse(read_file((layers / "reference.json").string()));
  const auto expected = read_tensors(layers / "reference.safetensors");
  ASSERT_EQ(expected.count("layer0.1.running_mean"), 1u);
  for (const int stages : {1, 2}) {
    const std::string args = torchscript_args(layers) +
                             fmt::format(" --train.microbatches 1 --pipeline.stages {} --pipeline.schedule 1f1b", stages);
    for (const bool resumed : {false, true}) {
      const fs::path run_dir = layers / fmt::format("run{}{}", stages, resumed ? "_resumed" : "");
      if (resumed) {  // 2 steps, then on to 4 from the checkpoint
        const auto first = testing::run_pipetrain("train --quiet " + args + " --train.steps 2 --run-dir " + run_dir.string());
        ASSERT_EQ(first.exit_code, 0) << first.output;
        const auto rest = testing::run_pipetrain(fmt::format("train --quiet --resume {} --train.steps {}", run_dir.string(), kSteps));
        ASSERT_EQ(rest.exit_code, 0) << rest.output;
      } else {
        const auto run = testing::run_pipetrain("train --quiet " + args + " --run-dir " + run_dir.string());
        ASSERT_EQ(run.exit_code, 0) << run.output;
      }
      const auto records = read_metrics((run_dir / "metrics.jsonl").string());
      ASSERT_EQ(records.size(), size_t(kSteps));
      for (int step = 0; step < kSteps; ++step) {
        EXPECT_TRUE(testing::exactly_close(records[step]["loss"].get<double>(), reference["losses"][step].get<double>()))
            << stages << " stages, step " << step;
      }
      const double val_loss = records.back()["val_loss"].get<double>();
      EXPECT_TRUE(testing::exactly_close(val_loss, reference["val_loss"].get<double>()))
          << stages << " stages: validation loss " << val_loss << ", PyTorch's in eval mode " << reference["val_loss"];
      const auto saved = saved_state(run_dir, stages);
      EXPECT_EQ(saved.size(), expected.size());
      for (const auto& [name, want] : expected) {
        ASSERT_TRUE(saved.count(name)) << stages << " stages: " << name;
        EXPECT_EQ(testing::elementwise_mismatch(saved.at(name), want), "") << stages << " stages: " << name;
      }
    }
  }
  fs::remove_all(layers);
}

// Mixed precision reaches the TorchScript layers: a bfloat16 pipeline on 2 workers trains like
// the bfloat16 single process within 2^-12 (the bound of tests/runtime/mixed_precision_test.cpp:
// both round every layer's output to bfloat16, so a stage boundary rounds what the single process
// rounds there), a float32 run is further off than that (the layers did compute in bfloat16), and
// what crosses a boundary is bfloat16.
TEST(TorchScriptMixedPrecision, Bfloat16PipelineTrainsLikeItsSingleProcess) {
  const fs::path layers = export_layers(PIPETRAIN_PYTHON, "bfloat16");
  const auto losses = [&](const std::string& dtype, int stages) {
    const fs::path run_dir = layers / fmt::format("run_{}_{}", dtype, stages);
    const std::string args = torchscript_args(layers) +
                             fmt::format(" --model.dtype {} --train.microbatches 2 --pipeline.schedule 1f1b "
                                         "--pipeline.stages {} --run-dir {}", dtype, stages, run_dir.string());
    const auto run = testing::run_pipetrain("train --quiet " + args);
    EXPECT_EQ(run.exit_code, 0) << run.output;
    std::vector<double> values;
    for (const auto& record : read_metrics((run_dir / "metrics.jsonl").string())) values.push_back(record["loss"].get<double>());
    return values;
  };
  const auto single = losses("bfloat16", 1), pipeline = losses("bfloat16", 2), full = losses("float32", 1);
  ASSERT_EQ(single.size(), size_t(kSteps));
  ASSERT_EQ(pipeline.size(), size_t(kSteps));
  ASSERT_EQ(full.size(), size_t(kSteps));
  double from_float32 = 0;
  for (int step = 0; step < kSteps; ++step) {
    EXPECT_LE(std::abs(pipeline[step] - single[step]), std::abs(single[step]) / 4096) << "step " << step;
    from_float32 = std::max(from_float32, std::abs(full[step] - single[step]) / std::abs(full[step]));
  }
  EXPECT_GT(from_float32, 1.0 / 4096);
  Config config;
  std::istringstream in(torchscript_args(layers) + " --model.dtype bfloat16");
  for (std::string key, value; in >> key >> value;) set_field_from_string(config, key.substr(2), value);
  EXPECT_EQ(make_model(config)->boundary_spec(1, 2).dtype, torch::kBFloat16);
  fs::remove_all(layers);
}

// A folder of TorchScript layers saved by `make` (Python with sys, torch and nn imported, the
// folder in `out`), whose model.json takes rows of 16 float64 values and 4 classes, and
// data.safetensors of such rows (16 to train, 8 to validate).
fs::path scripted_layers(const std::string& name, const std::string& make, int layers) {
  const fs::path dir = testing::fresh_dir(name);
  fs::create_directories(dir);
  std::ofstream(dir / "make.py") << "import sys, torch\nfrom torch import nn\nout = sys.argv[1]\n" << make;
  const auto made = testing::run_program(PIPETRAIN_PYTHON, (dir / "make.py").string() + " " + dir.string(), "", 300);
  EXPECT_EQ(made.exit_code, 0) << made.output;
  std::ofstream(dir / "model.json") << fmt::format(R"({{"layers": {}, "loss": "cross_entropy",
      "input": {{"shape": [16], "dtype": "float64"}}, "labels": {{"shape": [], "dtype": "int64"}}}})", layers);
  std::ofstream(dir / "rows.py") << R"(import sys, torch
sys.path.insert(0, sys.argv[2])
from export_torchscript import write_safetensors
g = torch.Generator().manual_seed(0)
rows = lambda n: (torch.randn(n, 16, generator=g, dtype=torch.float64), torch.randint(0, 4, (n,), generator=g))
tr, va = rows(16), rows(8)
write_safetensors(sys.argv[1], {"train_inputs": tr[0], "train_labels": tr[1], "val_inputs": va[0], "val_labels": va[1]})
)";
  const auto rows = testing::run_program(PIPETRAIN_PYTHON, (dir / "rows.py").string() + " " +
                                                               (dir / "data.safetensors").string() + " " +
                                                               PIPETRAIN_SOURCE_DIR + "/scripts", "", 300);
  EXPECT_EQ(rows.exit_code, 0) << rows.output;
  return dir;
}

std::string scripted_run(const fs::path& dir, int stages) {
  return "train --quiet --model.kind torchscript --model.torchscript " + dir.string() +
         " --data.format safetensors --data.path " + (dir / "data.safetensors").string() +
         " --model.dtype float64 --train.batch_size 8 --train.microbatches 1 --train.steps 1 "
         "--pipeline.stages " + std::to_string(stages) + " --sample.tokens 0 --run-dir " + (dir / "run").string();
}

// A layer that raises during training (here: refuses more than 3 rows; BatchNorm on one value
// per channel is the usual case) is one line naming the layer and its own message. It was
// "internal error: The following operation failed in the TorchScript interpreter." (the cause cut).
TEST(TorchScriptBadInput, ALayerThatRaisesIsOneLineWithItsCause) {
  const fs::path dir = scripted_layers("torchscript_raises", R"(class Picky(nn.Module):
    def forward(self, x):
        if x.size(0) > 3:
            raise RuntimeError("picky layer: at most 3 rows")
        return x
torch.jit.script(Picky()).save(out + "/layer0.pt")
torch.jit.script(nn.Linear(16, 4).double()).save(out + "/layer1.pt")
)", 2);
  // It fails while training (after the start-up lines): the run's last line, exit 2.
  const auto run = testing::run_pipetrain(scripted_run(dir, 1));
  EXPECT_EQ(run.exit_code, 2) << run.output;
  const std::string last = run.output.substr(run.output.rfind('\n', run.output.size() - 2) + 1);
  EXPECT_EQ(last, "pipetrain: error: model.torchscript: layer0.pt failed on a microbatch of 8 rows: "
                  "picky layer: at most 3 rows\n") << run.output;
  fs::remove_all(dir);
}

// Boundary shapes are a row's shape times the rows: a layer whose rows depend on how many there
// are (here each row repeated once per row) is refused before anything runs. It was probed with
// 2 rows only, and its other shapes met the transfers (or the loss) later.
TEST(TorchScriptBadInput, ALayerWhoseRowsDependOnTheirCountIsRefusedAtStart) {
  const fs::path dir = scripted_layers("torchscript_row_count", R"(class Repeat(nn.Module):
    def forward(self, x):
        return x.repeat(1, x.size(0))
torch.jit.script(Repeat()).save(out + "/layer0.pt")
torch.jit.script(nn.Linear(32, 4).double()).save(out + "/layer1.pt")
)", 2);
  testing::expect_one_line_error(scripted_run(dir, 2),
                                 "model.torchscript: layer0.pt's output rows depend on how many rows it "
                                 "is given ([32] each for 2 rows, [48] each for 3)");
  fs::remove_all(dir);
}

// What a layer file costs, from the start-up probe: a layer of element-wise operators reads and
// writes its rows once per operator (tanh, then a product with a number: 2 x 16 float64 values
// each, a row), a linear layer's product is FLOPs (2 x 16 x 4 a row) and no traffic.
TEST(TorchScriptLayerWork, CountsTheProbesProductsMemoryBoundPassesAndOperators) {
  const fs::path dir = scripted_layers("torchscript_layer_work", R"(class Squash(nn.Module):
    def forward(self, x):
        return torch.tanh(x) * 2
torch.jit.script(Squash()).save(out + "/layer0.pt")
torch.jit.script(nn.Linear(16, 4).double()).save(out + "/layer1.pt")
)", 2);
  Config config;
  config.model.kind = "torchscript";
  config.model.torchscript = dir.string();
  config.model.dtype = "float64";
  const auto model = make_model(config);
  const LayerWork squash = model->layer_work(0, 3), linear = model->layer_work(1, 3);
  EXPECT_EQ(squash.forward_traffic_values, 3 * (2 * 16 + 2 * 16));
  EXPECT_EQ(linear.forward_traffic_values, 0);
  EXPECT_EQ(linear.forward_flops, 3 * (2 * 16 * 4) + 3 * 4);  // and one per output value
  EXPECT_EQ(squash.forward_operators, 2);  // tanh, the product by 2
  EXPECT_EQ(linear.forward_operators, 1);  // one linear
  EXPECT_EQ(squash.backward_operators, 4);  // taken as twice the forward's
  fs::remove_all(dir);
}

// A stage whose output has another shape than its receiver takes (here a layer that narrows its
// rows from 4 rows on, past the start-up probes) stops the run with one line naming both shapes
// before the transfer: the transport never sees a size it did not expect.
TEST(TorchScriptBadInput, AStageOutputOfAnotherShapeStopsBeforeItsTransfer) {
  const fs::path dir = scripted_layers("torchscript_narrows", R"(class Narrows(nn.Module):
    def forward(self, x):
        if x.size(0) > 3:
            return x[:, :8]
        return x
torch.jit.script(Narrows()).save(out + "/layer0.pt")
torch.jit.script(nn.Linear(16, 4).double()).save(out + "/layer1.pt")
)", 2);
  const auto run = testing::run_pipetrain(scripted_run(dir, 2));
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_NE(run.output.find("stage 0 (layers 0-0) gave an output of shape [8, 8] (Double) for a "
                            "microbatch of 8 rows, where stage 1 takes [8, 16] (Double)"),
            std::string::npos) << run.output;
  fs::remove_all(dir);
}

void write_text(const fs::path& path, const std::string& text) { std::ofstream(path) << text; }

constexpr const char* kTwoLayerJson =
    R"({"layers": 2, "loss": "cross_entropy", "input": {"shape": [1, 16], "dtype": "float64"},
        "labels": {"shape": [], "dtype": "int64"}})";

// The data file exists (the model is built first and refuses the folder).
std::string bad_folder_args(const fs::path& dir) {
  return "train --quiet --model.kind torchscript --model.torchscript " + dir.string() +
         " --data.format safetensors --data.path README.md --run-dir " + (dir / "run").string();
}

TEST(TorchScriptBadInput, MissingLayerFileIsOneLine) {
  const fs::path dir = testing::fresh_dir("torchscript_missing");
  fs::create_directories(dir);
  write_text(dir / "model.json", kTwoLayerJson);
  testing::expect_one_line_error(bad_folder_args(dir), "layer0.pt not found");
  testing::expect_one_line_error(bad_folder_args(dir / "nowhere"), "model.json not found");
  fs::remove_all(dir);
}

TEST(TorchScriptBadInput, CorruptLayerFileIsOneLine) {
  const fs::path dir = testing::fresh_dir("torchscript_corrupt");
  fs::create_directories(dir);
  write_text(dir / "model.json", kTwoLayerJson);
  write_text(dir / "layer0.pt", "this is not a TorchScript archive");
  testing::expect_one_line_error(bad_folder_args(dir), "layer0.pt is not a TorchScript module");
  fs::remove_all(dir);
}

TEST(TorchScriptBadInput, LayersThatDoNotChainAreOneLine) {
  // The .venv python (scripts/setup), whose torch is the libtorch pipetrain is built on: the
  // exporter and PyTorch's reference training run there.
  const std::string python = PIPETRAIN_PYTHON;
  const fs::path dir = export_layers(python, "unchained");
  // layer1 is the first convolution again: it takes 1 channel, layer0 gives it 4.
  fs::copy_file(dir / "layer0.pt", dir / "layer1.pt", fs::copy_options::overwrite_existing);
  testing::expect_one_line_error(bad_folder_args(dir),
                                 "model.torchscript: layer1.pt does not take layer0.pt's output [2, 4, 16]");
  fs::remove_all(dir);
}

}  // namespace
}  // namespace pipetrain
