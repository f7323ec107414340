#!/usr/bin/env bash
# A real Slurm on this machine, then the multi-process suites under the
# launchers cluster users run: `srun --mpi=pmix`, `srun --mpi=pmi2` (Slurm
# 22.05 from Debian) and Open MPI's `mpirun` (PMIx).
#
# 1. Installs slurm-wlm, munge, openmpi-bin and libpmix-dev when missing
#    (Debian packages; needs root or sudo).
# 2. Writes a single-node slurm.conf into a private state directory
#    (ProctrackType=proctrack/linuxproc, TaskPlugin=task/none, CPUs = the
#    real core count, SlurmUser/SlurmdUser root, ports 16817/16818), starts
#    munged (unless one already answers), slurmctld and slurmd as root and
#    waits until the node is idle.
# 3. Runs tests/launchers.rs (bootstrap in use, start-up counters at P = 2
#    and 8, a killed rank ending the job, srun --mpi=none refused) and the
#    collectives, layouts, groups, signal and window_creation suites,
#    the mpi_usage job that runs every case,
#    and the C program (tests/c_api.rs) with
#    ONESIDED_TEST_LAUNCHERS=srun-pmix,srun-pmi2,mpirun over tcp, every
#    job under each of the three launchers; then the rma, atomics and locks
#    suites (240 jobs crossed took 4.5 of the stage's 7.7 minutes) with
#    ONESIDED_TEST_MATRIX=paired: each job under one of the three, rotating
#    by test name (tests/common), so each launcher starts about a third of
#    them (the rest of the stage: 50, 54 and 49 jobs under srun-pmix,
#    srun-pmi2 and mpirun; stage 349 s instead of 460); and prints the test
#    counts per suite.
# 4. Tears everything it started down on exit (trap): no daemon is left.
#
# Any set-up failure prints its cause (the daemon's log tail) and exits 1.
# Run by .ci/run; about 5 minutes. Extra arguments go to every suite's
# test executable (libtest filters and options).
set -euo pipefail
export PATH="$PATH:/usr/sbin:/sbin"

cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$(pwd)

say() { echo "slurm-test: $*"; }
die() {
    echo "slurm-test: SET-UP FAILED: $*" >&2
    exit 1
}

sudo=()
if [[ $(id -u) -ne 0 ]]; then
    command -v sudo >/dev/null || die "not root and no sudo: slurmctld/slurmd must run as root"
    sudo=(sudo)
fi

# --- 1. packages ---------------------------------------------------------
packages=(slurm-wlm munge openmpi-bin libpmix-dev)
missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]} > 0)); then
    say "installing ${missing[*]}"
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq ||
        die "apt-get update failed"
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
        --no-install-recommends "${missing[@]}" || die "apt-get install ${missing[*]} failed"
fi
for tool in slurmctld slurmd srun sinfo munged munge mpirun; do
    command -v "$tool" >/dev/null || die "$tool not found after installing ${packages[*]}"
done

# --- 2. a one-node cluster -----------------------------------------------
state=$(mktemp -d /tmp/onesided-slurm.XXXXXX)
chmod 755 "$state"
pids=()
munged_pid=""
teardown() {
    local rc=$?
    set +e
    for pidfile in "$state/slurmd.pid" "$state/slurmctld.pid"; do
        [[ -s $pidfile ]] && pids+=("$(cat "$pidfile")")
    done
    [[ -n $munged_pid ]] && pids+=("$munged_pid")
    for p in "${pids[@]}"; do
        "${sudo[@]}" kill -TERM "$p" 2>/dev/null
    done
    for p in "${pids[@]}"; do
        for _ in $(seq 50); do
            kill -0 "$p" 2>/dev/null || break
            sleep 0.1
        done
        if kill -0 "$p" 2>/dev/null; then
            echo "slurm-test: daemon $p did not stop on SIGTERM; SIGKILL" >&2
            "${sudo[@]}" kill -KILL "$p" 2>/dev/null
        fi
    done
    # Steps that outlived their daemons would be a bug of the kill tests.
    if pgrep -f "slurmstepd: \[" >/dev/null; then
        echo "slurm-test: WARNING: slurmstepd processes left; killing them" >&2
        "${sudo[@]}" pkill -KILL -f "slurmstepd: \[" 2>/dev/null
    fi
    "${sudo[@]}" rm -rf "$state"
    say "torn down (no slurmctld, slurmd or munged of ours left)"
    exit "$rc"
}
trap teardown EXIT

host=$(hostname -s)
cpus=$(nproc --all)
export SLURM_CONF=$state/slurm.conf
cat >"$SLURM_CONF" <<EOF
ClusterName=onesided-ci
SlurmctldHost=$host
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
StateSaveLocation=$state/ctld
SlurmdSpoolDir=$state/spool
TmpFS=$state/tmp
SlurmctldPidFile=$state/slurmctld.pid
SlurmdPidFile=$state/slurmd.pid
SlurmctldLogFile=$state/slurmctld.log
SlurmdLogFile=$state/slurmd.log
SlurmctldPort=16817
SlurmdPort=16818
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
KillWait=5
NodeName=$host CPUs=$cpus State=UNKNOWN
PartitionName=ci Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
EOF
# TmpFS in the state directory: the pmix plugin's per-step directories
# (spmix_appdir_<uid>_<job>.<step>) live there, so a directory left by an
# earlier, interrupted run (job ids start at 1 again) cannot make a step's
# launch fail ("task 0 launch failed: Unspecified error", seen once here).
mkdir -p "$state/ctld" "$state/spool" "$state/tmp"

# munge: reuse a running munged (it may serve other users), else start one.
if munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
    say "munged already running"
else
    [[ -s /etc/munge/munge.key ]] || die "/etc/munge/munge.key missing (the munge package creates it)"
    "${sudo[@]}" install -d -o munge -g munge -m 0755 /run/munge
    # (munged runs as munge: its pid file stays in /run/munge, which it owns.)
    "${sudo[@]}" rm -f /run/munge/munged.pid
    "${sudo[@]}" runuser -u munge -- /usr/sbin/munged ||
        die "munged did not start (see /var/log/munge/munged.log)"
    for _ in $(seq 50); do
        [[ -s /run/munge/munged.pid ]] && break
        sleep 0.1
    done
    munged_pid=$(cat /run/munge/munged.pid 2>/dev/null || true)
    [[ -n $munged_pid ]] || die "munged wrote no /run/munge/munged.pid"
    munge -n | unmunge >/dev/null || die "munge credential round trip failed: $(tail -5 /var/log/munge/munged.log 2>&1)"
    say "started munged (pid $munged_pid)"
fi

"${sudo[@]}" env SLURM_CONF="$SLURM_CONF" slurmctld -i ||
    die "slurmctld did not start: $(tail -20 "$state/slurmctld.log" 2>&1)"
"${sudo[@]}" env SLURM_CONF="$SLURM_CONF" slurmd ||
    die "slurmd did not start: $(tail -20 "$state/slurmd.log" 2>&1)"

deadline=$((SECONDS + 60))
until [[ $(sinfo -h -n "$host" -o %t 2>/dev/null) == idle ]]; do
    if ((SECONDS > deadline)); then
        echo "--- sinfo ---" >&2
        sinfo -N -l >&2 || true
        echo "--- slurmctld.log ---" >&2
        tail -20 "$state/slurmctld.log" >&2 || true
        echo "--- slurmd.log ---" >&2
        tail -20 "$state/slurmd.log" >&2 || true
        die "node $host not idle after 60 s"
    fi
    sleep 0.5
done
say "node $host idle ($cpus CPUs); srun --mpi=list: $(srun --mpi=list 2>&1 | tr '\n' ' ')"
srun -O -n 2 --mpi=pmi2 true || die "a trivial srun step failed: $(tail -20 "$state/slurmd.log")"

# --- 3. the suites --------------------------------------------------------
export ONESIDED_TEST_LAUNCHERS=${ONESIDED_TEST_LAUNCHERS:-srun-pmix,srun-pmi2,mpirun}
export ONESIDED_TEST_PROVIDERS=${ONESIDED_TEST_PROVIDERS:-tcp}
export ONESIDED_TEST_DIRECT=${ONESIDED_TEST_DIRECT:-0}
say "ONESIDED_TEST_LAUNCHERS=$ONESIDED_TEST_LAUNCHERS ONESIDED_TEST_PROVIDERS=$ONESIDED_TEST_PROVIDERS ONESIDED_TEST_DIRECT=$ONESIDED_TEST_DIRECT"
log=$state/test.log
start=$SECONDS
status=0
# The test executables scripts/test.sh built (scripts/built-tests.sh): a
# `cargo test --test ...` here would compile the library again (36 s).
. scripts/built-tests.sh
built_tests_load || exit 1
run_suite() { # suite, libtest arguments...
    local suite=$1 exe
    shift
    exe=$(built_test test "$suite")
    if [[ -z $exe ]]; then
        echo "no test executable for tests/$suite.rs" | tee -a "$log"
        status=1
        return
    fi
    echo "     Running tests/$suite.rs ($exe)" | tee -a "$log"
    "$exe" "$@" 2>&1 | tee -a "$log" || status=$?
}
: > "$log"
for suite in launchers collectives layouts groups signal window_creation c_api; do
    run_suite "$suite" --test-threads=1 --skip in_process_ "$@"
done
for suite in rma atomics locks; do
    ONESIDED_TEST_MATRIX=paired run_suite "$suite" --test-threads=1 --skip in_process_ "$@"
done
# The MPI-usage cases (requests, info hints, no_locks, attributes, ...):
# only the job that runs every case under the launcher; the suite's
# in-process tests do not depend on it and ran in the host stage.
run_suite mpi_usage --test-threads=1 --exact every_case "$@"

echo
echo "==================== Slurm / mpirun summary ===================="
grep -E '^ *Running |^test result:' "$log" || echo "(no test result lines)"
for l in ${ONESIDED_TEST_LAUNCHERS//,/ }; do
    n=$(grep -c "\] [a-z_:]*: $l -n [0-9]* .*: ok in" "$log" || true)
    echo "jobs passed under $l: $n"
done
grep -E '^\[counters\]|\[counters\]' "$log" | sed 's/^.*\[counters\]/[counters]/' || true
echo "stage time: $((SECONDS - start)) s of tests"
echo "================================================================"
exit "$status"
