#pragma once
// What the trainers draw batches from: a token sequence split into a training and a validation
// part. Batches are a pure function of (seed, step) and of the tokens alone, whatever holds
// them (a text file's bytes, a memory-mapped token file), so any worker, any partition and a
// resumed run all see exactly the same data without shared state.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace pipetrain {

struct Config;
struct DataConfig;

struct TokenBatch {
  int64_t batch_size = 0;
  int64_t seq_len = 0;
  std::vector<int64_t> inputs;   // [batch_size * seq_len], row-major
  std::vector<int64_t> targets;  // inputs shifted by one token

  // Rows [first, first + count) as a smaller batch (a microbatch).
  TokenBatch rows(int64_t first, int64_t count) const;
};

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual TokenBatch train_batch(uint64_t seed, int64_t step, int64_t batch_size) const = 0;
  // Evenly spaced windows over the validation split; the same for every call.
  virtual TokenBatch val_batch(int64_t index, int64_t batch_size) const = 0;
  virtual int64_t train_tokens() const = 0;
  virtual int64_t val_tokens() const = 0;
  virtual int64_t seq_len() const = 0;
};

// Where the windows (seq_len + 1 tokens: inputs and shifted targets) of a batch start in a split
// of `split_tokens` tokens. Every dataset draws its batches with these two.
std::vector<int64_t> train_window_starts(uint64_t seed, int64_t step, int64_t batch_size,
                                         int64_t split_tokens, int64_t seq_len);
std::vector<int64_t> val_window_starts(int64_t index, int64_t batch_size, int64_t split_tokens,
                                       int64_t seq_len);

// The dataset `config.data` names (data.format "bytes": a text file; "tokens": llm.c token
// files), with its tokens checked against model.vocab_size and, when data.tokenizer is set,
// the token files against that tokenizer. Relative paths fall back to `data_root`.
std::unique_ptr<Dataset> make_dataset(const Config& config, const std::string& data_root);

// data.tokenizer found as data.path is: as given if it exists, else under `data_root` ("" = none).
std::string tokenizer_path_of(const DataConfig& data, const std::string& data_root);

}  // namespace pipetrain
