#!/usr/bin/env bash
# Weight copies and peak memory per stage of each weight policy on a 4-stage pipeline (p=4,
# m=8, the default model cut into 4 stages): the distinct weight storages each stage's policy
# held at its peak (master + stashed versions + a prediction's saved original, counted by
# WeightVersions during the real run) and each worker's peak resident memory (ru_maxrss).
# Prints a markdown table. Usage: bench/async_versions.sh [path/to/pipetrain]  (STEPS=20)
set -euo pipefail
cd "$(dirname "$0")/.."
PIPETRAIN="${1:-${PIPETRAIN:-build/pipetrain}}"
STEPS="${STEPS:-20}"
DIR="$(mktemp -d)"
trap 'rm -rf "$DIR"' EXIT
echo "| schedule | weight copies per stage 0..3 | expected | stage weights (MB) 0..3 | peak RSS per worker (MB) 0..3 |"
echo "|---|---|---|---|---|"
for schedule in 1f1b gpipe 2bw pipedream pipeoptim spectrain 2bw-predict pipedream-nostash; do
  case $schedule in
    1f1b|gpipe) expected="1 1 1 1" ;;
    2bw) expected="2 2 2 2" ;;
    pipedream) expected="4 3 2 1 (p - s)" ;;
    # In the last step: a copy of each of the p-1-s versions the next step's forwards would read
    # (the final checkpoint continues), beside the master (and a prediction's original).
    pipeoptim) expected="4 3 2 1 (max(2, p - s); last stage 1)" ;;
    spectrain) expected="<= 1 + p - s" ;;
    pipedream-nostash) expected="4 3 2 1 (p - s)" ;;
    2bw-predict) expected="(beyond the papers: 2 predicted versions + master)" ;;
  esac
  "$PIPETRAIN" train --quiet --stages 4 --schedule "$schedule" --microbatches 8 --train.threads 1 \
    --train.steps "$STEPS" --eval.every 0 --eval.batches 1 --sample.tokens 0 \
    --run-dir "$DIR/run" --overwrite >/dev/null 2>&1
  copies=$(python3 -c "import json;print(' '.join(map(str,json.load(open('$DIR/run/summary.json'))['weight_copies'])))")
  rss=$(python3 -c "import json;print(' '.join('%.0f'%x for x in json.load(open('$DIR/run/summary.json'))['peak_rss_mb']))")
  mb=$(python3 -c "
import json,os
d='$DIR/run/checkpoint'
print(' '.join('%.2f'%(os.path.getsize(f'{d}/stage{s}.safetensors')/2**20) for s in range(4)))")
  echo "| $schedule | $copies | $expected | $mb | $rss |"
done
