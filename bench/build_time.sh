#!/usr/bin/env bash
# How long a newcomer waits: the README's two commands on a clean clone of HEAD, from an empty
# build folder, an empty ccache, no .venv and an empty pip cache, so torch is downloaded from
# PyPI again (Debian packages already installed, as on a machine that ran apt once; the apt
# step is timed separately by whoever measures a fresh machine).
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
export PIP_CACHE_DIR="$WORK/pip-cache"  # empty: torch's wheels are downloaded again
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
  rm -rf build build-notorch .venv "$CCACHE_DIR" "$PIP_CACHE_DIR"
  local start=$SECONDS
  scripts/test >"$WORK/command2.log" 2>&1 || { tail -30 "$WORK/command2.log" >&2; exit 1; }
  echo $((SECONDS - start))
}

echo "| command | from empty build + empty ccache | seconds |"
echo "|---|---|---|"
# "setup: .venv ready in N s" and pip's "Downloading NAME (SIZE)" lines of a command's log.
pip_install() {
  local seconds megabytes
  seconds=$(sed -n 's/^setup: .venv ready in \([0-9]*\) s$/\1/p' "$1")
  megabytes=$(sed -n 's/.*Downloading .* (\([0-9.]*\) \([kMG]B\)).*/\1 \2/p' "$1" |
              awk '{m = $1; if ($2 == "kB") m /= 1000; if ($2 == "GB") m *= 1000; t += m} END {printf "%.0f", t}')
  echo "    (of which the pip install of torch: $seconds s, $megabytes MB downloaded)"
}

if [[ "$WHICH" != 2 ]]; then
  echo "| 1: \`scripts/setup && ./build/pipetrain train\` | until step 1 is logged | $(command_1) |"
  pip_install "$WORK/command1.log"
fi
if [[ "$WHICH" != 1 ]]; then
  echo "| 2: \`scripts/test\` | until the suite passed | $(command_2) |"
  pip_install "$WORK/command2.log"
  grep -E "tests passed|Total Test time" "$WORK/command2.log" | sed 's/^/    /'
fi
