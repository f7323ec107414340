//! Puts and gets: copies between the origin's buffer and the target's
//! registered memory through `Memory`'s relaxed-atomic copies (a racing
//! write by another rank yields old or new bytes, never undefined
//! behaviour), done by the origin's thread — no target CPU involved.

use super::LoopbackTransport;
use crate::error::Result;
use crate::transport::RemoteAddr;

/// Writes `data` to `dst` at `target`.
pub(super) fn write(
    t: &LoopbackTransport,
    target: usize,
    data: &[u8],
    dst: RemoteAddr,
) -> Result<()> {
    let what = || format!("put of {} bytes", data.len());
    t.remote(target, dst, data.len(), &what, |m, off| m.write(off, data))?;
    t.counters.write(data.len());
    Ok(())
}

/// Reads `buf.len()` bytes from `src` at `target`.
pub(super) fn read(
    t: &LoopbackTransport,
    target: usize,
    buf: &mut [u8],
    src: RemoteAddr,
) -> Result<()> {
    let n = buf.len();
    let what = || format!("get of {n} bytes");
    t.remote(target, src, n, &what, |m, off| m.read(off, buf))?;
    t.counters.read(n);
    Ok(())
}

/// Writes one 64-bit word with release ordering (a synchronization flag:
/// whoever sees it sees every write this origin made before).
pub(super) fn signal(t: &LoopbackTransport, target: usize, value: u64, dst: RemoteAddr) -> Result<()> {
    let what = || format!("flag write of {value}");
    t.remote(target, dst, 8, &what, |m, off| {
        if (m.addr() as usize + off) % 8 == 0 {
            m.store_u64(off, value)
        } else {
            m.write(off, &value.to_ne_bytes())
        }
    })?;
    t.counters.write(8);
    Ok(())
}
