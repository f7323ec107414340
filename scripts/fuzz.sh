#!/usr/bin/env bash
# Deterministic fuzzing of every decoder of peer or launcher input
# (src/fuzz.rs; docs/reliability.md, "Fuzzing"): 100,000 inputs per
# decoder, or 1,000,000 with `scripts/fuzz.sh long`, or N with
# `scripts/fuzz.sh N`. ONESIDED_FUZZ_SEED changes the generator's seed.
# Prints one FUZZ-COUNT line per decoder; fails on any panic.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
case "${1:-}" in
    long) cases=1000000 ;;
    "") cases=100000 ;;
    *) cases=$1 ;;
esac
export ONESIDED_FUZZ_CASES=$cases
# (No `tee /dev/stderr`: opening it truncates a log file stderr points to.)
out=$(cargo test --features unstable --lib fuzz -- --nocapture --test-threads=2 2>&1) || true
grep -E "FUZZ-COUNT|panicked|^test result|FAILED" <<< "$out"
grep -q "^test result: ok" <<< "$out"
