#!/usr/bin/env bash
# Fault-injection stage (issue 12): one rank killed with SIGKILL inside a
# lock_all+put+flush loop, while holding an exclusive lock, in a fence, a
# window creation, a free and while its PSCW target waits; 2 and 4 ranks,
# each case twice; (a) under `onesided-run --keep-going` every survivor must
# return Err, (b) under plain `onesided-run` the job must end non-zero with
# no rank left. Prints a table of tries and outcomes (tests/faults.rs).
# Run by .ci/run; extra arguments go to the suite's test executable
# (libtest filters and options).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

export ONESIDED_FAULT_STAGE=1 ONESIDED_FAULT_TIMEOUT=${ONESIDED_FAULT_TIMEOUT:-3}
echo "==================== fault injection (ONESIDED_TIMEOUT=$ONESIDED_FAULT_TIMEOUT) ===================="
start=$(date +%s)
# The test executable scripts/test.sh built (scripts/built-tests.sh).
. scripts/built-tests.sh
built_tests_load || exit 1
exe=$(built_test test faults)
[ -n "$exe" ] || { echo "no test executable for tests/faults.rs" >&2; exit 1; }
"$exe" --nocapture "$@"
echo "fault injection stage: $(( $(date +%s) - start )) s"
