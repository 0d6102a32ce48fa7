#!/usr/bin/env bash
# model.dtype float32 against bfloat16 mixed precision on this CPU (AVX512-BF16): the default
# job's GPT (2 stages) and one process with 2 threads, and GPT-2 small's shape at context 256 on
# one process; 30 steps, round-robin, 3 rounds, medians of tokens/s, the pipeline workers' counted
# peak (docs/benchmarks.md, "Mixed precision on the CPU").
#   bench/precision_cpu.sh
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
source bench/lib.sh
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
COMMON="--quiet --eval.every 0 --eval.batches 1 --sample.tokens 0 --checkpoint.every 0"
ROWS=("--stages 2 --train.steps 30" "--stages 1 --train.threads 2 --train.steps 30"
      "--stages 1 --train.threads 2 --model.preset gpt2-small --model.seq_len 256 --train.batch_size 8 --train.microbatches 2 --train.steps 6")
declare -A R C
for round in 1 2 3; do
  for row in "${ROWS[@]}"; do
    for dtype in float32 bfloat16; do
      build/pipetrain train $COMMON $row --model.dtype $dtype --run-dir $D/run --overwrite >/dev/null 2>&1
      t=$(tokens_of $D/run)
      peak=$(python3 -c "import json,re;s=json.load(open('$D/run/summary.json'));print(max([float(re.search(r'peak ([0-9.]+) MB',w).group(1)) for w in s.get('memory',[])] or [0]))")
      R["$row|$dtype"]+="$t "; C["$row|$dtype"]+="$peak "
      echo "round $round | $row | $dtype: $t tok/s, counted worker peak $peak MB" >&2
    done
  done
done
for k in "${!R[@]}"; do echo "$k: tokens/s $(echo ${R[$k]} | median) counted worker peak MB $(echo ${C[$k]} | median)"; done | sort
