#!/usr/bin/env bash
# Measures onesided on soft-RoCE against the floor, in one guest boot
# (issue 11 §3): Debian's perftest (ib_write_lat, ib_read_lat,
# ib_atomic_lat for FETCH_AND_ADD and CMP_AND_SWAP, ib_write_bw) against
# onesided-bench on the native verbs back-end and over libfabric's
# verbs;ofi_rxm, REPEAT rounds interleaved. Prints the ratio table of
# docs/performance.md ("Native verbs against the floor"). TCG makes absolute
# numbers meaningless; the ratios, measured side by side, are the result.
#
# Usage: scripts/softroce-bench.sh [OUT.txt]     (REPEAT=3 by default)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

runner=${SOFTROCE_RUNNER:-}
for r in ../shared/softroce/run-in-vm.sh /work/shared/softroce/run-in-vm.sh; do
  if [ -z "$runner" ] && [ -x "$r" ]; then runner=$(cd "$(dirname "$r")" && pwd)/run-in-vm.sh; fi
done
[ -n "$runner" ] || { echo "no guest runner (set SOFTROCE_RUNNER)" >&2; exit 1; }

cargo build --release --features unstable --bin onesided-bench --bin onesided-run
out=${1:-target/softroce-bench.txt}
export SOFTROCE_PASSENV="REPEAT"
export REPEAT=${REPEAT:-3}
export SOFTROCE_TIMEOUT=${SOFTROCE_TIMEOUT:-1800}
"$runner" scripts/softroce-bench-guest.sh "$PWD/target/release" 2>&1 | tee "$out"

python3 - "$out" <<'EOF'
import json, statistics, sys
perf, ours = {}, {}
for line in open(sys.argv[1]):
    w = line.split()
    if len(w) > 2 and w[0] == "PERFTEST":
        name, f = w[1], w[2:]
        if name == "write_bw":   # bytes iters peak avg(Gb/s) rate
            perf.setdefault(name, []).append(float(f[3]))
        else:                    # bytes iters min max typical ...
            perf.setdefault(name, []).append(float(f[4]))
    elif len(w) > 2 and w[0] == "ONESIDED":
        r = json.loads(" ".join(w[2:]))
        if r.get("type") != "result" or r.get("mode") != "onesided":
            continue
        key = (w[1], r["op"], r["size"])
        v = r["bw_mbps"] * 8 / 1000 if r["op"] == "put_bw" else r["lat_us"]
        ours.setdefault(key, []).append(v)
med = lambda xs: statistics.median(xs) if xs else float("nan")
p = {k: med(v) for k, v in perf.items()}
o = {k: med(v) for k, v in ours.items()}
rows = [
    ("put + flush, 8 B", ("put_lat", 8), 2 * p.get("write_lat", float("nan")), "2 × ib_write_lat", "≤ 1.2", lambda r: r <= 1.2),
    ("put ping-pong (half round trip), 8 B", ("put_pingpong", 8), p.get("write_lat", float("nan")), "ib_write_lat", "≤ 1.2", lambda r: r <= 1.2),
    ("get, 8 B", ("get_lat", 8), p.get("read_lat", float("nan")), "ib_read_lat", "≤ 1.2", lambda r: r <= 1.2),
    ("fetch_and_op SUM i64", ("fop_lat", 8), p.get("fadd_lat", float("nan")), "ib_atomic_lat", "≤ 1.2", lambda r: r <= 1.2),
    ("compare_and_swap i64", ("cas_lat", 8), p.get("cswap_lat", float("nan")), "ib_atomic_lat -A CMP_AND_SWAP", "≤ 1.2", lambda r: r <= 1.2),
    ("put bandwidth, 1 MiB (Gb/s)", ("put_bw", 1048576), p.get("write_bw", float("nan")), "ib_write_bw", "≥ 0.9", lambda r: r >= 0.9),
]
print("\n| operation | floor (tool) | native | ratio | met | native, manual progress | ratio | met | verbs;ofi_rxm | native faster |")
print("|---|---|---|---|---|---|---|---|---|---|")
for label, (op, size), floor, tool, target, ok in rows:
    n = o.get(("native", op, size), float("nan"))
    m = o.get(("manual", op, size), float("nan"))
    x = o.get(("rxm", op, size), float("nan"))
    bw = op == "put_bw"
    faster = (n > x) if bw else (n < x)
    unit = "" if bw else " µs"
    yes = lambda r: "yes" if ok(r) else "NO"
    print(f"| {label} (target {target}) | {floor:.2f}{unit} ({tool}) | {n:.2f}{unit} | {n / floor:.2f} | {yes(n / floor)} "
          f"| {m:.2f}{unit} | {m / floor:.2f} | {yes(m / floor)} | {x:.2f}{unit} | {'yes' if faster else 'NO'} |")
print(f"\nrounds: perftest {max((len(v) for v in perf.values()), default=0)}, onesided {max((len(v) for v in ours.values()), default=0)} per figure (medians)")
EOF
