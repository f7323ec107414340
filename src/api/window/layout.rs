//! Noncontiguous put, get, accumulate and get_accumulate ([`Layout`] on
//! origin, target and result: MPI's derived datatypes for RMA).
//!
//! The layouts are checked against the origin buffer, against each other
//! (same element count) and against the target's part of the window
//! before anything is sent. The data then travels block by block (one
//! operation per contiguous target block: on the direct path a copy or
//! CPU atomics, on the back-ends one write, read or atomic each, which
//! aggregation batches on tcp and sockets); gets are issued together and
//! waited for together. Accumulates keep element-wise atomicity, as MPI
//! asks of them.

use super::Window;
use crate::api::element::Element;
use crate::api::layout::Layout;
use crate::api::op::{AnyOp, FetchOpFor, OpFor};
use crate::api::request::Request;
use crate::error::{Error, Result};

impl<T: Element> Window<'_, T> {
    /// Writes the elements of `origin` that `origin_layout` names into the
    /// elements of `rank`'s window that `target` names, counted from
    /// `disp` (MPI_Put with derived datatypes on both sides).
    ///
    /// # Errors
    /// Layouts of different element counts, an origin buffer or a target
    /// part of the window the layouts do not fit in (nothing sent), or
    /// what [`Window::put`] returns.
    pub fn put_layout(
        &self,
        rank: usize,
        disp: usize,
        target: &Layout,
        origin: &[T],
        origin_layout: &Layout,
    ) -> Result<()> {
        let packed = self.layouts("put_layout", rank, disp, target, origin, origin_layout)?;
        let mut pos = 0;
        for &(at, n) in target.blocks() {
            self.put(rank, disp + at, &packed[pos..pos + n])?;
            pos += n;
        }
        Ok(())
    }

    /// Reads the elements of `rank`'s window that `target` names (from
    /// `disp`) into the elements of `origin` that `origin_layout` names
    /// (MPI_Get with derived datatypes); the blocks are read together.
    ///
    /// # Errors
    /// As [`Window::put_layout`], or what [`Window::rget`] returns.
    pub fn get_layout(
        &self,
        rank: usize,
        disp: usize,
        target: &Layout,
        origin: &mut [T],
        origin_layout: &Layout,
    ) -> Result<()> {
        self.check_layouts("get_layout", rank, disp, target, origin.len(), origin_layout)?;
        let requests = target
            .blocks()
            .iter()
            .map(|&(at, n)| self.rget(rank, disp + at, vec![T::zeroed(); n]))
            .collect::<Result<Vec<_>>>()?;
        let blocks = Request::wait_all(requests)?;
        let packed: Vec<T> = blocks.concat();
        origin_layout.unpack(&packed, origin)
    }

    /// Combines the elements of `origin` that `origin_layout` names with
    /// the elements of `rank`'s window that `target` names (from `disp`),
    /// element by element atomically, as [`Window::accumulate`] does
    /// (MPI_Accumulate with derived datatypes).
    ///
    /// # Errors
    /// As [`Window::put_layout`], or what [`Window::accumulate`] returns.
    pub fn accumulate_layout<O: OpFor<T> + Copy>(
        &self,
        rank: usize,
        disp: usize,
        target: &Layout,
        origin: &[T],
        origin_layout: &Layout,
        op: O,
    ) -> Result<()> {
        let packed = self.layouts(
            "accumulate_layout",
            rank,
            disp,
            target,
            origin,
            origin_layout,
        )?;
        let mut pos = 0;
        for &(at, n) in target.blocks() {
            self.accumulate(rank, disp + at, &packed[pos..pos + n], op)?;
            pos += n;
        }
        Ok(())
    }

    /// Combines, as [`Window::accumulate_layout`], and returns the target
    /// elements' previous values into the elements of `result` that
    /// `result_layout` names (MPI_Get_accumulate with derived datatypes on
    /// origin, result and target). With [`NoOp`](crate::NoOp) the origin
    /// may be empty (an atomic read of the target layout). The blocks are
    /// issued together and waited for together; each element is updated
    /// and read atomically.
    ///
    /// # Errors
    /// As [`Window::put_layout`] (the result layout must hold as many
    /// elements as the target layout and fit in `result`), or what
    /// [`Window::rget_accumulate`] returns.
    #[allow(clippy::too_many_arguments)] // MPI_Get_accumulate's own shape
    pub fn get_accumulate_layout<O: FetchOpFor<T> + Copy>(
        &self,
        rank: usize,
        disp: usize,
        target: &Layout,
        (origin, origin_layout): (&[T], &Layout),
        (result, result_layout): (&mut [T], &Layout),
        op: O,
    ) -> Result<()> {
        let call = "get_accumulate_layout";
        let read_only = op.any() == AnyOp::NoOp && origin.is_empty();
        let packed = if read_only {
            Vec::new()
        } else {
            self.layouts(call, rank, disp, target, origin, origin_layout)?
        };
        // The result side as an origin of the same shape.
        self.check_layouts(call, rank, disp, target, result.len(), result_layout)?;
        let mut pos = 0;
        let mut requests = Vec::with_capacity(target.blocks().len());
        for &(at, n) in target.blocks() {
            let data = if read_only { &[][..] } else { &packed[pos..pos + n] };
            requests.push(self.rget_accumulate(rank, disp + at, data, vec![T::zeroed(); n], op)?);
            pos += n;
        }
        let blocks = Request::wait_all(requests)?;
        result_layout.unpack(&blocks.concat(), result)
    }

    /// Checks the layouts and packs the origin's elements.
    fn layouts(
        &self,
        call: &'static str,
        rank: usize,
        disp: usize,
        target: &Layout,
        origin: &[T],
        origin_layout: &Layout,
    ) -> Result<Vec<T>> {
        self.check_layouts(call, rank, disp, target, origin.len(), origin_layout)?;
        origin_layout.pack(origin)
    }

    /// Same element counts, the origin buffer holds its layout, and (for
    /// windows of fixed size) `rank`'s part holds the target layout from
    /// `disp` — all before anything is sent.
    fn check_layouts(
        &self,
        call: &'static str,
        rank: usize,
        disp: usize,
        target: &Layout,
        origin_len: usize,
        origin_layout: &Layout,
    ) -> Result<()> {
        if target.len() != origin_layout.len() {
            return Err(Error::InvalidArgument(format!(
                "window {}: {call} to rank {rank}: the target layout holds {} elements, \
                 the origin layout {}",
                self.id,
                target.len(),
                origin_layout.len()
            )));
        }
        origin_layout.fits(origin_len, "origin buffer")?;
        if !self.is_dynamic() && !target.is_empty() {
            let len = self.len_of(rank)?;
            let end = disp.checked_add(target.extent());
            if end.is_none_or(|e| e > len) {
                return Err(Error::OutOfWindow {
                    window: self.id,
                    rank,
                    offset: disp,
                    len: target.extent(),
                    window_len: len,
                });
            }
        }
        Ok(())
    }
}
