// The run spec: what a config means for a run (stage ranges, slices, recomputation, schedule,
// layout), and every cross-field refusal as one line.
#include <gtest/gtest.h>

#include <functional>

#include "core/error.h"
#include "runtime/run_spec.h"

namespace pipetrain::runtime {
namespace {

// GPT with 4 blocks: 6 layers (embedding, blocks, head).
Config pipeline_config(int64_t stages, const std::string& partition = "balanced") {
  Config c;
  c.pipeline.stages = stages;
  c.pipeline.partition = partition;
  return c;
}

std::vector<std::pair<int64_t, int64_t>> layers_of(const RunSpec& spec) {
  std::vector<std::pair<int64_t, int64_t>> out;
  for (const auto& range : spec.ranges) out.emplace_back(range.first, range.last);
  return out;
}

using Ranges = std::vector<std::pair<int64_t, int64_t>>;

// What make_run_spec refuses `config` with ("" when it accepts it).
std::string refusal_of(const Config& config) {
  try {
    make_run_spec(config);
    return "";
  } catch (const UserError& error) {
    return error.what();
  }
}

TEST(RunSpec, BalancedPartitionAndTheRestOfATwoStageRun) {
  const RunSpec spec = make_run_spec(pipeline_config(2));
  // A block is 4.4x the head's compute (Partition.BalancedFollowsComputeNotParameters).
  EXPECT_EQ(layers_of(spec), (Ranges{{0, 3}, {3, 6}}));
  EXPECT_TRUE(spec.pipelined);
  EXPECT_EQ(spec.schedule->name, "1f1b");
  EXPECT_EQ(spec.microbatch_rows, 32 / 8);
  EXPECT_EQ(spec.layout.workers, 2);
  EXPECT_EQ(spec.layout.replicas, 1);
  EXPECT_EQ(spec.layout.chunks, 1);
  EXPECT_EQ(spec.slices.lengths, std::vector<int64_t>{128});
  EXPECT_EQ(spec.recompute, (std::vector<bool>{false, false}));
  EXPECT_EQ(spec.schedule_spec.name, "1f1b");
  EXPECT_EQ(spec.schedule_spec.stages, 2);
  EXPECT_EQ(spec.schedule_spec.microbatches, 8);
  EXPECT_EQ(spec.schedule_spec.iterations, 1);  // a flushing schedule: one iteration's list
}

TEST(RunSpec, ExplicitPartitionIsTakenAsGiven) {
  EXPECT_EQ(layers_of(make_run_spec(pipeline_config(2, "2,4"))), (Ranges{{0, 2}, {2, 6}}));
  EXPECT_EQ(layers_of(make_run_spec(pipeline_config(3, "1,1,4"))), (Ranges{{0, 1}, {1, 2}, {2, 6}}));
}

// v = 2 chunks on p = 2 workers: the model is cut into p v = 4 stages, and replicas multiply the
// workers, not the stages.
TEST(RunSpec, InterleavedChunksCutStagesTimesChunks) {
  Config c = pipeline_config(2, "1,2,2,3");
  c.model.layers = 6;  // 8 layers
  c.pipeline.chunks = 2;
  c.pipeline.dp_width = 2;
  c.pipeline.schedule = "interleaved";
  const RunSpec spec = make_run_spec(c);
  EXPECT_EQ(layers_of(spec), (Ranges{{0, 1}, {1, 3}, {3, 5}, {5, 8}}));
  EXPECT_EQ(spec.layout.stages(), 4);
  EXPECT_EQ(spec.layout.world(), 4);
  EXPECT_EQ(spec.microbatch_rows, 32 / (2 * 8));
  EXPECT_EQ(spec.schedule_spec.chunks, 2);
  EXPECT_EQ(spec.schedule_spec.dp_width, 2);
  c.pipeline.partition = "balanced";
  const RunSpec balanced = make_run_spec(c);
  ASSERT_EQ(balanced.ranges.size(), 4u);
  EXPECT_EQ(balanced.ranges.front().first, 0);
  EXPECT_EQ(balanced.ranges.back().last, 8);
  for (size_t s = 1; s < 4; ++s) EXPECT_EQ(balanced.ranges[s].first, balanced.ranges[s - 1].last);
}

TEST(RunSpec, RecomputeListBecomesAFlagPerModelStage) {
  Config c = pipeline_config(2);
  c.pipeline.chunks = 2;
  c.pipeline.schedule = "interleaved";
  c.pipeline.recompute = "0,2";
  EXPECT_EQ(make_run_spec(c).recompute, (std::vector<bool>{true, false, true, false}));
  c.pipeline.recompute = "3";
  EXPECT_EQ(make_run_spec(c).recompute, (std::vector<bool>{false, false, false, true}));
  c.pipeline.recompute = "all";
  EXPECT_EQ(make_run_spec(c).recompute, (std::vector<bool>{true, true, true, true}));
  c.pipeline.recompute = "none";
  EXPECT_EQ(make_run_spec(c).recompute, (std::vector<bool>{false, false, false, false}));
  const std::string expected = "pipeline.recompute: expected \"none\", \"all\" or stage indices 0..3";
  for (const std::string bad : {"4", "yes", "1,", ",1", "-1", "1.5"}) {
    c.pipeline.recompute = bad;
    EXPECT_EQ(refusal_of(c).rfind(expected, 0), 0u) << bad << ": " << refusal_of(c);
  }
}

// A count of slices: near-equal, the first seq_len % n one token longer. Slices and no-flush
// rules run on the pipeline runtime even on one stage.
TEST(RunSpec, TokenSlicesAndNoFlushRulesMakeAOneStageRunAPipelineRun) {
  Config c = pipeline_config(1);
  EXPECT_FALSE(make_run_spec(c).pipelined);
  EXPECT_FALSE(runs_on_pipeline_workers(c));
  c.pipeline.schedule = "gpipe";
  c.pipeline.slices = "3";
  const RunSpec sliced = make_run_spec(c);
  EXPECT_TRUE(sliced.pipelined);
  EXPECT_TRUE(runs_on_pipeline_workers(c));
  EXPECT_EQ(sliced.slices.lengths, (std::vector<int64_t>{43, 43, 42}));
  EXPECT_EQ(sliced.slices.starts, (std::vector<int64_t>{0, 43, 86}));
  EXPECT_EQ(sliced.schedule_spec.slices, 3);
  Config async = pipeline_config(1);
  async.pipeline.schedule = "pipedream";
  async.train.steps = 7;
  const RunSpec no_flush = make_run_spec(async);
  EXPECT_TRUE(no_flush.pipelined);
  EXPECT_TRUE(runs_on_pipeline_workers(async));
  EXPECT_EQ(no_flush.schedule_spec.iterations, 7);  // one action list for the whole run
}

TEST(RunSpec, OneProcessHoldsEveryLayer) {
  const RunSpec spec = make_run_spec(pipeline_config(1, "6"));
  EXPECT_FALSE(spec.pipelined);
  EXPECT_EQ(layers_of(spec), (Ranges{{0, 6}}));
  EXPECT_EQ(spec.recompute, std::vector<bool>{false});
}

// Each refusal, one per line of the table: the config's change and the start of its message.
TEST(RunSpec, EveryCrossFieldRefusalIsOneLine) {
  const std::vector<std::pair<std::function<void(Config&)>, std::string>> cases = {
      {[](Config& c) { c.pipeline.partition = "1,1"; },
       "pipeline.partition '1,1' must give 2 counts summing to 6"},
      {[](Config& c) { c.pipeline.stages = 4, c.pipeline.chunks = 2, c.pipeline.schedule = "interleaved"; },
       "pipeline.stages x pipeline.chunks (8) exceeds the model's 6 layers"},
      {[](Config& c) { c.pipeline.stages = 1, c.pipeline.recompute = "all"; },
       "pipeline.recompute needs a pipeline run"},
      {[](Config& c) { c.pipeline.stages = 1, c.pipeline.partition = "1,5"; },
       "pipeline.partition '1,5' splits the 6 layers over 2 stages, but pipeline.stages is 1"},
      {[](Config& c) { c.pipeline.slices = "2"; },
       "pipeline.slices = \"2\" (token slicing) needs pipeline.schedule = \"gpipe\" (got '1f1b')"},
      {[](Config& c) { c.pipeline.chunks = 2; },
       "pipeline.chunks = 2 needs pipeline.schedule = \"interleaved\" or \"bfs\" or \"zb-v\" or \"dualpipev\" (got '1f1b')"},
      {[](Config& c) { c.pipeline.stages = 1, c.pipeline.chunks = 2, c.pipeline.schedule = "interleaved"; },
       "pipeline.chunks > 1 needs pipeline.stages >= 2"},
      {[](Config& c) { c.pipeline.dp_width = 3, c.train.microbatches = 2, c.train.batch_size = 8; },
       "train.batch_size (8) must be a multiple of pipeline.dp_width x train.microbatches (6)"},
      {[](Config& c) { c.pipeline.recompute = "all", c.pipeline.schedule = "pipeoptim"; },
       "pipeline.recompute runs with the schedules gpipe, 1f1b, interleaved, bfs, zb-h1, zb-h2, "
       "zb-v, dualpipev, 2bw, 2bw-predict, pipedream only"},
      {[](Config& c) { c.pipeline.dp_width = 2, c.pipeline.zero1 = 1, c.pipeline.schedule = "pipeoptim"; },
       "pipeline.zero1 = 1 runs with the schedules"},
      {[](Config& c) { c.pipeline.chunks = 2, c.pipeline.schedule = "interleaved", c.train.microbatches = 4,
                       c.pipeline.stages = 3, c.pipeline.partition = "1,1,1,1,1,1"; },
       "schedule interleaved: microbatches (4) must be a multiple of stages (3)"},
      {[](Config& c) { c.pipeline.schedule = "2bw", c.pipeline.stages = 3, c.pipeline.partition = "2,2,2",
                       c.train.microbatches = 2, c.train.batch_size = 4; },
       "schedule 2bw: needs microbatches >= stages (m >= d)"},
      {[](Config& c) { c.model.kind = "cnn", c.pipeline.schedule = "gpipe", c.pipeline.slices = "2"; },
       "pipeline.slices: model.kind 'cnn' cannot run token slices"},
      {[](Config& c) { c.pipeline.nnodes = 3; }, "pipeline.nnodes 3 must divide the 2 workers"},
      {[](Config& c) { c.pipeline.nnodes = 2, c.pipeline.node_rank = 2, c.pipeline.master_port = 29999; },
       "pipeline.node_rank 2 outside 0..1"},
      {[](Config& c) { c.pipeline.nnodes = 2; }, "several nodes need a fixed rendezvous port"},
      // This machine's CPU: nothing to capture on.
      {[](Config& c) { c.train.cuda_graphs = 1; },
       "train.cuda_graphs = 1 replays steps on a GPU, but this run computes on the CPU"},
      {[](Config& c) { c.pipeline.stages = 1, c.train.device = "cpu", c.train.cuda_graphs = 1; },
       "train.cuda_graphs = 1 replays steps on a GPU, but this run computes on the CPU"},
      {[](Config& c) { c.pipeline.stages = 1, c.train.cuda_graphs = 2; },
       "train.cuda_graphs = 2 emulates pipeline workers' graphs; the single process "
       "(pipeline.stages = 1) has none: use 0, or 1 on a GPU"},
  };
  for (const auto& [change, message] : cases) {
    Config c = pipeline_config(2);
    change(c);
    const std::string refusal = refusal_of(c);
    EXPECT_EQ(refusal.rfind(message, 0), 0u) << "expected: " << message << "\ngot: " << refusal;
    EXPECT_EQ(refusal.find('\n'), std::string::npos) << refusal;
  }
}

}  // namespace
}  // namespace pipetrain::runtime
