//! Noncontiguous put, get, accumulate and get_accumulate ([`Layout`] on
//! origin, target and result: MPI's derived datatypes for RMA).
//!
//! The layouts are checked against the origin buffer, against each other
//! (same element count) and against the target's part of the window
//! before anything is sent. A put to oneself or to a node-local peer on
//! the direct path is one epoch check and a copy per block, except that a
//! column-like put to a peer in a fence or PSCW epoch is packed now and
//! written at the epoch's end (`deferred.rs`). Over a
//! back-end that aggregates (tcp, sockets), runs of equal blocks at a
//! constant stride (what vector and subarray layouts make) travel as
//! strided entries of BATCH messages, unpacked by the target
//! (`protocols/aggregation/wire.rs`), and a get_layout's runs as
//! strided-get requests the target answers with the blocks packed.
//! Runs of blocks too large for batches travel as scatter puts and gather
//! gets: several remote ranges per operation where the back-end takes
//! them ([`crate::transport::Caps::rma_ranges`]: `fi_writemsg`/
//! `fi_readmsg`), else one operation per block, all posted before one
//! wait (native verbs).
//! Otherwise the data travels block by
//! block (one write, read or atomic per contiguous target block); gets are
//! issued together and waited for together. Accumulates keep element-wise
//! atomicity, as MPI asks of them.


use super::deferred::Deferred;
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
        self.check_layouts("put_layout", rank, disp, target, origin.len(), origin_layout)?;
        if target.is_empty() {
            return Ok(());
        }
        if self.dynamic_messages() || self.is_dynamic() {
            // Block by block, through put's own paths (software messages,
            // dynamic attachments).
            let packed = origin_layout.pack(origin)?;
            return self.put_blocks(rank, disp, target.blocks(), &packed);
        }
        let size = std::mem::size_of::<T>();
        // One epoch and bounds check for the whole target extent.
        let mut slot = None;
        let (world_rank, off, d, _issuing) = self.access("put_layout", rank, disp, target.extent(), &mut slot)?;
        if self.soft_lock.is_some() {
            // A lazily taken software lock is acquired now (nothing is
            // stashed for a lock-op-unlock message: empty data).
            self.defer_op(world_rank, disp, &[], None)?;
        }
        let blocks = target.blocks();
        let direct = match world_rank == self.me {
            true => None,
            false => self.direct(world_rank, d)?,
        };
        if world_rank == self.me || direct.is_some() {
            if let Some(peer) = direct.as_ref() {
                if Deferred::worth(blocks.len(), target.len() * size)
                    && self.epoch()?.active_target()
                {
                    // Packed now, written at the epoch's end (`deferred.rs`).
                    let runs = target.runs().iter().map(|r| {
                        (off + r.at * size, r.len * size, r.stride * size, r.count)
                    });
                    return self.deferred.push(
                        self.id,
                        peer.to_arc(),
                        runs,
                        target.len() * size,
                        |out| origin_layout.pack_bytes(origin, out),
                    );
                }
            }
            // Earlier deferred layouts first: one origin's writes land in
            // program order.
            self.deferred.write(self.id)?;
            let mem = direct.as_deref().unwrap_or(&self.mem);
            if same_blocks(target, origin_layout) {
                // Blocks of the same shapes on both sides: copied block to
                // block, without packing.
                for (&(at, n), &(from, _)) in blocks.iter().zip(origin_layout.blocks()) {
                    mem.write(off + at * size, bytemuck::cast_slice(&origin[from..from + n]))?;
                }
                return Ok(());
            }
            // Otherwise packed, then a strided copy per run.
            let packed = origin_layout.pack(origin)?;
            let bytes: &[u8] = bytemuck::cast_slice(&packed);
            let mut pos = 0;
            return for_runs(target, |at, (n, stride), count| {
                let data = &bytes[pos * size..(pos + count * n) * size];
                pos += count * n;
                mem.write_strided(off + at * size, (n * size, stride * size), data)
            });
        }
        // Runs of equal blocks at a constant stride as strided batch
        // entries where the window aggregates; other runs as scatter puts
        // (several blocks per provider operation where the back-end
        // offers it, else every block's write posted before one wait);
        // single blocks through `put`.
        let packed = origin_layout.pack(origin)?;
        let bytes: &[u8] = bytemuck::cast_slice(&packed);
        // Elements and blocks done so far.
        let (mut pos, mut done) = (0, 0);
        for_runs(target, |at, (n, stride), count| {
            let elems = count * n;
            let data = &bytes[pos * size..(pos + elems) * size];
            let queued = count > 1
                && self.queue_strided(
                    world_rank,
                    off + at * size,
                    (n * size, stride * size),
                    data,
                )?;
            if !queued && count > 1 {
                let ranges = self.ranges(d, off, &blocks[done..done + count]);
                let posted = self.world.transport().put_scatter(world_rank, data, &ranges);
                // After posting (meta::dirty's rule).
                self.mark_dirty(world_rank);
                posted?;
            } else if !queued {
                let run = &blocks[done..done + count];
                self.put_blocks(rank, disp, run, &packed[pos..pos + elems])?;
            }
            pos += elems;
            done += count;
            Ok(())
        })
    }

    /// Writes elements of this process's own window — those
    /// `origin_layout` names, counted from `origin_disp` — into the
    /// elements of `rank`'s window that `target` names, counted from
    /// `disp`: MPI_Put with its origin buffer inside the window, as halo
    /// exchanges are written (the boundary column a rank sends lies next
    /// to the halo column it receives, in the same cache lines).
    ///
    /// The origin elements are read when the call is made, with atomic
    /// loads (peers may write other parts of the window meanwhile; as in
    /// MPI, origin elements that a peer writes in the same epoch hold
    /// undefined values, never unsafety). `rank` may be this process.
    ///
    /// # Errors
    /// As [`Window::put_layout`]; [`Error::OutOfWindow`] (naming this
    /// rank) if `origin_layout` from `origin_disp` does not fit in this
    /// process's window; [`Error::InvalidArgument`] on a dynamic window,
    /// whose memory is not one region.
    pub fn put_layout_from_window(
        &self,
        rank: usize,
        disp: usize,
        target: &Layout,
        origin_disp: usize,
        origin_layout: &Layout,
    ) -> Result<()> {
        self.alive("put_layout_from_window")?;
        if self.is_dynamic() {
            return Err(Error::InvalidArgument(format!(
                "window {}: put_layout_from_window on a dynamic window (its memory is not \
                 one region: put from the attached Vec instead)",
                self.id
            )));
        }
        // As `local_read` checks its range (OutOfWindow naming this rank).
        let base = self.local_range(origin_disp, origin_layout.extent())?;
        let size = std::mem::size_of::<T>();
        let mut packed = vec![T::zeroed(); origin_layout.len()];
        let mut pos = 0;
        for_runs(origin_layout, |at, (n, stride), count| {
            let out: &mut [u8] = bytemuck::cast_slice_mut(&mut packed[pos..pos + n * count]);
            pos += n * count;
            self.mem
                .read_strided(base + at * size, (n * size, stride * size), out)
        })?;
        self.put_layout(
            rank,
            disp,
            target,
            &packed,
            &Layout::contiguous(packed.len()),
        )
    }

    /// The remote ranges of `blocks` (elements from byte `off` of the
    /// window that `d` describes), for a scatter put or gather get.
    fn ranges(
        &self,
        d: &crate::meta::directory::Descriptor,
        off: usize,
        blocks: &[(usize, usize)],
    ) -> Vec<(crate::transport::RemoteAddr, usize)> {
        let size = std::mem::size_of::<T>();
        blocks
            .iter()
            .map(|&(at, n)| (Self::remote(d, off + at * size), n * size))
            .collect()
    }

    /// Puts `packed` block by block into `blocks` of `rank`'s window
    /// (from `disp`).
    fn put_blocks(
        &self,
        rank: usize,
        disp: usize,
        blocks: &[(usize, usize)],
        packed: &[T],
    ) -> Result<()> {
        let mut pos = 0;
        for &(at, n) in blocks {
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
        if target.is_empty() {
            return Ok(());
        }
        if !self.dynamic_messages() && !self.is_dynamic() && same_blocks(target, origin_layout) {
            // Node-local target: read block to block, without unpacking.
            let size = std::mem::size_of::<T>();
            let mut slot = None;
            let (world_rank, off, d, _issuing) = self.access("get_layout", rank, disp, target.extent(), &mut slot)?;
            let direct = match world_rank == self.me {
                true => None,
                false => self.direct(world_rank, d)?,
            };
            if world_rank == self.me || direct.is_some() {
                let mem = direct.as_deref().unwrap_or(&self.mem);
                for (&(at, n), &(to, _)) in target.blocks().iter().zip(origin_layout.blocks()) {
                    let out: &mut [u8] = bytemuck::cast_slice_mut(&mut origin[to..to + n]);
                    mem.read(off + at * size, out)?;
                }
                return Ok(());
            }
        }
        if !self.dynamic_messages() && !self.is_dynamic() {
            return self.get_layout_strided(rank, disp, target, origin, origin_layout);
        }
        let requests = target
            .blocks()
            .iter()
            .map(|&(at, n)| self.rget(rank, disp + at, vec![T::zeroed(); n]))
            .collect::<Result<Vec<_>>>()?;
        let blocks = Request::wait_all(requests)?;
        let packed: Vec<T> = blocks.concat();
        origin_layout.unpack(&packed, origin)
    }

    /// `get_layout` from a peer: runs of small equal blocks at a constant
    /// stride as strided-get requests where the window aggregates (the
    /// target packs the blocks into its replies), other runs as gather
    /// gets, single blocks by `get`.
    fn get_layout_strided(
        &self,
        rank: usize,
        disp: usize,
        target: &Layout,
        origin: &mut [T],
        origin_layout: &Layout,
    ) -> Result<()> {
        let size = std::mem::size_of::<T>();
        // One epoch and bounds check for the whole target extent.
        let mut slot = None;
        let (world_rank, off, d, _issuing) = self.access("get_layout", rank, disp, target.extent(), &mut slot)?;
        let blocks = target.blocks();
        // Oneself and node-local peers are read by `get`'s own paths.
        let remote = world_rank != self.me && self.direct(world_rank, d)?.is_none();
        let mut packed = vec![T::zeroed(); blocks.iter().map(|b| b.1).sum()];
        // Elements and blocks done so far.
        let (mut pos, mut done) = (0, 0);
        for_runs(target, |at, (n, stride), count| {
            let elems = count * n;
            let out = &mut packed[pos..pos + elems];
            let fetched = count > 1
                && self.get_strided(
                    world_rank,
                    off + at * size,
                    (n * size, stride * size),
                    bytemuck::cast_slice_mut(out),
                )?;
            if !fetched && count > 1 && remote {
                // Several blocks per provider read, after the operations
                // queued for the target (as `get` orders them).
                self.batches_before(world_rank, true)?;
                let ranges = self.ranges(d, off, &blocks[done..done + count]);
                self.world.transport().get_gather(
                    world_rank,
                    bytemuck::cast_slice_mut(out),
                    &ranges,
                )?;
            } else if !fetched {
                let mut at_elem = 0;
                for &(b, m) in &blocks[done..done + count] {
                    self.get(rank, disp + b, &mut out[at_elem..at_elem + m])?;
                    at_elem += m;
                }
            }
            pos += elems;
            done += count;
            Ok(())
        })?;
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
                    unattached: None,
                });
            }
        }
        Ok(())
    }
}

/// Whether two layouts have blocks of the same lengths, pairwise.
fn same_blocks(a: &Layout, b: &Layout) -> bool {
    a.blocks().len() == b.blocks().len()
        && a.blocks()
            .iter()
            .zip(b.blocks())
            .all(|(x, y)| x.1 == y.1)
}

/// Calls `f(at, (n, stride), count)` for each run of `count` blocks of `n`
/// elements from element `at`, `stride` elements apart (`n` for a run of
/// one block), in order.
fn for_runs(
    layout: &Layout,
    mut f: impl FnMut(usize, (usize, usize), usize) -> Result<()>,
) -> Result<()> {
    for r in layout.runs() {
        f(r.at, (r.len, r.stride), r.count)?;
    }
    Ok(())
}
