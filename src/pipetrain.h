#pragma once
// pipetrain as a library: everything a program needs to train its own model with every
// schedule, the launcher and torchrun (docs/models.md, "Bring your own model").
//
//   int main(int argc, char** argv) {
//     pipetrain::register_model_kind("mlp", make_my_model);
//     pipetrain::register_data_format("my-data", make_my_batches);
//     return pipetrain::run_cli(argc, argv);  // then: ./my_trainer train --model.kind mlp ...
//   }
#include "cli/run_cli.h"
#include "core/config.h"
#include "core/error.h"
#include "model/batch_source.h"
#include "model/model.h"
#include "model/registry.h"
