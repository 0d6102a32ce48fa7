// `pipetrain`: the command line with the built-in models and data formats.
#include "cli/run_cli.h"

int main(int argc, char** argv) { return pipetrain::run_cli(argc, argv); }
