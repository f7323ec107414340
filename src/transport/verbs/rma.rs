//! RDMA WRITE (inline below the queue pair's `max_inline_data`) and RDMA
//! READ work requests.

use rdma_sys as ffi;

use super::conn::{rc_err, Mr, RcQp};
use crate::error::Result;
use crate::transport::RemoteAddr;

/// One local buffer of a work request: `len` bytes at `addr` inside `mr`.
#[derive(Debug, Clone, Copy)]
pub struct Local {
    /// Start address.
    pub addr: u64,
    /// Length in bytes.
    pub len: u32,
    /// Key of the region holding it (ignored for inline writes).
    pub lkey: u32,
}

impl Local {
    /// `len` bytes at byte offset `off` of `mr`; `None` when outside.
    pub fn of(mr: &Mr, off: usize, len: usize) -> Option<Local> {
        let end = off.checked_add(len)?;
        if end > mr.len {
            return None;
        }
        Some(Local {
            addr: mr.addr + off as u64,
            len: u32::try_from(len).ok()?,
            lkey: mr.lkey,
        })
    }
}

impl RcQp {
    /// Posts one signalled work request.
    pub(crate) fn post(&self, wr: &mut ffi::ibv_send_wr, what: &str) -> Result<()> {
        let mut bad: *mut ffi::ibv_send_wr = std::ptr::null_mut();
        // SAFETY: qp is valid; wr and its sg_list are initialised and live
        // for the call (the device copies the descriptor; inline data is
        // copied at post time, other buffers are registered and kept alive
        // by the caller until the completion).
        let rc = unsafe { ffi::ibv_post_send(self.qp, wr, &mut bad) };
        if rc != 0 {
            return Err(rc_err("ibv_post_send", format!("{what} on queue pair {}", self.qpn), rc));
        }
        Ok(())
    }

    /// Posts an RDMA WRITE of `src` to `dst`; inline when small enough
    /// (the source may be reused as soon as this returns).
    ///
    /// # Errors
    /// `ibv_post_send` failing (e.g. a full send queue).
    pub fn post_write(&self, wr_id: u64, src: Local, dst: RemoteAddr) -> Result<()> {
        let mut sge = ffi::ibv_sge {
            addr: src.addr,
            length: src.len,
            lkey: src.lkey,
        };
        // SAFETY: plain data; all-zero is valid.
        let mut wr: ffi::ibv_send_wr = unsafe { std::mem::zeroed() };
        wr.wr_id = wr_id;
        wr.sg_list = &mut sge;
        wr.num_sge = 1;
        wr.opcode = ffi::IBV_WR_RDMA_WRITE;
        wr.send_flags = ffi::IBV_SEND_SIGNALED;
        if src.len <= self.max_inline {
            wr.send_flags |= ffi::IBV_SEND_INLINE;
        }
        wr.wr.rdma = ffi::ibv_send_wr__bindgen_ty_2__bindgen_ty_1 {
            remote_addr: dst.addr,
            rkey: u32::try_from(dst.key).unwrap_or(u32::MAX),
        };
        self.post(&mut wr, "RDMA WRITE")
    }

    /// Posts an RDMA READ of `src` into `dst`.
    ///
    /// # Errors
    /// `ibv_post_send` failing.
    pub fn post_read(&self, wr_id: u64, dst: Local, src: RemoteAddr) -> Result<()> {
        let mut sge = ffi::ibv_sge {
            addr: dst.addr,
            length: dst.len,
            lkey: dst.lkey,
        };
        // SAFETY: plain data; all-zero is valid.
        let mut wr: ffi::ibv_send_wr = unsafe { std::mem::zeroed() };
        wr.wr_id = wr_id;
        wr.sg_list = &mut sge;
        wr.num_sge = 1;
        wr.opcode = ffi::IBV_WR_RDMA_READ;
        wr.send_flags = ffi::IBV_SEND_SIGNALED;
        wr.wr.rdma = ffi::ibv_send_wr__bindgen_ty_2__bindgen_ty_1 {
            remote_addr: src.addr,
            rkey: u32::try_from(src.key).unwrap_or(u32::MAX),
        };
        self.post(&mut wr, "RDMA READ")
    }
}
