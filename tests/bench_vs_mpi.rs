//! `scripts/bench-vs-mpi.sh`: its table from canned JSON lines (`--dry-run`,
//! no MPI needed), a failed check flagged, and `benches/mpi/rma_bench.c`
//! built with `mpicc.mpich` and run under `mpirun.mpich -n 2` (skipped, with
//! the reason printed, when MPICH is not installed).

#[macro_use]
#[allow(unused_macros)]
mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn script() -> PathBuf {
    Path::new(ROOT).join("scripts/bench-vs-mpi.sh")
}

fn canned() -> PathBuf {
    Path::new(ROOT).join("tests/data/bench-vs-mpi")
}

/// A fresh scratch directory under the target dir.
fn scratch(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("create scratch dir");
    d
}

fn python3_present() -> bool {
    Command::new("python3").arg("--version").output().is_ok()
}

fn dry_run(dir: &Path) -> common::Output {
    let mut cmd = Command::new("bash");
    cmd.arg(script()).arg("--dry-run").arg(dir);
    common::run_with_limit(cmd, Duration::from_secs(60))
}

/// The rows of the canned run: per-system medians, onesided / best MPI
/// (all MPI columns, and the `-tcp` ones for onesided-tcp) and onesided /
/// raw, with "[0] " prefixes, launcher lines and other ranks' lines ignored.
#[test]
fn table_from_canned_lines() {
    if !python3_present() {
        eprintln!("SKIPPED table_from_canned_lines: python3 is not installed");
        return;
    }
    let out = dry_run(&canned());
    assert_eq!(
        out.status.and_then(|s| s.code()),
        Some(0),
        "{}",
        out.tail(30)
    );
    for row in [
        "| op | size | mpich | mpich-tcp | onesided | onesided raw | onesided-tcp | onesided-tcp raw \
         | onesided/best MPI | onesided-tcp/best MPI-tcp | onesided/raw | onesided-tcp/raw |",
        "| put_lat | 8 | 2.00 | 25.0 | 4.00 | 3.20 | 10.0 | 8.00 | 2.00 | 0.40 | 1.25 | 1.25 |",
        "| put_lat | 1M | 100 | 1000 | 50.0 | 40.0 | — | — | 0.50 | — | 1.25 | — |",
        "| acc_lat | 8 | 1.50 | 15.0 | 1.20 | 1.00 | 30.0 | 10.0 | 0.80 | 2.00 | 1.20 | 3.00 |",
        "| pscw_lat | 8 | 3.00 | — | — | — | — | — | — | — | — | — |",
    ] {
        assert!(out.stdout.contains(row), "missing row\n{row}\nin\n{}", out.stdout);
    }
    assert!(out
        .stdout
        .contains("- onesided: tcp;ofi_rxm; date 2026-01-01T00:00:02Z"));
    assert!(!out.stdout.contains("PROBLEM"), "{}", out.stdout);
}

/// A system whose check failed, or that printed no results, makes the table
/// say so and the script fail.
#[test]
fn table_flags_failed_check_and_empty_run() {
    if !python3_present() {
        eprintln!("SKIPPED table_flags_failed_check_and_empty_run: python3 is not installed");
        return;
    }
    let dir = scratch("bvm-fail");
    for f in ["mpich.jsonl", "onesided.jsonl"] {
        std::fs::copy(canned().join(f), dir.join(f)).expect("copy canned file");
    }
    let text = std::fs::read_to_string(canned().join("onesided-tcp.jsonl")).expect("read");
    let bad = text.replace(
        r#""check":"ok","checked":4,"failed":[]"#,
        r#""check":"FAIL","checked":3,"failed":["acc_lat 8 raw: rank 1 holds the wrong last value"]"#,
    );
    assert_ne!(bad, text, "canned file changed: fix the replacement");
    std::fs::write(dir.join("onesided-tcp.jsonl"), bad).expect("write");
    std::fs::write(
        dir.join("ompi.jsonl"),
        "mpirun noticed that process rank 1 exited\n",
    )
    .expect("write");
    let out = dry_run(&dir);
    assert_eq!(
        out.status.and_then(|s| s.code()),
        Some(1),
        "{}",
        out.tail(30)
    );
    assert!(
        out.stdout
            .contains("PROBLEM: onesided-tcp: check FAIL: ['acc_lat 8 raw: rank 1 holds"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("PROBLEM: ompi: no results"),
        "{}",
        out.stdout
    );
}

/// The MPI program itself: built with mpicc.mpich, 2 ranks, every pattern
/// reported and every check passed; its lines feed the table.
#[test]
fn mpi_program_runs_under_mpich() {
    let have = |c: &str| {
        Command::new("sh")
            .args(["-c", &format!("command -v {c}")])
            .output()
            .is_ok_and(|o| o.status.success())
    };
    for tool in ["mpicc.mpich", "mpirun.mpich", "python3"] {
        if !have(tool) {
            eprintln!(
                "SKIPPED mpi_program_runs_under_mpich: {tool} not found \
                 (apt-get install mpich libmpich-dev python3)"
            );
            return;
        }
    }
    let dir = scratch("bvm-mpich");
    let exe = dir.join("rma_bench");
    let cc = Command::new("mpicc.mpich")
        .args(["-O2", "-Wall", "-Werror", "-o"])
        .arg(&exe)
        .arg(Path::new(ROOT).join("benches/mpi/rma_bench.c"))
        .output()
        .expect("run mpicc.mpich");
    assert!(
        cc.status.success(),
        "{}",
        String::from_utf8_lossy(&cc.stderr)
    );
    let mut cmd = Command::new("mpirun.mpich");
    cmd.args(["-n", "2"]).arg(&exe).args([
        "-s", "8,4K", "-r", "1", "-T", "0.002", "-N", "50", "-l", "mpich",
    ]);
    let out = common::run_with_limit(cmd, Duration::from_secs(120));
    assert_eq!(
        out.status.and_then(|s| s.code()),
        Some(0),
        "{}",
        out.tail(30)
    );
    let lines: Vec<serde_json::Value> = out
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    let ops = [
        "put_lat",
        "get_lat",
        "put_bw",
        "get_bw",
        "acc_lat",
        "acc_rate",
        "fop_lat",
        "cas_lat",
        "msg_rate",
        "lock_unlock_lat",
        "fence_lat",
        "pscw_lat",
    ];
    for op in ops {
        let sizes: &[u64] = if ["put_lat", "get_lat", "put_bw", "get_bw"].contains(&op) {
            &[8, 4096]
        } else {
            &[8]
        };
        for &size in sizes {
            let r = lines
                .iter()
                .find(|v| v["type"] == "result" && v["op"] == op && v["size"] == size)
                .unwrap_or_else(|| panic!("no {op} {size} in\n{}", out.stdout));
            assert!(r["lat_us"].as_f64().is_some_and(|v| v > 0.0), "{r}");
        }
    }
    let check = lines
        .iter()
        .find(|v| v["type"] == "check")
        .expect("check line");
    assert_eq!(check["check"], "ok", "{check}");
    assert!(check["checked"].as_u64().unwrap_or(0) >= 12, "{check}");
    std::fs::write(dir.join("mpich.jsonl"), &out.stdout).expect("write");
    let t = dry_run(&dir);
    assert_eq!(t.status.and_then(|s| s.code()), Some(0), "{}", t.tail(30));
    assert!(t.stdout.contains("| fop_lat | 8 |"), "{}", t.stdout);
}
