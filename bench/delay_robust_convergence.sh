#!/usr/bin/env bash
# Delay-robust training (issue 20 item 4): the default job (GPT, tinyshakespeare, 800 steps x
# 32 x 128 tokens, m = 8) as synchronous 1F1B, 2BW, 2BW with prediction, 2BW with error
# feedback, and 2BW with error feedback after a synchronous warm-up of $SYNC_WARMUP steps, each
# with AdamW and with Muon, at every pipeline depth in $STAGES. The learning
# rates are the ones tuned on the synchronous run (bench/lr_sweep.sh) and reused unchanged.
# Prints the final validation losses as a markdown table (gap to sync in %) and plots the
# validation curves of the first depth to OUT.svg. A run whose metrics already reach the last
# step is kept, so an interrupted sweep continues where it stopped.
# Usage: bench/delay_robust_convergence.sh RUNS_DIR OUT.svg
#        (STAGES="2 4" STEPS=800 ADAMW_LR=3e-3 MUON_LR=0.02 MUON_MOMENTUM=0.95 SEED=1234
#        SYNC_WARMUP=200
#        PIPETRAIN=build/pipetrain;
#        RUN_ONLY="muon:2bw-ef adamw:2bw" makes just those runs, in that order, and no table)
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS="${1:?runs folder}"
OUT="${2:-docs/benchmarks/delay_robust_convergence.svg}"
PIPETRAIN="${PIPETRAIN:-build/pipetrain}"
STAGES="${STAGES:-2 4}"
STEPS="${STEPS:-800}"
ADAMW_LR="${ADAMW_LR:-3e-3}"
MUON_LR="${MUON_LR:-0.02}"
MUON_MOMENTUM="${MUON_MOMENTUM:-0.95}"
SEED="${SEED:-1234}"
SYNC_WARMUP="${SYNC_WARMUP:-200}"
VARIANTS=(sync 2bw 2bw-predict 2bw-ef 2bw-ef-warm)
mkdir -p "$RUNS" "$(dirname "$OUT")"

variant_args() {
  case "$1" in
    sync) echo "--schedule 1f1b" ;;
    2bw) echo "--schedule 2bw" ;;
    2bw-predict) echo "--schedule 2bw-predict" ;;
    2bw-ef) echo "--schedule 2bw --train.delay_correction error_feedback" ;;
    2bw-predict-ef) echo "--schedule 2bw-predict --train.delay_correction error_feedback" ;;
    2bw-ef-warm) echo "--schedule 2bw --train.delay_correction error_feedback --pipeline.sync_warmup_steps $SYNC_WARMUP" ;;
    sync-ef) echo "--schedule 1f1b --train.delay_correction error_feedback" ;;
  esac
}
optimizer_args() {
  case "$1" in
    adamw) echo "--train.optimizer adamw --train.lr $ADAMW_LR" ;;
    muon) echo "--train.optimizer muon --train.lr $ADAMW_LR --train.muon_lr $MUON_LR --train.muon_momentum $MUON_MOMENTUM" ;;
  esac
}
run_name() {  # STAGES OPTIMIZER VARIANT: the warm-up's length is part of its name
  local variant="$3"
  [[ "$variant" == *-warm ]] && variant+="$SYNC_WARMUP"
  echo "p$1-$2-$variant"
}
final_field() {  # the last metrics line's FIELD, or nothing
  python3 -c "import json,sys
lines=[json.loads(l) for l in open('$1/metrics.jsonl') if '\"$2\"' in l]
print(lines[-1]['$2'] if lines else '')" 2>/dev/null || true
}
run_one() {  # STAGES OPTIMIZER VARIANT
  local dir="$RUNS/$(run_name "$1" "$2" "$3")"
  [[ "$(final_field "$dir" step)" == "$STEPS" ]] && return 0
  local start=$SECONDS
  # shellcheck disable=SC2046
  "$PIPETRAIN" train --quiet --stages "$1" --microbatches 8 --train.steps "$STEPS" \
    --sample.tokens 0 --train.seed "$SEED" $(optimizer_args "$2") $(variant_args "$3") \
    --run-dir "$dir" --overwrite >"$dir.log" 2>&1 || echo "p$1 $2 $3 failed: $(tail -1 "$dir.log")" >&2
  echo "p$1 $2 $3: $((SECONDS - start)) s, validation $(final_field "$dir" val_loss)" >&2
}

if [[ -n "${RUN_ONLY:-}" ]]; then
  for stages in $STAGES; do
    for run in $RUN_ONLY; do run_one "$stages" "${run%%:*}" "${run#*:}"; done
  done
  exit 0
fi
for stages in $STAGES; do
  for optimizer in adamw muon; do
    for variant in "${VARIANTS[@]}"; do run_one "$stages" "$optimizer" "$variant"; done
  done
done

echo "| stages | optimizer | sync | 2bw | 2bw-predict | 2bw + error feedback | 2bw + error feedback after $SYNC_WARMUP synchronous steps |"
echo "|---|---|---|---|---|---|---|"
for stages in $STAGES; do
  for optimizer in adamw muon; do
    sync=$(final_field "$RUNS/p$stages-$optimizer-sync" val_loss)
    row="| $stages | $optimizer | $(printf '%.4f' "$sync")"
    for variant in 2bw 2bw-predict 2bw-ef 2bw-ef-warm; do
      loss=$(final_field "$RUNS/$(run_name "$stages" "$optimizer" "$variant")" val_loss)
      row+=" | $(python3 -c "print(f'{$loss:.4f} ({100*($loss-$sync)/$sync:+.1f}%)')")"
    done
    echo "$row |"
  done
done

first=${STAGES%% *}
CURVES=()
for optimizer in adamw muon; do
  for variant in "${VARIANTS[@]}"; do
    CURVES+=("$optimizer $variant=$RUNS/$(run_name "$first" "$optimizer" "$variant")/metrics.jsonl")
  done
done
"${PLOT_CURVES:-build/bench/plot_curves}" "$OUT" \
  "$first-stage GPT, tinyshakespeare, $STEPS steps x 32 x 128 tokens: validation loss" "${CURVES[@]}"
