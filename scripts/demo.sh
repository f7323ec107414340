#!/usr/bin/env bash
# Builds the release binaries and examples, then runs the demo on 4 local
# ranks with the onesided launcher:
#     onesided-run -n 4 target/release/examples/demo [ARGS...]
# Arguments are passed to the demo. Set ONESIDED_PROVIDER (e.g. tcp, shm,
# verbs) to choose the libfabric provider; it is passed through unchanged.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

scripts/setup.sh

cargo build --release --bins --examples

# Honour CARGO_TARGET_DIR / build.target-dir, as cargo does.
target_dir=$(cargo metadata --format-version 1 --no-deps 2>/dev/null |
    grep -o '"target_directory":"[^"]*"' | cut -d'"' -f4) || true
target_dir=${target_dir:-${CARGO_TARGET_DIR:-target}}

runner=$target_dir/release/onesided-run
demo=$target_dir/release/examples/demo

if [[ ! -x $runner ]]; then
    echo "demo.sh: launcher $runner was not built (is the onesided-run binary in the workspace yet?)" >&2
    exit 1
fi
if [[ ! -x $demo ]]; then
    echo "demo.sh: example $demo was not built (is examples/demo.rs in the workspace yet?)" >&2
    exit 1
fi

if [[ -n ${ONESIDED_PROVIDER:-} ]]; then
    export ONESIDED_PROVIDER
    echo "demo.sh: ONESIDED_PROVIDER=$ONESIDED_PROVIDER"
fi

exec "$runner" -n 4 "$demo" "$@"
