#!/usr/bin/env bash
# Issue 28 §5: throughput and server CPU per op with TLS on the client
# connections, ringkeeper beside Apache ZooKeeper 3.8 (Netty, Debian's), in
# one run with one client (`ringkeeper-loadgen compare`, targets alternating
# point by point, each server's cost read with --server-pid):
#   rk-tls   this build, client.portUnification with ssl.clientAuth=need:
#            the load generator's sessions are TLS (tcp+tls://), with a
#            client certificate
#   rk       the same build in plaintext (the cost TLS adds)
#   zk-tls   Apache ZooKeeper with NettyServerCnxnFactory, the same keys
#   zk       Apache ZooKeeper in plaintext (NIO, its default)
# Certificates: make_pki (tuning/lib.sh). TLS 1.2 (ZooKeeper's default),
# ECDHE-ECDSA-AES-GCM. Standalone, fsync on; servers on
# SERVER_CPUS (1), the client on CLIENT_CPUS (0).
# Usage: tuning/tls-cost.sh [loadgen args]
#   e.g. --reads 0,50,100 --outstanding 8 --sessions 32 --rounds 2
# Results: $OUT/tls-cost.{json,csv,svg} (OUT defaults to
# tuning/results/<today>).
export SERVER_CPUS=${SERVER_CPUS:-1} CLIENT_CPUS=${CLIENT_CPUS:-0}
OUT=${OUT:-$(cd "$(dirname "$0")" && pwd)/results/$(date -u +%F)}
source "$(dirname "$0")/lib.sh"
build

make_pki "$WORK/pki"

TARGETS=() COST=()
add() { TARGETS+=(--target "$1=$2$ADDR"); COST+=(--server-pid "$1=$PID"); }
start_rk rk-tls "$TLS_CFG";                                                   add rk-tls tcp+tls://
start_rk rk;                                                                  add rk ""
start_zk zk-tls "serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory
$TLS_CFG";                                                                    add zk-tls tcp+tls://
start_zk zk;                                                                  add zk ""
"${LOADGEN_PINNED[@]}" compare "${TARGETS[@]}" "${COST[@]}" \
    --value-bytes 1024 --warmup-s 2 --duration-s 4 "$@" \
    --json "$OUT/tls-cost.json" --csv "$OUT/tls-cost.csv" --plot "$OUT/tls-cost.svg"
