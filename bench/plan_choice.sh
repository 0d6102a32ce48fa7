#!/usr/bin/env bash
# Does the planner's ranking hold up when measured? Profiles this machine (`pipetrain profile`),
# asks `pipetrain plan --cluster this-machine` for every plan of a global batch of 32 sequences
# of the default GPT (`--out-ranked`: one runnable plan file per candidate, best first), runs
# each plan without recomputation (`pipetrain train --plan`) ROUNDS times, round-robin so a
# slow spell of the shared machine hits every plan alike, and prints per plan the predicted and
# the measured tokens/s (median over rounds of the median step time of steps 11..STEPS; the
# first 10 are warm-up), the prediction error, and the planner's pick's share of the best.
# Usage: bench/plan_choice.sh [path/to/pipetrain]   (STEPS=25 ROUNDS=3 RECOMPUTE=0 by default;
# RECOMPUTE=1 also runs the plans with recomputation)
set -euo pipefail
cd "$(dirname "$0")/.."
PIPETRAIN="$(realpath "${1:-${PIPETRAIN:-build/pipetrain}}")"
STEPS="${STEPS:-25}" ROUNDS="${ROUNDS:-3}" RECOMPUTE="${RECOMPUTE:-0}"
[[ -x "$PIPETRAIN" ]] || { echo "no pipetrain binary at $PIPETRAIN (build it first)" >&2; exit 1; }
(( STEPS > 10 )) || { echo "STEPS must be above 10 (10 warm-up steps)" >&2; exit 2; }
(( ROUNDS >= 1 )) || { echo "ROUNDS must be at least 1" >&2; exit 2; }
DIR="$(mktemp -d)"
trap 'rm -rf "$DIR"' EXIT
COMMON="--quiet --train.steps $STEPS --train.threads 1 --eval.every 0 --eval.batches 1 \
--sample.tokens 0 --log.every 1 --checkpoint.every 0"
TOKENS_PER_SAMPLE=128

"$PIPETRAIN" profile --microbatch-sizes 1,2,4,8,16,32 --out "$DIR/profile.json" >/dev/null 2>&1
"$PIPETRAIN" plan --profile "$DIR/profile.json" --cluster this-machine --global-batch 32 --top 5 \
  --out-ranked "$DIR/ranked" > "$DIR/plan.txt" 2>&1
grep '^best:' "$DIR/plan.txt"

field() { sed -n "s/^  \"$2\": \"\\{0,1\\}\\([^\",]*\\)\"\\{0,1\\},\\{0,1\\}$/\\1/p" "$1"; }

# Median step seconds of steps 11.. from metrics.jsonl -> tokens/s (0 if the run failed).
measure() {
  local plan="$1" batch
  batch=$(field "$plan" global_batch)
  # shellcheck disable=SC2086
  "$PIPETRAIN" train $COMMON --plan "$plan" --run-dir "$DIR/run" --overwrite >/dev/null 2>&1 || { echo 0; return; }
  sed -n 's/.*"step":\([0-9]*\).*"step_seconds":\([0-9.e-]*\).*/\1 \2/p' "$DIR/run/metrics.jsonl" |
    awk '$1 > 10 {print $2}' | sort -g |
    awk -v t=$((batch * TOKENS_PER_SAMPLE)) '{a[NR]=$1} END {printf "%.0f\n", t / a[int((NR+1)/2)]}'
}

PLANS=()
for plan in "$DIR"/ranked/rank-*.json; do
  [[ "$RECOMPUTE" == 1 || "$(field "$plan" recompute)" == false ]] && PLANS+=("$plan")
done
echo "measuring ${#PLANS[@]} plans x $ROUNDS rounds ($STEPS steps each)" >&2
declare -A RUNS
for ((round = 1; round <= ROUNDS; ++round)); do
  for plan in "${PLANS[@]}"; do RUNS[$plan]+="$(measure "$plan") "; done
  echo "round $round of $ROUNDS done" >&2
done

echo
echo "| rank | schedule | d | w | b | m | recompute | predicted tokens/s | measured tokens/s (median) | rounds | error |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
for plan in "${PLANS[@]}"; do
  rank=$(basename "$plan" .json); rank=$((10#${rank#rank-}))
  predicted=$(awk -v s="$(field "$plan" predicted_samples_per_s)" -v t=$TOKENS_PER_SAMPLE 'BEGIN {printf "%.0f", s * t}')
  median=$(tr ' ' '\n' <<< "${RUNS[$plan]}" | grep . | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
  error=$(awk -v p="$predicted" -v m="$median" 'BEGIN {if (m > 0) printf "%+.1f%%", 100 * (p / m - 1); else print "failed"}')
  echo "| $rank | $(field "$plan" schedule) | $(field "$plan" stages) | $(field "$plan" dp_width) |" \
       "$(field "$plan" microbatch_size) | $(field "$plan" microbatches) | $(field "$plan" recompute) |" \
       "$predicted | $median | ${RUNS[$plan]% } | $error |"
done > "$DIR/table.md"
cat "$DIR/table.md"
echo
awk -F' [|] ' '{rank = $1; sub(/^[|] /, "", rank); measured = $9; error = $11; sub(/%.*/, "", error)}
  rank == 1 {chosen = measured}
  measured > best {best = measured; best_rank = rank}
  error != "failed" {n++; e = error + 0; if (e < 0) e = -e; if (e <= 10) within++; if (e > worst) worst = e}
  END {
    printf "the plan (rank 1) measured %.1f%% of the best measured plan (rank %d)\n", 100 * chosen / best, best_rank
    printf "predictions within 10%% of measured: %d of %d plans (worst %.1f%%)\n", within, n, worst
  }' "$DIR/table.md"
