//! The software accumulate path from the window: builds the narrow context
//! the protocol needs and calls down to [`crate::protocols::accumulate::Origin`],
//! where segmenting, credits and completion are described.

use super::Window;
use crate::api::element::Element;
use crate::error::Result;
use crate::protocols::accumulate::Origin;
use crate::transport::inflight::Sink;
use crate::transport::AtomicOp;

impl<T: Element> Window<'_, T> {
    /// The software accumulate protocol's view of this window.
    fn soft_origin(&self) -> Origin<'_, '_> {
        Origin {
            transport: self.world.transport(),
            am: &self.world.am,
            me: self.world.rank(),
            window: self.id,
            datatype: T::DATATYPE,
            size: std::mem::size_of::<T>(),
            mem: &self.mem,
        }
    }

    /// Posts a software accumulate (see [`Origin::post`]).
    pub(super) fn soft_post(
        &self,
        rank: usize,
        off: usize,
        op: AtomicOp,
        data: &[u8],
        count: usize,
        sink: &Sink,
    ) -> Result<()> {
        self.soft_origin().post(rank, off, op, data, count, sink)
    }

    /// A blocking fetching software accumulate (see [`Origin::fetch`]).
    pub(super) fn soft_fetch(
        &self,
        rank: usize,
        off: usize,
        op: AtomicOp,
        data: &[u8],
        count: usize,
        result: &mut [u8],
    ) -> Result<()> {
        self.soft_origin().fetch(rank, off, op, data, count, result)
    }
}
