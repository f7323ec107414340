#!/usr/bin/env python3
"""The table of scripts/scale.sh: reads DIR/P.jsonl (onesided-scale's JSON
lines, one per rank, prefixed "[r] " by onesided-run) and prints a Markdown
table; with DOC, also replaces the text between the scale-table markers of
DOC with it.

    scale-table.py DIR [DOC]

DIR/messages-P.jsonl (onesided-scale --messages) give a second table,
between the messages-table markers.
"""

import json
import math
import os
import re
import sys

BEGIN, END = "<!-- scale-table begin -->", "<!-- scale-table end -->"
MBEGIN, MEND = "<!-- messages-table begin -->", "<!-- messages-table end -->"


def load(path):
    ranks = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = re.sub(r"^\[\d+\] ", "", line.strip())
            if line.startswith("{"):
                v = json.loads(line)
                if v.get("type") == "scale":
                    ranks.append(v)
    return ranks


def kib(b):
    return f"{b / 1024:.0f}"


def row(p, role, r):
    f = r["first"]
    return (
        f"| {p} | {role} | {kib(r['rss_init'])} | {kib(f['rss_created'] - r['rss_init']):>3} | "
        f"{kib(f['rss_used'] - f['rss_created']):>3} | "
        f"{r['init']['av_entries']} / {f['created']['av_entries']} / {f['used']['av_entries']} | "
        f"{f['used']['peers_contacted']} | {f['used']['rkey_cache_entries']} | "
        f"{f['window_cached_peers_used']} | {msgs(f.get('create_messages'))} / "
        f"{msgs(f.get('free_messages'))} | {r['create_us_median']:.0f} | {r['free_us_median']:.0f} |"
    )


def msgs(s):
    """Messages a rank sent: RMA writes + reads + atomics + active messages."""
    if not s:
        return "–"
    return str(s["writes"] + s["reads"] + s["atomics"] + s["sends"])


def table(d):
    ps = sorted(int(f[:-6]) for f in os.listdir(d) if f.endswith(".jsonl") and f[:-6].isdigit())
    lines = []
    cond = os.path.join(d, "conditions")
    if os.path.exists(cond):
        t0, l0, t1, l1, cpus = open(cond).read().split()[:5]
        lines.append(f"Measured {t0} – {t1} (1-min load {l0} at the start, {l1} at the end, "
                     f"{cpus} CPUs; other helpers were building and testing on the same "
                     "machine), provider tcp, windows of 4 KiB, 5 create/use/free cycles.")
        lines.append("")
    lines += [
        "| P | role | RSS after init (KiB) | ΔRSS window created (KiB) | ΔRSS after use (KiB) "
        "| AV entries init / created / used | peers contacted | rkey cache entries "
        "| window's cached peers | messages sent: create / free | create µs (median) "
        "| free µs (median) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    missing = []
    summary = []
    touched = []
    for p in ps:
        ranks = {r["rank"]: r for r in load(os.path.join(d, f"{p}.jsonl"))}
        if len(ranks) != p:
            missing.append(f"P={p}: {len(ranks)} of {p} ranks reported (see {p}.err)")
        if 0 in ranks:
            lines.append(row(p, "all peers (rank 0)", ranks[0]))
        if 1 in ranks:
            lines.append(row(p, "one peer (rank 1)", ranks[1]))
        if 0 in ranks and 1 in ranks and p > 2:
            grow = lambda r: r["first"]["rss_used"] - r["first"]["rss_created"]
            per = (grow(ranks[0]) - grow(ranks[1])) / (p - 2)
            touched.append(f"- P={p}: RSS per *touched* peer (rank 0 minus rank 1 after use, "
                           f"over P − 2 peers): {per / 1024:.1f} KiB; window creation: "
                           f"+{kib(ranks[0]['first']['rss_created'] - ranks[0]['rss_init'])} KiB "
                           "on rank 0")
        idle = [ranks[r] for r in ranks if r >= 2]
        if idle:
            worst = max(idle, key=lambda r: r["first"]["used"]["av_entries"])
            lines.append(row(p, f"no peer (worst of {len(idle)})", worst))
            av = worst["first"]["used"]["av_entries"]
            summary.append((p, av, math.ceil(math.log2(p))))
    lines.append("")
    for p, av, lg in summary:
        lines.append(f"- P={p}: an idle rank holds {av} address-vector entries "
                     f"(barrier partners: ⌈log2 P⌉ = {lg} outgoing, plus those that wrote to it)")
    lines += touched
    for m in missing:
        lines.append(f"- MISSING: {m}")
    return "\n".join(lines) + "\n", not missing


def messages_table(d):
    """Per P, window kind, epoch and phase: rank 0's messages (writes +
    reads + atomics + active messages sent) and the total over all ranks."""
    ps = sorted(int(f[9:-6]) for f in os.listdir(d)
                if f.startswith("messages-") and f.endswith(".jsonl") and f[9:-6].isdigit())
    lines = [
        "| P | window | epoch | phase | rank 0: writes / reads / atomics / AM sends | "
        "rank 0 messages | all ranks' messages | descriptor reads (rkey misses, all ranks) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    ok = True
    for p in ps:
        rows = {}
        with open(os.path.join(d, f"messages-{p}.jsonl"), encoding="utf-8") as f:
            for line in f:
                line = re.sub(r"^\[\d+\] ", "", line.strip())
                if line.startswith("{"):
                    v = json.loads(line)
                    if v.get("type") == "messages":
                        rows.setdefault((v["window"], v["epoch"], v["phase"]), []).append(v)
        if not rows:
            ok = False
        for (window, epoch, phase), rs in rows.items():
            if len(rs) != p:
                ok = False
            n = lambda s: s["writes"] + s["reads"] + s["atomics"] + s["sends"]
            r0 = next((r for r in rs if r["rank"] == 0), None)
            s0 = r0["spent"] if r0 else None
            lines.append(
                f"| {p} | {window} | {epoch} | {phase} | "
                + (f"{s0['writes']} / {s0['reads']} / {s0['atomics']} / {s0['sends']} | {n(s0)}"
                   if s0 else "? | ?")
                + f" | {sum(n(r['spent']) for r in rs)} | {sum(r['rkey_misses'] for r in rs)} |")
    return "\n".join(lines) + "\n", ok


def replace(path, begin, end, text):
    doc = open(path, encoding="utf-8").read()
    if begin not in doc or end not in doc:
        print(f"{path}: no {begin} … {end} markers", file=sys.stderr)
        return False
    head, rest = doc.split(begin, 1)
    _, tail = rest.split(end, 1)
    open(path, "w", encoding="utf-8").write(head + begin + "\n" + text + end + tail)
    return True


def main(argv):
    if len(argv) not in (2, 3):
        print(__doc__, file=sys.stderr)
        return 2
    text, ok = table(argv[1])
    print(text)
    mtext, mok = messages_table(argv[1])
    print(mtext)
    if len(argv) == 3:
        if not replace(argv[2], BEGIN, END, text):
            return 2
        if not replace(argv[2], MBEGIN, MEND, mtext):
            return 2
    ok = ok and mok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
