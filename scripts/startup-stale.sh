#!/usr/bin/env bash
# Reproduces issue 12 item 9 at its source (needs root: a private /dev/shm).
#
#   scripts/startup-stale.sh [killed jobs] [runs]      (default 40, 500)
#
# In a private mount namespace with its own /dev/shm (nothing of this
# machine's /dev/shm is touched): (1) starts <killed jobs> 4-rank shm jobs
# and SIGKILLs their ranks once each has its provider region, leaving the
# regions a crashed job leaves; (2) spawns short-lived processes without
# pause in the background (a busy machine's pid churn: pids wrap around
# pid_max in seconds instead of minutes); (3) runs scripts/startup-loop.sh
# <runs> 4 (STARTUP_RUN / STARTUP_PROGRAM pick the binaries). Prints the
# number of stale regions before and after, and the loop's counts.
set -u
if [ "${1:-}" != "--inside" ]; then
    exec unshare --mount --propagation private "$0" --inside "$@"
fi
shift
jobs=${1:-40}
runs=${2:-500}
here=$(cd "$(dirname "$0")/.." && pwd)
run=${STARTUP_RUN:-$here/target/debug/onesided-run}
prog=${STARTUP_PROGRAM:-$here/target/debug/examples/demo}
mount -t tmpfs -o size=1g,mode=1777 tmpfs /dev/shm || exit 1
export ONESIDED_SHM=0 ONESIDED_PROVIDER=shm ONESIDED_ACCUMULATE=software

regions() { ls /dev/shm | grep -cE ':[0-9]+:[0-9]+$'; }

# (1) killed jobs
for j in $(seq 1 "$jobs"); do
    "$run" -n 4 "$prog" >/dev/null 2>&1 &
    launcher=$!
    for _ in $(seq 1 400); do
        ranks=$(pgrep -P "$launcher" | tr '\n' ' ')
        n=0
        for r in $ranks; do
            ls /dev/shm | grep -qE "(^|-)$r[-:]" && n=$((n + 1))
        done
        [ "$n" -ge 4 ] && break
        kill -0 "$launcher" 2>/dev/null || break
    done
    for r in $(pgrep -P "$launcher"); do kill -KILL "$r" 2>/dev/null; done
    wait "$launcher" 2>/dev/null
done
echo "stale regions after $jobs killed jobs: $(regions)"

# (2) pid churn
nice -n 19 bash -c "while :; do /bin/true; done" &
churn=$!
trap 'kill $churn 2>/dev/null' EXIT

# (3) the start-up loop
cd "$here" && STARTUP_RUN="$run" STARTUP_PROGRAM="$prog" scripts/startup-loop.sh "$runs" 4
rc=$?
echo "stale regions left: $(regions)"
exit $rc
