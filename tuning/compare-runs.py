#!/usr/bin/env python3
"""Side by side: the --json files of one loadgen experiment (scale,
bigmulti or sessions) run against several servers one after the other,
with each server's ratio to the first (ringkeeper/ZooKeeper when rk comes
first). Prints a table and, with --json FILE, writes the combined figures.

    compare-runs.py [--json OUT] rk.json zk.json
"""
import json
import sys


def load(path):
    with open(path) as f:
        return json.load(f)


def ratio(a, b):
    if a is None or b is None or b == 0:
        return None
    return a / b


def fmt(v, spec="{:.0f}"):
    return "-" if v is None else spec.format(v)


def mb(v):
    return None if v is None else v / (1 << 20)


def scale(runs):
    names = [r["results"]["target"] for r in runs]
    base = runs[0]["results"]
    rows = []
    print("creates/s per window (whole window | at size: the window's tail), "
          "server RSS and peak (VmHWM) at each checkpoint")
    head = ["children"]
    for n in names:
        head += [f"{n} win/s", f"{n} at/s", f"{n} RSS MB", f"{n} peak MB"]
    for n in names[1:]:
        head += [f"{names[0]}/{n} win", f"{names[0]}/{n} at"]
    # With --probe-rounds: the median probe round at each checkpoint.
    probes = any(w.get("probe_per_s") for r in runs for w in r["results"]["windows"])
    if probes:
        head += [f"{n} probe/s" for n in names]
        head += [f"{names[0]}/{n} probe" for n in names[1:]]
    print(" ".join(f"{h:>13}" for h in head))
    for i, w0 in enumerate(base["windows"]):
        ws = [r["results"]["windows"][i] if i < len(r["results"]["windows"]) else None
              for r in runs]
        row = {"children": w0["to"], "targets": {}}
        cells = [f"{w0['to']:>13}"]
        for n, w in zip(names, ws):
            if w is None:
                cells += [f"{'-':>13}"] * 4
                continue
            mark = "" if w["reached"] else "*"
            cells += [f"{fmt(w['creates_per_s']) + mark:>13}", f"{fmt(w['tail_per_s']):>13}",
                      f"{fmt(mb(w['rss_bytes']), '{:.1f}'):>13}",
                      f"{fmt(mb(w['hwm_bytes']), '{:.1f}'):>13}"]
            row["targets"][n] = w
        for n, w in zip(names[1:], ws[1:]):
            rw = ratio(w0["creates_per_s"], w["creates_per_s"] if w else None)
            ra = ratio(w0["tail_per_s"], w["tail_per_s"] if w else None)
            cells += [f"{fmt(rw, '{:.2f}x'):>13}", f"{fmt(ra, '{:.2f}x'):>13}"]
            row[f"ratio_{names[0]}_{n}_window"] = rw
            row[f"ratio_{names[0]}_{n}_at_size"] = ra
        if probes:
            for n, w in zip(names, ws):
                cells.append(f"{fmt(w.get('probe_per_s') if w else None):>13}")
            for n, w in zip(names[1:], ws[1:]):
                rp = ratio(w0.get("probe_per_s"), w.get("probe_per_s") if w else None)
                cells.append(f"{fmt(rp, '{:.2f}x'):>13}")
                row[f"ratio_{names[0]}_{n}_probe"] = rp
        rows.append(row)
        print(" ".join(cells))
    if any(not w["reached"] for r in runs for w in r["results"]["windows"]):
        print("(* not reached: the run stopped inside this window)")
    for r in runs:
        x = r["results"]
        print(f"{x['target']}: last/first window {fmt(x['ratio_last_first_window'], '{:.2f}')}, "
              f"at size {fmt(x['ratio_last_first_at_size'], '{:.2f}')}, "
              f"probe {fmt(x.get('ratio_last_first_probe'), '{:.2f}')}; created {x['created']} "
              f"in {x['seconds']:.1f}s, errors {x['error_total']}, failed sessions {x['failed_sessions']}")
    return {"windows": rows, "summary": [
        {k: r["results"].get(k) for k in ("target", "created", "seconds", "error_total",
                                          "ratio_last_first_window", "ratio_last_first_at_size",
                                          "ratio_last_first_probe", "rss_before_bytes",
                                          "rss_after_bytes", "hwm_after_bytes")}
        for r in runs]}


def bigmulti(runs):
    names = [r["results"]["target"] for r in runs]
    out = {}
    print(f"{'multi':<8} " + " ".join(f"{n + ' s':>10} {n + ' ops/s':>12}" for n in names)
          + " " + " ".join(f"{names[0] + '/' + n:>10}" for n in names[1:]))
    for kind in ("create", "delete"):
        ms = [r["results"].get(kind) for r in runs]
        cells = [f"{kind:<8}"]
        for m in ms:
            bad = m is not None and m["err"] != 0
            cells.append(f"{fmt(m and m['seconds'], '{:.3f}') + ('!' if bad else ''):>10} "
                         f"{fmt(m and m['ops_per_s']):>12}")
        rs = [ratio(ms[0] and ms[0]["ops_per_s"], m and m["ops_per_s"]) for m in ms[1:]]
        cells += [f"{fmt(x, '{:.2f}x'):>10}" for x in rs]
        print(" ".join(cells))
        out[kind] = {"targets": dict(zip(names, ms)),
                     "ratios": {f"{names[0]}/{n}": x for n, x in zip(names[1:], rs)}}
    print("ratio: ops/s of the first over each other (> 1: the first is faster); "
          "! : the multi failed (reply error)")
    return out


def sessions(runs):
    """Sessions/s, and with --server-pid the server's CPU per session: on a
    small box the rate is bounded by the client's own TCP work as well, the
    CPU per session is the server's cost alone. Ratios: first/other for the
    rate, other/first for the CPU (both read "times better")."""
    names = [r["results"][0]["target"] for r in runs]
    modes = [p["mode"] for p in runs[0]["results"]]
    out = {}
    print(f"{'mode':<13} " + " ".join(f"{n + ' sess/s':>13} {n + ' us/sess':>12}" for n in names)
          + " " + " ".join(f"{'rate ' + names[0] + '/' + n:>12} {'cpu ' + n + '/' + names[0]:>12}"
                           for n in names[1:]))

    def cpu(p):
        return p and (p.get("server") or {}).get("cpu_us_per_op")

    for mode in modes:
        ps = [next((p for p in r["results"] if p["mode"] == mode), None) for r in runs]
        cells = [f"{mode:<13}"]
        for p in ps:
            cells.append(f"{fmt(p and p['sessions_per_s']):>13} {fmt(cpu(p), '{:.1f}'):>12}")
        rs = [ratio(ps[0] and ps[0]["sessions_per_s"], p and p["sessions_per_s"]) for p in ps[1:]]
        cs = [ratio(cpu(p), cpu(ps[0])) for p in ps[1:]]
        for r, c in zip(rs, cs):
            cells += [f"{fmt(r, '{:.2f}x'):>12}", f"{fmt(c, '{:.2f}x'):>12}"]
        print(" ".join(cells))
        out[mode] = {"targets": dict(zip(names, ps)),
                     "ratios": {f"{names[0]}/{n}": x for n, x in zip(names[1:], rs)},
                     "server_cpu_ratios": {f"{n}/{names[0]}": x for n, x in zip(names[1:], cs)}}
    return out


def main(argv):
    out = None
    if len(argv) > 1 and argv[0] == "--json":
        out, argv = argv[1], argv[2:]
    if len(argv) < 2:
        sys.exit(__doc__)
    runs = [load(p) for p in argv]
    exps = {r["experiment"] for r in runs}
    if len(exps) != 1:
        sys.exit(f"different experiments: {exps}")
    exp = exps.pop()
    table = {"scale": scale, "bigmulti": bigmulti, "sessions": sessions}.get(exp)
    if table is None:
        sys.exit(f"no comparison for experiment {exp}")
    combined = {"experiment": exp, "files": argv, "params": [r["params"] for r in runs],
                "comparison": table(runs)}
    if out:
        with open(out, "w") as f:
            json.dump(combined, f, indent=2)
            f.write("\n")


if __name__ == "__main__":
    main(sys.argv[1:])
