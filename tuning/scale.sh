#!/usr/bin/env bash
# Issue 11, sections 1 and 2: grow a fresh tree with pipelined creates
# (8 sessions x 100 outstanding, 100-byte values) to checkpoints and report
# creates/s per window and at each size, plus the server's RSS and peak RSS
# at each checkpoint, against ringkeeper and then Apache ZooKeeper (one
# server at a time, each on a fresh data dir, forceSync on), then a table of
# the ratios ringkeeper/ZooKeeper.
#
#   tuning/scale.sh                                  # one parent: 1k,10k,100k,1M children
#   LAYOUT=spread tuning/scale.sh                    # 100 parents: 10k,100k,1M,5M znodes
#   CHECKPOINTS=1k,5k,20k tuning/scale.sh            # a smoke run
#   TARGETS=rk tuning/scale.sh --sessions 16          # extra args go to the loadgen
#   PROBE_ROUNDS=15 LAYOUT=spread tuning/scale.sh     # the rate held at each size
#
# Environment: LAYOUT (one-parent|spread), PARENTS (spread: 100),
# CHECKPOINTS, MAX_SECONDS (per server: 3600), WARMUP (znodes created and
# deleted before the measured load, so the first window is not a cold
# start: 10000; 0 measures cold, as issue 11's first numbers did), TARGETS ("rk zk"), ZK_HEAP
# (3g; 8g for spread, whose 5M znodes do not fit in 3g), RK_CFG (more
# zoo.cfg lines for ringkeeper, e.g. snapCount=1000000000), PROBE_ROUNDS
# (0: none; N: at each checkpoint the growth pauses for N rounds of
# PROBE_CREATES creates, 10000, each timed and then deleted, so the tree
# stays at that size: the median round is the rate at the size, and the
# server's CPU per create is read from schedstat; ringkeeper's log, with
# its snapshot lines, is kept as scale-$LAYOUT-rk.log and the rounds are
# split by whether a snapshot was running, tuning/probe-vs-snapshots.py),
# OUT.
# Results: $OUT/scale-$LAYOUT-{rk,zk}.{json,csv} and the comparison in
# $OUT/scale-$LAYOUT.json.
LAYOUT=${LAYOUT:-one-parent}
case $LAYOUT in
    one-parent) CHECKPOINTS=${CHECKPOINTS:-1k,10k,100k,1M}; ZK_HEAP=${ZK_HEAP:-3g} ;;
    spread) CHECKPOINTS=${CHECKPOINTS:-10k,100k,1M,5M}; ZK_HEAP=${ZK_HEAP:-8g} ;;
    *) echo "LAYOUT=$LAYOUT: want one-parent or spread" >&2; exit 2 ;;
esac
export ZK_HEAP
source "$(dirname "$0")/lib.sh"
build
files=()
for t in ${TARGETS:-rk zk}; do
    case $t in
        rk) RUST_LOG=${RUST_LOG:-info} start_rk "$t" "forceSync=yes
${RK_CFG:-}" ;;
        zk) start_zk "$t" "forceSync=yes" ;;
        *) echo "unknown target $t" >&2; exit 2 ;;
    esac
    echo "== $t (pid $PID, $ADDR)" >&2
    "$LOADGEN" scale --target "$t=$ADDR" --layout "$LAYOUT" --parents "${PARENTS:-100}" \
        --checkpoints "$CHECKPOINTS" --server-pid "$PID" --max-seconds "${MAX_SECONDS:-3600}" --warmup "${WARMUP:-10000}" \
        --probe-rounds "${PROBE_ROUNDS:-0}" --probe-creates "${PROBE_CREATES:-10000}" "$@" \
        --json "$OUT/scale-$LAYOUT-$t.json" --csv "$OUT/scale-$LAYOUT-$t.csv"
    kill -9 "$PID"
    if [ "$t" = rk ] && [ "${PROBE_ROUNDS:-0}" -gt 0 ]; then
        # Which probe rounds ran while a snapshot was being written.
        cp "$WORK/$t/server.log" "$OUT/scale-$LAYOUT-$t.log"
        python3 "$ROOT/tuning/probe-vs-snapshots.py" "$OUT/scale-$LAYOUT-$t.json" "$OUT/scale-$LAYOUT-$t.log" \
            --json "$OUT/scale-$LAYOUT-$t-snapshots.json"
    fi
    files+=("$OUT/scale-$LAYOUT-$t.json")
    echo
done
if [ "${#files[@]}" -gt 1 ]; then
    python3 "$ROOT/tuning/compare-runs.py" --json "$OUT/scale-$LAYOUT.json" "${files[@]}"
fi
