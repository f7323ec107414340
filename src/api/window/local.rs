//! Local access to this process's own window memory (`local_read`,
//! `local_write`, `local_to_vec`): bounds-checked copies, never references
//! to plain elements; and atomic views (`atomic`, `atomic_slice`), the one
//! way to hold a reference into memory peers may write.

use super::Window;
use crate::api::element::{Element, Integer};
use crate::error::{Error, Result};

impl<T: Element> Window<'_, T> {
    /// Copies local window elements starting at `disp` into `out`.
    pub fn local_read(&self, disp: usize, out: &mut [T]) -> Result<()> {
        self.alive("local_read")?;
        if self.is_dynamic() {
            return self.own_region(disp, out.len(), |m, off| {
                m.read(off, bytemuck::cast_slice_mut(out))
            });
        }
        let off = self.local_range(disp, out.len())?;
        self.mem.read(off, bytemuck::cast_slice_mut(out))
    }

    /// Copies `data` into the local window at `disp`.
    pub fn local_write(&self, disp: usize, data: &[T]) -> Result<()> {
        self.alive("local_write")?;
        if self.is_dynamic() {
            return self.own_region(disp, data.len(), |m, off| {
                m.write(off, bytemuck::cast_slice(data))
            });
        }
        let off = self.local_range(disp, data.len())?;
        self.mem.write(off, bytemuck::cast_slice(data))
    }

    /// A copy of the whole local window.
    pub fn local_to_vec(&self) -> Result<Vec<T>> {
        let mut v = vec![T::zeroed(); self.len];
        self.local_read(0, &mut v)?;
        Ok(v)
    }

    pub(super) fn local_range(&self, disp: usize, n: usize) -> Result<usize> {
        match disp.checked_add(n) {
            Some(end) if end <= self.len => Ok(disp * std::mem::size_of::<T>()),
            _ => Err(Error::OutOfWindow {
                window: self.id,
                rank: self.world.rank(),
                offset: disp,
                len: n,
                window_len: self.len,
                unattached: None,
            }),
        }
    }
}

impl<T: Integer> Window<'_, T> {
    /// An atomic view of element `disp` of this process's window
    /// ([`Window::atomic_slice`] of one element).
    ///
    /// # Errors
    /// As [`Window::atomic_slice`].
    pub fn atomic(&self, disp: usize) -> Result<&T::Atomic> {
        let cells = self.atomic_slice(disp, 1)?;
        cells.first().ok_or_else(|| {
            Error::InvalidArgument(format!("window {}: no element {disp}", self.id))
        })
    }

    /// Atomic views of `n` elements of this process's window from `disp`
    /// (`AtomicU64` for a `u64` window, ...): load, store, `fetch_add`,
    /// `compare_exchange` on the memory peers access, in any epoch, with
    /// no copy. The views borrow the window, so it cannot be freed or
    /// given back while they exist.
    ///
    /// What they promise (the unified model, `docs/semantics.md`): each
    /// access is atomic against other views, against peers' puts and gets
    /// element by element (no torn element), and against accumulates the
    /// target's CPU applies (the software path). They are *not* atomic with
    /// NIC atomics (native verbs' fetch-add/compare-and-swap, provider
    /// atomics on the hardware path): for a counter that peers update with
    /// `fetch_and_op`, update it with `win.fetch_and_op(me, ...)` too. As in
    /// MPI, a remote put racing a local store leaves either value; order
    /// them with the epoch's synchronization (`flush`, `fence`, `sync`).
    ///
    /// # Errors
    /// A freed window, a dynamic window (its memory is the attached
    /// regions: keep views of those before attaching), or a range outside
    /// the local window.
    pub fn atomic_slice(&self, disp: usize, n: usize) -> Result<&[T::Atomic]> {
        self.alive("atomic_slice")?;
        if self.is_dynamic() {
            return Err(Error::Unsupported(format!(
                "window {}: atomic views of a dynamic window (its memory is the attached regions)",
                self.id
            )));
        }
        let off = self.local_range(disp, n)?;
        self.mem.cells::<T::Atomic>(off, n)
    }
}
