//! Aggregation from the window: builds the narrow context the protocol
//! needs and calls down to [`crate::protocols::aggregation::Aggregation`],
//! where what is queued, when batches ship and how they are ordered are
//! described.

use super::Window;
use crate::api::element::Element;
use crate::error::Result;
use crate::protocols::aggregation::{Aggregation, Origin};
use crate::transport::AtomicOp;

impl<T: Element> Window<'_, T> {
    /// The aggregation protocol's view of this window.
    fn agg_origin(&self) -> Origin<'_> {
        Origin {
            transport: self.world.transport(),
            am: &self.world.am,
            shared: &self.world.ops,
            me: self.me,
            window: self.id,
            timeout: self.world.config.timeout,
            ordered: !self.info.order().is_empty(),
        }
    }

    /// Queues a put of `data` at byte `off` of `rank`'s window if the
    /// window aggregates and it is small enough; `Ok(false)` leaves it to
    /// the caller.
    pub(super) fn queue_put(&self, rank: usize, off: usize, data: &[u8]) -> Result<bool> {
        match &self.agg {
            Some(a) => a.queue_put(&self.agg_origin(), rank, off, data),
            None => Ok(false),
        }
    }

    /// Queues a strided put (blocks of `block` bytes, `stride` bytes apart
    /// from byte `off` of `rank`'s window) if the window aggregates and the
    /// blocks are small enough; `Ok(false)` leaves it to the caller.
    pub(super) fn queue_strided(
        &self,
        rank: usize,
        off: usize,
        block_stride: (usize, usize),
        data: &[u8],
    ) -> Result<bool> {
        match &self.agg {
            Some(a) => a.queue_strided(&self.agg_origin(), rank, off, block_stride, data),
            None => Ok(false),
        }
    }

    /// Reads blocks of `block` bytes, `stride` bytes apart from byte `off`
    /// of `rank`'s window, packed into `out`, with strided-get requests if
    /// the window aggregates; `Ok(false)` leaves the read to the caller.
    pub(super) fn get_strided(
        &self,
        rank: usize,
        off: usize,
        block_stride: (usize, usize),
        out: &mut [u8],
    ) -> Result<bool> {
        match &self.agg {
            Some(a) => a.get_strided(&self.agg_origin(), rank, off, block_stride, out),
            None => Ok(false),
        }
    }

    /// Whether accumulate-family call `call` of `n` elements to `rank` on
    /// the software path (`software`) will be queued (see
    /// [`crate::protocols::aggregation::Aggregation::takes_accumulate`]).
    pub(super) fn aggregates_accumulate(
        &self,
        call: &str,
        software: bool,
        rank: usize,
        n: usize,
    ) -> Result<bool> {
        if !software {
            // Neither queued nor behind queued batches (`takes_accumulate`).
            return Ok(false);
        }
        match &self.agg {
            Some(a) => a.takes_accumulate(
                &self.agg_origin(),
                call == "accumulate",
                software,
                rank,
                n * std::mem::size_of::<T>(),
            ),
            None => Ok(false),
        }
    }

    /// Queues an accumulate (`aggregates_accumulate` said yes).
    pub(super) fn queue_accumulate(
        &self,
        rank: usize,
        off: usize,
        op: AtomicOp,
        data: &[u8],
    ) -> Result<()> {
        match &self.agg {
            Some(a) => a.queue_accumulate(&self.agg_origin(), rank, off, op, T::DATATYPE, data),
            None => Err(crate::error::Error::InvalidArgument(format!(
                "window {}: no operation table",
                self.id
            ))),
        }
    }

    /// Before an operation to `rank` outside the table: ships `rank`'s
    /// batch; with `settle`, waits until every batch was acknowledged.
    pub(super) fn batches_before(&self, rank: usize, settle: bool) -> Result<()> {
        match &self.agg {
            Some(a) => a.batches_before(&self.agg_origin(), rank, settle),
            None => Ok(()),
        }
    }

    /// Ships every queued batch and waits for the acknowledgements of
    /// those to `rank` (of all if `None`): the completion points call this
    /// first.
    pub(super) fn complete_batches(&self, rank: Option<usize>) -> Result<()> {
        match &self.agg {
            Some(a) if !a.is_idle() => self.complete_batches_slow(a, rank),
            _ => Ok(()),
        }
    }

    #[cold]
    #[inline(never)]
    fn complete_batches_slow(&self, a: &Aggregation, rank: Option<usize>) -> Result<()> {
        a.complete_batches(&self.agg_origin(), rank)
    }
}
