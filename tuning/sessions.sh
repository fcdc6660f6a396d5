#!/usr/bin/env bash
# Issue 11, section 5: session establishment rate. COUNT sessions,
# CONCURRENCY at a time, each a TCP connect + ConnectRequest/ConnectResponse;
# mode create-close then sends closeSession and waits for its reply, mode
# create just closes the socket (the session expires later). Against
# ringkeeper and then Apache ZooKeeper (one at a time, fresh data dirs,
# forceSync on: a session is a txn in both), with ratios ringkeeper/ZooKeeper.
#
#   tuning/sessions.sh                       # COUNT=10000 CONCURRENCY=32
#   COUNT=2000 tuning/sessions.sh            # a smoke run
#
# Environment: COUNT, CONCURRENCY, TARGETS ("rk zk"), OUT, SERVER_CPUS and
# CLIENT_CPUS (lib.sh: e.g. SERVER_CPUS=1 CLIENT_CPUS=0 gives each server
# one core and the client the other). Extra args go to the loadgen (e.g.
# --mode create, --threads 2).
source "$(dirname "$0")/lib.sh"
build
files=()
for t in ${TARGETS:-rk zk}; do
    case $t in
        rk) start_rk "$t" "forceSync=yes" ;;
        zk) start_zk "$t" "forceSync=yes" ;;
        *) echo "unknown target $t" >&2; exit 2 ;;
    esac
    echo "== $t (pid $PID, $ADDR)" >&2
    "${LOADGEN_PINNED[@]}" sessions --target "$t=$ADDR" --count "${COUNT:-10000}" \
        --concurrency "${CONCURRENCY:-32}" --server-pid "$PID" "$@" \
        --json "$OUT/sessions-$t.json" --csv "$OUT/sessions-$t.csv"
    kill -9 "$PID"
    files+=("$OUT/sessions-$t.json")
    echo
done
if [ "${#files[@]}" -gt 1 ]; then
    python3 "$ROOT/tuning/compare-runs.py" --json "$OUT/sessions.json" "${files[@]}"
fi
