#!/usr/bin/env bash
# Fault-injection stage (issue 12): one rank killed with SIGKILL inside a
# lock_all+put+flush loop, while holding an exclusive lock, in a fence, a
# window creation, a free and while its PSCW target waits; 2 and 4 ranks,
# each case twice; (a) under `onesided-run --keep-going` every survivor must
# return Err, (b) under plain `onesided-run` the job must end non-zero with
# no rank left. Prints a table of tries and outcomes (tests/faults.rs).
# Run by .ci/run; extra arguments go to `cargo test`.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

export ONESIDED_FAULT_STAGE=1 ONESIDED_FAULT_TIMEOUT=${ONESIDED_FAULT_TIMEOUT:-3}
echo "==================== fault injection (ONESIDED_TIMEOUT=$ONESIDED_FAULT_TIMEOUT) ===================="
start=$(date +%s)
cargo test --test faults "$@" -- --nocapture
echo "fault injection stage: $(( $(date +%s) - start )) s"
