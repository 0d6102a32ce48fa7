#pragma once
// A SentencePiece tokenizer (BPE or unigram): trained from a text file, then encoding text to ids
// and ids back to text. It is set up so that decode(encode(text)) == text for any UTF-8 text:
// no normalization, whitespace kept as it is, no dummy leading space, and characters outside the
// vocabulary (the newline among them: training reads the text line by line) fall back to their
// UTF-8 bytes, one id per byte. So a stream of ids cut anywhere still decodes piece by piece.
// SentencePiece itself runs in a module of its own (data/sentencepiece_module.h says why).
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace pipetrain::sentencepiece_module {
class Model;
}

namespace pipetrain {

struct TokenizerTrainOptions {
  std::string text_path;
  std::string model_path;  // the .model file written
  int64_t vocab_size = 8192;
  std::string type = "bpe";  // bpe | unigram
  // Lines used for training, 0 = all. SentencePiece 0.1.97 samples them with a fixed seed of
  // its own, so the result is still the same on every run.
  int64_t max_sentences = 0;
  // SentencePiece's training threads. A unigram model depends on the count (its EM sums per
  // thread), so it is fixed (1) unless asked: the same text gives the same .model everywhere.
  int64_t threads = 1;
};

// Trains and writes options.model_path atomically. UserError for a missing text file, an
// unknown type or a vocabulary the text cannot fill (SentencePiece's reason).
void train_tokenizer(const TokenizerTrainOptions& options);

class Tokenizer {
 public:
  explicit Tokenizer(const std::string& model_path);  // UserError if missing or not a model
  ~Tokenizer();
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  std::vector<int64_t> encode(std::string_view text) const;
  // Ids outside the vocabulary (a model with a larger model.vocab_size samples them) decode as
  // SentencePiece's unknown piece.
  std::string decode(const std::vector<int64_t>& ids) const;
  int64_t vocab_size() const;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::unique_ptr<sentencepiece_module::Model> model_;
};

}  // namespace pipetrain
