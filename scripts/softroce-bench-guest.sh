#!/bin/sh
# Runs INSIDE the soft-RoCE guest (scripts/softroce-bench.sh boots it): in
# one boot, Debian's perftest on rxe0 (the floor: raw verbs calls), then
# onesided-bench on the native verbs back-end (with its progress agent, the
# default, and with ONESIDED_PROGRESS=manual, as perftest has no second
# thread) and over libfabric's verbs;ofi_rxm, each REPEAT times, interleaved. Prints perftest's own
# lines prefixed `PERFTEST <name>` and onesided-bench's JSON lines
# prefixed `ONESIDED <back-end>`; the host script computes the ratios.
set -u
bin=$1
reps=${REPEAT:-3}
dev=${SOFTROCE_RXE_DEV:-rxe0}
ip=${SOFTROCE_RXE_IPV4:-192.0.2.1}
gid=$(ibv_devinfo -v -d "$dev" | awk '/GID\[/ && /::ffff:/ {gsub(/[^0-9]/, "", $1); print $1; exit}')
gid=${gid:-1}
echo "device $dev, IPv4-mapped GID index $gid, address $ip"

perf() { # name, tool, args...
    name=$1 tool=$2
    shift 2
    "$tool" -d "$dev" -x "$gid" "$@" > /tmp/srv.$$ 2>&1 &
    srv=$!
    # The server listens on its TCP port for the exchange; retry until it does.
    i=0
    while [ $i -lt 50 ]; do
        if "$tool" -d "$dev" -x "$gid" "$@" "$ip" > /tmp/cli.$$ 2>&1; then
            break
        fi
        i=$((i + 1))
        sleep 0.2
    done
    wait $srv
    sed -n '/^ *[0-9]/p' /tmp/cli.$$ | sed "s/^/PERFTEST $name /"
}

export ONESIDED_IB_DEVICE="$dev:1"
for r in $(seq 1 "$reps"); do
    echo "== round $r =="
    perf write_lat ib_write_lat -s 8 -n 2000
    perf read_lat ib_read_lat -s 8 -n 2000
    perf fadd_lat ib_atomic_lat -A FETCH_AND_ADD -n 2000
    perf cswap_lat ib_atomic_lat -A CMP_AND_SWAP -n 2000
    perf write_bw ib_write_bw -s 1048576 -n 200 --report_gbits
    for be in native manual rxm; do
        if [ $be = native ]; then
            env="ONESIDED_BACKEND=verbs"
        elif [ $be = manual ]; then
            env="ONESIDED_BACKEND=verbs ONESIDED_PROGRESS=manual"
        else
            env="ONESIDED_BACKEND=ofi ONESIDED_PROVIDER=verbs;ofi_rxm"
        fi
        env $env ONESIDED_SHM=0 "$bin/onesided-run" -n 2 "$bin/onesided-bench" --json \
            --ops put_lat,get_lat,fop_lat,cas_lat,put_pingpong,put_bw \
            --sizes 8,1M --reps 3 --time 0.3 --per-iter 2>&1 |
            sed 's/^\[[0-9]*\] //' | grep '^{' | sed "s/^/ONESIDED $be /"
    done
done
