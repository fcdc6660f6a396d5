#!/usr/bin/env bash
# The whole test suite, from a fresh machine: installs what the tests need
# (Apache ZooKeeper 3.8 from Debian for the differential tests), checks
# formatting and lints, then runs every test, and the tests that can run
# against either server once more against Apache ZooKeeper. Bounded: each
# test has its own timeouts; nothing here waits for input.
set -euo pipefail
cd "$(dirname "$0")/.."

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

echo "== installing test dependencies (Debian: zookeeper, a JDK, Curator, kazoo, the Go and C clients, prometheus-client)"
export DEBIAN_FRONTEND=noninteractive
as_root apt-get update -q
as_root apt-get install -y -q zookeeper default-jre-headless default-jdk-headless libcurator-recipes-java libcurator-framework-java python3-kazoo python3-pure-sasl golang-go golang-github-samuel-go-zookeeper-dev libzookeeper-mt-dev python3-prometheus-client openssl e2fsprogs mount util-linux iptables kmod curl netcat-openbsd >/dev/null

# tests/package.rs builds the Debian package with cargo-deb, installs it in
# a Debian 12 that debootstrap makes (from deb.debian.org, cached under
# target/tmp/package-test/) and checks its systemd unit with systemd-analyze.
echo "== the package test's tools (debootstrap, systemd-analyze, cargo-deb)"
as_root apt-get install -y -q debootstrap systemd >/dev/null
if ! cargo deb --version >/dev/null 2>&1; then
    cargo install cargo-deb --locked
fi
cargo deb --version

# tests/disk_full.rs and tests/fsync_batching.rs mount ext4 images on loop
# devices (fsync_batching also freezes them with util-linux's fsfreeze) and
# tests/log_failure_health.rs a tmpfs: they need root, and they fail (never
# skip) without what they need, so check it here and say what is missing.
echo "== root and loop devices (tests/disk_full.rs, tests/fsync_batching.rs, tests/log_failure_health.rs)"
if [ "$(id -u)" != 0 ]; then
    echo "the tests must run as root: the disk-fault tests mount filesystems and the netsplit tests use iptables" >&2
    exit 1
fi
if [ ! -e /dev/loop-control ]; then
    modprobe loop || true
fi
if ! loop=$(losetup -f 2>&1); then
    echo "no free loop device ($loop): load the loop module (modprobe loop) or, in a container, run it privileged" >&2
    exit 1
fi
# Without devtmpfs (some containers) the kernel's new device has no node yet.
if [ ! -b "$loop" ]; then
    mknod "$loop" b 7 "${loop#/dev/loop}"
fi
echo "first free loop device: $loop"

# tests/loadgen.rs counts the server's syscalls with perf tracepoints
# (raw_syscalls:sys_enter), which need tracefs; as root it fails without.
echo "== tracefs (tests/loadgen.rs: the server's syscalls per op)"
if [ ! -e /sys/kernel/tracing/events/raw_syscalls/sys_enter/id ]; then
    mount -t tracefs nodev /sys/kernel/tracing || true
fi
if [ ! -e /sys/kernel/tracing/events/raw_syscalls/sys_enter/id ] &&
   [ ! -e /sys/kernel/debug/tracing/events/raw_syscalls/sys_enter/id ]; then
    echo "no tracefs with raw_syscalls events: mount -t tracefs nodev /sys/kernel/tracing" >&2
    exit 1
fi

echo "== cargo fmt --check"
cargo fmt --all -- --check

echo "== cargo clippy"
cargo clippy --workspace --all-targets -- -D warnings

echo "== cargo test"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
cargo test --workspace --all-targets 2>&1 | tee "$log"
echo "== simulations, release build: 10,000 seeds each (a debug build runs a few hundred)"
cargo test --release --test sim_election --test sim_ensemble 2>&1 | tee -a "$log"

# The same tests again against Apache ZooKeeper 3.8 (Debian's, installed
# above): every test file that starts its server or ensemble through the
# target (tests/common/mod.rs: target_flavor, start_target) runs with
# RK_TEST_TARGET=zookeeper, so what the tests expect is what ZooKeeper does
# and not only what ringkeeper does. Where ringkeeper deliberately differs
# (README), the test says so and checks each server's own behaviour; a test
# of a bound only ringkeeper has runs ringkeeper whatever the target. Files
# that start ensembles run one test at a time (three to five JVMs per test
# on two cores). The debug test binaries built above are reused.
echo "== the same tests against Apache ZooKeeper (RK_TEST_TARGET=zookeeper)"
mapfile -t zk_files < <(grep -l -E 'target_flavor\(|start_target\(' tests/*.rs)
if [ "${#zk_files[@]}" = 0 ]; then
    echo "no test file runs against the target: tests/common/mod.rs changed?" >&2
    exit 1
fi
zk_standalone=()
zk_ensembles=()
for f in "${zk_files[@]}"; do
    name=$(basename "$f" .rs)
    if grep -q 'Cluster::' "$f"; then
        zk_ensembles+=(--test "$name")
    else
        zk_standalone+=(--test "$name")
    fi
done
echo "standalone: ${zk_standalone[*]}"
echo "ensembles, one test at a time: ${zk_ensembles[*]}"
zk_log=$(mktemp)
trap 'rm -f "$log" "$zk_log"' EXIT
zk_start=$SECONDS
if [ "${#zk_standalone[@]}" != 0 ]; then
    RK_TEST_TARGET=zookeeper cargo test "${zk_standalone[@]}" 2>&1 | tee -a "$zk_log"
fi
if [ "${#zk_ensembles[@]}" != 0 ]; then
    RK_TEST_TARGET=zookeeper cargo test "${zk_ensembles[@]}" -- --test-threads=1 2>&1 | tee -a "$zk_log"
fi
awk -v s=$((SECONDS - zk_start)) '/^test result:/ { p += $4; f += $6 } END { printf "against Apache ZooKeeper: %d passed, %d failed (%d s)\n", p, f, s }' "$zk_log"
cat "$zk_log" >>"$log"
# One closing line for the whole run (the last test binary may hold no tests).
awk '/^test result:/ { p += $4; f += $6 } END { printf "total: %d passed, %d failed\n", p, f }' "$log"
