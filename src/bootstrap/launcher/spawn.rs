//! Starting the ranks, watching them, and ending the job.
//!
//! The launcher polls its children every [`POLL`] (a launcher-internal
//! detail, not a synchronisation between processes). The first rank that
//! exits non-zero or by a signal fails the job: it is reported on stderr with
//! its rank, pid and how it ended, the other ranks get SIGTERM, and SIGKILL
//! after [`GRACE`]; the launcher exits with the rank's code (128 + signal
//! number for a signal). `--timeout` ends all ranks the same way and exits
//! with [`super::TIMEOUT_EXIT_CODE`].

use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use super::output::{forward, Target};
use super::{ENV_ADDR, ENV_PROVIDER, ENV_RANK, ENV_SIZE, ENV_TOKEN, TIMEOUT_EXIT_CODE};
use crate::error::{Error, Result};

/// How often the launcher looks at its children.
const POLL: Duration = Duration::from_millis(10);
/// Time between SIGTERM and SIGKILL when ending ranks.
const GRACE: Duration = Duration::from_secs(2);
/// How long to wait for output after the last rank exited (a rank's own
/// children may hold its pipes open).
const DRAIN: Duration = Duration::from_secs(2);
/// Variables of a launcher above us, which must not reach our ranks.
const FOREIGN: &[&str] = &["PMI_FD", "PMI_PORT", "PMI_ID", "PMI_RANK", "PMI_SIZE"];

/// What to start.
pub struct JobSpec<'a> {
    pub size: usize,
    pub command: &'a [String],
    pub provider: Option<&'a str>,
    pub addr: PathBuf,
    pub token: &'a str,
    pub timeout: Option<Duration>,
    /// Let the other ranks run on after one failed (`--keep-going`).
    pub keep_going: bool,
    /// A signal the launcher received (0: none): ends the job.
    pub signal: &'a AtomicUsize,
    /// A rank's abort request (`World::abort`): ends the job with its code,
    /// `--keep-going` or not.
    pub aborted: &'a super::server::Aborted,
}

struct Rank {
    child: Child,
    status: Option<ExitStatus>,
}

/// Starts every rank and waits for the job to end; returns the exit code.
pub fn run_job(job: &JobSpec<'_>) -> Result<i32> {
    let (done_tx, done_rx) = mpsc::channel();
    let mut ranks: Vec<Rank> = Vec::with_capacity(job.size);
    let mut streams = 0;
    for r in 0..job.size {
        let child = match start(job, r) {
            Ok(c) => c,
            Err(e) => {
                terminate(&mut ranks);
                return Err(e);
            }
        };
        let mut rank = Rank {
            child,
            status: None,
        };
        if let Some(out) = rank.child.stdout.take() {
            forward(r, out, Target::Stdout, done_tx.clone())
                .map_err(|e| Error::io("starting an output thread", e))?;
            streams += 1;
        }
        if let Some(err) = rank.child.stderr.take() {
            forward(r, err, Target::Stderr, done_tx.clone())
                .map_err(|e| Error::io("starting an output thread", e))?;
            streams += 1;
        }
        ranks.push(rank);
    }
    drop(done_tx);
    let code = watch(job, &mut ranks);
    let deadline = Instant::now() + DRAIN;
    for _ in 0..streams {
        let left = deadline.saturating_duration_since(Instant::now());
        if done_rx.recv_timeout(left).is_err() {
            break;
        }
    }
    Ok(code)
}

fn start(job: &JobSpec<'_>, rank: usize) -> Result<Child> {
    let (program, args) = job
        .command
        .split_first()
        .ok_or_else(|| Error::bootstrap("onesided-run", "no program given"))?;
    let mut cmd = Command::new(program);
    cmd.args(args)
        .env(ENV_ADDR, &job.addr)
        .env(ENV_TOKEN, job.token)
        .env(ENV_RANK, rank.to_string())
        .env(ENV_SIZE, job.size.to_string())
        .stdin(if rank == 0 {
            Stdio::inherit()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for var in FOREIGN {
        cmd.env_remove(var);
    }
    if let Some(p) = job.provider {
        cmd.env(ENV_PROVIDER, p);
    }
    let child = cmd
        .spawn()
        .map_err(|e| Error::io(format!("starting rank {rank} ({program})"), e))?;
    tracing::debug!(rank, pid = child.id(), "onesided-run: started");
    Ok(child)
}

/// Waits for all ranks, or the first failure, or the timeout.
fn watch(job: &JobSpec<'_>, ranks: &mut [Rank]) -> i32 {
    let start = Instant::now();
    let mut first_failure: Option<i32> = None;
    loop {
        let mut running = 0;
        let signal = job.signal.load(Ordering::Acquire);
        if signal != 0 {
            let sig = i32::try_from(signal)
                .ok()
                .and_then(|s| Signal::try_from(s).ok())
                .unwrap_or(Signal::SIGTERM);
            eprintln!(
                "onesided-run: received {}; ending all ranks",
                sig.as_str()
            );
            terminate_with(ranks, sig);
            return 128 + sig as i32;
        }
        if let Some((r, code)) = job.aborted.get() {
            eprintln!("onesided-run: rank {r} aborted the job (exit code {code}); ending all ranks");
            terminate(ranks);
            return code;
        }
        for (r, rank) in ranks.iter_mut().enumerate() {
            if rank.status.is_some() {
                continue;
            }
            match rank.child.try_wait() {
                Ok(Some(status)) => {
                    rank.status = Some(status);
                    if !status.success() && job.keep_going {
                        let pid = rank.child.id();
                        eprintln!(
                            "onesided-run: rank {r} (pid {pid}) {}; the others run on (--keep-going)",
                            describe(status)
                        );
                        first_failure.get_or_insert(
                            status
                                .code()
                                .or_else(|| status.signal().map(|s| 128 + s))
                                .unwrap_or(1),
                        );
                    } else if !status.success() {
                        let pid = rank.child.id();
                        eprintln!(
                            "onesided-run: rank {r} (pid {pid}) {}; terminating the other ranks",
                            describe(status)
                        );
                        terminate(ranks);
                        return status
                            .code()
                            .or_else(|| status.signal().map(|s| 128 + s))
                            .unwrap_or(1);
                    }
                }
                Ok(None) => running += 1,
                Err(e) => {
                    eprintln!("onesided-run: cannot wait for rank {r}: {e}; terminating all ranks");
                    terminate(ranks);
                    return 1;
                }
            }
        }
        if running == 0 {
            return first_failure.unwrap_or(0);
        }
        if let Some(t) = job.timeout {
            if start.elapsed() >= t {
                eprintln!(
                    "onesided-run: timeout after {} s with {running} rank(s) still running; terminating all ranks",
                    t.as_secs()
                );
                terminate(ranks);
                return TIMEOUT_EXIT_CODE;
            }
        }
        std::thread::sleep(POLL);
    }
}

/// "exited with code 3" / "was killed by signal 9 (SIGKILL)".
pub fn describe(status: ExitStatus) -> String {
    if let Some(code) = status.code() {
        return format!("exited with code {code}");
    }
    match status.signal() {
        Some(s) => {
            let name = Signal::try_from(s).map(|s| s.as_str()).unwrap_or("unknown");
            format!("was killed by signal {s} ({name})")
        }
        None => format!("ended with status {status}"),
    }
}

/// SIGTERM to every rank still running, SIGKILL to those alive after
/// [`GRACE`]; reaps them all.
fn terminate(ranks: &mut [Rank]) {
    terminate_with(ranks, Signal::SIGTERM)
}

/// `first` to every rank still running, SIGKILL to those alive after
/// [`GRACE`]; reaps them all.
fn terminate_with(ranks: &mut [Rank], first: Signal) {
    let alive =
        |rank: &mut Rank| rank.status.is_none() && matches!(rank.child.try_wait(), Ok(None));
    for rank in ranks.iter_mut() {
        if alive(rank) {
            // The child is not reaped yet, so its pid cannot have been reused.
            let pid = Pid::from_raw(rank.child.id() as i32);
            let _ = kill(pid, first);
        }
    }
    let deadline = Instant::now() + GRACE;
    while Instant::now() < deadline && ranks.iter_mut().any(alive) {
        std::thread::sleep(POLL);
    }
    for rank in ranks.iter_mut() {
        if rank.status.is_none() {
            let _ = rank.child.kill();
            rank.status = rank.child.wait().ok();
        }
    }
}
