//! A rank that dies (SIGABRT, no clean-up) must not hang the others: every
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
            // Dies without any clean-up, as kill -9 would.
            std::process::abort();
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
                let mut cmd = common::onesided_run_command(&name, ranks, &["--keep-going"]);
                cmd.env("ONESIDED_TEST_CASE", case)
                    .env("ONESIDED_TIMEOUT", TIMEOUT_S.to_string())
                    .env("ONESIDED_SHM", shm);
                let out = common::run_with_limit(cmd, Duration::from_secs(60));
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
