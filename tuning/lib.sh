#!/usr/bin/env bash
# Helpers shared by the tuning scripts: build the release binaries, start
# ringkeeper or Apache ZooKeeper (Debian's package) on free loopback ports
# with throw-away data dirs, and stop every server started here, by pid, on
# exit. Source it; don't run it.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
LOADGEN=$TARGET_DIR/release/ringkeeper-loadgen
# RINGKEEPER: another build of the server to measure (an A/B run).
RINGKEEPER=${RINGKEEPER:-$TARGET_DIR/release/ringkeeper}
ZK_JAR=/usr/share/java/zookeeper.jar
# Debian's zookeeper.jar manifest leaves Netty's codec off its Class-Path;
# NettyServerCnxnFactory (TLS) needs it.
ZK_NETTY=/usr/share/java/netty-codec.jar
ZK_CONF_DIR=/etc/zookeeper/conf
# Results (json, csv, svg) go here.
OUT=${OUT:-$ROOT/tuning/results}
# Data dirs go under $TMPDIR (fsync there must be real: not a tmpfs).
WORK=$(mktemp -d "${TMPDIR:-/tmp}/rk-tuning.XXXXXX")
# Apache ZooKeeper's heap, and extra JVM options (e.g. -Djute.maxbuffer=N).
ZK_HEAP=${ZK_HEAP:-2g}
ZK_JVM_OPTS=${ZK_JVM_OPTS:-}
# SERVER_CPUS / CLIENT_CPUS (taskset lists, e.g. 1 and 0): run the server
# under test and the load generator on cores of their own, so that the
# client's kernel work (TCP connect, close) does not take the server's
# core. Unset: both float over every core.
SERVER_TASKSET=()
[ -n "${SERVER_CPUS:-}" ] && SERVER_TASKSET=(taskset -c "$SERVER_CPUS")
if [ -n "${CLIENT_CPUS:-}" ]; then
    LOADGEN_PINNED=(taskset -c "$CLIENT_CPUS" "$LOADGEN")
else
    LOADGEN_PINNED=("$LOADGEN")
fi
PIDS=()

cleanup() {
    local p
    for p in "${PIDS[@]}"; do
        kill -9 "$p" 2>/dev/null || true
    done
    # Servers restarted by timeline events leave their pid in a file.
    for f in "$WORK"/*/restarted.pid; do
        [ -f "$f" ] && kill -9 "$(cat "$f")" 2>/dev/null || true
    done
    rm -rf "$WORK"
}
trap cleanup EXIT

# require_free_disk WHAT: refuses to go on with less than FREE_KB_MIN (24 GB
# unless set) free where the servers write. Write-heavy runs keep every
# server's log until they end: request-cost.sh at 0/50/100% reads with 3
# rounds wrote 19 GB; compare-builds.sh with MODE=ensemble about 4 GB per
# round at 0% reads (nine servers), and an 8-round run filled this VM's disk,
# after which the servers of both systems exited and the run measured nothing.
require_free_disk() {
    local min=${FREE_KB_MIN:-$((24 * 1024 * 1024))} free_kb
    free_kb=$(df -Pk "$WORK" | awk 'NR == 2 {print $4}')
    if [ "$free_kb" -lt "$min" ]; then
        echo "$1: $((free_kb / 1024 / 1024)) GB free in $WORK, want $((min / 1024 / 1024)) (FREE_KB_MIN)" >&2
        exit 1
    fi
}

build() {
    (cd "$ROOT" && cargo build --release -q -p ringkeeper -p ringkeeper-loadgen)
    mkdir -p "$OUT"
}

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# srvr answers "Mode:" once the server serves. Each probe is bounded: a
# server still starting may accept the connection and not answer yet.
wait_ready() {
    local port=$1 i
    for i in $(seq 1 300); do
        if timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$port && printf srvr >&3 && cat <&3" 2>/dev/null | grep -q Mode:; then
            return 0
        fi
        sleep 0.1
    done
    echo "server on port $port did not come up" >&2
    return 1
}

# The kernel's floor (tuning/request-floor.c: ZooKeeper-framed getData and
# setData answered with no tree; issue 27), compiled by build_floor.
FLOOR=$WORK/request-floor
build_floor() {
    [ -f /usr/include/liburing.h ] || { echo "liburing is needed: apt-get install -y liburing-dev" >&2; exit 1; }
    cc -O2 -Wall -o "$FLOOR" "$ROOT/tuning/request-floor.c" -luring
}

# start_floor NAME VARIANT: the floor server (request-floor.c's VARIANT:
# uring, epoll, ...; uring-log is uring with its log in $WORK/NAME.d) on a
# free port under SERVER_TASKSET; sets ADDR and PID.
start_floor() {
    local port mode=$2 extra=()
    port=$(free_port)
    if [ "$mode" = uring-log ]; then
        mode=uring
        mkdir -p "$WORK/$1.d"
        extra=(--log "$WORK/$1.d")
    fi
    "${SERVER_TASKSET[@]}" "$FLOOR" "$mode" "$port" 1024 "${extra[@]}" >"$WORK/$1.log" 2>&1 &
    PID=$!
    disown "$PID"
    PIDS+=("$PID")
    wait_ready "$port"
    ADDR=127.0.0.1:$port
}

# write_cfg NAME EXTRA_LINES: a zoo.cfg in $WORK/NAME; prints the port.
write_cfg() {
    local name=$1 extra=${2:-} dir=$WORK/$1 port
    port=$(free_port)
    mkdir -p "$dir/data"
    cat >"$dir/zoo.cfg" <<EOC
tickTime=2000
dataDir=$dir/data
clientPort=$port
clientPortAddress=127.0.0.1
admin.enableServer=false
4lw.commands.whitelist=*
maxClientCnxns=0
$extra
EOC
    echo "$port"
}

# The command that (re)starts server NAME in the background, writing its
# pid to $WORK/NAME/restarted.pid: usable as a timeline --event.
rk_cmd() {
    local dir=$WORK/$1
    echo "RUST_LOG=${RUST_LOG:-warn} $RINGKEEPER --config $dir/zoo.cfg >>$dir/server.log 2>&1 & echo \$! >$dir/restarted.pid"
}

zk_cmd() {
    local dir=$WORK/$1 jopts=""
    grep -q '^forceSync=no' "$dir/zoo.cfg" && jopts="-Dzookeeper.forceSync=no"
    echo "java $jopts $ZK_JVM_OPTS -Dzookeeper.log.dir=$dir -Xmx$ZK_HEAP -cp $ZK_CONF_DIR:$ZK_JAR:$ZK_NETTY org.apache.zookeeper.server.quorum.QuorumPeerMain $dir/zoo.cfg >>$dir/server.log 2>&1 & echo \$! >$dir/restarted.pid"
}

# start_rk NAME [EXTRA_CFG] / start_zk NAME [EXTRA_CFG]: starts the server,
# waits until it serves, and sets ADDR to 127.0.0.1:PORT and PID.
start_rk() {
    local port
    port=$(write_cfg "$1" "${2:-}")
    RUST_LOG=${RUST_LOG:-warn} "${SERVER_TASKSET[@]}" "$RINGKEEPER" --config "$WORK/$1/zoo.cfg" >"$WORK/$1/server.log" 2>&1 &
    PID=$!
    disown "$PID"
    PIDS+=("$PID")
    wait_ready "$port"
    ADDR=127.0.0.1:$port
}

start_zk() {
    local port jopts=()
    [ -f "$ZK_JAR" ] || { echo "Apache ZooKeeper is not installed: apt-get install -y zookeeper" >&2; exit 1; }
    port=$(write_cfg "$1" "${2:-}")
    case "${2:-}" in *forceSync=no*) jopts=(-Dzookeeper.forceSync=no) ;; esac
    # shellcheck disable=SC2206 # ZK_JVM_OPTS is a list of words
    jopts+=($ZK_JVM_OPTS)
    "${SERVER_TASKSET[@]}" java "${jopts[@]}" -Dzookeeper.log.dir="$WORK/$1" -Xmx"$ZK_HEAP" -cp "$ZK_CONF_DIR:$ZK_JAR:$ZK_NETTY" \
        org.apache.zookeeper.server.quorum.QuorumPeerMain "$WORK/$1/zoo.cfg" >"$WORK/$1/server.log" 2>&1 &
    PID=$!
    disown "$PID"
    PIDS+=("$PID")
    wait_ready "$port"
    ADDR=127.0.0.1:$port
}

# srvr's Mode line of the server at IP:PORT (empty if it does not answer).
mode_at() {
    timeout 2 bash -c "exec 3<>/dev/tcp/${1%:*}/${1##*:} && printf srvr >&3 && cat <&3" 2>/dev/null |
        sed -n 's/^Mode: //p'
}

# start_ensemble NAME FLAVOR BASE N TICK_MS: N members (FLAVOR rk or zk) on
# 127.0.0.(BASE+1..BASE+N), member i in $WORK/NAME-i (so rk_cmd/zk_cmd
# NAME-i restart it), syncLimit 5, initLimit 10. Waits until every member
# leads or follows. Sets ENSEMBLE (the comma list of client addresses),
# MEMBER_ADDR[i] and MEMBER_PID[i] (1-based). ENSEMBLE_EXTRA_CFG (lines)
# is appended to every member's zoo.cfg, e.g. forceSync=no, and
# ENSEMBLE_EXTRA_CFG_<i> to member i's only.
start_ensemble() {
    local name=$1 flavor=$2 base=$3 n=$4 tick=$5 i ports=() servers="" dir port q e ip ok own
    MEMBER_ADDR=()
    MEMBER_PID=()
    for i in $(seq 1 "$n"); do
        ports+=("$(free_port) $(free_port) $(free_port)")
    done
    for i in $(seq 1 "$n"); do
        read -r _ q e <<<"${ports[$((i - 1))]}"
        servers+="server.$i=127.0.0.$((base + i)):$q:$e"$'\n'
    done
    ENSEMBLE=""
    for i in $(seq 1 "$n"); do
        dir=$WORK/$name-$i
        ip=127.0.0.$((base + i))
        read -r port _ _ <<<"${ports[$((i - 1))]}"
        mkdir -p "$dir/data"
        echo "$i" >"$dir/data/myid"
        own=ENSEMBLE_EXTRA_CFG_$i
        cat >"$dir/zoo.cfg" <<EOC
tickTime=$tick
initLimit=10
syncLimit=5
dataDir=$dir/data
clientPort=$port
clientPortAddress=$ip
admin.enableServer=false
4lw.commands.whitelist=*
maxClientCnxns=0
$servers${ENSEMBLE_EXTRA_CFG:-}
${!own:-}
EOC
        if [ "$flavor" = rk ]; then
            RUST_LOG=${RUST_LOG:-warn} "$RINGKEEPER" --config "$dir/zoo.cfg" >"$dir/server.log" 2>&1 &
        else
            # shellcheck disable=SC2086 # ZK_JVM_OPTS is a list of words
            java $ZK_JVM_OPTS -Dzookeeper.log.dir="$dir" -Xmx"$ZK_HEAP" -cp "$ZK_CONF_DIR:$ZK_JAR:$ZK_NETTY" \
                org.apache.zookeeper.server.quorum.QuorumPeerMain "$dir/zoo.cfg" >"$dir/server.log" 2>&1 &
        fi
        PIDS+=("$!")
        MEMBER_PID[i]=$!
        echo "$!" >"$dir/pid"
        disown "$!"
        MEMBER_ADDR[i]=$ip:$port
        ENSEMBLE+="${ENSEMBLE:+,}$ip:$port"
    done
    for i in $(seq 1 "$n"); do
        ok=""
        for _ in $(seq 1 600); do
            case "$(mode_at "${MEMBER_ADDR[i]}")" in leader | follower) ok=1; break ;; esac
            sleep 0.1
        done
        [ -n "$ok" ] || {
            echo "$name member $i did not come up; its log:" >&2
            tail -20 "$WORK/$name-$i/server.log" >&2
            exit 1
        }
    done
}

# make_pki DIR: a fresh CA (DIR/ca.pem), a server key store for
# 127.0.0.1-60 (start_ensemble's members too) and localhost (DIR/server.pem: PKCS#8 key, certificate, CA, as both
# ringkeeper and ZooKeeper's PemReader read it) and a client certificate
# (DIR/client.crt, DIR/client.key), ECDSA P-256, by openssl. Sets TLS_CFG:
# the zoo.cfg lines for TLS and plaintext on clientPort with client
# certificates required (authProvider.x509: with port unification alone
# ZooKeeper 3.8 does not register the x509 provider and closes every TLS
# connection that presents a certificate), and the load generator's
# RK_LOADGEN_TLS_* variables.
make_pki() {
    local dir=$1 who san
    san=$(printf 'IP:127.0.0.%s,' $(seq 1 60))DNS:localhost
    mkdir -p "$dir"
    (
        cd "$dir"
        openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out ca.key 2>/dev/null
        openssl req -x509 -new -key ca.key -subj "/CN=ringkeeper tuning CA" -days 2 -out ca.pem
        for who in server client; do
            openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out $who.key 2>/dev/null
            openssl req -new -key $who.key -subj "/CN=$who" -out $who.csr
            printf 'subjectAltName=%s\n' "$san" >$who.ext
            openssl x509 -req -in $who.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 \
                -extfile $who.ext -out $who.crt 2>/dev/null
        done
        cat server.key server.crt ca.pem >server.pem
    )
    TLS_CFG="client.portUnification=true
authProvider.x509=org.apache.zookeeper.server.auth.X509AuthenticationProvider
ssl.keyStore.location=$dir/server.pem
ssl.trustStore.location=$dir/ca.pem
ssl.clientAuth=need"
    export RK_LOADGEN_TLS_CA=$dir/ca.pem RK_LOADGEN_TLS_CERT=$dir/client.crt \
        RK_LOADGEN_TLS_KEY=$dir/client.key
}

# The 1-based index of the member of the last start_ensemble that leads
# (empty if none does).
leader_index() {
    local i
    for i in "${!MEMBER_ADDR[@]}"; do
        [ "$(mode_at "${MEMBER_ADDR[i]}")" = leader ] && { echo "$i"; return; }
    done
}

# The 1-based indexes of the members of the last start_ensemble other than
# member LEADER, space-separated, in order.
follower_indexes() {
    local i
    for i in "${!MEMBER_ADDR[@]}"; do
        [ "$i" = "$1" ] || printf '%s ' "$i"
    done
}

# Kills every member of ensemble NAME (and any restarted one) and removes
# its dirs.
stop_ensemble() {
    local name=$1 i
    for i in "${!MEMBER_PID[@]}"; do
        kill -9 "${MEMBER_PID[i]}" 2>/dev/null || true
    done
    for f in "$WORK/$name"-*/restarted.pid; do
        [ -f "$f" ] && kill -9 "$(cat "$f")" 2>/dev/null || true
    done
    rm -rf "$WORK/$name"-*
}
