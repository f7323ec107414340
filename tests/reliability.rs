//! A rank that dies (SIGKILL, no clean-up) must not hang the others: every
//! survivor's blocking collective returns `Err` within `ONESIDED_TIMEOUT`
//! (issue 12, item 1). The job runs under `onesided-run --keep-going`, so
//! the launcher does not end the survivors for us.

mod common;

use std::time::{Duration, Instant};

use onesided::{Assert, Window, World};

const TIMEOUT_S: u64 = 2;
const DEAD: usize = 1;

/// Each case: the dead rank aborts where the others enter the call named.
const CASES: &[&str] = &["barrier", "fence", "create", "free"];

#[test]
fn survivors_get_an_error_when_a_rank_dies() {
    let name = common::test_name(module_path!(), "survivors_get_an_error_when_a_rank_dies");
    if common::is_child(&name) {
        let case = std::env::var("ONESIDED_TEST_CASE").expect("case");
        let world = World::init().expect("init");
        let mut win = Window::<u64>::allocate(&world, 64).expect("allocate");
        win.fence(Assert::NONE).expect("first fence");
        world.barrier().expect("first barrier");
        if world.rank() == DEAD {
            // Dies without any clean-up: kill -9.
            let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGKILL);
            unreachable!("SIGKILL");
        }
        let start = Instant::now();
        let result = match case.as_str() {
            "barrier" => world.barrier(),
            "fence" => win.fence(Assert::NONE),
            "create" => Window::<u64>::allocate(&world, 64).map(|_| ()),
            "free" => win.free(),
            other => panic!("unknown case {other}"),
        };
        let secs = start.elapsed().as_secs_f64();
        match result {
            Ok(()) => println!(
                "survivor {} case {case}: Ok after {secs:.2} s",
                world.rank()
            ),
            Err(e) => println!(
                "survivor {} case {case}: Err after {secs:.2} s: {e}",
                world.rank()
            ),
        }
        // The job's state is broken (a peer is gone); leave without the
        // final collectives of World's Drop.
        std::process::exit(0);
    }
    let mut failures = Vec::new();
    for ranks in [3usize, 4] {
        for shm in ["0", "1"] {
            for case in CASES {
                let job = || {
                    let mut cmd = common::onesided_run_command(&name, ranks, &["--keep-going"]);
                    cmd.env("ONESIDED_TEST_CASE", case)
                        .env("ONESIDED_TIMEOUT", TIMEOUT_S.to_string())
                        .env("ONESIDED_SHM", shm);
                    common::run_with_limit(cmd, Duration::from_secs(60))
                };
                let mut out = job();
                if common::rank_segfaulted(&out) && common::provider_has_known_segfault() {
                    // The known tcp;ofi_rxm defect (docs/reliability.md):
                    // counted loudly, and the job must pass when run again.
                    // On any other provider a segfault fails the test.
                    common::say(&format!(
                        "KNOWN PROVIDER DEFECT: {case} n={ranks} shm={shm}: a survivor \
                         segfaulted inside libfabric (tcp;ofi_rxm); running the job again"
                    ));
                    out = job();
                }
                let lines: Vec<&str> = out
                    .stdout
                    .lines()
                    .filter(|l| l.contains("survivor ") && l.contains(" case "))
                    .collect();
                let errs = lines.iter().filter(|l| l.contains(": Err after")).count();
                common::say(&format!(
                    "{case} n={ranks} shm={shm}: {errs}/{} survivors got Err, job {} in {:.1} s",
                    ranks - 1,
                    out.status.map_or("hung".into(), |s| s.to_string()),
                    out.elapsed.as_secs_f64()
                ));
                for l in &lines {
                    common::say(&format!("    {l}"));
                }
                // Every survivor returned (none hung), each with an error
                // (a peer it needs is dead), after about the timeout (the
                // waits are chained: a survivor may wait for a survivor
                // that waits for the dead rank), and the job ended.
                let slow = lines.iter().any(|l| {
                    l.split("after ")
                        .nth(1)
                        .and_then(|t| t.split(' ').next())
                        .and_then(|t| t.parse::<f64>().ok())
                        .is_none_or(|s| s > (TIMEOUT_S * 2 + 5) as f64)
                });
                if out.status.is_none() || errs != ranks - 1 || slow {
                    failures.push(format!("{case} n={ranks} shm={shm}\n{}", out.tail(20)));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// `World::finalize` returns `Ok` when every rank finalizes. A rank that
/// frees its window and leaves with `process::exit` (skipping finalize)
/// does not break its peers' `free()` (issue 12 item 4), and their
/// `finalize` returns `Err` instead of hanging. `World::abort` ends the
/// whole job with its code, leaving no rank behind.
#[test]
fn finalize_and_abort() {
    let name = common::test_name(module_path!(), "finalize_and_abort");
    if common::is_child(&name) {
        let case = std::env::var("ONESIDED_TEST_CASE").expect("case");
        let world = World::init().expect("init");
        println!("pid {} rank {}", std::process::id(), world.rank());
        let mut win = Window::<u64>::allocate(&world, 8).expect("allocate");
        win.lock_all().expect("lock_all");
        let right = (world.rank() + 1) % world.size();
        win.put(right, 0, &[world.rank() as u64 + 1]).expect("put");
        win.unlock_all().expect("unlock_all");
        win.free().expect("free");
        drop(win);
        match case.as_str() {
            "finalize" => {}
            "departed" if world.rank() == DEAD => std::process::exit(0),
            "abort" if world.rank() == DEAD => world.abort(3),
            "abort" => {
                // Waits for the aborting rank: the launcher ends us.
                let _ = world.barrier();
                println!("rank {} was not ended by the launcher", world.rank());
                return;
            }
            _ => {}
        }
        let start = Instant::now();
        let r = world.finalize();
        println!(
            "finalize {}: {} after {:.2} s",
            case,
            r.as_ref()
                .map_or_else(|e| format!("Err {e}"), |_| "Ok".into()),
            start.elapsed().as_secs_f64()
        );
        return;
    }
    let ranks = 3;
    // "departed" four times: before the barrier tolerated a peer that had
    // completed it and left, a survivor's free() failed in most runs.
    for case in [
        "finalize", "departed", "departed", "departed", "departed", "abort",
    ] {
        let args: &[&str] = if case == "departed" {
            &["--keep-going"]
        } else {
            &[]
        };
        let mut cmd = common::onesided_run_command(&name, ranks, args);
        cmd.env("ONESIDED_TEST_CASE", case)
            .env("ONESIDED_TIMEOUT", TIMEOUT_S.to_string());
        let out = common::run_with_limit(cmd, Duration::from_secs(60));
        let count = |what: &str| out.stdout.lines().filter(|l| l.contains(what)).count();
        common::say(&format!(
            "{case}: job {} in {:.1} s; finalize Ok {}, Err {}",
            out.status.map_or("hung".into(), |s| s.to_string()),
            out.elapsed.as_secs_f64(),
            count(": Ok after"),
            count(": Err ")
        ));
        match case {
            "finalize" => assert!(
                out.status.is_some_and(|s| s.success()) && count("finalize finalize: Ok") == ranks,
                "{}",
                out.tail(20)
            ),
            "departed" => assert!(
                out.status.is_some() && count("finalize departed: Err") == ranks - 1,
                "{}",
                out.tail(20)
            ),
            _ => {
                assert_eq!(
                    out.status.and_then(|s| s.code()),
                    Some(3),
                    "{}",
                    out.tail(20)
                );
                assert_eq!(count("was not ended"), 0, "{}", out.tail(20));
                let pids: Vec<u32> = out
                    .stdout
                    .lines()
                    .filter_map(|l| l.split("pid ").nth(1)?.split(' ').next()?.parse().ok())
                    .collect();
                assert_eq!(pids.len(), ranks, "{}", out.tail(20));
                let left = common::wait_gone(&pids, Duration::from_secs(5));
                assert!(left.is_empty(), "ranks left behind: {left:?}");
            }
        }
    }
}
