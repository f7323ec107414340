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
    let end = usize::try_from(e.offset)
        .ok()
        .and_then(|o| o.checked_add(e.data.len()));
    if end.is_none_or(|end| end > len) {
        return Err(format!(
            "entry {k}: {} bytes at byte {} run past the {len}-byte window",
            e.data.len(),
            e.offset
        ));
    }
    if e.class == wire::PUT {
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
        let refused = |why: String| {
            self.shared.stats.count_refused();
            why
        };
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
                    let done = match e.op {
                        None => mem.write(offset, e.data),
                        Some(op) => {
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
