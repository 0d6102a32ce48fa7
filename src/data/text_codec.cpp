#include "data/text_codec.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/config.h"
#include "data/dataset.h"
#include "data/text_dataset.h"
#include "data/tokenizer.h"

namespace pipetrain {
namespace {

class ByteCodec : public TextCodec {
 public:
  std::vector<int64_t> encode(const std::string& text) const override { return encode_bytes(text); }
  std::string sample_text(const std::string& prompt,
                          const std::vector<int64_t>& generated) const override {
    return prompt + decode_bytes(generated);
  }
};

class TokenizerCodec : public TextCodec {
 public:
  explicit TokenizerCodec(const std::string& model_path) : tokenizer_(model_path) {}
  std::vector<int64_t> encode(const std::string& text) const override {
    return tokenizer_.encode(text);
  }
  std::string sample_text(const std::string& prompt,
                          const std::vector<int64_t>& generated) const override {
    return prompt + tokenizer_.decode(generated);
  }

 private:
  Tokenizer tokenizer_;
};

class TokenIdCodec : public TextCodec {
 public:
  std::vector<int64_t> encode(const std::string&) const override { return {}; }
  std::string sample_text(const std::string&,
                          const std::vector<int64_t>& generated) const override {
    return fmt::format("(token ids: set data.tokenizer to decode them)\n{}",
                       fmt::join(generated, " "));
  }
};

}  // namespace

std::unique_ptr<TextCodec> make_text_codec(const DataConfig& data, const std::string& data_root) {
  if (data.format == "bytes") return std::make_unique<ByteCodec>();
  if (data.format != "tokens") return nullptr;
  if (data.tokenizer.empty()) return std::make_unique<TokenIdCodec>();
  return std::make_unique<TokenizerCodec>(tokenizer_path_of(data, data_root));
}

}  // namespace pipetrain
