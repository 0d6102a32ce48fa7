#!/usr/bin/env bash
# TeraPipe token slicing on this machine: a 2-stage GPipe pipeline (1 thread per worker), batch 1,
# one sequence of SEQ tokens, trained without slicing, with the best uniform slicing and with
# the DP's slicing, all planned from the measured slice latency (terapipe-profile + fit).
# Prints the profile's fit error, the plan, and a markdown table of predicted vs measured tokens/s
# (median of ROUNDS runs of STEPS steps; summary.json, start-up excluded).
# Usage: bench/terapipe_throughput.sh [path/to/pipetrain]  (SEQ=1024 STEPS=20 ROUNDS=3)
set -euo pipefail
cd "$(dirname "$0")/.."
PIPETRAIN="${1:-${PIPETRAIN:-build/pipetrain}}"
SEQ="${SEQ:-1024}"
STEPS="${STEPS:-20}"
ROUNDS="${ROUNDS:-3}"
[[ -x "$PIPETRAIN" ]] || { echo "no pipetrain binary at $PIPETRAIN (build it first)" >&2; exit 1; }
DIR="$(mktemp -d)"
trap 'rm -rf "$DIR"' EXIT
MODEL="--model.layers 4 --model.d_model 256 --model.heads 4 --model.seq_len $SEQ"

"$PIPETRAIN" terapipe-profile $MODEL --threads 1 --out "$DIR/slices.json" 2>/dev/null | grep "fit"
"$PIPETRAIN" terapipe-plan --profile "$DIR/slices.json" --stages 2 --batch 1 --microbatch 1 \
  > "$DIR/plan.txt"
cat "$DIR/plan.txt"
dp=$(sed -n 's/^train with: .*--pipeline.slices \([0-9,]*\)$/\1/p' "$DIR/plan.txt")
uniform=$(sed -n 's/^| best uniform | \([0-9]*\) |.*/\1/p' "$DIR/plan.txt")
predicted() { sed -n "s/^| $1 | [0-9]* | [0-9.]* | \([0-9]*\) |.*/\1/p" "$DIR/plan.txt"; }

COMMON="--quiet $MODEL --train.steps $STEPS --train.batch_size 1 --train.microbatches 1
  --train.threads 1 --eval.every 0 --eval.batches 1 --sample.tokens 0 --stages 2 --schedule gpipe"
# label | plan row | pipeline.slices
ROWS=("no slicing|no slicing|1" "best uniform|best uniform|$uniform" "DP|DP|$dp")
# shellcheck source=bench/lib.sh
source bench/lib.sh
declare -A TOKENS
for ((round = 0; round < ROUNDS; ++round)); do
  for i in "${!ROWS[@]}"; do
    IFS='|' read -r _ _ slices <<< "${ROWS[$i]}"
    # shellcheck disable=SC2086
    "$PIPETRAIN" train $COMMON --pipeline.slices "$slices" --run-dir "$DIR/run" --overwrite \
      >/dev/null 2>&1
    TOKENS[$i]+="$(sed -n 's/.*"tokens_per_s": *\([0-9.e+]*\).*/\1/p' "$DIR/run/summary.json") "
  done
done
base=$(echo "${TOKENS[0]}" | tr ' ' '\n' | grep . | median)
echo
echo "| slicing | pipeline.slices | predicted tokens/s | measured tokens/s (median of $ROUNDS) | all rounds | measured speedup |"
echo "|---|---|---|---|---|---|"
for i in "${!ROWS[@]}"; do
  IFS='|' read -r label row slices <<< "${ROWS[$i]}"
  t=$(echo "${TOKENS[$i]}" | tr ' ' '\n' | grep . | median)
  all=$(for x in ${TOKENS[$i]}; do printf '%.0f ' "$x"; done)
  printf '| %s | %s | %s | %.0f | %s| %.2fx |\n' "$label" "$slices" "$(predicted "$row")" "$t" \
    "$all" "$(echo "$t / $base" | bc -l)"
done
