#pragma once
// data.format = "safetensors": data.path is a safetensors file holding train_inputs,
// train_labels, val_inputs and val_labels (rows first). Step s trains on rows s*B .. s*B+B-1
// (wrapping around), validation batch i is val rows i*B ..; so a PyTorch script reading the same
// file sees the same batches (scripts/export_torchscript.py). Floating tensors take model.dtype.
#include <memory>
#include <string>

#include "core/config.h"
#include "model/batch_source.h"

namespace pipetrain {

std::shared_ptr<const BatchSource> make_tensor_file_batches(const Config& config,
                                                            const std::string& data_root);

}  // namespace pipetrain
