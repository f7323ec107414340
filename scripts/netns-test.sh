#!/usr/bin/env bash
# Two "nodes" on one machine: network namespaces os-na and os-nb joined by
# a veth pair (10.213.7.1 <-> 10.213.7.2), iptables dropping 5 % of the
# packets arriving on each veth end at random (this kernel has no
# sch_netem). Four ranks under mpiexec.hydra (PMI travels over the
# inherited PMI_FD, so `ip netns exec` can wrap each rank): ranks 0, 1 in
# os-na and 2, 3 in os-nb, ONESIDED_NODE_MAPPING placing each namespace on
# its own node, libfabric's tcp provider bound to the veth (FI_TCP_IFACE),
# the direct path on inside a node. The workload is tests/random_rma.rs
# (random puts, gets, accumulates, fetch-and-ops, compare-and-swaps under
# fence, PSCW, lock and lock_all epochs, every fetched value and the final
# memory checked against a model), ONESIDED_TEST_ROUNDS rounds.
#
# Prints NETNS-COUNT lines: operations checked, packets that crossed the
# veth and were dropped (iptables counters), mismatches. Exits non-zero on
# any failure; prints SKIPPED (and exits 0) only where namespaces cannot be
# created (not root, no `ip netns`).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

skip() { echo "NETNS-COUNT two-namespace job: SKIPPED ($1)"; exit 0; }
die() { echo "netns-test: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || skip "not root: network namespaces need CAP_NET_ADMIN"
command -v ip > /dev/null || skip "no ip(8)"
if ! command -v iptables > /dev/null; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iptables > /dev/null 2>&1 ||
        die "iptables is missing and could not be installed"
fi
hydra=$(command -v mpiexec.hydra) || die "mpiexec.hydra is missing (scripts/setup.sh installs mpich)"

rounds=${ONESIDED_TEST_ROUNDS:-200}
drop=${NETNS_DROP:-0.05}
A=os-na B=os-nb VA=os-va VB=os-vb
cleanup() {
    ip netns del "$A" 2> /dev/null
    ip netns del "$B" 2> /dev/null
    ip link del "$VA" 2> /dev/null
    true
}
cleanup
trap cleanup EXIT
ip netns add "$A" && ip netns add "$B" || skip "ip netns add failed"
ip link add "$VA" type veth peer name "$VB" || die "veth pair"
ip link set "$VA" netns "$A" && ip link set "$VB" netns "$B" || die "moving the veth ends"
ip -n "$A" addr add 10.213.7.1/24 dev "$VA"
ip -n "$B" addr add 10.213.7.2/24 dev "$VB"
for n in "$A" "$B"; do ip -n "$n" link set lo up; done
ip -n "$A" link set "$VA" up && ip -n "$B" link set "$VB" up || die "links up"
for pair in "$A:$VA" "$B:$VB"; do
    n=${pair%%:*} v=${pair#*:}
    # A counting rule (every packet in), then the random drop.
    ip netns exec "$n" iptables -A INPUT -i "$v" || die "iptables in $n"
    ip netns exec "$n" iptables -A INPUT -i "$v" -m statistic --mode random \
        --probability "$drop" -j DROP || die "iptables statistic match in $n"
done

# The test executable scripts/test.sh built (scripts/built-tests.sh);
# a `cargo test --test random_rma` here would compile the library again.
. scripts/built-tests.sh
built_tests_load || die "cargo test --workspace --no-run failed"
exe=$(built_test test random_rma)
[ -x "$exe" ] || die "could not build tests/random_rma.rs"

# Each rank: its namespace from its PMI rank, the provider on its veth.
wrap=$(mktemp)
cat > "$wrap" << EOF
#!/bin/sh
if [ "\$PMI_RANK" -lt 2 ]; then ns=$A; dev=$VA; else ns=$B; dev=$VB; fi
exec ip netns exec "\$ns" env FI_TCP_IFACE="\$dev" "\$@"
EOF
chmod +x "$wrap"
log=$(mktemp)
start=$(date +%s)
echo "== two-namespace job: 4 ranks (2 per namespace), tcp over the veth with ${drop} random drop, $rounds rounds =="
env ONESIDED_TEST_CHILD=random_rma_checker ONESIDED_PROVIDER=tcp ONESIDED_SHM=1 \
    ONESIDED_NODE_MAPPING='(vector,(0,2,2))' ONESIDED_TEST_ROUNDS="$rounds" \
    ONESIDED_TIMEOUT="${ONESIDED_TIMEOUT:-120}" \
    timeout 900 "$hydra" -launcher fork -n 4 "$wrap" "$exe" random_rma_checker \
    --exact --nocapture --test-threads=1 > "$log" 2>&1
rc=$?
secs=$(( $(date +%s) - start ))
grep -E "RANDOM-RMA|FAILED|panicked|error" "$log" | head -20
ops=$(sed -n 's/.*RANDOM-RMA rank [0-9]* of 4: \([0-9]*\) operations.*/\1/p' "$log" | awk '{s+=$1} END {print s+0}')
# A rank passed when it printed its RANDOM-RMA line (after checking its
# final memory) and nothing failed. Not libtest's "test result" line: the
# four ranks share one output and libtest writes that line in pieces, which
# interleave (a job that passed was once counted 3 of 4).
ranks_ok=$(sed -n 's/.*RANDOM-RMA rank \([0-9]*\) of 4: .*/\1/p' "$log" | sort -u | wc -l)
if grep -qE "panicked|FAILED" "$log"; then ranks_ok=0; fi
counts() { # namespace, veth -> "in dropped"
    ip netns exec "$1" iptables -L INPUT -v -x -n | awk -v v="$2" '$0 ~ v {print $1}' | paste -sd' '
}
read -r in_a drop_a <<< "$(counts "$A" "$VA")"
read -r in_b drop_b <<< "$(counts "$B" "$VB")"
echo "NETNS-COUNT operations checked: $ops by 4 ranks in ${secs} s ($ranks_ok of 4 ranks passed, exit $rc)"
echo "NETNS-COUNT packets in over the veth: $A $in_a ($drop_a dropped), $B $in_b ($drop_b dropped)"
if [ $rc -ne 0 ] || [ "$ranks_ok" -ne 4 ]; then
    echo "NETNS-COUNT mismatches or errors: the job failed (last lines below)"
    tail -40 "$log"
    exit 1
fi
[ "${in_a:-0}" -gt 0 ] && [ "${in_b:-0}" -gt 0 ] || die "no traffic crossed the veth"
[ "${drop_a:-0}" -gt 0 ] || [ "${drop_b:-0}" -gt 0 ] || die "the drop rule dropped nothing"
echo "NETNS-COUNT mismatches: 0 (every fetched value and the final memory of every rank checked)"
