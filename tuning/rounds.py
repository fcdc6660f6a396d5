#!/usr/bin/env python3
"""Every round of a `ringkeeper-loadgen compare --json` file (as
request-cost.sh writes), one line per read mix and round: each target's
throughput and its server's CPU per op. The summary table prints the
round of median throughput; this shows the spread behind it, and the
median of each target's CPU per op over the rounds.

    rounds.py results/<day>/request-cost.json
"""
import json
import statistics
import sys
from collections import defaultdict

with open(sys.argv[1]) as f:
    points = json.load(f)["results"]["points"]
rows = defaultdict(dict)
cpu = defaultdict(list)
for p in points:
    s = p["server"]
    if not s.get("ops"):
        continue
    us = s["cpu_s"] * 1e6 / s["ops"]
    rows[(p["read_pct"], p["round"])][p["target"]] = (p["ops_per_s"], us)
    cpu[(p["read_pct"], p["target"])].append(us)
for key in sorted(rows):
    cells = "  ".join(
        "%s %.0fk %.2fus" % (name, ops / 1e3, us) for name, (ops, us) in sorted(rows[key].items())
    )
    print("reads %d%% round %d: %s" % (key[0], key[1], cells))
for (pct, target), values in sorted(cpu.items()):
    print("reads %d%% %s: median %.2f us over %d rounds" % (pct, target, statistics.median(values), len(values)))
