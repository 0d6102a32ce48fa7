#pragma once
// The run configuration: plain structs, one per TOML section, plus a registry of every field
// (key, type, default, meaning, bounds). The registry drives TOML parsing (unknown keys are
// errors), command-line overrides (`--model.layers 8`), the TOML dump written into each run
// folder, and the generated config reference (docs/config.md).
#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <variant>
#include <vector>

namespace pipetrain {

struct ModelConfig {
  std::string kind = "gpt";  // which model (src/model/registry.cpp): gpt, llama, cnn, transducer, ...
  std::string preset;       // a named shape (core/model_presets.h) setting the shape fields below
  int64_t layers = 4;       // transformer blocks (cnn: residual blocks)
  int64_t d_model = 128;    // hidden size (cnn: the stem's channels)
  int64_t heads = 4;        // attention heads (must divide d_model)
  int64_t seq_len = 128;    // context length in tokens
  int64_t vocab_size = 256; // byte-level vocabulary; token files need their tokenizer's
  int64_t kv_heads = 0;     // llama: key/value heads, dividing heads; 0 = heads
  int64_t ffn_hidden = 0;   // gpt, llama: the MLP's inner width; 0 = the family's (default_ffn_hidden)
  int64_t positions = 0;    // gpt: rows of the learned position table (>= seq_len); 0 = seq_len
  double norm_eps = 1e-5;   // gpt, llama: LayerNorm / RMSNorm epsilon
  double rope_theta = 10000;  // llama: rotary base
  std::string rope_scaling;   // llama: "" | "linear:F" | "llama3:F,LOW,HIGH,ORIGINAL" (core/rope_scaling.h)
  std::string head = "auto";  // gpt, llama: tied | untied to the embedding; auto = gpt tied, llama untied
  std::string activation = "auto";  // gpt: gelu | gelu_tanh (transformers' gelu_new); auto = gelu
  std::string init_from;    // gpt, llama: a Hugging Face checkpoint folder: its config.json and weights
  int64_t loss_chunk_tokens = 0;  // > 0: chunked cross-entropy, this many tokens' logits at a time
  std::string dtype = "float32";  // float32 | float64 | bfloat16 (mixed: float32 weights, device/precision.h)
  std::string torchscript;  // kind "torchscript": folder of layer0.pt, layer1.pt, ... and model.json
  int64_t max_labels = 80;  // transducer: labels per utterance (label tensors are padded to it)
  std::string transducer_loss = "sample-wise";  // transducer: sample-wise | batched (the reference)
};

struct TrainConfig {
  int64_t steps = 800;
  int64_t batch_size = 32;   // sequences per optimizer step (global batch)
  int64_t microbatches = 8;  // the batch is split into this many equal microbatches (pipeline)
  std::string optimizer = "adamw";  // sgd | adam | adamw | muon
  double lr = 3e-3;
  double min_lr = 3e-4;
  int64_t warmup_steps = 50;
  double momentum = 0.9;      // sgd
  double beta1 = 0.9;         // adam / adamw
  double beta2 = 0.99;
  double eps = 1e-8;
  double weight_decay = 0.01;
  double muon_lr = 0.02;        // muon: peak learning rate of the hidden matrices (train.lr: the rest)
  double muon_momentum = 0.95;  // muon
  std::string delay_correction = "none";  // none | error_feedback
  double grad_clip = 1.0;     // global gradient-norm clip; 0 disables
  double loss_scale = 65536;  // model.dtype float16: the initial dynamic loss scale (train/loss_scale.h)
  int64_t loss_scale_growth_interval = 2000;  // float16: good steps in a row that double the scale
  int64_t seed = 1234;
  int64_t threads = 0;        // compute threads; 0 = one per core
  std::string device = "auto";  // cpu | cuda | auto (cuda when a GPU is seen): device/execution.h
  int64_t cuda_graphs = 0;      // 1: captured CUDA graphs replayed, 2: their bookkeeping emulated (device/execution.h)
};

struct DataConfig {
  std::string format = "bytes";  // bytes: a text file's bytes are the tokens; tokens: llm.c files
  std::string path = "data/tinyshakespeare.txt";  // tokens: a folder with train.bin and val.bin
  double val_fraction = 0.1;  // the tail of the file held out for validation
  std::string tokenizer;      // tokens: the SentencePiece model that made them ("" = none)
  std::string val_split = "validation";  // speech: validation | test | unseen-voice
};

struct EvalConfig {
  int64_t every = 100;    // validation every N steps (and at the last step); 0 = only at the end
  int64_t batches = 8;    // validation batches per evaluation
};

struct LogConfig {
  int64_t every = 10;     // metrics.jsonl line every N steps (progress line updates every step)
  int64_t profile_step = 0;   // the first step under the profiler (1-based); 0 = none
  int64_t profile_steps = 1;  // how many steps from it
  // 1: every worker counts the values its steps read on the host (device/host_reads.h: what makes
  // a GPU's host wait inside a step) and says so at the end
  int64_t host_reads = 0;
};

struct SampleConfig {
  int64_t tokens = 300;   // characters printed from the trained model at the end; 0 = none
  double temperature = 0.8;
  std::string prompt = "ROMEO:";
};

// Pipeline-parallel runs (src/runtime): one worker process per stage, spawned by `pipetrain
// train` itself or by torchrun (RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT in the environment).
struct PipelineConfig {
  // The default job is a 2-stage 1F1B pipeline with 8 microbatches (train.microbatches): on 2
  // cores it beats one process with 2 threads (docs/benchmarks.md, "Pipeline throughput").
  int64_t stages = 2;               // p; 1 = the single-process trainer
  std::string schedule = "1f1b";    // a schedule the runtime runs (src/schedule/catalogue.cpp)
  std::string partition = "balanced";  // "balanced" (by analytic compute) or counts "3,3"
  int64_t dp_width = 1;             // data-parallel replicas of every stage
  int64_t chunks = 1;               // v: model chunks per worker (interleaved); p * v stages
  std::string recompute = "none";   // activation recomputation: "none", "all" or stages "0,1"
  int64_t zero1 = 0;                // 1: ZeRO-1, optimizer state sharded over the dp_width replicas
  int64_t sync_warmup_steps = 0;    // 2bw: steps trained synchronously (flushing) before 2BW's rule
  std::string slices = "1";         // TeraPipe token slices: a count or lengths "64,40,24"
  double timeout_s = 120;           // rendezvous and every send/recv/all-reduce
  std::string master_addr = "127.0.0.1";  // rendezvous address when spawning workers
  int64_t master_port = 0;          // rendezvous port; 0 = a free one (one node only)
  int64_t nnodes = 1;               // machines the launcher's workers are spread over
  int64_t node_rank = 0;            // this machine: 0 hosts the rendezvous
  int64_t bind_cores = 1;           // 1: each spawned worker on its own block of cores; 0 = the OS places them
  double memory_budget_mb = 0;      // per worker (a plan's --memory-per-worker); 0 = none
};

// Periodic checkpoints: RUN_DIR/checkpoints/step-NNNNNN/, `latest` names the newest complete one.
struct CheckpointConfig {
  int64_t every = 200;  // write a checkpoint every N steps (and on SIGINT/SIGTERM); 0 = only at the end
  int64_t keep = 2;     // complete checkpoints kept (older ones are removed)
};

struct Config {
  ModelConfig model;
  TrainConfig train;
  DataConfig data;
  EvalConfig eval;
  LogConfig log;
  SampleConfig sample;
  PipelineConfig pipeline;
  CheckpointConfig checkpoint;
};

using FieldPtr = std::variant<int64_t*, double*, std::string*>;

struct FieldSpec {
  std::string key;   // "section.name"
  std::string help;  // meaning, one line
  std::function<FieldPtr(Config&)> locate;
  double min = -1e300;               // numbers: inclusive lower bound
  std::vector<std::string> choices;  // strings: allowed values (empty = any)
  double max = 1e300;                // numbers: inclusive upper bound
  bool min_excluded = false, max_excluded = false;  // the bound itself refused (0 < x < 1)
};

// Every configurable field, in documentation order.
const std::vector<FieldSpec>& config_fields();
const FieldSpec* find_field(const std::string& key);
// Sets model.preset and the shape it names (layers, d_model, heads, seq_len, vocab_size);
// "" only records that there is none. UserError naming the presets for an unknown name.
void apply_model_preset(Config& config, const std::string& name, const std::string& origin);

// Parsing. All throw UserError with a message naming the field / file / line.
Config parse_config_toml(const std::string& text, const std::string& origin);
Config load_config_file(const std::string& path);
// The fields a config file sets ("model.layers", ...), whatever their values.
std::set<std::string> config_file_fields(const std::string& path);
void set_field_from_string(Config& config, const std::string& key, const std::string& value);
void validate(const Config& config);  // cross-field rules (heads | d_model, ...)
// The decoders' MLP width for model.ffn_hidden = 0: 4 d_model (gpt); llama: 8/3 d_model rounded up
// to a multiple of 64 (SwiGLU's three matrices then cost what GPT's two do).
int64_t default_ffn_hidden(const ModelConfig& model);
int64_t key_value_heads(const ModelConfig& model);  // model.kv_heads, 0 resolved to model.heads
int64_t position_rows(const ModelConfig& model);    // model.positions, 0 resolved to model.seq_len
bool head_is_tied(const ModelConfig& model);  // model.head, "auto" resolved by model.kind
// What the schedule implies (its weight policy, whether it resumes) is the schedule catalogue's:
// src/schedule/run_rules.h.

// Serialisation.
std::string to_toml(const Config& config);
std::string field_value_string(const Config& config, const FieldSpec& field);
std::string config_reference_markdown();  // docs/config.md

}  // namespace pipetrain
