//! `onesided-scale` under `onesided-run -n 4` over tcp: one JSON line per
//! rank, and the per-peer state it reports follows the design — creating a
//! window adds no peer, address-vector or rkey-cache entry anywhere; the
//! window (equal sizes, tcp) is uniform, so after the use phase no rank
//! caches a descriptor (rank 0 talked to all, rank 1 to one); freeing
//! leaves no cache entry. Also: the exact messages of a first access.

#[macro_use]
#[allow(unused_macros)]
mod common;

use std::process::Command;
use std::time::Duration;

use onesided::{Assert, LockType, Window, World};
use serde_json::Value;

const SCALE: &str = env!("CARGO_BIN_EXE_onesided-scale");

#[test]
fn scale_reports_per_peer_state_only_for_touched_peers() {
    let mut cmd = Command::new(common::onesided_run());
    cmd.args(["-n", "4", "--provider", "tcp", SCALE, "--cycles", "2"])
        .env_remove("ONESIDED_PROVIDER")
        .env("ONESIDED_SHM", "0");
    let out = common::run_with_limit(cmd, Duration::from_secs(120));
    assert!(
        out.status.is_some_and(|s| s.success()),
        "onesided-scale failed:\n{}",
        out.tail(30)
    );
    let mut ranks: Vec<Value> = out
        .stdout
        .lines()
        .filter_map(|l| l.split_once("] ").map(|(_, j)| j))
        .filter(|j| j.starts_with('{'))
        .map(|j| serde_json::from_str(j).unwrap_or_else(|e| panic!("not JSON ({e}): {j}")))
        .collect();
    ranks.sort_by_key(|v| v["rank"].as_u64());
    assert_eq!(ranks.len(), 4, "{}", out.stdout);
    for (r, v) in ranks.iter().enumerate() {
        let f = &v["first"];
        let (init, created, used) = (&v["init"], &f["created"], &f["used"]);
        for k in ["av_entries", "peers_contacted", "rkey_cache_entries"] {
            assert_eq!(
                init[k], created[k],
                "rank {r}: {k} changed at creation: {v}"
            );
        }
        // A cache smaller than the peers touched (the tiny-size CI stage,
        // ONESIDED_RKEY_CACHE=1) holds only its capacity.
        let capacity = used["rkey_cache_capacity"].as_u64().unwrap_or(0);
        // A uniform window (tcp: keys chosen by us) caches nothing at all.
        let uniform = f["window_uniform"].as_bool().unwrap_or(false);
        let want = if uniform {
            0
        } else {
            [3, 1, 0, 0][r].min(capacity)
        };
        assert!(uniform, "rank {r}: a window of equal sizes over tcp: {v}");
        assert_eq!(f["window_cached_peers_used"], want, "rank {r}: {v}");
        assert_eq!(used["rkey_cache_entries"], want, "rank {r}: {v}");
        assert_eq!(f["freed"]["rkey_cache_entries"], 0, "rank {r}: {v}");
        assert!(
            used["av_entries"].as_u64() >= init["av_entries"].as_u64(),
            "rank {r}: {v}"
        );
        if r >= 2 {
            assert_eq!(used["av_entries"], created["av_entries"], "rank {r}: {v}");
        }
        assert!(v["rss_init"].as_u64().unwrap_or(0) > 0, "rank {r}: {v}");
        assert!(v["create_us_median"].as_f64().is_some_and(|t| t > 0.0));
    }
}

/// Transport messages of rank 0's lock-put-unlock to rank 1, and its rkey
/// cache misses.
fn lock_put_unlock(world: &World, win: &Window<'_, u64>) -> [u64; 5] {
    world.barrier().unwrap();
    let a = world.stats();
    if world.rank() == 0 {
        win.lock(1, LockType::Exclusive, Assert::NONE).unwrap();
        win.put(1, 0, &[7]).unwrap();
        win.unlock(1).unwrap();
    }
    let b = world.stats();
    world.barrier().unwrap();
    let (x, y) = (&a.transport, &b.transport);
    [
        y.writes - x.writes,
        y.reads - x.reads,
        y.atomics - x.atomics,
        y.sends - x.sends,
        b.rkey_cache.misses - a.rkey_cache.misses,
    ]
}

/// The first access to a peer of a uniform window (same size on every rank)
/// sends exactly what later accesses send — no descriptor read — where the
/// provider lets us choose keys and addresses by offset (tcp, sockets); a
/// non-uniform window's first access costs exactly one read more (the
/// descriptor) and one rkey-cache miss.
fn first_access_messages() {
    let world = World::init().expect("init");
    let rank = world.rank();
    let caps = world.transport_caps();
    let by_key = caps.mr.chosen_keys;
    // The second window has one more element on rank 1.
    for (second, extra) in [(false, 0), (true, rank)] {
        let mut win = Window::<u64>::allocate(&world, 8 + extra).expect("allocate");
        let uniform = win.stats().uniform;
        assert_eq!(uniform, by_key && !second, "{}", caps.name);
        let first = lock_put_unlock(&world, &win);
        let again = lock_put_unlock(&world, &win);
        if rank == 0 {
            let descriptor_reads = u64::from(!uniform);
            let mut want = again;
            want[1] += descriptor_reads;
            want[4] = descriptor_reads;
            assert_eq!(
                first, want,
                "[writes, reads, atomics, sends, rkey misses] of the first lock-put-unlock \
                 (uniform: {uniform}; the second: {again:?}; {})",
                caps.name
            );
            assert_eq!(again[4], 0, "{again:?}");
        } else {
            assert_eq!(win.local_to_vec().unwrap()[0], 7);
        }
        world.barrier().unwrap();
        win.free().unwrap();
    }
}
spmd_test!(
    uniform_first_access_reads_no_descriptor,
    jobs = common::matrix_providers(&[2]),
    first_access_messages
);
