#!/bin/sh
# Runs INSIDE the soft-RoCE guest (scripts/softroce-test.sh boots it): the
# native verbs device tests, onesided-info, the README's laptop path
# (rxe0 deleted and re-created with exactly the README's commands, then the
# demo), and the rma and atomics suites over libfabric's verbs;ofi_rxm.
# Arguments: LIB_TEST_BIN RMA_BIN ATOMICS_BIN. Prints one `SOFTROCE-COUNT`
# line per part; exits non-zero on the first failing part.
set -u
lib=$1 rma=$2 atomics=$3
log=$(mktemp)

count() { # part, libtest output file
    p=$(sed -n 's/^test result: .* \([0-9]*\) passed; \([0-9]*\) failed.*/\1/p' "$2" | awk '{s+=$1} END {print s+0}')
    f=$(sed -n 's/^test result: .* \([0-9]*\) passed; \([0-9]*\) failed.*/\2/p' "$2" | awk '{s+=$1} END {print s+0}')
    echo "SOFTROCE-COUNT $1: $p passed, $f failed"
}

echo "== [guest] native verbs: device tests (src/transport/verbs) on rxe0 =="
"$lib" transport::verbs --test-threads=1 2>&1 | tee "$log"
rc=$?
count "native verbs device tests" "$log"
[ $rc -eq 0 ] || exit $rc

echo "== [guest] onesided-info (verbs section) =="
./target/debug/onesided-info --no-atomics 2>&1 | sed -n '/^verbs devices/,$p'

echo "== [guest] README laptop path: delete rxe0, re-create it with the README's commands, run the demo =="
netdev=$(rdma link show rxe0/1 | sed -n 's/.*netdev \([^ ]*\).*/\1/p')
echo "rxe0 is on netdev ${netdev:?cannot tell rxe0's netdev}"
rdma link delete rxe0 || exit 1
ls /sys/class/infiniband 2>/dev/null | grep -q rxe0 && { echo "rxe0 still present after delete"; exit 1; }
set -x
modprobe rdma_rxe
rdma link add rxe0 type rxe netdev "$netdev"
set +x
ibv_devinfo -d rxe0 | grep -E "state|link_layer" || exit 1
ONESIDED_IB_DEVICE=rxe0:1 ./target/debug/onesided-info --no-atomics 2>&1 | grep "native back-end would use" || exit 1
# The native transport is not complete yet (ONESIDED_BACKEND=verbs says so);
# the demo runs over libfabric's verbs provider on the re-created device.
ONESIDED_PROVIDER='verbs;ofi_rxm' ./target/debug/onesided-run -n 2 ./target/debug/examples/demo || exit 1
echo "SOFTROCE-COUNT README laptop path: demo passed on the re-created rxe0"

if [ "${ONESIDED_SOFTROCE_SUITES:-1}" != "1" ]; then
    echo "SOFTROCE-COUNT verbs;ofi_rxm rma/atomics suites: not run (ONESIDED_SOFTROCE_SUITES=0)"
    exit 0
fi
echo "== [guest] tests/rma.rs and tests/atomics.rs over verbs;ofi_rxm =="
# Known provider defect (docs/transport.md, "Duplicated completions on
# soft-RoCE"): atomics::accumulate_large_counts asserts that no completion
# was rejected, and libfabric 1.17's rxm repeats completions of emulated
# large atomics on rxe. It runs separately and is counted, not gating.
"$rma" --test-threads=1 2>&1 | tee "$log"
rc=$?
count "verbs;ofi_rxm rma" "$log"
[ $rc -eq 0 ] || exit $rc
"$atomics" --test-threads=1 --skip accumulate_large_counts 2>&1 | tee "$log"
rc=$?
count "verbs;ofi_rxm atomics (known defect excluded)" "$log"
[ $rc -eq 0 ] || exit $rc
"$atomics" --test-threads=1 --exact accumulate_large_counts 2>&1 | tee "$log"
if [ $? -eq 0 ]; then
    echo "SOFTROCE-COUNT known provider defect atomics::accumulate_large_counts: passed this time"
else
    echo "SOFTROCE-COUNT known provider defect atomics::accumulate_large_counts: failed (rxm duplicated completions; docs/transport.md)"
fi
exit 0
