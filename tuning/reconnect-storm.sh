#!/usr/bin/env bash
# Issue 28 §5: a reconnect storm over TLS. A 3-member ensemble (ringkeeper,
# then Apache ZooKeeper 3.8 with Netty) with TLS and client certificates on
# clientPort (make_pki's TLS_CFG); SESSIONS sessions (10,000) held over
# its members with `ringkeeper-loadgen storm`, then the leader killed with
# kill -9: every session whose member died reconnects at once to another
# member with its session id. Reported per flavor: how many the kill broke,
# how many kept their session, expired or failed, and reconnect times.
# Usage: [SESSIONS=10000] [TIMEOUT_MS=30000] tuning/reconnect-storm.sh
# Results: $OUT/reconnect-storm-<flavor>.json (OUT defaults to
# tuning/results/<today>).
OUT=${OUT:-$(cd "$(dirname "$0")" && pwd)/results/$(date -u +%F)}
source "$(dirname "$0")/lib.sh"
build
make_pki "$WORK/pki"

for flavor in rk zk; do
    extra=$TLS_CFG
    [ "$flavor" = zk ] && extra="serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory
$extra"
    ENSEMBLE_EXTRA_CFG="$extra
maxSessionTimeout=60000" start_ensemble "storm-$flavor" "$flavor" $([ $flavor = rk ] && echo 30 || echo 40) 3 2000
    leader=$(leader_index)
    [ -n "$leader" ] || { echo "$flavor: no leader" >&2; exit 1; }
    targets=""
    for i in "${!MEMBER_ADDR[@]}"; do
        targets+="${targets:+,}tcp+tls://${MEMBER_ADDR[i]}"
    done
    echo "== $flavor: leader is member $leader (pid ${MEMBER_PID[leader]})"
    "$LOADGEN" storm --target "$flavor=$targets" --sessions "${SESSIONS:-10000}" \
        --session-timeout-ms "${TIMEOUT_MS:-30000}" --event "kill -9 ${MEMBER_PID[leader]}" \
        --json "$OUT/reconnect-storm-$flavor.json"
    stop_ensemble "storm-$flavor"
done
