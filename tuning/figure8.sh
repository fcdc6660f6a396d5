#!/usr/bin/env bash
# The ZooKeeper paper's Figure 8 on a 5-server ensemble: throughput every
# 100 ms at 30% writes while servers fail and recover:
#   1. a follower fails (5 s) and recovers (8 s);
#   2. another follower fails (11 s) and recovers (14 s);
#   3. the leader fails (17 s) and recovers (20 s);
#   4. two followers fail (23 s) and recover (26 s);
#   5. the leader fails (29 s) and recovers (32 s).
# Failures are kill -9; "the leader" is whoever leads at that moment (srvr).
# Usage: tuning/figure8.sh rk|zk [loadgen timeline args...]
source "$(dirname "$0")/lib.sh"
which=${1:-rk}
shift || true
case $which in rk | zk) ;; *) echo "usage: $0 rk|zk [loadgen args]" >&2; exit 2 ;; esac
build
name=f8$which
start_ensemble "$name" "$which" $([ "$which" = rk ] && echo 60 || echo 70) 5 2000
for i in 1 2 3 4 5; do
    if [ "$which" = rk ]; then rk_cmd "$name-$i"; else zk_cmd "$name-$i"; fi >"$WORK/$name-$i/restart.sh"
    echo "${MEMBER_ADDR[i]}" >"$WORK/$name-$i/addr"
done
# The events' script: kill-leader, kill-followers K, restart (every member
# it killed). Members it restarts write their pid to restarted.pid.
cat >"$WORK/event.sh" <<EOS
#!/usr/bin/env bash
W=$WORK; NAME=$name
EOS
cat >>"$WORK/event.sh" <<'EOS'
pid_of() { if [ -f "$W/$NAME-$1/restarted.pid" ]; then cat "$W/$NAME-$1/restarted.pid"; else cat "$W/$NAME-$1/pid"; fi; }
mode_of() {
    local a; a=$(cat "$W/$NAME-$1/addr")
    timeout 0.5 bash -c "exec 3<>/dev/tcp/${a%:*}/${a##*:} && printf srvr >&3 && cat <&3" 2>/dev/null | sed -n 's/^Mode: //p'
}
down() { kill -9 "$(pid_of "$1")" 2>/dev/null; echo "$1" >>"$W/down"; echo "$1" >>"$W/failed"; echo "$(date +%T.%N) killed $1 ($2)" >>"$W/events.log"; }
case $1 in
    kill-leader)
        for i in 1 2 3 4 5; do [ "$(mode_of "$i")" = leader ] && { down "$i" leader; exit 0; }; done
        echo "no leader" >>"$W/events.log"; exit 1 ;;
    kill-followers)
        # Followers not failed before first ("another follower").
        k=$2
        for pass in fresh any; do
            for i in 5 4 3 2 1; do
                [ "$k" -gt 0 ] || break
                if [ "$pass" = fresh ] && grep -qx "$i" "$W/failed" 2>/dev/null; then continue; fi
                grep -qx "$i" "$W/down" 2>/dev/null && continue
                [ "$(mode_of "$i")" = follower ] && { down "$i" follower; k=$((k - 1)); }
            done
        done ;;
    restart)
        [ -f "$W/down" ] || exit 0
        while read -r i; do bash "$W/$NAME-$i/restart.sh"; echo "$(date +%T.%N) restarted $i" >>"$W/events.log"; done <"$W/down"
        rm -f "$W/down" ;;
esac
EOS
ev="bash $WORK/event.sh"
"$LOADGEN" timeline --target "$which=$ENSEMBLE" --read-pct 70 --duration-s "${DURATION:-36}" --warmup-s 3 \
    --event "5:$ev kill-followers 1" --event "8:$ev restart" \
    --event "11:$ev kill-followers 1" --event "14:$ev restart" \
    --event "17:$ev kill-leader" --event "20:$ev restart" \
    --event "23:$ev kill-followers 2" --event "26:$ev restart" \
    --event "29:$ev kill-leader" --event "32:$ev restart" \
    "$@" --json "$OUT/figure8-$which.json" --csv "$OUT/figure8-$which.csv" --plot "$OUT/figure8-$which.svg"
cat "$WORK/events.log"
