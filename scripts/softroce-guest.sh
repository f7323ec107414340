#!/bin/sh
# Runs INSIDE the soft-RoCE guest (scripts/softroce-test.sh boots it): the
# native verbs device tests, onesided-info, the README's laptop path
# (rxe0 deleted and re-created with exactly the README's commands, then the
# demo on the native back-end), the multi-process suites and the fault
# injection on the native back-end, and the rma and atomics suites over
# libfabric's verbs;ofi_rxm.
# Arguments: LIB_TEST_BIN BINS_FILE (lines "suite executable").
# Prints one `SOFTROCE-COUNT` line per part; exits non-zero on the first
# failing part (after the part finished, so its count is printed).
set -u
lib=$1 bins=$2
# The binaries' cargo profile directory (scripts/softroce-test.sh builds
# profile `guest`).
bindir=./target/${ONESIDED_GUEST_PROFILE:-debug}
log=$(mktemp)
status=0

# Counts a part from its libtest output and fails (status 1) when a test
# failed or none passed (a crash before libtest's summary). Pipelines
# into `tee` report tee's status, not the tests': this is the verdict.
count() { # part, libtest output file
    p=$(sed -n 's/^test result: .* \([0-9]*\) passed; \([0-9]*\) failed.*/\1/p' "$2" | awk '{s+=$1} END {print s+0}')
    f=$(sed -n 's/^test result: .* \([0-9]*\) passed; \([0-9]*\) failed.*/\2/p' "$2" | awk '{s+=$1} END {print s+0}')
    k=$(grep -c 'SKIPPED .*ONESIDED_TEST_MAX_RANKS' "$2")
    echo "SOFTROCE-COUNT $1: $p passed ($k of them skipped: only jobs above ONESIDED_TEST_MAX_RANKS), $f failed"
    [ "$f" -eq 0 ] && [ "$p" -gt 0 ]
}
suite() { # name -> executable
    sed -n "s/^$1 //p" "$bins"
}

echo "== [guest] native verbs: device tests (src/transport/verbs) on rxe0 =="
"$lib" transport::verbs --test-threads=1 2>&1 | tee "$log"
count "native verbs device tests" "$log" || exit 1

echo "== [guest] onesided-info (verbs section) =="
"$bindir/onesided-info" --no-atomics 2>&1 | sed -n '/^verbs devices/,$p'

echo "== [guest] README laptop path: delete rxe0, re-create it with the README's commands, run the demo =="
netdev=$(rdma link show rxe0/1 | sed -n 's/.*netdev \([^ ]*\).*/\1/p')
echo "rxe0 is on netdev ${netdev:?cannot tell rxe0's netdev}"
rdma link delete rxe0 || exit 1
ls /sys/class/infiniband 2>/dev/null | grep -q rxe0 && { echo "rxe0 still present after delete"; exit 1; }
set -x
modprobe rdma_rxe
rdma link add rxe0 type rxe netdev "$netdev"
export ONESIDED_IB_DEVICE=rxe0:1
"$bindir/onesided-run" -n 2 "$bindir/examples/demo" > "$log" 2>&1
rc=$?
set +x
cat "$log"
[ $rc -eq 0 ] || exit $rc
grep -q "over rxe0:1" "$log" || { echo "the demo did not run on the native back-end"; exit 1; }
echo "SOFTROCE-COUNT README laptop path: demo passed on the re-created rxe0 (native verbs)"

echo "== [guest] multi-process suites on the native back-end (verbs-native) =="
# The 8-rank jobs are left to the host: eight processes on the emulated
# guest take minutes each. no_connection_to_uncontacted_peers (8 ranks) is
# the exception: it shows that no queue pair exists to an uncontacted peer.
# The suites' in_process_* tests run on the host (in-process back-end).
skip8="--skip random_rma_checker_8 --skip on_8_ranks --skip groups_8 --skip notifications_8 --skip contention_8 --skip no_connection_to_uncontacted_peers --skip in_process_"
# Each test at its largest rank count up to 4 (ONESIDED_TEST_RANK_COUNTS=
# largest): the most peers, queue pairs and lock contention per job; the
# smaller counts of the same test run on the host over every provider and
# add little here for a job cost of 4-10 s (it saved ~4 min of the stage).
# The same holds for the variant lists of run_variants (locks'
# software-lock variants: 6 jobs instead of 12, ~50 s).
# Two tests at a time (ONESIDED_GUEST_TEST_THREADS): a job of the emulated
# guest spends much of its time in sleeping waits (native verbs lets a
# waiting rank sleep in the kernel), so two jobs share the vCPUs well.
threads=${ONESIDED_GUEST_TEST_THREADS:-2}
for s in rma atomics locks sync_modes software_accumulate aggregation dynamic random_rma collectives layouts groups signal active_messages window_creation; do
    b=$(suite "$s")
    [ -n "$b" ] || { echo "no binary for suite $s"; exit 1; }
    echo "-- $s"
    env ONESIDED_TEST_PROVIDERS=verbs-native ONESIDED_TEST_DIRECT=0 ONESIDED_TEST_RANK_COUNTS=largest \
        "$b" --test-threads="$threads" $skip8 2>&1 | tee "$log"
    count "native $s" "$log" || status=1
done
echo "-- C program (bindings/c/examples/ring.c) on the native back-end"
ring=$(suite c_ring)
[ -n "$ring" ] || { echo "no C program built"; exit 1; }
ring_ok=0
for n in 2 4; do
    ONESIDED_BACKEND=verbs ONESIDED_SHM=0 "$bindir/onesided-run" -n "$n" "$ring" > "$log" 2>&1
    rc=$?
    if [ "$rc" -eq 0 ] && [ "$(grep -c 'every check passed' "$log")" -eq "$n" ]; then
        ring_ok=$((ring_ok + 1))
        grep 'every check passed' "$log" | head -1
    else
        echo "ring.c at $n ranks FAILED (exit $rc):"
        tail -n 20 "$log"
        status=1
    fi
done
echo "SOFTROCE-COUNT native C program (ring.c): $ring_ok of 2 jobs passed (2 and 4 ranks)"
b=$(suite rma)
ONESIDED_TEST_PROVIDERS=verbs-native ONESIDED_TEST_DIRECT=0 \
    "$b" --test-threads=1 --exact no_connection_to_uncontacted_peers 2>&1 | tee "$log"
count "native rma no_connection_to_uncontacted_peers (8 ranks)" "$log" || status=1

echo "-- mpi_usage: every case (requests, info hints, no_locks, attributes, ...) in one job per rank count"
# The suite's in-process tests run on the host; here only the job that runs
# every case over the native back-end, at 2 and 4 ranks.
ONESIDED_TEST_PROVIDERS=verbs-native ONESIDED_TEST_DIRECT=0 \
    "$(suite mpi_usage)" --test-threads=1 --exact every_case 2>&1 | tee "$log"
count "native mpi_usage every_case" "$log" || status=1

echo "== [guest] fault injection on the native back-end (tests/faults.rs, one try per case) =="
# Rank 1 killed with SIGKILL at six points, 4 ranks (the host's stage runs 2
# and 4; a 4-rank job also chains collective waits): every survivor must
# return Err within the bound and no rank may be left (docs/reliability.md).
env ONESIDED_BACKEND=verbs ONESIDED_FAULT_STAGE=1 ONESIDED_FAULT_TIMEOUT=3 ONESIDED_FAULT_TRIES=1 ONESIDED_FAULT_RANKS=4 \
    "$(suite faults)" --nocapture 2>&1 | tee "$log"
count "native fault injection" "$log" || status=1
[ $status -eq 0 ] || exit $status

if [ "${ONESIDED_SOFTROCE_SUITES:-1}" != "1" ]; then
    echo "SOFTROCE-COUNT verbs;ofi_rxm rma/atomics suites: not run (ONESIDED_SOFTROCE_SUITES=0)"
    exit 0
fi
echo "== [guest] tests/rma.rs and tests/atomics.rs over libfabric's verbs;ofi_rxm =="
# Known provider defect (docs/transport.md, "Duplicated completions on
# soft-RoCE"): atomics::accumulate_large_counts asserts that no completion
# was rejected, and libfabric 1.17's rxm repeats completions of emulated
# large atomics on rxe. It runs separately and is counted, not gating.
# At 2 ranks only (ONESIDED_TEST_MAX_RANKS): the 4-rank jobs run on the
# native back-end above; this keeps the stage near its time budget.
unset ONESIDED_IB_DEVICE
export ONESIDED_TEST_PROVIDERS='verbs;ofi_rxm' ONESIDED_TEST_DIRECT=0 ONESIDED_TEST_MAX_RANKS=2
"$(suite rma)" --test-threads=1 --skip no_connection_to_uncontacted_peers --skip in_process_ 2>&1 | tee "$log"
count "verbs;ofi_rxm rma" "$log" || exit 1
"$(suite atomics)" --test-threads=1 --skip accumulate_large_counts 2>&1 | tee "$log"
count "verbs;ofi_rxm atomics (known defect excluded)" "$log" || exit 1
# A 20-second ONESIDED_TIMEOUT (default 60): the defect shows as a wait
# that never ends, which this ends 40 s sooner; the test passes in ~4 s on
# the native back-end, so a run without the defect fits well within it.
ONESIDED_TIMEOUT=20 "$(suite atomics)" --test-threads=1 --exact accumulate_large_counts > "$log" 2>&1
cat "$log"
if grep -q "^test result: ok. 1 passed" "$log"; then
    echo "SOFTROCE-COUNT known provider defect atomics::accumulate_large_counts: passed this time"
else
    echo "SOFTROCE-COUNT known provider defect atomics::accumulate_large_counts: failed (rxm duplicated completions; docs/transport.md)"
fi
exit 0
