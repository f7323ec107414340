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
# The library's test binary as scripts/test.sh built it (see
# scripts/built-tests.sh: `cargo test --lib` would build it again).
. scripts/built-tests.sh
built_tests_load || exit 1
lib=$(built_test lib onesided)
[ -n "$lib" ] || { echo "fuzz: no test binary of the library"; exit 1; }
status=0
# (No `tee /dev/stderr`: opening it truncates a log file stderr points to.)
out=$("$lib" fuzz --nocapture --test-threads=2 2>&1) || status=$?
grep -E "FUZZ-COUNT|panicked|^test result|FAILED" <<< "$out"
[ "$status" -eq 0 ] && grep -qE "^test result: ok\. [1-9][0-9]* passed" <<< "$out" || {
    echo "fuzz: FAILED (exit $status)"
    exit 1
}
