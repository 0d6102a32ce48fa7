#!/usr/bin/env bash
# Where a GPT-2 small step's time goes on the GPU (bfloat16, context 1024, each of BATCHES
# sequences a step, one process and 2 workers sharing it): pipetrain's profile (log.profile_step)
# beside the eager PyTorch script's (bench/gpt2_pytorch.py --profile-steps), kernel by kernel.
# Each pipetrain table opens with who set the pace: the host's operators a step and their
# average time, the GPU's busy share and idle gaps, the host's launches and waits
# (device/step_timeline.h). Like bench/gpu_check.sh it runs on a lent GPU machine with
# build-gpu/ carried (bench/gpu_bundle.sh); about a minute a batch size:
#   device run --carry build-gpu 'bash bench/gpu_profile.sh'
#   device run --carry build-gpu 'BATCHES="2 16" PROFILE_STAGES=1 bash bench/gpu_profile.sh'
# PROFILE_STAGES="1" EAGER=0 profile pipetrain's one process alone.
# GPU_CHECK_DEVICE=cpu GPU_CHECK_SMOKE=1 runs it here on a tiny model, to test the script.
set -uo pipefail
cd "$(dirname "$0")/.."
RET=${OUT:-/tmp/gpu_profile}
mkdir -p "$RET"
source bench/gpu_env.sh  # PY, BIN, DEVICE, SHAPE, PY_SHAPE, LD_LIBRARY_PATH
BATCHES=${BATCHES:-${BATCH:-16}}
RUN=$(mktemp -d "${TMPDIR:-/tmp}/gpu_profile.XXXXXX")
for batch in $BATCHES; do
  # One process, then 2 workers sharing the GPU (1F1B, 2 microbatches): steps 10-12 of 14.
  for stages in ${PROFILE_STAGES:-1 2}; do
    name="b${batch}_s${stages}"
    timeout 180 "$BIN" train $SHAPE --model.dtype bfloat16 --train.device "$DEVICE" --train.batch_size "$batch" \
      --pipeline.stages $stages --train.microbatches $stages --train.steps 14 --log.profile_step 10 \
      --log.profile_steps 3 --log.every 1 --eval.every 0 --eval.batches 1 --sample.tokens 0 \
      --checkpoint.every 0 --quiet --run-dir "$RUN/$name" >"$RUN/$name.log" 2>&1 ||
      { echo "FAIL pipetrain, batch $batch, $stages stage(s)"; tail -3 "$RUN/$name.log"; }
    for table in "$RUN/$name"/profile/rank*.txt; do
      [ -f "$table" ] && cp "$table" "$RET/pipetrain_${name}_$(basename "$table")"
    done
  done
  if [ "${EAGER:-1}" = 1 ]; then
    timeout 180 "$PY" bench/gpt2_pytorch.py --device "$DEVICE" --dtype bfloat16 $PY_SHAPE --batches "$batch" \
      --steps 5 --warmup 5 --profile-steps 3 >"$RET/pytorch_b${batch}_profile.txt" 2>"$RUN/pytorch.log" ||
      { echo "FAIL pytorch, batch $batch"; tail -3 "$RUN/pytorch.log"; }
  fi
done
for batch in $BATCHES; do
  for table in "$RET"/pipetrain_b${batch}_*.txt; do
    [ -f "$table" ] || continue
    echo "== $(basename "$table"), batch $batch, 3 steps"
    head -${TOP:-24} "$table"
  done
  [ "${EAGER:-1}" = 1 ] || continue
  echo "== eager PyTorch, batch $batch, 3 steps"
  # The name, self CUDA time and share, and calls of each row (the CPU columns cut).
  head -${TOP:-22} "$RET/pytorch_b${batch}_profile.txt" | cut -c1-72,143-170,199-212
  grep -E 'time total|^eager' "$RET/pytorch_b${batch}_profile.txt" | tail -3
done
