//! `onesided-scale` under `onesided-run -n 4` over tcp: one JSON line per
//! rank, and the per-peer state it reports follows the design — creating a
//! window adds no peer, address-vector or rkey-cache entry anywhere; after
//! the use phase rank 0 (talks to all) caches 3 descriptors, rank 1 (talks
//! to one) 1, the idle ranks none (at most the cache's capacity); freeing
//! drops the window's cache entries.

#[macro_use]
#[allow(unused_macros)]
mod common;

use std::process::Command;
use std::time::Duration;

use serde_json::Value;

const SCALE: &str = env!("CARGO_BIN_EXE_onesided-scale");

#[test]
fn scale_reports_per_peer_state_only_for_touched_peers() {
    let mut cmd = Command::new(common::onesided_run());
    cmd.args(["-n", "4", "--provider", "tcp", SCALE, "--cycles", "2"])
        .env_remove("ONESIDED_PROVIDER");
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
        let want = [3, 1, 0, 0][r].min(capacity);
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
