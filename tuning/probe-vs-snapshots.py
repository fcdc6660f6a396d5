#!/usr/bin/env python3
"""Probe rounds of a scale run, split by whether a snapshot was running.

    probe-vs-snapshots.py SCALE.json SERVER_LOG [--json OUT]

SCALE.json is a loadgen scale run with --probe-rounds (each round's start
and end in probe_rounds_unix_s); SERVER_LOG has ringkeeper's "snapshot
started" / "snapshot written" lines (RUST_LOG=info). A round is "during"
when it overlaps a snapshot for at least half its time, "clear" when it
overlaps none; the rest are left out. A snapshot still running when the
log ends runs to the end. Prints, per checkpoint, the median creates/s and
server CPU per create of each kind of round.
"""
import importlib.util
import json
import os
import statistics
import sys

_spec = importlib.util.spec_from_file_location(
    "snapshot_impact", os.path.join(os.path.dirname(os.path.abspath(__file__)), "snapshot-impact.py"))
_impact = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_impact)


def intervals(log_path):
    """(start, end) of every snapshot, the last one open-ended if unfinished."""
    done = [(s, e) for s, e, _, _ in _impact.snapshots(log_path)]
    last_start = None
    with open(log_path, errors="replace") as f:
        for line in f:
            m = _impact.LINE.match(line.strip())
            if m and m.group(2) == "started":
                last_start = _impact.wall(m.group(1))
    if last_start is not None and all(s != last_start for s, _ in done):
        done.append((last_start, float("inf")))
    return done


def overlap(a, b, spans):
    return sum(max(0.0, min(b, e) - max(a, s)) for s, e in spans)


def main(argv):
    out_path = None
    if "--json" in argv:
        i = argv.index("--json")
        out_path = argv[i + 1]
        argv = argv[:i] + argv[i + 2:]
    if len(argv) != 3:
        sys.exit(__doc__)
    run = json.load(open(argv[1]))
    spans = intervals(argv[2])
    rows = []
    for w in run["results"]["windows"]:
        rounds = list(zip(w.get("probe_rounds_unix_s", []), w["probe_rounds_per_s"],
                          w.get("probe_rounds_server_cpu_us") or [None] * len(w["probe_rounds_per_s"])))
        kinds = {"during": [], "clear": []}
        for (a, b), rate, cpu in rounds:
            o = overlap(a, b, spans)
            if o == 0:
                kinds["clear"].append((rate, cpu))
            elif o >= (b - a) / 2:
                kinds["during"].append((rate, cpu))
        row = {"children": w["to"]}
        for k, v in kinds.items():
            rates = [r for r, _ in v]
            cpus = [c for _, c in v if c is not None]
            row[k] = {
                "rounds": len(v),
                "median_per_s": statistics.median(rates) if rates else None,
                "median_cpu_us": statistics.median(cpus) if cpus else None,
            }
        rows.append(row)

    def fmt(x, unit=""):
        return "-" if x is None else (f"{x / 1000:.1f}k" if unit == "k" else f"{x:.2f}us")

    print(f"snapshots in the log: {len(spans)}")
    print(f"{'children':>10} | {'clear rounds':>12} {'creates/s':>10} {'cpu':>8} | {'during':>7} {'creates/s':>10} {'cpu':>8} | during/clear")
    for r in rows:
        c, d = r["clear"], r["during"]
        ratio = (d["median_per_s"] / c["median_per_s"]
                 if d["median_per_s"] and c["median_per_s"] else None)
        print(f"{r['children']:>10} | {c['rounds']:>12} {fmt(c['median_per_s'], 'k'):>10} {fmt(c['median_cpu_us']):>8} | "
              f"{d['rounds']:>7} {fmt(d['median_per_s'], 'k'):>10} {fmt(d['median_cpu_us']):>8} | "
              f"{'-' if ratio is None else f'{ratio:.2f}'}")
    if out_path:
        with open(out_path, "w") as f:
            # A snapshot still running at the end has no end (null).
            ended = [[s, None if e == float("inf") else e] for s, e in spans]
            json.dump({"snapshots": ended, "checkpoints": rows}, f, indent=1)


if __name__ == "__main__":
    main(sys.argv)
