#!/usr/bin/env bash
# A follower that lost its disk syncs a large tree by SNAP. A 3-server
# ensemble (ringkeeper, or Apache ZooKeeper with FLAVOR=zk) is grown to
# ZNODES znodes of VALUE_BYTES bytes (spread over 100 parents, through the
# leader); then a follower is killed, its data dir emptied (myid kept) and
# restarted, and the script waits until it follows again holding the
# leader's zxid. Prints the SNAP's approximate size, how long the resync
# took, and the leader's RSS before and after.
# Usage: tuning/snap-sync.sh [ZNODES] [VALUE_BYTES]   (default 1.5M, 200)
source "$(dirname "$0")/lib.sh"
ZNODES=${1:-1500000}
VALUE_BYTES=${2:-200}
FLAVOR=${FLAVOR:-rk}
export RUST_LOG=${RUST_LOG:-info}
build

zxid_at() {
    timeout 2 bash -c "exec 3<>/dev/tcp/${1%:*}/${1##*:} && printf srvr >&3 && cat <&3" 2>/dev/null |
        sed -n 's/^Zxid: //p'
}
rss_kb() { awk '/^VmRSS/ {print $2}' "/proc/$1/status" 2>/dev/null; }

start_ensemble snap "$FLAVOR" 70 3 2000
leader=$(leader_index)
follower=$(( leader % 3 + 1 ))
echo "leader: server $leader; the follower to resync: server $follower"
"$LOADGEN" scale --target "${MEMBER_ADDR[leader]}" --checkpoints "$ZNODES" --layout spread \
    --value-bytes "$VALUE_BYTES" --sessions 8 --outstanding 100 --max-seconds 600 -q >/dev/null
echo "tree: $ZNODES znodes of $VALUE_BYTES bytes; leader zxid $(zxid_at "${MEMBER_ADDR[leader]}")," \
    "leader RSS $(( $(rss_kb "${MEMBER_PID[leader]}") / 1024 )) MiB"
kill -9 "${MEMBER_PID[follower]}"
dir=$WORK/snap-$follower
find "$dir/data" -mindepth 1 ! -name myid -exec rm -rf {} +
start=$(date +%s.%N)
eval "$( [ "$FLAVOR" = rk ] && rk_cmd "snap-$follower" || zk_cmd "snap-$follower")"
synced=""
for _ in $(seq 1 1200); do
    sleep 0.5
    if [ "$(mode_at "${MEMBER_ADDR[follower]}")" = follower ] &&
        [ "$(zxid_at "${MEMBER_ADDR[follower]}")" = "$(zxid_at "${MEMBER_ADDR[leader]}")" ]; then
        synced=$(date +%s.%N)
        break
    fi
done
echo "leader RSS after: $(( $(rss_kb "${MEMBER_PID[leader]}") / 1024 )) MiB"
grep -h "by SNAP\|Sending snapshot\|peer not reading\|SNAP encoder" "$WORK"/snap-*/server.log | tail -5
if [ -z "$synced" ]; then
    echo "the follower did not resync within 600 s; its log:"
    tail -20 "$dir/server.log"
    stop_ensemble snap
    exit 1
fi
python3 -c "print('resynced by SNAP in %.1f s' % ($synced - $start))"
stop_ensemble snap
