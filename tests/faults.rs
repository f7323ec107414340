//! Fault injection (issue 12, Deliver point 4): one rank is killed with
//! SIGKILL at each of six points — inside a lock_all+put+flush loop, while
//! holding an exclusive lock, in a fence, in a window creation, in a free
//! and while its PSCW target waits — at 2 and 4 ranks, each case twice.
//!
//! (a) With the launcher's tear-down off (`onesided-run --keep-going`),
//! every survivor returns `Err` from a blocking call, within the timeout
//! (plus slack for chained collective waits), and nothing hangs.
//! (b) As users run it (plain `onesided-run`), the job ends, exits non-zero
//! and leaves no rank behind.
//!
//! `ONESIDED_FAULT_TIMEOUT` sets the survivors' `ONESIDED_TIMEOUT` (default
//! 2 s; `scripts/faults.sh` uses 3), `ONESIDED_FAULT_TRIES` the tries per
//! case (default 2; the soft-RoCE guest runs one on the native back-end,
//! `ONESIDED_BACKEND=verbs`), `ONESIDED_FAULT_RANKS` the job sizes
//! (default `2,4`; the guest runs `4`, whose survivors also wait in
//! chained collective hops, to keep its stage within its time budget).

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use onesided::{Assert, LockType, Window, World};

const DEAD: usize = 1;
const CASES: &[&str] = &[
    "lock_all_put_flush",
    "exclusive_lock",
    "fence",
    "create",
    "free",
    "pscw_wait",
];

/// SIGKILL to oneself: no unwinding, no destructor, no atexit handler.
fn kill_self() -> ! {
    let pid = std::process::id().to_string();
    let _ = Command::new("kill").args(["-KILL", &pid]).status();
    // `kill` is in every image the tests run in; if it is missing, abort
    // is the closest fault (no clean-up either).
    std::process::abort();
}

fn child(case: &str) {
    let world = World::init().expect("init");
    let me = world.rank();
    println!("pid {} rank {me}", std::process::id());
    let mut win = Window::<u64>::allocate(&world, 64).expect("allocate");
    win.fence(Assert::NONE).expect("first fence");
    world.barrier().expect("first barrier");
    let start = Instant::now();
    // The first error a survivor sees; a survivor whose own part of the
    // case cannot notice the death (it never addresses the dead rank) meets
    // it in the barrier that follows.
    let result = run_case(case, &world, &mut win);
    let secs = start.elapsed().as_secs_f64();
    match result {
        Ok(()) => println!("survivor {me} case {case}: Ok after {secs:.2} s"),
        Err((what, e)) => println!(
            "survivor {me} case {case}: Err after {secs:.2} s in {what}: {e} (kind {:?}, rank {:?})",
            e.kind(),
            e.rank()
        ),
    }
    // A peer is gone: leave without the final collectives of World's Drop.
    std::process::exit(0);
}

/// The case's calls on this rank; the dead rank never returns. The first
/// error names the call it came from.
fn run_case(
    case: &str,
    world: &World,
    win: &mut Window<u64>,
) -> Result<(), (String, onesided::Error)> {
    let me = world.rank();
    let n = world.size();
    let dead = me == DEAD;
    let step = |what: &str, r: onesided::Result<()>| r.map_err(|e| (what.to_string(), e));
    match case {
        "lock_all_put_flush" => {
            for i in 0..200u64 {
                if dead && i == 5 {
                    kill_self();
                }
                step("lock_all", win.lock_all())?;
                for r in 0..n {
                    step("put", win.put(r, me, &[i]))?;
                }
                step("flush_all", win.flush_all())?;
                step("unlock_all", win.unlock_all())?;
            }
        }
        "exclusive_lock" => {
            if dead {
                win.lock(0, LockType::Exclusive, Assert::NONE)
                    .expect("dead rank's lock");
                win.put(0, 0, &[7]).expect("dead rank's put");
                win.flush(0).expect("dead rank's flush");
                world.barrier().expect("dead rank's barrier");
                kill_self();
            }
            step("barrier", world.barrier())?;
            step("lock", win.lock(0, LockType::Exclusive, Assert::NONE))?;
            step("put", win.put(0, 1, &[me as u64]))?;
            step("unlock", win.unlock(0))?;
        }
        "fence" => {
            if dead {
                kill_self();
            }
            step("fence", win.fence(Assert::NONE))?;
        }
        "create" => {
            if dead {
                kill_self();
            }
            step("create", Window::<u64>::allocate(world, 64).map(|_| ()))?;
        }
        "free" => {
            if dead {
                kill_self();
            }
            step("free", win.free())?;
        }
        "pscw_wait" => {
            if me == 0 {
                let origins: Vec<usize> = (1..n).collect();
                step("post", win.post(&origins, Assert::NONE))?;
                step("wait", win.wait())?;
            } else {
                step("start", win.start(&[0], Assert::NONE))?;
                step("put", win.put(0, me, &[me as u64]))?;
                if dead {
                    kill_self();
                }
                step("complete", win.complete())?;
            }
        }
        other => panic!("unknown case {other}"),
    }
    step("barrier after", world.barrier())
}

fn timeout_s() -> u64 {
    std::env::var("ONESIDED_FAULT_TIMEOUT")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2)
}

#[test]
fn killed_rank_at_each_point() {
    let name = common::test_name(module_path!(), "killed_rank_at_each_point");
    if common::is_child(&name) {
        let case = std::env::var("ONESIDED_TEST_CASE").expect("case");
        child(&case);
        return;
    }
    if std::env::var_os("ONESIDED_FAULT_STAGE").is_none() {
        // 48 jobs, about 3 minutes: a stage of its own in .ci/run.
        common::say(
            "SKIPPED killed_rank_at_each_point: run by scripts/faults.sh (ONESIDED_FAULT_STAGE=1)",
        );
        return;
    }
    let timeout = timeout_s();
    let tries: usize = std::env::var("ONESIDED_FAULT_TRIES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2);
    common::say(&format!(
        "fault injection: back-end {}, {tries} tries per case, {} ranks",
        std::env::var("ONESIDED_BACKEND").unwrap_or_else(|_| "default".into()),
        std::env::var("ONESIDED_FAULT_RANKS").unwrap_or_else(|_| "2,4".into())
    ));
    let sizes: Vec<usize> = std::env::var("ONESIDED_FAULT_RANKS")
        .unwrap_or_else(|_| "2,4".into())
        .split(',')
        .map(|n| match n.trim().parse() {
            Ok(n) if n >= 2 => n,
            _ => panic!("ONESIDED_FAULT_RANKS: {n:?} is not a job size of 2 or more"),
        })
        .collect();
    let mut failures = Vec::new();
    let mut table = Vec::new();
    for ranks in sizes {
        for case in CASES {
            for try_no in 1..=tries {
                // (a) tear-down off: every survivor reports an Err.
                let job = || {
                    let mut cmd = common::onesided_run_command(&name, ranks, &["--keep-going"]);
                    cmd.env("ONESIDED_TEST_CASE", case)
                        .env("ONESIDED_TIMEOUT", timeout.to_string());
                    common::run_with_limit(cmd, Duration::from_secs(60))
                };
                // (b) as users run it: the launcher ends the job, non-zero.
                // It runs beside (a): both mostly wait out the timeout, and
                // their bounds are wall-clock times.
                let job_b = || {
                    let mut cmd = common::onesided_run_command(&name, ranks, &[]);
                    cmd.env("ONESIDED_TEST_CASE", case)
                        .env("ONESIDED_TIMEOUT", timeout.to_string());
                    common::run_with_limit(cmd, Duration::from_secs(60))
                };
                let (mut out, out_b) = std::thread::scope(|s| {
                    let b = s.spawn(job_b);
                    let a = job();
                    (a, b.join().expect("the thread of job (b)"))
                });
                if common::rank_segfaulted(&out) && common::provider_has_known_segfault() {
                    // The known tcp;ofi_rxm defect (docs/reliability.md):
                    // counted loudly, and the job must pass when run again.
                    // On any other provider a segfault fails the test.
                    common::say(&format!(
                        "KNOWN PROVIDER DEFECT: (a) {case} n={ranks} try {try_no}: a survivor \
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
                let worst = lines
                    .iter()
                    .filter_map(|l| {
                        l.split("after ")
                            .nth(1)?
                            .split(' ')
                            .next()?
                            .parse::<f64>()
                            .ok()
                    })
                    .fold(0.0f64, f64::max);
                let pids = |out: &common::Output| -> Vec<u32> {
                    out.stdout
                        .lines()
                        .filter_map(|l| l.split("pid ").nth(1)?.split(' ').next()?.parse().ok())
                        .collect()
                };
                let left_a = common::wait_gone(&pids(&out), Duration::from_secs(5));
                // Waits are chained in collectives (at most log2 P hops of
                // the timeout); the bound is generous for a loaded machine.
                // A lock call is one wait: its polls and the withdrawal end
                // within 1.25 x the timeout (docs/reliability.md), plus
                // 1.5 s of slack (a regression to one timeout per poll took
                // 6 s on tcp and 9.3 s on native verbs with a 3 s timeout).
                let bound = if *case == "exclusive_lock" {
                    timeout as f64 * 1.25 + 1.5
                } else {
                    (timeout * 2 + 5) as f64
                };
                let ok_a = out.status.is_some()
                    && errs == ranks - 1
                    && worst <= bound
                    && left_a.is_empty();
                let left_b = common::wait_gone(&pids(&out_b), Duration::from_secs(5));
                let ok_b = out_b.status.is_some_and(|s| !s.success()) && left_b.is_empty();
                let row = format!(
                    "| {case:<18} | {ranks} | {try_no} | {errs}/{} Err, worst {worst:.2} s, job {} | {} in {:.2} s, left {} |",
                    ranks - 1,
                    out.status.map_or("hung".into(), |s| s.to_string()),
                    out_b.status.map_or("hung".into(), |s| s.to_string()),
                    out_b.elapsed.as_secs_f64(),
                    left_b.len()
                );
                common::say(&row);
                for l in &lines {
                    common::say(&format!("    {l}"));
                }
                table.push(row);
                if !ok_a {
                    failures.push(format!(
                        "(a) {case} n={ranks} try {try_no} (left {left_a:?})\n{}",
                        out.tail(20)
                    ));
                }
                if !ok_b {
                    failures.push(format!(
                        "(b) {case} n={ranks} try {try_no} (left {left_b:?})\n{}",
                        out_b.tail(20)
                    ));
                }
            }
        }
    }
    common::say("| case | ranks | try | (a) --keep-going: survivors | (b) onesided-run: job |");
    for row in &table {
        common::say(row);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
