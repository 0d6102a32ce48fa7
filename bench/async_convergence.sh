#!/usr/bin/env bash
# Convergence of the weight policies: the default GPT on tinyshakespeare as a 4-stage pipeline
# (m=8), the same token budget (STEPS x 32 x 128 tokens) and seed for every run: synchronous
# 1F1B (the reference), 2BW, PipeDream, PipeOptim, SpecTrain, 2BW with prediction, and PipeDream
# without weight stashing (negative control). Prints the final validation losses as a markdown
# table and writes the validation curves to OUT (SVG).
# Usage: bench/async_convergence.sh [OUT.svg]   (STEPS=150 EVERY=25, PIPETRAIN=build/pipetrain)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${1:-docs/benchmarks/async_convergence.svg}"
PIPETRAIN="${PIPETRAIN:-build/pipetrain}"
STEPS="${STEPS:-150}"
EVERY="${EVERY:-25}"
DIR="${RUNS_DIR:-$(mktemp -d)}"
mkdir -p "$(dirname "$OUT")"
ARGS=()
for schedule in 1f1b 2bw pipedream pipeoptim spectrain 2bw-predict pipedream-nostash; do
  start=$(date +%s)
  "$PIPETRAIN" train --quiet --stages 4 --schedule "$schedule" --microbatches 8 \
    --train.threads 1 --train.steps "$STEPS" --eval.every "$EVERY" --eval.batches 4 \
    --sample.tokens 0 --run-dir "$DIR/$schedule" --overwrite >"$DIR/$schedule.log" 2>&1 ||
    echo "$schedule failed: $(tail -1 "$DIR/$schedule.log")" >&2
  echo "$schedule: $(( $(date +%s) - start )) s" >&2
  label=$schedule
  [[ $schedule == 1f1b ]] && label="sync (1f1b)"
  [[ $schedule == pipedream-nostash ]] && label="no stashing (pipedream-nostash)"
  ARGS+=("$label=$DIR/$schedule/metrics.jsonl")
done
"${PLOT_CURVES:-build/bench/plot_curves}" "$OUT" \
  "4-stage GPT, tinyshakespeare, $STEPS steps x 32 x 128 tokens: validation loss" "${ARGS[@]}"
