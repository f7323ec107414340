#!/usr/bin/env python3
"""One table from the JSON lines of scripts/bench-vs-mpi.sh.

    table.py DIR

DIR holds one file per system, NAME.jsonl: the JSON lines of
benches/mpi/rma_bench.c (mode "mpi") or of `onesided-bench --json --raw`
(modes "onesided" and "raw"; lines may carry onesided-run's "[0] " prefix).
NAME decides the kind: names starting with "onesided" are onesided runs,
every other name is an MPI library.

Prints a Markdown table: per pattern and size, each system's median µs per
operation (lower is better; bandwidth and rate patterns too, so every ratio
reads the same way), then the ratios onesided / best MPI (default settings:
every MPI column; network: onesided-tcp against the MPI columns whose name
ends in "-tcp") and onesided / raw per onesided column. Exit status 1 if a
system's check failed or a file holds no result, 2 on unreadable input.
"""

import json
import os
import sys

OP_ORDER = [
    "put_lat", "get_lat", "put_bw", "get_bw", "acc_lat", "acc_rate", "fop_lat",
    "cas_lat", "msg_rate", "lock_unlock_lat", "fence_lat", "pscw_lat",
]
# Preferred column order; other names follow alphabetically.
SYS_ORDER = ["mpich", "mpich-tcp", "ompi", "ompi-ucx-tcp",
             "onesided", "onesided-tcp", "onesided-shm"]


def parse(path):
    """Returns (header, {(op, size, mode): record}, check) of one file."""
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


def ratio(a, b):
    return f"{a / b:.2f}" if a is not None and b else "—"


def size_name(n):
    if n >= 1 << 20 and n % (1 << 20) == 0:
        return f"{n >> 20}M"
    if n >= 1 << 10 and n % (1 << 10) == 0:
        return f"{n >> 10}K"
    return str(n)


def main(argv):
    if len(argv) != 2 or not os.path.isdir(argv[1]):
        print("usage: table.py DIR (with NAME.jsonl files)", file=sys.stderr)
        return 2
    d = argv[1]
    names = sorted(f[:-6] for f in os.listdir(d) if f.endswith(".jsonl"))
    names.sort(key=lambda s: (SYS_ORDER.index(s) if s in SYS_ORDER else len(SYS_ORDER), s))
    if not names:
        print(f"no .jsonl files in {d}", file=sys.stderr)
        return 2
    data, problems = {}, []
    for name in names:
        try:
            header, results, check = parse(os.path.join(d, name + ".jsonl"))
        except (OSError, ValueError, KeyError) as e:
            print(f"{name}: {e}", file=sys.stderr)
            return 2
        data[name] = (header, results, check)
        if not results:
            problems.append(f"{name}: no results (see {name}.err)")
        elif check is None:
            problems.append(f"{name}: no check line (run cut short?)")
        elif check.get("check") != "ok":
            problems.append(f"{name}: check {check.get('check')}: {check.get('failed')}")
    onesided = [n for n in names if n.startswith("onesided")]
    mpis = [n for n in names if not n.startswith("onesided")]
    mpi_net = [n for n in mpis if n.endswith("-tcp")]

    def get(name, op, size, mode):
        return data[name][1].get((op, size, mode))

    rows = sorted(
        {(op, size) for n in names for (op, size, _m) in data[n][1]},
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
        cells += [fmt(get(n, op, size, "mpi")) for n in mpis]
        for n in onesided:
            cells += [fmt(get(n, op, size, "onesided")), fmt(get(n, op, size, "raw"))]

        def best(group):
            vals = [get(n, op, size, "mpi") for n in group]
            vals = [v for v in vals if v is not None]
            return min(vals) if vals else None

        if "onesided" in onesided and mpis:
            cells.append(ratio(get("onesided", op, size, "onesided"), best(mpis)))
        if "onesided-tcp" in onesided and mpi_net:
            cells.append(ratio(get("onesided-tcp", op, size, "onesided"), best(mpi_net)))
        cells += [ratio(get(n, op, size, "onesided"), get(n, op, size, "raw"))
                  for n in onesided]
        print("| " + " | ".join(cells) + " |")
    print()
    print("µs per operation, median of the repetitions (bandwidth and rate patterns too: "
          "µs per put/get/accumulate). Ratios < 1: onesided is faster.")
    for n in names:
        h = data[n][0]
        c = data[n][2] or {}
        print(f"- {n}: {h.get('provider', '?')}; date {h.get('date', '?')}; "
              f"loadavg {h.get('loadavg', '?')}; check {c.get('check', 'missing')} "
              f"({c.get('checked', 0)} checks)")
    for p in problems:
        print(f"PROBLEM: {p}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
