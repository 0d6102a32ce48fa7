#!/usr/bin/env bash
# Last-stage memory of a real 2-stage transducer pipeline with the sample-wise loss vs the
# batched reference joint (model.transducer_loss). Data: a small espeak-ng corpus of long lines
# (26 words of tinyshakespeare each, about 7 s spoken; longer than 8 s dropped), made here by
# `pipetrain prepare-speech`. Model: examples/speech.toml's (3 blocks of 128, joint dimension 128,
# 29 characters), padded to 800 frames and 160 labels. One microbatch of 32 utterances on the last
# stage at once (GPipe, train.microbatches 1), 2 steps, 1 thread per worker. Prints a markdown
# table: per worker, the largest step peak of the counting allocator (mem_peak_mb) and of its
# activations part (mem_activations_peak_mb) over the steps (metrics.jsonl), and the losses;
# beside each peak the planner's prediction for the same run (`pipetrain plan --config`, the
# 2-stage GPipe plan of one microbatch: predicted_worker_memory_bytes, on this-machine with
# worker_overhead_gb 0, since the counting allocator sees tensors only).
# Usage: bench/transducer_pipeline_memory.sh [path/to/pipetrain]   (ROWS=32, STEPS=2)
set -euo pipefail
cd "$(dirname "$0")/.."
PIPETRAIN="$(realpath "${1:-${PIPETRAIN:-build/pipetrain}}")"
ROWS="${ROWS:-32}"
STEPS="${STEPS:-2}"
[[ -x "$PIPETRAIN" ]] || { echo "no pipetrain binary at $PIPETRAIN (build it first)" >&2; exit 1; }
DIR="$(mktemp -d)"
trap 'rm -rf "$DIR"' EXIT
python3 - "$DIR/long_lines.txt" <<'PY'
import re, sys
words = []
for line in open('data/tinyshakespeare.txt'):
    if not line.strip().endswith(':'):
        words += re.sub(r"[^a-z' ]", " ", line.lower()).split()
with open(sys.argv[1], 'w') as out:
    for i in range(0, 26 * 200, 26):
        out.write(' '.join(words[i:i + 26]) + '\n')
PY
"$PIPETRAIN" prepare-speech --text "$DIR/long_lines.txt" --out "$DIR/long.bin" --train-lines 48 \
  --validation-lines 4 --test-lines 4 --renditions 1 --min-words 26 --max-words 26 \
  --max-frames 800 --threads 1 >/dev/null 2>&1
COMMON="--quiet --stages 2 --schedule gpipe --model.kind transducer --data.format speech
  --data.path $DIR/long.bin --model.layers 3 --model.d_model 128 --model.heads 4
  --model.seq_len 800 --model.max_labels 160 --train.steps $STEPS --train.batch_size $ROWS
  --train.microbatches 1 --train.threads 1 --eval.every 0 --eval.batches 1 --sample.tokens 0
  --log.every 1"

sed -e 's/^worker_overhead_gb = .*/worker_overhead_gb = 0/' clusters/this-machine.toml >"$DIR/cluster.toml"
# The planner's per-worker bytes (MiB) for the run below, "stage 0 | stage 1 | layers per stage".
predicted() {
  "$PIPETRAIN" plan --config examples/speech.toml --cluster "$DIR/cluster.toml" --model.layers 3 \
    --model.d_model 128 --model.heads 4 --model.seq_len 800 --model.max_labels 160 \
    --train.batch_size "$ROWS" --train.microbatches 1 --global-batch "$ROWS" --schedules gpipe \
    --model.transducer_loss "$1" --top 1 --out-ranked "$DIR/plans-$1" >/dev/null
  python3 - "$DIR/plans-$1" "$ROWS" <<'PY'
import glob, json, sys
for path in sorted(glob.glob(sys.argv[1] + '/*.json')):
    plan = json.load(open(path))
    if plan['stages'] == 2 and plan['microbatch_size'] == int(sys.argv[2]) and not plan['recompute']:
        memory = [bytes / 2**20 for bytes in plan['predicted_worker_memory_bytes']]
        print('%.1f | %.1f | %s' % (memory[0], memory[1], ','.join(map(str, plan['partition']))))
        break
PY
}

echo "| loss | stage 0 peak (MB) | predicted | stage 1 peak (MB) | predicted | stage 1 activations peak (MB) | planned layers per stage | step losses | wall s |"
echo "|---|---|---|---|---|---|---|---|---|"
for loss in sample-wise batched; do
  IFS='|' read -r predicted0 predicted1 partition <<<"$(predicted "$loss")"
  predicted0=$(echo $predicted0) predicted1=$(echo $predicted1) partition=$(echo $partition)  # trimmed
  start=$(date +%s.%N)
  # shellcheck disable=SC2086
  "$PIPETRAIN" train $COMMON --model.transducer_loss "$loss" --run-dir "$DIR/run" --overwrite >/dev/null 2>&1
  end=$(date +%s.%N)
  row=$(python3 -c "
import json
records = [json.loads(line) for line in open('$DIR/run/metrics.jsonl')]
peak = [max(r['mem_peak_mb'][k] for r in records) for k in (0, 1)]
act = max(r['mem_activations_peak_mb'][1] for r in records)
losses = ' '.join('%.4f' % r['loss'] for r in records)
print('%.1f | $predicted0 | %.1f | $predicted1 | %.1f | $partition | %s' % (peak[0], peak[1], act, losses))")
  printf '| %s | %s | %.0f |\n' "$loss" "$row" "$(echo "$end - $start" | bc)"
done
