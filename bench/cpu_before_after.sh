#!/usr/bin/env bash
# The same workloads on two builds of pipetrain, side by side on this machine, round-robin (the
# order of the two builds alternates each round), medians of ROUNDS: the default job (2 stages),
# one process with 2 threads, GPT-2 small in one process, and the sample-wise transducer loss.
# Made for the port to the torch 2.11 wheel (docs/benchmarks.md, "CPU before and after"): A is
# a build of the commit before it (Debian's libtorch 1.13 + OpenBLAS), B one of the port.
# Also (row 4) GPT-2 small's shape in bfloat16 mixed precision at context 256, which the fused
# softmax cross-entropy changed (docs/benchmarks.md, "The LM head's loss"). Rows 5 and 6: the
# default job under ZB-H2 and ZB-V, whose first stage now runs whole backwards
# (docs/benchmarks.md, "The first stage's whole backward under zero-bubble").
# Usage: bench/cpu_before_after.sh A_BUILD_DIR B_BUILD_DIR   (each holds pipetrain and
#        bench/transducer_memory; ROUNDS=3 STEPS=100 GPT2_STEPS=3 by default; LABEL_A, LABEL_B;
#        ENV_A, ENV_B: variables for that build's runs, e.g. ENV_A=OPENBLAS_CORETYPE=SkylakeX;
#        ONLY="0 4": the rows to run, by number, all by default)
set -euo pipefail
cd "$(dirname "$0")/.."
A="${1:?usage: $0 A_BUILD_DIR B_BUILD_DIR}"
B="${2:?usage: $0 A_BUILD_DIR B_BUILD_DIR}"
ROUNDS="${ROUNDS:-3}" STEPS="${STEPS:-100}" GPT2_STEPS="${GPT2_STEPS:-3}"
LABEL_A="${LABEL_A:-A}" LABEL_B="${LABEL_B:-B}" ENV_A="${ENV_A:-}" ENV_B="${ENV_B:-}"
for build in "$A" "$B"; do
  [[ -x "$build/pipetrain" && -x "$build/bench/transducer_memory" ]] ||
    { echo "no pipetrain or bench/transducer_memory in $build" >&2; exit 1; }
done
DIR="$(mktemp -d)"
trap 'rm -rf "$DIR"' EXIT
# shellcheck source=bench/lib.sh
source bench/lib.sh
COMMON="--quiet --eval.every 0 --eval.batches 1 --sample.tokens 0 --checkpoint.every 0"

# label | how it runs | what it reports
ROWS=(
  "default job, 2 stages (1F1B, m=8, 1 thread/worker)|train --stages 2 --train.steps $STEPS"
  "default model, 1 process, 2 threads|train --stages 1 --train.threads 2 --train.steps $STEPS"
  "GPT-2 small, 1 process, 2 threads (batch 2 x 1024)|train --stages 1 --train.threads 2 --model.preset gpt2-small --train.batch_size 2 --train.microbatches 1 --train.steps $GPT2_STEPS --train.warmup_steps 0"
  "transducer loss + gradients, B=8 T=1000 U=100 V=256 (1 thread)|transducer"
  "GPT-2 small shape, bfloat16, context 256, 1 process, 2 threads (batch 8 x 256)|train --stages 1 --train.threads 2 --model.preset gpt2-small --model.dtype bfloat16 --model.seq_len 256 --train.batch_size 8 --train.microbatches 2 --train.steps $GPT2_STEPS --train.warmup_steps 0"
  "default job, 2 stages, ZB-H2 (m=8, 1 thread/worker)|train --stages 2 --schedule zb-h2 --train.steps $STEPS"
  "default job, 2 workers, ZB-V (2 chunks each, m=8, 1 thread/worker)|train --stages 2 --pipeline.chunks 2 --schedule zb-v --train.steps $STEPS"
)
SELECTED=(${ONLY:-${!ROWS[@]}})

# Runs row $1 on build $2 with variables $3; prints "rate peak_MB" (tokens/s or s for the
# loss; peak RSS).
run_row() {
  local flags="${ROWS[$1]#*|}" build="$2" out="$DIR/out"
  local -a vars
  read -r -a vars <<<"$3"
  if [[ "$flags" == transducer ]]; then
    env "${vars[@]}" "$build/bench/transducer_memory" --headline --batch 8 >"$out" 2>&1
    local seconds mb
    seconds=$(sed -n 's/^time \([0-9.]*\) s.*/\1/p' "$out")
    mb=$(sed -n 's/^peak resident memory \([0-9.]*\) GB.*/\1/p' "$out")
    echo "$seconds $(python3 -c "print(round($mb * 1000))")"
    return
  fi
  # shellcheck disable=SC2086
  env "${vars[@]}" /usr/bin/time -f '%M' -o "$DIR/rss" "$build/pipetrain" $flags $COMMON --run-dir "$DIR/run" \
      --overwrite >"$out" 2>&1 || { cat "$out" >&2; exit 1; }
  echo "$(tokens_of "$DIR/run") $(( $(tail -1 "$DIR/rss") / 1024 ))"
}

declare -A RATE PEAK
for ((round = 0; round < ROUNDS; ++round)); do
  for i in "${SELECTED[@]}"; do
    order=(A B); ((round % 2)) && order=(B A)
    for which in "${order[@]}"; do
      build=$A vars=$ENV_A; [[ $which == B ]] && build=$B vars=$ENV_B
      read -r rate peak < <(run_row "$i" "$build" "$vars")
      RATE[$i$which]+="$rate " PEAK[$i$which]+="$peak "
      echo "round $((round + 1))/$ROUNDS: ${ROWS[$i]%%|*}, $which: $rate, peak $peak MB" >&2
    done
  done
done

echo "| workload | $LABEL_A | $LABEL_B | B / A | peak RSS MB, A | peak RSS MB, B |"
echo "|---|---|---|---|---|---|"
for i in "${SELECTED[@]}"; do
  a=$(echo "${RATE[${i}A]}" | median) b=$(echo "${RATE[${i}B]}" | median)
  pa=$(echo "${PEAK[${i}A]}" | median) pb=$(echo "${PEAK[${i}B]}" | median)
  unit="tokens/s"; speed="$b / $a"
  [[ "${ROWS[$i]#*|}" == transducer ]] && { unit="s"; speed="$a / $b"; }  # seconds: lower is faster
  printf '| %s (%s) | %s | %s | %.2fx | %s | %s |\n' "${ROWS[$i]%%|*}" "$unit" "$a" "$b" \
    "$(python3 -c "print($speed)")" "$pa" "$pb"
done
echo "(B / A above 1: B is faster. Peak RSS: the largest process, /usr/bin/time's %M; the" \
     "transducer row the bench's own ru_maxrss. Medians of $ROUNDS rounds.)"
