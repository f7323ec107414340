#!/usr/bin/env bash
# Installs what is missing (scripts/setup.sh), builds every target of the
# workspace and runs all its tests (debug profile), then the RMA tests over
# soft-RoCE when asked (ONESIDED_SOFTROCE=1) and a guest runner is available
# (scripts/softroce-test.sh; otherwise it prints SKIP).
#
# Extra arguments are passed to `cargo test`, e.g.
#     scripts/test.sh device_count        # a test-name filter
#     scripts/test.sh -- --nocapture
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

scripts/setup.sh

cargo build --workspace --all-targets

log=$(mktemp)
trap 'rm -f "$log"' EXIT

status=0
cargo test --workspace "$@" 2>&1 | tee "$log" || status=$?

# Real verbs over soft-RoCE: opt-in here (ONESIDED_SOFTROCE=1); .ci/run runs
# scripts/softroce-test.sh as a stage of its own, on by default.
if [ "$status" -eq 0 ] && [ "$#" -eq 0 ] && [ "${ONESIDED_SOFTROCE:-0}" = 1 ]; then
  scripts/softroce-test.sh 2>&1 | tee -a "$log" || status=$?
fi

echo
echo "==================== cargo test summary ===================="
grep -E '^ *(Running|Doc-tests) |^test result:' "$log" || echo "(no test result lines: see the output above)"
echo "============================================================"
exit "$status"
