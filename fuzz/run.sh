#!/usr/bin/env bash
# Runs fuzz targets for SECONDS each, one after another, on their corpora
# (fuzz/corpus/<target>, grown in place; the regression inputs in
# fuzz/regressions/<target> are read too). A crash, a hang (one input over
# 10 s) or memory past 2 GiB stops that target with libFuzzer's report
# and its input in fuzz/artifacts/<target>/.
# Needs: a nightly toolchain and `cargo install cargo-fuzz`.
# Usage: fuzz/run.sh SECONDS [TARGET...]   (all targets when none given)
#   e.g. fuzz/run.sh 1800 client_request tls_handshake
set -euo pipefail
cd "$(dirname "$0")"
secs=${1:?usage: fuzz/run.sh SECONDS [TARGET...]}
shift
targets=("$@")
[ ${#targets[@]} -gt 0 ] || mapfile -t targets < <(cargo +nightly fuzz list)
mkdir -p logs
for t in "${targets[@]}"; do
    mkdir -p "corpus/$t" "regressions/$t"
    echo "== $t for ${secs}s ($(date -u +%FT%TZ))"
    cargo +nightly fuzz run -O "$t" "corpus/$t" "regressions/$t" -- \
        -max_total_time="$secs" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
        >"logs/$t.log" 2>&1 || { echo "$t FAILED: see fuzz/logs/$t.log"; tail -30 "logs/$t.log"; exit 1; }
    grep -E "stat::number_of_executed_units|stat::peak_rss_mb|Done [0-9]+ runs" "logs/$t.log" | tr '\n' ' '
    echo
done
