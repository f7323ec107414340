#!/usr/bin/env bash
# Builds release and runs onesided-bench with --raw under `onesided-run -n 2`
# for the net, tcp, shm and sockets providers. Writes, per provider P,
#     target/bench/P.txt    the human table (with date, loadavg, CPU count)
#     target/bench/P.json   the whole run as one JSON document
#     target/bench/P.svg    latency and bandwidth versus size
# (under $CARGO_TARGET_DIR if set, else ./target).
#
# Extra arguments go to onesided-bench, e.g.
#     scripts/bench.sh --ops put_lat,get_lat --reps 3 --time 0.2
# BENCH_PROVIDERS=tcp,shm overrides the provider list.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

target=${CARGO_TARGET_DIR:-target}
out="$target/bench"
mkdir -p "$out"

cargo build --release --features unstable --bin onesided-bench --bin onesided-run

IFS=, read -r -a providers <<<"${BENCH_PROVIDERS:-net,tcp,shm,sockets}"
status=0
for p in "${providers[@]}"; do
    echo "== $p ($(date -u +%FT%TZ), loadavg $(cut -d' ' -f1-3 /proc/loadavg))"
    if "$target/release/onesided-run" -n 2 --provider "$p" \
        "$target/release/onesided-bench" --raw \
        --json-file "$out/$p.json" --plot "$out/$p.svg" "$@" \
        | sed 's/^\[0\] //' | tee "$out/$p.txt"; then
        :
    else
        echo "onesided-bench failed for provider $p" >&2
        status=1
    fi
done
echo "results in $out/"
exit "$status"
