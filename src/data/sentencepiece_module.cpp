// libpipetrain_sentencepiece.so: SentencePiece behind sentencepiece_module.h (see there why).
#include "data/sentencepiece_module.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <fstream>

namespace pipetrain::sentencepiece_module {
namespace {

// The text's lines, read as SentencePiece trains on them, without holding the file.
class LineIterator : public sentencepiece::SentenceIterator {
 public:
  explicit LineIterator(const std::string& path) : in_(path, std::ios::binary) { Next(); }
  bool done() const override { return done_; }
  void Next() override { done_ = !std::getline(in_, line_); }
  const std::string& value() const override { return line_; }
  sentencepiece::util::Status status() const override {
    if (!in_.bad()) return sentencepiece::util::Status();
    return sentencepiece::util::Status(sentencepiece::util::StatusCode::kDataLoss, "read error");
  }

 private:
  std::ifstream in_;
  std::string line_;
  bool done_ = false;
};

std::string error_of(const sentencepiece::util::Status& status) {
  return status.ok() ? "" : status.message();
}

class ProcessorModel : public Model {
 public:
  std::string encode(std::string_view text, std::vector<int>* ids) const override {
    return error_of(processor.Encode(text, ids));
  }
  std::string decode(const std::vector<int>& ids, std::string* text) const override {
    return error_of(processor.Decode(ids, text));
  }
  int piece_count() const override { return processor.GetPieceSize(); }
  int unknown_id() const override { return processor.unk_id(); }

  sentencepiece::SentencePieceProcessor processor;
};

class SentencePieceApi : public Api {
 public:
  std::string train(const std::unordered_map<std::string, std::string>& arguments,
                    const std::string& text_path, std::string* serialized_model) const override {
    LineIterator lines(text_path);
    return error_of(
        sentencepiece::SentencePieceTrainer::Train(arguments, &lines, serialized_model));
  }
  std::string load(const std::string& serialized_model,
                   std::unique_ptr<Model>* model) const override {
    auto loaded = std::make_unique<ProcessorModel>();
    const std::string error = error_of(loaded->processor.LoadFromSerializedProto(serialized_model));
    if (error.empty()) *model = std::move(loaded);
    return error;
  }
};

}  // namespace
}  // namespace pipetrain::sentencepiece_module

extern "C" __attribute__((visibility("default"))) const pipetrain::sentencepiece_module::Api*
pipetrain_sentencepiece_api() {
  static const pipetrain::sentencepiece_module::SentencePieceApi api;
  return &api;
}
