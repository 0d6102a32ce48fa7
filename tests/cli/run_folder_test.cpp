// A run folder belongs to one run at a time, and a resumed run trains on what the run trained
// on (issue 35, item 6): a second `train` on a folder in use is refused before it changes
// anything, as is a resume that would change the seed, the batch or the data and its split.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "core/files.h"
#include "io/run_folder.h"
#include "../pipetrain_run.h"

namespace pipetrain {
namespace {

namespace fs = std::filesystem;

const std::string kSmallRun =
    "train --model.layers 1 --model.d_model 16 --model.seq_len 16 --train.batch_size 4"
    " --train.microbatches 2 --eval.every 0 --sample.tokens 0 --quiet --checkpoint.every 1";

fs::path trained_run(const std::string& name, const std::string& extra) {
  const fs::path dir = testing::fresh_dir(name);
  const auto run = testing::run_pipetrain(kSmallRun + " --train.steps 2 " + extra + " --run-dir " + dir.string());
  EXPECT_EQ(run.exit_code, 0) << run.output;
  return dir;
}

TEST(RunFolder, ASecondRunOnAFolderInUseIsRefusedAndChangesNothing) {
  for (const std::string stages : {"1", "2"}) {
    const fs::path dir = trained_run("in_use_" + stages, "--pipeline.stages " + stages);
    const std::string config = read_file((dir / "config.toml").string());
    const std::string metrics = read_file((dir / "metrics.jsonl").string());
    {
      const RunFolderLock held(dir.string());  // as a run training in it holds it
      const std::string in_use = "run folder '" + dir.string() + "' is in use: a run (pid " +
                                 std::to_string(::getpid()) + ") is training in it";
      testing::expect_one_line_error("train --resume " + dir.string() + " --train.steps 4", in_use);
      testing::expect_one_line_error(kSmallRun + " --pipeline.stages " + stages + " --overwrite --run-dir " +
                                         dir.string(), in_use);
      EXPECT_EQ(read_file((dir / "config.toml").string()), config);
      EXPECT_EQ(read_file((dir / "metrics.jsonl").string()), metrics);
      EXPECT_TRUE(fs::exists(dir / "checkpoint"));
    }
    // Released (as when that run ends, however it ends): the resume goes ahead.
    const auto resumed = testing::run_pipetrain("train --resume " + dir.string() + " --train.steps 3 --quiet");
    EXPECT_EQ(resumed.exit_code, 0) << resumed.output;
    fs::remove_all(dir);
  }
}

TEST(RunFolder, AResumeThatWouldTrainOnOtherDataIsRefusedAndChangesNothing) {
  const fs::path dir = trained_run("meaning", "--pipeline.stages 2");
  const std::string config = read_file((dir / "config.toml").string());
  const std::string resume = "train --resume " + dir.string() + " --train.steps 4 ";
  testing::expect_one_line_error(resume + "--train.seed 7", "resuming with train.seed = 7 (the run's: 1234)");
  testing::expect_one_line_error(resume + "--data.val_fraction 0.2",
                                 "data.val_fraction = 0.2 (the run's: 0.1) would train on other data");
  testing::expect_one_line_error(resume + "--train.batch_size 8 --train.microbatches 2",
                                 "train.batch_size = 8 (the run's: 4)");
  // Nor another model: fields that change what it computes without changing its shapes too
  // (they went through and config.toml claimed the whole run used them).
  testing::expect_one_line_error(resume + "--model.activation gelu_tanh",
                                 "resuming with model.activation = gelu_tanh (the run's: gelu) would "
                                 "change what the run's model computes");
  testing::expect_one_line_error(resume + "--model.norm_eps 0.5", "model.norm_eps = 0.5 (the run's: 1e-05)");
  // Shapes the checkpoint's model shape leaves out are named as settings, not as a tensor that
  // does not fit.
  testing::expect_one_line_error(resume + "--model.ffn_hidden 32", "model.ffn_hidden = 32 (the run's: 64)");
  testing::expect_one_line_error(resume + "--model.positions 32", "model.positions = 32 (the run's: 16)");
  EXPECT_EQ(read_file((dir / "config.toml").string()), config);
  // What does not change the data may change (and the family's values spelled out are no
  // change): the run goes on.
  const auto longer = testing::run_pipetrain(resume + "--eval.every 2 --model.activation gelu "  // = auto
                                             "--model.ffn_hidden 64 --model.positions 16 --quiet");
  EXPECT_EQ(longer.exit_code, 0) << longer.output;
  fs::remove_all(dir);
}

// The same path with other contents, or another file where the run's was moved from: refused,
// naming the data, before anything changes; the run's own bytes under another name resume.
TEST(RunFolder, AResumeOnDataWhoseContentsChangedIsRefused) {
  const fs::path data_dir = testing::fresh_dir("changed_data");
  const auto text = [](char letter) {
    std::string bytes;
    for (int i = 0; i < 4000; ++i) bytes += char(i % 7 == 6 ? ' ' : letter + i % 5);
    return bytes;
  };
  fs::create_directories(data_dir);
  const fs::path data = data_dir / "text.txt";
  write_file_atomically(data.string(), text('a'));
  for (const std::string stages : {"1", "2"}) {
    const fs::path dir = trained_run("changed_data_" + stages,
                                     "--pipeline.stages " + stages + " --data.path " + data.string());
    const std::string sidecar = read_file((dir / "checkpoint" / "checkpoint.json").string());
    EXPECT_NE(sidecar.find("\"data\": \"4000 bytes, crc32c "), std::string::npos) << sidecar;
    const std::string metrics = read_file((dir / "metrics.jsonl").string());
    const std::string resume = "train --resume " + dir.string() + " --train.steps 3";
    write_file_atomically(data.string(), text('k'));  // rewritten in place, the same size
    testing::expect_one_line_error(resume, "data.path '" + data.string() +
                                               "' is not the data the run trained on (now 4000 bytes");
    const fs::path moved = data_dir / "moved.txt";  // the run's file gone, another given
    fs::rename(data, moved);
    testing::expect_one_line_error(resume + " --data.path " + moved.string(), "is not the data the run trained on");
    EXPECT_EQ(read_file((dir / "metrics.jsonl").string()), metrics);
    write_file_atomically(moved.string(), text('a'));  // its own bytes, moved
    const auto resumed = testing::run_pipetrain(resume + " --quiet --data.path " + moved.string());
    EXPECT_EQ(resumed.exit_code, 0) << resumed.output;
    fs::rename(moved, data);
    fs::remove_all(dir);
  }
  fs::remove_all(data_dir);
}

}  // namespace
}  // namespace pipetrain
