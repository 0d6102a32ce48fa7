#include "data/tokenizer.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <unordered_map>

#include "core/error.h"
#include "core/files.h"

namespace pipetrain {
namespace {

// The text's lines, read as SentencePiece trains on them, without holding the file.
class LineIterator : public sentencepiece::SentenceIterator {
 public:
  explicit LineIterator(const std::string& path) : in_(path, std::ios::binary) { Next(); }
  bool done() const override { return done_; }
  void Next() override { done_ = !std::getline(in_, line_); }
  const std::string& value() const override { return line_; }
  sentencepiece::util::Status status() const override {
    return in_.bad() ? sentencepiece::util::Status(sentencepiece::util::StatusCode::kDataLoss,
                                                   "read error")
                     : sentencepiece::util::Status();
  }

 private:
  std::ifstream in_;
  std::string line_;
  bool done_ = false;
};

std::unordered_map<std::string, std::string> trainer_arguments(const TokenizerTrainOptions& o) {
  return {{"model_type", o.type},
          {"vocab_size", std::to_string(o.vocab_size)},
          {"input_sentence_size", std::to_string(o.max_sentences)},
          {"shuffle_input_sentence", "true"},
          {"num_threads", std::to_string(o.threads)},
          {"normalization_rule_name", "identity"},  // exact text: no NFKC, no case folding
          {"remove_extra_whitespaces", "false"},
          {"add_dummy_prefix", "false"},  // a chunk's ids then decode to exactly that chunk
          {"byte_fallback", "true"},      // newlines and rare characters become byte pieces
          {"minloglevel", "2"}};          // errors come back as a status: no log lines
}

}  // namespace

void train_tokenizer(const TokenizerTrainOptions& options) {
  if (options.type != "bpe" && options.type != "unigram") {
    fail("tokenizer type must be bpe or unigram, got '{}'", options.type);
  }
  if (!std::filesystem::is_regular_file(options.text_path)) {
    fail("text file '{}' not found", options.text_path);
  }
  LineIterator lines(options.text_path);
  std::string model;
  const auto status =
      sentencepiece::SentencePieceTrainer::Train(trainer_arguments(options), &lines, &model);
  if (!status.ok()) fail("tokenizer training failed: {}", status.message());
  write_file_atomically(options.model_path, model);
}

Tokenizer::Tokenizer(const std::string& model_path)
    : path_(model_path), processor_(std::make_unique<sentencepiece::SentencePieceProcessor>()) {
  if (!std::filesystem::is_regular_file(model_path)) {
    fail("tokenizer model '{}' not found", model_path);
  }
  const auto status = processor_->LoadFromSerializedProto(read_file(model_path));
  if (!status.ok()) fail("'{}' is not a SentencePiece model: {}", model_path, status.message());
}

Tokenizer::~Tokenizer() = default;

std::vector<int64_t> Tokenizer::encode(std::string_view text) const {
  std::vector<int> ids;
  const auto status = processor_->Encode(text, &ids);
  if (!status.ok()) fail("{}: cannot encode text: {}", path_, status.message());
  return std::vector<int64_t>(ids.begin(), ids.end());
}

std::string Tokenizer::decode(const std::vector<int64_t>& ids) const {
  std::vector<int> in_vocabulary;
  in_vocabulary.reserve(ids.size());
  for (int64_t id : ids) {
    in_vocabulary.push_back(id >= 0 && id < vocab_size() ? int(id) : processor_->unk_id());
  }
  std::string text;
  const auto status = processor_->Decode(in_vocabulary, &text);
  if (!status.ok()) fail("{}: cannot decode ids: {}", path_, status.message());
  return text;
}

int64_t Tokenizer::vocab_size() const { return processor_->GetPieceSize(); }

}  // namespace pipetrain
