#include "data/dataset.h"

#include <filesystem>
#include <random>

#include "core/config.h"
#include "core/error.h"
#include "core/files.h"
#include "data/text_dataset.h"
#include "data/token_dataset.h"
#include "data/token_set.h"

namespace pipetrain {

TokenBatch TokenBatch::rows(int64_t first, int64_t count) const {
  TokenBatch out;
  out.batch_size = count;
  out.seq_len = seq_len;
  const auto begin = first * seq_len, end = (first + count) * seq_len;
  out.inputs.assign(inputs.begin() + begin, inputs.begin() + end);
  out.targets.assign(targets.begin() + begin, targets.begin() + end);
  return out;
}

std::vector<int64_t> train_window_starts(uint64_t seed, int64_t step, int64_t batch_size,
                                         int64_t split_tokens, int64_t seq_len) {
  // seed_seq mixes (seed, step) well; mt19937_64 is specified exactly by the standard, so the
  // batches are the same on every platform.
  std::seed_seq seq{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32),
                    static_cast<uint32_t>(step), static_cast<uint32_t>(uint64_t(step) >> 32)};
  std::mt19937_64 rng(seq);
  const auto max_start = static_cast<uint64_t>(split_tokens - seq_len - 1);
  std::vector<int64_t> starts(static_cast<size_t>(batch_size));
  for (auto& start : starts) start = static_cast<int64_t>(rng() % (max_start + 1));
  return starts;
}

std::vector<int64_t> val_window_starts(int64_t index, int64_t batch_size, int64_t split_tokens,
                                       int64_t seq_len) {
  const int64_t max_start = split_tokens - seq_len - 1;
  std::vector<int64_t> starts(static_cast<size_t>(batch_size));
  // Spread windows over the whole validation split; batch `index` is offset by a prime stride.
  for (int64_t i = 0; i < batch_size; ++i) {
    const int64_t k = index * batch_size + i;
    starts[static_cast<size_t>(i)] = (k * 7919 * (seq_len + 1)) % (max_start + 1);
  }
  return starts;
}

std::string tokenizer_path_of(const DataConfig& data, const std::string& data_root) {
  namespace fs = std::filesystem;
  const std::string& path = data.tokenizer;
  if (path.empty() || fs::exists(path) || fs::path(path).is_absolute()) return path;
  const fs::path alternative = fs::path(data_root) / path;
  return fs::exists(alternative) ? alternative.string() : path;
}

std::unique_ptr<Dataset> make_dataset(const Config& config, const std::string& data_root) {
  const DataConfig& data = config.data;
  const std::string path = resolve_existing_path(data.path, data_root);
  if (data.format == "bytes") {
    return std::make_unique<TextDataset>(path, data.val_fraction, config.model.seq_len);
  }
  const TokenSetPaths paths = token_set_paths(path);
  const auto info = read_token_set_info(paths.info);
  if (!data.tokenizer.empty()) {
    check_tokenizer_matches(info, paths.info, tokenizer_path_of(data, data_root));
  }
  auto dataset = std::make_unique<TokenDataset>(paths, config.model.seq_len);
  // tokenize replaces train.bin, val.bin and tokens.json one by one: a set cut short between
  // them (or files copied in from another set) holds other counts than its tokens.json says.
  const bool described = std::filesystem::path(paths.train).filename() == "train.bin";  // tokens.json's own files
  if (info && described && (info->train_tokens != dataset->train_tokens() || info->val_tokens != dataset->val_tokens())) {
    fail("{} records {} training and {} validation tokens, but the files hold {} and {}: the set "
         "is not the one it describes (a tokenize cut short, or files copied in); tokenize it again",
         paths.info, info->train_tokens, info->val_tokens, dataset->train_tokens(), dataset->val_tokens());
  }
  dataset->check_vocabulary(config.model.vocab_size, info ? info->vocab_size : 0);
  // After the files' own ids (the more specific message): every id of their tokenizer needs an
  // embedding row, as a prompt it encodes (the sample at the end of a run) may hold ids the
  // training data never did.
  if (info && info->vocab_size > config.model.vocab_size) {
    fail("{} says its tokenizer has {} ids but model.vocab_size is {}: ids {}..{} would have no "
         "embedding (the sample's prompt can hold them); set --model.vocab_size {}", paths.info,
         info->vocab_size, config.model.vocab_size, config.model.vocab_size, info->vocab_size - 1,
         info->vocab_size);
  }
  return dataset;
}

}  // namespace pipetrain
