#!/usr/bin/env bash
# Issue 27: server CPU, syscalls and context switches per op, ringkeeper
# beside the kernel's floor and Apache ZooKeeper, in one run with one client
# (`ringkeeper-loadgen compare`, targets alternating point by point, each
# server's cost read over the measured window with --server-pid):
#   rk          this build (client sockets on the shard's io_uring)
#   rk-streams  this build with ringkeeper.clientRing=false (glommio's
#               sockets: the networking before issue 27)
#   rk-base     another build, BASE (e.g. the commit before the ring),
#               skipped when BASE is unset
#   zk          Apache ZooKeeper 3.8 (Debian's), standalone, defaults
#   floor       tuning/request-floor.c, uring variant (no tree, no log)
#   floor-epoll tuning/request-floor.c, epoll variant
#   floor-log   tuning/request-floor.c, uring variant with --log: each loop
#               turn's writes appended to an O_DIRECT|O_DSYNC file in one
#               write, replies held until it completes (the floor plus a
#               log, for the write target); FLOOR_VARIANTS="uring uring-log"
# Standalone servers with fsync on; the servers run on SERVER_CPUS (1), the
# client on CLIENT_CPUS (0), so that one core is the server's.
# Usage: [BASE=/path/to/old/ringkeeper] [FLOOR_VARIANTS="uring epoll"]
#        [WITHOUT="zk rk-streams"] tuning/request-cost.sh [loadgen args]
#   e.g. --reads 0,50,100 --outstanding 1,8,100 --sessions 32 --rounds 2
# Paced (every server offered the same load, so that the client's own
# behaviour does not differ with the server's speed; a server that cannot
# keep up is reported at what it reached):
#   WITHOUT="zk rk-streams" FLOOR_VARIANTS=uring BASE=... \
#     tuning/request-cost.sh --reads 100 --rate-ops-s 200000 --rounds 5
# Results: $OUT/request-cost.{json,csv,svg} (OUT defaults to
# tuning/results/<today>).
export SERVER_CPUS=${SERVER_CPUS:-1} CLIENT_CPUS=${CLIENT_CPUS:-0}
OUT=${OUT:-$(cd "$(dirname "$0")" && pwd)/results/$(date -u +%F)}
source "$(dirname "$0")/lib.sh"
build
# Every write-heavy point logs about 1.3 GB per server per round (200k
# writes/s of 1 KiB for 6 s), and the servers keep their logs until the run
# ends (lib.sh, require_free_disk).
require_free_disk request-cost
build_floor

TARGETS=() COST=()
add() { TARGETS+=(--target "$1=$ADDR"); COST+=(--server-pid "$1=$PID"); }
# want NAME: false when WITHOUT names it.
want() { case " ${WITHOUT:-} " in *" $1 "*) return 1 ;; esac; }
want rk &&         { start_rk rk;                                   add rk; }
want rk-streams && { start_rk rk-streams "ringkeeper.clientRing=false"; add rk-streams; }
if [ -n "${BASE:-}" ]; then
    RINGKEEPER=$BASE start_rk rk-base;                add rk-base
fi
want zk &&         { start_zk zk;                                   add zk; }
for v in ${FLOOR_VARIANTS:-uring epoll}; do
    name=floor; [ "$v" = uring ] || name=floor-${v#uring-}
    start_floor "$name" "$v";                         add "$name"
done
"${LOADGEN_PINNED[@]}" compare "${TARGETS[@]}" "${COST[@]}" \
    --value-bytes 1024 --warmup-s 2 --duration-s 4 "$@" \
    --json "$OUT/request-cost.json" --csv "$OUT/request-cost.csv" \
    --plot "$OUT/request-cost.svg"
