#!/usr/bin/env bash
# A TorchScript ResNet-18 (bench/resnet18_layers.py: stem, layer1..layer4, head; SIZE x SIZE images)
# on 2 pipeline stages: the default "balanced" cut (the layers' counted FLOPs, model/op_work.h)
# and the "measured" cut (the launcher times each layer first) against every other cut, among
# them 4,2, which the former balance by parameter counts chose. The measured cut of each round
# is printed (timings can move it).
# Runs the cuts in turn, ROUNDS times (this VM is shared), and prints a markdown table of the
# median step time over steps 2.. (metrics.jsonl's step_seconds) and images/s.
# Usage: bench/torchscript_partition.sh [path/to/pipetrain]   (SIZE=128 STEPS=8 ROUNDS=3 by default)
set -euo pipefail
cd "$(dirname "$0")/.."
PIPETRAIN="${1:-${PIPETRAIN:-build/pipetrain}}"
STEPS="${STEPS:-8}"
SIZE="${SIZE:-128}"
ROUNDS="${ROUNDS:-3}"
[[ -x "$PIPETRAIN" ]] || { echo "no pipetrain binary at $PIPETRAIN (build it first)" >&2; exit 1; }
DIR="$(mktemp -d)"
trap 'rm -rf "$DIR"' EXIT
.venv/bin/python3 bench/resnet18_layers.py --out "$DIR/resnet18" --size "$SIZE" --rows 64
BATCH=16
COMMON="--quiet --model.kind torchscript --model.torchscript $DIR/resnet18 --data.format safetensors
  --data.path $DIR/resnet18/data.safetensors --train.batch_size $BATCH --train.microbatches 4
  --train.steps $STEPS --train.threads 1 --pipeline.stages 2 --eval.every 0 --eval.batches 1
  --sample.tokens 0 --log.every 1 --checkpoint.every 0"
CUTS=(balanced measured 1,5 2,4 3,3 4,2 5,1)
# shellcheck disable=SC2086
BALANCED=$("$PIPETRAIN" train ${COMMON/--quiet/} --train.steps 1 --run-dir "$DIR/probe" 2>&1 |
           grep -o 'stage 0: layers [0-9-]*, stage 1: layers [0-9-]*' | head -1)
echo "balanced: $BALANCED"

declare -A STEP
for ((round = 0; round < ROUNDS; ++round)); do
  for cut in "${CUTS[@]}"; do
    # shellcheck disable=SC2086
    "$PIPETRAIN" train $COMMON --pipeline.partition "$cut" --run-dir "$DIR/run" --overwrite >"$DIR/log" 2>&1
    [ "$cut" = measured ] && grep -o -- '-> partition [0-9,]*' "$DIR/log" | sed "s/^/round $round: measured /"
    STEP[$cut]+="$(python3 -c "
import json, statistics
rows = [json.loads(l) for l in open('$DIR/run/metrics.jsonl')][1:]
print(statistics.median(r['step_seconds'] for r in rows))") "
  done
done
# shellcheck source=bench/lib.sh
source bench/lib.sh
echo "| partition (layers per stage) | median step s | images/s |"
echo "|---|---|---|"
for cut in "${CUTS[@]}"; do
  s=$(echo "${STEP[$cut]}" | median)
  echo "| $cut | $s | $(echo "$BATCH / $s" | bc -l | xargs printf '%.1f') |"
done
