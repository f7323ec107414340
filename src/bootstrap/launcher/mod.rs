//! `onesided-run`: our own launcher for N local processes.
//!
//! The launcher ([`run`]) creates a private directory (mode 0700) under
//! `$TMPDIR`, draws a random 256-bit job token, listens on a Unix socket in
//! that directory ([`server`]), starts the ranks ([`spawn`]) with
//!
//! | variable | meaning |
//! | --- | --- |
//! | `ONESIDED_LAUNCHER_ADDR` | path of the Unix socket |
//! | `ONESIDED_JOB_TOKEN` | the token, 64 hex digits |
//! | `ONESIDED_RANK`, `ONESIDED_SIZE` | rank and job size |
//! | `ONESIDED_PROVIDER` | only with `--provider` |
//!
//! (everything else of its own environment is passed through, except `PMI_*`
//! which would point at a launcher above us), forwards their output with a
//! `[rank] ` prefix ([`output`]) and waits. The first rank to fail (non-zero
//! exit or signal) makes the launcher kill the others and exit non-zero.
//!
//! A rank ([`client`]) opens two connections. Each starts with an
//! authentication line carrying the token and the rank:
//! * `cmd=initack pmiid=<rank> token=<hex>`: the key-value connection, which
//!   then speaks plain PMI-1 (see [`super::pmi1`]);
//! * `cmd=lifeline pmiid=<rank> token=<hex>`: the lifeline. The server answers
//!   `cmd=lifeline_ack rc=0` and never writes again; a thread in the rank
//!   blocks reading it. End of stream means the launcher is gone (even killed
//!   by SIGKILL, since the kernel closes its sockets): the rank prints one line
//!   to stderr and exits with [`LIFELINE_EXIT_CODE`].

pub mod client;
pub mod output;
pub mod server;
pub mod spawn;

use std::sync::atomic::AtomicUsize;

use std::path::PathBuf;

use crate::error::{Error, Result};

/// Path of the launcher's Unix socket.
pub const ENV_ADDR: &str = "ONESIDED_LAUNCHER_ADDR";
/// The job token a rank presents first on every connection.
pub const ENV_TOKEN: &str = "ONESIDED_JOB_TOKEN";
/// This process's rank.
pub const ENV_RANK: &str = "ONESIDED_RANK";
/// The number of ranks.
pub const ENV_SIZE: &str = "ONESIDED_SIZE";
/// The libfabric provider asked for with `--provider`.
pub const ENV_PROVIDER: &str = "ONESIDED_PROVIDER";

/// Exit code of a rank whose launcher went away.
pub const LIFELINE_EXIT_CODE: i32 = 86;
/// Exit code of the launcher when `--timeout` expired (as `timeout(1)`).
pub const TIMEOUT_EXIT_CODE: i32 = 124;

/// Command line of `onesided-run`.
#[derive(Debug, Clone, clap::Parser)]
#[command(
    name = "onesided-run",
    version,
    about = "Start N local processes of a onesided program"
)]
pub struct Options {
    /// Number of processes (ranks) to start.
    #[arg(short = 'n', long = "np", value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub ranks: u32,
    /// libfabric provider for the ranks (exported as ONESIDED_PROVIDER).
    #[arg(long)]
    pub provider: Option<String>,
    /// Kill everything and fail after this many seconds.
    #[arg(long, value_name = "SECS")]
    pub timeout: Option<u64>,
    /// A rank that fails does not end the job: the others run on and meet
    /// the dead peer (their calls then return errors after
    /// `ONESIDED_TIMEOUT`). For fault testing; the job still exits with the
    /// first failure's code once every rank has exited (or `--timeout`).
    /// A rank's `World::abort` still ends the whole job.
    #[arg(long)]
    pub keep_going: bool,
    /// The program to run, and its arguments.
    #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
    pub command: Vec<String>,
}

/// Runs a job to completion; returns the launcher's exit code.
pub fn run(opts: &Options) -> Result<i32> {
    run_until(opts, &AtomicUsize::new(0))
}

/// As [`run`], ending the job when `signal` becomes non-zero: every rank
/// still running gets that signal, SIGKILL after a grace period, and the
/// launcher's exit code is 128 + the signal (as a shell reports a process
/// the signal ended). `onesided-run` sets it from its SIGINT, SIGTERM and
/// SIGHUP handlers, so that killing the launcher (Ctrl-C, `kill`, a batch
/// system's SIGTERM) ends the ranks too, not only those that joined the
/// job (which end anyway when their lifeline to the launcher breaks).
pub fn run_until(opts: &Options, signal: &AtomicUsize) -> Result<i32> {
    let size = opts.ranks as usize;
    let dir = JobDir::create()?;
    let token = new_token()?;
    let aborted = std::sync::Arc::new(server::Aborted::default());
    let listener = server::Server::bind(&dir.socket(), size, token.clone(), aborted.clone())?;
    let job = spawn::JobSpec {
        size,
        command: &opts.command,
        provider: opts.provider.as_deref(),
        addr: dir.socket(),
        token: &token,
        timeout: opts.timeout.map(std::time::Duration::from_secs),
        keep_going: opts.keep_going,
        signal,
        aborted: &aborted,
    };
    listener.serve_in_background()?;
    spawn::run_job(&job)
    // `dir` is removed here, after every rank has exited.
}

/// 32 random bytes as 64 hex digits.
fn new_token() -> Result<String> {
    let mut bytes = [0u8; 32];
    getrandom::getrandom(&mut bytes).map_err(|e| {
        Error::bootstrap(
            "onesided-run",
            format!("no randomness for the job token: {e}"),
        )
    })?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// The private directory holding the socket; removed on drop.
struct JobDir(PathBuf);

impl JobDir {
    fn create() -> Result<Self> {
        use std::os::unix::fs::DirBuilderExt;
        let mut nonce = [0u8; 8];
        getrandom::getrandom(&mut nonce)
            .map_err(|e| Error::bootstrap("onesided-run", format!("no randomness: {e}")))?;
        let hex: String = nonce.iter().map(|b| format!("{b:02x}")).collect();
        let path = std::env::temp_dir().join(format!("onesided-{}-{hex}", std::process::id()));
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&path)
            .map_err(|e| Error::io(format!("creating job directory {}", path.display()), e))?;
        let dir = JobDir(path);
        // sockaddr_un holds 108 bytes including the terminator.
        if dir.socket().as_os_str().len() > 100 {
            return Err(Error::bootstrap(
                "onesided-run",
                format!(
                    "socket path {} is too long; set TMPDIR to a shorter directory",
                    dir.socket().display()
                ),
            ));
        }
        Ok(dir)
    }

    fn socket(&self) -> PathBuf {
        self.0.join("kvs")
    }
}

impl Drop for JobDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(self.socket());
        let _ = std::fs::remove_dir(&self.0);
    }
}
