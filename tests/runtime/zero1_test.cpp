// ZeRO-1 against the unsharded data-parallel run: the same losses, gradient norms and every
// element of the final weights and (gathered) optimizer state, in float64 to 1e-9 relative
// (tests/exactness.h), while each worker's measured optimizer-state bytes fall from 8 k N to
// 8 k ceil(N / w) (N = the worker's parameters, k float64 state values each).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>

#include <fmt/format.h>

#include "core/files.h"
#include "io/metrics.h"
#include "model/state_io.h"
#include "../tensor_exactness.h"
#include "../pipetrain_run.h"

namespace pipetrain {
namespace {

namespace fs = std::filesystem;

struct Zero1Case {
  std::string optimizer;
  int stages;
  int state_values;  // per parameter: Adam/AdamW 2, SGD-momentum 1
};

struct RunOutput {
  std::vector<nlohmann::json> records;
  std::map<std::string, torch::Tensor> weights, state;
};

std::map<std::string, torch::Tensor> read_tensors(const fs::path& path) {
  std::map<std::string, torch::Tensor> out;
  for (const auto& entry : decode_safetensors(read_file(path.string()), path.string())) {
    out[entry.name] = from_entry(entry);
  }
  return out;
}

RunOutput run(const Zero1Case& c, int zero1) {
  const auto dir = testing::fresh_dir(fmt::format("zero1_{}_{}_p{}", zero1, c.optimizer, c.stages));
  const std::string args = fmt::format(
      "train --quiet --model.layers 3 --model.d_model 32 --model.heads 2 --model.seq_len 16 "
      "--train.batch_size 8 --train.microbatches 2 --train.steps 3 --train.warmup_steps 1 "
      "--train.lr 1e-2 --train.threads 1 --train.grad_clip 1.0 --train.optimizer {} "
      "--log.every 1 --eval.every 0 --eval.batches 1 --sample.tokens 0 --pipeline.stages {} "
      "--pipeline.dp_width 2 --pipeline.zero1 {} --pipeline.timeout_s 60 --model.dtype float64 "
      "--run-dir {}",
      c.optimizer, c.stages, zero1, dir.string());
  const auto result = testing::run_pipetrain(args);
  EXPECT_EQ(result.exit_code, 0) << result.output;
  RunOutput out;
  if (result.exit_code != 0) return out;
  out.records = read_metrics((dir / "metrics.jsonl").string());
  out.weights = read_tensors(dir / "checkpoint" / "model.safetensors");
  out.state = read_tensors(dir / "checkpoint" / "optimizer.safetensors");
  fs::remove_all(dir);
  return out;
}

class Zero1 : public ::testing::TestWithParam<Zero1Case> {};

TEST_P(Zero1, TrainsLikeUnshardedWithOneWthOfTheOptimizerState) {
  const Zero1Case c = GetParam();
  const RunOutput plain = run(c, 0), sharded = run(c, 1);
  ASSERT_EQ(plain.records.size(), 3u);
  ASSERT_EQ(sharded.records.size(), 3u);
  for (size_t step = 0; step < 3; ++step) {
    for (const char* field : {"loss", "grad_norm"}) {
      const double want = plain.records[step][field], got = sharded.records[step][field];
      EXPECT_TRUE(testing::exactly_close(got, want)) << field << " at step " << step << ": " << got
                                                     << " vs " << want;
    }
  }
  // The gradients are the unsharded all-reduce's; the update is element-wise on each shard.
  ASSERT_EQ(sharded.weights.size(), plain.weights.size());
  for (const auto& [name, want] : plain.weights) {
    ASSERT_TRUE(sharded.weights.count(name)) << name;
    EXPECT_EQ(sharded.weights.at(name).scalar_type(), torch::kFloat64) << name;
    EXPECT_EQ(testing::elementwise_mismatch(sharded.weights.at(name), want), "") << name;
  }
  ASSERT_EQ(sharded.state.size(), plain.state.size());
  for (const auto& [name, want] : plain.state) {
    ASSERT_TRUE(sharded.state.count(name)) << name;
    const bool step_count = name.size() > 5 && name.substr(name.size() - 5) == ".step";
    if (!step_count) {
      EXPECT_EQ(sharded.state.at(name).scalar_type(), torch::kFloat64) << name;
    }
    EXPECT_EQ(testing::elementwise_mismatch(sharded.state.at(name), want), "") << name;
  }

  // Step 1's measured optimizer state per worker: 8 k N unsharded, 8 k ceil(N / 2) sharded, N
  // the parameters of the worker's stage. The model's: embedding 256 x 32, positions 16 x 32,
  // 3 blocks of 12 x 32^2 + 13 x 32, final norm 2 x 32 = 46880; on 2 stages the last holds its
  // own copy of the tied head (256 x 32), so the stages' counts sum to 46880 + 8192.
  const auto& plain_bytes = plain.records[0]["mem_optimizer_mb"];
  const auto& sharded_bytes = sharded.records[0]["mem_optimizer_mb"];
  ASSERT_EQ(plain_bytes.size(), size_t(2 * c.stages));  // one entry per rank, replica-major
  const auto bytes = [](double mb) { return std::llround(mb * 1024 * 1024); };
  const int64_t value_bytes = 8;  // float64
  int64_t replica_parameters = 0;
  for (size_t rank = 0; rank < plain_bytes.size(); ++rank) {
    const int64_t n = bytes(plain_bytes[rank]) / (value_bytes * c.state_values);
    EXPECT_EQ(bytes(plain_bytes[rank]), value_bytes * c.state_values * n) << "rank " << rank;
    EXPECT_EQ(bytes(sharded_bytes[rank]), value_bytes * c.state_values * ((n + 1) / 2))
        << "rank " << rank;
    if (rank < size_t(c.stages)) replica_parameters += n;  // replica 0's workers
  }
  EXPECT_EQ(replica_parameters, c.stages == 1 ? 46880 : 46880 + 256 * 32);
}

INSTANTIATE_TEST_SUITE_P(Runtime, Zero1,
                         ::testing::Values(Zero1Case{"sgd", 1, 1}, Zero1Case{"adam", 1, 2},
                                           Zero1Case{"adamw", 1, 2}, Zero1Case{"sgd", 2, 1},
                                           Zero1Case{"adam", 2, 2}, Zero1Case{"adamw", 2, 2}),
                         [](const auto& info) {
                           return info.param.optimizer + "_p" + std::to_string(info.param.stages);
                         });

}  // namespace
}  // namespace pipetrain
