#pragma once
// How a run turns sample.prompt into ids and the ids it generates back into text: bytes for
// data.format = "bytes"; the SentencePiece model data.tokenizer for token files. Token files
// without a tokenizer cannot encode the prompt: the sample then starts from the model's default
// and is printed as ids.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace pipetrain {

struct DataConfig;

class TextCodec {
 public:
  virtual ~TextCodec() = default;
  virtual std::vector<int64_t> encode(const std::string& text) const = 0;
  // The sample as shown: the prompt followed by the generated ids, decoded.
  virtual std::string sample_text(const std::string& prompt,
                                  const std::vector<int64_t>& generated) const = 0;
};

// UserError if data.tokenizer is set but missing or not a SentencePiece model; null for a
// data.format that is not text (images, speech features): there is nothing to encode.
std::unique_ptr<TextCodec> make_text_codec(const DataConfig& data, const std::string& data_root);

}  // namespace pipetrain
