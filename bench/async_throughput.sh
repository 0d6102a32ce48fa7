#!/usr/bin/env bash
# Steady-state throughput of PipeDream-2BW vs 1F1B-flush and GPipe on 2 workers at the same
# global batch (the default model, batch 32 x 128 tokens) for m in $MS, next to the
# simulator's prediction; then the simulated gain at p = 4 and 8 with the same cost model. The
# simulator's forward/backward times per stage come from a measured 1-process 1-thread run
# (whole-model time per microbatch / p stages, split 1:2 forward:backward). Runs every row in
# turn ROUNDS times (round-robin) and prints medians. Run it un-niced inside the bench lock:
#   flock /tmp/pipetrain-bench.lock bench/async_throughput.sh    (STEPS=60 ROUNDS=3 MS="2 4 8")
set -euo pipefail
cd "$(dirname "$0")/.."
PIPETRAIN="${1:-${PIPETRAIN:-build/pipetrain}}"
STEPS="${STEPS:-60}"
ROUNDS="${ROUNDS:-3}"
MS="${MS:-2 4 8}"
DIR="$(mktemp -d)"
trap 'rm -rf "$DIR"' EXIT
COMMON="--quiet --train.steps $STEPS --eval.every 0 --eval.batches 1 --sample.tokens 0 --train.threads 1"
# shellcheck source=bench/lib.sh
source bench/lib.sh
SCHEDULES=(gpipe 1f1b 2bw)
declare -A TOKENS
SINGLE=""
for ((round = 0; round < ROUNDS; ++round)); do
  # shellcheck disable=SC2086
  "$PIPETRAIN" train $COMMON --stages 1 --microbatches 8 --run-dir "$DIR/run" --overwrite >/dev/null 2>&1
  SINGLE+="$(tokens_of "$DIR/run") "
  for m in $MS; do
    for s in "${SCHEDULES[@]}"; do
      # shellcheck disable=SC2086
      "$PIPETRAIN" train $COMMON --stages 2 --schedule "$s" --microbatches "$m" --run-dir "$DIR/run" \
        --overwrite >/dev/null 2>&1
      TOKENS[$s/$m]+="$(tokens_of "$DIR/run") "
    done
  done
done
single=$(echo "$SINGLE" | median)
echo "1 process, 1 thread: $single tokens/s (median of $ROUNDS); the simulator's stage = whole model / p,"
echo "forward 1/3 and backward 2/3 of it, weight gradient half the backward; transfers free"
echo
# Simulated iteration ms of schedule $1 at p=$2, m=$3.
simulated() {
  local stage_ms f b
  stage_ms=$(python3 -c "print(32*128/$3/$single*1000/$2)")
  f=$(python3 -c "print($stage_ms/3)"); b=$(python3 -c "print(2*$stage_ms/3)")
  "$PIPETRAIN" simulate --schedule "$1" --stages "$2" --microbatches "$3" --forward-ms "$f" \
    --backward-ms "$b" --weight-ms "$(python3 -c "print($b/2)")" | sed -n 's/^iteration time *\([0-9.]*\) ms.*/\1/p'
}
echo "| m | schedule (2 workers) | measured tokens/s (median of $ROUNDS) | all rounds | measured vs 1F1B | simulated vs 1F1B | ideal (m+p-1)/m |"
echo "|---|---|---|---|---|---|---|"
for m in $MS; do
  t1=$(echo "${TOKENS[1f1b/$m]}" | median)
  it1=$(simulated 1f1b 2 "$m")
  for s in "${SCHEDULES[@]}"; do
    t=$(echo "${TOKENS[$s/$m]}" | median)
    all=$(for x in ${TOKENS[$s/$m]}; do printf '%.0f ' "$x"; done)
    it=$(simulated "$s" 2 "$m")
    python3 -c "print('| $m | $s | %.0f | $all| %.3f | %.3f | %.3f |' % ($t, $t/$t1, $it1/$it, ($m+1)/$m if '$s'=='2bw' else 1))"
  done
done
echo
echo "Simulated only (this machine has 2 cores): 2BW vs 1F1B-flush, same global batch"
echo
echo "| p | m | 1f1b iteration ms | 2bw iteration ms | 2bw vs 1f1b | ideal (m+p-1)/m |"
echo "|---|---|---|---|---|---|"
for p in 4 8; do
  for m in $p $((2 * p)) $((4 * p)); do
    a=$(simulated 1f1b "$p" "$m"); b=$(simulated 2bw "$p" "$m")
    python3 -c "print('| $p | $m | %.1f | %.1f | %.3f | %.3f |' % ($a, $b, $a/$b, ($m+$p-1)/$m))"
  done
done
