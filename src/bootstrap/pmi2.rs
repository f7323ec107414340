//! A client of PMI-2 over an inherited `PMI_FD`, as Slurm's `mpi/pmi2`
//! plugin (`srun --mpi=pmi2`) serves it.
//!
//! The conversation (framing in [`frame`]):
//!
//! ```text
//! [PMI-1 line] cmd=init pmi_version=2 pmi_subversion=0
//!           -> cmd=response_to_init pmi_version=2 pmi_subversion=0 rc=0
//! cmd=fullinit;pmijobid=<PMI_JOBID>;pmirank=<PMI_RANK>;threaded=TRUE;
//!           -> cmd=fullinit-response;rc=0;pmi-version=2;pmi-subversion=0;rank=<r>;size=<n>;appnum=..;...
//! cmd=job-getid;                      -> cmd=job-getid-response;rc=0;jobid=<id>;
//! cmd=kvs-put;key=<k>;value=<v>;      -> cmd=kvs-put-response;rc=0;
//! cmd=kvs-fence;                      -> cmd=kvs-fence-response;rc=0;
//! cmd=kvs-get;jobid=<id>;srcid=-1;key=<k>;
//!           -> cmd=kvs-get-response;rc=0;found=TRUE;value=<v>;   (found=FALSE: not there)
//! cmd=info-getjobattr;key=PMI_process_mapping;
//!           -> cmd=info-getjobattr-response;rc=0;found=TRUE;value=(vector,...);
//! cmd=finalize;                       -> cmd=finalize-response;rc=0;
//! ```
//!
//! Like [`super::Pmi1`]: every field of every answer is checked; a malformed
//! answer is an [`Error::Protocol`] and closes the connection; one
//! connection serves the process behind a mutex.
//!
//! PMI-2 is chosen by [`super::init`] when `PMI_FD` is set and the launcher
//! says it serves PMI-2: Slurm's `SLURM_MPI_TYPE=pmi2`, or `PMI_VERSION=2`.

pub mod frame;

use std::io::{BufReader, Write};
use std::sync::Mutex;

use super::conn::{self, Conn};
use super::node::MAPPING_KEY;
use super::pmi1::env_number;
use super::stats::{BootstrapStats, Counters};
use super::wire::{self, Message};
use super::{Bootstrap, MAX_KEY_LEN, MAX_VALUE_LEN};
use crate::error::{Error, Result};

const VIA: &str = "pmi2";

/// A joined PMI-2 job.
#[derive(Debug)]
pub struct Pmi2 {
    conn: Mutex<Option<BufReader<Conn>>>,
    rank: usize,
    size: usize,
    jobid: String,
    counters: Counters,
}

impl Pmi2 {
    /// Joins through the socket inherited as `PMI_FD`; `PMI_RANK` (and
    /// `PMI_JOBID`, `PMI_SIZE` when set) as the launcher gave them.
    pub fn from_fd_env() -> Result<Self> {
        let fd: i32 = env_number("PMI_FD")?;
        let rank: usize = env_number("PMI_RANK")?;
        let size: Option<usize> = match std::env::var_os("PMI_SIZE") {
            Some(_) => Some(env_number("PMI_SIZE")?),
            None => None,
        };
        let jobid = match std::env::var("PMI_JOBID") {
            Ok(j) => Some(j),
            Err(std::env::VarError::NotPresent) => None,
            Err(e) => {
                return Err(Error::Config {
                    var: "PMI_JOBID",
                    value: String::new(),
                    message: e.to_string(),
                })
            }
        };
        let fd = conn::adopt_pmi_fd(VIA, fd)?;
        Self::join(Conn::Fd(fd), rank, size, jobid.as_deref())
    }

    /// Runs the handshake on a connected stream. `rank` (and `size`, when
    /// known) come from the environment; the server's answer must agree.
    pub(crate) fn join(
        conn: Conn,
        rank: usize,
        size: Option<usize>,
        jobid: Option<&str>,
    ) -> Result<Self> {
        let mut c = BufReader::new(conn);
        // The first exchange is a PMI-1 line that switches the server to PMI-2.
        let line = wire::encode("init", &[("pmi_version", "2"), ("pmi_subversion", "0")]);
        c.get_mut()
            .write_all(line.as_bytes())
            .map_err(|e| Error::io("pmi2: sending cmd=init", e))?;
        let answer = wire::read_line(&mut c)
            .map_err(|e| Error::io("pmi2: reading cmd=response_to_init", e))?
            .ok_or_else(|| Error::bootstrap(VIA, "server closed the connection at cmd=init"))?;
        let m = wire::parse(&answer).map_err(proto)?;
        if m.cmd() != "response_to_init" {
            return Err(proto(format!(
                "expected cmd=response_to_init, got cmd={}",
                m.cmd()
            )));
        }
        m.check_rc()
            .map_err(|e| Error::bootstrap(VIA, format!("server refused PMI version 2.0: {e}")))?;
        let v = m.require_usize("pmi_version").map_err(proto)?;
        if v != 2 {
            return Err(proto(format!(
                "server answers pmi_version={v} to a PMI-2 init"
            )));
        }

        let rank_s = rank.to_string();
        let mut fields = vec![("pmirank", rank_s.as_str()), ("threaded", "TRUE")];
        if let Some(j) = jobid {
            fields.insert(0, ("pmijobid", j));
        }
        let m = transact(&mut c, "fullinit", &fields, "fullinit-response")?;
        check_rc(&m)?;
        let version = m.require_usize("pmi-version").map_err(proto)?;
        if version != 2 {
            return Err(proto(format!("fullinit-response: pmi-version={version}")));
        }
        let got_rank = m.require_usize("rank").map_err(proto)?;
        let got_size = m.require_usize("size").map_err(proto)?;
        if got_size == 0 || got_rank >= got_size {
            return Err(proto(format!(
                "fullinit-response: rank {got_rank} is not in 0..{got_size}"
            )));
        }
        if got_rank != rank || size.is_some_and(|s| s != got_size) {
            return Err(Error::bootstrap(
                VIA,
                format!(
                    "launcher says rank {got_rank} of {got_size}, environment says rank {rank} of {}",
                    size.map_or("?".to_string(), |s| s.to_string())
                ),
            ));
        }
        let m = transact(&mut c, "job-getid", &[], "job-getid-response")?;
        check_rc(&m)?;
        let jobid = m.require("jobid").map_err(proto)?.to_string();
        if jobid.is_empty() || jobid.len() > 256 || jobid.contains(';') {
            return Err(proto(format!(
                "job-getid-response: jobid '{}' is invalid",
                wire::shorten(&jobid)
            )));
        }
        tracing::debug!(rank, size = got_size, %jobid, "pmi2: joined");
        Ok(Pmi2 {
            conn: Mutex::new(Some(c)),
            rank,
            size: got_size,
            jobid,
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
        let m = transact(&mut c, "finalize", &[], "finalize-response")?;
        check_rc(&m)
    }

    fn lock(&self) -> Result<std::sync::MutexGuard<'_, Option<BufReader<Conn>>>> {
        self.conn
            .lock()
            .map_err(|_| Error::bootstrap(VIA, "connection lock poisoned by a panic"))
    }

    /// One request/answer under the lock; an I/O or protocol error drops the
    /// connection.
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
                VIA,
                "connection closed (finalized or broken by an earlier error)",
            )
        })?;
        let r = transact(c, cmd, fields, answer).and_then(|m| validate(&m));
        if matches!(r, Err(Error::Io { .. } | Error::Protocol { .. })) {
            *guard = None;
        }
        r
    }

    /// `found=TRUE` with a value, `found=FALSE` -> `None`.
    fn found_value(m: &Message, what: &str, limit: usize) -> Result<Option<String>> {
        check_rc(m)?;
        match m.require("found").map_err(proto)? {
            "TRUE" | "true" => {
                let v = m.require("value").map_err(proto)?;
                if v.len() > limit {
                    return Err(proto(format!("{what}: value is {} characters", v.len())));
                }
                Ok(Some(v.to_string()))
            }
            "FALSE" | "false" => Ok(None),
            other => Err(proto(format!(
                "{what}: field 'found' is '{}', not TRUE or FALSE",
                wire::shorten(other)
            ))),
        }
    }
}

impl Bootstrap for Pmi2 {
    fn rank(&self) -> usize {
        self.rank
    }
    fn size(&self) -> usize {
        self.size
    }
    fn put(&self, key: &str, value: &str) -> Result<()> {
        let bad = |m| Error::InvalidArgument(format!("bootstrap put: {m}"));
        wire::validate_key(key, MAX_KEY_LEN).map_err(bad)?;
        wire::validate_value(value, MAX_VALUE_LEN).map_err(bad)?;
        // Slurm does not undo the `;;` escape: refuse what it would cut.
        if key.contains(';') || value.contains(';') {
            return Err(bad(format!(
                "key '{key}' or its value contains ';', which PMI-2 servers do not carry"
            )));
        }
        self.call(
            "kvs-put",
            &[("key", key), ("value", value)],
            "kvs-put-response",
            |m| check_rc(m).map_err(|e| Error::bootstrap(VIA, format!("put of key '{key}': {e}"))),
        )?;
        self.counters.put(key, value);
        Ok(())
    }
    fn barrier(&self) -> Result<()> {
        self.call("kvs-fence", &[], "kvs-fence-response", check_rc)?;
        self.counters.fence();
        Ok(())
    }
    fn get(&self, key: &str) -> Result<String> {
        wire::validate_key(key, MAX_KEY_LEN)
            .map_err(|m| Error::InvalidArgument(format!("bootstrap get: {m}")))?;
        if key.contains(';') {
            return Err(Error::InvalidArgument(format!(
                "bootstrap get: key '{key}' contains ';'"
            )));
        }
        // The node mapping is job information, not a published key.
        let is_attr = key == MAPPING_KEY;
        let r = if is_attr {
            self.call(
                "info-getjobattr",
                &[("key", key)],
                "info-getjobattr-response",
                |m| Self::found_value(m, "info-getjobattr-response", frame::MAX_BODY),
            )
        } else {
            self.call(
                "kvs-get",
                &[("jobid", &self.jobid), ("srcid", "-1"), ("key", key)],
                "kvs-get-response",
                |m| Self::found_value(m, "kvs-get-response", MAX_VALUE_LEN),
            )
        };
        let r = r
            .and_then(|v| v.ok_or_else(|| Error::bootstrap(VIA, format!("key '{key}' not found"))));
        let got = r.as_ref().ok().map(|v| v.len());
        if is_attr {
            self.counters.query(got);
        } else {
            self.counters.get(got);
        }
        r
    }
    fn abort(&self, _code: i32, msg: &str) {
        // `cmd=abort;isworld=TRUE;msg=...;` as MPICH's PMI2_Abort sends it;
        // Slurm's answer is to kill the job step (no reply is sent). Never
        // waits for the connection: another thread may be blocked in a
        // fence on it (the exit that follows still fails the rank).
        let Ok(mut guard) = self.conn.try_lock() else {
            tracing::debug!("pmi2: connection busy; abort by exit only");
            return;
        };
        let Some(c) = guard.as_mut() else { return };
        match frame::encode("abort", &[("isworld", "TRUE"), ("msg", msg)]) {
            Ok(m) => {
                if let Err(e) = c.get_mut().write_all(&m) {
                    tracing::debug!("pmi2: sending cmd=abort failed: {e}");
                }
            }
            Err(e) => tracing::debug!("pmi2: cannot encode cmd=abort: {e}"),
        }
    }
    fn name(&self) -> &'static str {
        VIA
    }
    fn stats(&self) -> BootstrapStats {
        self.counters.snapshot()
    }
}

impl Drop for Pmi2 {
    fn drop(&mut self) {
        if let Err(e) = self.finalize() {
            tracing::debug!("pmi2: finalize on drop failed: {e}");
        }
    }
}

/// Sends one framed request and reads the answer, which must be
/// `cmd=<answer>`.
fn transact(
    c: &mut BufReader<Conn>,
    cmd: &str,
    fields: &[(&str, &str)],
    answer: &str,
) -> Result<Message> {
    let msg =
        frame::encode(cmd, fields).map_err(|m| Error::InvalidArgument(format!("pmi2: {m}")))?;
    c.get_mut()
        .write_all(&msg)
        .map_err(|e| Error::io(format!("pmi2: sending cmd={cmd}"), e))?;
    let body = frame::read_body(c)
        .map_err(|e| Error::io(format!("pmi2: reading cmd={answer}"), e))?
        .ok_or_else(|| {
            Error::bootstrap(
                VIA,
                format!("server closed the connection while we waited for cmd={answer}"),
            )
        })?;
    let m = frame::parse(&body).map_err(proto)?;
    if m.cmd() != answer {
        return Err(proto(format!("expected cmd={answer}, got cmd={}", m.cmd())));
    }
    Ok(m)
}

/// `rc=0` (required in PMI-2 answers); otherwise an error with `errmsg`.
fn check_rc(m: &Message) -> Result<()> {
    match m.require("rc").map_err(proto)? {
        "0" => Ok(()),
        rc => Err(Error::bootstrap(
            VIA,
            format!(
                "cmd={} failed: rc={} errmsg={}",
                m.cmd(),
                wire::shorten(rc),
                wire::shorten(m.get("errmsg").or(m.get("msg")).unwrap_or("(none)"))
            ),
        )),
    }
}

fn proto(message: String) -> Error {
    Error::Protocol {
        peer: format!("{VIA} server"),
        message,
    }
}

#[cfg(test)]
mod tests;
