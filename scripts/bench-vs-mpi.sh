#!/usr/bin/env bash
# onesided against MPICH and Open MPI on this machine, in one go, same
# patterns and method (2 ranks, rank r pinned to CPU r):
#
#   mpich         MPICH default (Debian: ch4:ucx; on one node UCX shared memory)
#   mpich-tcp     MPICH with MPIR_CVAR_NOLOCAL=1 UCX_TLS=tcp,self
#   ompi          Open MPI default (osc/rdma over btl/vader); cas_lat skipped:
#                 MPI_Compare_and_swap segfaults there in 4.1.4 (ompi#11349)
#   ompi-ucx-tcp  Open MPI --mca osc ucx --mca pml ucx, UCX_TLS=tcp,self
#   ompi-pt2pt-tcp Open MPI --mca osc pt2pt --mca pml ob1 --mca btl tcp,self
#                 (queues small operations and ships them at the flush:
#                 the reference of issue 5 §3b)
#   onesided      onesided-bench --raw under onesided-run, default settings
#   onesided-tcp  ONESIDED_SHM=0 ONESIDED_PROVIDER=${BVM_TCP_PROVIDER:-net}: over
#                 TCP sockets with the automatic choice, libfabric's `net`
#                 (BVM_TCP_PROVIDER=tcp for `tcp;ofi_rxm`)
#   onesided-shm  ONESIDED_SHM=0 ONESIDED_PROVIDER=shm
#
# The patterns are onesided-bench's (benches/mpi/rma_bench.c has the same
# ones against MPI-3 RMA), including halo_lat: one step of a 1024 x 1024
# f64 halo exchange (two strided column puts per rank + fence; MPI uses
# MPI_Type_vector on origin and target, onesided Window::put_layout).
#
# BVM_RUNS times, interleaved (A B C … A B C …, so slow drifts of the
# machine hit every system alike), then prints ONE table
# (benches/mpi/table.py): per pattern and size each system's median of the
# per-run medians (µs per operation) with the spread of the runs,
# onesided / best MPI and onesided / raw, and the verdict on every target of
# issue 5 §3 / §3b (also in $out/table.md), and plots it (one line per
# system, `onesided-bench --plot-from`) into $out/bench-vs-mpi.svg. The load
# (uptime) is printed at the start and the end.
#
# Installs what it needs if missing (mpich, libmpich-dev, openmpi-bin,
# libopenmpi-dev; sudo when not root), builds benches/mpi/rma_bench.c with
# mpicc.mpich and mpicc.openmpi and onesided in release mode.
#
# Knobs (environment):
#   BVM_RUNS=3       runs of every system (interleaved); the table reports
#                    the median of the run medians and their min–max
#   BVM_TIME=0.1     seconds per repetition     BVM_REPS=3     repetitions per run
#   BVM_SIZES=8,1K,64K,1M                        BVM_MAX_ITERS=10000
#   BVM_OPS=<all>    comma list of patterns      BVM_SYSTEMS=<all> comma list
#   BVM_TIMEOUT=600  seconds per system (a run is killed then)          BVM_PIN=1 (0: no pinning)
#   BVM_OUT=$CARGO_TARGET_DIR/bench-vs-mpi (else target/bench-vs-mpi)
# See docs/performance.md for how long a run takes; BVM_TIME=0.5 BVM_REPS=5
# BVM_SIZES=8,64,1K,4K,64K,256K,1M,4M is the long run.
#
# Options:
#   --quick          BVM_TIME=0.01 BVM_REPS=1 BVM_RUNS=1 BVM_SIZES=8,64K (a smoke run)
#   --dry-run DIR    no install, build or run: only print the table of the
#                    NAME[.rK].jsonl files already in DIR (used by tests/bench_vs_mpi.rs)
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

die() {
    echo "bench-vs-mpi: $*" >&2
    exit 2
}
command -v python3 >/dev/null || die "python3 is needed for the table"

case "${1:-}" in
--dry-run)
    [[ $# -eq 2 ]] || die "usage: $0 --dry-run DIR"
    exec python3 benches/mpi/table.py "$2"
    ;;
--quick)
    : "${BVM_TIME:=0.01}" "${BVM_REPS:=1}" "${BVM_RUNS:=1}" "${BVM_SIZES:=8,64K}"
    shift
    ;;
"") ;;
*) die "unknown option '$1' (see the header of $0)" ;;
esac
[[ $# -eq 0 ]] || die "unexpected arguments: $*"

time_s=${BVM_TIME:-0.1}
reps=${BVM_REPS:-3}
runs=${BVM_RUNS:-3}
[[ $runs =~ ^[1-9][0-9]*$ ]] || die "BVM_RUNS must be a positive integer, not '$runs'"
sizes=${BVM_SIZES:-8,1K,64K,1M}
max_iters=${BVM_MAX_ITERS:-10000}
timeout_s=${BVM_TIMEOUT:-600}
pin=${BVM_PIN:-1}
all_ops=put_lat,get_lat,put_bw,get_bw,acc_lat,acc_rate,fop_lat,cas_lat,msg_rate,lock_unlock_lat,fence_lat,pscw_lat,halo_lat
ops=${BVM_OPS:-$all_ops}
target=${CARGO_TARGET_DIR:-target}
out=${BVM_OUT:-$target/bench-vs-mpi}
IFS=, read -r -a systems <<<"${BVM_SYSTEMS:-mpich,mpich-tcp,ompi,ompi-ucx-tcp,ompi-pt2pt-tcp,onesided,onesided-tcp,onesided-shm}"

# ---- install what is missing ----------------------------------------------
need=()
command -v mpicc.mpich >/dev/null && command -v mpirun.mpich >/dev/null || need+=(mpich libmpich-dev)
command -v mpicc.openmpi >/dev/null && command -v mpirun.openmpi >/dev/null || need+=(openmpi-bin libopenmpi-dev)
if ((${#need[@]} > 0)); then
    sudo=()
    if [[ $(id -u) -ne 0 ]]; then
        command -v sudo >/dev/null || die "need root or sudo to install ${need[*]}"
        sudo=(sudo)
    fi
    echo "bench-vs-mpi: installing ${need[*]}"
    "${sudo[@]}" apt-get update -q
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -q "${need[@]}"
fi

# ---- build -----------------------------------------------------------------
mkdir -p "$out"
rm -f "$out"/*.jsonl "$out"/*.err
mpicc.mpich -O2 -o "$out/rma_bench.mpich" benches/mpi/rma_bench.c
mpicc.openmpi -O2 -o "$out/rma_bench.ompi" benches/mpi/rma_bench.c
cargo build --release --features unstable --bin onesided-bench --bin onesided-run

# ---- run ---------------------------------------------------------------------
mpi_args=(-o "$ops" -s "$sizes" -r "$reps" -T "$time_s" -N "$max_iters")
os_args=(--raw --json --ops "$ops" --sizes "$sizes" --reps "$reps" --time "$time_s" --max-iters "$max_iters")
ompi=(mpirun.openmpi -n 2 --mca oob_tcp_if_include lo)
[[ $(id -u) -ne 0 ]] || ompi+=(--allow-run-as-root)
mpich=(mpirun.mpich -n 2)
if [[ $pin == 1 ]]; then
    ompi+=(--bind-to core)
    mpich+=(-bind-to core)
    # rank r on CPU r, like -bind-to core (the progress thread shares it).
    os_pin=(sh -c 'exec taskset -c "$ONESIDED_RANK" "$0" "$@"')
    command -v taskset >/dev/null || os_pin=()
else
    ompi+=(--bind-to none)
    mpich+=(-bind-to none)
    os_pin=()
fi
pt2pt=(--mca osc pt2pt --mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo)
ucx=(--mca osc ucx --mca pml ucx --mca opal_common_ucx_tls any --mca opal_common_ucx_devices any)
osrun=("$target/release/onesided-run" -n 2 --timeout "$timeout_s")
osbench=("${os_pin[@]}" "$target/release/onesided-bench" "${os_args[@]}")

run_system() {
    local name=$1
    case $name in
    mpich) "${mpich[@]}" "$out/rma_bench.mpich" "${mpi_args[@]}" -l "$name" ;;
    mpich-tcp)
        "${mpich[@]}" -genv MPIR_CVAR_NOLOCAL 1 -genv UCX_TLS tcp,self \
            "$out/rma_bench.mpich" "${mpi_args[@]}" -l "$name"
        ;;
    ompi)
        # Skip cas_lat: Open MPI 4.1.4's osc/rdma segfaults in MPI_Compare_and_swap.
        "${ompi[@]}" "$out/rma_bench.ompi" "${mpi_args[@]}" -x cas_lat -l "$name"
        ;;
    ompi-ucx-tcp)
        "${ompi[@]}" "${ucx[@]}" -x UCX_TLS=tcp,self \
            "$out/rma_bench.ompi" "${mpi_args[@]}" -l "$name"
        ;;
    ompi-pt2pt-tcp)
        "${ompi[@]}" "${pt2pt[@]}" "$out/rma_bench.ompi" "${mpi_args[@]}" -l "$name"
        ;;
    onesided) env -u ONESIDED_SHM -u ONESIDED_PROVIDER "${osrun[@]}" "${osbench[@]}" ;;
    onesided-tcp) ONESIDED_SHM=0 ONESIDED_PROVIDER=${BVM_TCP_PROVIDER:-net} "${osrun[@]}" "${osbench[@]}" ;;
    onesided-shm) ONESIDED_SHM=0 ONESIDED_PROVIDER=shm "${osrun[@]}" "${osbench[@]}" ;;
    *)
        echo "unknown system '$name'" >&2
        return 2
        ;;
    esac
}

echo "bench-vs-mpi: $(date -u +%FT%TZ), $(nproc) cpus; $runs runs of ${#systems[@]} systems," \
    "time/rep ${time_s}s, reps $reps, sizes $sizes; results in $out/"
echo "start: $(date -u +%T) uptime: $(uptime)" | tee "$out/session.txt"
session_start=$SECONDS
# Runs one system in its own process group: rank 0's JSON lines to
# NAME.rK.jsonl (run K), everything else to NAME.rK.err. Once the check line is there the
# measurement is complete; a run that then does not exit within 20 s (MPICH
# ch4:ucx over tcp sometimes hangs in MPI_Finalize under load) is killed and
# its results kept.
run_guarded() {
    local s=$1 f=$1.r$2 start=$SECONDS done_at="" pid
    setsid bash -c "$(declare -f run_system); $(declare -p mpich ompi ucx pt2pt osrun osbench mpi_args out); run_system $s" \
        >"$out/$f.jsonl" 2>"$out/$f.err" &
    pid=$!
    while kill -0 "$pid" 2>/dev/null; do
        if [[ -z $done_at ]] && grep -qs '"type":"check"' "$out/$f.jsonl"; then
            done_at=$SECONDS
        fi
        if [[ -n $done_at ]] && ((SECONDS - done_at > 20)); then
            echo "   $f: results complete, no exit 20 s later (finalize hang): killed" | tee -a "$out/$f.err" >&2
            break
        fi
        if ((SECONDS - start > timeout_s)); then
            echo "   $f: timed out after ${timeout_s}s: killed" | tee -a "$out/$f.err" >&2
            break
        fi
        sleep 1
    done
    if kill -0 "$pid" 2>/dev/null; then
        kill -TERM -- "-$pid" 2>/dev/null || true
        sleep 3
        kill -KILL -- "-$pid" 2>/dev/null || true
    fi
    if ! wait "$pid" && [[ -z $done_at ]]; then
        echo "   $f failed (see $out/$f.err):" >&2
        tail -n 5 "$out/$f.err" >&2 || true
    fi
}

for ((k = 1; k <= runs; k++)); do
    for s in "${systems[@]}"; do
        echo "== run $k/$runs $s ($(date -u +%T), loadavg $(cut -d' ' -f1-3 /proc/loadavg))"
        run_guarded "$s" "$k"
    done
done
echo "end: $(date -u +%T) uptime: $(uptime); $((SECONDS - session_start)) s for $runs runs" | tee -a "$out/session.txt"
echo
python3 benches/mpi/table.py "$out" | tee "$out/table.md"
status=${PIPESTATUS[0]}
# The plot: one line per system (latency and bandwidth versus size, every
# pattern at 8 B), from the same files.
if "$target/release/onesided-bench" --plot-from "$out" --plot "$out/bench-vs-mpi.svg"; then
    echo "table: $out/table.md  plot: $out/bench-vs-mpi.svg"
else
    echo "bench-vs-mpi: the plot failed" >&2
    status=1
fi
exit "$status"
