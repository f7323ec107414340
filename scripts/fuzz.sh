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
# --workspace, as scripts/test.sh builds: the same feature resolution, so
# the library's test binary is already built (a root-only `cargo test`
# resolves the dependencies' features without the other members' and
# compiles the library again). The other members' unit tests match no
# `fuzz` test: their result lines say 0 passed.
status=0
out=$(cargo test --workspace --lib fuzz -- --nocapture --test-threads=2 2>&1) || status=$?
grep -E "FUZZ-COUNT|panicked|^test result: .* [1-9][0-9]* passed|FAILED" <<< "$out"
[ "$status" -eq 0 ] && grep -qE "^test result: ok\. [1-9][0-9]* passed" <<< "$out" || {
    echo "fuzz: FAILED (cargo test exit $status)"
    exit 1
}
