#!/usr/bin/env python3
"""Writes/s while a snapshot runs against writes/s while none does.

    snapshot-impact.py TIMELINE.json T0_FILE SERVER_LOG [--baseline NOSNAP.json] [--json OUT]

TIMELINE.json is a loadgen timeline (samples every interval, t_s = the
sample's end, seconds since the measured start); T0_FILE holds the wall
clock (date +%s.%N) written by the timeline's event at 0 s, whose own start
offset the timeline records; SERVER_LOG has ringkeeper's "snapshot started"
and "snapshot written ... ms=N" lines (RUST_LOG=info). A sample counts as
"during" when its whole interval lies inside a snapshot, "between" when it
touches none; samples that straddle an edge are left out. NOSNAP.json is
the same timeline against a server that takes no snapshot (a paced
snapshot runs most of the time, leaving few "between" samples): writes/s
during a snapshot are also compared with its samples.
"""
import datetime
import json
import re
import statistics
import sys

LINE = re.compile(r"^(\S+Z)\s+INFO\s+\S+: snapshot (started|written)\b(.*)$")


def wall(stamp):
    return datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def snapshots(log_path):
    """(start, end, znodes, ms) per completed snapshot, wall-clock seconds."""
    out, start = [], None
    with open(log_path, errors="replace") as f:
        for line in f:
            m = LINE.match(line.strip())
            if not m:
                continue
            at, kind, rest = wall(m.group(1)), m.group(2), m.group(3)
            if kind == "started":
                start = at
            elif start is not None:
                znodes = re.search(r"znodes=(\d+)", rest)
                ms = re.search(r"ms=(\d+)", rest)
                out.append((start, at, int(znodes.group(1)) if znodes else None,
                            int(ms.group(1)) if ms else None))
                start = None
    return out


def main(argv):
    def option(name):
        nonlocal argv
        if name not in argv:
            return None
        i = argv.index(name)
        value = argv[i + 1]
        argv = argv[:i] + argv[i + 2:]
        return value

    out_path = option("--json")
    baseline_path = option("--baseline")
    if len(argv) != 3:
        sys.exit(__doc__)
    tl_path, t0_path, log_path = argv
    with open(tl_path) as f:
        tl = json.load(f)["results"]
    with open(t0_path) as f:
        t0_wall = float(f.read().strip())
    event0 = min(tl["events"], key=lambda e: e["at_s"])
    origin = t0_wall - event0["started_s"]
    step = tl["interval_ms"] / 1000.0
    snaps = [s for s in snapshots(log_path)]
    during, between = [], []
    for s in tl["samples"]:
        lo, hi = origin + s["t_s"] - step, origin + s["t_s"]
        inside = any(a <= lo and hi <= b for a, b, _, _ in snaps)
        touches = any(lo < b and a < hi for a, b, _, _ in snaps)
        if inside:
            during.append(s["writes_per_s"])
        elif not touches:
            between.append(s["writes_per_s"])
    in_run = [s for s in snaps if origin <= s[0] and s[1] <= origin + tl["seconds"]]
    summary = {
        "snapshots_in_run": len(in_run),
        "snapshot_znodes": [s[2] for s in in_run],
        "snapshot_ms": [s[3] for s in in_run],
        "samples_during": len(during),
        "samples_between": len(between),
        "writes_per_s_during_mean": statistics.fmean(during) if during else None,
        "writes_per_s_between_mean": statistics.fmean(between) if between else None,
        "writes_per_s_during_median": statistics.median(during) if during else None,
        "writes_per_s_between_median": statistics.median(between) if between else None,
    }
    if during and between:
        summary["ratio_during_between_mean"] = (summary["writes_per_s_during_mean"]
                                                / summary["writes_per_s_between_mean"])
        summary["ratio_during_between_median"] = (summary["writes_per_s_during_median"]
                                                  / summary["writes_per_s_between_median"])
    if baseline_path:
        with open(baseline_path) as f:
            nosnap = [s["writes_per_s"] for s in json.load(f)["results"]["samples"]]
        summary["samples_no_snapshot"] = len(nosnap)
        summary["writes_per_s_no_snapshot_median"] = statistics.median(nosnap)
        if during:
            summary["ratio_during_no_snapshot_median"] = (
                summary["writes_per_s_during_median"] / statistics.median(nosnap))
    print(f"snapshots in the run: {len(in_run)} "
          f"(znodes {summary['snapshot_znodes']}, ms {summary['snapshot_ms']})")
    for k in ("during", "between"):
        mean, med = summary[f"writes_per_s_{k}_mean"], summary[f"writes_per_s_{k}_median"]
        n = summary[f"samples_{k}"]
        print(f"writes/s {k:<8} {n:>4} samples  mean {mean or 0:>9.0f}  median {med or 0:>9.0f}")
    if "ratio_during_between_mean" in summary:
        print(f"during/between: mean {summary['ratio_during_between_mean']:.2f}, "
              f"median {summary['ratio_during_between_median']:.2f}")
    if baseline_path:
        print(f"writes/s no snapshot {len(nosnap):>4} samples (another server)  median "
              f"{summary['writes_per_s_no_snapshot_median']:>9.0f}")
        if "ratio_during_no_snapshot_median" in summary:
            print(f"during/no snapshot: median {summary['ratio_during_no_snapshot_median']:.2f}")
    if out_path:
        with open(out_path, "w") as f:
            json.dump(summary, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1:])
