#!/usr/bin/env bash
# Repeats a job's start-up and counts the failures (issue 12 item 9: the shm
# provider's fi_enable failing with "Device or resource busy" about once in
# 150 start-ups under load).
#
#   scripts/startup-loop.sh [runs] [ranks]       (default 500 runs, 4 ranks)
#
# Runs `onesided-run -n <ranks> <program>` with ONESIDED_SHM=0
# ONESIDED_PROVIDER=shm ONESIDED_ACCUMULATE=software (each overridable).
# STARTUP_RUN and STARTUP_PROGRAM name the launcher and the program
# (default target/debug/onesided-run and target/debug/examples/demo, which
# starts, moves and checks a ring of data, and leaves). Prints each failure's
# last lines, then one line: runs, failures, failures with EBUSY, and stale
# shm regions of the provider's default form (<pid>:<uid>:<n>) in /dev/shm.
set -u
runs=${1:-500}
ranks=${2:-4}
run=${STARTUP_RUN:-target/debug/onesided-run}
prog=${STARTUP_PROGRAM:-target/debug/examples/demo}
export ONESIDED_SHM=${ONESIDED_SHM:-0}
export ONESIDED_PROVIDER=${ONESIDED_PROVIDER:-shm}
export ONESIDED_ACCUMULATE=${ONESIDED_ACCUMULATE:-software}
failed=0
busy=0
start=$(date +%s)
for i in $(seq 1 "$runs"); do
    if ! out=$(timeout 120 "$run" -n "$ranks" "$prog" 2>&1); then
        failed=$((failed + 1))
        if grep -q "Device or resource busy" <<<"$out"; then
            busy=$((busy + 1))
        fi
        echo "--- run $i failed:"
        grep -v "^\[.\] *at \|^\[.\] *[0-9]*: " <<<"$out" | tail -8
    fi
done
stale=$(ls /dev/shm | grep -cE '^[0-9]+:[0-9]+:[0-9]+$')
echo "runs=$runs ranks=$ranks failed=$failed ebusy=$busy stale_default_regions=$stale seconds=$(($(date +%s) - start))"
[ "$failed" -eq 0 ]
