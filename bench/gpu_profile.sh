#!/usr/bin/env bash
# Where a GPT-2 small step's time goes on the GPU (bfloat16, context 1024, BATCH sequences a step,
# one process and 2 workers sharing it): pipetrain's profile (log.profile_step) beside the eager PyTorch script's
# (bench/gpt2_pytorch.py --profile-steps), kernel by kernel. Like bench/gpu_check.sh it runs on a
# lent GPU machine with build-gpu/ carried (bench/gpu_bundle.sh); about a minute:
#   device run --carry build-gpu 'bash bench/gpu_profile.sh'
# PROFILE_STAGES="1" EAGER=0 profile pipetrain's one process alone.
# GPU_CHECK_DEVICE=cpu GPU_CHECK_SMOKE=1 runs it here on a tiny model, to test the script.
set -uo pipefail
cd "$(dirname "$0")/.."
RET=${OUT:-/tmp/gpu_profile}
mkdir -p "$RET"
source bench/gpu_env.sh  # PY, BIN, DEVICE, SHAPE, PY_SHAPE, LD_LIBRARY_PATH
BATCH=${BATCH:-16}
RUN=$(mktemp -d "${TMPDIR:-/tmp}/gpu_profile.XXXXXX")
# One process, then 2 workers sharing the GPU (1F1B, 2 microbatches): steps 10-12 of 14.
for stages in ${PROFILE_STAGES:-1 2}; do
  timeout 180 "$BIN" train $SHAPE --model.dtype bfloat16 --train.device "$DEVICE" --train.batch_size "$BATCH" \
    --pipeline.stages $stages --train.microbatches $stages --train.steps 14 --log.profile_step 10 \
    --log.profile_steps 3 --log.every 1 --eval.every 0 --eval.batches 1 --sample.tokens 0 \
    --checkpoint.every 0 --quiet --run-dir "$RUN/s$stages" >"$RUN/s$stages.log" 2>&1 ||
    { echo "FAIL pipetrain, $stages stage(s)"; tail -3 "$RUN/s$stages.log"; }
  for table in "$RUN/s$stages"/profile/rank*.txt; do
    [ -f "$table" ] && cp "$table" "$RET/pipetrain_s${stages}_$(basename "$table")"
  done
done
if [ "${EAGER:-1}" = 1 ]; then
  timeout 180 "$PY" bench/gpt2_pytorch.py --device "$DEVICE" --dtype bfloat16 $PY_SHAPE --batches "$BATCH" \
    --steps 5 --warmup 5 --profile-steps 3 >"$RET/pytorch_profile.txt" 2>"$RUN/pytorch.log" ||
    { echo "FAIL pytorch"; tail -3 "$RUN/pytorch.log"; }
fi
for table in "$RET"/pipetrain_*.txt; do
  echo "== $(basename "$table"), batch $BATCH, 3 steps"
  head -${TOP:-22} "$table"
done
[ "${EAGER:-1}" = 1 ] || exit 0
echo "== eager PyTorch, batch $BATCH, 3 steps"
# The name, self CUDA time and share, and calls of each row (the CPU columns cut).
head -${TOP:-22} "$RET/pytorch_profile.txt" | cut -c1-72,143-170,199-212
grep -E 'time total|^eager' "$RET/pytorch_profile.txt" | tail -3
