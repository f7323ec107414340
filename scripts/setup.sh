#!/usr/bin/env bash
# Installs the Debian/Ubuntu packages that onesided needs to build and test,
# and a Rust toolchain (Debian's cargo-web when no cargo >= 1.82 is on PATH).
#
# Idempotent and silent when everything is already there: `apt-get update`
# and `apt-get install` run only for packages that are missing. Uses sudo
# only when not root.
set -euo pipefail

packages=(
    libfabric-dev     # libfabric-sys: headers, libfabric.so, libfabric.pc
    libfabric-bin     # fi_info, fi_pingpong: provider diagnostics
    libibverbs-dev    # rdma-sys: <infiniband/verbs.h>, libibverbs.so
    librdmacm-dev     # rdma-sys: <rdma/rdma_cma.h>, librdmacm.so
    libhwloc-dev      # hwlocality: topology, progress-agent pinning, NUMA placement
    libudev-dev       # hwlocality (hwloc-sys links udev)
    libpmix-dev       # pmix-sys: PMIx client (srun --mpi=pmix, Open MPI mpirun); optional, the build probes for it
    libclang-dev      # bindgen
    pkg-config
    mpich             # reference MPI for cross-checking results
    python3           # benches/mpi/table.py, scripts/scale-table.py (bench tables)
    gdb               # tests/common: the stacks of a job's ranks when it times out
)

is_installed() {
    dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'
}

if command -v dpkg-query >/dev/null && command -v apt-get >/dev/null; then
    missing=()
    for p in "${packages[@]}"; do
        is_installed "$p" || missing+=("$p")
    done
    # A C compiler for the cc crate (bindgen's static-inline wrappers).
    if ! is_installed gcc && ! is_installed build-essential; then
        missing+=(build-essential)
    fi

    if ((${#missing[@]} > 0)); then
        sudo=()
        if [[ $(id -u) -ne 0 ]]; then
            if command -v sudo >/dev/null; then
                sudo=(sudo)
            else
                echo "setup.sh: missing packages: ${missing[*]}" >&2
                echo "setup.sh: not root and sudo is not available; install them as root." >&2
                exit 1
            fi
        fi
        echo "setup.sh: installing ${missing[*]}"
        "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
        "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
    fi
else
    echo "setup.sh: not a Debian/Ubuntu system (no dpkg-query/apt-get); skipping package checks." >&2
    echo "setup.sh: make sure the equivalents of these are installed: ${packages[*]} and a C compiler" >&2
fi

# Rust: any cargo >= 1.82 on PATH (rustup or distribution). Otherwise, on
# Debian 12, Debian's own `cargo-web` (Rust 1.96 from bookworm-security,
# the toolchain Debian keeps current for its browsers) is installed: it
# replaces the too-old `cargo` package (Rust 1.63) if that is installed.
min_rust=82
# (No `grep -q` after a pipe: under pipefail the writer's SIGPIPE fails it.)
has_candidate() { [[ $(apt-cache policy "$1" 2>/dev/null) =~ Candidate:\ [0-9] ]]; }
rust_minor() {
    command -v cargo >/dev/null || return 0
    cargo --version 2>/dev/null | sed -n 's/^cargo 1\.\([0-9]*\).*/\1/p' || true
}

if ! command -v cargo >/dev/null && [[ -x ${CARGO_HOME:-$HOME/.cargo}/bin/cargo ]]; then
    echo "setup.sh: cargo is installed in ${CARGO_HOME:-$HOME/.cargo}/bin but not on PATH; using it." >&2
    echo "setup.sh: add it to your shell:  . \"${CARGO_HOME:-$HOME/.cargo}/env\"" >&2
    export PATH="${CARGO_HOME:-$HOME/.cargo}/bin:$PATH"
fi

minor=$(rust_minor)
if [[ -z $minor || $minor -lt $min_rust ]]; then
    have=${minor:+"cargo 1.$minor (too old, need 1.$min_rust)"}
    have=${have:-"no cargo"}
    if command -v apt-get >/dev/null; then
        sudo=()
        if [[ $(id -u) -ne 0 ]]; then
            command -v sudo >/dev/null || { echo "setup.sh: $have, not root and no sudo: install cargo-web as root" >&2; exit 1; }
            sudo=(sudo)
        fi
        if ! has_candidate cargo-web; then
            "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
        fi
    fi
    if command -v apt-get >/dev/null && has_candidate cargo-web; then
        echo "setup.sh: $have; installing Debian's cargo-web (Rust from Debian's security updates)"
        "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq cargo-web
        hash -r
        minor=$(rust_minor)
    fi
fi
if [[ -z $minor || $minor -lt $min_rust ]]; then
    {
        echo "setup.sh: a Rust toolchain with cargo 1.$min_rust or newer is needed (found: ${minor:+cargo 1.$minor}${minor:-none})."
        echo "On Debian 12:  apt-get update && apt-get install cargo-web"
        echo "Elsewhere, with rustup (https://rustup.rs):"
        echo "    curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh"
        echo "    . \"\$HOME/.cargo/env\""
    } >&2
    exit 1
fi
