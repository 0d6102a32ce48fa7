#!/usr/bin/env bash
# Attention through at::scaled_dot_product_attention against materialised scores, the same
# libtorch 2.11 build otherwise: the default job (2 stages) and one process with 2 threads,
# 30 steps, round-robin, 3 rounds; tokens/s, peak RSS, and the pipeline workers' counted peak.
# The materialised binary: build with src/model/gpt.cpp of commit 1129ed4 and copy pipetrain
# to MATERIALISED (docs/benchmarks.md, "CPU before and after").
# Usage: MATERIALISED=/tmp/materialised/pipetrain bench/attention_ab.sh
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
source bench/lib.sh
MATERIALISED="${MATERIALISED:?the pipetrain binary with materialised attention}"
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
COMMON="--quiet --eval.every 0 --eval.batches 1 --sample.tokens 0 --checkpoint.every 0 --train.steps 30"
declare -A R P C
for round in 1 2 3; do
  for row in "--stages 2" "--stages 1 --train.threads 2"; do
    for which in sdpa materialised; do
      bin=build/pipetrain; [[ $which == materialised ]] && bin=$MATERIALISED
      /usr/bin/time -f '%M' -o $D/rss $bin train $row $COMMON --run-dir $D/run --overwrite >/dev/null 2>&1
      t=$(tokens_of $D/run); m=$(( $(tail -1 $D/rss) / 1024 ))
      peak=$(python3 -c "import json,re;s=json.load(open('$D/run/summary.json'));print(max([float(re.search(r'peak ([0-9.]+) MB',w).group(1)) for w in s.get('memory',[])] or [0]))")
      R["$row|$which"]+="$t "; P["$row|$which"]+="$m "; C["$row|$which"]+="$peak "
      echo "round $round $row $which $t tok/s rss $m MB counted peak $peak MB" >&2
    done
  done
done
for k in "${!R[@]}"; do echo "$k: tokens/s $(echo ${R[$k]} | median) rss $(echo ${P[$k]} | median) counted worker peak $(echo ${C[$k]} | median)"; done | sort
