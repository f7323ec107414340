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
# perftest's latency tools print t_typical (the median of the per-iteration
# samples) and t_avg; onesided-bench --per-iter prints the same two
# statistics (lat_p50_us, and lat_us: the mean over a repetition's loop).
# Each is compared with its like: median with t_typical, mean with t_avg.
perf_typ, perf_avg, ours_p50, ours_mean = {}, {}, {}, {}
for line in open(sys.argv[1]):
    w = line.split()
    if len(w) > 2 and w[0] == "PERFTEST":
        name, f = w[1], w[2:]
        if name == "write_bw":   # bytes iters peak avg(Gb/s) rate
            perf_typ.setdefault(name, []).append(float(f[3]))
            perf_avg.setdefault(name, []).append(float(f[3]))
        else:                    # bytes iters min max typical avg ...
            perf_typ.setdefault(name, []).append(float(f[4]))
            perf_avg.setdefault(name, []).append(float(f[5]))
    elif len(w) > 2 and w[0] == "ONESIDED":
        r = json.loads(" ".join(w[2:]))
        if r.get("type") != "result" or r.get("mode") != "onesided":
            continue
        key = (w[1], r["op"], r["size"])
        if r["op"] == "put_bw":
            v = r["bw_mbps"] * 8 / 1000
            ours_mean.setdefault(key, []).append(v)
            ours_p50.setdefault(key, []).append(v)
        else:
            ours_mean.setdefault(key, []).append(r["lat_us"])
            ours_p50.setdefault(key, []).append(r.get("lat_p50_us", float("nan")))
nan = float("nan")
med = lambda xs: statistics.median(xs) if xs else nan
pt = {k: med(v) for k, v in perf_typ.items()}
pa = {k: med(v) for k, v in perf_avg.items()}
o50 = {k: med(v) for k, v in ours_p50.items()}
om = {k: med(v) for k, v in ours_mean.items()}
rows = [
    ("put + flush, 8 B", ("put_lat", 8), "write_lat", 2, "2 × ib_write_lat", "≤ 1.2", lambda r: r <= 1.2),
    ("put ping-pong (half round trip), 8 B", ("put_pingpong", 8), "write_lat", 1, "ib_write_lat", "≤ 1.2", lambda r: r <= 1.2),
    ("get, 8 B", ("get_lat", 8), "read_lat", 1, "ib_read_lat", "≤ 1.2", lambda r: r <= 1.2),
    ("fetch_and_op SUM i64", ("fop_lat", 8), "fadd_lat", 1, "ib_atomic_lat", "≤ 1.2", lambda r: r <= 1.2),
    ("compare_and_swap i64", ("cas_lat", 8), "cswap_lat", 1, "ib_atomic_lat -A CMP_AND_SWAP", "≤ 1.2", lambda r: r <= 1.2),
    ("put bandwidth, 1 MiB (Gb/s)", ("put_bw", 1048576), "write_bw", 1, "ib_write_bw", "≥ 0.9", lambda r: r >= 0.9),
]
yes = lambda ok, r: "yes" if ok(r) else "NO"
print("\n| operation (target) | floor: typical / avg (tool) | native p50 / mean | ratio p50 : typical | met | ratio mean : avg | met "
      "| manual progress p50 : typical / mean : avg | verbs;ofi_rxm p50 / mean | native faster (mean) |")
print("|---|---|---|---|---|---|---|---|---|---|")
for label, (op, size), tool_key, mul, tool, target, ok in rows:
    ft, fa = mul * pt.get(tool_key, nan), mul * pa.get(tool_key, nan)
    n50, nm = o50.get(("native", op, size), nan), om.get(("native", op, size), nan)
    m50, mm = o50.get(("manual", op, size), nan), om.get(("manual", op, size), nan)
    x50, xm = o50.get(("rxm", op, size), nan), om.get(("rxm", op, size), nan)
    bw = op == "put_bw"
    faster = (nm > xm) if bw else (nm < xm)
    if bw:
        print(f"| {label} (target {target}) | {ft:.2f} ({tool}) | {nm:.2f} | {nm / ft:.2f} | {yes(ok, nm / ft)} | {nm / ft:.2f} | {yes(ok, nm / ft)} "
              f"| {mm / ft:.2f} | {xm:.2f} | {'yes' if faster else 'NO'} |")
    else:
        print(f"| {label} (target {target}) | {ft:.2f} / {fa:.2f} µs ({tool}) | {n50:.2f} / {nm:.2f} µs | {n50 / ft:.2f} | {yes(ok, n50 / ft)} "
              f"| {nm / fa:.2f} | {yes(ok, nm / fa)} | {m50 / ft:.2f} / {mm / fa:.2f} | {x50:.2f} / {xm:.2f} µs | {'yes' if faster else 'NO'} |")
print(f"\nrounds: perftest {max((len(v) for v in perf_typ.values()), default=0)}, onesided {max((len(v) for v in ours_mean.values()), default=0)} per figure (medians)")
EOF
