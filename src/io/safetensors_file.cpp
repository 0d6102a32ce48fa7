#include "io/safetensors_file.h"

#include "core/error.h"
#include "io/crc32c.h"

namespace pipetrain {

SafetensorsFileWriter::SafetensorsFileWriter(const std::string& path,
                                             std::vector<TensorLayout> tensors,
                                             const std::map<std::string, std::string>& metadata)
    : file_(path), tensors_(std::move(tensors)) {
  write(safetensors_header(tensors_, metadata));
}

void SafetensorsFileWriter::write(std::string_view bytes) {
  crc_ = crc32c(bytes, crc_);
  file_.write(bytes);
}

void SafetensorsFileWriter::write_tensor(std::string_view bytes) {
  if (written_tensors_ == tensors_.size()) {
    fail("cannot write '{}': more tensors than its header lists", file_.path());
  }
  const TensorLayout& tensor = tensors_[written_tensors_];
  const uint64_t size = tensor_byte_size(tensor);
  if (bytes.size() != size) {
    fail("cannot write '{}': tensor '{}' has {} bytes, its shape needs {}", file_.path(),
         tensor.name, bytes.size(), size);
  }
  write(bytes);
  ++written_tensors_;
}

std::string SafetensorsFileWriter::commit() {
  if (written_tensors_ != tensors_.size()) {
    fail("cannot write '{}': {} of its {} tensors written", file_.path(), written_tensors_,
         tensors_.size());
  }
  file_.commit();
  return format_crc32c(crc_);
}

}  // namespace pipetrain
