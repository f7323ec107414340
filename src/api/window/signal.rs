//! OpenSHMEM-style signalling on top of the RMA calls: `put_signal` (a put
//! whose data is complete at the target before a signal element there is
//! updated) and `wait_until` (waiting, on the target, for one of its own
//! elements to satisfy a comparison).
//!
//! `put_signal` is the put, a flush of the data to that target (whatever
//! the epoch type: the same internal completion as `flush`), then an
//! atomic update of the signal element (an accumulate, so it is atomic
//! with respect to other signals and accumulates). A process that sees the
//! signal in its memory therefore sees the data. `wait_until` reads the
//! element with atomic loads (`local_read`), driving progress between
//! reads, and gives up after `ONESIDED_TIMEOUT`.

use super::Window;
use crate::api::element::Element;
use crate::api::op::AnyOp;
use crate::error::Result;
use crate::progress::wait;

/// How `put_signal` updates the signal element (`SHMEM_SIGNAL_SET` /
/// `SHMEM_SIGNAL_ADD`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SignalOp {
    /// The element becomes the signal value (an atomic write).
    Set,
    /// The signal value is added to the element (an atomic add).
    Add,
}

/// The comparison `wait_until` waits for: `element <cmp> value`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Cmp {
    /// `==`
    Eq,
    /// `!=`
    Ne,
    /// `>`
    Gt,
    /// `>=`
    Ge,
    /// `<`
    Lt,
    /// `<=`
    Le,
}

impl Cmp {
    /// Whether `element <self> value` holds.
    pub fn holds<T: PartialOrd>(self, element: T, value: T) -> bool {
        match self {
            Cmp::Eq => element == value,
            Cmp::Ne => element != value,
            Cmp::Gt => element > value,
            Cmp::Ge => element >= value,
            Cmp::Lt => element < value,
            Cmp::Le => element <= value,
        }
    }

    fn symbol(self) -> &'static str {
        match self {
            Cmp::Eq => "==",
            Cmp::Ne => "!=",
            Cmp::Gt => ">",
            Cmp::Ge => ">=",
            Cmp::Lt => "<",
            Cmp::Le => "<=",
        }
    }
}

impl<T: Element> Window<'_, T> {
    /// Writes `data` to `rank`'s window at element `disp`, then updates
    /// the element `signal_disp` there with `signal` (`op`): when the
    /// target sees the signal (e.g. with [`Window::wait_until`]), the data
    /// is in its memory. Allowed in every access epoch, like `put`; the
    /// signal is sent before the call returns (never held back for
    /// aggregation) and lands without the origin's help; it is *complete*
    /// at the target, for the origin's own later calls, after a flush or
    /// the end of the epoch, as any accumulate.
    ///
    /// # Errors
    /// As [`Window::put`] and [`Window::accumulate`]. Both ranges are
    /// checked before anything is sent: a bad signal displacement moves no
    /// data.
    pub fn put_signal(
        &self,
        rank: usize,
        disp: usize,
        data: &[T],
        signal_disp: usize,
        signal: T,
        op: SignalOp,
    ) -> Result<()> {
        let mut slot = None;
        let (world_rank, ..) = self.access("put_signal (signal element)", rank, signal_disp, 1, &mut slot)?;
        self.put(rank, disp, data)?;
        // The data to `rank` complete there, as `flush(rank)` does, in any
        // epoch type.
        self.flush_pending(Some(world_rank))?;
        self.complete_local(Some(world_rank))?;
        self.complete_remote(world_rank)?;
        let op = match op {
            SignalOp::Set => AnyOp::Replace,
            SignalOp::Add => AnyOp::Sum,
        };
        self.accumulate(rank, signal_disp, &[signal], op)?;
        // Sent now, not held for aggregation until the next flush: the
        // target may be waiting for it (as `flush_local`).
        self.flush_pending(Some(world_rank))?;
        self.complete_local(Some(world_rank))
    }

    /// Waits until this process's own element `disp` satisfies
    /// `element <cmp> value` and returns the element's value then. Reads
    /// the element with atomic loads, so peers' updates (put, accumulate,
    /// `put_signal`) are seen as they land; needs no epoch.
    ///
    /// # Errors
    /// `disp` outside this process's window; [`Error::Timeout`](crate::Error::Timeout) after
    /// `ONESIDED_TIMEOUT` (naming the window, the element and the
    /// condition); a back-end error while driving progress.
    pub fn wait_until(&self, disp: usize, cmp: Cmp, value: T) -> Result<T>
    where
        T: PartialOrd,
    {
        let mut seen = [T::zeroed()];
        // Checked once up front: a bad displacement is an error, not a wait.
        self.local_read(disp, &mut seen)?;
        let what = || {
            format!(
                "window {}: waiting for element {disp} {} {value:?} (last seen {:?})",
                self.id,
                cmp.symbol(),
                self.local_value(disp)
            )
        };
        wait::until(
            self.world.transport(),
            self.world.config.timeout,
            &what,
            || {
                self.local_read(disp, &mut seen)?;
                Ok(cmp.holds(seen[0], value))
            },
        )?;
        Ok(seen[0])
    }

    /// The current value of own element `disp`, for messages.
    fn local_value(&self, disp: usize) -> Option<T> {
        let mut v = [T::zeroed()];
        self.local_read(disp, &mut v).ok().map(|()| v[0])
    }
}
