#!/usr/bin/env bash
# Training throughput of the default model (4-layer GPT, d_model 128, batch 32 x 128 tokens):
# one process with 1 and with 2 compute threads vs. a 2-stage pipeline on 2 worker processes
# with 1 thread each (1F1B and GPipe). Runs the rows in turn, ROUNDS times (this VM is shared:
# the median of the rounds is printed), and prints a markdown table of tokens/s measured over the
# training loop (summary.json; start-up, validation and checkpoints excluded) and wall seconds.
# Usage: bench/pipeline_throughput.sh [path/to/pipetrain]   (STEPS=100 ROUNDS=3 by default)
set -euo pipefail
cd "$(dirname "$0")/.."
PIPETRAIN="${1:-${PIPETRAIN:-build/pipetrain}}"
STEPS="${STEPS:-100}"
ROUNDS="${ROUNDS:-3}"
[[ -x "$PIPETRAIN" ]] || { echo "no pipetrain binary at $PIPETRAIN (build it first)" >&2; exit 1; }
DIR="$(mktemp -d)"
trap 'rm -rf "$DIR"' EXIT
COMMON="--quiet --train.steps $STEPS --eval.every 0 --eval.batches 1 --sample.tokens 0"

# label | flags
ROWS=(
  "1 process, 1 thread|--train.threads 1"
  "1 process, 2 threads|--train.threads 2"
  "2-stage 1F1B, m=4, 1 thread/worker|--stages 2 --schedule 1f1b --microbatches 4 --train.threads 1"
  "2-stage 1F1B, m=8, 1 thread/worker|--stages 2 --schedule 1f1b --microbatches 8 --train.threads 1"
  "2-stage GPipe, m=4, 1 thread/worker|--stages 2 --schedule gpipe --microbatches 4 --train.threads 1"
)
# shellcheck source=bench/lib.sh
source bench/lib.sh
declare -A TOKENS WALL
for ((round = 0; round < ROUNDS; ++round)); do
  for i in "${!ROWS[@]}"; do
    flags="${ROWS[$i]#*|}"
    start=$(date +%s.%N)
    # shellcheck disable=SC2086
    "$PIPETRAIN" train $COMMON $flags --run-dir "$DIR/run" --overwrite >/dev/null 2>&1
    end=$(date +%s.%N)
    tokens=$(sed -n 's/.*"tokens_per_s": *\([0-9.e+]*\).*/\1/p' "$DIR/run/summary.json")
    TOKENS[$i]+="$tokens "
    WALL[$i]+="$(echo "$end - $start" | bc) "
  done
done
echo "| run | tokens/s (median of $ROUNDS) | all rounds | wall s ($STEPS steps) |"
echo "|---|---|---|---|"
for i in "${!ROWS[@]}"; do
  t=$(echo "${TOKENS[$i]}" | tr ' ' '\n' | grep . | median)
  w=$(echo "${WALL[$i]}" | tr ' ' '\n' | grep . | median)
  all=$(for x in ${TOKENS[$i]}; do printf '%.0f ' "$x"; done)
  printf '| %s | %.0f | %s| %.1f |\n' "${ROWS[$i]%%|*}" "$t" "$all" "$w"
done
