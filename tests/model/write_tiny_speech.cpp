// Writes the tests' tiny speech feature file (tests/tiny_speech.h) to a path of your choosing:
// bench/gpu_bundle.sh carries it to a GPU machine for bench/gpu_check.sh's transducer phase.
//   build/tests/model/write_tiny_speech OUT.bin
#include <cstdio>
#include <exception>

#include "../tiny_speech.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: write_tiny_speech OUT.bin\n");
    return 2;
  }
  try {
    pipetrain::testing::write_tiny_speech_file(argv[1]);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "write_tiny_speech: %s\n", error.what());
    return 1;
  }
  return 0;
}
