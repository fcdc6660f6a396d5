#!/usr/bin/env bash
# Issue 29 §1: a migration of a 1M-znode Apache ZooKeeper dataDir, timed
# and measured. Apache ZooKeeper 3.8 (standalone, forceSync on) takes
# ZNODES znodes (ringkeeper-loadgen scale, spread over 100 parents,
# 100-byte values), is killed -9, and then:
#   1. `ringkeeper import` of its dataDir: wall time and peak RSS
#      (/usr/bin/time -v);
#   2. ringkeeper serves the import: its startup time and zk_znode_count;
#   3. `ringkeeper export` of that dataDir: wall time and peak RSS;
#   4. Apache ZooKeeper loads the export: its startup time, zk_znode_count
#      and zk_digest_mismatches_count (0: ZooKeeper checked our digest).
#
#   tuning/migrate-1m.sh                 # 1M znodes
#   ZNODES=100k tuning/migrate-1m.sh     # a smoke run
#
# Results: $OUT/migrate-1m.txt
ZNODES=${ZNODES:-1M}
ZK_HEAP=${ZK_HEAP:-4g}
export ZK_HEAP
source "$(dirname "$0")/lib.sh"
build
command -v /usr/bin/time >/dev/null || { echo "needs GNU time: apt-get install -y time" >&2; exit 1; }
report=$OUT/migrate-1m.txt
: >"$report"
say() { echo "$*" | tee -a "$report"; }
mntr_value() { # PORT KEY
    timeout 10 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1 && printf mntr >&3 && cat <&3" | awk -v k="$2" '$1 == k { print $2 }'
}
# peak RSS (MiB) and wall seconds from /usr/bin/time -v output
timed() { # LABEL FILE
    local rss wall
    rss=$(awk -F': ' '/Maximum resident set size/ { printf "%.0f", $2 / 1024 }' "$2")
    wall=$(awk -F': ' '/Elapsed \(wall clock\)/ { print $2 }' "$2")
    say "$1: wall $wall, peak RSS $rss MiB"
}

# serving_cfg NAME DATADIR: $WORK/NAME/zoo.cfg serving DATADIR (made
# elsewhere) on a free port; prints the port.
serving_cfg() {
    local port
    port=$(free_port)
    mkdir -p "$WORK/$1"
    printf 'tickTime=2000\ndataDir=%s\nclientPort=%s\nclientPortAddress=127.0.0.1\nadmin.enableServer=false\n4lw.commands.whitelist=*\n' \
        "$2" "$port" >"$WORK/$1/zoo.cfg"
    echo "$port"
}

say "# $(date -u +%FT%TZ) $(uname -r), $(nproc) cores; ZNODES=$ZNODES"
start_zk zk "snapCount=100000"
zk_pid=$PID
zk_port=${ADDR##*:}
"$LOADGEN" scale --target "$ADDR" --checkpoints "$ZNODES" --layout spread --parents 100 \
    --warmup 0 --max-seconds 1800 >"$WORK/scale.json"
say "ZooKeeper wrote: zk_znode_count $(mntr_value "$zk_port" zk_znode_count), $(du -sh "$WORK/zk/data" | cut -f1) on disk"
kill -9 "$zk_pid"
sleep 1

/usr/bin/time -v "$RINGKEEPER" import --zookeeper-datadir "$WORK/zk/data" --datadir "$WORK/rk-data" \
    >"$WORK/import.out" 2>"$WORK/import.time"
cat "$WORK/import.out" | tee -a "$report"
timed "import" "$WORK/import.time"

port=$(serving_cfg rk "$WORK/rk-data")
t0=$(date +%s.%N)
RUST_LOG=warn "$RINGKEEPER" --config "$WORK/rk/zoo.cfg" >"$WORK/rk/server.log" 2>&1 &
rk_pid=$!
PIDS+=("$rk_pid")
wait_ready "$port"
t1=$(date +%s.%N)
say "ringkeeper serving the import after $(echo "$t1 - $t0" | bc) s: zk_znode_count $(mntr_value "$port" zk_znode_count), RSS $(awk '/VmRSS/ { printf "%.0f MiB", $2 / 1024 }' /proc/$rk_pid/status)"
kill -9 "$rk_pid"
sleep 1

/usr/bin/time -v "$RINGKEEPER" export --datadir "$WORK/rk-data" --zookeeper-datadir "$WORK/zk-back" \
    >"$WORK/export.out" 2>"$WORK/export.time"
cat "$WORK/export.out" | tee -a "$report"
timed "export" "$WORK/export.time"

port=$(serving_cfg zkb "$WORK/zk-back")
t0=$(date +%s.%N)
java -Dzookeeper.log.dir="$WORK/zkb" -Xmx"$ZK_HEAP" -cp "$ZK_CONF_DIR:$ZK_JAR:$ZK_NETTY" \
    org.apache.zookeeper.server.quorum.QuorumPeerMain "$WORK/zkb/zoo.cfg" >"$WORK/zkb/server.log" 2>&1 &
PIDS+=("$!")
wait_ready "$port"
t1=$(date +%s.%N)
say "Apache ZooKeeper serving the export after $(echo "$t1 - $t0" | bc) s: zk_znode_count $(mntr_value "$port" zk_znode_count), zk_digest_mismatches_count $(mntr_value "$port" zk_digest_mismatches_count)"
