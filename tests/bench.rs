//! Runs `onesided-bench` briefly over tcp under `onesided-run -n 2` and checks
//! its JSON lines: the ops present with positive latencies, raw beside
//! onesided, and the correctness check passed (also for the atomic
//! patterns, whose check counts every operation). Negative controls: the
//! hidden `--expect-wrong` must make the checks fail. Also: CLI errors are
//! clear.

#[macro_use]
#[allow(unused_macros)]
mod common;

use std::process::Command;
use std::time::Duration;

use serde_json::Value;

const BENCH: &str = env!("CARGO_BIN_EXE_onesided-bench");

/// The JSON objects rank 0 printed (lines prefixed `[0] ` by onesided-run).
fn json_lines(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .filter_map(|l| l.strip_prefix("[0] "))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

#[test]
fn bench_tcp_json_put_get_latency() {
    let mut cmd = Command::new(common::onesided_run());
    cmd.args(["-n", "2", "--provider", "tcp", BENCH])
        .args(["--ops", "put_lat,get_lat", "--sizes", "8,65536"])
        .args(["--reps", "1", "--time", "0.01", "--json", "--raw"])
        .env_remove("ONESIDED_PROVIDER");
    let out = common::run_with_limit(cmd, Duration::from_secs(60));
    assert!(
        out.status.is_some_and(|s| s.success()),
        "onesided-bench failed:\n{}",
        out.tail(30)
    );
    let lines = json_lines(&out.stdout);
    let header = lines
        .iter()
        .find(|v| v["type"] == "header")
        .expect("header line");
    assert_eq!(header["header"]["provider"], "tcp;ofi_rxm");
    assert!(header["header"]["loadavg"].as_str().is_some());
    for op in ["put_lat", "get_lat"] {
        for mode in ["onesided", "raw"] {
            for size in [8, 65536] {
                let r = lines
                    .iter()
                    .find(|v| {
                        v["type"] == "result"
                            && v["op"] == op
                            && v["mode"] == mode
                            && v["size"] == size
                    })
                    .unwrap_or_else(|| panic!("no {op} {mode} {size} in\n{}", out.stdout));
                let lat = r["lat_us"].as_f64().expect("lat_us");
                assert!(lat > 0.0 && lat.is_finite(), "{op} {mode} {size}: {lat}");
                assert!(r["lat_min_us"].as_f64() <= r["lat_max_us"].as_f64());
            }
        }
    }
    let check = lines
        .iter()
        .find(|v| v["type"] == "check")
        .expect("check line");
    assert_eq!(check["check"], "ok", "{}", out.stdout);
    assert!(check["checked"].as_u64().unwrap_or(0) >= 8, "{check}");
}

/// On a back-end without provider atomics (libfabric's `net`) the raw
/// forms of the atomic, lock and PSCW patterns are skipped with the
/// reason, every onesided pattern still runs, and the check passes (the
/// raw fetch-add once failed on rank 0 and hung rank 1 in a barrier).
#[test]
fn bench_raw_atomics_skipped_where_the_backend_has_none() {
    if !common::providers().iter().any(|p| p == "net") {
        eprintln!("SKIP: net is not in ONESIDED_TEST_PROVIDERS");
        return;
    }
    let ops = [
        "acc_lat",
        "fop_lat",
        "cas_lat",
        "lock_unlock_lat",
        "pscw_lat",
        "lock_all_lat",
    ];
    let mut cmd = Command::new(common::onesided_run());
    cmd.args(["-n", "2", "--provider", "net", BENCH])
        .args(["--ops", &ops.join(","), "--sizes", "8"])
        .args([
            "--reps",
            "1",
            "--time",
            "0.01",
            "--max-iters",
            "100",
            "--json",
            "--raw",
        ])
        .env("ONESIDED_SHM", "0")
        .env_remove("ONESIDED_PROVIDER");
    let out = common::run_with_limit(cmd, Duration::from_secs(120));
    assert!(
        out.status.is_some_and(|s| s.success()),
        "onesided-bench failed:\n{}",
        out.tail(30)
    );
    let lines = json_lines(&out.stdout);
    for op in ops {
        assert!(
            result(&lines, op, "onesided", 8).is_some(),
            "no onesided {op} in\n{}",
            out.stdout
        );
        assert!(
            result(&lines, op, "raw", 8).is_none(),
            "raw {op} ran on net, which has no atomics"
        );
        assert!(
            out.stderr.contains(&format!(
                "{op} 8 raw: skipped: back-end ofi (net) offers no native"
            )),
            "no reason printed for raw {op}:\n{}",
            out.tail(30)
        );
    }
    let check = lines
        .iter()
        .find(|v| v["type"] == "check")
        .expect("check line");
    assert_eq!(check["check"], "ok", "{}", out.stdout);
}

/// A negative control's run: it must exit non-zero with a check line
/// saying FAIL, which is returned.
fn failed_check(cmd: Command, limit: Duration) -> Value {
    let out = common::run_with_limit(cmd, limit);
    let status = out.status.expect("onesided-bench did not finish");
    assert!(
        !status.success(),
        "check passed on wrong data:\n{}",
        out.tail(20)
    );
    let check = json_lines(&out.stdout)
        .into_iter()
        .find(|v| v["type"] == "check")
        .unwrap_or_else(|| panic!("no check line:\n{}", out.tail(20)));
    assert_eq!(check["check"], "FAIL");
    check
}

/// The result line of (op, mode, size).
fn result<'a>(lines: &'a [Value], op: &str, mode: &str, size: u64) -> Option<&'a Value> {
    lines
        .iter()
        .find(|v| v["type"] == "result" && v["op"] == op && v["mode"] == mode && v["size"] == size)
}

const ATOMIC_OPS: [&str; 4] = ["acc_lat", "acc_rate", "fop_lat", "cas_lat"];

fn atomics_cmd(extra: &[&str]) -> Command {
    let mut cmd = Command::new(common::onesided_run());
    cmd.args(["-n", "2", "--provider", "tcp", BENCH])
        .args(["--ops", &ATOMIC_OPS.join(","), "--reps", "1"])
        .args(["--time", "0.01", "--max-iters", "200", "--json", "--raw"])
        .args(extra)
        .env_remove("ONESIDED_PROVIDER");
    cmd
}

/// Every atomic pattern runs through the window layer and raw, and the
/// checks pass: the target word holds the exact operation count, fetch-and-op
/// returned 0, 1, 2, ... and compare-and-swap the compared values.
#[test]
fn bench_tcp_atomics_run_and_check() {
    let out = common::run_with_limit(atomics_cmd(&[]), Duration::from_secs(90));
    assert!(
        out.status.is_some_and(|s| s.success()),
        "onesided-bench failed:\n{}",
        out.tail(30)
    );
    let lines = json_lines(&out.stdout);
    for op in ATOMIC_OPS {
        for mode in ["onesided", "raw"] {
            let r = result(&lines, op, mode, 8)
                .unwrap_or_else(|| panic!("no {op} {mode} in\n{}", out.stdout));
            let lat = r["lat_us"].as_f64().expect("lat_us");
            assert!(lat > 0.0 && lat.is_finite(), "{op} {mode}: {lat}");
            assert_eq!(r["rate_mops"].is_f64(), op == "acc_rate", "{r}");
            if op == "acc_rate" {
                assert_eq!(r["ops_per_iter"], 1024, "{r}");
            }
        }
    }
    let check = lines
        .iter()
        .find(|v| v["type"] == "check")
        .expect("check line");
    assert_eq!(check["check"], "ok", "{}", out.stdout);
    let text = check.to_string();
    // 8 target-side counts + fop order and cas old values, both modes.
    assert!(check["checked"].as_u64().unwrap_or(0) >= 12, "{text}");
}

/// Negative control for the atomic checks: with `--expect-wrong` the targets
/// expect a count off by 10^6 and the origin expects every returned value
/// off by one, so every atomic pattern must report a failure of both kinds.
#[test]
fn bench_atomics_check_detects_wrong_values() {
    let check = failed_check(atomics_cmd(&["--expect-wrong"]), Duration::from_secs(90));
    let failed: Vec<&str> = check["failed"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    for op in ATOMIC_OPS {
        for mode in ["onesided", "raw"] {
            let label = format!("{op} 8 {mode}: rank 1 holds the wrong last value");
            assert!(
                failed.contains(&label.as_str()),
                "{label} not in {failed:?}"
            );
        }
    }
    for op in ["fop_lat", "cas_lat"] {
        for mode in ["onesided", "raw"] {
            let prefix = format!("{op} 8 {mode}: ");
            assert!(
                failed
                    .iter()
                    .any(|f| f.starts_with(&prefix) && f.contains("wrong return values")),
                "no wrong-return failure for {op} {mode} in {failed:?}"
            );
        }
    }
}

/// Negative control: targets told to expect a wrong value must make the
/// check fail, with a non-zero exit.
#[test]
fn bench_check_detects_wrong_data() {
    let mut cmd = Command::new(common::onesided_run());
    cmd.args(["-n", "2", "--provider", "shm", BENCH])
        .args(["--ops", "put_lat", "--sizes", "8", "--reps", "1"])
        .args(["--time", "0.01", "--json", "--expect-wrong"])
        .env_remove("ONESIDED_PROVIDER");
    let check = failed_check(cmd, Duration::from_secs(60));
    assert!(check["failed"].as_array().is_some_and(|f| !f.is_empty()));
}

#[test]
fn bench_rejects_bad_options_clearly() {
    for (args, needle) in [
        (&["--sizes", "8,abc"][..], "not a size"),
        (&["--ops", "put_lat,nope"][..], "nope"),
        (&["--time", "-1"][..], "duration"),
        (&["--reps", "0"][..], "reps"),
    ] {
        let out = Command::new(BENCH)
            .args(args)
            .output()
            .expect("run onesided-bench");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}

#[test]
fn bench_needs_two_ranks() {
    let out = Command::new(BENCH)
        .args(["--ops", "put_lat", "--sizes", "8"])
        .env_remove("ONESIDED_PROVIDER")
        .env("ONESIDED_PROVIDER", "tcp")
        .output()
        .expect("run onesided-bench");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("at least 2 ranks"));
}

fn sync_cmd(extra: &[&str]) -> Command {
    let mut cmd = Command::new(common::onesided_run());
    cmd.args(["-n", "3", "--provider", "tcp", BENCH])
        .args(["--ops", "pscw_lat,msg_rate", "--reps", "1"])
        .args(["--time", "0.01", "--max-iters", "100", "--json", "--raw"])
        .args(extra)
        .env_remove("ONESIDED_PROVIDER");
    cmd
}

/// `pscw_lat` (rank 1 posts and waits, rank 2 sits it out) and `msg_rate`
/// (puts spread over ranks 1 and 2) on 3 ranks, through the window layer
/// and raw: results present and every target holds the last value written
/// (rank 1 after PSCW, both targets after msg_rate).
#[test]
fn bench_tcp_pscw_and_msg_rate_three_ranks() {
    let doc = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("bench-pscw-{}.json", std::process::id()));
    let doc_arg = doc.to_string_lossy().into_owned();
    let svg = doc.with_extension("svg");
    let svg_arg = svg.to_string_lossy().into_owned();
    let out = common::run_with_limit(
        sync_cmd(&["--json-file", &doc_arg, "--plot", &svg_arg]),
        Duration::from_secs(90),
    );
    assert!(
        out.status.is_some_and(|s| s.success()),
        "onesided-bench failed:\n{}",
        out.tail(30)
    );
    let lines = json_lines(&out.stdout);
    for op in ["pscw_lat", "msg_rate"] {
        for mode in ["onesided", "raw"] {
            let r = result(&lines, op, mode, 8)
                .unwrap_or_else(|| panic!("no {op} {mode} in\n{}", out.stdout));
            let lat = r["lat_us"].as_f64().expect("lat_us");
            assert!(lat > 0.0 && lat.is_finite(), "{op} {mode}: {lat}");
        }
    }
    let check = lines
        .iter()
        .find(|v| v["type"] == "check")
        .expect("check line");
    assert_eq!(check["check"], "ok", "{}", out.stdout);
    // The whole document lists what was checked.
    let text = std::fs::read_to_string(&doc).expect("read --json-file");
    for label in [
        "pscw_lat 8 onesided: last value at rank 1",
        "pscw_lat 8 raw: last value at rank 1",
        "msg_rate 8 onesided: last value at rank 2",
        "msg_rate 8 raw: last value at rank 2",
    ] {
        assert!(text.contains(label), "{label} not in {text}");
    }
    // The plot's 8-byte panel carries the unsized patterns.
    let plot = std::fs::read_to_string(&svg).expect("read --plot");
    assert!(plot.starts_with("<svg") && plot.contains("8-byte patterns"));
    for op in ["pscw_lat", "msg_rate"] {
        assert!(plot.contains(op), "{op} not in the plot");
    }
}

/// Negative control: with `--expect-wrong` the PSCW target must report the
/// wrong last value in both modes.
#[test]
fn bench_pscw_check_detects_wrong_data() {
    let text = failed_check(sync_cmd(&["--expect-wrong"]), Duration::from_secs(90)).to_string();
    for mode in ["onesided", "raw"] {
        let label = format!("pscw_lat 8 {mode}: rank 1 holds the wrong last value");
        assert!(text.contains(&label), "{label} not in {text}");
    }
}

fn halo_cmd(extra: &[&str]) -> Command {
    let mut cmd = Command::new(common::onesided_run());
    cmd.args(["-n", "3", "--provider", "tcp", BENCH])
        .args(["--ops", "halo_lat", "--reps", "1"])
        .args(["--time", "0.01", "--max-iters", "20", "--json"])
        .args(extra)
        .env_remove("ONESIDED_PROVIDER");
    cmd
}

/// `halo_lat` on 3 ranks (a ring: each rank's left and right neighbours
/// differ): one result for the 1024-point grid, and every rank's 2,048 halo
/// elements hold its neighbours' boundary columns.
#[test]
fn bench_tcp_halo_three_ranks() {
    let doc = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("bench-halo-{}.json", std::process::id()));
    let doc_arg = doc.to_string_lossy().into_owned();
    let out = common::run_with_limit(
        halo_cmd(&["--json-file", &doc_arg]),
        Duration::from_secs(120),
    );
    assert!(
        out.status.is_some_and(|s| s.success()),
        "onesided-bench failed:\n{}",
        out.tail(30)
    );
    let lines = json_lines(&out.stdout);
    let r = result(&lines, "halo_lat", "onesided", 1024)
        .unwrap_or_else(|| panic!("no halo_lat result in\n{}", out.stdout));
    let lat = r["lat_us"].as_f64().expect("lat_us");
    assert!(lat > 0.0 && lat.is_finite(), "halo_lat: {lat}");
    assert!(result(&lines, "halo_lat", "raw", 1024).is_none());
    let check = lines
        .iter()
        .find(|v| v["type"] == "check")
        .expect("check line");
    assert_eq!(check["check"], "ok", "{}", out.stdout);
    let text = std::fs::read_to_string(&doc).expect("read --json-file");
    for label in [
        "halo_lat 1024 onesided: rank 0's halos",
        "halo_lat 1024 onesided: last value at rank 1",
        "halo_lat 1024 onesided: last value at rank 2",
    ] {
        assert!(text.contains(label), "{label} not in {text}");
    }
}

/// Negative control: with `--expect-wrong` every rank's halo check fails.
#[test]
fn bench_halo_check_detects_wrong_data() {
    let text = failed_check(halo_cmd(&["--expect-wrong"]), Duration::from_secs(120)).to_string();
    for label in [
        "halo_lat 1024 onesided: 2048 of rank 0's 2048 halo elements wrong",
        "halo_lat 1024 onesided: rank 1 holds the wrong last value",
        "halo_lat 1024 onesided: rank 2 holds the wrong last value",
    ] {
        assert!(text.contains(label), "{label} not in {text}");
    }
}
