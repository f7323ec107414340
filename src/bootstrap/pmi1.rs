//! A client of the PMI-1 "simple" protocol, as served by MPICH's Hydra over
//! `PMI_FD`, by simple PMI servers over `PMI_PORT`, and by our launcher.
//!
//! The conversation (every request one line, every answer one line, see
//! [`super::wire`]):
//!
//! ```text
//! [PMI_PORT / onesided-run only]
//! cmd=initack pmiid=<id> [token=<hex>]     -> cmd=initack [rc=0]
//!                                             cmd=set size=<n>
//!                                             cmd=set rank=<r>
//!                                             cmd=set debug=<d>
//! cmd=init pmi_version=1 pmi_subversion=1  -> cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0
//! cmd=get_maxes                            -> cmd=maxes kvsname_max=256 keylen_max=64 vallen_max=1024
//! cmd=get_my_kvsname                       -> cmd=my_kvsname kvsname=<kvs>
//! cmd=put kvsname=<kvs> key=<k> value=<v>  -> cmd=put_result rc=0 [msg=..]
//! cmd=barrier_in                           -> cmd=barrier_out
//! cmd=get kvsname=<kvs> key=<k>            -> cmd=get_result rc=0 [msg=..] value=<v>
//! cmd=finalize                             -> cmd=finalize_ack
//! ```
//!
//! The `*_max` answers count the C string terminator, so usable lengths are
//! one less (and never more than [`MAX_KEY_LEN`]/[`MAX_VALUE_LEN`]).
//!
//! Every field of every answer is checked; an unexpected answer is an
//! [`Error::Protocol`] naming the field, and the connection is then considered
//! broken (later calls fail at once instead of reading a desynchronised
//! stream). One connection serves the process: a mutex serialises requests,
//! so [`Bootstrap::get`] may be called from any thread (a `get` waits while
//! another thread is inside [`Bootstrap::barrier`]).
//!
//! This is one implementation of [`Bootstrap`]; PMI-2 (also `PMI_FD`, with
//! length-prefixed `cmd=fullinit;...` commands) or PMIx would be siblings
//! selected by [`super::init`], reusing nothing but the trait.

use std::io::{BufReader, Write};
use std::net::TcpStream;
use std::sync::Mutex;

use super::conn::{self, Conn};
use super::stats::{BootstrapStats, Counters};
use super::wire::{self, Message};
use super::{Bootstrap, MAX_KEY_LEN, MAX_VALUE_LEN};
use crate::error::{Error, Result};

/// A joined PMI-1 job.
#[derive(Debug)]
pub struct Pmi1 {
    conn: Mutex<Option<BufReader<Conn>>>,
    rank: usize,
    size: usize,
    kvsname: String,
    key_max: usize,
    value_max: usize,
    via: &'static str,
    counters: Counters,
}

/// The optional `cmd=initack` handshake of `PMI_PORT` and our launcher.
pub(crate) struct InitAck<'a> {
    pub id: usize,
    pub token: Option<&'a str>,
}

impl Pmi1 {
    /// Joins through the socket inherited as `PMI_FD`, rank and size from
    /// `PMI_RANK` and `PMI_SIZE` (Hydra's convention).
    pub fn from_fd_env() -> Result<Self> {
        let fd: i32 = env_number("PMI_FD")?;
        let rank: usize = env_number("PMI_RANK")?;
        let size: usize = env_number("PMI_SIZE")?;
        let fd = conn::adopt_pmi_fd("pmi1", fd)?;
        Self::join(Conn::Fd(fd), "pmi1", None, Some((rank, size)))
    }

    /// Joins through `PMI_PORT` (`host:port`) with the `PMI_ID` handshake.
    pub fn from_port_env() -> Result<Self> {
        let port = std::env::var("PMI_PORT").map_err(|e| Error::Config {
            var: "PMI_PORT",
            value: String::new(),
            message: e.to_string(),
        })?;
        let id: usize = env_number("PMI_ID")?;
        let stream = TcpStream::connect(&port)
            .map_err(|e| Error::io(format!("pmi1: connecting to PMI_PORT={port}"), e))?;
        let _ = stream.set_nodelay(true);
        Self::join(
            Conn::Tcp(stream),
            "pmi1",
            Some(InitAck { id, token: None }),
            None,
        )
    }

    /// Runs the handshake on a connected stream. `expect` is the (rank, size)
    /// known from the environment; with an `initack` the server's `cmd=set`
    /// answers must agree with it.
    pub(crate) fn join(
        conn: Conn,
        via: &'static str,
        initack: Option<InitAck<'_>>,
        expect: Option<(usize, usize)>,
    ) -> Result<Self> {
        let mut c = BufReader::new(conn);
        let (rank, size) = match initack {
            Some(ack) => {
                let got = initack_handshake(&mut c, via, &ack)?;
                if let Some(e) = expect {
                    if e != got {
                        return Err(Error::bootstrap(
                            via,
                            format!(
                                "launcher says rank {} of {}, environment says rank {} of {}",
                                got.0, got.1, e.0, e.1
                            ),
                        ));
                    }
                }
                got
            }
            None => expect.ok_or_else(|| Error::bootstrap(via, "rank and size unknown"))?,
        };
        if size == 0 || rank >= size {
            return Err(Error::bootstrap(
                via,
                format!("rank {rank} is not in 0..{size}"),
            ));
        }
        let m = transact(
            &mut c,
            via,
            "init",
            &[("pmi_version", "1"), ("pmi_subversion", "1")],
            "response_to_init",
        )?;
        check(via, m.check_rc())?;
        let v = check(via, m.require_usize("pmi_version"))?;
        if v != 1 {
            return Err(proto(via, format!("server speaks pmi_version={v}, not 1")));
        }
        let m = transact(&mut c, via, "get_maxes", &[], "maxes")?;
        let kvs_max = limit(via, &m, "kvsname_max")?;
        let key_max = limit(via, &m, "keylen_max")?.min(MAX_KEY_LEN);
        let value_max = limit(via, &m, "vallen_max")?.min(MAX_VALUE_LEN);
        let m = transact(&mut c, via, "get_my_kvsname", &[], "my_kvsname")?;
        let kvsname = check(via, m.require("kvsname"))?.to_string();
        if kvsname.is_empty() || kvsname.len() > kvs_max || kvsname.contains('=') {
            return Err(proto(
                via,
                format!("field 'kvsname' is invalid: '{}'", wire::shorten(&kvsname)),
            ));
        }
        tracing::debug!(via, rank, size, %kvsname, key_max, value_max, "pmi1: joined");
        Ok(Pmi1 {
            conn: Mutex::new(Some(c)),
            rank,
            size,
            kvsname,
            key_max,
            value_max,
            via,
            counters: Counters::default(),
        })
    }

    /// Tells the server this process is done (`cmd=finalize`). Later calls
    /// fail; dropping does this implicitly.
    pub fn finalize(&self) -> Result<()> {
        let mut guard = self.lock()?;
        let Some(mut c) = guard.take() else {
            return Ok(());
        };
        transact(&mut c, self.via, "finalize", &[], "finalize_ack").map(|_| ())
    }

    fn lock(&self) -> Result<std::sync::MutexGuard<'_, Option<BufReader<Conn>>>> {
        self.conn
            .lock()
            .map_err(|_| Error::bootstrap(self.via, "connection lock poisoned by a panic"))
    }

    /// One request/answer under the lock, the answer checked by `validate`.
    /// An I/O error or an [`Error::Protocol`] (from the framing or from
    /// `validate`) drops the connection; other errors (key not found) do not.
    fn call<T>(
        &self,
        cmd: &str,
        fields: &[(&str, &str)],
        answer: &str,
        validate: impl FnOnce(&Message) -> Result<T>,
    ) -> Result<T> {
        let mut guard = self.lock()?;
        let c = guard.as_mut().ok_or_else(|| {
            Error::bootstrap(
                self.via,
                "connection closed (finalized or broken by an earlier error)",
            )
        })?;
        let r = transact(c, self.via, cmd, fields, answer).and_then(|m| validate(&m));
        if matches!(r, Err(Error::Io { .. } | Error::Protocol { .. })) {
            *guard = None;
        }
        r
    }
}

impl Bootstrap for Pmi1 {
    fn rank(&self) -> usize {
        self.rank
    }
    fn size(&self) -> usize {
        self.size
    }
    fn put(&self, key: &str, value: &str) -> Result<()> {
        let bad = |m| Error::InvalidArgument(format!("bootstrap put: {m}"));
        wire::validate_key(key, self.key_max).map_err(bad)?;
        wire::validate_value(value, self.value_max).map_err(bad)?;
        let fields = [
            ("kvsname", self.kvsname.as_str()),
            ("key", key),
            ("value", value),
        ];
        self.call("put", &fields, "put_result", |m| {
            check(self.via, m.require("rc"))?;
            m.check_rc()
                .map_err(|e| Error::bootstrap(self.via, format!("put of key '{key}': {e}")))
        })?;
        self.counters.put(key, value);
        Ok(())
    }
    fn barrier(&self) -> Result<()> {
        self.call("barrier_in", &[], "barrier_out", |m| {
            check(self.via, m.check_rc())
        })?;
        self.counters.fence();
        Ok(())
    }
    fn get(&self, key: &str) -> Result<String> {
        wire::validate_key(key, self.key_max)
            .map_err(|m| Error::InvalidArgument(format!("bootstrap get: {m}")))?;
        let fields = [("kvsname", self.kvsname.as_str()), ("key", key)];
        let r = self.call("get", &fields, "get_result", |m| {
            let rc = check(self.via, m.require("rc"))?;
            if rc != "0" {
                return Err(Error::bootstrap(
                    self.via,
                    format!(
                        "key '{key}' not found (rc={} msg={})",
                        wire::shorten(rc),
                        wire::shorten(m.get("msg").unwrap_or("(none)"))
                    ),
                ));
            }
            let value = check(self.via, m.require("value"))?;
            if value.len() > MAX_VALUE_LEN {
                let n = value.len();
                return Err(proto(
                    self.via,
                    format!("field 'value' of key '{key}' is {n} characters"),
                ));
            }
            Ok(value.to_string())
        });
        let got = r.as_ref().ok().map(|v| v.len());
        if key == super::node::MAPPING_KEY {
            self.counters.query(got);
        } else {
            self.counters.get(got);
        }
        r
    }
    fn abort(&self, code: i32, _msg: &str) {
        // `cmd=abort exitcode=<code>` as MPICH's PMI_Abort sends it, and
        // no answer awaited: Hydra (and onesided-run) end the job instead.
        // The message goes to the log, not on the wire (Hydra's parser
        // takes no free text). Never waits for the connection: another
        // thread may be blocked in a barrier on it (the exit that follows
        // still tells the launcher this rank failed).
        let Ok(mut guard) = self.conn.try_lock() else {
            tracing::debug!(via = self.via, "pmi1: connection busy; abort by exit only");
            return;
        };
        if let Some(c) = guard.as_mut() {
            let line = wire::encode("abort", &[("exitcode", &code.to_string())]);
            if let Err(e) = c.get_mut().write_all(line.as_bytes()) {
                tracing::debug!(via = self.via, "pmi1: sending cmd=abort failed: {e}");
            }
        }
    }
    fn name(&self) -> &'static str {
        self.via
    }
    fn stats(&self) -> BootstrapStats {
        self.counters.snapshot()
    }
}

impl Drop for Pmi1 {
    fn drop(&mut self) {
        if let Err(e) = self.finalize() {
            tracing::debug!(via = self.via, "pmi1: finalize on drop failed: {e}");
        }
    }
}

/// `cmd=initack` and the three `cmd=set` answers; returns (rank, size).
fn initack_handshake(
    c: &mut BufReader<Conn>,
    via: &'static str,
    ack: &InitAck<'_>,
) -> Result<(usize, usize)> {
    let id = ack.id.to_string();
    let mut fields = vec![("pmiid", id.as_str())];
    if let Some(t) = ack.token {
        fields.push(("token", t));
    }
    let m = transact(c, via, "initack", &fields, "initack")?;
    m.check_rc()
        .map_err(|e| Error::bootstrap(via, format!("launcher refused us: {e}")))?;
    let (mut rank, mut size) = (None, None);
    for _ in 0..3 {
        let m = read_answer(c, via, "set")?;
        if m.get("size").is_some() {
            size = Some(check(via, m.require_usize("size"))?);
        } else if m.get("rank").is_some() {
            rank = Some(check(via, m.require_usize("rank"))?);
        } else if m.get("debug").is_none() {
            return Err(proto(
                via,
                "cmd=set carries none of size, rank, debug".into(),
            ));
        }
    }
    match (rank, size) {
        (Some(r), Some(s)) => Ok((r, s)),
        _ => Err(proto(
            via,
            "cmd=set answers lack field 'rank' or 'size'".into(),
        )),
    }
}

/// Sends one request and reads the answer, which must be `cmd=<answer>`.
fn transact(
    c: &mut BufReader<Conn>,
    via: &'static str,
    cmd: &str,
    fields: &[(&str, &str)],
    answer: &str,
) -> Result<Message> {
    let line = wire::encode(cmd, fields);
    c.get_mut()
        .write_all(line.as_bytes())
        .map_err(|e| Error::io(format!("{via}: sending cmd={cmd}"), e))?;
    read_answer(c, via, answer)
}

fn read_answer(c: &mut BufReader<Conn>, via: &'static str, answer: &str) -> Result<Message> {
    let line = wire::read_line(c)
        .map_err(|e| Error::io(format!("{via}: reading cmd={answer}"), e))?
        .ok_or_else(|| {
            Error::bootstrap(
                via,
                format!("server closed the connection while we waited for cmd={answer}"),
            )
        })?;
    let m = wire::parse(&line).map_err(|e| proto(via, e))?;
    if m.cmd() != answer {
        return Err(proto(
            via,
            format!("expected cmd={answer}, got cmd={}", m.cmd()),
        ));
    }
    Ok(m)
}

/// A `*_max` field: at least 2 (one character plus terminator), at most 1 MiB;
/// returns the usable length (terminator excluded).
fn limit(via: &'static str, m: &Message, field: &str) -> Result<usize> {
    let v = check(via, m.require_usize(field))?;
    if !(2..=1 << 20).contains(&v) {
        return Err(proto(
            via,
            format!("field '{field}' has implausible value {v}"),
        ));
    }
    Ok(v - 1)
}

fn check<T>(via: &'static str, r: std::result::Result<T, String>) -> Result<T> {
    r.map_err(|e| proto(via, e))
}

fn proto(via: &'static str, message: String) -> Error {
    Error::Protocol {
        peer: format!("{via} server"),
        message,
    }
}

/// Parses a required numeric environment variable.
pub(crate) fn env_number<T: std::str::FromStr>(var: &'static str) -> Result<T> {
    let value = std::env::var(var).map_err(|e| Error::Config {
        var,
        value: String::new(),
        message: e.to_string(),
    })?;
    value.trim().parse().map_err(|_| Error::Config {
        var,
        value: value.clone(),
        message: "not a valid number".into(),
    })
}

#[cfg(test)]
mod tests;
