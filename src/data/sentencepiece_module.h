#pragma once
// The boundary to SentencePiece. Debian's libsentencepiece bundles protobuf 3.14 and exports its
// symbols, while libtorch loads the system's libprotobuf (3.21): in one symbol namespace the two
// break each other (a crash before main, or protobuf's version check aborting). So SentencePiece
// lives in a module of its own (libpipetrain_sentencepiece.so) that tokenizer.cpp loads with
// dlopen(RTLD_LOCAL | RTLD_DEEPBIND): its protobuf stays private to it. Only standard-library
// types cross this boundary, and no exceptions: errors come back as strings ("" = none).
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace pipetrain::sentencepiece_module {

class Model {
 public:
  virtual ~Model() = default;
  virtual std::string encode(std::string_view text, std::vector<int>* ids) const = 0;
  virtual std::string decode(const std::vector<int>& ids, std::string* text) const = 0;
  virtual int piece_count() const = 0;
  virtual int unknown_id() const = 0;
};

class Api {
 public:
  virtual ~Api() = default;
  // SentencePieceTrainer::Train with these arguments on the lines of `text_path`.
  virtual std::string train(const std::unordered_map<std::string, std::string>& arguments,
                            const std::string& text_path, std::string* serialized_model) const = 0;
  virtual std::string load(const std::string& serialized_model,
                           std::unique_ptr<Model>* model) const = 0;
};

}  // namespace pipetrain::sentencepiece_module

// The module's one exported symbol.
extern "C" const pipetrain::sentencepiece_module::Api* pipetrain_sentencepiece_api();
