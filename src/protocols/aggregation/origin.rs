//! The origin side of aggregation (`docs/op-table.md`): small puts and
//! small software-path accumulates are queued per target in the window's
//! operation table and shipped as BATCH requests, which the target applies
//! in order and acknowledges ([`super::target`]).
//!
//! When batches ship: when one is full; when both pools are empty (the
//! cleanup, [`OpTable::queue`]); before an operation to the same target
//! that does not go through the table (a get, a fetching or large
//! accumulate: [`Aggregation::batches_before`]); and at every completion
//! point (flush family, unlock, unlock_all, fence, complete, free:
//! [`Aggregation::complete_batches`]), which then waits for every ack.
//!
//! Ordering: a batch is applied in order by one handler run, but two
//! batches may run at once at the target (two threads drain its CQ). So
//! with an `accumulate_ordering` other than `none` ([`Origin::ordered`]), a
//! batch holding accumulates (and any accumulate-family call that bypasses
//! the table) is sent only after the window's earlier batches were
//! acknowledged, and a get to a target waits for its queued operations to
//! be applied.
//!
//! This side depends on [`Origin`], a narrow context (transport, active
//! messages, the process's pools, the window's id and ordering), not on
//! the public `Window`.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use super::{wire, Entry, OpTable, Queued, Shared, TargetElem, ACCUMULATE, PUT};
use crate::config::AggregateMode;
use crate::error::{Error, Result};
use crate::progress::wait;
use crate::transport::am::{kind, ActiveMessages};
use crate::transport::inflight::Sink;
use crate::transport::{AtomicOp, Datatype, PerTarget, Transport};

/// What the origin side needs of a window: nothing more.
pub struct Origin<'c> {
    /// The back-end batches travel on.
    pub transport: &'c dyn Transport,
    /// The active-message layer (credits, replies).
    pub am: &'c ActiveMessages,
    /// The process's pools and counters.
    pub shared: &'c Shared,
    /// This process's rank.
    pub me: usize,
    /// The window's id (named in batches and errors).
    pub window: u64,
    /// `ONESIDED_TIMEOUT` (`None`: no bound), the bound of every wait here.
    pub timeout: Option<Duration>,
    /// Whether the window orders accumulates (`accumulate_ordering` other
    /// than `none`).
    pub ordered: bool,
}

/// A window's operation table and the acknowledgements of its batches.
///
/// Invariant (threads sharing a window): a target element taken out of the
/// table is counted in `shipping` before the table's mutex is released, and
/// leaves that count only after its batch's acknowledgement is counted in
/// `acks` (or its send failed). So a completion point that finds the table
/// empty, then `shipping` at zero, then waits for `acks` of a target,
/// covers every operation to that target queued before it — also those
/// another thread is still sending. Acknowledgements are counted per
/// target (`PerTarget`): a batch a stopped peer never acknowledges holds
/// up only the completion points that cover that peer.
///
/// `queued` is set (with the table's mutex held) whenever an operation is
/// put into the table, and cleared only by a completion point right before
/// it drains the table; an operation queued after the clearing sets it
/// again. The draining point counts itself in `shipping` from before it
/// clears `queued` until its drain ends: between the clearing and the
/// taking, the elements are in neither. So a completion point that finds
/// `queued` clear and then `shipping` at zero has nothing to drain or wait
/// for but `acks`, and skips the table (and its mutex): the common case of
/// a flush on a window whose operations all took another path. (Without
/// that count, a flush on one thread could pass while another thread's
/// drain had cleared the flag but not yet taken the flushing thread's put,
/// and its get read the old value: seen once in 2026-12 as a stale get in
/// tests/fast_path.rs over sockets.)
pub struct Aggregation {
    table: Mutex<OpTable>,
    acks: PerTarget,
    shipping: AtomicUsize,
    queued: AtomicBool,
    max_op: usize,
    /// Whether small puts and accumulates are queued (else only strided
    /// layout puts).
    small_ops: bool,
}

impl Aggregation {
    /// The table of window `id`, unless `ONESIDED_AGGREGATE=off`. Small
    /// puts and accumulates are queued only where aggregation is on for
    /// the back-end (`batch_small`, or `ONESIDED_AGGREGATE=on`); strided
    /// layout puts on every back-end (one message per ~500 tiny blocks
    /// beats a provider operation per block, even on a NIC).
    pub fn new(id: u64, shared: &Arc<Shared>, batch_small: bool) -> Option<Self> {
        let c = shared.config;
        (c.mode != AggregateMode::Off).then(|| Aggregation {
            table: Mutex::new(OpTable::new(id, shared.clone())),
            acks: PerTarget::default(),
            shipping: AtomicUsize::new(0),
            queued: AtomicBool::new(false),
            max_op: c.max_op,
            small_ops: super::enabled(c.mode, batch_small),
        })
    }

    fn table(&self, o: &Origin<'_>) -> Result<MutexGuard<'_, OpTable>> {
        self.table.lock().map_err(|_| {
            Error::InvalidArgument(format!("window {}: operation table poisoned", o.window))
        })
    }

    /// Whether an operation of `len` bytes to `rank` is queued.
    fn takes(&self, o: &Origin<'_>, rank: usize, len: usize) -> bool {
        self.small_ops && self.small(o, rank, len)
    }

    /// Whether `len` bytes to `rank` are small enough to be queued.
    fn small(&self, o: &Origin<'_>, rank: usize, len: usize) -> bool {
        len <= self.max_op && len > 0 && rank != o.me
    }

    /// How many `block`-byte blocks `stride` bytes apart one message of
    /// `room` bytes carries, and their wire shape, when `len` bytes of such
    /// blocks to `rank` travel strided (small blocks, a whole number of
    /// them, a stride no shorter than a block, not oneself); else `None`.
    fn strided_fit(
        &self,
        o: &Origin<'_>,
        rank: usize,
        (block, stride): (usize, usize),
        len: usize,
        room: usize,
    ) -> Option<(usize, wire::Stride)> {
        let per_message = room / block.max(1);
        let shape = wire::Stride {
            block: u32::try_from(block).ok()?,
            stride: u64::try_from(stride).ok()?,
        };
        let fits = self.small(o, rank, block) && per_message > 0 && stride >= block;
        (fits && len % block == 0).then_some((per_message, shape))
    }

    /// Queues a put of `data` at byte `off` of `rank`'s window if it is
    /// small enough; `Ok(false)` leaves it to the caller.
    ///
    /// # Errors
    /// A batch that had to ship first could not be sent, or a wait for
    /// another thread's batch ran out of time.
    pub fn queue_put(&self, o: &Origin<'_>, rank: usize, off: usize, data: &[u8]) -> Result<bool> {
        if !self.takes(o, rank, data.len()) {
            return Ok(false);
        }
        let e = Entry {
            class: PUT,
            op: None,
            datatype: None,
            offset: off as u64,
            data,
            strided: None,
        };
        self.queue(o, rank, &e)?;
        Ok(true)
    }

    /// Queues the blocks of a strided put — `data` is whole blocks of
    /// `block` bytes, block `i` going to byte `off + i × stride` of
    /// `rank`'s window — as strided entries, split where a batch fills up,
    /// if blocks are small enough to be queued (`max_op`) and one block
    /// fits a batch; `Ok(false)` leaves the whole put to the caller
    /// (nothing was queued then).
    ///
    /// # Errors
    /// As [`Aggregation::queue_put`].
    pub fn queue_strided(
        &self,
        o: &Origin<'_>,
        rank: usize,
        off: usize,
        (block, stride): (usize, usize),
        data: &[u8],
    ) -> Result<bool> {
        let room = o.shared.config.batch_bytes.saturating_sub(wire::HEADER_BYTES)
            .saturating_sub(wire::STRIDED_ENTRY_BYTES);
        let Some((per_entry, shape)) = self.strided_fit(o, rank, (block, stride), data.len(), room)
        else {
            return Ok(false);
        };
        for (k, chunk) in data.chunks(per_entry * block).enumerate() {
            let e = Entry {
                class: wire::STRIDED,
                op: None,
                datatype: None,
                offset: (off + k * per_entry * stride) as u64,
                data: chunk,
                strided: Some(shape),
            };
            self.queue(o, rank, &e)?;
        }
        Ok(true)
    }

    /// Reads `out.len() / block` blocks of `block` bytes, `stride` bytes
    /// apart from byte `off` of `rank`'s window, into `out` (packed) with
    /// strided-get requests (kind `GET`, one per reply's worth of blocks,
    /// issued together, then waited for together). `Ok(false)` leaves the
    /// read to the caller (blocks too large, a stride shorter than a block,
    /// or oneself); nothing was sent then. Operations queued for `rank`
    /// are shipped and acknowledged first, as before any get.
    ///
    /// # Errors
    /// A request could not be sent, the target refused one (it names why),
    /// or the replies did not come within `ONESIDED_TIMEOUT`.
    pub fn get_strided(
        &self,
        o: &Origin<'_>,
        rank: usize,
        off: usize,
        (block, stride): (usize, usize),
        out: &mut [u8],
    ) -> Result<bool> {
        let room = crate::transport::am::MAX_PAYLOAD;
        let Some((per_request, shape)) = self.strided_fit(o, rank, (block, stride), out.len(), room)
        else {
            return Ok(false);
        };
        self.batches_before(o, rank, true)?;
        let buf = crate::transport::inflight::InFlight::new(vec![0u8; out.len()], None);
        let sink = buf.sink();
        let id = o.window;
        let mut sent = Ok(());
        for (k, chunk) in out.chunks(per_request * block).enumerate() {
            let request = wire::GetRequest {
                window: id,
                offset: (off + k * per_request * stride) as u64,
                stride: shape,
                count: (chunk.len() / block) as u32,
            };
            let (at, want) = (k * per_request * block, chunk.len());
            let s = sink.clone();
            sink.add();
            let posted = o.am.request(
                o.transport,
                rank,
                kind::GET,
                &request.encode(),
                Box::new(move |reply| match reply {
                    Ok(b) if b.len() == want => s.deliver(at, b),
                    Ok(b) => s.fail(format!(
                        "window {id}: rank {rank} answered a strided get of {want} bytes with {}",
                        b.len()
                    )),
                    Err(no) => {
                        no.fail_sink(&s, |why| format!("window {id}: strided get refused: {why}"))
                    }
                }),
            );
            if let Err(e) = posted {
                // Nothing went out for this part: count it failed, and wait
                // for the parts that did before reporting.
                sink.fail(e.to_string());
                sent = Err(e);
                break;
            }
        }
        let what = || format!("replies to strided gets from rank {rank} (window {id})");
        let waited = o
            .transport
            .wait(buf.completion(), &what)
            .map_err(|e| e.awaiting(rank));
        sent?;
        waited?;
        let bytes: Vec<u8> = buf.into_inner().map_err(|_| {
            Error::InvalidArgument(format!("window {id}: strided get buffer still in use"))
        })?;
        out.copy_from_slice(&bytes);
        Ok(true)
    }

    /// Whether a plain (non-fetching, `plain`) accumulate of `len` bytes to
    /// `rank` on the software path (`software`) will be queued. If not,
    /// and it is a software call, operations queued for `rank` are shipped
    /// first, and acknowledged first when the window orders accumulates:
    /// the call must not overtake them.
    ///
    /// # Errors
    /// As [`Aggregation::batches_before`].
    pub fn takes_accumulate(
        &self,
        o: &Origin<'_>,
        plain: bool,
        software: bool,
        rank: usize,
        len: usize,
    ) -> Result<bool> {
        let queued = plain && software && self.takes(o, rank, len);
        // Only software-path accumulates are queued, so only a software
        // call can conflict with queued ones (a put and an accumulate to one
        // location in one epoch is undefined in MPI anyway).
        if !queued && software {
            self.batches_before(o, rank, o.ordered)?;
        }
        Ok(queued)
    }

    /// Queues an accumulate ([`Aggregation::takes_accumulate`] said yes).
    ///
    /// # Errors
    /// As [`Aggregation::queue_put`].
    pub fn queue_accumulate(
        &self,
        o: &Origin<'_>,
        rank: usize,
        off: usize,
        op: AtomicOp,
        datatype: Datatype,
        data: &[u8],
    ) -> Result<()> {
        let e = Entry {
            class: ACCUMULATE,
            op: Some(op),
            datatype: Some(datatype),
            offset: off as u64,
            data,
            strided: None,
        };
        self.queue(o, rank, &e)
    }

    fn queue(&self, o: &Origin<'_>, rank: usize, e: &Entry<'_>) -> Result<()> {
        let id = o.window;
        let what = || format!("window {id}: waiting for another thread to ship rank {rank}'s batch");
        // Made at the first retry: the common case queues at once.
        let mut retry: Option<wait::Waiter<'_>> = None;
        loop {
            let q = {
                let mut table = self.table(o)?;
                let q = table.queue(rank, e);
                match q {
                    Queued::Ship(_) => {
                        self.shipping.fetch_add(1, Ordering::AcqRel);
                    }
                    Queued::Done => self.queued.store(true, Ordering::Release),
                    Queued::Retry => {}
                }
                q
            };
            match q {
                Queued::Done => {
                    o.shared.count_queued();
                    return Ok(());
                }
                Queued::Ship(t) => self.ship(o, t)?,
                // Another thread of this window is shipping the elements.
                Queued::Retry => {
                    o.transport.progress()?;
                    retry
                        .get_or_insert_with(|| wait::Waiter::new(o.timeout, &what))
                        .step()?;
                }
            }
        }
    }

    /// Sends `t`'s batch as one request whose reply counts on the window's
    /// acknowledgements, then returns its elements to the pools.
    fn ship(&self, o: &Origin<'_>, t: TargetElem) -> Result<()> {
        let sent = self.send_batch(o, &t);
        let recycled = self.table(o).map(|mut table| table.recycle(t));
        self.shipping.fetch_sub(1, Ordering::AcqRel);
        sent.and(recycled)
    }

    /// Takes `rank`'s target element (or, with `None`, the next one in
    /// round-robin order) out of the table, counted as shipping.
    fn take_target(&self, o: &Origin<'_>, rank: Option<usize>) -> Result<Option<TargetElem>> {
        let mut table = self.table(o)?;
        let t = match rank {
            Some(r) => table.take(r),
            None => table.next_target(),
        };
        if t.is_some() {
            self.shipping.fetch_add(1, Ordering::AcqRel);
        }
        Ok(t)
    }

    /// Waits until no other thread is still sending a batch of this window
    /// (its acknowledgement is then counted in `acks`).
    fn wait_shipping(&self, o: &Origin<'_>) -> Result<()> {
        let id = o.window;
        let what = || format!("window {id}: waiting for another thread's batch to be sent");
        wait::until(o.transport, o.timeout, &what, || {
            Ok(self.shipping.load(Ordering::Acquire) == 0)
        })
    }

    fn send_batch(&self, o: &Origin<'_>, t: &TargetElem) -> Result<()> {
        let has_acc = t.ops.iter().any(|op| op.class == ACCUMULATE);
        if has_acc && o.ordered {
            // Accumulate ordering holds between one origin and one target.
            self.wait_acks(o, Some(t.rank))?;
        }
        let (id, me, rank) = (o.window, o.me, t.rank);
        let sink = Sink::counter(self.acks.to(rank));
        let s = sink.clone();
        sink.add();
        let sent = o.am.request(
            o.transport,
            rank,
            kind::BATCH,
            &t.batch,
            Box::new(move |reply| match reply {
                Ok([]) => s.deliver(0, &[]),
                Ok(b) => s.fail(format!(
                    "window {id}: rank {rank} answered a batch with {} bytes",
                    b.len()
                )),
                Err(no) => no.fail_sink(&s, |why| {
                    format!("window {id}: batch from rank {me} refused: {why}")
                }),
            }),
        );
        match sent {
            Ok(()) => {
                o.shared.count_sent();
                Ok(())
            }
            Err(e) => {
                sink.fail(e.to_string());
                Err(e)
            }
        }
    }

    /// Waits for the acknowledgements of the batches sent to `rank` (to
    /// every target if `None`).
    fn wait_acks(&self, o: &Origin<'_>, rank: Option<usize>) -> Result<()> {
        let id = o.window;
        self.acks.each_busy(rank, |r, acks| {
            let what = || format!("acknowledgements of batches of window {id} to rank {r}");
            if acks.pending() == 0 {
                // Nothing in flight: only a refused batch to report.
                return acks.check(what);
            }
            o.transport.wait(acks, &what).map_err(|e| e.awaiting(r))
        })
    }

    /// Before an operation to `rank` outside the table: ships `rank`'s
    /// batch, and waits for a drain another thread has in progress (it may
    /// hold this thread's operations); with `settle`, waits until every
    /// batch was acknowledged.
    ///
    /// # Errors
    /// The batch could not be sent, a target refused a batch, or a wait
    /// ran out of time.
    pub fn batches_before(&self, o: &Origin<'_>, rank: usize, settle: bool) -> Result<()> {
        // Nothing queued: nothing of this thread's to ship (another
        // thread's concurrent operations are unordered with this one unless
        // the program synchronized them, and then its `queued` store is
        // visible here).
        if self.queued.load(Ordering::Acquire) {
            if let Some(t) = self.take_target(o, Some(rank))? {
                self.ship(o, t)?;
            }
        }
        // A batch holding this thread's operations may be on its way on
        // another thread (which took it, see [`Aggregation`]): this
        // operation must not pass it.
        if self.shipping.load(Ordering::Acquire) != 0 {
            self.wait_shipping(o)?;
        }
        // With `settle`, every batch to `rank` acknowledged (applied), even
        // with nothing queued: a completion point for another rank
        // (`flush(other)`) ships `rank`'s batch too but waits only for
        // `other`'s acknowledgements, so `rank`'s may still be in flight.
        // (Returning early there let a software get_accumulate run at the
        // target beside the batch it must follow, on the progress thread:
        // it read an accumulate half applied.)
        if settle && !self.acks.is_idle() {
            self.wait_acks(o, Some(rank))?;
        }
        Ok(())
    }

    /// Nothing queued, shipping or awaiting acknowledgement, and no
    /// refused batch to report (the loads of [`complete_batches`], in its
    /// order): it would return `Ok` at once. Lets the completion points
    /// skip the call (and building its [`Origin`]).
    ///
    /// [`complete_batches`]: Aggregation::complete_batches
    #[inline]
    pub fn is_idle(&self) -> bool {
        !self.queued.load(Ordering::Acquire)
            && self.shipping.load(Ordering::Acquire) == 0
            && self.acks.is_idle()
    }

    /// Ships every queued batch, round-robin over targets, and waits for
    /// the acknowledgements of those to `rank` (of all if `None`): the
    /// completion points call this first.
    ///
    /// # Errors
    /// The first batch that could not be sent, else a refused batch or a
    /// wait that ran out of time.
    pub fn complete_batches(&self, o: &Origin<'_>, rank: Option<usize>) -> Result<()> {
        let mut first = None;
        // See [`Aggregation`]: clear before draining, so that anything
        // queued from here on sets it again.
        // A load first: nothing queued (the common case) needs no RMW. A
        // queue that happened before this call is visible to the load.
        if self.queued.load(Ordering::Acquire) {
            // Counted as shipping before clearing `queued` (the invariant
            // of [`Aggregation`]), until every element is taken and sent.
            self.shipping.fetch_add(1, Ordering::AcqRel);
            if self.queued.swap(false, Ordering::AcqRel) {
                loop {
                    match self.take_target(o, None) {
                        Ok(Some(t)) => {
                            if let Err(e) = self.ship(o, t) {
                                first.get_or_insert(e);
                            }
                        }
                        Ok(None) => break,
                        Err(e) => {
                            first.get_or_insert(e);
                            break;
                        }
                    }
                }
            }
            self.shipping.fetch_sub(1, Ordering::AcqRel);
        }
        let waited = if self.shipping.load(Ordering::Acquire) == 0 {
            Ok(())
        } else {
            self.wait_shipping(o)
        }
        .and_then(|()| self.wait_acks(o, rank));
        first.map_or(waited, Err)
    }
}
