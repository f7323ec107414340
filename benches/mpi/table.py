#!/usr/bin/env python3
"""One table from the JSON lines of scripts/bench-vs-mpi.sh.

    table.py DIR
    table.py --from-fi-raw NAME [--sizes 8,1K,1M] FILE...

DIR holds one file per system and run, NAME.rK.jsonl (run K; a plain
NAME.jsonl is one run): the JSON lines of benches/mpi/rma_bench.c (mode
"mpi"), of `onesided-bench --json --raw` (modes "onesided" and "raw";
lines may carry onesided-run's "[0] " prefix) or of `--from-fi-raw` (mode
"fi_raw"). NAME decides the kind: names starting with "onesided" are
onesided runs, names starting with "fi-raw" raw libfabric
(benches/raw/fi_rma_raw.c), every other name is an MPI library.
DIR/session.txt (start/end uptime, the tcp provider, the osc/pt2pt flags),
if present, is printed first.

Prints a Markdown table: per pattern and size, each system's median µs per
operation (lower is better; bandwidth and rate patterns too, so every ratio
reads the same way) — with several runs the median of the per-run medians
and, in brackets, the fastest and slowest run median — then the ratios
onesided / best MPI (default settings: every MPI column; network:
onesided-tcp against the MPI columns whose name ends in "-tcp") and
onesided / raw per onesided column, all from the medians. Then the
"targets" section: every target of issue 13 (and issue 15's halo step)
computed from the cells, met / MISSED / not measured (with the reason).
Exit status 1 if a run's check failed or a file holds no result, 2 on
unreadable input (a missed target is a measurement, not an error: exit 0).

--from-fi-raw converts fi_rma_raw's output (`op=... lat_us=...` lines, one
file per completion mode) into one JSON-lines file: per op and size the
best mode's median, fi_rma_raw's acc_bw as acc_rate (µs per accumulate).
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
SYS_ORDER = ["mpich", "mpich-tcp", "ompi", "ompi-sm", "ompi-ucx-tcp", "ompi-pt2pt-tcp",
             "fi-raw-tcp", "fi-raw-shm", "onesided", "onesided-tcp", "onesided-shm"]
MIB = 1 << 20
RUN_FILE = re.compile(r"^(?P<name>.+?)(?:\.r(?P<run>\d+))?\.jsonl$")


def parse(path):
    """Returns (header, {(op, size, mode): lat_us}, check, {(op, size, mode): fi_mode})."""
    header, results, check, fi_modes = {}, {}, None, {}
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
                if "fi_mode" in v:
                    fi_modes[key] = v["fi_mode"]
            elif t == "check":
                check = v
    return header, results, check, fi_modes


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
        self.fi_modes = {}  # (op, size) -> [fi_rma_raw's best mode per run]

    def add(self, run, header, results, check, fi_modes):
        self.runs.append((run, header, check))
        for k, v in results.items():
            self.cells.setdefault(k, []).append(v)
        for (op, size, _m), v in fi_modes.items():
            self.fi_modes.setdefault((op, size), []).append(v)

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
        header, results, check, fi_modes = parse(os.path.join(d, f))
        systems.setdefault(name, System(name)).add(run, header, results, check, fi_modes)
        label = f"{name} run {run}" if run else name
        err = f[:-6] + ".err"
        if not results:
            problems.append(f"{label}: no results (see {err})")
        elif check is None:
            problems.append(f"{label}: no check line (run cut short?)")
        elif check.get("check") != "ok":
            problems.append(f"{label}: check {check.get('check')}: {check.get('failed')}")
    return systems, problems


# ---- fi_rma_raw output -> JSON lines ------------------------------------------

FI_OPS = {"acc_bw": "acc_rate"}  # fi_rma_raw name -> onesided-bench name
FI_OPS_PER_ITER = {"put_bw": 64, "acc_rate": 1024}
FI_SIZED = ("put_lat", "get_lat", "put_bw")  # the ops fi_rma_raw runs at several sizes
FI_MODES = {"FI_DELIVERY_COMPLETE": "delivery-complete", "FI_TRANSMIT_COMPLETE": "transmit-complete"}
KV = re.compile(r"(\w+)=(\S+)")


def parse_size(s):
    s = s.strip()
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(s[-1:].upper(), 1)
    return int(s[:-1] if mult > 1 else s) * mult


def parse_fi_raw(path):
    """One fi_rma_raw output file (with the script's "# bvm ..." line).

    Returns {"mode", "provider", "date", "loadavg", "skipped": {op: reason},
    "results": {(op, size): lat_us}, "check": None | (ok, [checked], why)}.
    lat_us is fi_rma_raw's median µs per operation: for put_bw per put of
    the 64, for acc_bw per accumulate of the 1024 (acc_bw is reported as
    acc_rate, like onesided-bench's: µs per accumulate = 1 / rate_Mops)."""
    r = {"mode": None, "provider": None, "date": None, "loadavg": None, "skipped": {},
         "results": {}, "check": None}
    if not os.path.exists(path):
        r["mode"] = os.path.basename(path) + " missing"
        return r
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line.strip()
            if line.startswith("# bvm "):
                m = re.match(r"# bvm mode=(\S+) date=(\S+) loadavg=(.*)$", line)
                if m:
                    r["mode"] = r["mode"] or m[1]
                    r["date"], r["loadavg"] = m[2], m[3].strip()
            elif line.startswith("# fi_rma_raw "):
                kv = dict(KV.findall(line))
                r["provider"] = kv.get("prov")
                if kv.get("op_flags") in FI_MODES:
                    r["mode"] = FI_MODES[kv["op_flags"]]
            elif line.startswith("# skipped "):
                ops, _, why = line[len("# skipped "):].partition(": ")
                for op in ops.split(","):
                    r["skipped"][FI_OPS.get(op, op)] = why
            elif line.startswith("op="):
                kv = dict(KV.findall(line))
                op = FI_OPS.get(kv["op"], kv["op"])
                r["results"][(op, int(kv["size"]))] = float(kv["lat_us"])
            elif line.startswith("check="):
                kv = dict(KV.findall(line))
                why = line.split(" why=", 1)[1] if " why=" in line else ""
                checked = [c for c in kv.get("checked", "").split(",") if c and c != "none"]
                r["check"] = (kv["check"] == "ok", checked, why)
    return r


def fi_raw_to_jsonl(name, paths, sizes=None):
    """JSON lines (the shape of rma_bench.c's, mode "fi_raw") of one run of
    fi_rma_raw in several modes (delivery-complete, transmit-complete): per
    op and size the best (lowest) median of the modes, and which mode it
    was. sizes (bytes) filters the sized patterns (put_lat, get_lat,
    put_bw); the atomics are 8-byte only."""
    runs = [(p, parse_fi_raw(p)) for p in paths]
    first = runs[0][1] if runs else {}
    best = {}
    for _p, r in runs:
        for k, v in r["results"].items():
            if sizes and k[0] in FI_SIZED and k[1] not in sizes:
                continue
            if k not in best or v < best[k][0]:
                best[k] = (v, r["mode"])
    skipped = {}
    for _p, r in runs:
        skipped.update(r["skipped"])
    provs = sorted({r["provider"] for _p, r in runs if r["provider"]})
    header = {"system": name, "tool": "fi_rma_raw",
              "provider": provs[0] if len(provs) == 1 else "/".join(provs) or "?",
              "date": first.get("date") or "?", "loadavg": first.get("loadavg") or "?",
              "modes": [r["mode"] or os.path.basename(p) for p, r in runs],
              "skipped": skipped}
    lines = [{"type": "header", "header": header}]
    order = {op: i for i, op in enumerate(OP_ORDER)}
    for (op, size), (lat, mode) in sorted(best.items(), key=lambda kv: (order.get(kv[0][0], 99), kv[0][1])):
        v = {"type": "result", "op": op, "mode": "fi_raw", "size": size,
             "ops_per_iter": FI_OPS_PER_ITER.get(op, 1), "lat_us": lat, "fi_mode": mode}
        if op.endswith("_bw"):
            v["bw_mbps"] = size / lat
        if op == "acc_rate":
            v["rate_mops"] = 1 / lat
        lines.append(v)
    checked, failed = 0, []
    for p, r in runs:
        label = r["mode"] or os.path.basename(p)
        if r["check"] is None:
            failed.append(f"{label}: no check line (see the .err file)")
            continue
        ok, items, why = r["check"]
        checked += len(items)
        if not ok:
            failed.append(f"{label}: {why or 'FAIL'}")
    if not runs:
        failed.append("no fi_rma_raw output")
    lines.append({"type": "check", "check": "FAIL" if failed else "ok", "checked": checked,
                  "failed": failed})
    return [json.dumps(v, ensure_ascii=False, separators=(",", ":")) for v in lines]


# ---- the targets of issue 13 (halo: issue 15) ----------------------------------

INTRA_OPS = ("put_lat", "get_lat", "acc_lat", "fop_lat", "cas_lat", "lock_unlock_lat",
             "fence_lat", "pscw_lat")
TCP_OPS = ("put_lat", "get_lat", "fop_lat", "cas_lat", "acc_lat")
# Cells a reference system skips by design: then the others alone are the reference.
KNOWN_SKIPS = {("ompi", "cas_lat"): "ompi skips cas_lat (Open MPI 4.1.4 osc/rdma segfaults)"}
HALO = 1024  # halo_lat's "size": the side of each rank's block


def cell_name(op, size):
    return str(size) if op == "halo_lat" else size_name(size)


def mode_of(name):
    if name.startswith("onesided"):
        return "onesided"
    if name.startswith("fi-raw"):
        return "fi_raw"
    return "mpi"


def read_session(d):
    """{"start": load, "end": load, "tcp": text, "pt2pt": text} from DIR/session.txt."""
    info = {}
    path = os.path.join(d, "session.txt")
    if not os.path.exists(path):
        return info
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            m = re.search(r"load average: ([\d.]+),? ([\d.]+),? ([\d.]+)", line)
            for key in ("start", "end"):
                if line.startswith(key + ":") and m:
                    info[key] = f"{m[1]} {m[2]} {m[3]}"
            if line.startswith("tcp provider:"):
                info["tcp"] = line.split(":", 1)[1].strip()
            if line.startswith("ompi-pt2pt-tcp flags:"):
                info["pt2pt"] = line.split(":", 1)[1].strip()
    return info


class Target:
    def __init__(self, sec, what, unit, limit, size):
        self.sec, self.what, self.unit, self.limit, self.size = sec, what, unit, limit, size
        self.mine = self.ref = self.who = None
        self.why = None  # why not measured
        self.note = ""

    def shown(self, lat):
        """µs per op, or the bandwidth (MB/s) / rate (Mops/s) it means."""
        if lat is None:
            return "—"
        if self.unit == "us":
            return f"{fmt(lat)} µs"
        if self.unit == "MB/s":
            return f"{fmt(self.size / lat)} MB/s"
        return f"{fmt(1 / lat)} Mops/s"

    def verdict(self):
        """(ratio onesided / reference in the shown unit or None, verdict)."""
        if self.why or self.mine is None or not self.ref:
            return None, "not measured"
        r = self.mine / self.ref if self.unit == "us" else self.ref / self.mine
        ok = r <= self.limit if self.unit == "us" else r >= self.limit
        return r, "met" if ok else "MISSED"


def targets(S, session):
    """The targets of issue 13 (and issue 15's halo step), in order."""
    def header(name):
        s = S.get(name)
        return s.runs[0][1] if s and s.runs else {}

    def mine(t, name, op, size):
        s = S.get(name)
        if s is None:
            t.why = f"{name} not run"
            return
        t.mine = s.median(op, size, "onesided")
        if t.mine is None:
            t.why = f"no {name} {op} {cell_name(op, size)}"

    def ref(t, names, op, size):
        """The fastest of names (all of them must have been run)."""
        vals, notes, why = [], [], None
        for n in names:
            s = S.get(n)
            if s is None:
                why = why or f"{n} not run"
                continue
            v = s.median(op, size, mode_of(n))
            if v is not None:
                vals.append((v, n))
                continue
            skipped = header(n).get("skipped", {}).get(op)
            if (n, op) in KNOWN_SKIPS:
                notes.append(KNOWN_SKIPS[(n, op)])
            elif skipped:
                why = why or f"{n} skipped {op}: {skipped}"
            else:
                why = why or f"no {n} {op} {cell_name(op, size)}"
        if vals and not why:
            t.ref, t.who = min(vals)
            if t.who.startswith("fi-raw"):
                modes = sorted(set(S[t.who].fi_modes.get((op, size), [])))
                t.who = f"{t.who} on {header(t.who).get('provider', '?')}" + \
                    (f", faster mode: {'/'.join(modes)}" if modes else "")
            if notes:
                t.note = "; ".join(notes) + f": reference {t.who} alone"
        elif not vals and not why:
            why = "; ".join(notes) or "no reference"
        t.why = t.why or why

    def same_provider(t, a, b):
        pa, pb = header(a).get("provider"), header(b).get("provider")
        if not t.why and pa and pb and pa != pb:
            t.why = f"providers differ: {a} {pa}, {b} {pb}"

    # The provider onesided-tcp ran on, beside every target that uses it.
    tcp = header("onesided-tcp").get("provider")
    if not tcp:
        m = re.search(r"ONESIDED_PROVIDER=(\S+)", session.get("tcp", ""))
        tcp = f"{m[1]} (set; not run)" if m else "?"
    out = []
    # 1. Intra-node, default settings: within 5 % of the faster Open MPI.
    for op in INTRA_OPS:
        t = Target("intra", f"{op} 8 ≤ 1.05× faster of ompi, ompi-sm", "us", 1.05, 8)
        mine(t, "onesided", op, 8)
        ref(t, ["ompi", "ompi-sm"], op, 8)
        out.append(t)
    # 2. tcp: within 30 % of raw libfabric on the same provider.
    for op in TCP_OPS:
        t = Target(f"tcp ({tcp})", f"{op} 8 ≤ 1.3× fi_rma_raw (same provider, best of DC/TC)", "us", 1.3, 8)
        mine(t, "onesided-tcp", op, 8)
        ref(t, ["fi-raw-tcp"], op, 8)
        same_provider(t, "onesided-tcp", "fi-raw-tcp")
        out.append(t)
    # 3. Batching small operations over tcp, against Open MPI osc/pt2pt.
    flags = session.get("pt2pt", "MCA flags not recorded")
    t = Target(f"batch ({tcp})", f"acc_rate 8 ≥ 1.0× ompi-pt2pt-tcp ({flags}), Mops/s", "Mops/s", 1.0, 8)
    mine(t, "onesided-tcp", "acc_rate", 8)
    ref(t, ["ompi-pt2pt-tcp"], "acc_rate", 8)
    out.append(t)
    t = Target(f"batch ({tcp})", "put_bw 8 ≥ 1.5× ompi-pt2pt-tcp, MB/s", "MB/s", 1.5, 8)
    mine(t, "onesided-tcp", "put_bw", 8)
    ref(t, ["ompi-pt2pt-tcp"], "put_bw", 8)
    out.append(t)
    # 4. 1 MiB: bandwidth within 10 % of raw libfabric (put_bw; fi_rma_raw has
    # no get_bw, so get_lat on both sides) and of the best MPI intra-node.
    for sys, raw, where in (("onesided-tcp", "fi-raw-tcp", f"tcp ({tcp})"),
                            ("onesided-shm", "fi-raw-shm", "shm provider")):
        for op, words in (("put_bw", "put_bw 1M"),
                          ("get_lat", "get_lat 1M (fi_rma_raw has no get_bw)")):
            t = Target("large", f"{where}: {words} bandwidth ≥ 0.9× fi_rma_raw (best of DC/TC)",
                       "MB/s", 0.9, MIB)
            mine(t, sys, op, MIB)
            ref(t, [raw], op, MIB)
            same_provider(t, sys, raw)
            out.append(t)
    for op in ("put_bw", "get_bw"):
        t = Target("large", f"intra: {op} 1M bandwidth ≥ 0.9× best of mpich, ompi, ompi-sm",
                   "MB/s", 0.9, MIB)
        mine(t, "onesided", op, MIB)
        ref(t, ["mpich", "ompi", "ompi-sm"], op, MIB)
        out.append(t)
    # 5. Issue 15: one step of the 1024 x 1024 halo exchange.
    t = Target("halo", "intra: halo_lat 1024 ≤ 1.0× faster of mpich, ompi, ompi-sm", "us", 1.0, HALO)
    mine(t, "onesided", "halo_lat", HALO)
    ref(t, ["mpich", "ompi", "ompi-sm"], "halo_lat", HALO)
    out.append(t)
    t = Target("halo", f"tcp ({tcp}): halo_lat 1024 ≤ 1.0× faster of mpich-tcp, ompi-ucx-tcp", "us", 1.0, HALO)
    mine(t, "onesided-tcp", "halo_lat", HALO)
    ref(t, ["mpich-tcp", "ompi-ucx-tcp"], "halo_lat", HALO)
    out.append(t)
    return out


def print_targets(S, session):
    print("## Targets (issue 13; halo: issue 15)")
    print()
    if "start" in session or "end" in session:
        print(f"Load (1/5/15-min, session.txt): start {session.get('start', '?')}, "
              f"end {session.get('end', '?')}.")
    tcp = S.get("onesided-tcp")
    used = tcp.runs[0][1].get("provider", "?") if tcp and tcp.runs else "not run"
    print(f"onesided-tcp provider: {used} (its run's header); script: "
          f"{session.get('tcp', 'not recorded')}.")
    print()
    print("Sections: intra = column onesided (default settings); tcp (onesided-tcp's provider) "
          "= onesided-tcp against "
          "fi_rma_raw (fi-raw-tcp) on the same libfabric provider, the faster of its "
          "delivery-complete and transmit-complete (-t) runs; batch = onesided-tcp against "
          "Open MPI osc/pt2pt over tcp; large = 1 MiB; halo = issue 15. fi_rma_raw skips the "
          "atomics its provider lacks (net in libfabric 1.17 has none): those tcp targets are "
          "then not measured, with the reason, rather than compared against another provider "
          "(BVM_TCP_PROVIDER=tcp runs both on tcp;ofi_rxm). Latency targets "
          "compare µs per operation (ratio = onesided / reference, met if ≤ limit), "
          "bandwidth and rate targets MB/s or Mops/s (ratio = onesided / reference, met if "
          "≥ limit), from the medians of the run medians. \"faster of\"/\"best of\": every "
          "listed system must have been run, else the target is not measured.")
    print()
    print("| section | target | onesided | reference | ratio | limit | verdict |")
    print("|---|---|---|---|---|---|---|")
    counts = {"met": 0, "MISSED": 0, "not measured": 0}
    for t in targets(S, session):
        r, verdict = t.verdict()
        counts[verdict] += 1
        cmp = "≤" if t.unit == "us" else "≥"
        refcell = t.shown(t.ref) + (f" ({t.who})" if t.who else "")
        if t.note:
            refcell += f"; {t.note}"
        v = verdict + (f": {t.why}" if verdict == "not measured" and t.why else "")
        print(f"| {t.sec} | {t.what} | {t.shown(t.mine)} | {refcell} | "
              f"{fmt_ratio(r) if r is not None else '—'} | {cmp} {t.limit:g} | {v} |")
    print()
    print(f"targets: {counts['met']} met, {counts['MISSED']} missed, "
          f"{counts['not measured']} not measured")


def from_fi_raw(argv):
    """table.py --from-fi-raw NAME [--sizes LIST] FILE...: JSON lines to stdout."""
    args = argv[2:]
    if not args:
        print("usage: table.py --from-fi-raw NAME [--sizes 8,1K,1M] FILE...", file=sys.stderr)
        return 2
    name, args = args[0], args[1:]
    sizes = None
    if args[:1] == ["--sizes"] and len(args) >= 2:
        try:
            sizes = {parse_size(s) for s in args[1].split(",") if s}
        except ValueError:
            print(f"bad --sizes '{args[1]}'", file=sys.stderr)
            return 2
        args = args[2:]
    try:
        for line in fi_raw_to_jsonl(name, args, sizes):
            print(line)
    except (OSError, ValueError, KeyError) as e:
        print(f"{e}", file=sys.stderr)
        return 2
    return 0


def main(argv):
    if len(argv) >= 2 and argv[1] == "--from-fi-raw":
        return from_fi_raw(argv)
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
    onesided = [n for n in names if mode_of(n) == "onesided"]
    mpis = [n for n in names if mode_of(n) == "mpi"]
    fi_raws = [n for n in names if mode_of(n) == "fi_raw"]
    mpi_net = [n for n in mpis if n.endswith("-tcp")]

    rows = sorted(
        {(op, size) for n in names for (op, size, _m) in S[n].cells},
        key=lambda k: (OP_ORDER.index(k[0]) if k[0] in OP_ORDER else 99, k[1]),
    )
    cols = ["op", "size"] + mpis + fi_raws
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
        cells += [S[n].cell(op, size, "fi_raw") for n in fi_raws]
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
        h0 = dict(runs[0][1])
        if n in fi_raws:
            h0["provider"] = (f"fi_rma_raw on {h0.get('provider', '?')}, best of "
                              f"{' and '.join(h0.get('modes', [])) or '?'}")
            for op, why in sorted(h0.get("skipped", {}).items()):
                h0["provider"] += f"; skipped {op}: {why}"
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
    print_targets(S, read_session(d))
    for p in problems:
        print(f"PROBLEM: {p}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
