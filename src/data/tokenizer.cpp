#include "data/tokenizer.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <unordered_map>

#include "core/error.h"
#include "core/files.h"
#include "data/sentencepiece_module.h"

namespace fs = std::filesystem;

namespace pipetrain {
namespace {

// $PIPETRAIN_SENTENCEPIECE_MODULE, else beside the running program or in ../lib from it (an
// installed prefix: cmake/install.cmake), else where the build put it.
std::string sentencepiece_module_path() {
  if (const char* path = std::getenv("PIPETRAIN_SENTENCEPIECE_MODULE")) return path;
  std::error_code error;
  const fs::path folder = fs::read_symlink("/proc/self/exe", error).parent_path();
  for (const fs::path& candidate : {folder, folder.parent_path() / "lib"}) {
    const fs::path module = candidate / "libpipetrain_sentencepiece.so";
    if (!error && fs::exists(module)) return module.string();
  }
  return PIPETRAIN_SENTENCEPIECE_MODULE_PATH;
}

const sentencepiece_module::Api* load_sentencepiece() {
  const std::string path = sentencepiece_module_path();
  // RTLD_DEEPBIND: the module and its libsentencepiece resolve their own (protobuf) symbols
  // first; RTLD_LOCAL: nothing loaded later binds to them.
  void* module = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
  if (module == nullptr) fail("cannot load the SentencePiece module: {}", ::dlerror());
  using Factory = const sentencepiece_module::Api* (*)();
  const auto factory = reinterpret_cast<Factory>(::dlsym(module, "pipetrain_sentencepiece_api"));
  if (factory == nullptr)
    fail("'{}' is not pipetrain's SentencePiece module: {}", path, ::dlerror());
  return factory();
}

const sentencepiece_module::Api& sentencepiece() {
  static const sentencepiece_module::Api* api = load_sentencepiece();
  return *api;
}

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
  if (!fs::is_regular_file(options.text_path)) fail("text file '{}' not found", options.text_path);
  std::string model;
  const std::string error =
      sentencepiece().train(trainer_arguments(options), options.text_path, &model);
  if (!error.empty()) fail("tokenizer training failed: {}", error);
  const fs::path folder = fs::path(options.model_path).parent_path();
  std::error_code made;
  if (!folder.empty()) fs::create_directories(folder, made);
  if (made) fail("cannot create folder '{}': {}", folder.string(), made.message());
  write_file_atomically(options.model_path, model);
}

Tokenizer::Tokenizer(const std::string& model_path) : path_(model_path) {
  if (!fs::is_regular_file(model_path)) fail("tokenizer model '{}' not found", model_path);
  const std::string error = sentencepiece().load(read_file(model_path), &model_);
  if (!error.empty()) fail("'{}' is not a SentencePiece model: {}", model_path, error);
}

Tokenizer::~Tokenizer() = default;

std::vector<int64_t> Tokenizer::encode(std::string_view text) const {
  std::vector<int> ids;
  const std::string error = model_->encode(text, &ids);
  if (!error.empty()) fail("{}: cannot encode text: {}", path_, error);
  return std::vector<int64_t>(ids.begin(), ids.end());
}

std::string Tokenizer::decode(const std::vector<int64_t>& ids) const {
  std::vector<int> in_vocabulary;
  in_vocabulary.reserve(ids.size());
  for (int64_t id : ids) {
    in_vocabulary.push_back(id >= 0 && id < vocab_size() ? int(id) : model_->unknown_id());
  }
  std::string text;
  const std::string error = model_->decode(in_vocabulary, &text);
  if (!error.empty()) fail("{}: cannot decode ids: {}", path_, error);
  return text;
}

int64_t Tokenizer::vocab_size() const { return model_->piece_count(); }

}  // namespace pipetrain
