//! Local access to this process's own window memory (`local_read`,
//! `local_write`, `local_to_vec`): bounds-checked copies, never references.

use super::Window;
use crate::api::element::Element;
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

    fn local_range(&self, disp: usize, n: usize) -> Result<usize> {
        match disp.checked_add(n) {
            Some(end) if end <= self.len => Ok(disp * std::mem::size_of::<T>()),
            _ => Err(Error::OutOfWindow {
                window: self.id,
                rank: self.world.rank(),
                offset: disp,
                len: n,
                window_len: self.len,
            }),
        }
    }
}
