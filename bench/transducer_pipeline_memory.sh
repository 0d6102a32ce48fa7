#!/usr/bin/env bash
# Last-stage memory of a real 2-stage transducer pipeline with the sample-wise loss vs the
# batched reference joint (model.transducer_loss). Data: a small espeak-ng corpus of long lines
# (26 words of tinyshakespeare each, about 7 s spoken; longer than 8 s dropped), made here by
# `pipetrain prepare-speech`. Model: examples/speech.toml's (3 blocks of 128, joint dimension 128,
# 29 characters), padded to 800 frames and 160 labels. One microbatch of 32 utterances on the last
# stage at once (GPipe, train.microbatches 1), 2 steps, 1 thread per worker. Prints a markdown
# table: per worker, the largest step peak of the counting allocator (mem_peak_mb) and of its
# activations part (mem_activations_peak_mb) over the steps (metrics.jsonl), and the losses.
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

echo "| loss | stage 0 peak (MB) | stage 1 peak (MB) | stage 1 activations peak (MB) | step losses | wall s |"
echo "|---|---|---|---|---|---|"
for loss in sample-wise batched; do
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
print('%.1f | %.1f | %.1f | %s' % (peak[0], peak[1], act, losses))")
  printf '| %s | %s | %.0f |\n' "$loss" "$row" "$(echo "$end - $start" | bc)"
done
