#!/usr/bin/env bash
# Installs the Debian/Ubuntu packages that onesided needs to build and test,
# and checks that a Rust toolchain is available.
#
# Idempotent and silent when everything is already there: `apt-get update`
# and `apt-get install` run only for packages that are missing. Uses sudo
# only when not root. Does not install Rust itself.
set -euo pipefail

packages=(
    libfabric-dev     # libfabric-sys: headers, libfabric.so, libfabric.pc
    libfabric-bin     # fi_info, fi_pingpong: provider diagnostics
    libibverbs-dev    # rdma-sys: <infiniband/verbs.h>, libibverbs.so
    librdmacm-dev     # rdma-sys: <rdma/rdma_cma.h>, librdmacm.so
    libhwloc-dev
    libudev-dev
    libclang-dev      # bindgen
    pkg-config
    mpich             # reference MPI for cross-checking results
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

if ! command -v cargo >/dev/null; then
    {
        echo "setup.sh: cargo was not found in PATH."
        if [[ -x ${CARGO_HOME:-$HOME/.cargo}/bin/cargo ]]; then
            echo "It is installed in ${CARGO_HOME:-$HOME/.cargo}/bin; add it to PATH:"
            echo "    . \"${CARGO_HOME:-$HOME/.cargo}/env\""
        else
            echo "Install Rust (stable, 1.75 or newer) with rustup, then open a new shell:"
            echo "    curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh"
            echo "    . \"\$HOME/.cargo/env\""
            echo "See https://rustup.rs for other methods."
        fi
    } >&2
    exit 1
fi
