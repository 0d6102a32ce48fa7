#!/usr/bin/env bash
# The planner's memory model against the GPU's allocator, eager and with CUDA graphs (docs/
# planning.md): GPT-2 small in bfloat16 on 2 workers sharing the GPU, 1F1B, BATCH sequences in 2
# microbatches. Each way is planned (`plan --config`; the d = 2 plan as configured, without
# recomputation) and trained; per worker the table gives the plan's predicted bytes beside the
# run's largest step peak (the CUDA allocator's, the graphs' pools included) and the pools alone.
# Usage: bench/graph_memory.sh OUT_DIR   (BATCH=4 STEPS=8; GPU_CHECK_DEVICE=cpu GPU_CHECK_SMOKE=1
# tries it here: a tiny GPT, graphs emulated, which hold no pools and are planned as eager).
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/gpu_env.sh  # BIN, PY, DEVICE, SHAPE
OUT=${1:?output folder}
BATCH=${BATCH:-4} STEPS=${STEPS:-8}
mkdir -p "$OUT"
GRAPHS=$([ "$DEVICE" = cuda ] && echo 1 || echo 2)
"$BIN" config >"$OUT/defaults.toml"
# Two workers on one node, no resident overhead: the prediction is the tensors' bytes alone.
printf 'name = "two-workers-one-gpu"\nnodes = 1\ndevices_per_node = 2\ndevice_memory_gb = 1000\ndevice_tflops = 989\n' \
  >"$OUT/two-workers.toml"
RUN_ARGS=("$OUT/defaults.toml" $SHAPE --model.dtype bfloat16 --train.device "$DEVICE")
for graphs in 0 "$GRAPHS"; do
  name=graphs$graphs
  rm -rf "${OUT:?}/$name" "$OUT/$name.ranked"
  "$BIN" plan --config "${RUN_ARGS[@]}" --train.cuda_graphs "$graphs" --cluster "$OUT/two-workers.toml" \
    --global-batch "$BATCH" --schedules 1f1b --out-ranked "$OUT/$name.ranked" >"$OUT/$name.plan.txt"
  "$PY" - "$OUT/$name.ranked" "$OUT/$name.plan.json" <<'PY'
import glob, json, shutil, sys
for path in sorted(glob.glob(sys.argv[1] + "/rank-*.json")):
    plan = json.load(open(path))
    if (plan["stages"], plan["microbatches"], plan["recompute"]) == (2, 2, False) and \
            "model.loss_chunk_tokens" not in plan.get("config_fields", {}):
        shutil.copy(path, sys.argv[2])
        break
else:
    sys.exit("no 2-worker plan of 2 microbatches without recomputation among " + sys.argv[1])
PY
  "$BIN" train "${RUN_ARGS[@]}" --train.cuda_graphs "$graphs" --plan "$OUT/$name.plan.json" \
    --train.steps "$STEPS" --log.every 1 --eval.every 0 --eval.batches 1 --sample.tokens 0 \
    --checkpoint.every 0 --quiet --run-dir "$OUT/$name" >"$OUT/$name.log" 2>&1
done
"$PY" - "$OUT" "$GRAPHS" <<'PY'
import json, sys
out, graphs = sys.argv[1], sys.argv[2]
mib = 2**20
print("| run | worker | partition | predicted MiB | measured peak MiB | of it graphs' pools MiB | error |")
print("|---|---|---|---|---|---|---|")
for name in ("graphs0", "graphs" + graphs):
    plan = json.load(open(f"{out}/{name}.plan.json"))
    steps = [json.loads(l) for l in open(f"{out}/{name}/metrics.jsonl") if '"mem_peak_mb"' in l]
    for w, predicted in enumerate(plan["predicted_worker_memory_bytes"]):
        peak = max(s["mem_peak_mb"][w] for s in steps)
        pools = max(s.get("mem_graph_pools_mb", [0] * (w + 1))[w] for s in steps)
        label = "eager" if name == "graphs0" else f"train.cuda_graphs = {graphs}"
        print(f"| {label} | {w} | {plan['partition']} | {predicted / mib:.1f} | {peak:.1f} | "
              f"{pools:.1f} | {100 * (predicted / mib - peak) / peak:+.1f}% |")
PY
