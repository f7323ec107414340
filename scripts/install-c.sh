#!/usr/bin/env bash
# Builds and installs the C API: libonesided_c.so.0 (with the linker names
# libonesided_c.so and the SONAME link), libonesided_c.a, onesided.h and
# onesided.pc under PREFIX (default /usr/local).
#
#     scripts/install-c.sh [--debug | --profile NAME] [PREFIX]
#     PKG_CONFIG_PATH=PREFIX/lib/pkgconfig cc prog.c $(pkg-config --cflags --libs onesided)
#
# --debug installs the debug build (what tests/c_api.rs uses, to avoid a
# release build in the test run); --profile NAME another cargo profile
# (the soft-RoCE stage: guest). ONESIDED_C_FEATURES (e.g.
# onesided/unstable, which the test passes) builds with the features the
# workspace's test build already compiled, so nothing is rebuilt.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

profile=release dir=release
if [ "${1:-}" = "--debug" ]; then
    profile=dev dir=debug
    shift
elif [ "${1:-}" = "--profile" ]; then
    profile=${2:?--profile needs a cargo profile name} dir=$2
    shift 2
fi
prefix=${1:-/usr/local}
version=$(sed -n 's/^version = "\(.*\)"/\1/p' bindings/c/Cargo.toml | head -1)

# The native libraries a static link needs, as rustc reports them.
features=()
if [ -n "${ONESIDED_C_FEATURES:-}" ]; then
    features=(--features "$ONESIDED_C_FEATURES")
fi
private=$(cargo rustc -q -p onesided-c --profile "$profile" "${features[@]}" --crate-type staticlib \
    -- --print native-static-libs 2>&1 | sed -n 's/.*native-static-libs: //p' | tail -1)
cargo build -q -p onesided-c --profile "$profile" "${features[@]}"

target=${CARGO_TARGET_DIR:-target}/$dir
mkdir -p "$prefix/lib/pkgconfig" "$prefix/include"
install -m 0755 "$target/libonesided_c.so" "$prefix/lib/libonesided_c.so.$version"
ln -sf "libonesided_c.so.$version" "$prefix/lib/libonesided_c.so.0"
ln -sf "libonesided_c.so.0" "$prefix/lib/libonesided_c.so"
install -m 0644 "$target/libonesided_c.a" "$prefix/lib/libonesided_c.a"
install -m 0644 bindings/c/include/onesided.h "$prefix/include/onesided.h"
sed -e "s|@PREFIX@|$prefix|" -e "s|@VERSION@|$version|" -e "s|@PRIVATE@|$private|" \
    bindings/c/onesided.pc.in > "$prefix/lib/pkgconfig/onesided.pc"
echo "installed the C API of onesided $version under $prefix"
