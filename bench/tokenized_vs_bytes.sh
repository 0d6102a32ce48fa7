#!/usr/bin/env bash
# The tokenized recipe (examples/tokenized.toml) against the byte-level default
# (examples/default.toml) for the same wall-clock time: both run at once, each one process on
# one core, for as many steps as a probe says fit in MINUTES; the validation loss of each
# final checkpoint (`pipetrain evaluate`, EVAL_BATCHES batches) is converted to bits per byte
# (nats per token / ln 2 x tokens / bytes of the validation text).
# Usage: bench/tokenized_vs_bytes.sh RUNS_DIR   (MINUTES=20 VOCAB=2048 PIPETRAIN=build/pipetrain)
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS="${1:?runs folder}"
PIPETRAIN="${PIPETRAIN:-build/pipetrain}"
MINUTES="${MINUTES:-20}" VOCAB="${VOCAB:-2048}" EVAL_BATCHES="${EVAL_BATCHES:-32}"
mkdir -p "$RUNS"
TOK="$RUNS/bpe$VOCAB"
[[ -f "$TOK.model" ]] || "$PIPETRAIN" tokenizer train --vocab "$VOCAB" data/tinyshakespeare.txt --out "$TOK.model" >/dev/null
[[ -f "$TOK/val.bin" ]] || "$PIPETRAIN" tokenize --tokenizer "$TOK.model" data/tinyshakespeare.txt --out "$TOK" >/dev/null
ONE=(--pipeline.stages 1 --train.threads 1 --sample.tokens 0 --eval.every 0 --quiet)
TOKENS=(examples/tokenized.toml --model.vocab_size "$VOCAB" --data.path "$TOK" --data.tokenizer "$TOK.model")
BYTES=(examples/default.toml)
seconds_per_step() {  # RUN ARGS...: the median step time of a 12-step probe (both probes at once)
  python3 -c "import json,statistics,sys
L=[json.loads(l) for l in open(sys.argv[1]) if 'step_seconds' in l]
print(statistics.median(l['step_seconds'] for l in L[2:]))" "$1/metrics.jsonl"
}
"$PIPETRAIN" train "${TOKENS[@]}" "${ONE[@]}" --train.steps 12 --log.every 1 --run-dir "$RUNS/probe-tokens" --overwrite >/dev/null &
"$PIPETRAIN" train "${BYTES[@]}" "${ONE[@]}" --train.steps 12 --log.every 1 --run-dir "$RUNS/probe-bytes" --overwrite >/dev/null &
wait
steps_tokens=$(python3 -c "print(int($MINUTES * 60 / $(seconds_per_step "$RUNS/probe-tokens")))")
steps_bytes=$(python3 -c "print(int($MINUTES * 60 / $(seconds_per_step "$RUNS/probe-bytes")))")
echo "steps in $MINUTES min: tokenized $steps_tokens, bytes $steps_bytes" >&2
start=$SECONDS
( "$PIPETRAIN" train "${TOKENS[@]}" "${ONE[@]}" --train.steps "$steps_tokens" --run-dir "$RUNS/tokens" --overwrite >/dev/null;
  echo "tokenized: $((SECONDS - start)) s" >&2 ) &
( "$PIPETRAIN" train "${BYTES[@]}" "${ONE[@]}" --train.steps "$steps_bytes" --run-dir "$RUNS/bytes" --overwrite >/dev/null;
  echo "bytes: $((SECONDS - start)) s" >&2 ) &
wait
evaluate() { "$PIPETRAIN" evaluate --run-dir "$1" --eval.batches "$EVAL_BATCHES" --json | python3 -c "import json,sys; print(json.load(sys.stdin)['val_loss'])"; }
python3 - "$(evaluate "$RUNS/tokens")" "$(evaluate "$RUNS/bytes")" "$TOK/tokens.json" "$steps_tokens" "$steps_bytes" <<'PY'
import json, math, sys
tokens_loss, bytes_loss = float(sys.argv[1]), float(sys.argv[2])
info = json.load(open(sys.argv[3]))
val_bytes = info["source"]["bytes"] * info["val_fraction"]  # the text's tail, as tokenize splits it
tokens_per_byte = info["val"]["tokens"] / val_bytes
print("| run | steps | validation loss | unit | bits per byte |")
print("|---|---|---|---|---|")
print(f"| tokenized ({info['tokenizer']['vocab_size']} BPE pieces) | {sys.argv[4]} | {tokens_loss:.4f} | nats/token | {tokens_loss / math.log(2) * tokens_per_byte:.4f} |")
print(f"| byte-level default | {sys.argv[5]} | {bytes_loss:.4f} | nats/byte | {bytes_loss / math.log(2):.4f} |")
PY
