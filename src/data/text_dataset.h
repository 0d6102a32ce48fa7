#pragma once
// Byte-level text data: the file's bytes are the tokens (vocabulary 256). The head of the file
// trains, the tail validates. Batches are a pure function of (seed, step), so any worker,
// any partition and a resumed run all see exactly the same data without shared state.
#include <cstdint>
#include <string>
#include <vector>

#include "data/dataset.h"

namespace pipetrain {

class TextDataset : public Dataset {
 public:
  // UserError if the file is missing or too short for the sequence length.
  TextDataset(const std::string& path, double val_fraction, int64_t seq_len);
  static TextDataset from_text(const std::string& text, double val_fraction, int64_t seq_len);

  TokenBatch train_batch(uint64_t seed, int64_t step, int64_t batch_size) const override;
  TokenBatch val_batch(int64_t index, int64_t batch_size) const override;

  int64_t train_tokens() const override { return static_cast<int64_t>(train_.size()); }
  int64_t val_tokens() const override { return static_cast<int64_t>(val_.size()); }
  int64_t seq_len() const override { return seq_len_; }

 private:
  TextDataset(std::vector<uint8_t> bytes, double val_fraction, int64_t seq_len,
              const std::string& origin);
  TokenBatch windows(const std::vector<uint8_t>& split, const std::vector<int64_t>& starts) const;

  std::vector<uint8_t> train_, val_;
  int64_t seq_len_;
};

std::string decode_bytes(const std::vector<int64_t>& tokens);
std::vector<int64_t> encode_bytes(const std::string& text);

}  // namespace pipetrain
