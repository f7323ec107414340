//! The in-process back-end: the ranks of a job are threads of one process,
//! memory copies and CPU atomics move the data.
//!
//! What it is for: testing the layers above the seam — epochs, the
//! software lock queue, the op table, software accumulate, aggregation,
//! PSCW, dynamic windows — in seconds, without launching processes
//! (`World::run_threads`, `tests/loopback.rs`), and trying the library on
//! a laptop with no network set up.
//!
//! * **Fabric** ([`Fabric`], `conn.rs`): shared by the job's threads
//!   (an `Arc`), one endpoint per rank: its registrations (`mr.rs`), its
//!   inbox of messages (`msg.rs`) and an eventfd its progress agent sleeps
//!   on.
//! * **RMA and atomics** (`rma.rs`, `atomic.rs`): the origin's thread
//!   copies through `Memory`'s relaxed-atomic copies and applies atomics
//!   with `cpu_atomic`; never a plain racy copy, never a reference into
//!   registered memory. An unknown key or an address outside the
//!   registration is an error naming the rank, address and key.
//! * **Completion** (`cq.rs`): blocking operations are done when they
//!   return; non-blocking ones are queued and carried out when the origin
//!   drives progress, in issue order.
//! * **Messages** (`msg.rs`): handed to the target's receiver only when
//!   the *target* drives progress.
//! * **Capabilities** (`caps.rs`): every CPU atomic, native (no target
//!   CPU), acknowledged writes, ordered operations, no batching.
//!
//! One process may run several jobs of threads at once (each has its own
//! fabric; cards name the fabric). A normal process launch with
//! `ONESIDED_BACKEND=loopback` is an error: the ranks of this back-end are
//! threads started by `World::run_threads`.

mod atomic;
mod caps;
mod conn;
mod cq;
mod mr;
mod msg;
mod rma;

pub use conn::Fabric;

use std::collections::HashSet;
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use super::{
    Atomic, Caps, Completion, Datatype, InFlight, Memory, Receiver, Registration, RemoteAddr,
    Transport, TransportStats,
};
use crate::config::Config;
use crate::error::{Error, Result};

/// The error of `ONESIDED_BACKEND=loopback` for a launched process.
pub fn launched() -> Error {
    Error::Unsupported(
        "ONESIDED_BACKEND=loopback: the in-process back-end runs the ranks of a job as \
         threads of one process, started by World::run_threads; a launched process needs \
         a network back-end (ONESIDED_BACKEND=ofi or auto)"
            .into(),
    )
}

/// Counters (the [`TransportStats`] this back-end fills).
#[derive(Default)]
pub(super) struct Counters {
    writes: AtomicU64,
    reads: AtomicU64,
    atomics: AtomicU64,
    bytes_written: AtomicU64,
    bytes_read: AtomicU64,
    bytes_atomic: AtomicU64,
    exhausted: AtomicU64,
    pub(super) sends: AtomicU64,
    pub(super) send_bytes: AtomicU64,
    pub(super) received: AtomicU64,
    pub(super) dropped: AtomicU64,
}

impl Counters {
    fn count(n: &AtomicU64, bytes: &AtomicU64, len: usize) {
        n.fetch_add(1, Ordering::Relaxed);
        bytes.fetch_add(len as u64, Ordering::Relaxed);
    }
    pub(super) fn write(&self, len: usize) {
        Self::count(&self.writes, &self.bytes_written, len);
    }
    pub(super) fn read(&self, len: usize) {
        Self::count(&self.reads, &self.bytes_read, len);
    }
    pub(super) fn atomic(&self, len: usize) {
        Self::count(&self.atomics, &self.bytes_atomic, len);
    }
    pub(super) fn exhausted(&self) {
        self.exhausted.fetch_add(1, Ordering::Relaxed);
    }
}

/// One rank's endpoint on an in-process [`Fabric`].
pub struct LoopbackTransport {
    fabric: Arc<Fabric>,
    rank: usize,
    caps: Caps,
    card: Vec<u8>,
    peers: Mutex<HashSet<usize>>,
    queue: cq::Queue,
    receiver: RwLock<Option<Arc<dyn Receiver>>>,
    counters: Counters,
    timeout: Option<Duration>,
}

impl LoopbackTransport {
    /// Opens `rank`'s endpoint of `fabric` (once per rank).
    ///
    /// # Errors
    /// `rank` is outside the fabric, or its endpoint was opened before.
    pub fn open(fabric: &Arc<Fabric>, rank: usize, config: &Config) -> Result<LoopbackTransport> {
        let ep = fabric.endpoints.get(rank).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "loopback: rank {rank} is not in the job of {} threads",
                fabric.size()
            ))
        })?;
        ep.state
            .compare_exchange(conn::FRESH, conn::OPEN, Ordering::AcqRel, Ordering::Acquire)
            .map_err(|_| {
                Error::InvalidArgument(format!(
                    "loopback: the endpoint of rank {rank} was opened before (one World per rank)"
                ))
            })?;
        Ok(LoopbackTransport {
            fabric: fabric.clone(),
            rank,
            caps: caps::caps(fabric.id, fabric.size()),
            card: conn::card(fabric, rank),
            peers: Mutex::new(HashSet::new()),
            queue: cq::Queue::new(config.rma_slots),
            receiver: RwLock::new(None),
            counters: Counters::default(),
            timeout: config.timeout,
        })
    }

    fn is_connected_rank(&self, rank: usize) -> bool {
        self.peers.lock().map(|p| p.contains(&rank)).unwrap_or(false)
    }

    /// `Ok` when `rank` was connected (as libfabric's address vector, an
    /// operation needs the peer added first).
    fn connected(&self, rank: usize) -> Result<()> {
        if self.is_connected_rank(rank) {
            Ok(())
        } else {
            Err(Error::InvalidArgument(format!(
                "rank {rank} has not been added as a peer"
            )))
        }
    }

    /// Runs `f` on `target`'s registration at `at` (checked: connected,
    /// open, known key, `len` bytes inside).
    fn remote<R>(
        &self,
        target: usize,
        at: RemoteAddr,
        len: usize,
        what: &dyn Fn() -> String,
        f: impl FnOnce(&Memory<'static>, usize) -> Result<R>,
    ) -> Result<R> {
        self.connected(target)?;
        let context = || format!("{} to rank {target}", what());
        let ep = self.fabric.endpoint(target, &context)?;
        ep.mrs.with(target, at, len, what, f)
    }

    /// Fails when a rank of the job failed (see [`Fabric::fail`]).
    fn check_job(&self) -> Result<()> {
        match self.fabric.failure() {
            Some((rank, why)) if rank != self.rank => Err(Error::peer_unreachable(
                rank,
                "driving progress",
                format!("rank {rank} of this job of threads failed: {why}"),
            )),
            _ => Ok(()),
        }
    }
}

impl Drop for LoopbackTransport {
    fn drop(&mut self) {
        if let Some(ep) = self.fabric.endpoints.get(self.rank) {
            ep.state.store(conn::CLOSED, Ordering::Release);
            ep.inbox.lock().unwrap_or_else(|e| e.into_inner()).clear();
        }
        self.queue.abandon("the loopback transport was closed");
    }
}

impl Transport for LoopbackTransport {
    fn stats(&self) -> TransportStats {
        let c = &self.counters;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        TransportStats {
            ops_in_flight: self.queue.len(),
            rejected_completions: 0,
            stale_completions: 0,
            sends: get(&c.sends),
            send_bytes: get(&c.send_bytes),
            messages_received: get(&c.received),
            messages_dropped: get(&c.dropped),
            op_slots: self.queue.slots(),
            op_slots_exhausted: get(&c.exhausted),
            writes: get(&c.writes),
            reads: get(&c.reads),
            atomics: get(&c.atomics),
            bytes_written: get(&c.bytes_written),
            bytes_read: get(&c.bytes_read),
            bytes_atomic: get(&c.bytes_atomic),
            // Connection-oriented counters: nothing to connect here.
            ..TransportStats::default()
        }
    }

    fn caps(&self) -> &Caps {
        &self.caps
    }

    fn card(&self) -> &[u8] {
        &self.card
    }

    fn connect(&self, rank: usize, card: &[u8]) -> Result<()> {
        conn::connect(&self.fabric, &self.peers, rank, card)
    }

    fn is_connected(&self, rank: usize) -> bool {
        self.is_connected_rank(rank)
    }

    fn peer_count(&self) -> usize {
        self.peers.lock().map(|p| p.len()).unwrap_or(0)
    }

    fn register(&self, mem: &Memory<'_>) -> Result<Registration> {
        mr::register(&self.fabric, self.rank, mem, None)
    }

    fn register_keyed(&self, mem: &Memory<'_>, key: u64) -> Result<Registration> {
        mr::register(&self.fabric, self.rank, mem, Some(key))
    }

    fn put(&self, target: usize, data: &[u8], dst: RemoteAddr) -> Result<()> {
        self.queue.then(self, || rma::write(self, target, data, dst))
    }

    fn get(&self, target: usize, buf: &mut [u8], src: RemoteAddr) -> Result<()> {
        self.queue.then(self, || rma::read(self, target, buf, src))
    }

    fn put_async(&self, target: usize, src: &InFlight, dst: RemoteAddr) -> Result<()> {
        self.connected(target)?;
        self.queue.post(self, cq::Posted::put(target, src, dst));
        self.fabric.wake(self.rank);
        Ok(())
    }

    fn get_async(&self, target: usize, dst: &InFlight, src: RemoteAddr) -> Result<()> {
        self.connected(target)?;
        self.queue.post(self, cq::Posted::get(target, dst, src));
        self.fabric.wake(self.rank);
        Ok(())
    }

    fn put_signal(&self, target: usize, value: u64, dst: RemoteAddr) -> Result<()> {
        self.queue.then(self, || rma::signal(self, target, value, dst))
    }

    fn atomic(&self, target: usize, what: Atomic, data: &[u8], dst: RemoteAddr) -> Result<()> {
        self.queue
            .then(self, || atomic::apply(self, target, what, data, None, dst))
    }

    fn fetch_atomic(
        &self,
        target: usize,
        what: Atomic,
        data: &[u8],
        result: &mut [u8],
        dst: RemoteAddr,
    ) -> Result<()> {
        if result.len() != data.len() {
            return Err(Error::InvalidArgument(format!(
                "fetching atomic: result buffer of {} bytes for {} bytes of data",
                result.len(),
                data.len()
            )));
        }
        self.queue.then(self, || {
            atomic::apply(self, target, what, data, Some(result), dst)
        })
    }

    fn compare_atomic(
        &self,
        target: usize,
        datatype: Datatype,
        compare: &[u8],
        swap: &[u8],
        result: &mut [u8],
        dst: RemoteAddr,
    ) -> Result<()> {
        self.queue.then(self, || {
            atomic::compare(self, target, datatype, (compare, swap), result, dst)
        })
    }

    fn atomic_async(
        &self,
        target: usize,
        what: Atomic,
        src: &InFlight,
        dst: RemoteAddr,
    ) -> Result<()> {
        self.connected(target)?;
        self.queue.post(self, cq::Posted::atomic(target, what, src, dst));
        self.fabric.wake(self.rank);
        Ok(())
    }

    fn fetch_atomic_async(
        &self,
        target: usize,
        what: Atomic,
        data: Vec<u8>,
        result: &InFlight,
        dst: RemoteAddr,
    ) -> Result<()> {
        self.connected(target)?;
        if result.len() != data.len() {
            return Err(Error::InvalidArgument(format!(
                "fetching atomic: result buffer of {} bytes for {} bytes of data",
                result.len(),
                data.len()
            )));
        }
        self.queue
            .post(self, cq::Posted::fetch(target, what, data, result, dst));
        self.fabric.wake(self.rank);
        Ok(())
    }

    fn send(&self, target: usize, bytes: &[u8]) -> Result<()> {
        msg::send(self, target, bytes)
    }

    fn set_receiver(&self, receiver: Arc<dyn Receiver>) {
        if let Ok(mut r) = self.receiver.write() {
            *r = Some(receiver);
        }
    }

    fn progress(&self) -> Result<usize> {
        self.check_job()?;
        let ran = self.queue.run(self);
        Ok(ran + msg::serve(self))
    }

    fn event_fds(&self) -> Vec<std::os::fd::BorrowedFd<'_>> {
        self.fabric
            .endpoints
            .get(self.rank)
            .and_then(|e| e.wake.as_ref())
            .map(|w| w.as_fd())
            .into_iter()
            .collect()
    }

    fn arm(&self) -> Result<bool> {
        let Some(ep) = self.fabric.endpoints.get(self.rank) else {
            return Ok(false);
        };
        if let Some(w) = &ep.wake {
            // Consume the wake-ups so far (EAGAIN: there were none); work
            // that arrives after this read wakes the poll again.
            let _ = w.read();
        }
        let idle = self.queue.len() == 0
            && ep.inbox.lock().map(|q| q.is_empty()).unwrap_or(false)
            && self.fabric.failure().is_none();
        Ok(idle)
    }

    fn wait(&self, done: &Completion, what: &dyn Fn() -> String) -> Result<()> {
        crate::progress::wait::until(self, self.timeout, what, || Ok(done.pending() == 0))?;
        done.check(what)
    }
}
