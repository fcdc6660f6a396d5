#!/usr/bin/env bash
# Issue 11, section 1: one multi of OPS creates (10-byte values) under a
# fresh parent, timed from the send to the reply, then one multi deleting
# them, against ringkeeper and then Apache ZooKeeper (one at a time, fresh
# data dirs, forceSync on), with the ratio ringkeeper/ZooKeeper.
#
#   tuning/bigmulti.sh                 # OPS=100000
#   OPS=10000 tuning/bigmulti.sh       # a smoke run
#
# A multi is one request frame: 100k creates are ~7.6 MB (the loadgen prints
# the size), far over the default jute.maxbuffer (1 MB - 1), so both servers
# get JUTE bytes (64 MiB): ringkeeper as `jute.maxbuffer=` in zoo.cfg,
# ZooKeeper as the JVM property -Djute.maxbuffer= (ZooKeeper turns unknown
# zoo.cfg keys into zookeeper.* properties, and its frame check reads the
# plain jute.maxbuffer property, so the zoo.cfg line would not do).
# Environment: OPS, JUTE, TARGETS ("rk zk"), RK_CFG (more zoo.cfg lines for
# ringkeeper), OUT. Extra args go to the loadgen.
OPS=${OPS:-100000}
JUTE=${JUTE:-67108864}
export ZK_JVM_OPTS="${ZK_JVM_OPTS:-} -Djute.maxbuffer=$JUTE"
source "$(dirname "$0")/lib.sh"
build
files=()
for t in ${TARGETS:-rk zk}; do
    case $t in
        rk) start_rk "$t" "forceSync=yes
jute.maxbuffer=$JUTE
${RK_CFG:-}" ;;
        zk) start_zk "$t" "forceSync=yes" ;;
        *) echo "unknown target $t" >&2; exit 2 ;;
    esac
    echo "== $t (pid $PID, $ADDR)" >&2
    "$LOADGEN" bigmulti --target "$t=$ADDR" --ops "$OPS" "$@" \
        --json "$OUT/bigmulti-$t.json" --csv "$OUT/bigmulti-$t.csv"
    kill -9 "$PID"
    files+=("$OUT/bigmulti-$t.json")
    echo
done
if [ "${#files[@]}" -gt 1 ]; then
    python3 "$ROOT/tuning/compare-runs.py" --json "$OUT/bigmulti.json" "${files[@]}"
fi
