#!/usr/bin/env bash
# Runs onesided-scale under `onesided-run -n P` on the tcp provider for
# P = 2 4 8 16 32 64 (oversubscribed on this machine), keeps every rank's
# JSON line in $OUT/P.jsonl and puts the measured table into
# docs/scaling.md (between the scale-table markers; scripts/scale-table.py);
# then `onesided-scale --messages` for P = 2 8 ($OUT/messages-P.jsonl, the
# messages-table markers). ONESIDED_SHM=0: the provider carries every
# operation (the intra-node direct path would hide the network costs that
# matter across nodes).
#
# Knobs: SCALE_PS="2 4 8 16 32 64"  SCALE_CYCLES=5  SCALE_BYTES=4096
#        SCALE_TIMEOUT=900 (seconds per P, onesided-run --timeout)
#        ONESIDED_TIMEOUT=300 (per operation; oversubscribed ranks are slow)
#        SCALE_OUT=$CARGO_TARGET_DIR/scale (else target/scale)
#        SCALE_DOC=docs/scaling.md (empty: print the table only)
#        SCALE_MESSAGE_PS="2 8"
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

target=${CARGO_TARGET_DIR:-target}
out=${SCALE_OUT:-$target/scale}
doc=${SCALE_DOC-docs/scaling.md}
ps=${SCALE_PS:-2 4 8 16 32 64}
export ONESIDED_TIMEOUT=${ONESIDED_TIMEOUT:-300}
export ONESIDED_SHM=0
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
for p in ${SCALE_MESSAGE_PS:-2 8}; do
    echo "== messages, P=$p ($(date -u +%T), loadavg $(cut -d' ' -f1-3 /proc/loadavg))"
    if ! "$target/release/onesided-run" -n "$p" --provider tcp --timeout "${SCALE_TIMEOUT:-900}" \
        "$target/release/onesided-scale" --messages \
        >"$out/messages-$p.jsonl" 2>"$out/messages-$p.err"; then
        echo "   messages P=$p failed (see $out/messages-$p.err):" >&2
        tail -n 5 "$out/messages-$p.err" >&2 || true
        status=1
    fi
done
echo "$start $(date -u +%FT%TZ) $(cut -d' ' -f1 /proc/loadavg) $(nproc)" >"$out/conditions"
python3 scripts/scale-table.py "$out" ${doc:+"$doc"}
exit "$status"
