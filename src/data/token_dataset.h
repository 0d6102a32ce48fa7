#pragma once
// Training on llm.c token files: train.bin and val.bin, memory-mapped. Batches are drawn exactly
// as TextDataset draws them (data/dataset.h), so the same tokens give the same batches.
#include <cstdint>
#include <string>

#include "data/dataset.h"
#include "data/token_file.h"

namespace pipetrain {

struct TokenSetPaths {
  std::string train, val, info;  // info: tokens.json (may not exist)
};

// data.path of data.format = "tokens": a folder holding train.bin and val.bin, or a token file
// named like llm.c's (tiny_shakespeare_train.bin) whose validation file has "val" for "train".
TokenSetPaths token_set_paths(const std::string& path);

class TokenDataset : public Dataset {
 public:
  // UserError for bad files or splits shorter than one window (seq_len + 1 tokens).
  TokenDataset(const TokenSetPaths& paths, int64_t seq_len);

  TokenBatch train_batch(uint64_t seed, int64_t step, int64_t batch_size) const override;
  TokenBatch val_batch(int64_t index, int64_t batch_size) const override;
  int64_t train_tokens() const override { return train_.size(); }
  int64_t val_tokens() const override { return val_.size(); }
  int64_t seq_len() const override { return seq_len_; }

  // UserError naming the file and the id when an id is outside [0, vocab_size): reads both files
  // once. `vocab_hint` (the tokenizer's vocabulary, 0 if unknown) goes into the message.
  void check_vocabulary(int64_t vocab_size, int64_t vocab_hint) const;

 private:
  TokenBatch windows(const TokenFile& split, const std::vector<int64_t>& starts) const;

  TokenFile train_, val_;
  int64_t seq_len_;
};

}  // namespace pipetrain
