#pragma once
// Models and data by name: model.kind picks the model, data.format the batches it trains on.
// Built-in ones are listed in registry.cpp; a program linking pipetrain adds its own before
// handing control to pipetrain (the workers it launches run the same program, so they
// register the same ones).
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/config.h"
#include "device/precision.h"
#include "model/batch_source.h"
#include "model/model.h"

namespace pipetrain {

// The model, its weights seeded by train.seed.
using ModelFactory = std::function<std::shared_ptr<const Model>(const Config&)>;
// Training and validation batches; relative paths fall back to data_root.
using BatchSourceFactory =
    std::function<std::shared_ptr<const BatchSource>(const Config&, const std::string& data_root)>;

// Add a model.kind / data.format; UserError if the name is taken.
void register_model_kind(const std::string& name, ModelFactory factory);
void register_data_format(const std::string& name, BatchSourceFactory factory);

// What model.dtype means for the model's tensors (device/precision.h).
device::Precision model_precision(const ModelConfig& model);
// The dtype of the weights, gradients, optimizer state and floating batches: model.dtype, or
// float32 (the master weights) under mixed precision.
torch::ScalarType compute_dtype(const ModelConfig& model);
// UserError unless `kind` computes in model.dtype's precision (mixed precision is per model).
void require_full_precision(const ModelConfig& model, const std::string& why);

std::vector<std::string> model_kinds();
std::vector<std::string> data_formats();
// UserError unless `format` is a registered data format ("data.format must be one of ...").
void require_data_format(const std::string& format);
// The model config.model.kind names. UserError naming the known kinds for an unknown one.
std::shared_ptr<const Model> make_model(const Config& config);
// The batches config.data.format names. UserError naming the known formats for an unknown one.
std::shared_ptr<const BatchSource> make_batch_source(const Config& config, const std::string& data_root);

}  // namespace pipetrain
