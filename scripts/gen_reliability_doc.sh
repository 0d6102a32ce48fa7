#!/usr/bin/env bash
# Runs every bad-input case below through ./build/pipetrain and writes the table of
# docs/reliability.md between its BEGIN/END markers: the case, the command, the exit code and
# the message the user gets. Usage: scripts/gen_reliability_doc.sh [BINARY]
set -uo pipefail
cd "$(dirname "$0")/.."
bin=$(realpath "${1:-build/pipetrain}")
work=$(mktemp -d /tmp/pipetrain-badinput.XXXXXX)
trap 'rm -rf "$work"' EXIT
tiny="--quiet --model.layers 1 --model.d_model 16 --model.heads 1 --model.seq_len 8 --train.batch_size 4 --train.microbatches 2 --train.steps 2 --eval.every 0 --eval.batches 1 --sample.tokens 0 --train.threads 1"

# Fixtures.
printf '[model\nlayers = 4\n' > "$work/malformed.toml"
printf '[model]\nlayers = "four"\n' > "$work/wrong_type.toml"
printf '[modle]\nlayers = 4\n' > "$work/bad_section.toml"
printf 'layers = 4\n' > "$work/no_section.toml"
printf 'short' > "$work/short.txt"
: > "$work/empty.txt"
printf '{"format": ' > "$work/bad_plan.json"
printf 'not,a,schedule\n1,2\n' > "$work/bad.csv"
mkdir -p "$work/ro" && touch "$work/file"
"$bin" plan --config examples/default.toml --out "$work/plan.json" >/dev/null 2>&1
cp examples/fashion_mnist.toml "$work/fashion_mnist.toml"
python3 - "$work" <<'PY'
import json, sys
work = sys.argv[1]
plan = json.load(open(f"{work}/plan.json"))
json.dump(dict(plan, partition=[2.5] + plan["partition"][1:]), open(f"{work}/fractional_plan.json", "w"))
json.dump(dict(plan, config_fields={"model.layer": "3"}), open(f"{work}/unknown_field_plan.json", "w"))
PY
"$bin" train $tiny --stages 1 --checkpoint.every 1 --run-dir "$work/done" >/dev/null 2>&1
"$bin" train $tiny --stages 1 --train.steps 4 --checkpoint.every 1 --run-dir "$work/base" >/dev/null 2>&1
"$bin" train $tiny --stages 2 --train.steps 4 --checkpoint.every 1 --run-dir "$work/pipe" >/dev/null 2>&1
"$bin" train $tiny --stages 2 --schedule 2bw --train.steps 4 --checkpoint.every 1 --run-dir "$work/twobw" >/dev/null 2>&1
head -c 20000 data/tinyshakespeare.txt > "$work/run_text.txt"
"$bin" train $tiny --stages 1 --train.steps 4 --checkpoint.every 1 --data.path "$work/run_text.txt" --run-dir "$work/ondata" >/dev/null 2>&1
printf 'one more line\n' >> "$work/run_text.txt"  # the run's data rewritten
cp -r "$work/pipe" "$work/otherstage"
rm "$(echo "$work/pipe/checkpoints/$(cat "$work/pipe/checkpoints/latest")")/stage1.safetensors"
for name in truncated corrupt badjson wrongmodel noconfig nockpt emptied bitflip editedstep; do cp -r "$work/base" "$work/$name"; done
latest() { echo "$work/$1/checkpoints/$(cat "$work/$1/checkpoints/latest")"; }
# Records FILE's new CRC32C in its checkpoint.json, as a consistent (if buggy) writer would, so
# that the content itself is what a resume refuses.
rechecksum() {
  python3 - "$1" <<'PY'
import json, os, sys
path = sys.argv[1]
def crc32c(data):
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 & -(crc & 1))
    return crc ^ 0xFFFFFFFF
sidecar = os.path.join(os.path.dirname(path), "checkpoint.json")
info = json.load(open(sidecar))
info["crc32c"][os.path.basename(path)] = "%08x" % crc32c(open(path, "rb").read())
info.pop("checkpoint_json_crc32c", None)  # its own checksum: as a sidecar written before it
json.dump(info, open(sidecar, "w"), indent=2)
PY
}
cp "$(latest otherstage)/stage1.optimizer.safetensors" "$(latest otherstage)/stage0.optimizer.safetensors"
rechecksum "$(latest otherstage)/stage0.optimizer.safetensors"
printf '\x02\x00\x00\x00\x00\x00\x00\x00{}' > "$(latest emptied)/optimizer.safetensors"  # no tensors
rechecksum "$(latest emptied)/optimizer.safetensors"
python3 -c 'import sys; p = sys.argv[1]; b = bytearray(open(p, "rb").read()); b[-3] ^= 0x10; open(p, "wb").write(b)' \
  "$(latest bitflip)/model.safetensors"  # one bit of the last tensor's data
cut_to_half() { truncate -s $(($(stat -c %s "$1") / 2)) "$1"; }
cut_to_half "$(latest truncated)/model.safetensors"
printf '\xff\xff\xff\xff\xff\xff\xff\x7fgarbage' > "$(latest corrupt)/model.safetensors"
printf '{"format": "pipetrain-checkpoint-2", "step": "x"}' > "$(latest badjson)/checkpoint.json"
sed -i 's/"step": 4,/"step": 3,/' "$(latest editedstep)/checkpoint.json"
rm "$(latest twobw)/stage0.version3.safetensors"
rm "$work/noconfig/config.toml"
rm -r "$work/nockpt/checkpoints"
"$bin" train $tiny --stages 1 --model.d_model 32 --train.steps 4 --checkpoint.every 1 --run-dir "$work/other" >/dev/null 2>&1
rm -r "$work/wrongmodel/checkpoints" && cp -r "$work/other/checkpoints" "$work/wrongmodel/checkpoints"
# Token files (docs/data.md): a tokenizer, its token files, damaged copies, another tokenizer.
head -c 60000 data/tinyshakespeare.txt > "$work/text.txt"
"$bin" tokenizer train --vocab 400 "$work/text.txt" --out "$work/tok.model" >/dev/null 2>&1
"$bin" tokenizer train --vocab 380 "$work/text.txt" --out "$work/other.model" >/dev/null 2>&1
"$bin" tokenize --tokenizer "$work/tok.model" "$work/text.txt" --out "$work/tokens" >/dev/null 2>&1
for name in badmagic badversion cut; do cp -r "$work/tokens" "$work/$name"; done
printf '\x01\x02\x03\x04' | dd of="$work/badmagic/train.bin" conv=notrunc status=none
printf '\x07' | dd of="$work/badversion/train.bin" bs=1 seek=4 conv=notrunc status=none
truncate -s -3 "$work/cut/val.bin"
"$bin" train $tiny --stages 2 --train.steps 4 --checkpoint.every 1 --run-dir "$work/narrow" >/dev/null 2>&1
"$bin" train $tiny --stages 2 --model.d_model 32 --run-dir "$work/wide" >/dev/null 2>&1
cp "$(latest wide)/stage0.safetensors" "$(latest narrow)/stage0.safetensors"
python3 -c 'import socket,time,sys; s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("127.0.0.1", 0)); s.listen(); print(s.getsockname()[1], flush=True); time.sleep(600)' > "$work/port" &
listener=$!
while [ ! -s "$work/port" ]; do sleep 0.2; done
port=$(cat "$work/port")

rows=()
# case NAME ; ENV ; ARGS (run in $work)
run_case() {
  local name=$1 env=$2 args=$3
  local output code
  output=$(cd "$work" && env $env timeout 120 "$bin" $args 2>&1 >/dev/null)
  code=$?
  local lines message
  lines=$(printf '%s\n' "$output" | grep -c .)
  message=$(printf '%s\n' "$output" | grep . | tail -1 | sed "s|$work|W|g; s/|/\\\\|/g")
  local shown_args=$(printf '%s' "$args" | sed "s|$tiny|TINY|; s|$work|W|g; s/|/\\\\|/g")
  local shown_env=""
  [ -n "$env" ] && shown_env="$(printf '%s' "$env" | sed "s|$work|W|g") "
  rows+=("| $((${#rows[@]} + 1)) | $name | \`${shown_env}pipetrain $shown_args\` | $code | $lines | $message |")
  [ "$code" -ne 0 ] || echo "gen_reliability_doc: case '$name' exited 0" >&2
}

run_case "malformed TOML" "" "train $work/malformed.toml"
run_case "wrong type in TOML" "" "train $work/wrong_type.toml"
run_case "unknown section" "" "train $work/bad_section.toml"
run_case "field outside a section" "" "train $work/no_section.toml"
run_case "config file missing" "" "train $work/nope.toml"
run_case "unknown field (typo)" "" "train --model.layerz 4"
run_case "wrong type on the command line" "" "train --model.layers four"
run_case "negative size" "" "train --model.d_model -8"
run_case "heads do not divide d_model" "" "train --model.heads 3"
run_case "vocabulary too small for bytes" "" "train --model.vocab_size 100"
run_case "unknown optimizer" "" "train --train.optimizer lion"
run_case "beta out of range" "" "train --train.beta2 1.5"
run_case "min_lr above lr" "" "train --train.min_lr 1"
run_case "validation fraction out of range" "" "train --data.val_fraction 1.5"
run_case "a held-out split text files lack" "" "evaluate --run-dir $work/done --split test"
run_case "microbatches do not divide the batch" "" "train --train.batch_size 10 --microbatches 4"
run_case "unknown schedule" "" "train --schedule zigzag"
run_case "partition counts do not match stages" "" "train $tiny --stages 2 --partition 1,1,1"
run_case "partition does not cover the layers" "" "train $tiny --stages 2 --partition 1,1"
run_case "empty stage in partition" "" "train $tiny --stages 2 --partition 0,3"
run_case "more stages than layers" "" "train $tiny --stages 5"
run_case "chunks without interleaved" "" "train $tiny --model.layers 3 --stages 2 --chunks 2 --schedule 1f1b"
run_case "batch not divisible by replicas x microbatches" "" "train $tiny --stages 2 --dp-width 3"
run_case "2BW with m < d (asynchronous policy)" "" "train $tiny --stages 4 --model.layers 2 --schedule 2bw --microbatches 2"
run_case "recompute without a pipeline" "" "train $tiny --stages 1 --pipeline.recompute all"
run_case "timeout of zero" "" "train $tiny --pipeline.timeout_s 0"
run_case "data file missing" "" "train $tiny --data.path nope.txt"
run_case "data file shorter than one sequence" "" "train $tiny --data.path $work/short.txt"
run_case "data file empty" "" "train $tiny --data.path $work/empty.txt"
run_case "run folder not creatable (under a file)" "" "train $tiny --run-dir $work/file/run"
run_case "run folder not writable (/proc)" "" "train $tiny --run-dir /proc/pipetrain-run"
run_case "run folder already holds a run" "" "train $tiny --stages 1 --run-dir $work/done"
run_case "resume: folder missing" "" "train --resume $work/nothing"
run_case "resume: folder without config.toml" "" "train --resume $work/noconfig"
run_case "resume: run without checkpoints" "" "train --resume $work/nockpt --train.steps 6"
run_case "resume: the head untied where the run's was tied" "" "train --resume $work/base --train.steps 6 --model.head untied"
run_case "resume: truncated checkpoint" "" "train --resume $work/truncated --train.steps 6"
run_case "resume: corrupt safetensors header" "" "train --resume $work/corrupt --train.steps 6"
run_case "resume: malformed checkpoint.json" "" "train --resume $work/badjson --train.steps 6"
run_case "resume: checkpoint.json's step edited by hand" "" "train --resume $work/editedstep --train.steps 6"
run_case "resume: wrong-model checkpoint" "" "train --resume $work/wrongmodel --train.steps 6"
run_case "resume: different model shape requested" "" "train --resume $work/base --train.steps 6 --model.layers 3"
run_case "resume: different optimizer" "" "train --resume $work/base --train.steps 6 --train.optimizer sgd"
run_case "resume: run already finished" "" "train --resume $work/done"
run_case "resume: another seed (other batches)" "" "train --resume $work/base --train.steps 6 --train.seed 7"
run_case "resume: another validation fraction (trains on former validation data)" "" "train --resume $work/base --train.steps 6 --data.val_fraction 0.2"
run_case "resume: the data file rewritten since" "" "train --resume $work/ondata --train.steps 6"
run_case "resume: stage file of a pipeline checkpoint missing" "" "train --resume $work/pipe --train.steps 6"
run_case "resume with a config file" "" "train $work/malformed.toml --resume $work/base"
run_case "plan file missing" "" "train --plan $work/nope.json"
run_case "plan file malformed" "" "train --plan $work/bad_plan.json"
run_case "schedule CSV malformed" "" "simulate --load $work/bad.csv"
run_case "torchrun: RANK outside the world" "RANK=5 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=1" "train $tiny --stages 2 --run-dir $work/r5"
run_case "torchrun: WORLD_SIZE does not match stages" "RANK=0 WORLD_SIZE=3 MASTER_ADDR=127.0.0.1 MASTER_PORT=1" "train $tiny --stages 2 --run-dir $work/w3"
run_case "torchrun: RANK not a number" "RANK=x WORLD_SIZE=2" "train $tiny --stages 2 --run-dir $work/rx"
run_case "port in use (rank 0 hosts the store)" "RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port" "train $tiny --stages 2 --pipeline.timeout_s 5 --run-dir $work/port-run"
run_case "ZeRO-1 with a predicting schedule" "" "train $tiny --stages 2 --schedule pipeoptim --dp-width 2 --zero1"
run_case "ZeRO-1 without replicas" "" "train $tiny --stages 2 --zero1"
run_case "token slices with 1F1B" "" "train $tiny --stages 2 --schedule 1f1b --pipeline.slices 2"
run_case "token slices that do not sum to seq_len" "" "train $tiny --stages 2 --schedule gpipe --pipeline.slices 3,3"
run_case "several nodes without a fixed port" "" "train $tiny --stages 2 --nnodes 2 --node-rank 0"
run_case "node rank outside the nodes" "" "train $tiny --stages 2 --nnodes 2 --node-rank 2 --master-port 29500"
run_case "unreachable rendezvous address" "" "train $tiny --stages 2 --pipeline.master_addr 203.0.113.1 --pipeline.timeout_s 3 --run-dir $work/addr"
run_case "resume: 2BW stashed-version file missing" "" "train --resume $work/twobw --train.steps 6"
tokens="--data.format tokens --model.vocab_size 400"
run_case "token file: wrong magic" "" "train $tiny $tokens --data.path $work/badmagic"
run_case "token file: unsupported version" "" "train $tiny $tokens --data.path $work/badversion"
run_case "token file: truncated body" "" "train $tiny $tokens --data.path $work/cut"
run_case "token ids outside the vocabulary" "" "train $tiny --data.format tokens --data.path $work/tokens"
run_case "a tokenizer that did not make the token files" "" "train $tiny $tokens --data.path $work/tokens --data.tokenizer $work/other.model"
run_case "tokenizer model missing" "" "train $tiny $tokens --data.path $work/tokens --data.tokenizer $work/nope.model"
run_case "tokenize: tokenizer model missing" "" "tokenize --tokenizer $work/nope.model $work/text.txt --out $work/out"
run_case "tokenizer: more pieces than the text holds" "" "tokenizer train --vocab 100000 $work/text.txt --out $work/huge.model"
run_case "tokenizer: --out is the text itself" "" "tokenizer train --vocab 400 $work/text.txt --out $work/text.txt"
run_case "tokenizer: the text is a folder" "" "tokenizer train --vocab 400 $work/ro --out $work/folder.model"
mkdir -p "$work/selftok" && cp "$work/text.txt" "$work/selftok/train.bin"
run_case "tokenize: --out holds the text as train.bin" "" "tokenize --tokenizer $work/tok.model $work/selftok/train.bin --out $work/selftok"
run_case "train.device cuda without a GPU" "" "train $tiny --stages 1 --train.device cuda"
run_case "CUDA graphs on the CPU" "" "train $tiny --stages 2 --train.cuda_graphs 1"
run_case "emulated CUDA graphs in one process" "" "train $tiny --stages 1 --train.cuda_graphs 2"
mkdir -p "$work/hf-mistral" && printf '{"model_type": "mistral", "architectures": ["MistralForCausalLM"]}' > "$work/hf-mistral/config.json"
mkdir -p "$work/hf-noweights" && printf '{"model_type": "llama", "vocab_size": 256, "hidden_size": 16, "num_attention_heads": 2, "num_hidden_layers": 1, "intermediate_size": 32}' > "$work/hf-noweights/config.json"
run_case "Hugging Face checkpoint folder missing" "" "train $tiny --stages 1 --model.init_from $work/nope"
run_case "Hugging Face architecture not supported" "" "train $tiny --stages 1 --model.init_from $work/hf-mistral"
run_case "Hugging Face config without weights" "" "train --quiet --train.steps 1 --stages 1 --model.init_from $work/hf-noweights"
run_case "Hugging Face shape field clashing with config.json" "" "train --quiet --stages 1 --model.layers 3 --model.init_from $work/hf-noweights"
run_case "export to another format" "" "export --run-dir $work/base --format onnx --out $work/onnx"
run_case "export into a folder holding files" "" "export --run-dir $work/base --format hf --out $work/base"
run_case "export to a folder that cannot be made" "" "export --run-dir $work/base --format hf --out $work/file/sub"
run_case "chunks per worker for a one-chunk schedule" "" "train $tiny --stages 2 --schedule zb-h1 --pipeline.chunks 2"
run_case "resume: optimizer file of another stage" "" "train --resume $work/otherstage --train.steps 6"
run_case "resume: optimizer file without tensors" "" "train --resume $work/emptied --train.steps 6"
run_case "resume: a flipped bit in tensor data" "" "train --resume $work/bitflip --train.steps 6"
run_case "partition with one stage" "" "train $tiny --stages 1 --partition 1,2"
run_case "model too large for the machine's memory" "" "train $tiny --stages 1 --model.layers 1000000000"
run_case "hidden size too large (2^31)" "" "train $tiny --stages 1 --model.d_model 2147483648"
run_case "vocabulary too large (pipeline)" "" "train $tiny --stages 2 --model.vocab_size 1000000000"
run_case "batch too large" "" "train $tiny --stages 1 --train.batch_size 1099511627776"
run_case "too many worker processes for the machine" "" "train $tiny --stages 100000 --model.layers 200000"
run_case "too many compute threads" "" "train $tiny --train.threads 100000"
run_case "data path is a device" "" "train $tiny --data.path /dev/zero"
run_case "data path is a folder" "" "train $tiny --data.path $work"
run_case "config path is a folder" "" "train $work"
run_case "port above 65535" "" "train $tiny --pipeline.master_port 70000"
run_case "hexadecimal number" "" "train --train.lr 0x10"
run_case "timeout beyond its bound" "" "train $tiny --pipeline.timeout_s 1e300"
run_case "config --reference with an invalid value" "" "config --reference --model.layers 0"
run_case "resume: a file, not a run folder" "" "train --resume $work/file"
run_case "misspelled command" "" "trian"
run_case "plan: global batch too large" "" "plan --global-batch 4611686018427387904"
run_case "resume: a wider run's stage file copied in (its checksum refuses it; with the checksum re-recorded, the shape check does: BadInput.WiderStageFileIsRefusedBeforeAnythingIsRewritten)" "" "train --resume $work/narrow --train.steps 6"
run_case "dead worker (kill -9 at step 1)" "PIPETRAIN_FAULT=1:1" "train $tiny --stages 3 --train.steps 4 --run-dir $work/dead"
run_case "hung worker (SIGSTOP at step 1)" "PIPETRAIN_FAULT=1:1:hang" "train $tiny --stages 3 --train.steps 4 --pipeline.timeout_s 2 --run-dir $work/hung"
run_case "SIGINT to one 2BW worker (a stop, not an error)" "PIPETRAIN_FAULT=0:1:int" "train $tiny --stages 2 --schedule 2bw --train.steps 4 --run-dir $work/sigint"
run_case "evaluate: run folder missing" "" "evaluate --run-dir $work/nothing"
run_case "evaluate: folder without config.toml" "" "evaluate --run-dir $work/noconfig"
run_case "evaluate: checkpoint missing" "" "evaluate --run-dir $work/base --checkpoint $work/base/checkpoints/step-000099"
run_case "evaluate: unknown split" "" "evaluate --run-dir $work/base --split training"
run_case "evaluate: --run-dir names a file" "" "evaluate --run-dir $work/file"
run_case "learning rate 0 above the default floor" "" "train $tiny --train.lr 0"
run_case "validation fraction too small for one sequence" "" "train $tiny --data.val_fraction 1e-7"
run_case "plan: cluster file that describes no hardware" "" "plan --cluster $work/empty.txt"
run_case "plan: cluster path is a folder" "" "plan --cluster $work"
run_case "plan: --top 0" "" "plan --top 0"
run_case "plan: a BatchNorm model's global batch not a multiple of its microbatch" "" "plan --config $work/fashion_mnist.toml --global-batch 100"
run_case "simulate: --iterations 0" "" "simulate --iterations 0"
run_case "simulate: --load a folder" "" "simulate --load $work"
run_case "plan file: a fractional layer count" "" "train $tiny --plan $work/fractional_plan.json"
run_case "plan file: an unknown config field" "" "train $tiny --plan $work/unknown_field_plan.json"
run_case "simulate: a hexadecimal count" "" "simulate --stages 0x10"
run_case "simulate: a cost that is not a number" "" "simulate --forward-ms nan"
run_case "simulate: a count out of its range" "" "simulate --stages 2147483648"
run_case "simulate: --load with a generated schedule's shape" "" "simulate --load $work/bad.csv --stages 8"
run_case "simulate: --svg into a missing folder" "" "simulate --svg $work/nowhere/x.svg"
run_case "terapipe-plan: granularity 0" "" "terapipe-plan --granularity 0"
run_case "terapipe-plan: no devices per stage" "" "terapipe-plan --tensor-parallel 0"
run_case "profile: repeats past int" "" "profile --repeats 4294967296 --out $work/p.json"
run_case "profile: --out into a missing folder (before measuring)" "" "profile --out $work/nowhere/p.json"
run_case "profile: a --cluster that describes no hardware (before measuring)" "" "profile --cluster $work/empty.txt --out $work/p.json"
run_case "plan: --profile with --model" "" "plan --profile $work/plan.json --model gpt2-xl"
run_case "plan: --max-workers without a memory budget" "" "plan --max-workers 3"
run_case "config: a model kind train refuses" "" "config --model.kind GPT"
run_case "config: a beta of 1" "" "config --train.beta2 1"
run_case "log.profile_step after the last step" "" "train $tiny --log.profile_step 10"
run_case "evaluate: a batch no memory holds" "" "evaluate --run-dir $work/done --train.batch_size 2000000000"
run_case "tokenizer: --max-sentences SentencePiece refuses" "" "tokenizer train --vocab 400 --max-sentences 3 $work/text.txt --out $work/few.model"
echo "keep me" > "$work/notes.txt"
run_case "train: --resume with --overwrite" "" "train --resume $work/done --overwrite"
run_case "resume: another activation than the run's" "" "train --resume $work/done --train.steps 4 --model.activation gelu_tanh"
run_case "resume: another MLP width than the run's" "" "train --resume $work/done --train.steps 4 --model.ffn_hidden 24"
run_case "export: a model override the checkpoint did not train with" "" "export --run-dir $work/done --format hf --model.norm_eps 0.5 --out $work/eps"
run_case "train: speech data for a GPT" "" "train $tiny --data.format speech --data.path $work/none.bin"
run_case "tokenizer: --out is someone's other file" "" "tokenizer train --vocab 400 $work/text.txt --out $work/notes.txt"
run_case "prepare-speech: --out in a folder that cannot be made (before synthesis)" "" "prepare-speech --out $work/notes.txt/f.bin"
kill $listener 2>/dev/null

table=$(printf '%s\n' "| # | case | command (W = scratch folder, TINY = a 1-layer model, 2 steps) | exit | lines | message |" "|---|---|---|---|---|---|" "${rows[@]}")
doc=docs/reliability.md
python3 - "$doc" "$table" <<'PY'
import sys
path, table = sys.argv[1], sys.argv[2]
text = open(path).read()
begin, end = "<!-- BEGIN bad-input table -->", "<!-- END bad-input table -->"
head, rest = text.split(begin)
_, tail = rest.split(end)
open(path, "w").write(head + begin + "\n" + table + "\n" + end + tail)
PY
echo "gen_reliability_doc: ${#rows[@]} cases written to $doc"
