#!/usr/bin/env bash
# Workers bound to their own cores (pipeline.bind_cores = 1, the default) vs placed by the OS
# (0): 2-worker 1F1B-flush and 2BW on the default model, batch 32 x 128 tokens, m in $MS, one
# compute thread per worker. Runs every row in turn ROUNDS times (round-robin) and prints
# medians, and 2BW's gain over 1F1B-flush under each placement. Run it un-niced inside the
# bench lock:   flock /tmp/pipetrain-bench.lock bench/core_binding.sh   (STEPS=40 ROUNDS=5 MS="2 4 8")
set -euo pipefail
cd "$(dirname "$0")/.."
PIPETRAIN="${1:-${PIPETRAIN:-build/pipetrain}}"
STEPS="${STEPS:-40}"
ROUNDS="${ROUNDS:-5}"
MS="${MS:-2 4 8}"
DIR="$(mktemp -d)"
trap 'rm -rf "$DIR"' EXIT
COMMON="--quiet --stages 2 --train.steps $STEPS --eval.every 0 --eval.batches 1 --sample.tokens 0 --train.threads 1"
# shellcheck source=bench/lib.sh
source bench/lib.sh
cores_of() { python3 -c "import json;print(' | '.join(json.load(open('$1/summary.json'))['cores']))"; }
declare -A TOKENS CORES
for ((round = 0; round < ROUNDS; ++round)); do
  for m in $MS; do
    for s in 1f1b 2bw; do
      for bind in 1 0; do
        # shellcheck disable=SC2086
        "$PIPETRAIN" train $COMMON --schedule "$s" --microbatches "$m" --pipeline.bind_cores "$bind" \
          --run-dir "$DIR/run" --overwrite >/dev/null 2>&1
        TOKENS[$m/$s/$bind]+="$(tokens_of "$DIR/run") "
        CORES[$bind]="$(cores_of "$DIR/run")"
      done
    done
  done
done
echo "cores per worker: bound ${CORES[1]}; unbound ${CORES[0]}"
echo
echo "| m | schedule | bound tokens/s (median of $ROUNDS) | unbound tokens/s | bound / unbound | bound rounds | unbound rounds |"
echo "|---|---|---|---|---|---|---|"
for m in $MS; do
  for s in 1f1b 2bw; do
    b=$(echo "${TOKENS[$m/$s/1]}" | median); u=$(echo "${TOKENS[$m/$s/0]}" | median)
    rb=$(for x in ${TOKENS[$m/$s/1]}; do printf '%.0f ' "$x"; done)
    ru=$(for x in ${TOKENS[$m/$s/0]}; do printf '%.0f ' "$x"; done)
    python3 -c "print('| $m | $s | %.0f | %.0f | %.3f | $rb| $ru|' % ($b, $u, $b/$u))"
  done
done
echo
echo "| m | 2bw vs 1f1b, bound | 2bw vs 1f1b, unbound | ideal (m+1)/m |"
echo "|---|---|---|---|"
for m in $MS; do
  python3 -c "
import statistics as st
t = lambda k: st.median_low([float(x) for x in k.split()])
print('| $m | %.3f | %.3f | %.3f |' % (t('${TOKENS[$m/2bw/1]}') / t('${TOKENS[$m/1f1b/1]}'),
      t('${TOKENS[$m/2bw/0]}') / t('${TOKENS[$m/1f1b/0]}'), ($m + 1) / $m))"
done
