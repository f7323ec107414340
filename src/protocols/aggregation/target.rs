//! The target side of BATCH messages: checks a batch against the window it
//! names, then applies its entries in order — puts by copy, accumulates by
//! CPU atomics (`transport::cpu_atomic`), as the software accumulate path
//! does — and acknowledges with an empty reply.
//!
//! Nothing is applied unless every entry passed every check: a refused
//! batch leaves the window untouched, is counted (`OpStats::batches_refused`
//! and the active-message protocol errors) and its origin's next flush
//! fails with the reason.

use std::sync::Arc;

use super::wire::{self, Entry};
use super::{Shared, PUT_POLICY};
use crate::protocols::accumulate::check_software_op;
use crate::transport::am::Handler;
use crate::transport::cpu_atomic;
use crate::transport::exposed::ExposedTable;
use crate::transport::{Atomic, Datatype};

/// Applies BATCH requests to exposed windows.
pub struct BatchHandler {
    /// Windows open to message handlers.
    pub table: Arc<ExposedTable>,
    /// Counters and pools of this process.
    pub shared: Arc<Shared>,
}

/// Checks `e` against a window of `len` bytes holding `datatype` with the
/// software-path `policy`.
fn check(
    k: usize,
    e: &Entry<'_>,
    len: usize,
    datatype: Datatype,
    policy: u64,
) -> Result<(), String> {
    // The byte after the last one written.
    let end = match e.strided {
        None => usize::try_from(e.offset)
            .ok()
            .and_then(|o| o.checked_add(e.data.len())),
        Some(s) => {
            let block = s.block as usize;
            let last = (e.data.len() / block).saturating_sub(1);
            usize::try_from(s.stride)
                .ok()
                .and_then(|st| st.checked_mul(last))
                .zip(usize::try_from(e.offset).ok())
                .and_then(|(a, o)| a.checked_add(o))
                .and_then(|a| a.checked_add(block))
        }
    };
    if end.is_none_or(|end| end > len) {
        return Err(format!(
            "entry {k}: {} bytes at byte {}{} run past the {len}-byte window",
            e.data.len(),
            e.offset,
            e.strided
                .map(|s| format!(" in {}-byte blocks {} bytes apart", s.block, s.stride))
                .unwrap_or_default()
        ));
    }
    if e.class == wire::PUT || e.class == wire::STRIDED {
        if policy & PUT_POLICY == 0 {
            return Err(format!("entry {k}: the window takes no batched puts"));
        }
        return Ok(());
    }
    let (Some(op), Some(dt)) = (e.op, e.datatype) else {
        return Err(format!(
            "entry {k}: an accumulate without operation or type"
        ));
    };
    check_software_op(datatype, dt, op, policy).map_err(|m| format!("entry {k}: {m}"))?;
    let size = datatype.size();
    if e.offset % size as u64 != 0 {
        return Err(format!(
            "entry {k}: byte offset {} is not aligned to {size}-byte elements",
            e.offset
        ));
    }
    Ok(())
}

impl Handler for BatchHandler {
    fn handle(
        &self,
        from: usize,
        payload: &[u8],
        reply: Option<&mut [u8]>,
    ) -> Result<usize, String> {
        let refused = |why: String| self.shared.refused(why);
        if reply.is_none() {
            return Err(refused("batches are requests".into()));
        }
        let (id, entries) = wire::decode(payload).map_err(|e| refused(e.to_string()))?;
        let applied = self
            .table
            .with(id, |mem, datatype, policy| -> Result<usize, String> {
                for (k, e) in entries.iter().enumerate() {
                    check(k, e, mem.len(), datatype, policy)?;
                }
                for (k, e) in entries.iter().enumerate() {
                    let offset = e.offset as usize;
                    let done = match (e.op, e.strided) {
                        (None, Some(s)) => mem.write_strided(
                            offset,
                            (s.block as usize, s.stride as usize),
                            e.data,
                        ),
                        (None, None) => mem.write(offset, e.data),
                        (Some(op), _) => {
                            let size = datatype.size();
                            let what = Atomic {
                                op,
                                datatype,
                                count: e.data.len() / size,
                            };
                            cpu_atomic::accumulate(mem, offset, what, e.data, None)
                        }
                    };
                    done.map_err(|err| format!("entry {k}: {err}"))?;
                }
                Ok(entries.len())
            });
        match applied {
            Some(Ok(n)) => {
                self.shared.stats.count_applied(n);
                Ok(0)
            }
            Some(Err(why)) => Err(refused(format!(
                "window {id}, batch from rank {from}: {why}"
            ))),
            None => Err(refused(format!(
                "window {id} is not open for batches here (not created, freed, or dynamic)"
            ))),
        }
    }
}

/// Answers strided gets (`wire::GetRequest`) from exposed windows that
/// take batched puts: the blocks packed into the reply, after checking the
/// whole extent against the window.
pub struct GetHandler {
    /// Windows open to message handlers.
    pub table: Arc<ExposedTable>,
    /// Counters and pools of this process.
    pub shared: Arc<Shared>,
}

impl Handler for GetHandler {
    fn handle(
        &self,
        from: usize,
        payload: &[u8],
        reply: Option<&mut [u8]>,
    ) -> Result<usize, String> {
        let refused = |why: String| self.shared.refused(why);
        let Some(reply) = reply else {
            return Err(refused("strided gets are requests".into()));
        };
        let r = wire::GetRequest::decode(payload, reply.len()).map_err(&refused)?;
        let id = r.window;
        let read = self.table.with(id, |mem, _, policy| -> Result<usize, String> {
            if policy & PUT_POLICY == 0 {
                return Err("the window serves no strided gets".into());
            }
            let len = mem.len();
            if r.end().is_none_or(|end| end > len as u64) {
                return Err(format!(
                    "{} blocks of {} bytes {} bytes apart from byte {} run past the {len}-byte window",
                    r.count, r.stride.block, r.stride.stride, r.offset
                ));
            }
            let (block, stride) = (r.stride.block as usize, r.stride.stride as usize);
            for (i, out) in reply[..r.reply_bytes()].chunks_mut(block).enumerate() {
                mem.read(r.offset as usize + i * stride, out)
                    .map_err(|e| e.to_string())?;
            }
            Ok(r.reply_bytes())
        });
        match read {
            Some(Ok(n)) => Ok(n),
            Some(Err(why)) => Err(refused(format!(
                "window {id}, strided get from rank {from}: {why}"
            ))),
            None => Err(refused(format!(
                "window {id} is not open for strided gets here (not created, freed, or dynamic)"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocols::aggregation::wire::{Stride, STRIDED};

    fn strided(offset: u64, block: u32, stride: u64, data: &[u8]) -> Entry<'_> {
        Entry {
            class: STRIDED,
            op: None,
            datatype: None,
            offset,
            data,
            strided: Some(Stride { block, stride }),
        }
    }

    #[test]
    fn strided_entries_are_checked_against_the_window() {
        let data = [0u8; 24];
        // Three 8-byte blocks 16 bytes apart from byte 8: the last ends at 48.
        let e = strided(8, 8, 16, &data);
        assert!(check(0, &e, 48, Datatype::U8, PUT_POLICY).is_ok());
        let err = check(0, &e, 47, Datatype::U8, PUT_POLICY).unwrap_err();
        assert!(err.contains("run past the 47-byte window"), "{err}");
        // A hostile stride or offset overflows: refused, not wrapped.
        let e = strided(8, 8, u64::MAX / 2, &data);
        assert!(check(0, &e, 1 << 20, Datatype::U8, PUT_POLICY).is_err());
        let e = strided(u64::MAX - 4, 8, 16, &data);
        assert!(check(0, &e, 1 << 20, Datatype::U8, PUT_POLICY).is_err());
        // A window that takes no batched puts refuses them.
        let e = strided(0, 8, 8, &data);
        assert!(check(0, &e, 48, Datatype::U8, 0).is_err());
    }
}
