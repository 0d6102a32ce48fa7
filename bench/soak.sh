#!/usr/bin/env bash
# Soak run: a tiny model for STEPS steps (default 20000) with periodic checkpoints and
# validation, as a STAGES-stage 1F1B pipeline (default 2; 1 = the single-process trainer),
# sampling each process's resident memory (VmRSS) every few seconds. Prints a markdown table
# (step, RSS per process) and the growth from the first sample after warm-up (10% of the steps)
# to the end. Usage: bench/soak.sh [STEPS] [STAGES] [BINARY]
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-20000}
stages=${2:-2}
bin=${3:-build/pipetrain}
dir=$(mktemp -d /tmp/pipetrain-soak.XXXXXX)
trap 'rm -rf "$dir"' EXIT
"$bin" train --quiet --model.layers 2 --model.d_model 32 --model.heads 2 --model.seq_len 16 \
  --train.batch_size 4 --train.microbatches 2 --train.threads 1 --train.steps "$steps" \
  --eval.every 1000 --eval.batches 1 --log.every 100 --sample.tokens 0 --stages "$stages" \
  --checkpoint.every 1000 --checkpoint.keep 2 --run-dir "$dir/run" --overwrite >/dev/null &
launcher=$!
if [ "$stages" -gt 1 ]; then
  while [ ! -s "$dir/run/workers.pid" ]; do sleep 0.2; done
  sleep 0.5
  mapfile -t pids < "$dir/run/workers.pid"
else
  pids=("$launcher" "$launcher")
fi
rss() { awk '/VmRSS/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }
echo "| step | rank 0 RSS (MiB) | rank 1 RSS (MiB) (= rank 0 for one process) |"
echo "|---|---|---|"
samples=()
while kill -0 "$launcher" 2>/dev/null; do
  step=$(tail -1 "$dir/run/metrics.jsonl" 2>/dev/null | grep -o '"step":[0-9]*' | grep -o '[0-9]*$' || echo 0)
  r0=$(rss "${pids[0]}"); r1=$(rss "${pids[1]}")
  if [ "$r0" != 0 ] && [ "$r1" != 0 ]; then
    samples+=("$step $r0 $r1")
    printf '| %s | %.1f | %.1f |\n' "$step" "$(echo "$r0/1024" | bc -l)" "$(echo "$r1/1024" | bc -l)"
  fi
  sleep 5
done
wait "$launcher"
printf '%s\n' "${samples[@]}" | awk -v warm=$((steps / 10)) '
  $1 >= warm && !first { a0 = $2; a1 = $3; s = $1; first = 1 }
  { b0 = $2; b1 = $3; e = $1 }
  END { printf "\nRSS growth from step %d to step %d: rank 0 %+.2f%%, rank 1 %+.2f%%\n", s, e, 100 * (b0 - a0) / a0, 100 * (b1 - a1) / a1 }'
