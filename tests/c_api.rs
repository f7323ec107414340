//! The C API (bindings/c) as a C program uses it: `scripts/install-c.sh`
//! installs the library, header and pkg-config file under a temporary
//! prefix, `cc` compiles `bindings/c/examples/ring.c` with
//! `pkg-config --cflags --libs onesided` (warnings are errors), and the
//! program runs at 2 and 4 ranks under every launcher of
//! `ONESIDED_TEST_LAUNCHERS` (onesided-run and Hydra; srun and mpirun in
//! scripts/slurm-test.sh), on the
//! provider path and the direct path; it checks every element it moves
//! and the error codes of bad calls, and exits non-zero on any mismatch.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::{run_with_limit, say, select_provider, Launcher};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn sh(cmd: &mut Command, what: &str) -> String {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{what}: cannot start {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Installs the C API (debug build) under `prefix` and compiles ring.c.
fn build_ring(prefix: &Path) -> PathBuf {
    sh(
        Command::new(root().join("scripts/install-c.sh"))
            .arg("--debug")
            .arg(prefix)
            // The features this test build compiled the library with
            // (the dev-dependency turns `unstable` on): no rebuild.
            .env("ONESIDED_C_FEATURES", "onesided/unstable"),
        "scripts/install-c.sh",
    );
    let pc = prefix.join("lib/pkgconfig");
    let flags = sh(
        Command::new("pkg-config")
            .args(["--cflags", "--libs", "onesided"])
            .env("PKG_CONFIG_PATH", &pc),
        "pkg-config onesided",
    );
    assert!(flags.contains("-lonesided_c"), "pkg-config said: {flags}");
    let exe = prefix.join("ring");
    let mut cc = Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".into()));
    cc.args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-O1"])
        .arg(root().join("bindings/c/examples/ring.c"))
        .args(flags.split_whitespace())
        .arg(format!("-Wl,-rpath,{}", prefix.join("lib").display()))
        .arg("-o")
        .arg(&exe);
    sh(&mut cc, "compiling ring.c");
    // The program records the ABI version, not the file name.
    let needed = sh(Command::new("readelf").arg("-d").arg(&exe), "readelf");
    assert!(
        needed.contains("[libonesided_c.so.0]"),
        "ring does not need libonesided_c.so.0:\n{needed}"
    );
    exe
}

/// ring.c linked statically against libonesided_c.a, with the native
/// libraries `pkg-config --static` lists (Libs.private).
fn build_ring_static(prefix: &Path) -> PathBuf {
    let flags = sh(
        Command::new("pkg-config")
            .args(["--cflags", "--libs", "--static", "onesided"])
            .env("PKG_CONFIG_PATH", prefix.join("lib/pkgconfig")),
        "pkg-config --static onesided",
    );
    let archive = prefix.join("lib/libonesided_c.a");
    let exe = prefix.join("ring-static");
    let mut cc = Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".into()));
    cc.args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-O1"])
        .arg(root().join("bindings/c/examples/ring.c"));
    for f in flags.split_whitespace() {
        if f == "-lonesided_c" {
            cc.arg(&archive);
        } else {
            cc.arg(f);
        }
    }
    cc.arg("-o").arg(&exe);
    sh(&mut cc, "linking ring.c statically");
    exe
}

/// Runs `exe` with `ranks` ranks under `launcher` over tcp, the direct
/// path on or off, and checks that every rank reported success.
fn run_ring(label: &str, launcher: Launcher, exe: &Path, ranks: usize, direct: &str) {
    let mut cmd = common::launcher_command(launcher, ranks, exe);
    select_provider(&mut cmd, "tcp");
    cmd.env("ONESIDED_SHM", direct);
    let out = run_with_limit(cmd, common::job_timeout());
    let ok = out.status.is_some_and(|s| s.success());
    say(&format!(
        "[harness] c_api {label}: -n {ranks} tcp ONESIDED_SHM={direct}: {} in {:.2} s",
        if ok { "ok" } else { "FAILED" },
        out.elapsed.as_secs_f64()
    ));
    assert!(ok, "{label} -n {ranks}: {:?}\n{}", out.status, out.tail(40));
    let passed = out.stdout.matches("every check passed").count();
    assert_eq!(passed, ranks, "ranks reporting success:\n{}", out.tail(40));
}

#[test]
fn c_ring_program_under_launchers() {
    let prefix = common::unique_dir("c-api");
    let exe = build_ring(&prefix);
    let static_exe = build_ring_static(&prefix);
    // Every launcher of ONESIDED_TEST_LAUNCHERS (default onesided-run and
    // Hydra; scripts/slurm-test.sh: srun --mpi=pmix, srun --mpi=pmi2,
    // Open MPI's mpirun).
    for launcher in common::launchers() {
        let label = format!("ring under {}", launcher.name());
        for ranks in [2usize, 4] {
            for direct in ["0", "1"] {
                run_ring(&label, launcher, &exe, ranks, direct);
            }
        }
    }
    // The static build once, at 2 ranks.
    run_ring("static ring", common::launchers()[0], &static_exe, 2, "0");
    // onesided_abort (RING_ABORT: rank 1 aborts with 5 while the others
    // wait in a barrier) ends the job under every launcher, also one told
    // to let the others run on after a failed rank.
    for launcher in common::launchers() {
        let mut cmd = common::launcher_command_ending_on_failure(launcher, 3, &exe, false);
        select_provider(&mut cmd, "tcp");
        cmd.env("RING_ABORT", "1").env("ONESIDED_TIMEOUT", "120");
        let out = run_with_limit(cmd, Duration::from_secs(60));
        let status = out.status.unwrap_or_else(|| {
            panic!(
                "abort under {}: the job did not end\n{}",
                launcher.name(),
                out.tail(40)
            )
        });
        assert!(
            !status.success(),
            "abort under {}: {}",
            launcher.name(),
            out.tail(40)
        );
        if launcher == Launcher::OnesidedRun {
            assert_eq!(status.code(), Some(5), "{}", out.tail(40));
        }
        assert!(!out.stdout.contains("was not ended"), "{}", out.tail(40));
        say(&format!(
            "[harness] c_api onesided_abort under {} -n 3: job ended ({status}) in {:.2} s",
            launcher.name(),
            out.elapsed.as_secs_f64()
        ));
    }
    let _ = std::fs::remove_dir_all(&prefix);
}
