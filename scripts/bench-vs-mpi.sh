#!/usr/bin/env bash
# onesided against MPICH, Open MPI and raw libfabric on this machine, in one
# go, same patterns and method (2 ranks, rank r pinned to CPU r):
#
#   mpich         MPICH default (Debian: ch4:ucx; on one node UCX shared memory)
#   mpich-tcp     MPICH with MPIR_CVAR_NOLOCAL=1 UCX_TLS=tcp,self
#   ompi          Open MPI default (osc/rdma over btl/vader); cas_lat skipped:
#                 MPI_Compare_and_swap segfaults there in 4.1.4 (ompi#11349)
#   ompi-sm       Open MPI --mca osc sm (the other shared-memory component)
#   ompi-ucx-tcp  Open MPI --mca osc ucx --mca pml ucx, UCX_TLS=tcp,self
#   ompi-pt2pt-tcp Open MPI --mca osc pt2pt --mca pml ob1 --mca btl tcp,self
#                 (queues small operations and ships them at the flush;
#                 Debian's openmpi-mca-params.conf disables osc pt2pt, the
#                 command line turns it back on)
#   fi-raw-tcp    benches/raw/fi_rma_raw.c (raw libfabric RMA and atomics,
#                 no launcher: it forks its 2 processes, rank r on CPU r) on
#                 FI_PROVIDER=${BVM_TCP_PROVIDER:-net}, the provider of
#                 onesided-tcp; run twice per run, delivery-complete (default)
#                 and transmit-complete (-t), the faster per op and size kept.
#                 Ops the provider has no atomic for are skipped with the
#                 reason (net in libfabric 1.17: acc, fop, cas)
#   fi-raw-shm    the same on FI_PROVIDER=shm
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
# fi_rma_raw has put_lat, get_lat, put_bw, acc_lat, acc_bw (= acc_rate),
# fop_lat and cas_lat at its own sizes (8, 64, 1K, 64K, 1M; the table keeps
# BVM_SIZES); its output is converted into the same JSON lines
# (benches/mpi/table.py --from-fi-raw; the raw output stays in
# NAME.rK.dc.txt and NAME.rK.tc.txt).
#
# BVM_RUNS times, interleaved (A B C … A B C …, so slow drifts of the
# machine hit every system alike), then prints ONE table
# (benches/mpi/table.py): per pattern and size each system's median of the
# per-run medians (µs per operation) with the spread of the runs,
# onesided / best MPI and onesided / raw, and the verdict on every target of
# issue 13 (and issue 15's halo step), met / MISSED / not measured (also in
# $out/table.md):
#   intra  onesided 8-byte put/get/acc/fop/cas/lock_unlock/fence/pscw ≤ 1.05×
#          the faster of ompi and ompi-sm (ompi-sm alone for cas_lat)
#   tcp    onesided-tcp put/get/fop/cas/acc ≤ 1.3× fi-raw-tcp (same provider)
#   batch  onesided-tcp acc_rate ≥ ompi-pt2pt-tcp, put_bw 8 B ≥ 1.5× it
#   large  1 MiB bandwidth ≥ 0.9× fi-raw-tcp / fi-raw-shm (onesided-tcp /
#          onesided-shm) and ≥ 0.9× the best of mpich, ompi, ompi-sm (onesided)
#   halo   halo_lat ≤ the faster MPI, intra-node and over tcp
# and plots it (one line per system, `onesided-bench --plot-from`) into
# $out/bench-vs-mpi.svg. The load (uptime) is printed at the start and the
# end and kept in $out/session.txt with the tcp provider and the osc/pt2pt
# flags (the table repeats them).
#
# Installs what it needs if missing (mpich, libmpich-dev, openmpi-bin,
# libopenmpi-dev, libfabric-dev; sudo when not root), builds
# benches/mpi/rma_bench.c with mpicc.mpich and mpicc.openmpi,
# benches/raw/fi_rma_raw.c with gcc -lfabric and onesided in release mode.
#
# Knobs (environment):
#   BVM_RUNS=3       runs of every system (interleaved); the table reports
#                    the median of the run medians and their min–max
#   BVM_TIME=0.1     seconds per repetition     BVM_REPS=3     repetitions per run
#   BVM_SIZES=8,1K,64K,1M                        BVM_MAX_ITERS=10000
#   BVM_OPS=<all>    comma list of patterns      BVM_SYSTEMS=<all> comma list
#   BVM_TIMEOUT=600  seconds per system (a run is killed then)          BVM_PIN=1 (0: no pinning)
#   BVM_TCP_PROVIDER=net  libfabric provider of onesided-tcp and fi-raw-tcp
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
tcp_provider=${BVM_TCP_PROVIDER:-net}
IFS=, read -r -a systems <<<"${BVM_SYSTEMS:-mpich,mpich-tcp,ompi,ompi-sm,ompi-ucx-tcp,ompi-pt2pt-tcp,fi-raw-tcp,fi-raw-shm,onesided,onesided-tcp,onesided-shm}"
# fi_rma_raw's patterns among $ops (its acc_bw is our acc_rate); without
# any, the fi-raw systems have nothing to run and are left out.
fi_ops=()
for o in ${ops//,/ }; do
    case $o in
    put_lat | get_lat | put_bw | acc_lat | fop_lat | cas_lat) fi_ops+=("$o") ;;
    acc_rate) fi_ops+=(acc_bw) ;;
    esac
done
fi_ops=$(
    IFS=,
    echo "${fi_ops[*]}"
)
want_fi=0
kept=()
for s in "${systems[@]}"; do
    if [[ $s == fi-raw-* ]]; then
        if [[ -z $fi_ops ]]; then
            echo "bench-vs-mpi: $s left out: none of BVM_OPS ($ops) is a fi_rma_raw pattern" >&2
            continue
        fi
        want_fi=1
    fi
    kept+=("$s")
done
systems=("${kept[@]}")
((${#systems[@]} > 0)) || die "no system to run"

# ---- install what is missing ----------------------------------------------
need=()
command -v mpicc.mpich >/dev/null && command -v mpirun.mpich >/dev/null || need+=(mpich libmpich-dev)
command -v mpicc.openmpi >/dev/null && command -v mpirun.openmpi >/dev/null || need+=(openmpi-bin libopenmpi-dev)
if [[ $want_fi == 1 ]]; then
    [[ -e /usr/include/rdma/fabric.h ]] && command -v gcc >/dev/null || need+=(gcc libfabric-dev)
fi
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
rm -f "$out"/*.jsonl "$out"/*.err "$out"/fi-raw-*.txt
mpicc.mpich -O2 -o "$out/rma_bench.mpich" benches/mpi/rma_bench.c
mpicc.openmpi -O2 -o "$out/rma_bench.ompi" benches/mpi/rma_bench.c
if [[ $want_fi == 1 ]]; then
    gcc -O2 -o "$out/fi_rma_raw" benches/raw/fi_rma_raw.c -lfabric
fi
cargo build --release --features unstable --bin onesided-bench --bin onesided-run

# ---- run ---------------------------------------------------------------------
mpi_args=(-o "$ops" -s "$sizes" -r "$reps" -T "$time_s" -N "$max_iters")
fi_args=(-o "$fi_ops" -r "$reps" -T "$time_s" -N "$max_iters")
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
    fi_args+=(-B)
fi
pt2pt=(--mca osc pt2pt --mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo)
ucx=(--mca osc ucx --mca pml ucx --mca opal_common_ucx_tls any --mca opal_common_ucx_devices any)
osrun=("$target/release/onesided-run" -n 2 --timeout "$timeout_s")
osbench=("${os_pin[@]}" "$target/release/onesided-bench" "${os_args[@]}")

# Runs fi_rma_raw on provider $1 in both completion modes (raw output in
# NAME.rK.dc.txt / .tc.txt) and prints the best of the two as JSON lines.
run_fi_raw() {
    local prov=$1 name=$2 f=$out/$2.r$3 mode flag
    for mode in dc tc; do
        flag=()
        [[ $mode == tc ]] && flag=(-t)
        {
            echo "# bvm mode=$mode date=$(date -u +%FT%TZ) loadavg=$(cut -d' ' -f1-3 /proc/loadavg)"
            FI_PROVIDER=$prov "$out/fi_rma_raw" "${fi_args[@]}" "${flag[@]}" || echo "# bvm: FI_PROVIDER=$prov fi_rma_raw ${flag[*]} failed (status $?)"
        } >"$f.$mode.txt"
    done
    python3 benches/mpi/table.py --from-fi-raw "$name" --sizes "$sizes" "$f.dc.txt" "$f.tc.txt"
}

run_system() {
    local name=$1 run=$2
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
    ompi-sm) "${ompi[@]}" --mca osc sm "$out/rma_bench.ompi" "${mpi_args[@]}" -l "$name" ;;
    ompi-ucx-tcp)
        "${ompi[@]}" "${ucx[@]}" -x UCX_TLS=tcp,self \
            "$out/rma_bench.ompi" "${mpi_args[@]}" -l "$name"
        ;;
    ompi-pt2pt-tcp)
        "${ompi[@]}" "${pt2pt[@]}" "$out/rma_bench.ompi" "${mpi_args[@]}" -l "$name"
        ;;
    fi-raw-tcp) run_fi_raw "$tcp_provider" "$name" "$run" ;;
    fi-raw-shm) run_fi_raw shm "$name" "$run" ;;
    onesided) env -u ONESIDED_SHM -u ONESIDED_PROVIDER "${osrun[@]}" "${osbench[@]}" ;;
    onesided-tcp) ONESIDED_SHM=0 ONESIDED_PROVIDER=$tcp_provider "${osrun[@]}" "${osbench[@]}" ;;
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
{
    echo "tcp provider: ONESIDED_SHM=0 ONESIDED_PROVIDER=$tcp_provider (onesided-tcp), FI_PROVIDER=$tcp_provider (fi-raw-tcp)"
    echo "ompi-pt2pt-tcp flags: ${pt2pt[*]}"
} >>"$out/session.txt"
session_start=$SECONDS
# Runs one system in its own process group: rank 0's JSON lines to
# NAME.rK.jsonl (run K), everything else to NAME.rK.err. Once the check line is there the
# measurement is complete; a run that then does not exit within 20 s (MPICH
# ch4:ucx over tcp sometimes hangs in MPI_Finalize under load) is killed and
# its results kept.
run_guarded() {
    local s=$1 f=$1.r$2 start=$SECONDS done_at="" pid
    setsid bash -c "$(declare -f run_system run_fi_raw); $(declare -p mpich ompi ucx pt2pt osrun osbench mpi_args fi_args out sizes tcp_provider); run_system $s $2" \
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
