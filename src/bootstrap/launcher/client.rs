//! The rank side of `onesided-run`: join the job and hold the lifeline.

use std::io::{BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::sync::OnceLock;

use super::{ENV_ADDR, ENV_RANK, ENV_SIZE, ENV_TOKEN, LIFELINE_EXIT_CODE};
use crate::bootstrap::conn::Conn;
use crate::bootstrap::pmi1::{env_number, InitAck, Pmi1};
use crate::bootstrap::wire;
use crate::error::{Error, Result};

const VIA: &str = "onesided-run";

/// The lifeline is started once per process, by the first successful join.
static LIFELINE: OnceLock<()> = OnceLock::new();

/// Joins the job described by `ONESIDED_LAUNCHER_ADDR`, `ONESIDED_JOB_TOKEN`,
/// `ONESIDED_RANK` and `ONESIDED_SIZE`, and starts the lifeline thread.
pub fn join_from_env() -> Result<Pmi1> {
    let addr = std::env::var(ENV_ADDR).map_err(|e| config(ENV_ADDR, e))?;
    let token = std::env::var(ENV_TOKEN).map_err(|e| config(ENV_TOKEN, e))?;
    let rank: usize = env_number(ENV_RANK)?;
    let size: usize = env_number(ENV_SIZE)?;
    join(&addr, &token, rank, size)
}

/// Joins the job at socket `addr` as `rank` of `size`, presenting `token`.
/// Also starts the lifeline if this process has none yet.
pub fn join(addr: &str, token: &str, rank: usize, size: usize) -> Result<Pmi1> {
    let pmi = retrying(|| {
        let stream = connect(addr)?;
        let init = InitAck {
            id: rank,
            token: Some(token),
        };
        Pmi1::join(Conn::Unix(stream), VIA, Some(init), Some((rank, size)))
    })?;
    if LIFELINE.get().is_none() {
        let lifeline = retrying(|| open_lifeline(addr, token, rank))?;
        if LIFELINE.set(()).is_ok() {
            std::thread::Builder::new()
                .name("onesided-lifeline".into())
                .spawn(move || watch(lifeline, rank))
                .map_err(|e| Error::io("starting the lifeline thread", e))?;
        }
    }
    Ok(pmi)
}

/// Runs `attempt` again while it fails at the connection level (refused,
/// reset or closed before the launcher answered: it sheds connections it
/// cannot serve yet when flooded), with a growing pause, for up to the
/// launcher's authentication timeout; a refusal by the launcher itself
/// (wrong token, rank taken) is returned at once.
fn retrying<T>(mut attempt: impl FnMut() -> Result<T>) -> Result<T> {
    let start = std::time::Instant::now();
    let mut pause = std::time::Duration::from_millis(5);
    loop {
        match attempt() {
            Err(e) if shed(&e) && start.elapsed() < super::server::AUTH_TIMEOUT => {
                std::thread::sleep(pause);
                pause = (pause * 2).min(std::time::Duration::from_millis(250));
            }
            other => return other,
        }
    }
}

/// Whether `e` is the launcher shedding the connection (refused, reset, or
/// closed before it answered) rather than answering.
fn shed(e: &Error) -> bool {
    match e {
        Error::Io { .. } => true,
        Error::Bootstrap { .. } => e.to_string().contains("closed"),
        _ => false,
    }
}

fn connect(addr: &str) -> Result<UnixStream> {
    UnixStream::connect(addr)
        .map_err(|e| Error::io(format!("{VIA}: connecting to launcher at {addr}"), e))
}

/// Opens and authenticates the lifeline connection.
pub fn open_lifeline(addr: &str, token: &str, rank: usize) -> Result<UnixStream> {
    let mut stream = connect(addr)?;
    let line = wire::encode(
        "lifeline",
        &[("pmiid", &rank.to_string()), ("token", token)],
    );
    stream
        .write_all(line.as_bytes())
        .map_err(|e| Error::io(format!("{VIA}: sending the lifeline request"), e))?;
    let mut reader = BufReader::new(
        stream
            .try_clone()
            .map_err(|e| Error::io("cloning the lifeline socket", e))?,
    );
    let answer = wire::read_line(&mut reader)
        .map_err(|e| Error::io(format!("{VIA}: reading the lifeline answer"), e))?
        .ok_or_else(|| Error::bootstrap(VIA, "launcher closed the lifeline at once"))?;
    let m = wire::parse(&answer).map_err(proto)?;
    if m.cmd() != "lifeline_ack" {
        return Err(proto(format!(
            "expected cmd=lifeline_ack, got cmd={}",
            m.cmd()
        )));
    }
    if m.require("rc").map_err(proto)? != "0" {
        return Err(Error::bootstrap(
            VIA,
            format!(
                "launcher refused the lifeline: {}",
                m.check_rc().err().unwrap_or_default()
            ),
        ));
    }
    Ok(stream)
}

/// Blocks until the launcher closes the lifeline, then ends the process.
fn watch(mut stream: UnixStream, rank: usize) {
    let mut buf = [0u8; 256];
    let why = loop {
        match stream.read(&mut buf) {
            Ok(0) => break "the launcher closed the lifeline".to_string(),
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => break format!("the lifeline failed: {e}"),
        }
    };
    // stderr may be a pipe to the dead launcher: ignore write errors.
    let _ = writeln!(
        std::io::stderr(),
        "onesided: rank {rank}: launcher is gone ({why}); exiting with code {LIFELINE_EXIT_CODE}"
    );
    std::process::exit(LIFELINE_EXIT_CODE);
}

fn config(var: &'static str, e: std::env::VarError) -> Error {
    Error::Config {
        var,
        value: String::new(),
        message: e.to_string(),
    }
}

fn proto(message: String) -> Error {
    Error::Protocol {
        peer: format!("{VIA} launcher"),
        message,
    }
}
