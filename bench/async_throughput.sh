#!/usr/bin/env bash
# Steady-state throughput of PipeDream-2BW vs 1F1B-flush and GPipe on 2 workers at the same
# global batch (the default model, batch 32 x 128 tokens, m=8), next to the simulator's
# prediction. The simulator's forward/backward times per stage come from a measured 1-process
# 1-thread run (whole-model time per microbatch / 2 stages, split 1:2 forward:backward).
# Runs the rows in turn ROUNDS times and prints medians. Run it un-niced inside the bench lock:
#   flock /tmp/pipetrain-bench.lock bench/async_throughput.sh    (STEPS=60 ROUNDS=3)
set -euo pipefail
cd "$(dirname "$0")/.."
PIPETRAIN="${1:-${PIPETRAIN:-build/pipetrain}}"
STEPS="${STEPS:-60}"
ROUNDS="${ROUNDS:-3}"
M=8
DIR="$(mktemp -d)"
trap 'rm -rf "$DIR"' EXIT
COMMON="--quiet --train.steps $STEPS --eval.every 0 --eval.batches 1 --sample.tokens 0 --train.threads 1"
tokens_of() { python3 -c "import json;print(json.load(open('$1/summary.json'))['tokens_per_s'])"; }
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
SCHEDULES=(gpipe 1f1b 2bw)
declare -A TOKENS
SINGLE=""
for ((round = 0; round < ROUNDS; ++round)); do
  # shellcheck disable=SC2086
  "$PIPETRAIN" train $COMMON --stages 1 --microbatches $M --run-dir "$DIR/run" --overwrite >/dev/null 2>&1
  SINGLE+="$(tokens_of "$DIR/run") "
  for s in "${SCHEDULES[@]}"; do
    # shellcheck disable=SC2086
    "$PIPETRAIN" train $COMMON --stages 2 --schedule "$s" --microbatches $M --run-dir "$DIR/run" \
      --overwrite >/dev/null 2>&1
    TOKENS[$s]+="$(tokens_of "$DIR/run") "
  done
done
single=$(echo "$SINGLE" | tr ' ' '\n' | grep . | median)
# Whole model per microbatch in ms, half per stage, forward 1/3 and backward 2/3 of it.
stage_ms=$(python3 -c "print(32*128/$M/$single*1000/2)")
f=$(python3 -c "print($stage_ms/3)"); b=$(python3 -c "print(2*$stage_ms/3)")
echo "1 process, 1 thread: $single tokens/s -> per stage and microbatch: forward $f ms, backward $b ms"
echo
echo "| schedule (2 workers, m=$M) | measured tokens/s (median of $ROUNDS) | all rounds | vs 1F1B | simulated iteration ms | simulated tokens/s | simulated vs 1F1B |"
echo "|---|---|---|---|---|---|---|"
declare -A SIM
for s in "${SCHEDULES[@]}"; do
  SIM[$s]=$("$PIPETRAIN" simulate --schedule "$s" --stages 2 --microbatches $M --forward-ms "$f" \
    --backward-ms "$b" --weight-ms "$(python3 -c "print($b/2)")" | sed -n 's/^iteration time *\([0-9.]*\) ms.*/\1/p')
done
for s in "${SCHEDULES[@]}"; do
  t=$(echo "${TOKENS[$s]}" | tr ' ' '\n' | grep . | median)
  t1=$(echo "${TOKENS[1f1b]}" | tr ' ' '\n' | grep . | median)
  all=$(for x in ${TOKENS[$s]}; do printf '%.0f ' "$x"; done)
  python3 -c "
t,t1,it,it1=$t,$t1,${SIM[$s]},${SIM[1f1b]}
print('| $s | %.0f | $all| %.3f | %.1f | %.0f | %.3f |' % (t, t/t1, it, 32*128/it*1000, it1/it))"
done
