# Sourced by bench/gpu_check.sh and bench/gpu_profile.sh, from the repository root: the binary
# (build-gpu/ from bench/gpu_bundle.sh on a lent GPU machine, else build/), the python whose torch
# lends its libtorch, and GPT-2 small's shape for pipetrain and bench/gpt2_pytorch.py (a tiny
# model with GPU_CHECK_SMOKE=1, to test the scripts here on the CPU).
ROOT=$PWD
PY=${PYTHON:-$(command -v python3)}
BIN=$ROOT/build-gpu/pipetrain
[ -x "$BIN" ] || BIN=$ROOT/build/pipetrain
TORCH_LIB=$("$PY" -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "lib"))')
export LD_LIBRARY_PATH="$TORCH_LIB:$ROOT/build-gpu/lib:${LD_LIBRARY_PATH:-}"
DEVICE=${GPU_CHECK_DEVICE:-cuda}
SMOKE=${GPU_CHECK_SMOKE:-0}
if [ "$SMOKE" = 1 ]; then
  SHAPE="--model.layers 2 --model.d_model 64 --model.heads 4 --model.seq_len 64 --model.vocab_size 256"
  PY_SHAPE="--layers 2 --d-model 64 --heads 4 --context 64 --vocab 256"; CONTEXT=64
else
  SHAPE="--model.preset gpt2-small"; PY_SHAPE=""; CONTEXT=1024
fi
