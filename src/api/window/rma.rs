//! The RMA data operations: `put`, `get`, and the request-based `rput` and
//! `rget`, to a peer through the transport, to a node-local peer through its
//! mapping, or to oneself. On a dynamic window over a back-end where a
//! remote access error breaks the connection, they are REPLACE and NO_OP
//! accumulates on the software path (`Window::dynamic_messages`).

use super::Window;
use crate::api::element::Element;
use crate::api::op::AnyOp;
use crate::api::request::Request;
use crate::error::Result;
use crate::transport::InFlight;

impl<T: Element> Window<'_, T> {
    /// Marks `rank` as needing a flush read after a write through the
    /// transport. Writes to oneself go through the transport too on a
    /// dynamic window (its memory is registered, not copied locally), so
    /// they need the same remote completion.
    pub(super) fn mark_dirty(&self, rank: usize) {
        if (rank != self.me || self.is_dynamic()) && self.props.ordered_raw {
            self.dirty.mark(rank);
        }
    }

    /// Writes `data` to `rank`'s window at element `disp`. Returns when `data`
    /// may be reused; the data is visible at the target after a flush or the
    /// end of the epoch.
    ///
    /// # Errors
    /// An access outside the window or outside an epoch that allows it
    /// (nothing sent); `Error::Timeout` naming `rank` when the transfer
    /// does not complete within `ONESIDED_TIMEOUT` (a stopped or
    /// unreachable peer). After such a timeout every other peer is served
    /// as before, except on the libfabric back-end when the transfer was
    /// larger than 256 KiB (8 KiB on the shm provider or one that needs
    /// registered local buffers): the provider may still read `data`'s
    /// memory, so the back-end is not used again. [`Window::rput`] owns its buffer and has
    /// no such limit (`docs/transport.md`).
    pub fn put(&self, rank: usize, disp: usize, data: &[T]) -> Result<()> {
        if self.dynamic_messages() {
            return self.accumulate(rank, disp, data, AnyOp::Replace);
        }
        let mut slot = None;
        let (rank, off, d, _issuing) = self.access("put", rank, disp, data.len(), &mut slot)?;
        if self.soft_lock.is_some() && self.defer_op(rank, disp, data, None)? {
            // Stashed until the lock is acquired (lazy software lock).
            return Ok(());
        }
        let bytes: &[u8] = bytemuck::cast_slice(data);
        if rank == self.me && !self.is_dynamic() {
            return self.mem.write(off, bytes);
        }
        if let Some(m) = self.direct(rank, d)? {
            return m.write(off, bytes);
        }
        if self.queue_put(rank, off, bytes)? {
            return Ok(());
        }
        let posted = self
            .world
            .transport()
            .put(rank, bytes, Self::remote(d, off));
        // After posting (meta::dirty's rule).
        self.mark_dirty(rank);
        posted
    }

    /// Reads `out.len()` elements from `rank`'s window at element `disp`.
    /// Returns when the data is in `out`.
    ///
    /// # Errors
    /// As [`Window::put`]; after an error the contents of `out` are
    /// unspecified. [`Window::rget`] owns its buffer and has no size limit
    /// on giving up a timed-out read.
    pub fn get(&self, rank: usize, disp: usize, out: &mut [T]) -> Result<()> {
        if self.dynamic_messages() {
            return self.get_accumulate(rank, disp, &[], out, AnyOp::NoOp);
        }
        let mut slot = None;
        let (rank, off, d, _issuing) = self.access("get", rank, disp, out.len(), &mut slot)?;
        let bytes: &mut [u8] = bytemuck::cast_slice_mut(out);
        if rank == self.me && !self.is_dynamic() {
            return self.mem.read(off, bytes);
        }
        if let Some(m) = self.direct(rank, d)? {
            return m.read(off, bytes);
        }
        self.batches_before(rank, true)?;
        self.world
            .transport()
            .get(rank, bytes, Self::remote(d, off))
    }

    /// Starts writing `data` to `rank`'s window at `disp`; the request owns
    /// `data` until it completes locally.
    pub fn rput<B>(&self, rank: usize, disp: usize, mut data: B) -> Result<Request<'_, B>>
    where
        B: AsMut<[T]> + Send + 'static,
    {
        if self.dynamic_messages() {
            return self.raccumulate(rank, disp, data, AnyOp::Replace);
        }
        let n = data.as_mut().len();
        let mut slot = None;
        let (rank, off, d, _issuing) = self.access("rput", rank, disp, n, &mut slot)?;
        let what = format!(
            "rput of {n} {} to rank {rank} (window {})",
            T::NAME,
            self.id
        );
        let direct = self.direct(rank, d)?;
        if (rank == self.me && !self.is_dynamic()) || direct.is_some() {
            let mem = direct.as_deref().unwrap_or(&self.mem);
            mem.write(off, bytemuck::cast_slice(data.as_mut()))?;
            return Ok(Request::new(
                self.world.config.timeout,
                self.world.transport(),
                InFlight::new(data, None),
                what,
            ));
        }
        let f = InFlight::new(data, Some(self.outstanding.to(rank)));
        let posted = self
            .world
            .transport()
            .put_async(rank, &f, Self::remote(d, off));
        self.mark_dirty(rank);
        posted?;
        Ok(Request::new(self.world.config.timeout, self.world.transport(), f, what))
    }

    /// Starts reading into `buf` from `rank`'s window at `disp`; the request
    /// owns `buf` and gives it back, filled, from `wait`.
    pub fn rget<B>(&self, rank: usize, disp: usize, mut buf: B) -> Result<Request<'_, B>>
    where
        B: AsMut<[T]> + Send + 'static,
    {
        if self.dynamic_messages() {
            return self.rget_accumulate(rank, disp, &[], buf, AnyOp::NoOp);
        }
        let n = buf.as_mut().len();
        let mut slot = None;
        let (rank, off, d, _issuing) = self.access("rget", rank, disp, n, &mut slot)?;
        let what = format!(
            "rget of {n} {} from rank {rank} (window {})",
            T::NAME,
            self.id
        );
        let direct = self.direct(rank, d)?;
        if (rank == self.me && !self.is_dynamic()) || direct.is_some() {
            let mem = direct.as_deref().unwrap_or(&self.mem);
            mem.read(off, bytemuck::cast_slice_mut(buf.as_mut()))?;
            return Ok(Request::new(
                self.world.config.timeout,
                self.world.transport(),
                InFlight::new(buf, None),
                what,
            ));
        }
        self.batches_before(rank, true)?;
        let f = InFlight::new(buf, Some(self.outstanding.to(rank)));
        self.world
            .transport()
            .get_async(rank, &f, Self::remote(d, off))?;
        Ok(Request::new(self.world.config.timeout, self.world.transport(), f, what))
    }
}
