#!/usr/bin/env bash
# Prints where the tests' tiny speech feature file lies on this machine: tests/tiny_speech.h names
# it by its generator's version (v1) and the feature file format's (src/speech/feature_file.h),
# read here from that header. `SpeechBatches.TheBenchScriptsFindTheTinySpeechFile` keeps the two
# equal. Run from the repository root.
set -euo pipefail
format=$(sed -n 's/^inline constexpr uint32_t kSpeechFileVersion = \([0-9][0-9]*\);.*/\1/p' \
  src/speech/feature_file.h)
[ -n "$format" ] || { echo "tiny_speech_file.sh: no kSpeechFileVersion in src/speech/feature_file.h" >&2; exit 1; }
echo "${TMPDIR:-/tmp}/pipetrain_tiny_speech_v1_format${format}.bin"
