#!/usr/bin/env bash
# Does the planner's choice hold up when measured? Profiles this machine (`pipetrain profile`),
# asks `pipetrain plan --cluster this-machine` for the best plan at a global batch of 32
# sequences of the default GPT, runs that plan (`pipetrain train --plan`) and the other
# configurations of the same global batch that fit 2 cores (1 or 2 stages, 1 or 2 replicas,
# several microbatch counts, 1F1B / GPipe / 2BW), and prints each one's measured tokens/s
# (median step time of steps 11..STEPS: the first 10 are warm-up) and the plan's share of the
# best measured. Usage: bench/plan_choice.sh [path/to/pipetrain]   (STEPS=30 by default)
set -euo pipefail
cd "$(dirname "$0")/.."
PIPETRAIN="$(realpath "${1:-${PIPETRAIN:-build/pipetrain}}")"
STEPS="${STEPS:-30}"
[[ -x "$PIPETRAIN" ]] || { echo "no pipetrain binary at $PIPETRAIN (build it first)" >&2; exit 1; }
(( STEPS > 10 )) || { echo "STEPS must be above 10 (10 warm-up steps)" >&2; exit 2; }
DIR="$(mktemp -d)"
trap 'rm -rf "$DIR"' EXIT
COMMON="--quiet --train.steps $STEPS --train.batch_size 32 --train.threads 1 --eval.every 0 \
--eval.batches 1 --sample.tokens 0 --log.every 1 --checkpoint.every 0"
TOKENS_PER_STEP=$((32 * 128))

"$PIPETRAIN" profile --microbatch-sizes 1,2,4,8,16,32 --out "$DIR/profile.json" >/dev/null 2>&1
"$PIPETRAIN" plan --profile "$DIR/profile.json" --cluster this-machine --global-batch 32 \
  --out "$DIR/plan.json" > "$DIR/plan.txt" 2>&1
sed -n '/^| rank/,/^$/p' "$DIR/plan.txt" | head -8
grep '^best:' "$DIR/plan.txt"

# Median step seconds of steps 11.. from metrics.jsonl -> tokens/s.
measure() {
  # shellcheck disable=SC2086
  "$PIPETRAIN" train $COMMON "$@" --run-dir "$DIR/run" --overwrite >/dev/null 2>&1 || { echo 0; return; }
  sed -n 's/.*"step":\([0-9]*\).*"step_seconds":\([0-9.e-]*\).*/\1 \2/p' "$DIR/run/metrics.jsonl" |
    awk '$1 > 10 {print $2}' | sort -g |
    awk -v t=$TOKENS_PER_STEP '{a[NR]=$1} END {printf "%.0f\n", t / a[int((NR+1)/2)]}'
}

# label | flags
ROWS=(
  "the plan (train --plan)|--plan $DIR/plan.json"
  "1 process, m=1|--stages 1 --microbatches 1"
  "1 process, m=8|--stages 1 --microbatches 8"
  "2 replicas, m=1 each|--stages 1 --dp-width 2 --microbatches 1"
  "2 replicas, m=4 each|--stages 1 --dp-width 2 --microbatches 4"
  "2 replicas, m=16 each|--stages 1 --dp-width 2 --microbatches 16"
  "2-stage 1F1B, m=4|--stages 2 --schedule 1f1b --microbatches 4"
  "2-stage 1F1B, m=8|--stages 2 --schedule 1f1b --microbatches 8"
  "2-stage 1F1B, m=32|--stages 2 --schedule 1f1b --microbatches 32"
  "2-stage GPipe, m=8|--stages 2 --schedule gpipe --microbatches 8"
  "2-stage 2BW, m=8|--stages 2 --schedule 2bw --microbatches 8"
)
echo
echo "| configuration (global batch 32) | measured tokens/s |"
echo "|---|---|"
best=0
for row in "${ROWS[@]}"; do
  label="${row%%|*}"
  # shellcheck disable=SC2086
  tokens=$(measure ${row#*|})
  echo "| $label | $tokens |"
  [[ "$label" == "the plan"* ]] && planned=$tokens
  (( tokens > best )) && best=$tokens
done
echo
awk -v p="$planned" -v b="$best" 'BEGIN {printf "the plan measured %.1f%% of the best measured configuration\n", 100 * p / b}'
