#!/usr/bin/env python3
"""One table from the JSON lines of scripts/bench-vs-mpi.sh.

    table.py DIR

DIR holds one file per system and run, NAME.rK.jsonl (run K; a plain
NAME.jsonl is one run): the JSON lines of benches/mpi/rma_bench.c (mode
"mpi") or of `onesided-bench --json --raw` (modes "onesided" and "raw";
lines may carry onesided-run's "[0] " prefix). NAME decides the kind: names
starting with "onesided" are onesided runs, every other name is an MPI
library. DIR/session.txt (start/end uptime), if present, is printed first.

Prints a Markdown table: per pattern and size, each system's median µs per
operation (lower is better; bandwidth and rate patterns too, so every ratio
reads the same way) — with several runs the median of the per-run medians
and, in brackets, the fastest and slowest run median — then the ratios
onesided / best MPI (default settings: every MPI column; network:
onesided-tcp against the MPI columns whose name ends in "-tcp") and
onesided / raw per onesided column, all from the medians. Then the
"targets" section: every target of issue 5 §3 and §3b computed from the
cells, met / MISSED / not measured. Exit status 1 if a run's check failed or
a file holds no result, 2 on unreadable input (a missed target is a
measurement, not an error: exit 0).
"""

import json
import os
import re
import statistics
import sys

OP_ORDER = [
    "put_lat", "get_lat", "put_bw", "get_bw", "acc_lat", "acc_rate", "fop_lat",
    "cas_lat", "msg_rate", "lock_unlock_lat", "fence_lat", "pscw_lat", "halo_lat",
]
# Preferred column order; other names follow alphabetically.
SYS_ORDER = ["mpich", "mpich-tcp", "ompi", "ompi-ucx-tcp", "ompi-pt2pt-tcp",
             "onesided", "onesided-tcp", "onesided-shm"]
MIB = 1 << 20
RUN_FILE = re.compile(r"^(?P<name>.+?)(?:\.r(?P<run>\d+))?\.jsonl$")


def parse(path):
    """Returns (header, {(op, size, mode): lat_us}, check) of one file."""
    header, results, check = {}, {}, None
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if line.startswith("[0] "):
                line = line[4:]
            if not line.startswith("{"):
                continue  # other ranks' lines, launcher messages
            try:
                v = json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(f"{path}:{n}: not JSON ({e}): {line[:80]}")
            t = v.get("type")
            if t == "header":
                header = v.get("header", {})
            elif t == "result":
                key = (v["op"], int(v["size"]), v["mode"])
                results[key] = float(v["lat_us"])
            elif t == "check":
                check = v
    return header, results, check


def fmt(v):
    if v is None:
        return "—"
    if v >= 100:
        return f"{v:.0f}"
    if v >= 10:
        return f"{v:.1f}"
    if v >= 0.1:
        return f"{v:.2f}"
    return f"{v:.3f}"


def fmt_ratio(v):
    """Two decimals, or two significant digits below 0.1 (0.0062, not 0.01)."""
    return f"{v:.2f}" if v >= 0.1 else f"{v:.2g}"


def ratio(a, b):
    return fmt_ratio(a / b) if a is not None and b else "—"


def size_name(n):
    if n >= 1 << 20 and n % (1 << 20) == 0:
        return f"{n >> 20}M"
    if n >= 1 << 10 and n % (1 << 10) == 0:
        return f"{n >> 10}K"
    return str(n)


class System:
    """The runs of one system: per (op, size, mode) the per-run medians."""

    def __init__(self, name):
        self.name = name
        self.runs = []  # (run, header, check)
        self.cells = {}  # key -> [per-run median]

    def add(self, run, header, results, check):
        self.runs.append((run, header, check))
        for k, v in results.items():
            self.cells.setdefault(k, []).append(v)

    def median(self, op, size, mode):
        v = self.cells.get((op, size, mode))
        return statistics.median(v) if v else None

    def cell(self, op, size, mode):
        v = self.cells.get((op, size, mode))
        if not v:
            return "—"
        if len(v) == 1:
            return fmt(v[0])
        return f"{fmt(statistics.median(v))} [{fmt(min(v))}–{fmt(max(v))}]"


def load(d):
    """{name: System} from DIR, and the problems found."""
    systems, problems = {}, []
    files = []
    for f in os.listdir(d):
        m = RUN_FILE.match(f)
        if m:
            files.append((m["name"], int(m["run"] or 0), f))
    for name, run, f in sorted(files):
        header, results, check = parse(os.path.join(d, f))
        systems.setdefault(name, System(name)).add(run, header, results, check)
        label = f"{name} run {run}" if run else name
        err = f[:-6] + ".err"
        if not results:
            problems.append(f"{label}: no results (see {err})")
        elif check is None:
            problems.append(f"{label}: no check line (run cut short?)")
        elif check.get("check") != "ok":
            problems.append(f"{label}: check {check.get('check')}: {check.get('failed')}")
    return systems, problems


# ---- the targets of issue 5 §3 / §3b -----------------------------------------

def is_lat(op):
    return op.endswith("_lat")


def targets(S):
    """Yields (section, target, measured, reference, value, limit, kind).

    kind "time": value = onesided time / reference time, met if <= limit;
    kind "rate": value = onesided throughput / reference throughput (the
    inverse time ratio), met if >= limit. measured/reference are µs per op
    or None (then "not measured")."""
    def med(name, op, size, mode):
        s = S.get(name)
        return s.median(op, size, mode) if s else None

    def keys(name, mode, pred):
        s = S.get(name)
        if not s:
            return []
        ks = {(op, size) for (op, size, m) in s.cells if m == mode and pred(op, size)}
        return sorted(ks, key=lambda k: (OP_ORDER.index(k[0]) if k[0] in OP_ORDER else 99, k[1]))

    def best(names, op, size):
        vals = [(med(n, op, size, "mpi"), n) for n in names]
        vals = [v for v in vals if v[0] is not None]
        return min(vals) if vals else (None, None)

    # Intra-node, default settings: onesided vs the best of MPICH and Open MPI.
    sec = "intra"
    peers = ["mpich", "ompi"]
    for op, size in keys("onesided", "onesided", lambda o, s: is_lat(o)):
        ref, who = best(peers, op, size)
        yield (sec, f"{op} {size_name(size)} ≤ best of MPICH/Open MPI ({who or '—'})",
               med("onesided", op, size, "onesided"), ref, 1.0, "time")
    yield (sec, "lock_unlock_lat ≤ 0.5× MPICH", med("onesided", "lock_unlock_lat", 8, "onesided"),
           med("mpich", "lock_unlock_lat", 8, "mpi"), 0.5, "time")
    ref, who = best(peers, "put_bw", MIB)
    yield (sec, f"put_bw 1M bandwidth ≥ 0.9× best ({who or '—'})",
           med("onesided", "put_bw", MIB, "onesided"), ref, 0.9, "rate")

    # Network path: onesided-tcp vs its raw floor and MPI over tcp.
    sec = "tcp"
    net_ops = ("put_lat", "get_lat", "fop_lat", "cas_lat", "acc_lat")
    for op, size in keys("onesided-tcp", "onesided", lambda o, s: o in net_ops):
        yield (sec, f"{op} {size_name(size)} ≤ 1.15× raw",
               med("onesided-tcp", op, size, "onesided"), med("onesided-tcp", op, size, "raw"),
               1.15, "time")
    yield (sec, "put_bw 1M bandwidth ≥ 0.9× raw", med("onesided-tcp", "put_bw", MIB, "onesided"),
           med("onesided-tcp", "put_bw", MIB, "raw"), 0.9, "rate")
    for peer in ("mpich-tcp", "ompi-ucx-tcp"):
        yield (sec, f"lock_unlock_lat ≤ 0.6× {peer}",
               med("onesided-tcp", "lock_unlock_lat", 8, "onesided"),
               med(peer, "lock_unlock_lat", 8, "mpi"), 0.6, "time")
    # Issue 15: the 1024 x 1024 halo step over tcp against the faster MPI
    # over tcp (derived datatypes on both sides).
    for op, size in keys("onesided-tcp", "onesided", lambda o, s: o == "halo_lat"):
        ref, who = best(["mpich-tcp", "ompi-ucx-tcp", "ompi-pt2pt-tcp"], op, size)
        yield (sec, f"{op} {size_name(size)} ≤ best MPI over tcp ({who or '—'})",
               med("onesided-tcp", op, size, "onesided"), ref, 1.0, "time")

    # shm provider: every op against its raw floor.
    sec = "shm"
    for op, size in keys("onesided-shm", "onesided", lambda o, s: True):
        yield (sec, f"{op} {size_name(size)} ≤ 1.15× raw",
               med("onesided-shm", op, size, "onesided"), med("onesided-shm", op, size, "raw"),
               1.15, "time")

    # §3b: small operations over tcp against Open MPI osc/pt2pt.
    sec = "3b"
    yield (sec, "put_bw 8 bandwidth ≥ Open MPI osc/pt2pt",
           med("onesided-tcp", "put_bw", 8, "onesided"), med("ompi-pt2pt-tcp", "put_bw", 8, "mpi"),
           1.0, "rate")
    yield (sec, "acc_rate ≥ Open MPI osc/pt2pt",
           med("onesided-tcp", "acc_rate", 8, "onesided"),
           med("ompi-pt2pt-tcp", "acc_rate", 8, "mpi"), 1.0, "rate")


def print_targets(S):
    print("## Targets (issue 5 §3, §3b)")
    print()
    print("Sections: intra = column onesided (default settings) against MPICH and Open MPI; "
          "tcp = column onesided-tcp (ONESIDED_SHM=0 ONESIDED_PROVIDER=tcp) against its raw "
          "floor and MPI over tcp; shm = column onesided-shm (ONESIDED_SHM=0 "
          "ONESIDED_PROVIDER=shm) against its raw floor; 3b = onesided-tcp against Open MPI "
          "osc/pt2pt over tcp (ompi-pt2pt-tcp). value = onesided time / reference time "
          "(met if ≤ limit) for latency targets, onesided bandwidth or rate / reference's "
          "(met if ≥ limit) for bandwidth and rate targets; from the medians of the run "
          "medians.")
    print()
    print("| section | target | onesided µs | reference µs | value | limit | verdict |")
    print("|---|---|---|---|---|---|---|")
    counts = {"met": 0, "MISSED": 0, "not measured": 0}
    for sec, what, mine, ref, limit, kind in targets(S):
        if mine is None or not ref:
            verdict, value = "not measured", "—"
        else:
            v = mine / ref if kind == "time" else ref / mine
            ok = v <= limit if kind == "time" else v >= limit
            verdict = "met" if ok else "MISSED"
            value = fmt_ratio(v)
        counts[verdict] += 1
        cmp = "≤" if kind == "time" else "≥"
        print(f"| {sec} | {what} | {fmt(mine)} | {fmt(ref)} | {value} | {cmp} {limit:g} | {verdict} |")
    print()
    print(f"targets: {counts['met']} met, {counts['MISSED']} missed, "
          f"{counts['not measured']} not measured")


def main(argv):
    if len(argv) != 2 or not os.path.isdir(argv[1]):
        print("usage: table.py DIR (with NAME[.rK].jsonl files)", file=sys.stderr)
        return 2
    d = argv[1]
    try:
        S, problems = load(d)
    except (OSError, ValueError, KeyError) as e:
        print(f"{e}", file=sys.stderr)
        return 2
    if not S:
        print(f"no .jsonl files in {d}", file=sys.stderr)
        return 2
    names = sorted(S, key=lambda s: (SYS_ORDER.index(s) if s in SYS_ORDER else len(SYS_ORDER), s))
    session = os.path.join(d, "session.txt")
    if os.path.exists(session):
        with open(session, encoding="utf-8") as f:
            for line in f.read().splitlines():
                print(f"    {line}")
        print()
    onesided = [n for n in names if n.startswith("onesided")]
    mpis = [n for n in names if not n.startswith("onesided")]
    mpi_net = [n for n in mpis if n.endswith("-tcp")]

    rows = sorted(
        {(op, size) for n in names for (op, size, _m) in S[n].cells},
        key=lambda k: (OP_ORDER.index(k[0]) if k[0] in OP_ORDER else 99, k[1]),
    )
    cols = ["op", "size"] + mpis
    for n in onesided:
        cols += [n, f"{n} raw"]
    if "onesided" in onesided and mpis:
        cols.append("onesided/best MPI")
    if "onesided-tcp" in onesided and mpi_net:
        cols.append("onesided-tcp/best MPI-tcp")
    cols += [f"{n}/raw" for n in onesided]
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    for op, size in rows:
        cells = [op, size_name(size)]
        cells += [S[n].cell(op, size, "mpi") for n in mpis]
        for n in onesided:
            cells += [S[n].cell(op, size, "onesided"), S[n].cell(op, size, "raw")]

        def best(group):
            vals = [S[n].median(op, size, "mpi") for n in group]
            vals = [v for v in vals if v is not None]
            return min(vals) if vals else None

        if "onesided" in onesided and mpis:
            cells.append(ratio(S["onesided"].median(op, size, "onesided"), best(mpis)))
        if "onesided-tcp" in onesided and mpi_net:
            cells.append(ratio(S["onesided-tcp"].median(op, size, "onesided"), best(mpi_net)))
        cells += [ratio(S[n].median(op, size, "onesided"), S[n].median(op, size, "raw"))
                  for n in onesided]
        print("| " + " | ".join(cells) + " |")
    print()
    nruns = max(len(S[n].runs) for n in names)
    if nruns > 1:
        print(f"µs per operation: median of the {nruns} runs' medians [fastest–slowest run median] "
              "(bandwidth and rate patterns too: µs per put/get/accumulate). "
              "Ratios from the medians; < 1: onesided is faster.")
    else:
        print("µs per operation, median of the repetitions (bandwidth and rate patterns too: "
              "µs per put/get/accumulate). Ratios < 1: onesided is faster.")
    for n in names:
        runs = S[n].runs
        h0 = runs[0][1]
        dates = [h.get("date", "?") for _r, h, _c in runs]
        loads = [str(h.get("loadavg", "?")).split(" ")[0] for _r, h, _c in runs]
        checks = [(c or {}).get("check", "missing") for _r, _h, c in runs]
        nchk = [str((c or {}).get("checked", 0)) for _r, _h, c in runs]
        if len(runs) == 1:
            print(f"- {n}: {h0.get('provider', '?')}; date {dates[0]}; "
                  f"loadavg {h0.get('loadavg', '?')}; check {checks[0]} ({nchk[0]} checks)")
        else:
            print(f"- {n}: {h0.get('provider', '?')}; {len(runs)} runs {dates[0]} … {dates[-1]}; "
                  f"1-min loadavg {' / '.join(loads)}; check {' / '.join(checks)} "
                  f"({' / '.join(nchk)} checks)")
    print()
    print_targets(S)
    for p in problems:
        print(f"PROBLEM: {p}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
