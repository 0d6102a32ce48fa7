#pragma once
// pipetrain's whole command line (train, simulate, plan, ...) as one call: the `pipetrain`
// program is only this, and a program linking the library (pipetrain.h) registers its own
// model kinds and data formats, then hands over to it.

namespace pipetrain {

// Parses argv as `pipetrain` does and runs the command; returns the exit code (0, 2 for a user
// error with its one line on stderr, 1 for an internal error, 128 + signal when stopped).
// `train` launches its pipeline workers by re-running this same program with the same argv
// conventions, so the workers register the same kinds before they build the model.
int run_cli(int argc, char** argv);

}  // namespace pipetrain
