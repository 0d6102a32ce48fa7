#pragma once
// A model given as TorchScript layers (model.kind = "torchscript"): model.torchscript names a
// folder of layer0.pt, layer1.pt, ... (torch.jit.save'd modules, run in order) and model.json
// (the layer count, what a row of inputs and labels looks like, the loss), as
// scripts/export_torchscript.py writes them. Parameters are named layer<i>.<the module's name>,
// so checkpoints and partitions work as for any model. docs/models.md.
#include <memory>

#include "core/config.h"
#include "model/model.h"

namespace pipetrain {

// Loads the folder and runs an example through every layer: UserError (one line) for a missing
// or unreadable file, a layer whose output the next one does not take, or a last output the
// loss does not take.
std::shared_ptr<const Model> make_torchscript_model(const Config& config);

}  // namespace pipetrain
