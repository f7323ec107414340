//! The launcher's key-value and barrier server (PMI-1 over a Unix socket).
//!
//! One thread per connection; connections are few (two per local rank). The
//! first line must authenticate (`cmd=initack` or `cmd=lifeline` with the job
//! token and a rank in `0..size`, no second live connection of the same kind
//! for that rank), within [`AUTH_TIMEOUT`]. After that every line is parsed
//! strictly ([`crate::bootstrap::wire`]); an unknown command, an unparsable
//! line or a wrong `kvsname` gets `cmd=error rc=-1 msg=...` and the
//! connection is closed; an invalid key or value gets a failed `put_result` /
//! `get_result` and the connection stays. Puts are committed at the rank's
//! next `barrier_in`, as PMI-1 specifies. `cmd=abort exitcode=<n>` (what
//! `World::abort` sends, as MPICH's `PMI_Abort` does) gets no answer: it
//! records the rank and code in [`Aborted`], and the launcher ends the job.

use std::collections::{HashMap, VecDeque};
use std::io::{BufReader, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::bootstrap::wire::{self, Message};
use crate::bootstrap::{MAX_KEY_LEN, MAX_VALUE_LEN};
use crate::error::{Error, Result};

/// Time a new connection has to present its token.
pub const AUTH_TIMEOUT: Duration = Duration::from_secs(10);
/// When the unauthenticated connections are at their bound, one that has
/// waited this long is dropped for a new one (a rank authenticates at once;
/// its client retries a refused or dropped connection).
const AUTH_GRACE: Duration = Duration::from_millis(500);
/// Most keys one rank may put (a bound on a misbehaving rank's memory use).
const MAX_KEYS_PER_RANK: usize = 1 << 16;

/// The first `cmd=abort` of the job: 0 while none came, else
/// `(rank + 1) << 32 | exit code as u32`.
#[derive(Debug, Default)]
pub struct Aborted(AtomicU64);

impl Aborted {
    /// The rank that asked and its exit code (never 0), if one did.
    pub fn get(&self) -> Option<(usize, i32)> {
        let v = self.0.load(Ordering::Acquire);
        if v == 0 {
            return None;
        }
        let code = (v & 0xffff_ffff) as u32 as i32;
        Some(((v >> 32) as usize - 1, if code == 0 { 1 } else { code }))
    }

    fn record(&self, rank: usize, code: i32) {
        let v = ((rank as u64 + 1) << 32) | u64::from(code as u32);
        let _ = self
            .0
            .compare_exchange(0, v, Ordering::AcqRel, Ordering::Acquire);
    }
}

/// A bound, not yet serving, server.
pub struct Server {
    listener: UnixListener,
    shared: Arc<Shared>,
}

struct Shared {
    size: usize,
    token: String,
    kvsname: String,
    state: Mutex<State>,
    barrier_done: Condvar,
    live: AtomicUsize,
    /// Connections that have not authenticated yet, oldest first (id and a
    /// handle to shut them down): when they would exceed the bound, the
    /// oldest is dropped, so idle or junk connections cannot keep the ranks
    /// of the job out.
    unauthenticated: Mutex<VecDeque<(u64, UnixStream, Instant)>>,
    next_conn: AtomicU64,
    aborted: Arc<Aborted>,
}

#[derive(Default)]
struct State {
    kvs: HashMap<String, String>,
    pending: Vec<HashMap<String, String>>,
    puts: Vec<usize>,
    /// Id of the live connection of each kind per rank.
    kvs_conn: Vec<Option<u64>>,
    lifeline: Vec<Option<u64>>,
    next_id: u64,
    arrived: Vec<bool>,
    count: usize,
    generation: u64,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Kvs,
    Lifeline,
}

impl Server {
    /// Listens on `path` for a job of `size` ranks protected by `token`;
    /// a rank's `cmd=abort` is recorded in `aborted`.
    pub fn bind(path: &Path, size: usize, token: String, aborted: Arc<Aborted>) -> Result<Self> {
        let listener = UnixListener::bind(path)
            .map_err(|e| Error::io(format!("listening on {}", path.display()), e))?;
        let state = State {
            pending: vec![HashMap::new(); size],
            puts: vec![0; size],
            kvs_conn: vec![None; size],
            lifeline: vec![None; size],
            arrived: vec![false; size],
            ..State::default()
        };
        let shared = Arc::new(Shared {
            size,
            token,
            kvsname: format!("onesided_{}", std::process::id()),
            state: Mutex::new(state),
            barrier_done: Condvar::new(),
            live: AtomicUsize::new(0),
            unauthenticated: Mutex::new(VecDeque::new()),
            next_conn: AtomicU64::new(0),
            aborted,
        });
        Ok(Server { listener, shared })
    }

    /// Accepts connections on a background thread until the process exits.
    pub fn serve_in_background(self) -> Result<()> {
        std::thread::Builder::new()
            .name("onesided-run-accept".into())
            .spawn(move || self.accept_loop())
            .map(|_| ())
            .map_err(|e| Error::io("starting the server thread", e))
    }

    fn accept_loop(self) {
        // Authenticated connections are bounded by the per-rank slots (one
        // of each kind per rank); these bounds are for the rest.
        let max_unauthenticated = 2 * self.shared.size + 64;
        let max_live = 4 * self.shared.size + 64 + max_unauthenticated;
        for stream in self.listener.incoming() {
            let Ok(stream) = stream else { continue };
            let id = self.shared.next_conn.fetch_add(1, Ordering::SeqCst);
            let Ok(handle_copy) = stream.try_clone() else {
                continue;
            };
            {
                let mut waiting = self
                    .shared
                    .unauthenticated
                    .lock()
                    .unwrap_or_else(|p| p.into_inner());
                if waiting.len() >= max_unauthenticated {
                    // The oldest has had the longest to say who it is: drop
                    // it if it had its grace, else refuse the newcomer
                    // (a rank's client tries again).
                    match waiting.front() {
                        Some((_, _, since)) if since.elapsed() >= AUTH_GRACE => {
                            if let Some((_, old, _)) = waiting.pop_front() {
                                tracing::debug!(
                                    "onesided-run: dropping an idle unauthenticated connection"
                                );
                                let _ = old.shutdown(std::net::Shutdown::Both);
                            }
                        }
                        _ => {
                            tracing::debug!("onesided-run: too many unauthenticated connections");
                            continue;
                        }
                    }
                }
                waiting.push_back((id, handle_copy, Instant::now()));
            }
            if self.shared.live.load(Ordering::SeqCst) >= max_live {
                tracing::debug!("onesided-run: too many connections, refusing one");
                forget_unauthenticated(&self.shared, id);
                continue;
            }
            self.shared.live.fetch_add(1, Ordering::SeqCst);
            let shared = Arc::clone(&self.shared);
            let spawned = std::thread::Builder::new()
                .name("onesided-run-conn".into())
                .spawn(move || {
                    handle(&shared, stream, id);
                    forget_unauthenticated(&shared, id);
                    shared.live.fetch_sub(1, Ordering::SeqCst);
                });
            if spawned.is_err() {
                forget_unauthenticated(&self.shared, id);
                self.shared.live.fetch_sub(1, Ordering::SeqCst);
            }
        }
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic elsewhere cannot leave the maps half-updated in a way that
        // matters here; keep serving rather than cascade.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

fn send(w: &mut UnixStream, cmd: &str, fields: &[(&str, &str)]) -> bool {
    w.write_all(wire::encode(cmd, fields).as_bytes()).is_ok()
}

/// Reads and parses one line; on a bad line answers `cmd=error` and returns
/// `None` (as at end of stream), which closes the connection.
fn next(r: &mut BufReader<UnixStream>, w: &mut UnixStream) -> Option<Message> {
    let line = match wire::read_line(r) {
        Ok(Some(l)) => l,
        Ok(None) => return None,
        Err(e) => {
            send(w, "error", &[("rc", "-1"), ("msg", &e.to_string())]);
            return None;
        }
    };
    match wire::parse(&line) {
        Ok(m) => Some(m),
        Err(e) => {
            send(w, "error", &[("rc", "-1"), ("msg", &e)]);
            None
        }
    }
}

/// Connection `id` authenticated, failed or ended: no longer a candidate
/// for dropping.
fn forget_unauthenticated(shared: &Shared, id: u64) {
    let mut waiting = shared
        .unauthenticated
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    waiting.retain(|(i, _, _)| *i != id);
}

fn handle(shared: &Shared, stream: UnixStream, conn: u64) {
    let Ok(read_half) = stream.try_clone() else {
        return;
    };
    let mut w = stream;
    let mut r = BufReader::new(read_half);
    if w.set_read_timeout(Some(AUTH_TIMEOUT)).is_err() {
        return;
    }
    let Some(first) = next(&mut r, &mut w) else {
        return;
    };
    let (kind, answer) = match first.cmd() {
        "initack" => (Kind::Kvs, "initack"),
        "lifeline" => (Kind::Lifeline, "lifeline_ack"),
        other => {
            let msg = format!("expected cmd=initack or cmd=lifeline, got cmd={other}");
            send(&mut w, "error", &[("rc", "-1"), ("msg", &msg)]);
            return;
        }
    };
    let (rank, id) = match authenticate(shared, &first, kind) {
        Ok(r) => {
            forget_unauthenticated(shared, conn);
            r
        }
        Err(msg) => {
            tracing::debug!("onesided-run: refused a connection: {msg}");
            send(&mut w, answer, &[("rc", "-1"), ("msg", &msg)]);
            return;
        }
    };
    if w.set_read_timeout(None).is_ok() {
        match kind {
            Kind::Kvs => {
                let (size, rank_s) = (shared.size.to_string(), rank.to_string());
                let ok = send(&mut w, answer, &[("rc", "0")])
                    && send(&mut w, "set", &[("size", &size)])
                    && send(&mut w, "set", &[("rank", &rank_s)])
                    && send(&mut w, "set", &[("debug", "0")]);
                if ok {
                    serve_kvs(shared, rank, id, &mut r, &mut w);
                }
            }
            Kind::Lifeline => {
                if send(&mut w, answer, &[("rc", "0")]) {
                    // Block until the rank goes away; ignore anything it sends.
                    while let Ok(Some(_)) = wire::read_line(&mut r) {}
                }
            }
        }
    }
    release(shared, kind, rank, id);
}

/// Frees the rank's slot if connection `id` still holds it.
fn release(shared: &Shared, kind: Kind, rank: usize, id: u64) {
    let mut st = shared.lock();
    let slot = match kind {
        Kind::Kvs => &mut st.kvs_conn[rank],
        Kind::Lifeline => &mut st.lifeline[rank],
    };
    if *slot == Some(id) {
        *slot = None;
    }
}

/// Checks token and rank of the first line and registers the connection;
/// returns the rank and the connection's id.
fn authenticate(shared: &Shared, m: &Message, kind: Kind) -> Result<(usize, u64), String> {
    let token = m.require("token")?;
    if !constant_time_eq(token.as_bytes(), shared.token.as_bytes()) {
        return Err("wrong job token".into());
    }
    let rank = m.require_usize("pmiid")?;
    if rank >= shared.size {
        return Err(format!("pmiid {rank} is not in 0..{}", shared.size));
    }
    let mut st = shared.lock();
    st.next_id += 1;
    let id = st.next_id;
    let slot = match kind {
        Kind::Kvs => &mut st.kvs_conn[rank],
        Kind::Lifeline => &mut st.lifeline[rank],
    };
    if slot.is_some() {
        return Err(format!("rank {rank} is already connected"));
    }
    *slot = Some(id);
    Ok((rank, id))
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The PMI-1 conversation of one authenticated rank.
fn serve_kvs(
    shared: &Shared,
    rank: usize,
    id: u64,
    r: &mut BufReader<UnixStream>,
    w: &mut UnixStream,
) {
    while let Some(m) = next(r, w) {
        if let Some(kvs) = m.get("kvsname") {
            if kvs != shared.kvsname {
                send(w, "error", &[("rc", "-1"), ("msg", "unknown kvsname")]);
                return;
            }
        }
        let ok = match m.cmd() {
            "init" => {
                let rc = if m.get("pmi_version") == Some("1") {
                    "0"
                } else {
                    "-1"
                };
                send(
                    w,
                    "response_to_init",
                    &[("pmi_version", "1"), ("pmi_subversion", "1"), ("rc", rc)],
                )
            }
            "get_maxes" => {
                let (k, v) = (
                    (MAX_KEY_LEN + 1).to_string(),
                    (MAX_VALUE_LEN + 1).to_string(),
                );
                send(
                    w,
                    "maxes",
                    &[
                        ("kvsname_max", "256"),
                        ("keylen_max", &k),
                        ("vallen_max", &v),
                    ],
                )
            }
            "get_my_kvsname" => send(w, "my_kvsname", &[("kvsname", &shared.kvsname)]),
            "get_universe_size" => send(w, "universe_size", &[("size", &shared.size.to_string())]),
            "get_appnum" => send(w, "appnum", &[("appnum", "0")]),
            "put" => match put(shared, rank, &m) {
                Ok(()) => send(w, "put_result", &[("rc", "0"), ("msg", "success")]),
                Err(e) => send(w, "put_result", &[("rc", "-1"), ("msg", &e)]),
            },
            "get" => match get(shared, &m) {
                Ok(v) => send(
                    w,
                    "get_result",
                    &[("rc", "0"), ("msg", "success"), ("value", &v)],
                ),
                Err(e) => send(w, "get_result", &[("rc", "-1"), ("msg", &e)]),
            },
            "barrier_in" => {
                barrier(shared, rank);
                send(w, "barrier_out", &[])
            }
            "abort" => {
                // No answer: the launcher ends the job (the rank exits
                // anyway). A malformed code still aborts, with 1.
                let code = m
                    .get("exitcode")
                    .and_then(|c| c.parse::<i32>().ok())
                    .unwrap_or(1);
                shared.aborted.record(rank, code);
                return;
            }
            "finalize" => {
                // Free the slot before answering, so that the rank may join
                // again (a second `init`) as soon as it has the answer.
                release(shared, Kind::Kvs, rank, id);
                send(w, "finalize_ack", &[]);
                return;
            }
            other => {
                let msg = format!("unknown command {other}");
                send(w, "error", &[("rc", "-1"), ("msg", &msg)]);
                return;
            }
        };
        if !ok {
            return;
        }
    }
}

fn put(shared: &Shared, rank: usize, m: &Message) -> Result<(), String> {
    let key = m.require("key")?;
    let value = m.require("value")?;
    wire::validate_key(key, MAX_KEY_LEN)?;
    wire::validate_value(value, MAX_VALUE_LEN)?;
    let mut st = shared.lock();
    if st.puts[rank] >= MAX_KEYS_PER_RANK {
        return Err(format!(
            "more than {MAX_KEYS_PER_RANK} puts from rank {rank}"
        ));
    }
    st.puts[rank] += 1;
    st.pending[rank].insert(key.to_string(), value.to_string());
    Ok(())
}

fn get(shared: &Shared, m: &Message) -> Result<String, String> {
    let key = m.require("key")?;
    wire::validate_key(key, MAX_KEY_LEN)?;
    shared
        .lock()
        .kvs
        .get(key)
        .cloned()
        .ok_or_else(|| format!("key {key} not found"))
}

/// Commits `rank`'s puts and waits for every rank.
fn barrier(shared: &Shared, rank: usize) {
    let mut st = shared.lock();
    let pending = std::mem::take(&mut st.pending[rank]);
    st.kvs.extend(pending);
    if !st.arrived[rank] {
        st.arrived[rank] = true;
        st.count += 1;
    }
    let generation = st.generation;
    if st.count == shared.size {
        st.count = 0;
        st.arrived.iter_mut().for_each(|a| *a = false);
        st.generation += 1;
        shared.barrier_done.notify_all();
        return;
    }
    while st.generation == generation {
        st = shared
            .barrier_done
            .wait(st)
            .unwrap_or_else(|p| p.into_inner());
    }
}
