//! The window side of aggregation (`src/protocols/aggregation/`, `docs/op-table.md`): small
//! puts and small software-path accumulates are queued per target in the
//! window's operation table and shipped as BATCH requests, which the
//! target applies in order and acknowledges.
//!
//! When batches ship: when one is full; when both pools are empty (the
//! cleanup, `OpTable::queue`); before an operation to the same target that
//! does not go through the table (a get, a fetching or large accumulate);
//! and at every completion point (`complete_local`: flush family, unlock,
//! unlock_all, fence, complete, free), which then waits for every ack.
//!
//! Ordering: a batch is applied in order by one handler run, but two
//! batches may run at once at the target (two threads drain its CQ). So
//! with an `accumulate_ordering` other than `none`, a batch holding
//! accumulates (and any accumulate-family call that bypasses the table) is
//! sent only after the window's earlier batches were acknowledged, and a
//! get to a target waits for its queued operations to be applied.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use super::Window;
use crate::api::element::Element;
use crate::error::{Error, Result};
use crate::protocols::aggregation::{self, Entry, OpTable, Queued, TargetElem};
use crate::transport::am::kind;
use crate::transport::inflight::Sink;
use crate::transport::{AtomicOp, Completion};

/// A window's operation table and the acknowledgements of its batches.
///
/// Invariant (threads sharing a window): a target element taken out of the
/// table is counted in `shipping` before the table's mutex is released, and
/// leaves that count only after its batch's acknowledgement is counted in
/// `acks` (or its send failed). So a completion point that finds the table
/// empty, then `shipping` at zero, then waits for `acks`, covers every
/// operation queued before it — also those another thread is still sending.
pub(super) struct Aggregation {
    table: Mutex<OpTable>,
    acks: Arc<Completion>,
    shipping: AtomicUsize,
    max_op: usize,
}

impl Aggregation {
    /// The table of window `id`, if aggregation is on for a back-end
    /// that does (`batch_small`) or does not prefer batching.
    pub(super) fn new(
        id: u64,
        shared: &Arc<aggregation::Shared>,
        batch_small: bool,
    ) -> Option<Self> {
        let c = shared.config;
        aggregation::enabled(c.mode, batch_small).then(|| Aggregation {
            table: Mutex::new(OpTable::new(id, shared.clone())),
            acks: Arc::new(Completion::new()),
            shipping: AtomicUsize::new(0),
            max_op: c.max_op,
        })
    }
}

impl<T: Element> Window<'_, T> {
    fn ops_table(&self) -> Result<std::sync::MutexGuard<'_, OpTable>> {
        let a = self.agg.as_ref().ok_or_else(|| {
            Error::InvalidArgument(format!("window {}: no operation table", self.id))
        })?;
        a.table.lock().map_err(|_| {
            Error::InvalidArgument(format!("window {}: operation table poisoned", self.id))
        })
    }

    /// Whether an operation of `len` bytes to `rank` is queued.
    fn aggregates(&self, rank: usize, len: usize) -> bool {
        self.agg
            .as_ref()
            .is_some_and(|a| len <= a.max_op && len > 0 && rank != self.me)
    }

    /// Queues a put of `data` at byte `off` of `rank`'s window if it is
    /// small enough; `Ok(false)` leaves it to the caller.
    pub(super) fn queue_put(&self, rank: usize, off: usize, data: &[u8]) -> Result<bool> {
        if !self.aggregates(rank, data.len()) {
            return Ok(false);
        }
        self.queue(
            rank,
            &Entry {
                class: aggregation::PUT,
                op: None,
                datatype: None,
                offset: off as u64,
                data,
            },
        )?;
        Ok(true)
    }

    /// Whether accumulate-family call `call` of `n` elements to `rank` on
    /// the software path (`software`) will be queued. If not, and it is a
    /// software call, operations queued for `rank` are shipped first, and
    /// acknowledged first when the window orders accumulates: the call must
    /// not overtake them.
    pub(super) fn aggregates_accumulate(
        &self,
        call: &str,
        software: bool,
        rank: usize,
        n: usize,
    ) -> Result<bool> {
        let queued =
            call == "accumulate" && software && self.aggregates(rank, n * std::mem::size_of::<T>());
        // Only software-path accumulates are queued, so only a software
        // call can conflict with queued ones (a put and an accumulate to one
        // location in one epoch is undefined in MPI anyway).
        if !queued && software {
            self.batches_before(rank, !self.info.order().is_empty())?;
        }
        Ok(queued)
    }

    /// Queues an accumulate (`aggregates_accumulate` said yes).
    pub(super) fn queue_accumulate(
        &self,
        rank: usize,
        off: usize,
        op: AtomicOp,
        data: &[u8],
    ) -> Result<()> {
        let e = Entry {
            class: aggregation::ACCUMULATE,
            op: Some(op),
            datatype: Some(T::DATATYPE),
            offset: off as u64,
            data,
        };
        self.queue(rank, &e)
    }

    fn queue(&self, rank: usize, e: &Entry<'_>) -> Result<()> {
        let shared = &self.world.ops;
        let id = self.id;
        let what = || format!("window {id}: waiting for another thread to ship rank {rank}'s batch");
        let mut retry = crate::progress::wait::Waiter::new(self.world.config.timeout, &what);
        loop {
            let q = {
                let mut table = self.ops_table()?;
                let q = table.queue(rank, e);
                if matches!(q, Queued::Ship(_)) {
                    self.shipping_begins();
                }
                q
            };
            match q {
                Queued::Done => {
                    shared.count_queued();
                    return Ok(());
                }
                Queued::Ship(t) => self.ship(t)?,
                // Another thread of this window is shipping the elements.
                Queued::Retry => {
                    self.world.transport().progress()?;
                    retry.step()?;
                }
            }
        }
    }

    /// Sends `t`'s batch as one request whose reply counts on the window's
    /// acknowledgements, then returns its elements to the pools.
    fn ship(&self, t: TargetElem) -> Result<()> {
        let sent = self.send_batch(&t);
        let recycled = self.ops_table().map(|mut table| table.recycle(t));
        if let Some(a) = self.agg.as_ref() {
            a.shipping.fetch_sub(1, Ordering::AcqRel);
        }
        sent.and(recycled)
    }

    /// Counts a target element taken out of the table (call with the
    /// table's mutex held; see [`Aggregation`]).
    fn shipping_begins(&self) {
        if let Some(a) = self.agg.as_ref() {
            a.shipping.fetch_add(1, Ordering::AcqRel);
        }
    }

    /// Takes `rank`'s target element (or, with `None`, the next one in
    /// round-robin order) out of the table, counted as shipping.
    fn take_target(&self, rank: Option<usize>) -> Result<Option<TargetElem>> {
        let mut table = self.ops_table()?;
        let t = match rank {
            Some(r) => table.take(r),
            None => table.next_target(),
        };
        if t.is_some() {
            self.shipping_begins();
        }
        Ok(t)
    }

    /// Waits until no other thread is still sending a batch of this window
    /// (its acknowledgement is then counted in `acks`).
    fn wait_shipping(&self, a: &Aggregation) -> Result<()> {
        let id = self.id;
        let what = || format!("window {id}: waiting for another thread's batch to be sent");
        crate::progress::wait::until(self.world.transport(), self.world.config.timeout, &what, || {
            Ok(a.shipping.load(Ordering::Acquire) == 0)
        })
    }

    fn send_batch(&self, t: &TargetElem) -> Result<()> {
        let Some(a) = self.agg.as_ref() else {
            return Ok(());
        };
        let has_acc = t.ops.iter().any(|o| o.class == aggregation::ACCUMULATE);
        if has_acc && !self.info.order().is_empty() {
            self.wait_acks(a)?;
        }
        let (id, me, rank) = (self.id, self.me, t.rank);
        let sink = Sink::counter(a.acks.clone());
        let s = sink.clone();
        sink.add();
        let sent = self.world.am.request(
            self.world.transport(),
            rank,
            kind::BATCH,
            &t.batch,
            Box::new(move |reply| match reply {
                Ok([]) => s.deliver(0, &[]),
                Ok(b) => s.fail(format!(
                    "window {id}: rank {rank} answered a batch with {} bytes",
                    b.len()
                )),
                Err(why) => s.fail(format!("window {id}: batch from rank {me} refused: {why}")),
            }),
        );
        match sent {
            Ok(()) => {
                self.world.ops.count_sent();
                Ok(())
            }
            Err(e) => {
                sink.fail(e.to_string());
                Err(e)
            }
        }
    }

    fn wait_acks(&self, a: &Aggregation) -> Result<()> {
        let id = self.id;
        self.world.transport().wait(&a.acks, &|| {
            format!("acknowledgements of batches of window {id}")
        })
    }

    /// Before an operation to `rank` outside the table: ships `rank`'s
    /// batch; with `settle`, waits until every batch was acknowledged.
    pub(super) fn batches_before(&self, rank: usize, settle: bool) -> Result<()> {
        let Some(a) = self.agg.as_ref() else {
            return Ok(());
        };
        if let Some(t) = self.take_target(Some(rank))? {
            self.ship(t)?;
        }
        if settle {
            self.wait_shipping(a)?;
            if a.acks.pending() > 0 {
                self.wait_acks(a)?;
            }
        }
        Ok(())
    }

    /// Ships every queued batch, round-robin over targets, and waits for
    /// their acknowledgements (the completion points call this first).
    pub(super) fn complete_batches(&self) -> Result<()> {
        let Some(a) = self.agg.as_ref() else {
            return Ok(());
        };
        let mut first = None;
        while let Some(t) = self.take_target(None)? {
            if let Err(e) = self.ship(t) {
                first.get_or_insert(e);
            }
        }
        let waited = self.wait_shipping(a).and_then(|()| self.wait_acks(a));
        first.map_or(waited, Err)
    }
}
