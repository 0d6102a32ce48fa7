#!/usr/bin/env bash
# The learning rate of each optimizer, tuned once on the synchronous default job (one process,
# 800 steps) and then reused unchanged by bench/delay_robust_convergence.sh. Prints the final
# validation loss per learning rate. A run that already reached the last step is kept.
# Usage: bench/lr_sweep.sh RUNS_DIR   (STEPS=800 ADAMW_LRS="1.5e-3 3e-3 6e-3"
#        MUON_LRS="0.01 0.02 0.04" ADAMW_LR=3e-3 for Muon's AdamW part, PIPETRAIN=build/pipetrain)
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS="${1:?runs folder}"
PIPETRAIN="${PIPETRAIN:-build/pipetrain}"
STEPS="${STEPS:-800}"
ADAMW_LRS="${ADAMW_LRS:-1.5e-3 3e-3 6e-3}"
MUON_LRS="${MUON_LRS:-0.01 0.02 0.04}"
ADAMW_LR="${ADAMW_LR:-3e-3}"
mkdir -p "$RUNS"
val_of() {
  python3 -c "import json
lines=[json.loads(l) for l in open('$1/metrics.jsonl') if 'val_loss' in l]
print(lines[-1]['val_loss'] if lines and lines[-1]['step']==$STEPS else '')" 2>/dev/null || true
}
run_one() {  # NAME ARGS...
  local dir="$RUNS/$1"; shift
  if [[ -z "$(val_of "$dir")" ]]; then
    "$PIPETRAIN" train --quiet --train.steps "$STEPS" --sample.tokens 0 "$@" \
      --run-dir "$dir" --overwrite >"$dir.log" 2>&1 || echo "$dir failed: $(tail -1 "$dir.log")" >&2
  fi
  echo "| $(basename "$dir") | $(val_of "$dir") |"
}
echo "| run | validation loss at step $STEPS |"
echo "|---|---|"
for lr in $ADAMW_LRS; do run_one "adamw-lr$lr" --train.optimizer adamw --train.lr "$lr"; done
for lr in $MUON_LRS; do
  run_one "muon-lr$lr" --train.optimizer muon --train.lr "$ADAMW_LR" --train.muon_lr "$lr"
done
