//! The software accumulate path from the window: builds the narrow context
//! the protocol needs and calls down to [`crate::protocols::accumulate::Origin`],
//! where segmenting, credits and completion are described.

use super::Window;
use crate::api::element::Element;
use crate::error::Result;
use crate::protocols::accumulate::Origin;
use crate::transport::inflight::Sink;
use crate::transport::{AtomicOp, Memory};

impl<T: Element> Window<'_, T> {
    /// The software accumulate protocol's view of this window, with `mem`
    /// as this process's memory (segments to oneself apply there).
    fn soft_origin<'s>(&'s self, mem: &'s Memory<'static>) -> Origin<'s, 'static> {
        Origin {
            transport: self.world.transport(),
            am: &self.world.am,
            me: self.world.rank(),
            window: self.id,
            datatype: T::DATATYPE,
            size: std::mem::size_of::<T>(),
            mem,
        }
    }

    /// Runs `f` with this process's memory for an operation at byte `off`
    /// (`count` elements) and the offset in it: the window's memory, or on
    /// a dynamic window to oneself the attached region holding the range
    /// (`off` is then an absolute address).
    fn soft_local<R>(
        &self,
        rank: usize,
        off: usize,
        count: usize,
        f: impl FnOnce(&Memory<'static>, usize) -> Result<R>,
    ) -> Result<R> {
        if self.is_dynamic() && rank == self.me {
            let size = std::mem::size_of::<T>();
            return self.own_region(off / size, count, f);
        }
        f(&self.mem, off)
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
        self.soft_local(rank, off, count, |mem, off| {
            self.soft_origin(mem).post(rank, off, op, data, count, sink)
        })
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
        self.soft_local(rank, off, count, |mem, off| {
            self.soft_origin(mem).fetch(rank, off, op, data, count, result)
        })
    }
}
