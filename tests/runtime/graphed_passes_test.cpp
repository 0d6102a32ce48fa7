// train.cuda_graphs on pipeline workers, emulated (2): each chunk's forward and backward of a
// microbatch run in slots, on the slots' own input copies, their outputs and input gradients
// copied out, the gradients added where they stay (device/pass_graphs.h). The emulation runs
// what a capture would record, so it must train bitwise like the eager run: the same losses, norms
// and weights, after the first (eager) step and across the switch. On a GPU the capture itself
// is checked by bench/gpu_check.sh against the same eager run.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/files.h"
#include "io/metrics.h"
#include "model/state_io.h"
#include "../pipetrain_run.h"
#include "../tiny_images.h"
#include "../tiny_speech.h"

namespace pipetrain {
namespace {

namespace fs = std::filesystem;

struct GraphCase {
  std::string name, schedule;
  int stages, microbatches, dp_width = 1, chunks = 1;
  std::string dtype = "float64";
  std::string model = "gpt";
  int zero1 = 0;
  std::string recompute = "none";
  std::string slices = "1";
  size_t steps() const { return dtype == "float16" ? 6 : 4; }
};

void PrintTo(const GraphCase& c, std::ostream* out) { *out << c.name; }

struct TrainedRun {
  std::vector<nlohmann::json> records;
  std::map<std::string, torch::Tensor> weights;
  std::string output;
};

TrainedRun train(const GraphCase& c, int cuda_graphs) {
  std::string args = fmt::format(
      "train --quiet --model.layers 4 --model.d_model 16 --model.heads 2 --model.seq_len 8 "
      "--model.dtype {} --train.batch_size {} --train.microbatches {} --train.steps {} "
      "--train.warmup_steps 1 --train.lr 1e-2 --train.threads 1 --train.device cpu "
      "--train.cuda_graphs {} --log.every 1 --eval.every 0 --eval.batches 1 --sample.tokens 0 "
      "--pipeline.schedule {} --pipeline.stages {} --pipeline.dp_width {} --pipeline.chunks {} "
      "--pipeline.zero1 {} --pipeline.recompute {} --pipeline.slices {} --pipeline.timeout_s 60",
      c.dtype, 2 * c.microbatches * c.dp_width, c.microbatches, c.steps(), cuda_graphs, c.schedule,
      c.stages, c.dp_width, c.chunks, c.zero1, c.recompute, c.slices);
  if (c.dtype == "float16") {  // 2^22 overflows the first steps' gradients: skips, then growth
    args += " --train.loss_scale 4194304 --train.loss_scale_growth_interval 2";
  }
  if (c.model == "cnn") {
    args +=
        " --model.kind cnn --data.format fashion-mnist --data.path " + testing::tiny_image_folder();
  }
  if (c.model == "transducer") {  // ragged utterances: the loss cuts each microbatch to its longest
    args +=
        " --model.kind transducer --model.seq_len 40 --model.max_labels 6 --data.format speech "
        "--data.path " +
        testing::tiny_speech_file();
  }
  const fs::path dir = testing::fresh_dir(c.name + "_graphs" + std::to_string(cuda_graphs));
  const auto result = testing::run_pipetrain(args + " --run-dir " + dir.string());
  TrainedRun run;
  run.output = result.output;
  EXPECT_EQ(result.exit_code, 0) << result.output;
  if (result.exit_code != 0) return run;
  run.records = read_metrics((dir / "metrics.jsonl").string());
  const std::string path = (dir / "checkpoint" / "model.safetensors").string();
  for (const auto& entry : decode_safetensors(read_file(path), path))
    run.weights[entry.name] = from_entry(entry);
  fs::remove_all(dir);
  return run;
}

class GraphedPasses : public ::testing::TestWithParam<GraphCase> {};

TEST_P(GraphedPasses, TrainBitwiseLikeTheEagerRun) {
  const GraphCase& c = GetParam();
  const TrainedRun eager = train(c, 0), graphed = train(c, 2);
  ASSERT_EQ(graphed.records.size(), c.steps()) << graphed.output;
  ASSERT_EQ(eager.records.size(), c.steps()) << eager.output;
  EXPECT_NE(graphed.output.find("CUDA graphs emulated"), std::string::npos) << graphed.output;
  int skipped = 0;
  for (size_t step = 0; step < c.steps(); ++step) {
    if (c.dtype == "float16") {  // the scale the graphed loss read, and the steps it skipped
      EXPECT_EQ(graphed.records[step]["loss_scale"], eager.records[step]["loss_scale"])
          << "step " << step;
      EXPECT_EQ(graphed.records[step]["skipped"], eager.records[step]["skipped"])
          << "step " << step;
      skipped += graphed.records[step]["skipped"].get<bool>();
    }
    EXPECT_EQ(graphed.records[step]["loss"].get<double>(),
              eager.records[step]["loss"].get<double>())
        << "step " << step;
    // (A skipped step's norm, not finite, is written as null.)
    EXPECT_EQ(graphed.records[step]["grad_norm"], eager.records[step]["grad_norm"])
        << "step " << step;
  }
  if (c.dtype == "float16") {
    EXPECT_GT(skipped, 0);  // and applied steps too (else no weights would move):
    EXPECT_LT(skipped, int(c.steps()));
  }
  ASSERT_EQ(graphed.weights.size(), eager.weights.size());
  ASSERT_FALSE(eager.weights.empty());
  for (const auto& [name, want] : eager.weights) {
    ASSERT_TRUE(graphed.weights.count(name)) << name;
    EXPECT_TRUE(torch::equal(graphed.weights.at(name), want)) << name;
  }
}

// A resumed run prepares its slots again after its own eager steps: a graphed run cut at step 4
// and resumed to 6 equals 6 eager steps (a constant learning rate, so the 4-step run is the
// 6-step run's start). Under 2BW the checkpoint also holds the stashed version the next steps
// read, saved from a run whose parameters kept their addresses.
class GraphedPassesResume : public ::testing::TestWithParam<std::string> {};

TEST_P(GraphedPassesResume, ResumedRunEqualsTheEagerRunBitwise) {
  const std::string schedule = GetParam();
  const std::string fields =
      "--model.layers 3 --model.d_model 16 --model.heads 2 --model.seq_len 8 --model.dtype float64 "
      "--train.batch_size 8 --train.microbatches 4 --train.warmup_steps 0 --train.lr 1e-2 "
      "--train.min_lr 1e-2 --train.threads 1 --train.device cpu --log.every 1 --eval.every 0 "
      "--eval.batches 1 --sample.tokens 0 --pipeline.stages 2 --pipeline.schedule " + schedule +
      " --pipeline.timeout_s 60 --quiet";
  const fs::path whole = testing::fresh_dir("graphs_whole_" + schedule),
                 cut = testing::fresh_dir("graphs_cut_" + schedule);
  const auto eager =
      testing::run_pipetrain("train " + fields + " --train.steps 6 --run-dir " + whole.string());
  ASSERT_EQ(eager.exit_code, 0) << eager.output;
  const auto first = testing::run_pipetrain(
      "train " + fields + " --train.steps 4 --train.cuda_graphs 2 --run-dir " + cut.string());
  ASSERT_EQ(first.exit_code, 0) << first.output;
  const auto resumed =
      testing::run_pipetrain("train --resume " + cut.string() + " --train.steps 6 --quiet");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("CUDA graphs emulated"), std::string::npos) << resumed.output;  // graphed again
  const auto want = read_metrics((whole / "metrics.jsonl").string());
  const auto got = read_metrics((cut / "metrics.jsonl").string());
  ASSERT_EQ(got.size(), 6u);
  ASSERT_EQ(want.size(), 6u);
  for (size_t step = 0; step < 6; ++step) {
    EXPECT_EQ(got[step]["loss"].get<double>(), want[step]["loss"].get<double>()) << "step " << step;
    EXPECT_EQ(got[step]["grad_norm"].get<double>(), want[step]["grad_norm"].get<double>())
        << "step " << step;
  }
  // The final checkpoints byte for byte: weights, optimizer state, every stage's files (2BW's
  // stashed version among them).
  size_t compared = 0;
  for (const auto& entry : fs::directory_iterator(whole / "checkpoint")) {
    if (entry.path().extension() != ".safetensors") continue;
    const fs::path other = cut / "checkpoint" / entry.path().filename();
    ASSERT_TRUE(fs::exists(other)) << other;
    EXPECT_TRUE(read_file(entry.path().string()) == read_file(other.string())) << entry.path().filename();
    ++compared;
  }
  EXPECT_GE(compared, 4u);  // model, optimizer, and each stage's weights and state
  fs::remove_all(whole);
  fs::remove_all(cut);
}

INSTANTIATE_TEST_SUITE_P(Schedules, GraphedPassesResume, ::testing::Values("gpipe", "2bw"));

// GPipe holds every microbatch at once (4 slots a chunk), 1F1B fewer on later stages; two chunks
// per worker (interleaved), replicas and ZeRO-1 (gradients summed and sharded between the
// replays), bfloat16 (autocast inside the passes), float16 (its loss scale a device scalar the
// graphed loss reads: the same scales and skipped steps), the CNN (BatchNorm's running statistics,
// updated inside the forward) and the RNN-T (whose loss a GPU cannot capture: it reads counts on
// the host; emulated, its passes run like any other). Recomputation: the forward keeps no graph
// and the backward runs it again (on the CNN restoring the running statistics it updated twice).
// Zero-bubble's split backward: B and W are two passes of the slot (DualPipeV's whole backwards
// in its F&B pairs are B then W), also recomputed. TeraPipe's token slices: a microbatch's slot
// has a part per slice, whose passes keep its K/V cache (near-equal and uneven slices; and
// recomputed, each slice's forward replayed on the cache). No-flush schedules switch to graphs
// with microbatches in flight (those finish eagerly): 2BW (also recomputing) and
// PipeDream copy the version an action reads into the parameters, the predicting policies
// (PipeOptim, SpecTrain) write their predictions into the weights the graphs read.
INSTANTIATE_TEST_SUITE_P(
    Pipelines, GraphedPasses,
    ::testing::Values(GraphCase{"gpipe_p2_m4", "gpipe", 2, 4},
                      GraphCase{"onef1b_p3_m4", "1f1b", 3, 4},
                      GraphCase{"interleaved_p2_v2_m4", "interleaved", 2, 4, 1, 2},
                      GraphCase{"onef1b_p2_w2_zero1", "1f1b", 2, 2, 2, 1, "float64", "gpt", 1},
                      GraphCase{"onef1b_p2_bfloat16", "1f1b", 2, 4, 1, 1, "bfloat16"},
                      GraphCase{"gpipe_p2_float16", "gpipe", 2, 4, 1, 1, "float16"},
                      GraphCase{"cnn_gpipe_p2", "gpipe", 2, 2, 1, 1, "float64", "cnn"},
                      GraphCase{"transducer_1f1b_p2", "1f1b", 2, 2, 1, 1, "float64", "transducer"},
                      GraphCase{"gpipe_p3_recompute_all", "gpipe", 3, 4, 1, 1, "float64", "gpt",
                                0, "all"},
                      GraphCase{"onef1b_p2_bfloat16_recompute_0", "1f1b", 2, 4, 1, 1, "bfloat16",
                                "gpt", 0, "0"},
                      GraphCase{"cnn_1f1b_p2_recompute_all", "1f1b", 2, 2, 1, 1, "float64", "cnn",
                                0, "all"},
                      GraphCase{"zb_h1_p3_m4", "zb-h1", 3, 4},
                      GraphCase{"zb_v_p2_v2_m4", "zb-v", 2, 4, 1, 2},
                      GraphCase{"dualpipev_p2_v2_m4", "dualpipev", 2, 4, 1, 2},
                      GraphCase{"zb_h1_p2_recompute_all", "zb-h1", 2, 4, 1, 1, "float64", "gpt", 0,
                                "all"},
                      GraphCase{"gpipe_p2_slices_3", "gpipe", 2, 2, 1, 1, "float64", "gpt", 0,
                                "none", "3"},
                      GraphCase{"gpipe_p3_float16_slices_5_3", "gpipe", 3, 2, 1, 1, "float16",
                                "gpt", 0, "none", "5,3"},
                      GraphCase{"gpipe_p2_slices_3_recompute_all", "gpipe", 2, 2, 1, 1, "float64",
                                "gpt", 0, "all", "3"},
                      GraphCase{"twobw_p2_m4", "2bw", 2, 4},
                      GraphCase{"twobw_p2_m4_recompute_all", "2bw", 2, 4, 1, 1, "float64", "gpt", 0,
                                "all"},
                      GraphCase{"twobw_p3_bfloat16", "2bw", 3, 4, 1, 1, "bfloat16"},
                      GraphCase{"twobw_p2_w2", "2bw", 2, 2, 2},
                      GraphCase{"twobw_p2_w2_zero1", "2bw", 2, 2, 2, 1, "float64", "gpt", 1},
                      GraphCase{"twobw_predict_p2_m4", "2bw-predict", 2, 4},
                      GraphCase{"pipedream_p3_m2", "pipedream", 3, 2},
                      GraphCase{"pipeoptim_p3_m4", "pipeoptim", 3, 4},
                      GraphCase{"spectrain_p2_m2", "spectrain", 2, 2},
                      GraphCase{"cnn_2bw_p2", "2bw", 2, 2, 1, 1, "float64", "cnn"}),
    [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace pipetrain
