//! The accumulate family over the provider's atomics: `accumulate`,
//! `get_accumulate`, `fetch_and_op`, `compare_and_swap`, `raccumulate`,
//! `rget_accumulate` (see `docs/semantics.md`).
//!
//! Each window decides at creation, identically on every rank, which
//! operations run on the provider's atomics and which on the software path
//! (`software.rs`: active messages applied by the target's CPU atomics);
//! see `info.rs` and `docs/semantics.md`. On the provider path every
//! accumulate goes through the provider, also to oneself: a local
//! read-modify-write would not be atomic with respect to the provider's
//! atomics from other ranks (Open MPI issue 4688). On the software path an
//! accumulate to oneself runs the same CPU atomics the handler runs.

use super::access::Issuing;
use super::Window;
use crate::api::element::Element;
use crate::api::op::{AnyOp, FetchOpFor, OpFor};
use crate::api::request::Request;
use crate::error::{Error, Result};
use crate::meta::directory::{Descriptor, MAGIC};
use crate::transport::inflight::Sink;
use crate::transport::{Atomic, AtomicKind, AtomicOp, AtomicOrder, Datatype, InFlight};

/// Where an accumulate call goes: its byte offset, the target's descriptor,
/// and whether it takes the software path.
pub(super) struct Route<'w> {
    /// Registered while posting inside `lock_all` (`access.rs`).
    issuing: Issuing<'w>,
    /// The target's world rank.
    rank: usize,
    off: usize,
    d: &'w Descriptor,
    software: bool,
    // Goes into the window's operation table (`protocols/aggregation/origin.rs`).
    queued: bool,
}

impl<T: Element> Window<'_, T> {
    fn atomic_op(op: AnyOp, count: usize) -> Atomic {
        Atomic {
            op: op.atomic_op(),
            datatype: T::DATATYPE,
            count,
        }
    }

    /// Validates an atomic access: the operation on `T`, then as put/get
    /// (`access`), and picks the window's path for the operation. On the
    /// provider path, makes sure the target, even ourselves, is a peer of
    /// the transport. Keeps the ordering the window's `accumulate_ordering`
    /// asks for where the path does not promise it, by completing earlier
    /// operations first. Always inline: returned through memory, the
    /// route's 64-byte descriptor cost store-forwarding stalls (perf, CPU
    /// `fetch_and_op`).
    #[inline(always)]
    fn atomic_access<'s>(
        &'s self,
        call: &'static str,
        op: Option<AnyOp>,
        kind: AtomicKind,
        (rank, disp, n): (usize, usize, usize),
        slot: &'s mut Option<Descriptor>,
    ) -> Result<Route<'s>> {
        if let Some(op) = op {
            if op.integer_only() && !T::INTEGER {
                return Err(Error::InvalidArgument(format!(
                    "window {}: {call} to rank {rank} at element offset {disp}, length {n}: \
                     {op} is a bitwise/logical operation, not defined on {}",
                    self.id,
                    T::NAME
                )));
            }
        }
        let aop = op.map_or(AtomicOp::Cswap, AnyOp::atomic_op);
        // Every rank local with the direct path: CPU atomics (`direct.rs`).
        let cpu = self.cpu_atomics();
        let software = !cpu && self.paths.software(aop);
        let (rank, off, d, _issuing) = self.access(call, rank, disp, n, slot)?;
        let queued = self.aggregates_accumulate(call, software, rank, n)?;
        if !software && !cpu {
            if !self.valid_ops.get(aop, kind) {
                return Err(Error::Unsupported(format!(
                    "window {}: {call} to rank {rank} at element offset {disp}, length {n}: \
                     {} has no {} for {aop} on {}",
                    self.id,
                    self.world.provider(),
                    kind.name(),
                    T::NAME
                )));
            }
            if rank == self.me {
                // Loopback through our own endpoint: contacts ourselves once.
                self.world.control(rank)?;
            }
        }
        // The software path promises no order between requests (handlers
        // may run on two threads at the target); the provider path promises
        // `atomic_order`.
        let wanted = self.info.order();
        let promised = if software {
            AtomicOrder::NONE
        } else {
            self.props.atomic_order
        };
        if !promised.contains(wanted) && self.outstanding.pending(Some(rank)) > 0 {
            // Earlier operations in flight to `rank` could be overtaken.
            if queued {
                // Its batch ships after the earlier batches were applied
                // (the table orders those), but nothing orders it after
                // the window's other accumulates to `rank` (a large one is
                // a software message of its own): completed first.
                self.wait_outstanding(Some(rank))?;
            } else {
                self.complete_local(Some(rank))?;
            }
        }
        Ok(Route {
            issuing: _issuing,
            rank,
            off,
            d,
            software,
            queued,
        })
    }

    fn mark_atomic_dirty(&self, rank: usize) {
        if self.props.ordered_atomic_raw {
            self.atomic_dirty.mark(rank);
        }
    }

    /// Makes every atomic update to `rank` visible there: one atomic read of
    /// the control word, which the provider orders after earlier atomic
    /// updates (`FI_ORDER_ATOMIC_RAW`). An RMA read would not do: with
    /// `FI_ATOMIC` requested, tcp;ofi_rxm promises no order between atomics
    /// and RMA (`FI_ORDER_RAW` is dropped).
    #[inline]
    pub(super) fn complete_atomics(&self, rank: usize) -> Result<()> {
        if !self.atomic_dirty.take(rank) {
            return Ok(());
        }
        self.read_control_atomically(rank)
    }

    /// [`Window::complete_atomics`] of a dirty target (out of line).
    #[inline(never)]
    fn read_control_atomically(&self, rank: usize) -> Result<()> {
        let ctrl = self.world.control(rank)?;
        let mut word = [0u8; 8];
        let read = Atomic {
            op: AtomicOp::Read,
            datatype: Datatype::U64,
            count: 1,
        };
        self.world
            .transport()
            .fetch_atomic(rank, read, &[0u8; 8], &mut word, ctrl)?;
        if u64::from_ne_bytes(word) != MAGIC {
            return Err(Error::Protocol {
                peer: format!("rank {rank}"),
                message: format!(
                    "window {}: atomic flush read returned a wrong control word",
                    self.id
                ),
            });
        }
        Ok(())
    }

    /// Applies `op` with `data` to `rank`'s window at element `disp`,
    /// element by element, atomically with respect to every other
    /// accumulate. Returns when `data` may be reused; the result is visible
    /// after a flush or the end of the epoch. `op` is an [`Op`](crate::Op)
    /// on any type or an [`IntOp`](crate::IntOp) on integers; a bitwise or
    /// logical operation on `f32`/`f64`, or [`NoOp`](crate::NoOp), does not
    /// compile (see `api::op`). An [`AnyOp`] is checked when the call runs
    /// (`Error::InvalidArgument`).
    pub fn accumulate(
        &self,
        rank: usize,
        disp: usize,
        data: &[T],
        op: impl OpFor<T>,
    ) -> Result<()> {
        let op = op.any();
        if op == AnyOp::NoOp {
            return Err(Error::InvalidArgument(format!(
                "window {}: accumulate to rank {rank} at element offset {disp}: \
                 NO_OP is only for get_accumulate and fetch_and_op",
                self.id
            )));
        }
        let n = data.len();
        let mut slot = None;
        let Route {
            issuing: _issuing,
            rank,
            off,
            d,
            software,
            queued,
        } = self.atomic_access("accumulate", Some(op), AtomicKind::Update, (rank, disp, n), &mut slot)?;
        if n == 0 {
            return Ok(());
        }
        // Before the operation table: a lazy software lock on `rank` either
        // stashes this accumulate or is acquired now, so nothing is queued
        // to a target whose lock is not held.
        if self.soft_lock.is_some() && self.defer_op(rank, disp, data, Some(op))? {
            // Stashed until the lock is acquired (lazy software lock).
            return Ok(());
        }
        if queued {
            return self.queue_accumulate(rank, off, op.atomic_op(), bytemuck::cast_slice(data));
        }
        if self.cpu_atomics() {
            let src = bytemuck::cast_slice(data);
            return self.cpu_accumulate((rank, off, d), Self::atomic_op(op, n), src, None);
        }
        if software {
            // Acknowledgements count on the window's tracker (flush waits).
            let acks = Sink::counter(self.outstanding.to(rank));
            return self.soft_post(
                rank,
                off,
                op.atomic_op(),
                bytemuck::cast_slice(data),
                n,
                &acks,
            );
        }
        let posted = self.world.transport().atomic(
            rank,
            Self::atomic_op(op, n),
            bytemuck::cast_slice(data),
            Self::remote(d, off),
        );
        // After posting (meta::dirty's rule).
        self.mark_atomic_dirty(rank);
        posted
    }

    /// Applies `op` with `data` at `rank`'s window at `disp` and returns the
    /// previous values in `result` (same length as `data`; with
    /// [`NoOp`](crate::NoOp), `data` may be empty). Returns when `result` is
    /// filled. Takes what [`accumulate`](Window::accumulate) takes, and
    /// `NoOp`.
    pub fn get_accumulate(
        &self,
        rank: usize,
        disp: usize,
        data: &[T],
        result: &mut [T],
        op: impl FetchOpFor<T>,
    ) -> Result<()> {
        let op = op.any();
        let n = result.len();
        let data = self.origin("get_accumulate", rank, disp, data, n, op)?;
        let mut slot = None;
        let Route {
            issuing: _issuing,
            rank, off, d, software, ..
        } = self.atomic_access(
            "get_accumulate",
            Some(op),
            AtomicKind::Fetch,
            (rank, disp, n),
            &mut slot,
        )?;
        if n == 0 {
            return Ok(());
        }
        if self.cpu_atomics() {
            let fetched = Some(bytemuck::cast_slice_mut(result));
            let what = Self::atomic_op(op, n);
            return self.cpu_accumulate((rank, off, d), what, &data, fetched);
        }
        if software {
            let res = bytemuck::cast_slice_mut(result);
            return self.soft_fetch(rank, off, op.atomic_op(), &data, n, res);
        }
        self.world.transport().fetch_atomic(
            rank,
            Self::atomic_op(op, n),
            &data,
            bytemuck::cast_slice_mut(result),
            Self::remote(d, off),
        )
    }

    /// The origin bytes of a fetching accumulate: `data`, or zeros for an
    /// empty `data` with `NO_OP` (the provider reads a buffer of full length).
    fn origin(
        &self,
        call: &str,
        rank: usize,
        disp: usize,
        data: &[T],
        n: usize,
        op: AnyOp,
    ) -> Result<Vec<u8>> {
        if data.len() == n {
            return Ok(bytemuck::cast_slice(data).to_vec());
        }
        if op == AnyOp::NoOp && data.is_empty() {
            return Ok(vec![0u8; n * std::mem::size_of::<T>()]);
        }
        Err(Error::InvalidArgument(format!(
            "window {}: {call} to rank {rank} at element offset {disp}: \
             {} origin elements for a result of {n}",
            self.id,
            data.len()
        )))
    }

    /// Atomically applies `op` with `value` to one element and returns the
    /// previous value (`MPI_Fetch_and_op`).
    pub fn fetch_and_op(
        &self,
        rank: usize,
        disp: usize,
        value: T,
        op: impl FetchOpFor<T>,
    ) -> Result<T> {
        let op = op.any();
        let mut old = [T::zeroed()];
        let mut slot = None;
        let Route {
            issuing: _issuing,
            rank, off, d, software, ..
        } = self.atomic_access("fetch_and_op", Some(op), AtomicKind::Fetch, (rank, disp, 1), &mut slot)?;
        if self.cpu_atomics() {
            let (what, src) = (Self::atomic_op(op, 1), bytemuck::bytes_of(&value));
            let fetched = Some(bytemuck::cast_slice_mut(&mut old));
            self.cpu_accumulate((rank, off, d), what, src, fetched)?;
            return Ok(old[0]);
        }
        if software {
            let res = bytemuck::cast_slice_mut(&mut old);
            self.soft_fetch(
                rank,
                off,
                op.atomic_op(),
                bytemuck::bytes_of(&value),
                1,
                res,
            )?;
            return Ok(old[0]);
        }
        self.world.transport().fetch_atomic(
            rank,
            Self::atomic_op(op, 1),
            bytemuck::bytes_of(&value),
            bytemuck::cast_slice_mut(&mut old),
            Self::remote(d, off),
        )?;
        Ok(old[0])
    }

    /// Atomically replaces the element at `disp` by `swap` if it equals
    /// `compare`; returns the previous value either way.
    pub fn compare_and_swap(&self, rank: usize, disp: usize, compare: T, swap: T) -> Result<T> {
        let mut old = [T::zeroed()];
        let mut slot = None;
        let Route {
            issuing: _issuing,
            rank, off, d, software, ..
        } = self.atomic_access(
            "compare_and_swap",
            None,
            AtomicKind::Compare,
            (rank, disp, 1),
            &mut slot,
        )?;
        if self.cpu_atomics() {
            let (c, s) = (bytemuck::bytes_of(&compare), bytemuck::bytes_of(&swap));
            let old_bytes = bytemuck::cast_slice_mut(&mut old);
            self.cpu_compare_swap((rank, off, d), c, s, old_bytes)?;
            return Ok(old[0]);
        }
        if software {
            let operands = [bytemuck::bytes_of(&compare), bytemuck::bytes_of(&swap)].concat();
            let res = bytemuck::cast_slice_mut(&mut old);
            self.soft_fetch(rank, off, AtomicOp::Cswap, &operands, 1, res)?;
            return Ok(old[0]);
        }
        self.world.transport().compare_atomic(
            rank,
            T::DATATYPE,
            bytemuck::bytes_of(&compare),
            bytemuck::bytes_of(&swap),
            bytemuck::cast_slice_mut(&mut old),
            Self::remote(d, off),
        )?;
        Ok(old[0])
    }

    /// Starts an [`accumulate`](Window::accumulate); the request owns
    /// `data` until it completes locally.
    pub fn raccumulate<B>(
        &self,
        rank: usize,
        disp: usize,
        mut data: B,
        op: impl OpFor<T>,
    ) -> Result<Request<'_, B>>
    where
        B: AsMut<[T]> + Send + 'static,
    {
        let op = op.any();
        if op == AnyOp::NoOp {
            return Err(Error::InvalidArgument(format!(
                "window {}: raccumulate to rank {rank} at element offset {disp}: \
                 NO_OP is only for get_accumulate and fetch_and_op",
                self.id
            )));
        }
        let n = data.as_mut().len();
        let mut slot = None;
        let Route {
            issuing: _issuing,
            rank, off, d, software, ..
        } = self.atomic_access("raccumulate", Some(op), AtomicKind::Update, (rank, disp, n), &mut slot)?;
        let what = format!(
            "raccumulate ({op}) of {n} {} to rank {rank} (window {})",
            T::NAME,
            self.id
        );
        let t = self.world.transport();
        if n == 0 {
            return Ok(Request::new(self.world.config.timeout, t, InFlight::new(data, None), what));
        }
        if self.cpu_atomics() {
            let src = bytemuck::cast_slice(data.as_mut());
            self.cpu_accumulate((rank, off, d), Self::atomic_op(op, n), src, None)?;
            return Ok(Request::new(self.world.config.timeout, t, InFlight::new(data, None), what));
        }
        if software {
            // The operands are copied into the messages: the request is
            // complete locally at once; acknowledgements count on the
            // window's tracker, as for `accumulate`.
            let acks = Sink::counter(self.outstanding.to(rank));
            let bytes: &[u8] = bytemuck::cast_slice(data.as_mut());
            self.soft_post(rank, off, op.atomic_op(), bytes, n, &acks)?;
            return Ok(Request::new(self.world.config.timeout, t, InFlight::new(data, None), what));
        }
        let f = InFlight::new(data, Some(self.outstanding.to(rank)));
        let posted = t.atomic_async(rank, Self::atomic_op(op, n), &f, Self::remote(d, off));
        self.mark_atomic_dirty(rank);
        posted?;
        Ok(Request::new(self.world.config.timeout, t, f, what))
    }

    /// Starts a [`get_accumulate`](Window::get_accumulate): `data` is
    /// copied, the request owns `result` and gives it back, filled, from
    /// `wait`.
    pub fn rget_accumulate<B>(
        &self,
        rank: usize,
        disp: usize,
        data: &[T],
        mut result: B,
        op: impl FetchOpFor<T>,
    ) -> Result<Request<'_, B>>
    where
        B: AsMut<[T]> + Send + 'static,
    {
        let op = op.any();
        let n = result.as_mut().len();
        let origin = self.origin("rget_accumulate", rank, disp, data, n, op)?;
        let mut slot = None;
        let Route {
            issuing: _issuing,
            rank, off, d, software, ..
        } = self.atomic_access(
            "rget_accumulate",
            Some(op),
            AtomicKind::Fetch,
            (rank, disp, n),
            &mut slot,
        )?;
        let what = format!(
            "rget_accumulate ({op}) of {n} {} at rank {rank} (window {})",
            T::NAME,
            self.id
        );
        let t = self.world.transport();
        if n == 0 {
            return Ok(Request::new(self.world.config.timeout, t, InFlight::new(result, None), what));
        }
        if self.cpu_atomics() {
            let fetched = Some(bytemuck::cast_slice_mut(result.as_mut()));
            let what_op = Self::atomic_op(op, n);
            self.cpu_accumulate((rank, off, d), what_op, &origin, fetched)?;
            return Ok(Request::new(self.world.config.timeout, t, InFlight::new(result, None), what));
        }
        let f = InFlight::new(result, Some(self.outstanding.to(rank)));
        if software {
            // Replies deliver into the request's buffer (counted on the
            // request and the window); a failed post leaves the parts sent
            // so far to complete before the buffer comes back.
            self.soft_post(rank, off, op.atomic_op(), &origin, n, &f.sink())?;
            return Ok(Request::new(self.world.config.timeout, t, f, what));
        }
        t.fetch_atomic_async(
            rank,
            Self::atomic_op(op, n),
            origin,
            &f,
            Self::remote(d, off),
        )?;
        Ok(Request::new(self.world.config.timeout, t, f, what))
    }
}
