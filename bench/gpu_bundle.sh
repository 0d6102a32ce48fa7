#!/usr/bin/env bash
# Makes build-gpu/: what bench/gpu_check.sh needs on a lent GPU machine that has torch 2.11 in its
# python3 but none of our build dependencies and no package registries (measured there: no apt,
# no pip). The pipetrain binary built here against the same wheel, and the one library it links
# that the machine lacks (toml++); the transducer, head loss and GEMM knee benches; the tests' tiny speech feature file
# (the recognizer's GPU run) and a small synthesized corpus (its step time); libtorch comes from the machine's own torch wheel. About 25 MB of the
# 64 MiB a device call may carry.
#   bench/gpu_bundle.sh && device run --carry build-gpu 'bash bench/gpu_check.sh'
set -euo pipefail
cd "$(dirname "$0")/.."
command -v nvcc >/dev/null || export PATH="$PATH:/usr/local/cuda/bin"
cmake --build build --target pipetrain transducer_memory head_loss device_rates write_tiny_speech >/dev/null
# A small espeak-ng corpus (256 training utterances of 2-8 words, 17 MiB) for the recognizer's step
# time on the GPU against the CPU; made once per machine.
SPEECH="${TMPDIR:-/tmp}/pipetrain_gpu_speech_v1.bin"
[ -f "$SPEECH" ] || build/pipetrain prepare-speech --out "$SPEECH" --train-lines 256 --validation-lines 16 \
  --test-lines 8 --renditions 1 --threads 2 >/dev/null 2>&1
rm -rf build-gpu
mkdir -p build-gpu/lib
cp build/pipetrain build/bench/transducer_memory build/bench/head_loss build/bench/device_rates build-gpu/
build/tests/model/write_tiny_speech build-gpu/tiny_speech.bin  # the tests' tiny speech file
cp "$SPEECH" build-gpu/speech.bin
# Every library outside the system's base and the torch wheel.
ldd build/pipetrain | awk '$3 ~ /^\// {print $3}' |
  grep -v -e '/\.venv/' -e 'libc\.so' -e 'libm\.so' -e 'libstdc++' -e 'libgcc_s' -e 'libdl\.so' \
    -e 'libpthread' -e 'librt\.so' -e 'libutil\.so' -e 'libz\.so' |
  while read -r lib; do cp -L "$lib" build-gpu/lib/; done
du -sh build-gpu | sed 's/^/gpu_bundle: /'
ls build-gpu/lib
