#!/usr/bin/env bash
# How long a newcomer waits: the README's two commands on a clean clone of HEAD, from an empty
# build folder and an empty ccache (packages already installed, as on a machine that ran
# scripts/setup once; the apt step is timed separately by whoever measures a fresh machine).
#   command 1: scripts/setup && ./build/pipetrain train   -> seconds until step 1 is logged
#   command 2: scripts/test                               -> seconds until the suite passes
# Usage: bench/build_time.sh [1|2|both]   (default both; prints a markdown table)
set -euo pipefail
cd "$(dirname "$0")/.."
WHICH="${1:-both}"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
git clone -q --no-hardlinks . "$WORK/pipetrain"
ln -s "$(realpath ../shared 2>/dev/null || echo /nonexistent)" "$WORK/shared" 2>/dev/null || true
export CCACHE_DIR="$WORK/ccache"  # empty: nothing comes from an earlier build
cd "$WORK/pipetrain"

command_1() {  # seconds from start until metrics.jsonl holds step 1
  local start=$SECONDS log="$WORK/command1.log"
  ( scripts/setup && exec ./build/pipetrain train --run-dir "$WORK/run" ) >"$log" 2>&1 &
  local pid=$!
  until [[ -s "$WORK/run/metrics.jsonl" ]]; do
    kill -0 "$pid" 2>/dev/null || { cat "$log" >&2; echo "command 1 failed" >&2; exit 1; }
    sleep 1
  done
  echo $((SECONDS - start))
  pkill -INT -P "$pid" 2>/dev/null || true; kill -INT "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}

command_2() {  # seconds for the whole of scripts/test, after command 1's build is removed
  rm -rf build build-notorch "$CCACHE_DIR"
  local start=$SECONDS
  scripts/test >"$WORK/command2.log" 2>&1 || { tail -30 "$WORK/command2.log" >&2; exit 1; }
  echo $((SECONDS - start))
}

echo "| command | from empty build + empty ccache | seconds |"
echo "|---|---|---|"
if [[ "$WHICH" != 2 ]]; then
  echo "| 1: \`scripts/setup && ./build/pipetrain train\` | until step 1 is logged | $(command_1) |"
fi
if [[ "$WHICH" != 1 ]]; then
  echo "| 2: \`scripts/test\` | until the suite passed | $(command_2) |"
  grep -E "tests passed|Total Test time" "$WORK/command2.log" | sed 's/^/    /'
fi
