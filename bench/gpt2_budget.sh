#!/usr/bin/env bash
# GPT-2 (model.preset) under a per-worker memory budget (issue 19): tokenizes tinyshakespeare
# with an 8192-piece BPE tokenizer, plans the preset with `plan --memory-per-worker`, runs the
# plan for STEPS steps, and prints each worker's predicted and measured peaks (the counting
# allocator's mem_peak_mb and the resident mem_rss_peak_mb, largest over the steps) and the
# predicted and measured step time (median of steps 3..STEPS-1). With SINGLE=N it also trains
# the same model and batch in one process (2 threads) for N steps: its peaks, and the model FLOP
# utilisation of both (6 FLOPs per matmul parameter per token plus attention's 12 L T d, over 2
# cores x GEMM_PEAK, the single-core FP32 GEMM peak bench/train_throughput measures).
# Usage: bench/gpt2_budget.sh RUNS_DIR   (PRESET=gpt2-small BUDGET=2GiB STEPS=10 BATCH=4 SINGLE=0
#        GEMM_PEAK=108.1e9 EXTRA="--model.seq_len 256" PLAN_ARGS="--schedules gpipe"
#        PIPETRAIN=build/pipetrain)
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS="${1:?runs folder}"
PIPETRAIN="${PIPETRAIN:-build/pipetrain}"
PRESET="${PRESET:-gpt2-small}" BUDGET="${BUDGET:-2GiB}" STEPS="${STEPS:-10}" BATCH="${BATCH:-4}"
mkdir -p "$RUNS"
[[ -f "$RUNS/tok8k.model" ]] ||
  "$PIPETRAIN" tokenizer train --vocab 8192 data/tinyshakespeare.txt --out "$RUNS/tok8k.model" >/dev/null
[[ -f "$RUNS/shakespeare8k/val.bin" ]] ||
  "$PIPETRAIN" tokenize --tokenizer "$RUNS/tok8k.model" data/tinyshakespeare.txt --out "$RUNS/shakespeare8k" >/dev/null
# shellcheck disable=SC2206
ARGS=(examples/default.toml --model.preset "$PRESET" ${EXTRA:-} --data.format tokens
      --data.path "$RUNS/shakespeare8k" --data.tokenizer "$RUNS/tok8k.model"
      --train.batch_size "$BATCH" --train.microbatches "$BATCH" --train.steps "$STEPS"
      --eval.every 0 --eval.batches 1 --sample.tokens 0 --log.every 1 --checkpoint.every 0)
NAME="$PRESET-$BUDGET"
# shellcheck disable=SC2086
"$PIPETRAIN" plan --config "${ARGS[@]}" --memory-per-worker "$BUDGET" ${PLAN_ARGS:-} --out "$RUNS/$NAME.plan.json" \
  > "$RUNS/$NAME.plan.txt"
tail -1 "$RUNS/$NAME.plan.txt"
"$PIPETRAIN" train "${ARGS[@]}" --plan "$RUNS/$NAME.plan.json" --run-dir "$RUNS/$NAME" --overwrite \
  > "$RUNS/$NAME.log" 2>&1
if [[ "${SINGLE:-0}" -gt 0 ]]; then
  # Its resident peak from the kernel (the single-process trainer keeps no allocator count).
  python3 -c 'import resource, subprocess, sys
subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024)' \
    "$PIPETRAIN" train "${ARGS[@]}" --pipeline.stages 1 --train.steps "$SINGLE" --train.threads 2 \
    --pipeline.memory_budget_mb 0 --run-dir "$RUNS/$NAME-one-process" --overwrite \
    > "$RUNS/$NAME-one-process.rss"
fi
python3 - "$RUNS/$NAME.plan.json" "$RUNS/$NAME/metrics.jsonl" "$RUNS/$NAME-one-process/metrics.jsonl" \
  "$RUNS/$NAME/config.toml" "${GEMM_PEAK:-108.1e9}" <<'PY'
import json, os, statistics, sys, tomllib
plan = json.load(open(sys.argv[1]))
lines = [json.loads(l) for l in open(sys.argv[2]) if '"mem_peak_mb"' in l]
mib = 2**20
overhead = plan["predicted_worker_overhead_bytes"] / mib  # the cluster's worker_overhead_gb
print(f"| worker | predicted tensors (MiB) | measured allocator peak (MiB) | error | measured resident peak (MiB) |")
print("|---|---|---|---|---|")
for w, predicted in enumerate(plan["predicted_worker_memory_bytes"]):
    tensors = predicted / mib - overhead
    peak = max(l["mem_peak_mb"][w] for l in lines)
    rss = max(l["mem_rss_peak_mb"][w] for l in lines)
    print(f"| {w} | {tensors:.0f} | {peak:.0f} | {100 * (tensors - peak) / peak:+.0f}% | {rss:.0f} |")
steps = [l["step_seconds"] for l in lines if 3 <= l["step"] < len(lines)]
print(f"\nstep time: predicted {plan['predicted_iteration_s']:.1f} s, measured median "
      f"{statistics.median(steps):.1f} s (steps 3..{len(lines) - 1}); "
      f"{json.loads(open(sys.argv[2]).readlines()[-1]).get('tokens_per_s', 0):.0f} tokens/s at the end")
model = tomllib.load(open(sys.argv[4], "rb"))["model"]
L, d, T, V = model["layers"], model["d_model"], model["seq_len"], model["vocab_size"]
flops_per_token = 6 * (12 * L * d * d + V * d) + 12 * L * T * d
peak = 2 * float(sys.argv[5])
def tokens_per_s(path):
    timed = [json.loads(l) for l in open(path) if '"step_seconds"' in l][2:]  # after 2 warm-up steps
    return statistics.median(l["tokens_per_s"] for l in timed) if timed else float("nan")
rows = [("pipeline (the plan)", sys.argv[2])]
if os.path.exists(sys.argv[3]):
    rss = float(open(sys.argv[3].replace("/metrics.jsonl", ".rss")).read())
    print(f"\none process (same model and batch): resident peak {rss:.0f} MiB")
    rows.append(("one process, 2 threads", sys.argv[3]))
print(f"\n| run | tokens/s (median after 2 steps) | model GFLOP/s | MFU vs 2 x {float(sys.argv[5]) / 1e9:.1f} GFLOP/s |")
print("|---|---|---|---|")
for name, path in rows:
    rate = tokens_per_s(path)
    print(f"| {name} | {rate:.1f} | {rate * flops_per_token / 1e9:.1f} | {100 * rate * flops_per_token / peak:.0f}% |")
PY
