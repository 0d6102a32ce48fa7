#include "data/token_dataset.h"

#include <algorithm>
#include <filesystem>

#include "core/error.h"
#include "data/token_set.h"

namespace fs = std::filesystem;

namespace pipetrain {

TokenSetPaths token_set_paths(const std::string& path) {
  TokenSetPaths paths;
  if (fs::is_directory(path)) {
    paths.train = (fs::path(path) / "train.bin").string();
    paths.val = (fs::path(path) / "val.bin").string();
    paths.info = (fs::path(path) / kTokenSetInfoFile).string();
    return paths;
  }
  const std::string name = fs::path(path).filename().string();
  const auto train_at = name.rfind("train");
  if (train_at == std::string::npos) {
    fail(
        "data.path '{}' (data.format = \"tokens\") must be a folder with train.bin and val.bin, "
        "or a training token file whose name contains 'train'",
        path);
  }
  std::string val_name = name;
  val_name.replace(train_at, 5, "val");
  paths.train = path;
  paths.val = (fs::path(path).parent_path() / val_name).string();
  paths.info = (fs::path(path).parent_path() / kTokenSetInfoFile).string();
  return paths;
}

TokenDataset::TokenDataset(const TokenSetPaths& paths, int64_t seq_len)
    : train_(paths.train), val_(paths.val), seq_len_(seq_len) {
  for (const TokenFile* split : {&train_, &val_}) {
    if (split->size() < seq_len + 1) {
      fail("{}: {} tokens are too few for sequences of {} tokens (a window needs {})",
           split->path(), split->size(), seq_len, seq_len + 1);
    }
  }
}

void TokenDataset::check_vocabulary(int64_t vocab_size, int64_t vocab_hint) const {
  for (const TokenFile* split : {&train_, &val_}) {
    const int64_t largest = split->max_token();
    if (largest < vocab_size) continue;
    const int64_t need = std::max(largest + 1, vocab_hint);
    fail(
        "{}: token id {} is outside the model's vocabulary (model.vocab_size = {}); set "
        "model.vocab_size to at least {}{}",
        split->path(), largest, vocab_size, need,
        vocab_hint > 0 ? fmt::format(" (the tokenizer's vocabulary is {})", vocab_hint) : "");
  }
}

TokenBatch TokenDataset::windows(const TokenFile& split, const std::vector<int64_t>& starts) const {
  TokenBatch batch;
  batch.batch_size = static_cast<int64_t>(starts.size());
  batch.seq_len = seq_len_;
  batch.inputs.reserve(starts.size() * static_cast<size_t>(seq_len_));
  batch.targets.reserve(batch.inputs.capacity());
  std::vector<int64_t> window(static_cast<size_t>(seq_len_ + 1));
  for (int64_t start : starts) {
    split.copy(start, seq_len_ + 1, window.data());
    batch.inputs.insert(batch.inputs.end(), window.begin(), window.end() - 1);
    batch.targets.insert(batch.targets.end(), window.begin() + 1, window.end());
  }
  return batch;
}

TokenBatch TokenDataset::train_batch(uint64_t seed, int64_t step, int64_t batch_size) const {
  return windows(train_, train_window_starts(seed, step, batch_size, train_tokens(), seq_len_));
}

TokenBatch TokenDataset::val_batch(int64_t index, int64_t batch_size) const {
  return windows(val_, val_window_starts(index, batch_size, val_tokens(), seq_len_));
}

}  // namespace pipetrain
