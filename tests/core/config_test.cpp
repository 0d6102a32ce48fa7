#include <gtest/gtest.h>

#include <fstream>

#include "core/config.h"
#include "core/error.h"
#include "core/files.h"
#include "../user_error.h"

namespace pipetrain {
namespace {

TEST(Config, DefaultsSurviveTomlRoundTrip) {
  Config config;
  config.train.lr = 0.125;
  config.sample.prompt = "a \"quoted\"\nline";
  const Config parsed = parse_config_toml(to_toml(config), "roundtrip");
  EXPECT_EQ(to_toml(parsed), to_toml(config));
  EXPECT_DOUBLE_EQ(parsed.train.lr, 0.125);
  EXPECT_EQ(parsed.sample.prompt, "a \"quoted\"\nline");
}

TEST(Config, ParsesSectionsAndIntegersAsNumbers) {
  const Config c = parse_config_toml("[model]\nlayers = 6\n[train]\nlr = 1\noptimizer = \"sgd\"\n", "t");
  EXPECT_EQ(c.model.layers, 6);
  EXPECT_DOUBLE_EQ(c.train.lr, 1.0);
  EXPECT_EQ(c.train.optimizer, "sgd");
  EXPECT_EQ(c.model.d_model, Config{}.model.d_model);
}

TEST(Config, UnknownFieldSuggestsTheClosestName) {
  const auto message = test::user_error_of([] { parse_config_toml("[model]\nlayer = 3\n", "x.toml"); });
  EXPECT_EQ(message, "x.toml: unknown config field 'model.layer' (did you mean 'model.layers'?)");
}

TEST(Config, WrongTypesAreRejected) {
  EXPECT_EQ(test::user_error_of([] { parse_config_toml("[model]\nlayers = \"four\"\n", "t"); }),
            "t: model.layers must be an integer");
  EXPECT_EQ(test::user_error_of([] { parse_config_toml("[train]\nlr = \"big\"\n", "t"); }),
            "t: train.lr must be a number");
  EXPECT_EQ(test::user_error_of([] { parse_config_toml("model = 3\n", "t"); }),
            "t: 'model' must be a [section] table of fields");
}

TEST(Config, BoundsAndChoicesAreChecked) {
  EXPECT_EQ(test::user_error_of([] { parse_config_toml("[model]\nlayers = -2\n", "t"); }),
            "t: model.layers must be >= 1, got -2");
  EXPECT_EQ(test::user_error_of([] { parse_config_toml("[train]\noptimizer = \"lion\"\n", "t"); }),
            "t: train.optimizer must be one of sgd, adam, adamw, muon, got 'lion'");
}

TEST(Config, MalformedTomlNamesTheLine) {
  const auto message = test::user_error_of([] { parse_config_toml("[model]\nlayers = = 3\n", "bad.toml"); });
  EXPECT_EQ(message.rfind("bad.toml:2:", 0), 0u) << message;
  EXPECT_NE(message.find("malformed TOML"), std::string::npos);
}

TEST(Config, CrossFieldRules) {
  EXPECT_EQ(test::user_error_of([] { parse_config_toml("[model]\nheads = 5\n", "t"); }),
            "model.heads (5) must divide model.d_model (128)");
  EXPECT_EQ(test::user_error_of([] { parse_config_toml("[train]\nmicrobatches = 5\n", "t"); }),
            "train.microbatches (5) must divide train.batch_size (32)");
  EXPECT_EQ(test::user_error_of([] { parse_config_toml("[model]\nvocab_size = 10\n", "t"); }),
            "model.vocab_size must be >= 256 for byte-level text (data.format = \"bytes\"), got 10");
  // Token files bring their own vocabulary (checked against the files' ids when they open).
  EXPECT_EQ(parse_config_toml("[model]\nvocab_size = 10\n[data]\nformat = \"tokens\"\n", "t")
                .model.vocab_size, 10);
  EXPECT_EQ(test::user_error_of([] { parse_config_toml("[data]\ntokenizer = \"tok.model\"\n", "t"); }),
            "data.tokenizer is for token files: set data.format = \"tokens\" too (docs/data.md)");
  EXPECT_EQ(test::user_error_of([] { parse_config_toml("[pipeline]\nzero1 = 1\n", "t"); }),
            "pipeline.zero1 = 1 shards the optimizer state over data-parallel replicas: it needs "
            "pipeline.dp_width >= 2 (got 1)");
  // Its range is the field's own (the reference prints it): 0 to 1.
  EXPECT_NE(test::user_error_of([] { parse_config_toml("[pipeline]\nzero1 = 2\ndp_width = 2\n", "t"); })
                .find("pipeline.zero1 must be <= 1, got 2"),
            std::string::npos);
  EXPECT_EQ(test::user_error_of([] {
              parse_config_toml("[train]\noptimizer = \"muon\"\n[pipeline]\nzero1 = 1\ndp_width = 2\n", "t");
            }),
            "train.optimizer = \"muon\" cannot run with pipeline.zero1 = 1 (Muon orthogonalises whole "
            "matrices; ZeRO-1 shards a flat buffer): use pipeline.zero1 = 0");
  // A zero learning rate holds the weights still (allowed), once the schedule's floor is 0 too.
  EXPECT_EQ(test::user_error_of([] { parse_config_toml("[train]\nlr = 0\n", "t"); }),
            "train.lr = 0 holds the weights still, but the schedule's floor train.min_lr is 0.0003: set "
            "train.min_lr = 0 too, or give train.lr > 0");
  EXPECT_EQ(parse_config_toml("[train]\nlr = 0\nmin_lr = 0\n", "t").train.lr, 0);
  EXPECT_EQ(test::user_error_of([] { parse_config_toml("[train]\noptimizer = \"muon\"\nlr = 0\nmin_lr = 0\n", "t"); }),
            "train.optimizer = \"muon\" needs train.lr > 0 (Muon's learning rate follows its schedule)");
  EXPECT_EQ(parse_config_toml("[train]\ncuda_graphs = 1\n[pipeline]\nstages = 1\n", "t").train.cuda_graphs, 1);
  // Error feedback is element-wise, so ZeRO-1's shards take it.
  EXPECT_EQ(parse_config_toml("[train]\ndelay_correction = \"error_feedback\"\n[pipeline]\nzero1 = 1\n"
                              "dp_width = 2\n", "t").train.delay_correction, "error_feedback");
}

TEST(Config, CommandLineOverrides) {
  Config config;
  set_field_from_string(config, "model.layers", "8");
  set_field_from_string(config, "train.lr", "2e-4");
  set_field_from_string(config, "data.path", "x.txt");
  EXPECT_EQ(config.model.layers, 8);
  EXPECT_DOUBLE_EQ(config.train.lr, 2e-4);
  EXPECT_EQ(config.data.path, "x.txt");
  EXPECT_EQ(test::user_error_of([&] { set_field_from_string(config, "model.layers", "8.5"); }),
            "--model.layers: expected an integer, got '8.5'");
  EXPECT_EQ(test::user_error_of([&] { set_field_from_string(config, "train.steps", "-1"); }),
            "--train.steps: train.steps must be >= 1, got -1");
}

TEST(Config, MissingFileIsAUserError) {
  EXPECT_EQ(test::user_error_of([] { load_config_file("/nonexistent/run.toml"); }),
            "cannot read config file '/nonexistent/run.toml': No such file or directory");
}

TEST(Config, DocsReferenceMatchesTheRegistry) {
  const std::string path = std::string(PIPETRAIN_SOURCE_DIR) + "/docs/config.md";
  EXPECT_EQ(read_file(path), config_reference_markdown())
      << "regenerate with: ./build/pipetrain config --reference > docs/config.md";
}

TEST(Config, ExampleConfigsParse) {
  const std::string path = std::string(PIPETRAIN_SOURCE_DIR) + "/examples/default.toml";
  EXPECT_EQ(to_toml(load_config_file(path)), to_toml(Config{}))
      << "examples/default.toml must spell out the embedded default";
}

}  // namespace
}  // namespace pipetrain

namespace pipetrain {
namespace {

// From fuzz/fuzz_config.cpp: invalid UTF-8 is a UserError naming its place, checked before
// toml++ parses anything.
TEST(Config, InvalidUtf8IsAUserErrorNamingThePlace) {
  const std::string crash = read_file(std::string(PIPETRAIN_SOURCE_DIR) +
                                      "/fuzz/regressions/config/invalid_utf8_table_header");
  EXPECT_THROW(parse_config_toml(crash, "crash.toml"), UserError);
  try {
    parse_config_toml("[model]\nlayers = \"\xe8\"\n", "bad.toml");
    FAIL() << "accepted invalid UTF-8";
  } catch (const UserError& error) {
    EXPECT_STREQ(error.what(), "bad.toml:2:11: malformed TOML: not valid UTF-8");
  }
  EXPECT_EQ(parse_config_toml("[sample]\nprompt = \"h\xc3\xa9\"\n", "ok.toml").sample.prompt, "h\xc3\xa9");
}

}  // namespace
}  // namespace pipetrain

namespace pipetrain {
namespace {

// From fuzz/fuzz_config.cpp: toml++ reaches __builtin_unreachable when it tests some non-ASCII
// characters for whitespace; they are refused before, except inside strings and comments.
TEST(Config, NonAsciiOutsideStringsIsRefusedBeforeTomlxx) {
  const std::string crash = read_file(std::string(PIPETRAIN_SOURCE_DIR) +
                                      "/fuzz/regressions/config/unicode_whitespace_unreachable");
  EXPECT_THROW(parse_config_toml(crash, "crash.toml"), UserError);
  EXPECT_THROW(parse_config_toml(read_file(std::string(PIPETRAIN_SOURCE_DIR) +
                                           "/fuzz/regressions/config/quote_run_unreachable"),
                                 "crash.toml"),
               UserError);
  EXPECT_THROW(parse_config_toml("\"#\"\xc6\xa0", "crash.toml"), UserError);  // quoted_key_hash
  try {
    parse_config_toml("[model]\nlayers = 4 \xc3\xa9\n", "bad.toml");
    FAIL() << "accepted";
  } catch (const UserError& error) {
    EXPECT_STREQ(error.what(), "bad.toml:2:12: malformed TOML: non-ASCII character outside a string or comment");
  }
  const Config ok = parse_config_toml(
      "# caf\xc3\xa9\n[sample]\nprompt = \"a\\\"\xc3\xa9\" # \xc3\xa9\n", "ok.toml");
  EXPECT_EQ(ok.sample.prompt, "a\"\xc3\xa9");
  EXPECT_THROW(parse_config_toml("[sample]\nprompt = '''\n\xc3\xa9\n'''\n", "x.toml"), UserError);  // conservative
}

}  // namespace
}  // namespace pipetrain

namespace pipetrain {
namespace {

std::string override_error(const std::string& key, const std::string& value) {
  Config config;
  return test::user_error_of([&] { set_field_from_string(config, key, value); });
}

// Command-line numbers are plain decimals: strtod's hex floats, infinities and padding are not.
TEST(Config, CommandLineNumbersAreStrictDecimals) {
  EXPECT_EQ(override_error("train.lr", "0x10"), "--train.lr: expected a number, got '0x10'");
  EXPECT_EQ(override_error("train.lr", "inf"), "--train.lr: expected a number, got 'inf'");
  EXPECT_EQ(override_error("train.lr", " 1e-3"), "--train.lr: expected a number, got ' 1e-3'");
  EXPECT_EQ(override_error("model.layers", "+4"), "--model.layers: expected an integer, got '+4'");
  EXPECT_EQ(override_error("model.layers", "0x4"), "--model.layers: expected an integer, got '0x4'");
  for (const char* text : {"0.5", ".5", "5.", "2.5e-3", "1E+2", "3", "0"}) {
    EXPECT_EQ(override_error("train.weight_decay", text), "") << text;
  }
  Config config;
  set_field_from_string(config, "train.lr", "2.5e-3");
  EXPECT_DOUBLE_EQ(config.train.lr, 2.5e-3);
}

// Fields whose values feed fixed-width places have an upper bound, in the file and on the
// command line, and docs/config.md shows it.
TEST(Config, UpperBoundsAreChecked) {
  EXPECT_EQ(override_error("pipeline.master_port", "70000"),
            "--pipeline.master_port: pipeline.master_port must be <= 65535, got 70000");
  EXPECT_EQ(override_error("pipeline.timeout_s", "1e300"),
            "--pipeline.timeout_s: pipeline.timeout_s must be <= 1000000, got 1e+300");
  EXPECT_EQ(test::user_error_of([] { parse_config_toml("[pipeline]\nmaster_port = 65536\n", "t"); }),
            "t: pipeline.master_port must be <= 65535, got 65536");
  EXPECT_EQ(override_error("pipeline.master_port", "65535"), "");
  EXPECT_NE(config_reference_markdown().find("; 0 to 65535 |"), std::string::npos);
}

TEST(Config, ConfigPathThatIsNotAFileIsRefused) {
  const std::string dir = ::testing::TempDir();
  EXPECT_EQ(test::user_error_of([&] { load_config_file(dir); }),
            "config file '" + dir + "' is a folder, not a file");
  EXPECT_EQ(test::user_error_of([] { load_config_file("/dev/zero"); }),
            "config file '/dev/zero' is not a regular file");
}

}  // namespace
}  // namespace pipetrain

namespace pipetrain {
namespace {

// A preset sets the five shape fields; fields given beside it override it, in the file and on
// the command line, whatever their order; an unknown preset names the known ones.
TEST(Config, ModelPresetSetsTheShapeAndFieldsBesideItOverrideIt) {
  const Config small = parse_config_toml("[model]\nseq_len = 256\npreset = \"gpt2-small\"\n", "t.toml");
  EXPECT_EQ(small.model.layers, 12);
  EXPECT_EQ(small.model.d_model, 768);
  EXPECT_EQ(small.model.heads, 12);
  EXPECT_EQ(small.model.vocab_size, 50257);
  EXPECT_EQ(small.model.seq_len, 256);  // given beside the preset
  Config medium;
  set_field_from_string(medium, "model.preset", "gpt2-medium");
  EXPECT_EQ(medium.model.layers, 24);
  EXPECT_EQ(medium.model.d_model, 1024);
  EXPECT_EQ(medium.model.heads, 16);
  EXPECT_EQ(medium.model.seq_len, 1024);
  // The dump records the preset and every field: reading it back gives the same shape.
  const Config again = parse_config_toml(to_toml(small), "dump.toml");
  EXPECT_EQ(again.model.seq_len, 256);
  EXPECT_EQ(again.model.preset, "gpt2-small");
  try {
    parse_config_toml("[model]\npreset = \"gpt2-huge\"\n", "t.toml");
    FAIL() << "an unknown preset was accepted";
  } catch (const UserError& error) {
    EXPECT_NE(std::string(error.what()).find("gpt2-small, gpt2-medium"), std::string::npos) << error.what();
  }
}

// A Llama preset sets the kind and Llama's fields too; the decoders' fields are checked
// against each other, each refusal naming the field.
TEST(Config, LlamaPresetSetsItsKindAndGroupedQueryShape) {
  const Config llama = parse_config_toml("[model]\npreset = \"llama3-8b\"\nseq_len = 2048\n", "t.toml");
  EXPECT_EQ(llama.model.kind, "llama");
  EXPECT_EQ(llama.model.kv_heads, 8);
  EXPECT_EQ(llama.model.ffn_hidden, 14336);
  EXPECT_EQ(llama.model.rope_theta, 500000);
  EXPECT_EQ(llama.model.seq_len, 2048);
  EXPECT_FALSE(head_is_tied(llama.model));
  const Config small = parse_config_toml("[model]\npreset = \"llama3.2-1b\"\n", "t.toml");
  EXPECT_TRUE(head_is_tied(small.model));
  EXPECT_EQ(small.model.rope_scaling, "llama3:32,1,4,8192");
  Config gpt;
  EXPECT_EQ(default_ffn_hidden(gpt.model), 4 * 128);
  gpt.model.kind = "llama";
  EXPECT_EQ(default_ffn_hidden(gpt.model), 384);  // 8/3 x 128 = 341.3, up to a multiple of 64
  // 0 = the family's value; an explicit one is itself.
  EXPECT_EQ(key_value_heads(gpt.model), gpt.model.heads);
  EXPECT_EQ(position_rows(gpt.model), gpt.model.seq_len);
  gpt.model.kv_heads = 2;
  gpt.model.positions = 1024;
  EXPECT_EQ(key_value_heads(gpt.model), 2);
  EXPECT_EQ(position_rows(gpt.model), 1024);
}

TEST(Config, DecoderFieldsThatContradictEachOtherAreRefusedByName) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"[model]\nkind = \"llama\"\nheads = 4\nkv_heads = 3\n", "model.kv_heads (3) must divide model.heads (4)"},
      {"[model]\nkv_heads = 2\n", "model.kv_heads (2) is for model.kind = \"llama\""},
      {"[model]\npositions = 64\n", "model.positions (64) must be at least model.seq_len (128)"},
      {"[model]\nkind = \"llama\"\nrope_scaling = \"yarn:4\"\n", "other kinds, e.g. transformers' dynamic, yarn"},
      {"[model]\nkind = \"llama\"\nrope_scaling = \"llama3:8,1,4\"\n", "needs 4 positive numbers"},
      {"[model]\nkind = \"llama\"\nd_model = 12\nheads = 4\n", "even head width"},
      {"[model]\nkind = \"llama\"\nactivation = \"gelu_tanh\"\n", "llama's MLP is SwiGLU"},
  };
  for (const auto& [toml, fragment] : cases) {
    try {
      parse_config_toml(toml, "t.toml");
      ADD_FAILURE() << "accepted: " << toml;
    } catch (const UserError& error) {
      EXPECT_NE(std::string(error.what()).find(fragment), std::string::npos) << error.what();
    }
  }
}

// Counts the runtime holds as int are bounded where they are read: a larger one used to pass
// and wrap (train.steps 2^32 + 2 trained 2 steps' worth of schedule; sync_warmup_steps
// 2^32 + 1 became 1).
TEST(Config, CountsBeyondAnIntAreRefusedNotWrapped) {
  for (const std::string key : {"train.steps", "pipeline.sync_warmup_steps", "train.microbatches"}) {
    Config config;
    try {
      set_field_from_string(config, key, "4294967298");
      ADD_FAILURE() << key << " accepted 2^32 + 2";
    } catch (const UserError& error) {
      EXPECT_NE(std::string(error.what()).find("must be <= 2147483647, got 4294967298"), std::string::npos)
          << error.what();
    }
  }
}

}  // namespace
}  // namespace pipetrain
