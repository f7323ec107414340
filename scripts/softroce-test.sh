#!/usr/bin/env bash
# Runs the multi-process RMA and atomics tests over real verbs: libfabric's verbs;ofi_rxm
# provider on a soft-RoCE device (rdma_rxe) inside a qemu guest.
#
# The guest runner is not part of this repository: point SOFTROCE_RUNNER at a
# `run-in-vm.sh`-style script that boots a kernel with rdma_rxe and runs a
# command in the current directory (the project's CI machines provide one at
# ../shared/softroce/run-in-vm.sh, which is found automatically). Without a
# runner this script prints SKIP and exits 0. It is opt-in (ONESIDED_SOFTROCE=1)
# until the duplicated completions described in docs/transport.md are resolved.
#
# Under TCG emulation this takes about 5 minutes.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

runner=${SOFTROCE_RUNNER:-}
if [ -z "$runner" ] && [ -x ../shared/softroce/run-in-vm.sh ]; then
  runner=$(cd ../shared/softroce && pwd)/run-in-vm.sh
fi
if [ -z "$runner" ] || [ ! -x "$runner" ]; then
  echo "SKIP: soft-RoCE tests: no guest runner (set SOFTROCE_RUNNER to a run-in-vm.sh)"
  exit 0
fi
if [ "${ONESIDED_SOFTROCE:-0}" != "1" ]; then
  echo "SKIP: soft-RoCE tests are opt-in (ONESIDED_SOFTROCE=1) until verbs;ofi_rxm's"
  echo "SKIP: duplicated completions for large atomics are resolved (docs/transport.md)"
  exit 0
fi

# Build the test binaries on the host; the guest runs them with the host's userland.
bins=$(cargo test --test rma --test atomics --no-run --message-format=json 2>/dev/null |
  grep '"kind":\["test"\]' | sed -n 's/.*"executable":"\([^"]*\)".*/\1/p')
if [ "$(echo "$bins" | grep -c .)" -ne 2 ]; then
  echo "soft-RoCE tests: could not build the rma and atomics test binaries" >&2
  exit 1
fi

echo "== soft-RoCE: tests/rma.rs and tests/atomics.rs over verbs;ofi_rxm (rxe0) in a qemu guest =="
export SOFTROCE_PASSENV="ONESIDED_TEST_PROVIDERS ONESIDED_TEST_LAUNCHERS ONESIDED_TEST_TIMEOUT"
export ONESIDED_TEST_PROVIDERS=verbs
export ONESIDED_TEST_LAUNCHERS=${ONESIDED_TEST_LAUNCHERS:-onesided-run}
export ONESIDED_TEST_TIMEOUT=${ONESIDED_TEST_TIMEOUT:-300}
export SOFTROCE_TIMEOUT=${SOFTROCE_TIMEOUT:-1500}
# One guest boot for both binaries; the first failure fails the boot.
script='for b in "$@"; do "$b" --test-threads=1 || exit $?; done'
if "$runner" sh -c "$script" sh $bins; then
  exit 0
fi
# Runs on soft-RoCE have been intermittent (docs/transport.md); a second boot
# tells that apart from a deterministic failure. Both outcomes stay in the log.
echo "WARNING: soft-RoCE run failed; retrying once in a fresh guest (see docs/transport.md)"
"$runner" sh -c "$script" sh $bins
