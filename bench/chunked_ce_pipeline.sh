#!/usr/bin/env bash
# Last-stage memory of a real 2-stage pipeline with a large vocabulary, with the full logits
# (model.loss_chunk_tokens = 0) and with chunked cross-entropy. Byte data with vocab 50257 (the
# GPT-2 size: ids above 255 never occur but are in every softmax), d_model 128, 2 blocks,
# batch 8 x 128 tokens in 4 microbatches (256 tokens each), a few steps. Prints a markdown
# table: per worker, the largest step peak of the counting allocator (mem_peak_mb) and of its
# activations part (mem_activations_peak_mb) over the steps (metrics.jsonl), and the losses.
# Usage: bench/chunked_ce_pipeline.sh [path/to/pipetrain]   (STEPS=3, VOCAB=50257, CHUNK=64)
set -euo pipefail
cd "$(dirname "$0")/.."
PIPETRAIN="${1:-${PIPETRAIN:-build/pipetrain}}"
STEPS="${STEPS:-3}"
VOCAB="${VOCAB:-50257}"
CHUNK="${CHUNK:-64}"
[[ -x "$PIPETRAIN" ]] || { echo "no pipetrain binary at $PIPETRAIN (build it first)" >&2; exit 1; }
DIR="$(mktemp -d)"
trap 'rm -rf "$DIR"' EXIT
COMMON="--quiet --stages 2 --train.steps $STEPS --model.vocab_size $VOCAB --model.d_model 128
  --model.layers 2 --model.seq_len 128 --train.batch_size 8 --train.microbatches 4
  --train.threads 1 --eval.every 0 --eval.batches 1 --sample.tokens 0 --log.every 1"

echo "| schedule | loss_chunk_tokens | stage 0 peak (MB) | stage 1 peak (MB) | stage 1 activations peak (MB) | step losses | wall s |"
echo "|---|---|---|---|---|---|---|"
for schedule in 1f1b gpipe; do
  for chunk in 0 "$CHUNK"; do
    start=$(date +%s.%N)
    # shellcheck disable=SC2086
    "$PIPETRAIN" train $COMMON --schedule "$schedule" --model.loss_chunk_tokens "$chunk" \
      --run-dir "$DIR/run" --overwrite >/dev/null 2>&1
    end=$(date +%s.%N)
    row=$(python3 -c "
import json
records = [json.loads(line) for line in open('$DIR/run/metrics.jsonl')]
peak = [max(r['mem_peak_mb'][k] for r in records) for k in (0, 1)]
act = max(r['mem_activations_peak_mb'][1] for r in records)
losses = ' '.join('%.5f' % r['loss'] for r in records)
print('%.1f | %.1f | %.1f | %s' % (peak[0], peak[1], act, losses))")
    printf '| %s | %s | %s | %.0f |\n' "$schedule" "$chunk" "$row" "$(echo "$end - $start" | bc)"
  done
done
