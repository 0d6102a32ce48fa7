// The registry of configuration fields. Adding a field = one struct member + one line here.
#include "core/config.h"
#include "core/model_presets.h"
#include "core/text.h"

namespace pipetrain {
namespace {

template <typename Section, typename T>
std::function<FieldPtr(Config&)> at(Section Config::*section, T Section::*member) {
  return [section, member](Config& c) -> FieldPtr { return &((c.*section).*member); };
}

FieldSpec spec(std::string key, std::string help, std::function<FieldPtr(Config&)> locate,
               double min = -1e300, std::vector<std::string> choices = {}, double max = 1e300) {
  return FieldSpec{std::move(key), std::move(help), std::move(locate), min, std::move(choices), max};
}

// A number field whose bounds are themselves refused: (min, max), or (min, ...) with no max.
FieldSpec open_range(FieldSpec field, bool min_excluded, bool max_excluded) {
  field.min_excluded = min_excluded;
  field.max_excluded = max_excluded;
  return field;
}

// The longest rendezvous or send/recv wait: the timeout becomes int64 milliseconds (a week+).
constexpr double kMaxTimeoutSeconds = 1e6;
// Counts the schedule IR and the runtime hold as int (steps, microbatches, ranks): a larger
// value would pass here and wrap there (train.steps 2^32 + 2 ran as 2).
constexpr double kMaxCount = 2147483647;

std::vector<FieldSpec> make_fields() {
  using C = Config;
  using M = ModelConfig;
  using T = TrainConfig;
  return {
      spec("model.kind", "the model family, by name from the model registry (src/model): gpt (GPT-2-style); llama "
       "(Llama-style: RMSNorm, rotary positions, SwiGLU, grouped-query attention); cnn (a ResNet-style "
       "image classifier); torchscript (layers exported from PyTorch, model.torchscript); transducer "
       "(an RNN-T speech recognizer, docs/speech.md); docs/models.md",
       at(&C::model, &M::kind), 0),
      spec("model.preset", "a named shape, " + join(model_preset_names(), ", ") + " (GPT-2's "
       "sizes, context 1024, vocabulary 50257; Llama 3's, context 8192; llama-bytes trains here): "
       "sets model.kind, layers, d_model, heads, seq_len, vocab_size and Llama's kv_heads, "
       "ffn_hidden, rope_theta, rope_scaling, head and norm_eps; those given beside it (in the "
       "file or on the command line) override it",
       at(&C::model, &M::preset)),
      spec("model.layers", "number of transformer blocks (gpt, transducer: its encoder's), residual blocks (cnn)", at(&C::model, &M::layers), 1, {}, kMaxCount),
      spec("model.d_model", "hidden size (gpt); the stem's channels (cnn: doubled by blocks 1 and 2)", at(&C::model, &M::d_model), 1),
      spec("model.heads", "attention heads; must divide model.d_model", at(&C::model, &M::heads), 1),
      spec("model.seq_len", "context length in tokens (bytes); transducer: the most feature frames of "
       "an utterance (inputs are padded to it)", at(&C::model, &M::seq_len), 2),
      spec("model.vocab_size", "vocabulary size; byte-level text needs all 256 byte values, token "
       "files an id range that covers theirs (their tokenizer's vocabulary)",
       at(&C::model, &M::vocab_size), 2),
      spec("model.kv_heads", "llama: key/value heads (grouped-query attention), dividing model.heads; "
       "0 = model.heads", at(&C::model, &M::kv_heads), 0),
      spec("model.ffn_hidden", "gpt, llama: the MLP's inner width; 0 = 4 x d_model (gpt), 8/3 x "
       "d_model rounded up to a multiple of 64 (llama)", at(&C::model, &M::ffn_hidden), 0),
      spec("model.positions", "gpt: rows of the learned position table, at least model.seq_len (a "
       "Hugging Face GPT-2 brings n_positions); 0 = model.seq_len", at(&C::model, &M::positions), 0),
      spec("model.norm_eps", "gpt, llama: the epsilon of LayerNorm (gpt) or RMSNorm (llama)",
       at(&C::model, &M::norm_eps), 0),
      spec("model.rope_theta", "llama: the rotary position embedding's base", at(&C::model, &M::rope_theta), 1),
      spec("model.rope_scaling", "llama: rotary scaling: \"\" (none), \"linear:FACTOR\" or "
       "\"llama3:FACTOR,LOW_FREQ_FACTOR,HIGH_FREQ_FACTOR,ORIGINAL_CONTEXT\" (Llama 3.1's)",
       at(&C::model, &M::rope_scaling)),
      spec("model.head", "gpt, llama: the output head's weight \"tied\" to the token embedding or "
       "\"untied\" (its own); \"auto\" = tied for gpt, untied for llama",
       at(&C::model, &M::head), 0, {"auto", "tied", "untied"}),
      spec("model.activation", "gpt: the MLP's \"gelu\" or \"gelu_tanh\" (its tanh approximation, "
       "transformers' gelu_new, which GPT-2 checkpoints use); \"auto\" = gelu (llama: always SwiGLU)",
       at(&C::model, &M::activation), 0, {"auto", "gelu", "gelu_tanh"}),
      spec("model.init_from", "gpt, llama: a Hugging Face checkpoint folder (config.json and "
       "model.safetensors, or its sharded index) to start from: its config.json sets the shape "
       "and model.kind (fields given beside it must agree), its weights the initial weights; "
       "docs/models.md", at(&C::model, &M::init_from)),
      spec("model.loss_chunk_tokens", "head + loss as chunked cross-entropy: the logits are computed "
       "(and recomputed in backward) this many tokens at a time, never all [tokens, vocab] at once; "
       "0 = off (full logits)", at(&C::model, &M::loss_chunk_tokens), 0),
      spec("model.dtype", "precision: \"float32\" or \"float64\" (weights, activations, gradients, "
       "messages between workers, optimizer state and checkpoints all in it; float64 is what the "
       "exactness tests prove in) or \"bfloat16\": mixed precision, matrix products, convolutions "
       "and attention in bfloat16 (autocast), what crosses a layer boundary (and so what workers "
       "send) rounded to bfloat16, weights, gradients, their sums, optimizer state, checkpoints "
       "and the loss in float32 (every built-in model.kind; docs/architecture.md); or "
       "\"float16\": the "
       "same in float16, with dynamic loss scaling (train.loss_scale)",
       at(&C::model, &M::dtype), 0, {"float32", "float64", "bfloat16", "float16"}),
      spec("model.torchscript", "model.kind = \"torchscript\": a folder of TorchScript layers "
       "layer0.pt, layer1.pt, ... and their model.json, as scripts/export_torchscript.py writes them "
       "(docs/models.md)", at(&C::model, &M::torchscript)),
      spec("model.max_labels", "transducer: the most characters of an utterance (labels are padded "
       "to it)", at(&C::model, &M::max_labels), 1),
      spec("model.transducer_loss", "transducer: \"sample-wise\" (the joint output of one utterance "
       "at a time) or \"batched\" (the reference: the whole [rows, frames, labels, vocabulary] joint "
       "output at once, for memory comparisons)", at(&C::model, &M::transducer_loss), 0,
       {"sample-wise", "batched"}),
      spec("train.steps", "optimizer steps", at(&C::train, &T::steps), 1, {}, kMaxCount),
      spec("train.batch_size", "sequences per optimizer step (the global batch)",
       at(&C::train, &T::batch_size), 1, {}, kMaxCount),
      spec("train.microbatches", "equal microbatches the batch is split into (gradient accumulation)",
       at(&C::train, &T::microbatches), 1, {}, kMaxCount),
      spec("train.optimizer", "optimizer; \"muon\": Muon for the hidden weight matrices, AdamW "
       "(train.lr, beta1, beta2, eps) for embeddings, head, gains and biases (docs/weight-policies.md)",
       at(&C::train, &T::optimizer), 0, {"sgd", "adam", "adamw", "muon"}),
      spec("train.lr", "peak learning rate (with muon: of its AdamW part)", at(&C::train, &T::lr), 0),
      spec("train.min_lr", "final learning rate of the cosine decay", at(&C::train, &T::min_lr), 0),
      spec("train.warmup_steps", "linear warm-up steps before the cosine decay",
       at(&C::train, &T::warmup_steps), 0),
      spec("train.momentum", "SGD momentum", at(&C::train, &T::momentum), 0),
      open_range(spec("train.beta1", "Adam/AdamW beta1", at(&C::train, &T::beta1), 0, {}, 1), false, true),
      open_range(spec("train.beta2", "Adam/AdamW beta2", at(&C::train, &T::beta2), 0, {}, 1), false, true),
      spec("train.eps", "Adam/AdamW epsilon", at(&C::train, &T::eps), 0),
      spec("train.weight_decay", "weight decay (decoupled for AdamW and Muon, L2 for SGD/Adam)",
       at(&C::train, &T::weight_decay), 0),
      spec("train.muon_lr", "muon: peak learning rate of the hidden weight matrices; follows "
       "train.lr's warm-up and decay (scaled by muon_lr / lr)", at(&C::train, &T::muon_lr), 0),
      spec("train.muon_momentum", "muon: momentum of the hidden weight matrices (Nesterov)",
       at(&C::train, &T::muon_momentum), 0, {}, 1),
      spec("train.delay_correction", "\"error_feedback\": after each update u(t) the weights also "
       "move by -(u(t) - u(t-1)), the correction for 2BW's one-step-delayed gradients "
       "(docs/weight-policies.md); one extra weight-sized buffer; any schedule",
       at(&C::train, &T::delay_correction), 0, {"none", "error_feedback"}),
      spec("train.grad_clip", "clip the global gradient norm to this value; 0 disables",
       at(&C::train, &T::grad_clip), 0),
      spec("train.loss_scale", "model.dtype = \"float16\": the dynamic loss scale's first value; "
       "a step whose gradients overflow is skipped and halves it (docs/architecture.md)",
       at(&C::train, &T::loss_scale), 1, {}, 1e30),
      spec("train.loss_scale_growth_interval", "model.dtype = \"float16\": good steps in a row "
       "after which the loss scale doubles", at(&C::train, &T::loss_scale_growth_interval), 1, {},
       kMaxCount),
      spec("train.seed", "seed for initialisation, data order and sampling", at(&C::train, &T::seed), 0),
      spec("train.threads", "compute threads; 0 = one per core; at most 4 per core",
       at(&C::train, &T::threads), 0),
      spec("train.device", "where workers compute: \"cpu\", \"cuda\" (each worker its node's "
       "GPU local_rank mod GPUs: its own when there are as many GPUs as workers, shared otherwise) "
       "or \"auto\" (cuda when libtorch sees a GPU); the start-up line names the choice",
       at(&C::train, &T::device), 0, {"auto", "cpu", "cuda"}),
      spec("train.cuda_graphs", "1 (a GPU): one process captures its step's forward, backward "
       "and clipping as a CUDA graph (its 4th step) and replays it; pipeline workers capture each "
       "chunk's forward and backward of a microbatch (of each token slice), once per microbatch in "
       "flight (any schedule). The host launches each in one call, "
       "the results are the same; what waits for the device, or batches whose shape changes, go on "
       "eagerly (said once). 2: pipeline workers run the same slots and copies eagerly, on any "
       "device (checks without a GPU). 0 = every kernel launched from the host",
       at(&C::train, &T::cuda_graphs), 0, {}, 2),
      spec("data.format", "\"bytes\": data.path is a text file whose bytes are the tokens; "
       "\"tokens\": llm.c token files from `pipetrain tokenize` or llm.c's scripts (docs/data.md); "
       "\"fashion-mnist\": 28x28 images and their classes (model.kind cnn; validation on the "
       "test split); "
       "\"safetensors\": data.path is a file of named tensors (docs/models.md, TorchScript); "
       "\"speech\": a feature file from `pipetrain prepare-speech` (model.kind transducer); "
       "the formats are listed in the model registry (src/model/registry.cpp), which programs "
       "linking pipetrain extend", at(&C::data, &DataConfig::format)),
      spec("data.path", "training text (bytes), or (tokens) a folder with train.bin and val.bin or "
       "a file named like llm.c's *_train.bin (its *_val.bin beside it), or (fashion-mnist) the "
       "folder of its IDX files, /usr/share/datasets/fashion-mnist from Debian, or (speech) the feature file; relative paths are tried "
       "against the working directory, then the pipetrain source folder",
       at(&C::data, &DataConfig::path)),
      open_range(spec("data.val_fraction", "fraction of the file (its tail) held out for validation; for "
       "token files, `pipetrain tokenize`'s default split", at(&C::data, &DataConfig::val_fraction), 0, {}, 1),
       true, true),
      spec("data.tokenizer", "token files: the SentencePiece model that made them (checked against "
       "their tokens.json), used to encode sample.prompt and decode samples; \"\" = samples print "
       "token ids", at(&C::data, &DataConfig::tokenizer)),
      spec("data.val_split", "speech: the split validation reads, \"validation\" (held-out sentences), "
       "\"test\" or \"unseen-voice\" (the test sentences by a voice never trained on)",
       at(&C::data, &DataConfig::val_split), 0, {"validation", "test", "unseen-voice"}),
      spec("eval.every", "validate every N steps and at the last step; 0 = only at the end",
       at(&C::eval, &EvalConfig::every), 0),
      spec("eval.batches", "batches per validation", at(&C::eval, &EvalConfig::batches), 1),
      spec("log.every", "write a metrics.jsonl line every N steps", at(&C::log, &LogConfig::every), 1),
      spec("log.profile_step", "profile steps from this one (1-based) with libtorch's profiler: "
       "RUN_DIR/profile/rankN.trace.json (ui.perfetto.dev) and rankN.txt (who set the pace: the "
       "host's operators and their average time, the GPU's busy share, idle gaps, launches and "
       "waits; then the costliest GPU kernels and operators per step); 0 = off", at(&C::log, &LogConfig::profile_step), 0, {}, kMaxCount),
      spec("log.profile_steps", "how many steps log.profile_step profiles (fewer if the run ends first)",
       at(&C::log, &LogConfig::profile_steps), 1, {}, kMaxCount),
      spec("log.host_reads", "1: every worker counts the values its steps read on the host (each "
       "makes a GPU's host wait for the device, and keeps the step out of a CUDA graph) and prints "
       "per step the fewest and most, and where the last step's were read; on any device",
       at(&C::log, &LogConfig::host_reads), 0, {}, 1),
      spec("sample.tokens", "characters to generate from the trained model at the end; 0 = none",
       at(&C::sample, &SampleConfig::tokens), 0),
      open_range(spec("sample.temperature", "sampling temperature", at(&C::sample, &SampleConfig::temperature),
       0), true, false),
      spec("sample.prompt", "text the sample starts from", at(&C::sample, &SampleConfig::prompt)),
      spec("pipeline.stages", "pipeline stages (one worker process each); 1 = the single-process trainer, unless "
       "pipeline.dp_width or pipeline.chunks above 1, token slices or a no-flush schedule put it on a worker",
       at(&C::pipeline, &PipelineConfig::stages), 1, {}, kMaxCount),
      spec("pipeline.schedule", "pipeline schedule: one that runs on workers in the catalogue of "
       "docs/schedules.md (`pipetrain train --help` lists them)",
       at(&C::pipeline, &PipelineConfig::schedule)),
      spec("pipeline.partition", "\"balanced\" (exact partitioner over the layers' analytic compute; under a V "
       "placement each worker's two stages balanced together), \"measured\" (the same partitioner "
       "over each layer's forward+backward time, measured by the launcher before the workers "
       "start, at the run's microbatch rows on its device; the counts go to config.toml) or "
       "layer counts per stage over the model's layers, e.g. \"3,3\"",
       at(&C::pipeline, &PipelineConfig::partition)),
      spec("pipeline.dp_width", "data-parallel replicas of every stage",
       at(&C::pipeline, &PipelineConfig::dp_width), 1, {}, kMaxCount),
      spec("pipeline.chunks", "model chunks per worker (interleaved schedule): stages x chunks "
       "model stages, stage = chunk x stages + worker", at(&C::pipeline, &PipelineConfig::chunks), 1, {},
       kMaxCount),
      spec("pipeline.recompute", "activation recomputation: \"none\", \"all\" or stage indices "
       "\"0,1\"; a recomputed stage keeps only its input per microbatch and runs the forward "
       "again in backward", at(&C::pipeline, &PipelineConfig::recompute)),
      spec("pipeline.zero1", "1 = ZeRO-1: each of the dp_width replicas of a stage keeps the "
       "optimizer state of 1/dp_width of its parameters (needs dp_width > 1); 0 = off",
       at(&C::pipeline, &PipelineConfig::zero1), 0, {}, 1),
      spec("pipeline.sync_warmup_steps", "2bw: the first N steps train synchronously (1F1B with a "
       "flush after each step), then 2BW's one-step-delayed updates; the delay hurts most early "
       "(docs/weight-policies.md); 0 = none",
       at(&C::pipeline, &PipelineConfig::sync_warmup_steps), 0, {}, kMaxCount),
      spec("pipeline.slices", "TeraPipe token slicing (gpipe schedule): a slice count N (near-equal "
       "slices) or slice lengths \"64,40,24\" summing to model.seq_len; each sequence's slices "
       "flow through the pipeline one after another", at(&C::pipeline, &PipelineConfig::slices)),
      spec("pipeline.timeout_s", "seconds before rendezvous or a send/recv/all-reduce gives up",
       at(&C::pipeline, &PipelineConfig::timeout_s), 1, {}, kMaxTimeoutSeconds),
      spec("pipeline.master_addr", "rendezvous address when pipetrain spawns the workers itself "
       "(node 0's address on several nodes)", at(&C::pipeline, &PipelineConfig::master_addr)),
      spec("pipeline.master_port", "rendezvous port; 0 = a free port (one node only)",
       at(&C::pipeline, &PipelineConfig::master_port), 0, {}, 65535),
      spec("pipeline.nnodes", "machines the workers are spread over, stages x dp_width / nnodes "
       "each; run the same command on every node with its pipeline.node_rank",
       at(&C::pipeline, &PipelineConfig::nnodes), 1, {}, kMaxCount),
      spec("pipeline.node_rank", "this machine's index, 0..nnodes-1 (node 0 hosts the rendezvous)",
       at(&C::pipeline, &PipelineConfig::node_rank), 0, {}, kMaxCount),
      spec("pipeline.bind_cores", "1 = the workers pipetrain spawns on a machine each run on their "
       "own cores: the cores it may use, split into equal contiguous blocks, one per worker (when "
       "there are at least as many cores as workers; otherwise, and with 0, the OS places them)",
       at(&C::pipeline, &PipelineConfig::bind_cores), 0, {}, 1),
      spec("pipeline.memory_budget_mb", "the memory each worker may use, in MiB (plans made with "
       "`plan --memory-per-worker` set it): freed tensors over 1 MiB go back to the system "
       "instead of staying in the process, the whole model is not assembled into one file at "
       "the end, and each worker's peaks are reported against it; 0 = no budget",
       at(&C::pipeline, &PipelineConfig::memory_budget_mb), 0),
      spec("checkpoint.every", "write a checkpoint (RUN_DIR/checkpoints/step-N/) every N steps and "
       "on SIGINT/SIGTERM; 0 = only the final one", at(&C::checkpoint, &CheckpointConfig::every), 0),
      spec("checkpoint.keep", "complete periodic checkpoints kept; older ones are removed",
       at(&C::checkpoint, &CheckpointConfig::keep), 1),
  };
}

}  // namespace

const std::vector<FieldSpec>& config_fields() {
  static const std::vector<FieldSpec> fields = make_fields();
  return fields;
}

const FieldSpec* find_field(const std::string& key) {
  for (const auto& field : config_fields()) {
    if (field.key == key) return &field;
  }
  return nullptr;
}

}  // namespace pipetrain
