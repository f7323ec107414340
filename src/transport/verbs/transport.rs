//! [`VerbsTransport`]: the seam's [`Transport`] over native ibverbs.
//!
//! * **One device, one completion queue, one shared receive queue** per
//!   process (sized from the device limits), a UD queue pair for the
//!   connection handshake, a pool of registered staging slots.
//! * **Connections on first contact** ([`peers`](super::peers)): an RC queue
//!   pair per peer this process contacted or that contacted it, made by a
//!   REQ/REP handshake over UD that the target's progress serves. After an
//!   error completion the pair is made again on the next operation, under a
//!   newer generation; completions of the old pair are rejected.
//! * **Data path**: RDMA WRITE (inline up to the queue pair's
//!   `max_inline_data`), RDMA READ, and the NIC's 64-bit FETCH_AND_ADD and
//!   CMP_AND_SWP for aligned `u64`/`i64` sum and compare-and-swap (the
//!   window lock word included). Every other atomic is refused here; the
//!   layers above route it to the software path, as [`Caps`] says.
//! * **Completion**: a completion on an RC queue pair means the target's
//!   NIC acknowledged the operation, i.e. it was placed in the target's
//!   memory ([`RemoteCompletion::Acknowledged`]): a blocking put returns
//!   remotely complete and a flush waits for completions only.
//! * **Messages**: SEND into the SRQ's buffers; `rnr_retry` 7 makes a
//!   sender wait, not fail, if a receiver ever ran out of buffers.

use std::sync::atomic::{AtomicU16, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};

use super::atomic::ByteOrder;
use super::conn::{Access, Device, Mr, RcQp};
use super::cq::{Cq, OpKind, Wc, WrId};
use crate::transport::completion::with_own;
use super::device::{AsyncEvent, BACKEND};
use super::handshake::{Card, Ud};
use super::lean::{Fetched, Source};
use super::msg::Srq;
use super::ops::{Op, OpTable};
use super::peers::PeerMap;
use super::rma::Local;
use super::staging::{Staging, SLOT_BYTES};
use crate::config::Config;
use crate::transport::regcache::{Limits, RegCache};
use crate::error::{Error, Result};
use crate::progress::wait::Waiter;
use crate::stats::Counter;
use crate::transport::inflight::Sink;
use crate::transport::{
    Atomic, AtomicOp, Caps, Completion, Datatype, InFlight, Memory, Receiver, Registration,
    RemoteAddr, Transport, TransportStats, MAX_MESSAGE, RECV_BUFFERS,
};

/// Handshake receive buffers (UD).
const HANDSHAKE_BUFFERS: usize = 32;
/// Send queue depth of each RC queue pair.
const SEND_WR: u32 = 1024;

/// Counters (statistics only; the per-operation ones are [`Counter`]s).
#[derive(Default)]
pub(super) struct Counters {
    pub writes: Counter,
    pub reads: Counter,
    pub atomics: Counter,
    pub fetch_add: Counter,
    pub compare_swap: Counter,
    pub bytes_written: Counter,
    pub bytes_read: Counter,
    pub sends: Counter,
    pub send_bytes: Counter,
    pub received: Counter,
    pub dropped: AtomicU64,
    pub connections: AtomicU64,
    pub reconnections: AtomicU64,
    pub srq_limit_events: AtomicU64,
    pub progress_calls: AtomicU64,
    pub zero_copy: Counter,
    pub lean: Counter,
}

/// The native verbs back-end.
pub struct VerbsTransport {
    // Drop order: operations (their sinks) and queue pairs before the
    // queues and regions they use, those before the device.
    pub(super) ops: OpTable,
    pub(super) peers: Mutex<PeerMap>,
    pub(super) ud: Ud,
    pub(super) srq: Srq,
    pub(super) staging: Staging,
    /// One per staging slot: the lean requests' states (`lean.rs`).
    pub(super) cells: super::lean::Cells,
    pub(super) cq: Arc<Cq>,
    pub(super) dev: Arc<Device>,
    pub(super) rank: usize,
    /// Ranks of the job: handshakes from any other number are dropped.
    pub(super) size: usize,
    pub(super) timeout: Option<std::time::Duration>,
    /// `ONESIDED_ZCOPY_ABOVE` (0: never).
    zcopy_above: usize,
    /// Registrations of callers' buffers kept for the next operation on
    /// them (`ONESIDED_MR_CACHE`): made at the first large put or get, so
    /// a process that makes none has no userfaultfd and no monitor
    /// thread; `None` inside where none can be opened.
    regcache: OnceLock<Option<RegCache<Arc<Mr>>>>,
    mr_cache: Limits,
    pub(super) next_generation: AtomicU16,
    /// The last handshake failure of this process (a datagram not sent,
    /// a request not accepted), named in a connect's timeout error.
    pub(super) handshake_error: Mutex<Option<String>>,
    pub(super) order: ByteOrder,
    pub(super) counters: Counters,
    receiver: RwLock<Option<Arc<dyn Receiver>>>,
    card: Vec<u8>,
    caps: Caps,
}

fn unsupported(what: String) -> Error {
    Error::backend(
        BACKEND,
        "atomic",
        what,
        nix::libc::ENOTSUP,
        "the NIC offers 64-bit fetch-and-add and compare-and-swap on 8-byte-aligned \
         u64/i64 only; the layers above route other atomics to the software path",
    )
}

impl VerbsTransport {
    /// Opens the device `ONESIDED_IB_DEVICE` names (or the automatic
    /// choice) for rank `rank`: protection domain, completion queue with
    /// its channel, shared receive queue, handshake queue pair, staging
    /// pool, and the byte-order self-test of fetched atomics.
    ///
    /// # Errors
    /// No usable port (naming the device), or a verbs call failing.
    pub fn open(config: &Config, rank: usize, size: usize) -> Result<VerbsTransport> {
        let choice = super::choose_from_env()?;
        let dev = Device::open(choice)?;
        let d = &dev.choice.device;
        let cq_entries = (SEND_WR as usize * 4 + RECV_BUFFERS + HANDSHAKE_BUFFERS + 64)
            .min(d.max_cqe.max(1) as usize);
        let cq = Cq::new(&dev, u32::try_from(cq_entries).unwrap_or(4096), true)?;
        let srq = Srq::new(&dev, RECV_BUFFERS, MAX_MESSAGE)?;
        let ud = Ud::new(&dev, &cq, HANDSHAKE_BUFFERS)?;
        let staging = Staging::new(&dev)?;
        let card = Card {
            gid: dev.choice.gid.gid,
            lid: dev.choice.port.lid,
            ud_qpn: ud.qpn,
        }
        .encode();
        let mut t = VerbsTransport {
            ops: OpTable::new(config.rma_slots),
            peers: Mutex::new(PeerMap::default()),
            ud,
            srq,
            staging,
            cells: super::lean::Cells::new(super::staging::SLOTS),
            cq,
            caps: super::caps::caps(&dev.choice.device, dev.choice.port.port, 0, usize::MAX),
            dev,
            rank,
            size,
            timeout: config.timeout,
            zcopy_above: config.zcopy_above,
            regcache: OnceLock::new(),
            mr_cache: cache_limits(config),
            next_generation: AtomicU16::new(1),
            handshake_error: Mutex::new(None),
            order: ByteOrder::Native,
            counters: Counters::default(),
            receiver: RwLock::new(None),
            card,
        };
        // Our own pair: the loopback connection for operations on oneself,
        // and the byte-order self-test of fetched atomic results.
        let me = t.self_pair()?;
        let inline = me.qp.max_inline as usize;
        t.caps = super::caps::caps(
            &t.dev.choice.device,
            t.dev.choice.port.port,
            inline,
            usize::MAX,
        );
        if t.dev.choice.device.has_atomics() {
            t.order = t.probe_byte_order(&me.qp, me.generation)?;
        }
        t.peers
            .lock()
            .map_err(|_| poisoned())?
            .insert(t.rank, me);
        Ok(t)
    }

    /// A fetch-add of 0 on a known word over our own connection: the
    /// fetched value tells whether this NIC returns atomic results in
    /// host or in swapped byte order.
    fn probe_byte_order(&self, qp: &RcQp, generation: u16) -> Result<ByteOrder> {
        let word = Memory::allocate(8)?;
        word.store_u64(0, super::atomic::PROBE)?;
        let access = Access {
            remote_write: true,
            remote_read: true,
            remote_atomic: true,
        };
        // SAFETY: `word` outlives the region (dropped after `mr` below) and
        // is accessed only through `Memory`'s copies.
        let mr = unsafe { Mr::register(&self.dev, word.as_ptr(), 8, access)? };
        let result = InFlight::new::<u8, Vec<u8>>(vec![0u8; 8], None);
        let slot = self.take_slot()?;
        let local = self.staging.local(slot, 8)?;
        let dst = RemoteAddr {
            addr: mr.addr,
            key: u64::from(mr.rkey),
        };
        self.post_op(
            qp,
            generation,
            Op {
                target: self.rank,
                generation,
                kind: OpKind::FetchAdd,
                slot: Some(slot),
                sink: result.sink(),
                at: 0,
                copy: 8,
                atomic_result: false,
                on_fail: None,
            },
            |qp, id| qp.post_fetch_add(id, local, dst, 0),
        )?;
        self.wait(result.completion(), &|| {
            "the atomic byte-order self-test".to_string()
        })?;
        let v = result
            .into_inner::<Vec<u8>>()
            .map_err(|_| Error::InvalidArgument("byte-order probe still in flight".into()))?;
        let mut b = [0u8; 8];
        b.copy_from_slice(v.get(..8).unwrap_or(&[0; 8]));
        drop(mr);
        ByteOrder::detect(u64::from_ne_bytes(b))
    }

    /// Handles the device's pending asynchronous events: the SRQ limit is
    /// counted and armed again (the senders' credits should keep it from
    /// firing; `rnr_retry` covers the rest), a queue pair error breaks that
    /// peer's connection (made again on next use), a port or device error
    /// is logged.
    pub(super) fn handle_async_events(&self) {
        for ev in self.dev.ctx.async_events() {
            match ev {
                AsyncEvent::SrqLimit => {
                    let n = self.counters.srq_limit_events.fetch_add(1, Ordering::Relaxed);
                    if n == 0 {
                        tracing::warn!(
                            "verbs: the shared receive queue ran below a quarter of its {} \
                             buffers (senders retry on receiver-not-ready)",
                            self.srq.count()
                        );
                    }
                    if let Err(e) = self.srq.arm_limit() {
                        tracing::warn!("verbs: {e}");
                    }
                }
                AsyncEvent::QpError(qpn, kind) => {
                    let hit = self.peers.lock().ok().and_then(|peers| {
                        peers
                            .iter()
                            .find(|(_, p)| p.qp.qpn == qpn)
                            .map(|(&r, p)| (r, p.generation))
                    });
                    if let Some((rank, generation)) = hit {
                        self.broken(rank, generation, &format!("async event {kind} on the queue pair"));
                    }
                }
                AsyncEvent::Fatal(kind) => {
                    tracing::error!("verbs: device {}: async event {kind} (port or device error)", self.dev.choice.device.name)
                }
                AsyncEvent::Other(kind) => tracing::debug!("verbs: async event {kind}"),
            }
        }
    }

    /// Byte order of fetched atomic results on this NIC (self-test).
    pub fn byte_order(&self) -> ByteOrder {
        self.order
    }

    /// A staging slot, driving progress until one frees (bounded).
    pub(super) fn take_slot(&self) -> Result<usize> {
        if let Some(s) = self.staging.try_take() {
            return Ok(s);
        }
        let what = || "a free staging slot (operations are not completing)".to_string();
        let mut w = Waiter::new(self.timeout, &what);
        loop {
            self.progress()?;
            if let Some(s) = self.staging.try_take() {
                return Ok(s);
            }
            w.step()?;
        }
    }

    /// Records `op` and posts it with `post(qp, wr_id)`; the op's sink
    /// counts one part from here until its completion is read. A full op
    /// table or send queue drives progress and retries (bounded); a post
    /// that fails gives the slot back and counts the part done.
    pub(super) fn post_op(
        &self,
        qp: &RcQp,
        generation: u16,
        op: Op,
        mut post: impl FnMut(&RcQp, u64) -> Result<()>,
    ) -> Result<()> {
        let kind = op.kind;
        let target = op.target;
        op.sink.add();
        let mut op = op;
        let what = || format!("posting to rank {target} (queue full; is the peer alive?)");
        let mut w = Waiter::new(self.timeout, &what);
        let slot = loop {
            match self.ops.insert(op) {
                Ok(s) => break s,
                Err(back) => {
                    op = back;
                    let r = self.progress().and_then(|_| w.step());
                    if let Err(e) = r {
                        self.abandon(op);
                        return Err(e.awaiting(target));
                    }
                }
            }
        };
        let id = WrId {
            generation,
            kind,
            slot,
        }
        .encode()
        .ok_or_else(|| Error::InvalidArgument("op slot does not fit a work request id".into()));
        let id = match id {
            Ok(id) => id,
            Err(e) => {
                if let Some(op) = self.ops.cancel(slot) {
                    self.abandon(op);
                }
                return Err(e);
            }
        };
        loop {
            match post(qp, id) {
                Ok(()) => return Ok(()),
                Err(e) if e.errno() == Some(nix::libc::ENOMEM) => {
                    // The send queue is full: completions free it.
                    if let Err(e2) = self.progress().and_then(|_| w.step()) {
                        if let Some(op) = self.ops.cancel(slot) {
                            self.abandon(op);
                        }
                        return Err(e2);
                    }
                }
                Err(e) => {
                    if let Some(op) = self.ops.cancel(slot) {
                        self.abandon(op);
                    }
                    return Err(e);
                }
            }
        }
    }

    /// An op that was never posted: its part counted done, its slot back.
    fn abandon(&self, op: Op) {
        if let Some(s) = op.slot {
            self.staging.give(s);
        }
        op.sink.deliver(0, &[]);
    }

    /// Applies one completion; `true` when it was work for this process's
    /// CPU (a message or handshake received), `false` for the completion of
    /// one of its own operations.
    fn complete(&self, wc: &Wc) -> bool {
        let Some(id) = WrId::decode(wc.wr_id) else {
            self.ops.take(u64::MAX, 0);
            return false;
        };
        match id.kind {
            // Told apart by the slot, not the opcode (undefined in an
            // error completion): our datagrams are sent with MAX_SLOT.
            OpKind::Handshake if id.slot == WrId::MAX_SLOT => {
                if wc.status != rdma_sys::IBV_WC_SUCCESS {
                    // A failed send moves a UD queue pair to the
                    // send-queue-error state: back to RTS, or no datagram
                    // of ours would leave again.
                    let mut why = format!("a handshake datagram completed with {}", wc.status_text());
                    if let Err(e) = self.ud.recover() {
                        why = format!("{why}; {e}");
                    }
                    self.handshake_failed(why);
                }
                true
            }
            OpKind::Handshake => {
                let slot = usize::try_from(id.slot).unwrap_or(usize::MAX);
                let hello = (wc.status == rdma_sys::IBV_WC_SUCCESS)
                    .then(|| self.ud.datagram(slot, wc.byte_len as usize))
                    .flatten();
                // Flushed: the queue pair is in the error state (torn
                // down), a buffer posted again would come straight back.
                if wc.status != rdma_sys::IBV_WC_WR_FLUSH_ERR {
                    if let Err(e) = self.ud.repost(slot) {
                        self.handshake_failed(format!("reposting a handshake buffer: {e}"));
                    }
                }
                if let Some(h) = hello {
                    self.on_hello(&h);
                }
                true
            }
            OpKind::Recv if wc.opcode == rdma_sys::IBV_WC_RECV => {
                self.on_message(wc, id);
                true
            }
            _ => {
                self.on_op(wc, id);
                false
            }
        }
    }

    fn on_op(&self, wc: &Wc, id: WrId) {
        if id.slot & super::lean::LEAN != 0 {
            return self.on_lean(wc, id);
        }
        let Some(op) = self.ops.take(id.slot, id.generation) else {
            return;
        };
        if wc.status != rdma_sys::IBV_WC_SUCCESS {
            let gone = super::lean::peer_gone(wc.status);
            let message = super::lean::failure(op.kind, op.target, wc.status);
            self.broken(op.target, op.generation, &message);
            if let Some(s) = op.slot {
                self.staging.give(s);
            }
            let mut op = op;
            if let Some(failed) = op.on_fail.take() {
                let what = format!("{:?} to rank {}", op.kind, op.target);
                failed(if gone {
                    Error::peer_unreachable(op.target, what, message.clone())
                } else {
                    Error::backend("verbs", "ibv_poll_cq", what, wc.status as i32, message.clone())
                });
            }
            if gone {
                op.sink.fail_peer_gone(op.target, message);
            } else {
                op.sink.fail(message);
            }
            return;
        }
        if op.copy > 0 {
            // Small results (atomics, 8-byte gets) through the stack.
            let mut small = [0u8; 64];
            let mut large = Vec::new();
            let bytes: &mut [u8] = if op.copy <= small.len() {
                &mut small[..op.copy]
            } else {
                large.resize(op.copy, 0);
                &mut large
            };
            let drained = match op.slot {
                Some(s) => self.staging.drain(s, bytes),
                None => Err(Error::InvalidArgument("a fetch without a slot".into())),
            };
            if let Some(s) = op.slot {
                self.staging.give(s);
            }
            match drained {
                Ok(()) => {
                    if op.atomic_result {
                        for w in bytes.chunks_exact_mut(8) {
                            let mut b = [0u8; 8];
                            b.copy_from_slice(w);
                            w.copy_from_slice(&self.order.fix(u64::from_ne_bytes(b)).to_ne_bytes());
                        }
                    }
                    op.sink.deliver(op.at, bytes);
                }
                Err(e) => op.sink.fail(e.to_string()),
            }
        } else {
            if let Some(s) = op.slot {
                self.staging.give(s);
            }
            op.sink.deliver(0, &[]);
        }
    }

    fn on_message(&self, wc: &Wc, id: WrId) {
        let slot = usize::try_from(id.slot).unwrap_or(usize::MAX);
        let len = wc.byte_len as usize;
        let mut buf = vec![0u8; MAX_MESSAGE];
        let ok = wc.status == rdma_sys::IBV_WC_SUCCESS
            && len <= MAX_MESSAGE
            && self.srq.message(slot, &mut buf[..len]).is_some();
        if let Err(e) = self.srq.repost(slot) {
            tracing::warn!("reposting a receive buffer: {e}");
        }
        if !ok {
            self.counters.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let receiver = self.receiver.read().ok().and_then(|r| r.clone());
        let Some(receiver) = receiver else {
            self.counters.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        };
        self.counters.received.bump();
        if let Some((to, n)) = receiver.receive(&mut buf, len) {
            let reply = buf.get(..n).unwrap_or(&[]);
            let sent = if self.is_connected(to) {
                Ok(())
            } else {
                receiver.resolve(to)
            }
            .and_then(|()| self.post_send(to, reply, Sink::counter(Arc::new(Completion::new())), None));
            if let Err(e) = sent {
                self.counters.dropped.fetch_add(1, Ordering::Relaxed);
                tracing::warn!("a reply to rank {to} could not be sent: {e}");
            }
        }
    }

    /// Posts a SEND of `bytes` to `target` (copied: `bytes` may be reused
    /// at once); `sink` counts it, `on_fail` hears of a failure after the
    /// post.
    fn post_send(
        &self,
        target: usize,
        bytes: &[u8],
        sink: Sink,
        on_fail: Option<crate::transport::SendFailed>,
    ) -> Result<()> {
        // The SRQ's buffers are MAX_MESSAGE bytes (`Caps::max_message`).
        crate::transport::check_message(target, bytes.len(), MAX_MESSAGE)?;
        let (qp, generation) = self.qp_for(target)?;
        let slot = self.take_slot()?;
        self.staging.fill(slot, bytes)?;
        let local = self.staging.local(slot, bytes.len())?;
        self.counters.sends.bump();
        self.counters.send_bytes.add(bytes.len() as u64);
        self.post_op(
            &qp,
            generation,
            Op {
                target,
                generation,
                kind: OpKind::Send,
                slot: Some(slot),
                sink,
                at: 0,
                copy: 0,
                atomic_result: false,
                on_fail,
            },
            |qp, id| qp.post_send(id, local),
        )
    }

    /// Writes `data` (chunked by slots) to `dst`; `sink` counts each chunk.
    fn post_writes(&self, target: usize, data: &[u8], dst: RemoteAddr, sink: &Sink) -> Result<()> {
        let (qp, generation) = self.qp_for(target)?;
        let inline = qp.max_inline as usize;
        if data.len() <= inline && !data.is_empty() {
            let local = Local {
                addr: data.as_ptr() as u64,
                len: u32::try_from(data.len()).unwrap_or(0),
                lkey: 0,
            };
            self.count_write(data.len());
            return self.post_op(
                &qp,
                generation,
                self.op(target, generation, OpKind::Write, None, sink.clone()),
                // Inline: the device copies `data` during the post.
                |qp, id| qp.post_write(id, local, dst),
            );
        }
        let chunks: Vec<&[u8]> = if data.is_empty() {
            vec![data]
        } else {
            data.chunks(SLOT_BYTES).collect()
        };
        let mut off = 0u64;
        for chunk in chunks {
            let slot = self.take_slot()?;
            if let Err(e) = self.staging.fill(slot, chunk) {
                self.staging.give(slot);
                return Err(e);
            }
            let local = self.staging.local(slot, chunk.len())?;
            let at = RemoteAddr {
                addr: dst.addr.wrapping_add(off),
                key: dst.key,
            };
            self.count_write(chunk.len());
            self.post_op(
                &qp,
                generation,
                self.op(target, generation, OpKind::Write, Some(slot), sink.clone()),
                |qp, id| qp.post_write(id, local, at),
            )?;
            off += chunk.len() as u64;
        }
        Ok(())
    }

    fn count_write(&self, n: usize) {
        self.counters.writes.bump();
        self.counters.bytes_written.add(n as u64);
    }

    fn count_read(&self, n: usize) {
        self.counters.reads.bump();
        self.counters.bytes_read.add(n as u64);
    }

    fn op(&self, target: usize, generation: u16, kind: OpKind, slot: Option<usize>, sink: Sink) -> Op {
        Op {
            target,
            generation,
            kind,
            slot,
            sink,
            at: 0,
            copy: 0,
            atomic_result: false,
            on_fail: None,
        }
    }

    /// Reads `len` bytes from `src` (chunked by slots) into `dst` from
    /// byte `at` on.
    fn post_reads(&self, target: usize, len: usize, src: RemoteAddr, dst: &InFlight) -> Result<()> {
        self.post_reads_at(target, 0, len, src, dst)
    }

    /// As `post_reads`, into `dst` from byte `base`.
    fn post_reads_at(
        &self,
        target: usize,
        base: usize,
        len: usize,
        src: RemoteAddr,
        dst: &InFlight,
    ) -> Result<()> {
        let (qp, generation) = self.qp_for(target)?;
        let mut off = 0usize;
        while off < len || (len == 0 && off == 0) {
            let n = (len - off).min(SLOT_BYTES);
            let slot = self.take_slot()?;
            let local = self.staging.local(slot, n)?;
            let from = RemoteAddr {
                addr: src.addr.wrapping_add(off as u64),
                key: src.key,
            };
            self.count_read(n);
            let mut op = self.op(target, generation, OpKind::Read, Some(slot), dst.sink());
            op.at = base + off;
            op.copy = n;
            self.post_op(&qp, generation, op, |qp, id| qp.post_read(id, local, from))?;
            if len == 0 {
                break;
            }
            off += n;
        }
        Ok(())
    }

    /// Checks that `what` on `dst` is one the NIC does.
    fn check_native(&self, op: AtomicOp, datatype: Datatype, dst: RemoteAddr, n: usize) -> Result<()> {
        if !self.caps.native_atomics || !super::atomic::native(op, datatype, dst.addr) {
            return Err(unsupported(format!(
                "{op:?} on {datatype:?} at {:#x} ({n} elements)",
                dst.addr
            )));
        }
        Ok(())
    }

    /// Posts one FETCH_AND_ADD per element of `data` (u64 words); the
    /// fetched values go to `result` when given.
    fn post_fetch_adds(
        &self,
        target: usize,
        data: &[u8],
        dst: RemoteAddr,
        sink: &Sink,
        fetch: bool,
    ) -> Result<()> {
        let (qp, generation) = self.qp_for(target)?;
        for (i, w) in data.chunks_exact(8).enumerate() {
            let mut b = [0u8; 8];
            b.copy_from_slice(w);
            let add = u64::from_le_bytes(b);
            let slot = self.take_slot()?;
            let local = self.staging.local(slot, 8)?;
            let at = RemoteAddr {
                addr: dst.addr.wrapping_add(8 * i as u64),
                key: dst.key,
            };
            let mut op = self.op(target, generation, OpKind::FetchAdd, Some(slot), sink.clone());
            if fetch {
                op.at = 8 * i;
                op.copy = 8;
                op.atomic_result = true;
            }
            self.counters.atomics.bump();
            self.counters.fetch_add.bump();
            self.post_op(&qp, generation, op, |qp, id| qp.post_fetch_add(id, local, at, add))?;
        }
        Ok(())
    }

    fn atomic_args(&self, what: Atomic, data: &[u8], dst: RemoteAddr) -> Result<()> {
        self.check_native(what.op, what.datatype, dst, what.count)?;
        if what.op != AtomicOp::Sum || data.len() != 8 * what.count {
            return Err(unsupported(format!(
                "{:?} of {} bytes for {} elements",
                what.op,
                data.len(),
                what.count
            )));
        }
        Ok(())
    }

    fn block_on(&self, done: &Completion, what: &dyn Fn() -> String) -> Result<()> {
        self.wait(done, what)
    }

    /// Whether a blocking put or get of `len` bytes registers the caller's
    /// buffer (`ONESIDED_ZCOPY_ABOVE`): one work request must carry it.
    fn zero_copy(&self, len: usize) -> bool {
        self.zcopy_above > 0 && len >= self.zcopy_above && u32::try_from(len).is_ok()
    }

    /// The registration cache, made on first use (`None`: there can be
    /// none here; logged once).
    pub(super) fn regcache(&self) -> Option<&RegCache<Arc<Mr>>> {
        self.regcache.get_or_init(|| open_regcache(self.mr_cache)).as_ref()
    }

    /// The caller's buffer `[addr, addr + len)` registered for local
    /// access: from the registration cache, or registered now (and cached
    /// when the cache can watch it). `None` when registration fails even
    /// after the cache released what no operation uses (the locked-memory
    /// limit) or the memory is read-only: the caller copies instead.
    fn user_region(&self, addr: *mut u8, len: usize) -> Option<Arc<Mr>> {
        let a = addr as usize;
        if let Some(mr) = self.regcache().and_then(|c| c.get(a, len)) {
            return Some(mr);
        }
        let register = || {
            // SAFETY: local access only: the device reaches the region
            // only through requests this back-end posts with its key, and
            // it posts them only inside a `put` or `get` that borrows the
            // buffer (`zero_copy_op`). A cached region outlives that borrow
            // but stays unreachable, and is forgotten as soon as its memory
            // is unmapped, moved or emptied (`transport/regcache.rs`); the
            // pinned pages stay allocated until it is deregistered.
            unsafe { Mr::register(&self.dev, addr, len, Access::LOCAL) }
        };
        let mr = match register() {
            Ok(mr) => mr,
            Err(e) if out_of_pinnable(&e) && self.release_cached() > 0 => register().ok()?,
            Err(_) => return None,
        };
        let mr = Arc::new(mr);
        if let Some(c) = self.regcache() {
            c.insert(a, len, mr.clone());
        }
        Some(mr)
    }

    /// Drops the cached registrations no operation is using (to make room
    /// under the locked-memory limit); how many.
    pub(super) fn release_cached(&self) -> usize {
        self.regcache
            .get()
            .and_then(Option::as_ref)
            .map_or(0, |c| c.remove(|mr| Arc::strong_count(mr) == 1))
    }

    /// Posts one work request on the caller's buffer `at` (address and
    /// length) inside `mr` with `post` and waits for it. Once this returns,
    /// the device cannot reach the buffer: a region that only this call
    /// holds is deregistered (also after a failure or a timeout); one the
    /// registration cache keeps has local access only, and a request of
    /// this call still in flight after a failure is ended first (its queue
    /// pair to the error state, then its flushed completion awaited). A
    /// failed call's region leaves the cache.
    fn zero_copy_op(
        &self,
        target: usize,
        mr: Arc<Mr>,
        (addr, len): (usize, usize),
        kind: OpKind,
        what: &dyn Fn() -> String,
        post: impl Fn(&RcQp, u64, Local) -> Result<()>,
    ) -> Result<()> {
        let local = addr.checked_sub(mr.addr as usize).and_then(|off| Local::of(&mr, off, len));
        let Some(local) = local else {
            return Err(Error::InvalidArgument(format!("{}: too long for one request", what())));
        };
        self.counters.zero_copy.bump();
        let mut last: Option<(Arc<Completion>, Arc<RcQp>, u16)> = None;
        let done = again_if_not_executed(|| {
            let (qp, generation) = self.qp_for(target)?;
            if kind == OpKind::Read {
                self.count_read(len);
            } else {
                self.count_write(len);
            }
            let done = Arc::new(Completion::new());
            last = Some((done.clone(), qp.clone(), generation));
            let op = self.op(target, generation, kind, None, Sink::counter(done.clone()));
            self.post_op(&qp, generation, op, |qp, id| post(qp, id, local))?;
            self.block_on(&done, what)
        });
        if let (Err(e), Some((d, qp, generation))) = (&done, &last) {
            if d.pending() > 0 {
                // Timed out with the request in flight: the pair to the
                // error state flushes it (as for a lean request).
                self.give_up_on(target, *generation, qp, e);
            }
        }
        if done.is_err() {
            if let Some(c) = self.regcache.get().and_then(Option::as_ref) {
                c.remove(|m| Arc::ptr_eq(m, &mr));
            }
        }
        let mr = match Arc::try_unwrap(mr) {
            Ok(mr) => mr,
            Err(kept) => {
                // Cached, or in use by another call on the same buffer:
                // the region stays registered (local access only). A
                // request of ours still in flight ends (flushed) before the
                // caller's borrow does.
                if let Some((d, _, _)) = last.filter(|(d, _, _)| d.pending() > 0) {
                    while d.pending() > 0 {
                        let _ = self.progress();
                        std::thread::yield_now();
                    }
                }
                drop(kept);
                return done;
            }
        };
        // Deregistered before the caller's borrow ends: from then on the
        // device cannot reach the buffer, even with the operation still in
        // flight after a timeout.
        if let Err(e) = mr.deregister() {
            // Still registered: the borrow must not end while the device
            // may use the buffer. The pair moved to the error state
            // completes the request at once (flushed) if it is still in
            // flight, so wait for that completion.
            if let Some((d, qp, generation)) = last.filter(|(d, _, _)| d.pending() > 0) {
                tracing::error!("{}: {e}; ending the operation before returning", what());
                self.give_up_on(target, generation, &qp, &e);
                while d.pending() > 0 {
                    let _ = self.progress();
                    std::thread::yield_now();
                }
            }
            return done.and(Err(e));
        }
        done
    }

    /// A blocking read into `out` through a result buffer
    /// ([`crate::transport::inflight::read_into`]).
    fn fetch_into(
        &self,
        out: &mut [u8],
        what: &dyn Fn() -> String,
        post: impl FnOnce(&InFlight) -> Result<()>,
    ) -> Result<()> {
        // Waits on the buffer's own count: it is the last one a delivery
        // decrements (a group count reaches zero a moment earlier, when the
        // buffer cannot be given back yet).
        crate::transport::inflight::read_into(out, |buf| {
            post(buf)?;
            self.block_on(buf.completion(), what)
        })
    }
}

/// Ends the message of an operation that failed only because an earlier
/// failure broke its queue pair (flushed, or the pair was made again while
/// it was in flight): the operation itself was not at fault.
pub(super) const NOT_EXECUTED: &str =
    "; not executed: an earlier failure broke the connection, the next operation makes a new one";

/// Attempts of a blocking put or get whose queue pair an earlier failure
/// broke (each attempt after the first runs on a new pair).
const ATTEMPTS: usize = 6;

/// Runs blocking put or get `f` again while it fails only because an
/// earlier operation broke its queue pair (a peer's error on the same pair
/// must not fail a collective's flag write or read: issue 12's "a failed
/// access never poisons a peer"). Puts and gets may run twice: they write
/// or read the same bytes again.
/// Whether a registration failed for want of pinnable memory (the
/// locked-memory limit: `ENOMEM`, `EAGAIN`), which releasing cached
/// registrations can cure — unlike read-only memory (`EFAULT`).
fn out_of_pinnable(e: &Error) -> bool {
    matches!(e.errno(), Some(nix::libc::ENOMEM | nix::libc::EAGAIN))
}

/// The registration cache's bounds from `config`.
fn cache_limits(config: &Config) -> Limits {
    let bytes = match config.mr_cache_bytes {
        0 => {
            const MAX: usize = 1 << 30;
            match rustix::process::getrlimit(rustix::process::Resource::Memlock).current {
                Some(limit) => usize::try_from(limit / 4).unwrap_or(MAX).min(MAX),
                None => MAX,
            }
        }
        n => n,
    };
    Limits {
        entries: config.mr_cache,
        bytes,
    }
}

/// A registration cache within `limits`, or `None` (logged).
fn open_regcache(limits: Limits) -> Option<RegCache<Arc<Mr>>> {
    match RegCache::new(limits) {
        Ok(c) => Some(c),
        Err(why) => {
            tracing::info!("native verbs: no registration cache for callers' buffers: {why}");
            None
        }
    }
}

fn again_if_not_executed(mut f: impl FnMut() -> Result<()>) -> Result<()> {
    let mut n = 1;
    loop {
        match f() {
            Err(e) if n < ATTEMPTS && e.to_string().contains(NOT_EXECUTED) => {
                // Both ends may be making the pair again at once (the peer
                // after its own failed operations): back off 1, 2, 4, ...
                // ms so that one handshake completes before the next
                // attempt (a CI run in the guest once saw four back-to-back
                // attempts of a barrier flag all flushed).
                std::thread::sleep(std::time::Duration::from_millis(1 << (n - 1)));
                n += 1;
            }
            r => return r,
        }
    }
}

pub(super) fn poisoned() -> Error {
    Error::InvalidArgument("verbs peer table lock poisoned".into())
}

impl Transport for VerbsTransport {
    fn stats(&self) -> TransportStats {
        let c = &self.counters;
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let cache = self.regcache.get().and_then(Option::as_ref).map(RegCache::stats).unwrap_or_default();
        TransportStats {
            ops_in_flight: self.ops.in_flight() + self.cells.in_flight(),
            rejected_completions: self.ops.rejected(),
            stale_completions: self.ops.stale(),
            sends: c.sends.get(),
            send_bytes: c.send_bytes.get(),
            messages_received: c.received.get(),
            messages_dropped: l(&c.dropped),
            op_slots: self.ops.capacity(),
            op_slots_exhausted: self.ops.exhausted(),
            writes: c.writes.get(),
            reads: c.reads.get(),
            atomics: c.atomics.get(),
            bytes_written: c.bytes_written.get(),
            bytes_read: c.bytes_read.get(),
            bytes_atomic: 8 * c.atomics.get(),
            nic_fetch_add: c.fetch_add.get(),
            nic_compare_swap: c.compare_swap.get(),
            connections: l(&c.connections),
            reconnections: l(&c.reconnections),
            srq_limit_events: l(&c.srq_limit_events),
            zero_copy: c.zero_copy.get(),
            lean: c.lean.get(),
            mr_cache_hits: cache.hits,
            mr_cache_inserted: cache.inserted,
            mr_cache_invalidated: cache.invalidated,
            agent_stand_downs: 0,
        }
    }

    fn caps(&self) -> &Caps {
        &self.caps
    }

    fn card(&self) -> &[u8] {
        &self.card
    }

    fn connect(&self, rank: usize, card: &[u8]) -> Result<()> {
        if rank == self.rank {
            return Ok(());
        }
        let card = Card::decode(card, rank)?;
        self.ensure(rank, Some(card)).map(|_| ())
    }

    fn is_connected(&self, rank: usize) -> bool {
        self.peers
            .lock()
            .map(|p| p.contains_key(&rank))
            .unwrap_or(false)
    }

    fn peer_count(&self) -> usize {
        // Our own loopback pair is not a peer.
        self.peers
            .lock()
            .map(|p| p.keys().filter(|&&r| r != self.rank).count())
            .unwrap_or(0)
    }

    fn register(&self, mem: &Memory<'_>) -> Result<Registration> {
        let access = Access {
            remote_write: true,
            remote_read: true,
            remote_atomic: self.dev.choice.device.has_atomics(),
        };
        if mem.is_empty() {
            // Nothing can be accessed; a one-page region of our own keeps
            // the key valid.
            let own = Memory::allocate(8)?;
            // SAFETY: `own` is kept in the registration's handle after the
            // region (tuple drop order: region first).
            let mr = unsafe { Mr::register(&self.dev, own.as_ptr(), 8, access)? };
            let key = u64::from(mr.rkey);
            return Ok(Registration::new(key, mem.addr(), Box::new((mr, own))));
        }
        // SAFETY: the caller's `Memory` is registered for as long as the
        // returned registration lives, and a window's registration holds
        // its memory (`Registration::holding`); peers' writes reach it only
        // through the device, and the library reads it only through
        // `Memory`'s copies.
        let register = || unsafe { Mr::register(&self.dev, mem.as_ptr(), mem.len(), access) };
        let mr = match register() {
            Ok(mr) => mr,
            // The locked-memory limit: cached registrations of callers'
            // buffers give way to a window's.
            Err(e) if out_of_pinnable(&e) && self.release_cached() > 0 => register()?,
            Err(e) => return Err(e),
        };
        let key = u64::from(mr.rkey);
        Ok(Registration::new(key, mem.addr(), Box::new(mr)))
    }

    fn put(&self, target: usize, data: &[u8], dst: RemoteAddr) -> Result<()> {
        let what = || format!("a put of {} bytes to rank {target}", data.len());
        if self.zero_copy(data.len()) {
            if let Some(mr) = self.user_region(data.as_ptr().cast_mut(), data.len()) {
                let at = (data.as_ptr() as usize, data.len());
                return self.zero_copy_op(target, mr, at, OpKind::Write, &what, |qp, id, local| {
                    qp.post_write(id, local, dst)
                });
            }
            // Read-only memory registers with no access right at all.
            // SAFETY: `data` is borrowed for this call and unchanged through
            // it (shared borrow); `zero_copy_op` deregisters before it
            // returns (this region is never cached).
            let mr = unsafe { Mr::register_source(&self.dev, data.as_ptr(), data.len()) };
            if let Ok(mr) = mr {
                let at = (data.as_ptr() as usize, data.len());
                return self.zero_copy_op(target, Arc::new(mr), at, OpKind::Write, &what, |qp, id, local| {
                    qp.post_write(id, local, dst)
                });
            }
        }
        if !data.is_empty() && data.len() <= SLOT_BYTES {
            return again_if_not_executed(|| {
                self.count_write(data.len());
                self.lean(target, OpKind::Write, Source::Put(data), Fetched::Nothing, &what, |qp, id, local| {
                    qp.post_write(id, local, dst)
                })
            });
        }
        again_if_not_executed(|| {
            with_own(|done| {
                self.post_writes(target, data, dst, &Sink::counter(done.clone()))?;
                self.block_on(done, &what)
            })
        })
    }

    fn get(&self, target: usize, buf: &mut [u8], src: RemoteAddr) -> Result<()> {
        let len = buf.len();
        let what = || format!("a get of {len} bytes from rank {target}");
        if self.zero_copy(len) {
            // `buf` is borrowed mutably for this call, so nothing else
            // reads or writes it while the device may.
            if let Some(mr) = self.user_region(buf.as_mut_ptr(), len) {
                let at = (buf.as_ptr() as usize, len);
                return self.zero_copy_op(target, mr, at, OpKind::Read, &what, |qp, id, local| {
                    qp.post_read(id, local, src)
                });
            }
        }
        if len > 0 && len <= SLOT_BYTES {
            return again_if_not_executed(|| {
                self.count_read(len);
                self.lean(target, OpKind::Read, Source::Slot(len), Fetched::Bytes(&mut *buf), &what, |qp, id, local| {
                    qp.post_read(id, local, src)
                })
            });
        }
        again_if_not_executed(|| self.fetch_into(buf, &what, |b| self.post_reads(target, len, src, b)))
    }

    fn put_scatter(&self, target: usize, data: &[u8], dst: &[(RemoteAddr, usize)]) -> Result<()> {
        // Every range's writes posted (a work request each: one remote
        // range per request), then one wait for all of them.
        crate::transport::check_ranges(data.len(), dst)?;
        again_if_not_executed(|| {
            let done = Arc::new(Completion::new());
            let sink = Sink::counter(done.clone());
            let mut at = 0;
            for &(d, n) in dst {
                if n > 0 {
                    self.post_writes(target, &data[at..at + n], d, &sink)?;
                }
                at += n;
            }
            let what = || {
                format!(
                    "a put of {} bytes in {} ranges to rank {target}",
                    data.len(),
                    dst.len()
                )
            };
            self.block_on(&done, &what)
        })
    }

    fn get_gather(&self, target: usize, buf: &mut [u8], src: &[(RemoteAddr, usize)]) -> Result<()> {
        crate::transport::check_ranges(buf.len(), src)?;
        let len = buf.len();
        let what = || format!("a get of {len} bytes in {} ranges from rank {target}", src.len());
        again_if_not_executed(|| {
            self.fetch_into(buf, &what, |b| {
                let mut at = 0;
                for &(s, n) in src {
                    if n > 0 {
                        self.post_reads_at(target, at, n, s, b)?;
                    }
                    at += n;
                }
                Ok(())
            })
        })
    }

    fn put_async(&self, target: usize, src: &InFlight, dst: RemoteAddr) -> Result<()> {
        let mut data = vec![0u8; src.len()];
        // SAFETY: the InFlight owns its buffer (alive while `src` is) and
        // nobody writes it while a put from it is being posted.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), data.as_mut_ptr(), data.len()) };
        self.post_writes(target, &data, dst, &src.sink())
    }

    fn get_async(&self, target: usize, dst: &InFlight, src: RemoteAddr) -> Result<()> {
        self.post_reads(target, dst.len(), src, dst)
    }

    fn put_signal(&self, target: usize, value: u64, dst: RemoteAddr) -> Result<()> {
        self.put(target, &value.to_ne_bytes(), dst)
    }

    fn atomic(&self, target: usize, what: Atomic, data: &[u8], dst: RemoteAddr) -> Result<()> {
        self.atomic_args(what, data, dst)?;
        if let Ok(add) = <[u8; 8]>::try_from(data) {
            let w = || format!("an atomic {:?} at rank {target}", what.op);
            return self.lean_fetch_add(target, add, dst, Fetched::Nothing, &w);
        }
        with_own(|done| {
            self.post_fetch_adds(target, data, dst, &Sink::counter(done.clone()), false)?;
            let w = || format!("an atomic {:?} of {} elements at rank {target}", what.op, what.count);
            self.block_on(done, &w)
        })
    }

    fn fetch_atomic(
        &self,
        target: usize,
        what: Atomic,
        data: &[u8],
        result: &mut [u8],
        dst: RemoteAddr,
    ) -> Result<()> {
        self.atomic_args(what, data, dst)?;
        if result.len() != data.len() {
            return Err(Error::InvalidArgument(format!(
                "fetch_atomic: result of {} bytes for {} bytes of operands",
                result.len(),
                data.len()
            )));
        }
        let w = || format!("a fetching atomic {:?} at rank {target}", what.op);
        if let Ok(add) = <[u8; 8]>::try_from(data) {
            return self.lean_fetch_add(target, add, dst, Fetched::Word(result), &w);
        }
        self.fetch_into(result, &w, |b| {
            self.post_fetch_adds(target, data, dst, &b.sink(), true)
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
        self.check_native(AtomicOp::Cswap, datatype, dst, 1)?;
        let word = |b: &[u8]| -> Result<u64> {
            let a: [u8; 8] = b
                .try_into()
                .map_err(|_| Error::InvalidArgument("compare-and-swap needs 8-byte operands".into()))?;
            Ok(u64::from_le_bytes(a))
        };
        let (c, s) = (word(compare)?, word(swap)?);
        if result.len() != 8 {
            return Err(Error::InvalidArgument("compare-and-swap needs an 8-byte result".into()));
        }
        let w = || format!("a compare-and-swap at rank {target}");
        self.counters.atomics.bump();
        self.counters.compare_swap.bump();
        self.lean(target, OpKind::CmpSwap, Source::Slot(8), Fetched::Word(result), &w, |qp, id, local| {
            qp.post_cmp_swap(id, local, dst, c, s)
        })
    }

    fn atomic_async(
        &self,
        target: usize,
        what: Atomic,
        src: &InFlight,
        dst: RemoteAddr,
    ) -> Result<()> {
        let mut data = vec![0u8; src.len()];
        // SAFETY: as in `put_async`.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), data.as_mut_ptr(), data.len()) };
        self.atomic_args(what, &data, dst)?;
        self.post_fetch_adds(target, &data, dst, &src.sink(), false)
    }

    fn fetch_atomic_async(
        &self,
        target: usize,
        what: Atomic,
        data: Vec<u8>,
        result: &InFlight,
        dst: RemoteAddr,
    ) -> Result<()> {
        self.atomic_args(what, &data, dst)?;
        if result.len() != data.len() {
            return Err(Error::InvalidArgument(format!(
                "fetch_atomic: result of {} bytes for {} bytes of operands",
                result.len(),
                data.len()
            )));
        }
        self.post_fetch_adds(target, &data, dst, &result.sink(), true)
    }

    fn send(&self, target: usize, bytes: &[u8]) -> Result<()> {
        with_own(|done| {
            self.post_send(target, bytes, Sink::counter(done.clone()), None)?;
            let what = || format!("a message of {} bytes to rank {target}", bytes.len());
            self.block_on(done, &what)
        })
    }

    fn send_posted(
        &self,
        target: usize,
        bytes: &[u8],
        failed: crate::transport::SendFailed,
    ) -> Result<()> {
        // Nobody waits on this tracker: the op's hook reports a failure.
        let done = Arc::new(Completion::new());
        self.post_send(target, bytes, Sink::counter(done), Some(failed))
    }

    fn set_receiver(&self, receiver: Arc<dyn Receiver>) {
        if let Ok(mut r) = self.receiver.write() {
            *r = Some(receiver);
        }
    }

    fn progress(&self) -> Result<usize> {
        // Asynchronous events are rare: looked at every 256th call, and
        // before the progress agent sleeps (`arm`), which their descriptor
        // wakes.
        if self.counters.progress_calls.fetch_add(1, Ordering::Relaxed) % 256 == 0 {
            self.handle_async_events();
        }
        // Completions are applied in the order read; the stash (completions
        // an arm found) is handed out before the device's. Counted: the
        // messages and handshakes served, not the completions of this
        // process's own RDMA operations (their posters wait for them; were
        // they counted, the progress agent would stay awake polling beside
        // every busy application thread instead of sleeping until a peer
        // needs it).
        let mut served = 0;
        self.cq.poll_each(super::cq::POLL_BATCH, |wc| {
            if self.complete(wc) {
                served += 1;
            }
        })?;
        Ok(served)
    }

    fn event_fds(&self) -> Vec<std::os::fd::BorrowedFd<'_>> {
        let mut fds: Vec<_> = self
            .cq
            .event_fd()
            .iter()
            // SAFETY: the fd belongs to the completion channel, which lives
            // as long as the CQ, i.e. as long as `self`.
            .map(|&fd| unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) })
            .collect();
        // SAFETY: the device context owns its async fd and lives as long
        // as `self` (through `dev`).
        fds.push(unsafe { std::os::fd::BorrowedFd::borrow_raw(self.dev.ctx.async_fd()) });
        fds
    }

    fn arm(&self) -> Result<bool> {
        self.handle_async_events();
        self.cq.arm()
    }

    fn wait(&self, done: &Completion, what: &dyn Fn() -> String) -> Result<()> {
        let mut r = crate::progress::wait::until(self, self.timeout, what, || Ok(done.pending() == 0));
        if let Err(e @ Error::Timeout { .. }) = &r {
            // An RDMA request needs no CPU at the target: one still in
            // flight this late means the peer's NIC or process is gone,
            // and rxe never ends such a request by itself. Its pair goes to
            // the error state (flushing every request on it, which gives
            // their op-table slots and staging back) and is made again on
            // the next contact — as for a lean request. Sends are left
            // alone: a receiver without buffers makes them wait legitimately.
            let awaited = self.ops.rdma_awaited_by(done);
            for &(target, generation) in &awaited {
                if let Some(qp) = self.pair_of(target, generation) {
                    self.give_up_on(target, generation, &qp, e);
                }
            }
            // The peer awaited, as a value (`Error::rank`), when it is one.
            if let Some(&(first, _)) = awaited.first() {
                if awaited.iter().all(|&(t, _)| t == first) {
                    r = r.map_err(|e| e.awaiting(first));
                }
            }
        }
        r?;
        done.check(what)
    }
}
