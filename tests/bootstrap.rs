//! Bootstrap tests with real processes under real launchers.

#[macro_use]
mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use common::{child_command, is_child, onesided_run_command, run_with_limit, test_name, wait_gone};
use onesided::bootstrap::{self, launcher, Bootstrap, MAX_VALUE_LEN};

fn env_usize(var: &str) -> usize {
    std::env::var(var)
        .unwrap_or_else(|_| panic!("{var} not set"))
        .parse()
        .unwrap()
}

/// A value of maximal length that still says whose it is.
fn value_of(rank: usize) -> String {
    let head = format!("rank-{rank}-");
    format!("{head}{}", "x".repeat(MAX_VALUE_LEN - head.len()))
}

// (a) Every rank puts, barrier, every rank reads every rank's key, also from
// another thread (the client is shared between threads).
spmd_test!(
    kvs_exchange,
    jobs = common::matrix_one_provider(&[2, 4]),
    || {
        let boot = bootstrap::init().expect("bootstrap init");
        assert_eq!(boot.name(), common::expected_bootstrap());
        assert_eq!(boot.size(), env_usize("ONESIDED_TEST_RANKS"));
        let (rank, size) = (boot.rank(), boot.size());
        assert!(rank < size);
        boot.put(&format!("k-{rank}"), &value_of(rank)).unwrap();
        boot.put(&format!("small-{rank}"), "").unwrap();
        boot.barrier().unwrap();
        let boot: std::sync::Arc<dyn Bootstrap> = boot.into();
        let other = std::sync::Arc::clone(&boot);
        let reader = std::thread::spawn(move || {
            for peer in (0..size).rev() {
                assert_eq!(other.get(&format!("k-{peer}")).unwrap(), value_of(peer));
            }
        });
        for peer in 0..size {
            assert_eq!(boot.get(&format!("k-{peer}")).unwrap(), value_of(peer));
            assert_eq!(boot.get(&format!("small-{peer}")).unwrap(), "");
        }
        reader.join().unwrap();
        assert!(boot.get("never-put").is_err());
        let err = boot.put("bad key", "v").unwrap_err().to_string();
        assert!(err.contains("bad key"), "{err}");
        assert!(boot.put("k", &"v".repeat(MAX_VALUE_LEN + 1)).is_err());
        boot.barrier().unwrap();
        println!("rank {rank} of {size} via {}: ok", boot.name());
    }
);

// (b) Without a launcher the process is a singleton.
#[test]
fn singleton_without_launcher() {
    let name = test_name(module_path!(), "singleton_without_launcher");
    if is_child(&name) {
        let boot = bootstrap::init().unwrap();
        assert_eq!((boot.rank(), boot.size(), boot.name()), (0, 1, "singleton"));
        boot.put("mine", "v0").unwrap();
        boot.barrier().unwrap();
        assert_eq!(boot.get("mine").unwrap(), "v0");
        assert!(boot.get("other").is_err());
        return;
    }
    let out = run_with_limit(child_command(&name), common::job_timeout());
    assert!(out.status.is_some_and(|s| s.success()), "{}", out.tail(40));
}

/// Pids the ranks printed as `pid=N` (libtest may put "test name ... " first).
fn pids(stdout: &str) -> Vec<u32> {
    stdout
        .lines()
        .filter_map(|l| {
            l.rsplit_once("pid=")
                .and_then(|(_, p)| p.trim().parse().ok())
        })
        .collect()
}

// (c) A rank exiting with code 3 fails the job; the others, blocked in a
// barrier, are killed.
#[test]
fn failing_rank_fails_the_job() {
    let name = test_name(module_path!(), "failing_rank_fails_the_job");
    if is_child(&name) {
        let boot = bootstrap::init().unwrap();
        println!("pid={}", std::process::id());
        boot.barrier().unwrap();
        if boot.rank() == 1 {
            std::process::exit(3);
        }
        let _ = boot.barrier(); // never completes: rank 1 is gone
        unreachable!("barrier completed without rank 1");
    }
    let out = run_with_limit(onesided_run_command(&name, 3, &[]), common::job_timeout());
    let status = out
        .status
        .unwrap_or_else(|| panic!("launcher timed out\n{}", out.tail(40)));
    assert_eq!(status.code(), Some(3), "{}", out.tail(40));
    assert!(
        out.stderr.contains("rank 1 (pid") && out.stderr.contains("exited with code 3"),
        "{}",
        out.tail(40)
    );
    let pids = pids(&out.stdout);
    assert_eq!(pids.len(), 3, "{}", out.tail(40));
    let alive = wait_gone(&pids, Duration::from_secs(10));
    assert!(alive.is_empty(), "ranks still alive: {alive:?}");
}

// (d) SIGKILL of the launcher ends the ranks through the lifeline.
#[test]
fn ranks_exit_when_launcher_is_killed() {
    let name = test_name(module_path!(), "ranks_exit_when_launcher_is_killed");
    if is_child(&name) {
        let boot = bootstrap::init().unwrap();
        println!("pid={}", std::process::id());
        boot.barrier().unwrap();
        loop {
            std::thread::park(); // only the lifeline can end us
        }
    }
    // A launcher killed by SIGKILL leaves its socket directory behind: give it
    // a TMPDIR of our own and remove that at the end.
    let tmp = std::env::temp_dir().join(format!("onesided-test-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    let mut cmd = onesided_run_command(&name, 2, &[]);
    cmd.env("TMPDIR", &tmp)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null());
    let mut launcher = cmd.spawn().unwrap();
    let stdout = launcher.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let deadline = Instant::now() + common::job_timeout();
    let mut found = Vec::new();
    while found.len() < 2 {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) => found.extend(pids(&line)),
            Err(_) => {
                let _ = launcher.kill();
                panic!("ranks did not report their pids (got {found:?})");
            }
        }
    }
    launcher.kill().unwrap(); // SIGKILL
    launcher.wait().unwrap();
    let alive = wait_gone(&found, Duration::from_secs(20));
    let _ = std::fs::remove_dir_all(&tmp);
    assert!(alive.is_empty(), "ranks survived their launcher: {alive:?}");
}

/// Sends `line` raw and returns the answer lines until the server closes
/// (at most `n` lines).
fn raw(stream: &mut UnixStream, line: &[u8], n: usize) -> Vec<String> {
    let _ = stream.write_all(line); // the server may close early
    let mut r = BufReader::new(stream.try_clone().unwrap());
    let mut out = Vec::new();
    for _ in 0..n {
        let mut l = String::new();
        if r.read_line(&mut l).unwrap_or(0) == 0 {
            break;
        }
        out.push(l.trim_end().to_string());
    }
    out
}

fn closed(stream: &mut UnixStream) -> bool {
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    matches!(stream.read(&mut [0u8; 64]), Ok(0) | Err(_))
}

// (e) Wrong tokens, bad ranks, duplicates and garbage are refused; the
// server keeps serving the real rank.
#[test]
fn launcher_rejects_bad_clients() {
    let name = test_name(module_path!(), "launcher_rejects_bad_clients");
    if !is_child(&name) {
        let out = run_with_limit(onesided_run_command(&name, 1, &[]), common::job_timeout());
        assert!(out.status.is_some_and(|s| s.success()), "{}", out.tail(40));
        return;
    }
    let addr = std::env::var(launcher::ENV_ADDR).unwrap();
    let token = std::env::var(launcher::ENV_TOKEN).unwrap();
    let wrong = "0".repeat(token.len());
    let e = launcher::client::join(&addr, &wrong, 0, 1)
        .unwrap_err()
        .to_string();
    assert!(e.contains("wrong_job_token"), "{e}");
    let e = launcher::client::open_lifeline(&addr, &wrong, 0)
        .unwrap_err()
        .to_string();
    assert!(e.contains("wrong_job_token"), "{e}");

    let boot = bootstrap::init().unwrap();
    boot.put("alive", "yes").unwrap();
    boot.barrier().unwrap();
    let connect = || UnixStream::connect(&addr).unwrap();

    let mut s = connect();
    let a = raw(
        &mut s,
        format!("cmd=initack pmiid=0 token={wrong}\n").as_bytes(),
        4,
    );
    assert_eq!(a, ["cmd=initack rc=-1 msg=wrong_job_token"]);
    let mut s = connect();
    let a = raw(&mut s, b"cmd=initack pmiid=0\n", 4);
    assert!(a[0].contains("rc=-1") && a[0].contains("token"), "{a:?}");
    let mut s = connect();
    let a = raw(
        &mut s,
        format!("cmd=initack pmiid=7 token={token}\n").as_bytes(),
        4,
    );
    assert!(a[0].contains("rc=-1") && a[0].contains("pmiid_7"), "{a:?}");
    let mut s = connect();
    let a = raw(
        &mut s,
        format!("cmd=initack pmiid=0 token={token}\n").as_bytes(),
        4,
    );
    assert!(a[0].contains("already_connected"), "{a:?}");
    let mut s = connect();
    let a = raw(
        &mut s,
        format!("cmd=lifeline pmiid=0 token={token}\n").as_bytes(),
        4,
    );
    assert!(a[0].contains("already_connected"), "{a:?}");
    let mut s = connect();
    let a = raw(&mut s, b"\xff\xfe garbage\x00\n", 4);
    assert!(a[0].starts_with("cmd=error rc=-1"), "{a:?}");
    let mut s = connect();
    let a = raw(&mut s, &[b'x'; 10_000], 4);
    assert!(a[0].starts_with("cmd=error rc=-1"), "{a:?}");
    assert_eq!(
        boot.get("alive").unwrap(),
        "yes",
        "server broken by bad clients"
    );

    // Authenticated but misbehaving: free our slot first (finalize on drop).
    drop(boot);
    let mut s = connect();
    let a = raw(
        &mut s,
        format!("cmd=initack pmiid=0 token={token}\n").as_bytes(),
        4,
    );
    assert_eq!(a[0], "cmd=initack rc=0", "{a:?}");
    let kvs = raw(&mut s, b"cmd=get_my_kvsname\n", 1)[0].replace("cmd=my_kvsname kvsname=", "");
    let big = "v".repeat(MAX_VALUE_LEN + 1);
    let a = raw(
        &mut s,
        format!("cmd=put kvsname={kvs} key=k value={big}\n").as_bytes(),
        1,
    );
    assert!(a[0].starts_with("cmd=put_result rc=-1"), "{a:?}");
    let a = raw(
        &mut s,
        format!("cmd=put kvsname={kvs} key=a=b value=v\n").as_bytes(),
        1,
    );
    assert!(a[0].starts_with("cmd=put_result rc=-1"), "{a:?}");
    let a = raw(
        &mut s,
        format!("cmd=get kvsname={kvs} key=nope\n").as_bytes(),
        1,
    );
    assert!(a[0].starts_with("cmd=get_result rc=-1"), "{a:?}");
    let a = raw(
        &mut s,
        format!("cmd=get kvsname={kvs} key=alive\n").as_bytes(),
        1,
    );
    assert_eq!(a[0], "cmd=get_result rc=0 msg=success value=yes");
    let a = raw(&mut s, b"cmd=put kvsname=other key=k value=v\n", 1);
    assert!(a[0].starts_with("cmd=error rc=-1"), "{a:?}");
    assert!(closed(&mut s), "connection left open after a wrong kvsname");
    let mut s = connect();
    raw(
        &mut s,
        format!("cmd=initack pmiid=0 token={token}\n").as_bytes(),
        4,
    );
    let a = raw(&mut s, b"cmd=spawn_everything\n", 1);
    assert!(a[0].starts_with("cmd=error rc=-1"), "{a:?}");
    assert!(
        closed(&mut s),
        "connection left open after an unknown command"
    );
}

// (f) Output is forwarded line by line with a rank prefix, to the right stream.
#[test]
fn output_is_prefixed() {
    let name = test_name(module_path!(), "output_is_prefixed");
    if is_child(&name) {
        let boot = bootstrap::init().unwrap();
        let r = boot.rank();
        println!("hello stdout from {r}");
        eprintln!("hello stderr from {r}");
        print!("unterminated from {r}");
        std::io::stdout().flush().unwrap();
        // Exit before libtest prints its verdict, so that the last line
        // really lacks its newline.
        std::process::exit(0);
    }
    let out = run_with_limit(onesided_run_command(&name, 3, &[]), common::job_timeout());
    assert!(out.status.is_some_and(|s| s.success()), "{}", out.tail(40));
    // libtest may put "test name ... " before the first line of the test.
    let line_of = |text: &str, what: &str| -> String {
        let found = text.lines().find(|l| l.contains(what));
        found
            .unwrap_or_else(|| panic!("no line with {what:?}\n{}", out.tail(40)))
            .to_string()
    };
    for r in 0..3 {
        let prefix = format!("[{r}] ");
        assert!(line_of(&out.stdout, &format!("hello stdout from {r}")).starts_with(&prefix));
        assert!(line_of(&out.stderr, &format!("hello stderr from {r}")).starts_with(&prefix));
        let last = format!("[{r}] unterminated from {r}\n");
        assert!(out.stdout.contains(&last), "{}", out.tail(40));
    }
    assert!(
        !out.stdout.contains("hello stderr"),
        "stderr leaked into stdout"
    );
    for line in out.stdout.lines().chain(out.stderr.lines()) {
        let ok = ["[0] ", "[1] ", "[2] "].iter().any(|p| line.starts_with(p));
        assert!(ok, "line without rank prefix: {line:?}");
    }
}

// `--timeout` ends a job that would never finish, and says so.
#[test]
fn launcher_timeout_ends_the_job() {
    let name = test_name(module_path!(), "launcher_timeout_ends_the_job");
    if is_child(&name) {
        let _boot = bootstrap::init().unwrap();
        println!("pid={}", std::process::id());
        loop {
            std::thread::park();
        }
    }
    let cmd = onesided_run_command(&name, 2, &["--timeout", "1"]);
    let out = run_with_limit(cmd, common::job_timeout());
    let status = out
        .status
        .unwrap_or_else(|| panic!("launcher ignored --timeout\n{}", out.tail(40)));
    assert_eq!(
        status.code(),
        Some(launcher::TIMEOUT_EXIT_CODE),
        "{}",
        out.tail(40)
    );
    assert!(out.stderr.contains("timeout after 1 s"), "{}", out.tail(40));
    let pids = pids(&out.stdout);
    assert_eq!(pids.len(), 2, "{}", out.tail(40));
    let alive = wait_gone(&pids, Duration::from_secs(10));
    assert!(alive.is_empty(), "ranks still alive: {alive:?}");
}
