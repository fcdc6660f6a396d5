#!/usr/bin/env bash
# Issue 27 §1: the kernel's floor for ZooKeeper-framed request/response on
# loopback, measured with ringkeeper-loadgen as the client. Builds
# tuning/request-floor.c (a bare server: no tree, no log) and the load
# generator, then for every variant x sessions x outstanding x reads point:
# a fresh floor server pinned to SERVER_CPU, `ringkeeper-loadgen mix`
# pinned to CLIENT_CPU (one executor), and, inside the loadgen's measured
# span, a window of `perf stat -e raw_syscalls:sys_enter,context-switches,
# task-clock -p SERVER` bracketed by two SIGUSR1 snapshots of the server's
# own counters (getData+setData answered, getrusage CPU of all its threads,
# the SQPOLL thread included). Per point:
#   ops/s         the loadgen's measured throughput
#   CPU us/op     server CPU (getrusage, all threads) / ops the server
#                 answered in the window; perf's task-clock is the cross-check
#   syscalls/op   perf raw_syscalls:sys_enter / ops
#   cs/op         perf context-switches / ops
#   srv CPU %     server CPU over the window, % of one core
#   client busy   the loadgen's own cores busy (1.0 = its core saturated)
#   other %       CPU used by anything else on the machine during the window
#                 (% of one core): other builds or tests skew the point
# Before each point it waits (at most QUIET_MAX_S) for the machine to be
# quiet (< QUIET_PCT % of a core busy).
#
# Usage: tuning/request-floor.sh
# Environment (defaults in brackets):
#   VARIANTS ["epoll uring sqpoll"]  also uring-zc / sqpoll-zc (--zc)
#   SESSIONS ["32 1000"]  OUTSTANDING ["1 8 100"]  READS ["0 50 100"]
#   ROUNDS [1] (each point measured ROUNDS times; the table gives medians
#   and the range of CPU us/op)
#   VALUE_BYTES [1024]  DURATION_S [3]  WARMUP_S [1]  SLACK_S [1] (the
#   loadgen measures DURATION_S + SLACK_S, the window is inside that)
#   SERVER_CPU [1]  CLIENT_CPU [0]  FLOOR_ARGS [""] (extra request-floor flags)
#   QUIET_MAX_S [30]  QUIET_PCT [20]  RETRIES [2]  OTHERS_MAX [25]: a point
#   is measured again (at most RETRIES times) when its window missed the
#   loadgen's steady state or other processes used more than OTHERS_MAX %
#   of a core in it
#   OUT [tuning/results/2026-11-27/request-floor.md]
# Every process it starts is killed, by pid, on every exit path.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
LOADGEN=$TARGET_DIR/release/ringkeeper-loadgen
VARIANTS=${VARIANTS:-"epoll uring sqpoll"}
SESSIONS=${SESSIONS:-"32 1000"}
OUTSTANDING=${OUTSTANDING:-"1 8 100"}
READS=${READS:-"0 50 100"}
VALUE_BYTES=${VALUE_BYTES:-1024}
DURATION_S=${DURATION_S:-3}
WARMUP_S=${WARMUP_S:-1}
SERVER_CPU=${SERVER_CPU:-1}
CLIENT_CPU=${CLIENT_CPU:-0}
FLOOR_ARGS=${FLOOR_ARGS:-}
QUIET_MAX_S=${QUIET_MAX_S:-30}
QUIET_PCT=${QUIET_PCT:-20}
RETRIES=${RETRIES:-2}
ROUNDS=${ROUNDS:-1}
export OTHERS_MAX=${OTHERS_MAX:-25}
OUT=${OUT:-$ROOT/tuning/results/2026-11-27/request-floor.md}
# The loadgen measures DURATION_S + SLACK_S; the window is DURATION_S -
# 2 x LAG_S long and starts LAG_S into the loadgen's measured span (and
# after every session connected): the slack absorbs a late start of the
# window (the span's start is seen from outside, with ss, which is slow on a
# busy machine or with 1,000 connections).
LAG_S=0.3
SLACK_S=${SLACK_S:-1}
LG_DURATION_S=$(python3 -c "print($DURATION_S + $SLACK_S)")

WORK=$(mktemp -d "${TMPDIR:-/tmp}/request-floor.XXXXXX")
PIDS=()

cleanup() {
    local p
    for p in "${PIDS[@]}"; do
        kill -9 "$p" 2>/dev/null || true
    done
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# forget PID: a process that ended (or was waited for) leaves the kill list.
forget() {
    local p keep=()
    for p in "${PIDS[@]}"; do [ "$p" = "$1" ] || keep+=("$p"); done
    PIDS=("${keep[@]}")
}

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Busy jiffies of the whole machine (user+nice+system+irq+softirq+steal).
busy_jiffies() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9; exit }' /proc/stat; }
# utime+stime of a process (all its threads), in jiffies.
proc_jiffies() { awk '{ print $14 + $15 }' "/proc/$1/stat" 2>/dev/null || echo 0; }

# Waits until less than QUIET_PCT % of a core is busy over half a second
# (at most QUIET_MAX_S); prints the last busy %.
wait_quiet() {
    local hz deadline a b pct
    hz=$(getconf CLK_TCK)
    deadline=$((SECONDS + QUIET_MAX_S))
    while :; do
        a=$(busy_jiffies)
        sleep 0.5
        b=$(busy_jiffies)
        pct=$(( (b - a) * 100 * 2 / hz ))
        if [ "$pct" -lt "$QUIET_PCT" ] || [ "$SECONDS" -ge "$deadline" ]; then
            echo "$pct"
            return
        fi
    done
}

# --- build
if [ ! -f /usr/include/liburing.h ]; then
    echo "liburing headers missing: apt-get install -y liburing-dev" >&2
    exit 1
fi
FLOOR=$WORK/request-floor
cc -O2 -Wall -o "$FLOOR" "$ROOT/tuning/request-floor.c" -luring
# Another build in the same tree holds cargo's lock: cargo waits for it.
(cd "$ROOT" && cargo build --release -q -p ringkeeper-loadgen)

# --- perf needs tracefs for raw_syscalls
if [ -z "$(ls /sys/kernel/tracing/events 2>/dev/null)" ]; then
    mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null || true
fi
if ! perf stat -e raw_syscalls:sys_enter -x, true >/dev/null 2>&1; then
    echo "perf cannot count raw_syscalls:sys_enter (tracefs not mounted, or perf_event_paranoid)" >&2
    exit 1
fi
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
mkdir -p "$(dirname "$OUT")"
ROWS=$WORK/rows.jsonl
: >"$ROWS"
HZ=$(getconf CLK_TCK)
WARMUP_NS=$(python3 -c "print(int($WARMUP_S * 1e9))")
DURATION_NS=$(python3 -c "print(int($DURATION_S * 1e9))")
LAG_NS=$(python3 -c "print(int($LAG_S * 1e9))")

# sleep_until NS: until CLOCK_REALTIME (date +%s%N) reaches NS.
sleep_until() {
    local ms=$(( ($1 - $(date +%s%N)) / 1000000 ))
    [ "$ms" -gt 0 ] && sleep "$((ms / 1000)).$(printf %03d $((ms % 1000)))"
    return 0
}

# measure VARIANT SESSIONS OUTSTANDING READS: one point, one JSON row.
measure() {
    local variant=$1 sessions=$2 outstanding=$3 reads=$4 mode extra=() port spid lpid ppid quiet
    local b0 b1 l0 l1 w0 w1 t0 tfirst tconn wstart wend n i seen rc=0
    case $variant in
    epoll | uring | sqpoll) mode=$variant ;;
    uring-zc | sqpoll-zc) mode=${variant%-zc}; extra=(--zc) ;;
    *) echo "unknown variant $variant" >&2; exit 1 ;;
    esac
    # shellcheck disable=SC2206 # FLOOR_ARGS is a list of words
    extra+=($FLOOR_ARGS)
    quiet=$(wait_quiet)
    port=$(free_port)
    taskset -c "$SERVER_CPU" "$FLOOR" "$mode" "$port" "$VALUE_BYTES" "${extra[@]}" >"$WORK/server.out" 2>&1 &
    spid=$!
    PIDS+=("$spid")
    for i in $(seq 200); do
        grep -qs '^ready' "$WORK/server.out" && break
        kill -0 "$spid" 2>/dev/null || { cat "$WORK/server.out" >&2; exit 1; }
        sleep 0.05
    done
    # perf attaches now (its start-up is slow on a busy machine), counting
    # disabled: the window enables it. Read-write opens of the fifos do not
    # block if perf never opens its ends.
    rm -f "$WORK/ctl" "$WORK/ack" "$WORK/perf.txt"
    mkfifo "$WORK/ctl" "$WORK/ack"
    taskset -c "$CLIENT_CPU" perf stat -x, -o "$WORK/perf.txt" -D -1 \
        --control "fifo:$WORK/ctl,$WORK/ack" \
        -e raw_syscalls:sys_enter,context-switches,task-clock -p "$spid" >/dev/null 2>&1 &
    ppid=$!
    PIDS+=("$ppid")
    exec 5<>"$WORK/ctl" 6<>"$WORK/ack"
    echo disable >&5  # answered once perf is counting (disabled)
    read -r -t 20 _ <&6 || echo "perf did not answer on its control fifo" >&2
    rm -f "$WORK/lg.json"
    taskset -c "$CLIENT_CPU" "$LOADGEN" mix --target "floor=127.0.0.1:$port" \
        --sessions "$sessions" --outstanding "$outstanding" --reads "$reads" \
        --value-bytes "$VALUE_BYTES" --duration-s "$LG_DURATION_S" --warmup-s "$WARMUP_S" \
        --threads 1 --pin "$CLIENT_CPU" -q --json "$WORK/lg.json" >"$WORK/lg.out" 2>"$WORK/lg.err" &
    lpid=$!
    PIDS+=("$lpid")
    # The loadgen's warm-up starts as its set-up session (which creates the
    # znodes) closes, or, if that was missed, when its sessions connect:
    # the window is LAG_S into the measured span, after every session
    # connected, and ends LAG_S before the span does. Connections are
    # counted with ss, so the server is not disturbed.
    t0=$(date +%s%N)
    tfirst=0
    seen=0
    for i in $(seq 1200); do
        n=$(ss -Htn state established "( sport = :$port )" | wc -l)
        if [ "$tfirst" = 0 ]; then
            [ "$n" -ge 1 ] && seen=1
            if { [ "$seen" = 1 ] && [ "$n" = 0 ]; } || [ "$n" -ge "$(( sessions < 2 ? 1 : 2 ))" ]; then
                tfirst=$(date +%s%N)
            fi
        fi
        [ "$n" -ge "$sessions" ] && [ "$tfirst" != 0 ] && break
        kill -0 "$lpid" 2>/dev/null || break
        sleep 0.02
    done
    tconn=$(date +%s%N)
    [ "$tfirst" = 0 ] && tfirst=$tconn
    wstart=$(( tfirst + WARMUP_NS + LAG_NS ))
    [ "$wstart" -lt $(( tconn + 100000000 )) ] && wstart=$(( tconn + 100000000 ))
    wend=$(( wstart + DURATION_NS - 2 * LAG_NS ))
    sleep_until "$wstart"
    l0=$(proc_jiffies "$lpid")
    b0=$(busy_jiffies)
    w0=$(date +%s%N)
    echo enable >&5
    read -r -t 5 _ <&6 || true
    kill -USR1 "$spid"
    sleep_until "$wend"
    kill -USR1 "$spid"
    echo disable >&5
    read -r -t 5 _ <&6 || true
    w1=$(date +%s%N)
    b1=$(busy_jiffies)
    l1=$(proc_jiffies "$lpid")
    kill -INT "$ppid" 2>/dev/null || true
    wait "$ppid" || true
    forget "$ppid"
    exec 5>&- 6<&-
    # The loadgen ends after its span (draining included); bounded wait.
    for i in $(seq $(( (${DURATION_S%.*} + ${WARMUP_S%.*} + 60) * 10 ))); do
        kill -0 "$lpid" 2>/dev/null || break
        sleep 0.1
    done
    kill -9 "$lpid" 2>/dev/null || true
    wait "$lpid" || rc=$?
    forget "$lpid"
    kill -TERM "$spid" 2>/dev/null || true
    wait "$spid" || true
    forget "$spid"
    python3 - "$WORK" "$variant" "$sessions" "$outstanding" "$reads" "$quiet" \
        "$((b1 - b0))" "$((l1 - l0))" "$HZ" "$rc" "$(( (w1 - w0) / 1000 ))" \
        "$(( (tconn - tfirst) / 1000000 ))" >>"$ROWS" <<'EOF'
import json, os, sys
work, variant, sessions, outstanding, reads, quiet, busy, lg_jiffies, hz, rc, outer_us, conn_ms = sys.argv[1:]
sessions, outstanding, reads, hz = int(sessions), int(outstanding), int(reads), int(hz)
busy, lg_jiffies = int(busy), int(lg_jiffies)
row = dict(variant=variant, sessions=sessions, outstanding=outstanding, reads=reads,
           quiet_pct=int(quiet), connect_ms=int(conn_ms), notes=[])
outer_s = int(outer_us) / 1e6
srv = open(os.path.join(work, "server.out")).read().splitlines()
snaps = [l.split() for l in srv if l.startswith("snap ")]
row["server_notes"] = [l for l in srv if l.startswith(("note:", "ring:", "buffers:"))]
totals = [l for l in srv if l.startswith("totals ")]
if totals:
    t = totals[0].split()
    row["totals"] = dict(zip(t[1::2], t[2::2]))
lg = None
try:
    lg = json.load(open(os.path.join(work, "lg.json")))
except Exception:
    err = open(os.path.join(work, "lg.err")).read().strip().splitlines()
    row["notes"].append("loadgen failed (exit %s): %s" % (rc, err[-1] if err else "no output"))
if lg:
    p = lg["results"]["points"][0] if "results" in lg else lg["points"][0]
    row["ops_per_s"] = p["ops_per_s"]
    row["client_busy"] = p["client"]["cpu_cores_busy"]
    row["errors"] = p["error_total"]
    row["disconnects"] = p["disconnects"]
    row["never_connected"] = p["sessions_never_connected"]
    row["counter_diff_pct"] = p["counters"].get("diff_pct")
    if p["error_total"]:
        row["notes"].append("%d errors %s" % (p["error_total"], p["errors"]))
    if p["disconnects"] or p["sessions_never_connected"]:
        row["notes"].append("%d disconnects, %d sessions never connected"
                            % (p["disconnects"], p["sessions_never_connected"]))
perf = {}
for l in open(os.path.join(work, "perf.txt")):
    f = l.strip().split(",")
    if len(f) >= 3 and f[2]:
        try:
            perf[f[2]] = float(f[0])
        except ValueError:
            perf[f[2]] = None
if len(snaps) >= 2:
    a, b = snaps[0], snaps[-1]
    wall = (int(b[1]) - int(a[1])) / 1e9
    ops = int(b[2]) - int(a[2])
    cpu_us = int(b[6]) - int(a[6])
    row.update(window_s=wall, window_ops=ops, server_ops_per_s=ops / wall if wall else 0,
               conns=(int(a[9]), int(b[9])), cpu_pct=cpu_us / 1e4 / wall if wall else 0,
               rusage_cs=(int(b[7]) + int(b[8])) - (int(a[7]) + int(a[8])))
    # jiffies over the outer window (perf enable .. disable), CPU us over
    # the inner one: scale the server's to the outer.
    other = busy / hz - cpu_us / 1e6 * (outer_s / wall if wall else 1) - lg_jiffies / hz
    row["other_pct"] = max(0.0, other) * 100 / outer_s if outer_s else 0
    if ops:
        row["cpu_us_per_op"] = cpu_us / ops
        sc, cs, tc = (perf.get("raw_syscalls:sys_enter"), perf.get("context-switches"),
                      perf.get("task-clock"))
        row["syscalls_per_op"] = sc / ops if sc is not None else None
        row["cs_per_op"] = cs / ops if cs is not None else None
        row["perf_task_clock_us_per_op"] = tc * 1e3 / ops if tc is not None else None
    if (int(a[9]), int(b[9])) != (sessions, sessions):
        row["notes"].append("server had %s/%s connections at the window's ends, want %d"
                            % (a[9], b[9], sessions))
    if lg and ops and abs(row["server_ops_per_s"] / row["ops_per_s"] - 1) > 0.10:
        row["notes"].append("server rate in window %.0f/s vs loadgen %.0f/s"
                            % (row["server_ops_per_s"], row["ops_per_s"]))
else:
    row["notes"].append("no server snapshots")
row["retry"] = bool(
    "ops_per_s" not in row or "cpu_us_per_op" not in row
    or any(n.startswith(("server had", "server rate")) for n in row["notes"])
    or row.get("other_pct", 0) > int(os.environ.get("OTHERS_MAX", "25")))
if row.get("other_pct", 0) > int(os.environ.get("OTHERS_MAX", "25")):
    row["notes"].append("machine busy: others used %.0f%% of a core" % row["other_pct"])
print(json.dumps(row))
EOF
    tail -1 "$ROWS" | python3 -c '
import json, sys
r = json.loads(sys.stdin.read())
f = lambda k, fmt: (fmt % r[k]) if r.get(k) is not None else "-"
print("%-9s %4d sess %3d out %3d%% reads: %s ops/s, %s us/op, %s syscalls/op, %s cs/op, srv %s%%, others %s%% %s" % (
    r["variant"], r["sessions"], r["outstanding"], r["reads"], f("ops_per_s", "%.0f"),
    f("cpu_us_per_op", "%.2f"), f("syscalls_per_op", "%.3f"), f("cs_per_op", "%.3f"),
    f("cpu_pct", "%.0f"), f("other_pct", "%.0f"), "; ".join(r["notes"])), file=sys.stderr)'
}

# Variants side by side per point (their order flips point by point and
# round by round, so drift in the machine's load favours none).
point=0
for sessions in $SESSIONS; do
    for outstanding in $OUTSTANDING; do
        for reads in $READS; do
            for round in $(seq "$ROUNDS"); do
                order=$VARIANTS
                if [ $(( (point + round) % 2 )) = 1 ]; then
                    order=$(echo "$VARIANTS" | tr ' ' '\n' | tac | tr '\n' ' ')
                fi
                for variant in $order; do
                    for attempt in $(seq $((RETRIES + 1))); do
                        measure "$variant" "$sessions" "$outstanding" "$reads"
                        # A window that missed the steady state, or a busy
                        # machine, is measured again.
                        if [ "$attempt" -le "$RETRIES" ] && tail -1 "$ROWS" | grep -q '"retry": true'; then
                            sed -i '$d' "$ROWS"
                            echo "(measuring that point again)" >&2
                            continue
                        fi
                        break
                    done
                done
            done
            point=$((point + 1))
        done
    done
done

# --- the table
python3 - "$ROWS" "$OUT" <<EOF
import json, subprocess, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
def sh(c):
    try:
        return subprocess.run(c, shell=True, capture_output=True, text=True).stdout.strip()
    except Exception:
        return "?"
commit = sh("git -C '$ROOT' rev-parse --short HEAD")
notes = sorted({n for r in rows for n in r.get("server_notes", [])
                if n.startswith(("note:", "ring:"))})
out = []
out.append("# Request floor: ZooKeeper-framed getData/setData on loopback, no tree, no log")
out.append("")
out.append("\`tuning/request-floor.sh\` on %s (commit %s), kernel %s, liburing %s, %s cores (%s)."
           % (sh("date -u +%Y-%m-%dT%H:%MZ"), commit, sh("uname -r"),
              sh("dpkg-query -W -f='\${Version}' liburing2 2>/dev/null") or "?", sh("nproc"),
              sh("grep -m1 'model name' /proc/cpuinfo | cut -d: -f2").strip()))
out.append("")
dirty = " ".join(l.split()[-1] for l in sh("git -C '$ROOT' status --short -- loadgen").splitlines())
out.append("- **Load generator:** built by this script from the working tree%s." % (
    " (uncommitted changes in %s: not in the request path, which is engine.rs and session.rs)" % dirty
    if dirty and "engine.rs" not in dirty and "session.rs" not in dirty
    else " (uncommitted changes in %s)" % dirty if dirty else ", clean"))
out.append("- **Pinning:** the floor server runs on CPU $SERVER_CPU and the load generator on CPU $CLIENT_CPU "
           "(\`taskset\`, plus \`--threads 1 --pin $CLIENT_CPU\`); sqpoll's submission thread "
           "(iou-sqp) is pinned to the server's CPU $SERVER_CPU, so every variant gets one core.")
out.append("- **Client:** \`ringkeeper-loadgen mix --value-bytes $VALUE_BYTES --warmup-s $WARMUP_S "
           "--duration-s $LG_DURATION_S --threads 1\`, one point per run, a fresh server per point; "
           "ops/s is the loadgen's, over its measured span.")
wins = [r["window_s"] for r in rows if r.get("window_s")]
out.append("- **Per-op figures** are over a window (%.2f s on average) inside the loadgen's measured span, bracketed "
           "by the server's own snapshots (SIGUSR1). They are divided by the getData+setData the server "
           "answered in that window. CPU is getrusage(RUSAGE_SELF), which covers all threads, the SQPOLL "
           "thread included. Syscalls and context switches come from \`perf stat -e raw_syscalls:sys_enter,"
           "context-switches -p PID\` over the same window." % (sum(wins) / max(1, len(wins))))
if $ROUNDS > 1:
    out.append("- **Rounds:** every point was measured $ROUNDS times, with the variants side by side and "
               "their order alternating. Each figure is the median over the rounds; CPU us/op also gives "
               "the range in brackets.")
out.append("- **Loopback:** the sending CPU also runs the receiver's TCP receive path (softirq). So the "
           "server's CPU per op includes the client's receive of the replies, and the loadgen's CPU "
           "includes the server's receive of the requests.")
out.append("- **Columns:** *srv CPU* is the server's CPU in the window, as a percentage of one core. "
           "*client busy* is the loadgen's cores busy (1.00: the client's core is saturated and the "
           "throughput is the client's). *others* is the CPU that other processes on this machine used "
           "in the window, as a percentage of a core.")
agree = sorted(abs(r["perf_task_clock_us_per_op"] / r["cpu_us_per_op"] - 1) * 100 for r in rows
               if r.get("perf_task_clock_us_per_op") and r.get("cpu_us_per_op"))
if agree:
    out.append("- **Cross-check:** perf's task-clock per op agrees with getrusage's CPU per op "
               "within %.1f%% (median) and %.1f%% (worst point)." % (agree[len(agree) // 2], agree[-1]))
if any(r["variant"].startswith("sqpoll") for r in rows):
    out.append("- **sqpoll** shares the server's one core between the app thread and its poller. "
               "The poller spins until it has been idle for 10 ms, so the server uses ~100% of its "
               "core at every point, and its CPU per op is roughly 1/throughput. It is not a "
               "one-core technique: it pays off only on a host with a core to spare for the poller.")
for n in notes:
    out.append("- server: " + n)
out.append("")
out.append("| variant | sessions | outstanding | reads | ops/s | CPU us/op | syscalls/op | ctx sw/op | srv CPU | client busy | others | notes |")
out.append("|---|---|---|---|---|---|---|---|---|---|---|---|")
def med(rs, k):
    v = sorted(r[k] for r in rs if r.get(k) is not None)
    return v[(len(v) - 1) // 2] if v else None
def num(v):
    if v is None:
        return "-"
    return "%.3f" % v if v >= 0.01 or v == 0 else "%.2g" % v
variants = "$VARIANTS".split()
groups = {}
for r in rows:
    groups.setdefault((r["sessions"], variants.index(r["variant"]) if r["variant"] in variants else 99,
                       r["outstanding"], r["reads"]), []).append(r)
for key in sorted(groups):
    rs = groups[key]
    r0 = rs[0]
    cpu = med(rs, "cpu_us_per_op")
    cpus = [r["cpu_us_per_op"] for r in rs if r.get("cpu_us_per_op") is not None]
    cpu_s = "-" if cpu is None else "%.2f" % cpu
    if len(cpus) > 1:
        cpu_s += " (%.2f-%.2f)" % (min(cpus), max(cpus))
    ops = med(rs, "ops_per_s")
    pct = lambda k: "-" if med(rs, k) is None else "%.0f%%" % med(rs, k)
    notes = []
    for i, r in enumerate(rs):
        for n in r["notes"]:
            notes.append(("round %d: " % (i + 1) if len(rs) > 1 else "") + n)
    out.append("| %s | %d | %d | %d%% | %s | %s | %s | %s | %s | %s | %s | %s |" % (
        r0["variant"], r0["sessions"], r0["outstanding"], r0["reads"],
        "-" if ops is None else "%.0f" % ops, cpu_s, num(med(rs, "syscalls_per_op")),
        num(med(rs, "cs_per_op")), pct("cpu_pct"),
        "-" if med(rs, "client_busy") is None else "%.2f" % med(rs, "client_busy"),
        pct("other_pct"), "; ".join(notes)))
text = "\n".join(out) + "\n"
sys.stdout.write(text)
open(sys.argv[2], "w").write(text)
json.dump(rows, open(sys.argv[2].rsplit(".", 1)[0] + ".json", "w"), indent=1)
EOF
