#!/usr/bin/env bash
# The write outage when an ensemble's leader fails: 3 servers, tickTime 200,
# syncLimit 5, writers doing synchronous setData through the followers;
# the leader is killed with kill -9 (or stopped with SIGSTOP: SIGNAL=STOP)
# EVENT_AT (2) s into a DURATION (6) s run. RUNS (5) runs per server (TARGETS:
# "rk zk"), each
# on a fresh ensemble, alternating ringkeeper and Apache ZooKeeper.
# Usage: [RUNS=n SIGNAL=KILL|STOP] tuning/failover.sh [loadgen failover args...]
# The outage is the longest pause between acknowledged writes across the
# failure (see loadgen/src/failover.rs).
source "$(dirname "$0")/lib.sh"
runs=${RUNS:-5}
signal=${SIGNAL:-KILL}
build
csv=$OUT/failover-$(echo "$signal" | tr 'A-Z' 'a-z').csv
echo "run,target,outage_ms,resumed_after_event_ms,longest_gap_before_ms,acked,failed,reconnects" >"$csv"
for run in $(seq 1 "$runs"); do
    for flavor in ${TARGETS:-rk zk}; do
        start_ensemble "$flavor$run" "$flavor" $([ $flavor = rk ] && echo 30 || echo 40) 3 200
        leader=$(leader_index)
        [ -n "$leader" ] || { echo "no leader" >&2; exit 1; }
        followers=""
        for i in $(follower_indexes "$leader"); do
            followers+="${followers:+,}${MEMBER_ADDR[i]}"
        done
        "$LOADGEN" failover --target "$flavor=$followers" --event "${EVENT_AT:-2}:kill -$signal ${MEMBER_PID[leader]}" \
            --duration-s "${DURATION:-6}" --csv "$WORK/one.csv" "$@"
        tail -n +2 "$WORK/one.csv" | sed "s/^/$run,/" >>"$csv"
        kill -CONT "${MEMBER_PID[leader]}" 2>/dev/null || true
        stop_ensemble "$flavor$run"
    done
done
echo "== $csv"
cat "$csv"
# Medians per target.
python3 - "$csv" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
for t in sorted({r["target"] for r in rows}):
    o = [float(r["outage_ms"]) for r in rows if r["target"] == t]
    f = [float(r["resumed_after_event_ms"]) for r in rows if r["target"] == t]
    print(f"{t}: outage median {statistics.median(o):.0f} ms (min {min(o):.0f}, max {max(o):.0f}); "
          f"writes resumed after the event, median {statistics.median(f):.0f} ms, runs {len(o)}")
PY
