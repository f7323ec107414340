//! The target side of the software accumulate path: the handler that
//! applies requests (`wire.rs`) to exposed windows with CPU atomics.

use std::sync::Arc;

use super::wire::{check_software_op, Request};
use crate::transport::am::Handler;
use crate::transport::cpu_atomic;
use crate::transport::exposed::ExposedTable;
use crate::transport::{Atomic, AtomicOp};

/// Applies accumulate requests to exposed windows.
pub struct AccumulateHandler {
    /// Windows open for software accumulates.
    pub table: Arc<ExposedTable>,
}

impl Handler for AccumulateHandler {
    fn handle(
        &self,
        from: usize,
        payload: &[u8],
        reply: Option<&mut [u8]>,
    ) -> Result<usize, String> {
        let reply = reply.ok_or("software accumulates are requests")?;
        let r = Request::decode(payload)?;
        let id = r.window;
        let span = u64::from(r.count) * r.datatype.size() as u64;
        let applied = self.table.with_range(id, r.offset, span, |mem, offset, datatype, software| {
            check_software_op(datatype, r.datatype, r.op, software)
                .map_err(|m| format!("window {id}, accumulate from rank {from}: {m}"))?;
            let size = datatype.size();
            let bytes = r.count as usize * size;
            let out = reply
                .get_mut(..bytes)
                .ok_or_else(|| format!("a reply of {bytes} bytes does not fit"))?;
            let done = if r.op == AtomicOp::Cswap {
                let (cmp, swap) = r.data.split_at(size);
                cpu_atomic::compare_swap(mem, offset, datatype, cmp, swap, out)
            } else {
                let what = Atomic {
                    op: r.op,
                    datatype,
                    count: r.count as usize,
                };
                cpu_atomic::accumulate(mem, offset, what, r.data, r.fetch.then_some(out))
            };
            done.map_err(|e| format!("window {id}, request from rank {from}: {e}"))?;
            Ok(if r.fetch { bytes } else { 0 })
        });
        applied.unwrap_or_else(|| {
            Err(format!(
                "window {id} is not open for software accumulates here (not created, \
                 freed, on the hardware path, or a dynamic window with no region \
                 attached at {:#x} covering {span} bytes)",
                r.offset
            ))
        })
    }
}
