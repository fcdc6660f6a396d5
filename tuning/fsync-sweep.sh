#!/usr/bin/env bash
# Group-commit sweep: ringkeeper with several batch settings, 100% setData
# (1 KiB) from 32 sessions x 100 outstanding, fsync on. Prints the loadgen's
# line and the server's own "group commit" counters for each setting (the
# batch settings, then the two fdatasync-based log write modes).
# Usage: tuning/fsync-sweep.sh [duration_s]   (builds release binaries first)
set -euo pipefail
cd "$(dirname "$0")/.."
dur=${1:-12}
cargo build --release -q -p ringkeeper -p ringkeeper-loadgen
work=$(mktemp -d)
trap 'kill $pid 2>/dev/null || true; rm -rf "$work"' EXIT
port=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
for setting in "" "ringkeeper.fsyncDelayUs=1000" "ringkeeper.fsyncBatchTxnsMax=100" \
    "ringkeeper.logWrite=buffered" "ringkeeper.logWrite=mmap"; do
  rm -rf "$work/data"
  printf 'tickTime=2000\ndataDir=%s/data\nclientPort=%s\nclientPortAddress=127.0.0.1\n%s\n' \
    "$work" "$port" "$setting" > "$work/zoo.cfg"
  RUST_LOG=info ./target/release/ringkeeper --config "$work/zoo.cfg" 2> "$work/server.log" &
  pid=$!
  sleep 1
  echo "== ${setting:-defaults}"
  ./target/release/ringkeeper-loadgen mix --target 127.0.0.1:$port --sessions 32 \
    --outstanding 100 --reads 0 --warmup-s 2 --duration-s "$dur" -q | grep -E "^(127|target)"
  sed 's/\x1b\[[0-9;]*m//g' "$work/server.log" | grep "group commit" | tail -1 | sed 's/.*group commit/group commit/'
  kill $pid; wait $pid 2>/dev/null || true
done
