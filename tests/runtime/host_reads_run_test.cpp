// log.host_reads on pipeline workers: what each worker's step reads on the host (each a wait for
// a GPU), counted on the CPU. The engine reads per step, never per action: the squared gradient
// norm (before its all-reduce), the all-reduced norm (a host tensor under Gloo: free), and on the
// last stage the step's loss, whatever the microbatch count and the schedule.
#include <gtest/gtest.h>

#include <string>

#include <fmt/format.h>

#include "../pipetrain_run.h"

namespace pipetrain {
namespace {

std::string run_counting(const std::string& schedule, int stages, int microbatches) {
  const auto dir = testing::fresh_dir("host_reads_" + schedule);
  const auto run = testing::run_pipetrain(fmt::format(
      "train --quiet --model.layers 4 --model.d_model 16 --model.heads 2 --model.seq_len 8 "
      "--train.optimizer sgd --train.batch_size {} --train.microbatches {} --train.steps 3 "
      "--train.threads 1 --eval.every 0 --eval.batches 1 --sample.tokens 0 --log.host_reads 1 "
      "--pipeline.schedule {} --pipeline.stages {} --pipeline.timeout_s 60 --run-dir {}",
      2 * microbatches, microbatches, schedule, stages, dir.string()));
  EXPECT_EQ(run.exit_code, 0) << run.output;
  std::filesystem::remove_all(dir);
  return run.output;
}

TEST(HostReadsRun, PipelineWorkersReadPerStepNotPerAction) {
  for (const auto& [schedule, stages, microbatches] :
       {std::tuple{"1f1b", 2, 2}, std::tuple{"1f1b", 2, 8}, std::tuple{"gpipe", 3, 6}, std::tuple{"2bw", 2, 4}}) {
    const std::string output = run_counting(schedule, stages, microbatches);
    for (int rank = 0; rank < stages; ++rank) {
      const bool last = rank == stages - 1;
      const std::string line = fmt::format("pipetrain: rank {} read {}-{} values on the host a step over 3 steps",
                                           rank, last ? 3 : 2, last ? 3 : 2);
      EXPECT_NE(output.find(line), std::string::npos) << schedule << " m=" << microbatches << ": " << line
                                                      << "\n" << output;
    }
  }
}

}  // namespace
}  // namespace pipetrain
