#!/usr/bin/env bash
# Where `unsafe` may appear in the library (src/): the crate root denies
# `unsafe_code`, and each `#[allow(unsafe_code)]` must be on this list, with
# its reason. FFI declarations live in sys/ (not checked here). Run by
# .ci/run; fails listing any other site.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

allowed=(
    "src/transport/mod.rs:pub mod cpu_atomic;"   # CPU atomics on exposed window memory
    "src/transport/mod.rs:pub mod inflight;"     # buffers the network writes while in flight
    "src/transport/mod.rs:pub mod loopback;"     # the in-process back-end (registration aliases, in-flight buffers)
    "src/transport/mod.rs:pub mod memory;"       # the owner of memory peers may write
    "src/transport/mod.rs:pub mod ofi;"          # the libfabric back-end (FFI)
    "src/transport/mod.rs:pub mod shm;"          # intra-node mapping (mmap)
    "src/transport/mod.rs:pub mod regcache;"     # userfaultfd ioctls of the registration cache
    "src/transport/mod.rs:pub mod verbs;"        # the native ibverbs back-end (FFI)
    "src/api/window.rs:pub unsafe fn create_borrowed("  # the contract, and the one call relying on it
)

grep -q '^#!\[deny(unsafe_code)\]' src/lib.rs || {
    echo "check-unsafe: src/lib.rs lost #![deny(unsafe_code)]" >&2
    exit 1
}

status=0
count=0
# Each allow(unsafe_code) and the item line that follows it.
while IFS= read -r hit; do
    file=${hit%%:*}
    line=${hit#*:}; line=${line%%:*}
    item=$(sed -n "$((line + 1))p" "$file" | sed 's/^ *//')
    count=$((count + 1))
    ok=0
    for a in "${allowed[@]}"; do
        if [[ "$file:$item" == "$a"* ]]; then ok=1; fi
    done
    if ((ok == 0)); then
        echo "check-unsafe: $file:$line allows unsafe_code for '$item', which is not on the list in scripts/check-unsafe.sh" >&2
        status=1
    fi
done < <(grep -rn 'allow(unsafe_code)' src --include='*.rs' | grep -v '^src/lib.rs')

# Module-level allows (#![allow(unsafe_code)]) are not permitted at all.
if grep -rn '#!\[allow(unsafe_code)\]' src --include='*.rs'; then
    echo "check-unsafe: inner #![allow(unsafe_code)] found (use the list)" >&2
    status=1
fi
echo "check-unsafe: $count allow(unsafe_code) site(s), all on the list: $([[ $status == 0 ]] && echo yes || echo NO)"
exit "$status"
