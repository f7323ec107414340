#!/usr/bin/env bash
# Instructions per operation, old revision against this tree, measured by
# callgrind (load-independent; docs/performance.md, "The transport seam
# against f14bc9a"): release builds side by side (the old one in a git
# worktree under target/ab/), `onesided-run -n 2 onesided-bench` with rank
# 0 under `valgrind --tool=callgrind`, at two iteration counts; the
# difference of the instruction totals divided by the difference of the
# counts is one operation + flush, start-up cancelled.
#
#   scripts/callgrind-ab.sh [OLD_REV] [OPS]     # default f14bc9a, the six below
#
# Environment: AB_ITERS="2000 6000", AB_ENV (e.g. "ONESIDED_SHM=0").
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

old_rev=${1:-f14bc9a}
ops=${2:-put_lat,get_lat,acc_lat,fop_lat,cas_lat,lock_unlock_lat}
read -r lo hi <<< "${AB_ITERS:-2000 6000}"
command -v valgrind > /dev/null || { echo "callgrind-ab: valgrind is not installed" >&2; exit 1; }

root=$PWD
old=$root/target/ab/old
if [ ! -d "$old" ]; then
  git worktree add --detach "$old" "$old_rev" > /dev/null
else
  git -C "$old" checkout -q --detach "$old_rev"
fi
build() { # dir (older trees had no `unstable` feature)
  (cd "$1" && { cargo build --release --features unstable --bins -q 2> /dev/null ||
    cargo build --release --bins -q; })
}
build "$old"
build "$root"

wrap=$(mktemp)
cat > "$wrap" << 'EOF'
#!/bin/sh
# Rank 0 under callgrind, the other rank as it is.
if [ "${ONESIDED_RANK:-}" = 0 ]; then
  exec valgrind --tool=callgrind --callgrind-out-file="$AB_OUT" -q "$@"
fi
exec "$@"
EOF
chmod +x "$wrap"

total() { # tree op iters -> instructions of rank 0
  local out
  out=$(mktemp)
  env ${AB_ENV:-} AB_OUT="$out" "$1/target/release/onesided-run" -n 2 "$wrap" \
    "$1/target/release/onesided-bench" --ops "$2" --sizes 8 --reps 1 --time 1000 \
    --max-iters "$3" > /dev/null 2>&1
  sed -n 's/^summary: \([0-9]*\).*/\1/p' "$out" | head -1
  rm -f "$out"
}

printf '%-18s %12s %12s %8s\n' "op (+ flush)" "$old_rev" "this tree" ratio
for op in ${ops//,/ }; do
  o_lo=$(total "$old" "$op" "$lo"); o_hi=$(total "$old" "$op" "$hi")
  n_lo=$(total "$root" "$op" "$lo"); n_hi=$(total "$root" "$op" "$hi")
  if [ -z "$o_lo" ] || [ -z "$o_hi" ] || [ -z "$n_lo" ] || [ -z "$n_hi" ]; then
    printf '%-18s %s\n' "$op" "no figure (the op may not exist in one of the trees)"
    continue
  fi
  awk -v op="$op" -v a="$o_lo" -v b="$o_hi" -v c="$n_lo" -v d="$n_hi" -v n="$((hi - lo))" \
    'BEGIN { o = (b - a) / n; m = (d - c) / n; printf "%-18s %12.0f %12.0f %8.3f\n", op, o, m, m / o }'
done
rm -f "$wrap"
