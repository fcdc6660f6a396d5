#!/usr/bin/env bash
# Starts a server under callgrind and reads its dumps, for the
# instruction-count scripts (idle-, saturated- and follower-instructions.sh).
# Source it after lib.sh; don't run it.
# Needs valgrind's callgrind_annotate.

# cg_start NAME: a standalone ringkeeper ($RINGKEEPER, config
# $WORK/NAME/zoo.cfg from write_cfg) under callgrind, dumping to
# $WORK/cg.out; sets CG_PORT and CG_PID once it serves, and leaves the pid
# to lib.sh's cleanup. CG_OPTS adds callgrind options (e.g.
# CG_OPTS=--cache-sim=yes for simulated cache misses).
cg_start() {
    CG_PORT=$(write_cfg "$1")
    # shellcheck disable=SC2086 # CG_OPTS is a list of options
    valgrind --tool=callgrind ${CG_OPTS:-} --callgrind-out-file="$WORK/cg.out" \
        "$RINGKEEPER" --config "$WORK/$1/zoo.cfg" >"$WORK/$1/server.log" 2>&1 &
    CG_PID=$!
    PIDS+=("$CG_PID")
    wait_ready "$CG_PORT"
}

# inclusive PATTERN FILE: the largest inclusive count on a line of FILE
# (callgrind_annotate --inclusive=yes) naming PATTERN: callgrind also lists
# a function's inlined parts under their own files.
inclusive() {
    { grep -F -- "$1" "$2" || true; } | awk '{gsub(",", "", $1); if ($1 + 0 > m) m = $1 + 0} END {print m + 0}'
}

# The main parts of a server's loop, NAME=grep pattern of the function.
# The park's share moves with timing (how often the executor parks per
# request), hence the total without it.
CG_PARTS=(
    "park=glommio::parking::Parker::park"
    "client-ring=ringkeeper::uring::ClientRing::turn "
    "runner=ringkeeper::consensus::runner::run::{{closure}} "
    "apply=ringkeeper::shard::Shard::apply_batch "
    "read-loop=ringkeeper::shard::conn::read_loop::{{closure}} "
    "peer-read=ringkeeper::peer::net::PeerNet::read_quorum::{{closure}} "
    "peer-write=ringkeeper::peer::net::write_stream::{{closure}} "
)

# cg_report FILE COUNT TOP LABEL: the dump's instructions per request
# (COUNT requests), its parts' inclusive counts, the total without the
# park and the TOP functions by their own count, under LABEL.
cg_report() {
    local f=$1 count=$2 top=$3 label=$4 total incl line p n park=0
    [ -f "$f" ] || { echo "no callgrind dump for $label ($f)" >&2; exit 1; }
    total=$(callgrind_annotate "$f" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1; exit}')
    printf '%s: %d instructions per request\n' "$label" $((total / count))
    incl=$f.incl
    callgrind_annotate --inclusive=yes --threshold=100 "$f" 2>/dev/null >"$incl"
    line="  parts (inclusive, per request):"
    for p in "${CG_PARTS[@]}"; do
        n=$(inclusive "${p#*=}" "$incl")
        [ "${p%%=*}" = park ] && park=$n
        # Parts a server does not run (a standalone one has no peers) are
        # left out.
        [ "$n" -gt 0 ] && line+=" ${p%%=*} $((n / count))"
    done
    echo "$line"
    printf '  without the park: %d per request\n' $(((total - park) / count))
    [ "$top" -gt 0 ] || return 0
    echo "  top functions by their own instructions, per request:"
    callgrind_annotate --threshold=100 "$f" 2>/dev/null |
        awk -v n="$count" -v top="$top" -v total="$total" '
            /^-+$/ { sep++; next }
            # The thread entry points come out with the whole count here
            # (callgrind was zeroed while they were on the stack): skipped.
            sep == 6 && $1 ~ /^[0-9,]+$/ && $0 !~ /PROGRAM TOTALS/ {
                c = $1; gsub(",", "", c); c += 0
                if (c >= 0.99 * total) next
                fn = $0; sub(/^ *[0-9,]+ +\([ 0-9.]+%\) +/, "", fn); sub(/ \[.*$/, "", fn)
                sub(/^[^ ]*\.(rs|c|h|S):/, "", fn); sub(/^\?\?\?:/, "", fn)
                if (shown < top) { printf "    %7.0f  %s\n", c / n, substr(fn, 1, 110); shown++ }
            }'
}
