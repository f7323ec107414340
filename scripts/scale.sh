#!/usr/bin/env bash
# Runs onesided-scale under `onesided-run -n P` on the tcp provider for
# P = 2 4 8 16 32 64 (oversubscribed on this machine), keeps every rank's
# JSON line in $OUT/P.jsonl and puts the measured table into
# docs/scaling.md (between the scale-table markers; scripts/scale-table.py).
#
# Knobs: SCALE_PS="2 4 8 16 32 64"  SCALE_CYCLES=5  SCALE_BYTES=4096
#        SCALE_TIMEOUT=900 (seconds per P, onesided-run --timeout)
#        ONESIDED_TIMEOUT=300 (per operation; oversubscribed ranks are slow)
#        SCALE_OUT=$CARGO_TARGET_DIR/scale (else target/scale)
#        SCALE_DOC=docs/scaling.md (empty: print the table only)
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

target=${CARGO_TARGET_DIR:-target}
out=${SCALE_OUT:-$target/scale}
doc=${SCALE_DOC-docs/scaling.md}
ps=${SCALE_PS:-2 4 8 16 32 64}
export ONESIDED_TIMEOUT=${ONESIDED_TIMEOUT:-300}
mkdir -p "$out"
rm -f "$out"/*.jsonl "$out"/*.err

cargo build --release --bin onesided-scale --bin onesided-run

status=0
start="$(date -u +%FT%TZ) $(cut -d' ' -f1 /proc/loadavg)"
for p in $ps; do
    echo "== P=$p ($(date -u +%T), loadavg $(cut -d' ' -f1-3 /proc/loadavg))"
    if ! "$target/release/onesided-run" -n "$p" --provider tcp --timeout "${SCALE_TIMEOUT:-900}" \
        "$target/release/onesided-scale" --cycles "${SCALE_CYCLES:-5}" --bytes "${SCALE_BYTES:-4096}" \
        >"$out/$p.jsonl" 2>"$out/$p.err"; then
        echo "   P=$p failed (see $out/$p.err):" >&2
        tail -n 5 "$out/$p.err" >&2 || true
        status=1
    fi
done
echo "$start $(date -u +%FT%TZ) $(cut -d' ' -f1 /proc/loadavg) $(nproc)" >"$out/conditions"
python3 scripts/scale-table.py "$out" ${doc:+"$doc"}
exit "$status"
