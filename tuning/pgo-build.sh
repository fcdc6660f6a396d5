#!/usr/bin/env bash
# A profile-guided build of the server (tuning/networking.md §18): builds
# ringkeeper instrumented, trains it with the load generator and one idle
# session (tuning/rtt-client.c), and builds it again with that profile. The
# result goes to OUT_BIN (default target/pgo/ringkeeper); the ordinary
# release build is left as it is.
#
# The server has no clean shutdown (it is stopped by a signal), so the
# instrumented one never reaches the exit hook that writes its counters:
# gdb calls the runtime's __llvm_profile_write_file in it before it is
# killed. (LLVM's continuous mode, which maps the counters into the file,
# left a file llvm-profdata rejected as truncated here.) Needs rustup's
# llvm-tools (for llvm-profdata; the script adds it), gdb and cc. Takes
# about 10 minutes on two cores.
# Usage: tuning/pgo-build.sh
source "$(dirname "$0")/lib.sh"
OUT_BIN=${OUT_BIN:-$ROOT/target/pgo/ringkeeper}
SYSROOT=$(rustc --print sysroot)
HOST=$(rustc -vV | awk '/^host:/ {print $2}')
PROFDATA=$SYSROOT/lib/rustlib/$HOST/bin/llvm-profdata
command -v gdb >/dev/null || { echo "gdb is needed: apt-get install -y gdb" >&2; exit 1; }
if [ ! -x "$PROFDATA" ]; then
    rustup component add llvm-tools >&2 ||
        { echo "llvm-profdata is needed: rustup component add llvm-tools" >&2; exit 1; }
fi
build
cc -O2 -o "$WORK/rtt-client" "$ROOT/tuning/rtt-client.c"
GEN_TARGET=$ROOT/target/pgo-generate
USE_TARGET=$ROOT/target/pgo-use
mkdir -p "$WORK/profiles"

echo "pgo-build: the instrumented build" >&2
(cd "$ROOT" && CARGO_TARGET_DIR=$GEN_TARGET \
    RUSTFLAGS="-Cprofile-generate=$WORK/profiles" \
    cargo build --release -q -p ringkeeper --bin ringkeeper)

echo "pgo-build: training" >&2
LLVM_PROFILE_FILE="$WORK/profiles/rk-%p.profraw" RINGKEEPER=$GEN_TARGET/release/ringkeeper \
    start_rk train
"$WORK/rtt-client" "${ADDR%:*}" "${ADDR#*:}" 2000 1024 >&2
for reads in 0 50 100; do
    "$LOADGEN" mix --target "$ADDR" --reads "$reads" --sessions 32 --outstanding 8 \
        --value-bytes 1024 --warmup-s 1 --duration-s 3 -q >/dev/null
done
"$LOADGEN" mix --target "$ADDR" --reads 0 --sessions 32 --outstanding 8 \
    --value-bytes 1024 --warmup-s 1 --duration-s 3 --rate-ops-s 20000 -q >/dev/null
gdb -p "$PID" -batch -ex 'call (int)__llvm_profile_write_file()' >"$WORK/gdb.log" 2>&1 ||
    { cat "$WORK/gdb.log" >&2; exit 1; }
kill -9 "$PID"
"$PROFDATA" merge -o "$WORK/ringkeeper.profdata" "$WORK"/profiles/rk-*.profraw

echo "pgo-build: the optimized build" >&2
(cd "$ROOT" && CARGO_TARGET_DIR=$USE_TARGET \
    RUSTFLAGS="-Cprofile-use=$WORK/ringkeeper.profdata -Cllvm-args=-pgo-warn-missing-function=false" \
    cargo build --release -q -p ringkeeper --bin ringkeeper)
mkdir -p "$(dirname "$OUT_BIN")"
cp "$USE_TARGET/release/ringkeeper" "$OUT_BIN"
echo "pgo-build: $OUT_BIN" >&2
