//! Launchers as cluster users run them: the bootstrap each one selects, the
//! start-up cost per process (bootstrap counters at P = 2 and 8), a killed
//! rank and `World::abort` ending the job with nothing left running, and
//! environments of
//! launchers we cannot speak refused instead of becoming singletons.
//!
//! Under the default `ONESIDED_TEST_LAUNCHERS` this covers `onesided-run` and
//! Hydra; `scripts/slurm-test.sh` runs it under `srun-pmix`, `srun-pmi2` and
//! `mpirun` on a real single-node Slurm.

#[macro_use]
mod common;

use std::time::Duration;

use common::{child_command, is_child, job_command, run_with_limit, say, test_name, wait_gone};
use onesided::{Assert, LockType, Window, World};

// The bootstrap in use is the one the launcher speaks (PMI-2 under
// `srun --mpi=pmi2`, PMIx under `srun --mpi=pmix` and `mpirun`, ...), and the
// node map it gave puts every rank on this node.
spmd_test!(
    bootstrap_in_use,
    jobs = common::matrix_one_provider(&[2, 4]),
    || {
        let world = World::init().expect("init");
        assert_eq!(world.bootstrap_name(), common::expected_bootstrap());
        let n: usize = std::env::var("ONESIDED_TEST_RANKS")
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(world.size(), n);
        for r in 0..n {
            assert!(
                world.is_node_local(r),
                "rank {r} not local on a one-node job"
            );
        }
        assert!(world.all_node_local());
    }
);

/// One rank's counters, printed by the child as a `counters:` line.
fn counters_line(world: &World, phase: &str) -> String {
    let s = world.stats();
    let b = s.bootstrap;
    format!(
        "counters: {phase} rank={} size={} bootstrap={} puts={} gets={} fences={} queries={} \
         put_bytes={} get_bytes={} peers_contacted={}",
        world.rank(),
        world.size(),
        world.bootstrap_name(),
        b.puts,
        b.gets,
        b.fences,
        b.queries,
        b.put_bytes,
        b.get_bytes,
        s.peers_contacted
    )
}

fn field(line: &str, name: &str) -> u64 {
    line.split_whitespace()
        .find_map(|t| t.strip_prefix(&format!("{name}=")))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {name}= in {line:?}"))
}

// Start-up costs each process O(1) exchanges with the launcher, and a `get`
// only for each peer it contacts: after `World::init`, one put (the card),
// one fence, no get of a peer's value; after a window, one locked put to
// the right neighbour and a barrier, gets == peers contacted (the
// neighbour and the O(log P) dissemination partners).
#[test]
fn startup_exchanges_are_constant() {
    let name = test_name(module_path!(), "startup_exchanges_are_constant");
    if is_child(&name) {
        let world = World::init().expect("init");
        let after_init = counters_line(&world, "init");
        let b = world.stats().bootstrap;
        assert_eq!((b.puts, b.fences, b.gets), (1, 1, 0), "{after_init}");
        assert!(b.queries <= 2, "{after_init}");
        let (rank, size) = (world.rank(), world.size());
        let right = (rank + 1) % size;
        let mut win = Window::<u64>::allocate(&world, 8).unwrap();
        // Per-target locks: lock_all would contact every target.
        win.lock(right, LockType::Exclusive, Assert::NONE).unwrap();
        win.put(right, 0, &[rank as u64]).unwrap();
        win.unlock(right).unwrap();
        world.barrier().unwrap();
        let mut got = [0u64];
        win.lock(rank, LockType::Shared, Assert::NONE).unwrap();
        win.get(rank, 0, &mut got).unwrap();
        win.unlock(rank).unwrap();
        assert_eq!(got[0], ((rank + size - 1) % size) as u64);
        let after = counters_line(&world, "ring");
        let s = world.stats();
        assert_eq!(
            s.bootstrap.gets as usize, s.peers_contacted,
            "gets must equal peers contacted: {after}"
        );
        assert_eq!((s.bootstrap.puts, s.bootstrap.fences), (1, 1), "{after}");
        // The neighbour plus the dissemination partners of window creation
        // and the barrier (rank + 1, + 2, + 4, ...): O(log P), not P.
        let log2 = usize::BITS - (size - 1).leading_zeros();
        assert!(s.peers_contacted <= log2 as usize + 1, "{after}");
        println!("{after_init}");
        println!("{after}");
        win.free().unwrap();
        common::child_done();
        return;
    }
    let mut jobs = Vec::new();
    for launcher in common::launchers() {
        for ranks in [2, 8] {
            jobs.push(common::Job {
                launcher,
                ranks,
                provider: common::providers().remove(0),
                direct: false,
            });
        }
    }
    for job in &jobs {
        let out = run_with_limit(job_command(&name, job), common::job_timeout());
        assert!(
            out.status.is_some_and(|s| s.success()),
            "{job}: {}",
            out.tail(40)
        );
        let lines: Vec<&str> = out
            .stdout
            .lines()
            .filter_map(|l| l.find("counters: ").map(|i| &l[i..]))
            .collect();
        assert_eq!(lines.len(), 2 * job.ranks, "{job}: {}", out.tail(40));
        let max = |phase: &str, f: &str| {
            lines
                .iter()
                .filter(|l| l.contains(&format!("counters: {phase} ")))
                .map(|l| field(l, f))
                .max()
                .unwrap_or(0)
        };
        say(&format!(
            "[counters] {} P={}: per process after init: puts={} fences={} gets={} queries={} \
             put_bytes<={} get_bytes<={}; after a ring exchange: gets<={} (= peers contacted)",
            job.launcher.name(),
            job.ranks,
            max("init", "puts"),
            max("init", "fences"),
            max("init", "gets"),
            max("init", "queries"),
            max("init", "put_bytes"),
            max("init", "get_bytes"),
            max("ring", "gets"),
        ));
    }
}

/// Pids the ranks printed as `pid=N`.
fn pids(stdout: &str) -> Vec<u32> {
    stdout
        .lines()
        .filter_map(|l| {
            l.rsplit_once("pid=")
                .and_then(|(_, p)| p.trim().parse().ok())
        })
        .collect()
}

// A second `World::init` while the first World lives is refused with an
// error that says why (before: the launcher's "rank_1_is_already_connected"
// under onesided-run), and the first World still works.
spmd_test!(
    second_init_is_refused_while_the_first_lives,
    jobs = common::matrix_one_provider(&[2]),
    || {
        let world = World::init().expect("init");
        match World::init() {
            Ok(_) => panic!("a second World::init succeeded"),
            Err(e) => {
                assert_eq!(e.kind(), onesided::ErrorKind::InvalidArgument, "{e}");
                assert!(e.to_string().contains("already joined"), "{e}");
            }
        }
        let mut all = world.allgather(&[world.rank() as u64]).expect("allgather");
        all.sort_unstable();
        assert_eq!(all, (0..world.size() as u64).collect::<Vec<_>>());
        world.finalize().expect("finalize");
    }
);

// A rank killed by SIGKILL ends the job under every launcher (srun with
// --kill-on-bad-exit, mpirun's default, Hydra, onesided-run): the launcher
// exits with a failure and no rank is left running.
#[test]
fn killed_rank_ends_the_job() {
    let name = test_name(module_path!(), "killed_rank_ends_the_job");
    if is_child(&name) {
        let boot = onesided::bootstrap::init().unwrap();
        println!("pid={}", std::process::id());
        boot.barrier().unwrap();
        if boot.rank() == 1 {
            let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGKILL);
        }
        let _ = boot.barrier(); // never completes: rank 1 is gone
                                // A launcher that let the others through would be caught here.
        std::thread::sleep(Duration::from_secs(600));
        return;
    }
    for launcher in common::launchers() {
        let job = common::Job {
            launcher,
            ranks: 3,
            provider: common::providers().remove(0),
            direct: false,
        };
        let out = run_with_limit(job_command(&name, &job), Duration::from_secs(60));
        let status = out
            .status
            .unwrap_or_else(|| panic!("{job}: the job did not end\n{}", out.tail(40)));
        assert!(!status.success(), "{job}: succeeded\n{}", out.tail(40));
        let pids = pids(&out.stdout);
        assert_eq!(pids.len(), 3, "{job}: {}", out.tail(40));
        let alive = wait_gone(&pids, Duration::from_secs(10));
        assert!(alive.is_empty(), "{job}: ranks still alive: {alive:?}");
        say(&format!(
            "[harness] killed_rank_ends_the_job: {job}: ended ({status}) in {:.2} s, no rank left",
            out.elapsed.as_secs_f64()
        ));
    }
}

// `World::abort(code)` from one rank ends the whole job under every
// launcher, while the other ranks wait for it in a barrier (whose own
// timeout is far away): the launcher is asked to end the job (PMI-1 and
// PMI-2 `cmd=abort`, `PMIx_Abort`), so it ends even where a rank's failed
// exit alone would not — `onesided-run --keep-going` and `srun` with
// `--kill-on-bad-exit=0`, which this test uses; Hydra and mpirun end a job
// on a failed rank anyway. The launcher exits with a failure (under
// onesided-run with the abort's code), and no rank is left running.
#[test]
fn abort_ends_the_job_under_every_launcher() {
    let name = test_name(module_path!(), "abort_ends_the_job_under_every_launcher");
    if is_child(&name) {
        let world = World::init().expect("init");
        println!("pid={}", std::process::id());
        world.barrier().expect("barrier");
        if world.rank() == 1 {
            world.abort(7);
        }
        // Rank 1 never arrives; the launcher must end us first.
        let r = world.barrier();
        println!(
            "rank {} was not ended by the abort: barrier {r:?}",
            world.rank()
        );
        return;
    }
    let exe = std::env::current_exe().expect("current test executable");
    for launcher in common::launchers() {
        let mut cmd = common::launcher_command_ending_on_failure(launcher, 3, &exe, false);
        cmd.args(common::child_args(&name))
            .env("ONESIDED_TEST_CHILD", &name)
            .env("ONESIDED_TIMEOUT", "120");
        common::select_provider(&mut cmd, &common::providers().remove(0));
        let out = run_with_limit(cmd, Duration::from_secs(60));
        let status = out.status.unwrap_or_else(|| {
            panic!("{}: the job did not end\n{}", launcher.name(), out.tail(40))
        });
        assert!(
            !status.success(),
            "{}: succeeded\n{}",
            launcher.name(),
            out.tail(40)
        );
        if launcher == common::Launcher::OnesidedRun {
            assert_eq!(status.code(), Some(7), "{}", out.tail(40));
        }
        assert!(
            !out.stdout.contains("was not ended"),
            "{}: {}",
            launcher.name(),
            out.tail(40)
        );
        let pids = pids(&out.stdout);
        assert_eq!(pids.len(), 3, "{}: {}", launcher.name(), out.tail(40));
        let alive = wait_gone(&pids, Duration::from_secs(10));
        assert!(
            alive.is_empty(),
            "{}: ranks still alive: {alive:?}",
            launcher.name()
        );
        say(&format!(
            "[harness] abort_ends_the_job_under_every_launcher: {} -n 3: ended ({status}) in {:.2} s, no rank left",
            launcher.name(),
            out.elapsed.as_secs_f64()
        ));
    }
}

// Ending `onesided-run` (Ctrl-C, `kill`, a batch system's SIGTERM) ends its
// ranks, also those that never joined the job (which have no lifeline to
// notice the launcher is gone): they get the signal, the launcher exits
// with 128 + the signal, and nothing is left running.
#[test]
fn signalled_launcher_ends_its_ranks() {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;
    use std::time::Instant;

    use nix::sys::signal::{kill, Signal};
    use nix::unistd::Pid;

    let name = test_name(module_path!(), "signalled_launcher_ends_its_ranks");
    if is_child(&name) {
        println!("pid={}", std::process::id());
        // Never joins the job: only the launcher can end this rank.
        loop {
            std::thread::park();
        }
    }
    for sig in [Signal::SIGTERM, Signal::SIGINT, Signal::SIGHUP] {
        let mut cmd = common::onesided_run_command(&name, 2, &[]);
        cmd.stdout(Stdio::piped()).stderr(Stdio::null());
        let mut launcher = cmd.spawn().expect("starting onesided-run");
        let out = launcher.stdout.take().expect("piped stdout");
        let mut lines = BufReader::new(out).lines();
        let mut ranks = Vec::new();
        while ranks.len() < 2 {
            match lines.next() {
                Some(Ok(l)) => ranks.extend(pids(&l)),
                _ => break,
            }
        }
        assert_eq!(ranks.len(), 2, "{sig}: the ranks did not start");
        kill(Pid::from_raw(launcher.id() as i32), sig).expect("signalling the launcher");
        let start = Instant::now();
        let status = common::wait_until(&mut launcher, start + Duration::from_secs(30));
        if status.is_none() {
            common::stop(&mut launcher);
        }
        let alive = wait_gone(&ranks, Duration::from_secs(10));
        for &pid in &alive {
            // Not left behind when the test fails.
            let _ = kill(Pid::from_raw(pid as i32), Signal::SIGKILL);
        }
        assert_eq!(
            status.and_then(|s| s.code()),
            Some(128 + sig as i32),
            "{sig}: launcher ended with {status:?}"
        );
        assert!(alive.is_empty(), "{sig}: ranks still alive: {alive:?}");
        say(&format!(
            "[harness] signalled_launcher_ends_its_ranks: {sig}: launcher exit {} in {:.2} s, no rank left",
            128 + sig as i32,
            start.elapsed().as_secs_f64()
        ));
    }
}

/// Runs this test binary's `name` alone with `env`; returns its output.
fn alone_with(name: &str, env: &[(&str, &str)]) -> common::Output {
    let mut cmd = child_command(name);
    for (k, v) in env {
        cmd.env(k, v);
    }
    run_with_limit(cmd, Duration::from_secs(60))
}

// The environment of a launcher we cannot speak is an error naming it,
// never a singleton: a PMIx environment whose server is unreachable, an
// Open MPI job without PMIx, a multi-task srun step without PMI.
#[test]
fn foreign_launcher_environments_are_refused() {
    let name = test_name(module_path!(), "foreign_launcher_environments_are_refused");
    if is_child(&name) {
        match onesided::bootstrap::init() {
            Ok(b) => println!("joined as {} rank {} of {}", b.name(), b.rank(), b.size()),
            Err(e) => println!("refused: {e}"),
        }
        return;
    }
    let cases: &[(&[(&str, &str)], &str)] = &[
        (
            &[
                ("PMIX_NAMESPACE", "onesided-test-nowhere"),
                ("PMIX_RANK", "0"),
                ("PMIX_SERVER_URI41", "pmix-server.1;tcp4://127.0.0.1:1"),
                ("PMIX_SERVER_URI4", "pmix-server.1;tcp4://127.0.0.1:1"),
                ("PMIX_SERVER_URI3", "pmix-server.1;tcp4://127.0.0.1:1"),
                ("PMIX_SERVER_URI2", "pmix-server.1;tcp4://127.0.0.1:1"),
            ],
            if onesided::bootstrap::pmix_build().starts_with("PMIx") {
                "refused: bootstrap (pmix): PMIx_Init failed"
            } else {
                "PMIx support not built"
            },
        ),
        (
            &[("OMPI_COMM_WORLD_SIZE", "4"), ("OMPI_COMM_WORLD_RANK", "1")],
            "refused: bootstrap (open-mpi): this process was started by Open MPI",
        ),
        (
            &[
                ("SLURM_STEP_NUM_TASKS", "4"),
                ("SLURM_PROCID", "1"),
                ("SLURM_STEP_ID", "0"),
            ],
            "refused: bootstrap (slurm): this process is task 1 of a 4-task srun step",
        ),
        (&[], "joined as singleton rank 0 of 1"),
    ];
    for (env, want) in cases {
        let out = alone_with(&name, env);
        assert!(
            out.status.is_some_and(|s| s.success()) && out.stdout.contains(want),
            "{env:?}: want {want:?}\n{}",
            out.tail(20)
        );
        say(&format!("[harness] {env:?}: {want}"));
    }
}

// Under a real Slurm: `srun --mpi=none -n 2` gives no PMI, and each task
// fails with the explanation instead of running as rank 0 of 1.
#[test]
fn srun_without_pmi_is_refused() {
    let name = test_name(module_path!(), "srun_without_pmi_is_refused");
    if is_child(&name) {
        let e = onesided::World::init()
            .err()
            .expect("init succeeded without PMI");
        println!("refused: {e}");
        return;
    }
    let launchers = common::launchers();
    if !launchers
        .iter()
        .any(|l| matches!(l, common::Launcher::SrunPmix | common::Launcher::SrunPmi2))
    {
        say("SKIP: srun_without_pmi_is_refused: no srun launcher in ONESIDED_TEST_LAUNCHERS (scripts/slurm-test.sh runs it)");
        return;
    }
    let srun = common::tool_path("ONESIDED_SRUN", "srun").expect("srun");
    let mut cmd = std::process::Command::new(srun);
    cmd.args(["-O", "--quiet", "--mpi=none", "-n", "2"])
        .arg(std::env::current_exe().unwrap())
        .args(common::child_args(&name))
        .env("ONESIDED_TEST_CHILD", &name);
    let out = run_with_limit(cmd, Duration::from_secs(60));
    assert!(out.status.is_some(), "timed out\n{}", out.tail(20));
    let refused = out
        .stdout
        .matches("refused: bootstrap (slurm): this process is task")
        .count();
    assert_eq!(refused, 2, "{}", out.tail(20));
    say("[harness] srun --mpi=none -n 2: both tasks refused with the Slurm explanation");
}

/// Idle connections to onesided-run's socket (issue 12, item 8): each rank
/// opens 150 and leaves them open, silent, before it starts; the launcher
/// drops the oldest unauthenticated ones instead of refusing the ranks, so
/// the job starts and runs.
#[test]
fn idle_connections_do_not_keep_ranks_out() {
    let name = test_name(module_path!(), "idle_connections_do_not_keep_ranks_out");
    if is_child(&name) {
        let addr = std::env::var("ONESIDED_LAUNCHER_ADDR").expect("launcher address");
        let idle: Vec<_> = (0..150)
            .filter_map(|_| std::os::unix::net::UnixStream::connect(&addr).ok())
            .collect();
        assert!(idle.len() >= 100, "only {} idle connections", idle.len());
        let world = World::init().expect("init with idle connections open");
        world.barrier().expect("barrier");
        drop(idle);
        common::child_done();
        return;
    }
    let out = common::run_with_limit(
        common::onesided_run_command(&name, 3, &[]),
        common::job_timeout(),
    );
    let passed = out.stdout.matches("test result: ok. 1 passed").count();
    assert!(
        out.status.is_some_and(|s| s.success()) && passed == 3,
        "{passed} of 3 ranks passed\n{}",
        out.tail(30)
    );
}
