#include "data/text_dataset.h"

#include "core/error.h"
#include "core/files.h"

namespace pipetrain {

TextDataset::TextDataset(const std::string& path, double val_fraction, int64_t seq_len)
    : TextDataset(
          [&] {
            const std::string text = read_regular_file(path, "data file");  // not /dev/zero
            return std::vector<uint8_t>(text.begin(), text.end());
          }(),
          val_fraction, seq_len, path) {}

TextDataset TextDataset::from_text(const std::string& text, double val_fraction,
                                   int64_t seq_len) {
  return TextDataset(std::vector<uint8_t>(text.begin(), text.end()), val_fraction, seq_len,
                     "<text>");
}

TextDataset::TextDataset(std::vector<uint8_t> bytes, double val_fraction, int64_t seq_len,
                         const std::string& origin)
    : seq_len_(seq_len) {
  const auto val_size = static_cast<size_t>(static_cast<double>(bytes.size()) * val_fraction);
  const size_t train_size = bytes.size() - val_size;
  train_.assign(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(train_size));
  val_.assign(bytes.begin() + static_cast<std::ptrdiff_t>(train_size), bytes.end());
  // A window needs seq_len + 1 bytes (inputs plus the shifted targets).
  const auto need = static_cast<size_t>(seq_len) + 1;
  if (train_.size() >= need && val_.size() < need && bytes.size() >= 2 * need) {  // the fraction's fault
    fail("{}: data.val_fraction {:g} holds out {} of its {} bytes, fewer than one validation "
         "sequence of {} tokens needs ({}): raise it to at least {:.2g}", origin, val_fraction,
         val_.size(), bytes.size(), seq_len, need, double(need) / double(bytes.size()));
  }
  if (train_.size() < need || val_.size() < need) {
    fail("{}: {} bytes are too few for sequences of {} tokens with {:g} held out for validation",
         origin, bytes.size(), seq_len, val_fraction);
  }
}

TokenBatch TextDataset::windows(const std::vector<uint8_t>& split,
                                const std::vector<int64_t>& starts) const {
  TokenBatch batch;
  batch.batch_size = static_cast<int64_t>(starts.size());
  batch.seq_len = seq_len_;
  batch.inputs.reserve(starts.size() * static_cast<size_t>(seq_len_));
  batch.targets.reserve(batch.inputs.capacity());
  for (int64_t start : starts) {
    for (int64_t t = 0; t < seq_len_; ++t) {
      batch.inputs.push_back(split[static_cast<size_t>(start + t)]);
      batch.targets.push_back(split[static_cast<size_t>(start + t + 1)]);
    }
  }
  return batch;
}

TokenBatch TextDataset::train_batch(uint64_t seed, int64_t step, int64_t batch_size) const {
  return windows(train_, train_window_starts(seed, step, batch_size, train_tokens(), seq_len_));
}

TokenBatch TextDataset::val_batch(int64_t index, int64_t batch_size) const {
  return windows(val_, val_window_starts(index, batch_size, val_tokens(), seq_len_));
}

std::string decode_bytes(const std::vector<int64_t>& tokens) {
  std::string text;
  for (int64_t token : tokens) text += static_cast<char>(static_cast<uint8_t>(token));
  return text;
}

std::vector<int64_t> encode_bytes(const std::string& text) {
  std::vector<int64_t> tokens;
  for (char c : text) tokens.push_back(static_cast<uint8_t>(c));
  return tokens;
}

}  // namespace pipetrain
