// my_trainer: pipetrain's whole command line, plus one model and one data format of our own.
//   ./my_trainer train --model.kind mlp --data.format teacher --pipeline.stages 2
#include "residual_mlp.h"

int main(int argc, char** argv) {
  residual_mlp::register_with_pipetrain();
  return pipetrain::run_cli(argc, argv);
}
