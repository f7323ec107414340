//! Active messages: SEND on the RC queue pairs, received into buffers of
//! the process's one shared receive queue (SRQ).
//!
//! The SRQ holds `RECV_BUFFERS` buffers of `MAX_MESSAGE` bytes in one
//! registered slab (local access only). Its limit (`srq_limit`) is armed
//! at a quarter of the buffers, so the device raises
//! `IBV_EVENT_SRQ_LIMIT_REACHED` before receivers run dry; with the
//! senders' credits that should never happen, and `rnr_retry` 7 on the
//! queue pairs makes a sender retry rather than fail if it does.

use std::sync::Arc;

use rdma_sys as ffi;

use super::conn::{os_err, rc_err, Access, Device, Mr, RcQp};
use super::cq::{OpKind, WrId};
use super::rma::Local;
use crate::error::{Error, Result};

/// A shared receive queue with its buffers.
pub struct Srq {
    pub(crate) srq: *mut ffi::ibv_srq,
    // The region before the memory it covers.
    mr: Mr,
    slab: crate::transport::Memory<'static>,
    buf_len: usize,
    count: usize,
    _dev: Arc<Device>,
}

// SAFETY: posting to an SRQ from several threads is allowed by libibverbs.
unsafe impl Send for Srq {}
// SAFETY: as above.
unsafe impl Sync for Srq {}

impl Drop for Srq {
    fn drop(&mut self) {
        // SAFETY: srq came from ibv_create_srq; queue pairs using it are gone.
        unsafe { ffi::ibv_destroy_srq(self.srq) };
    }
}

impl Srq {
    /// Creates the SRQ with `count` buffers of `buf_len` bytes, all posted.
    ///
    /// # Errors
    /// `ibv_create_srq`, `ibv_reg_mr` or `ibv_post_srq_recv` failing.
    pub fn new(dev: &Arc<Device>, count: usize, buf_len: usize) -> Result<Srq> {
        let max = dev.choice.device.max_srq_wr.max(1) as usize;
        let count = count.clamp(1, max);
        let mut attr = ffi::ibv_srq_init_attr {
            srq_context: std::ptr::null_mut(),
            attr: ffi::ibv_srq_attr {
                max_wr: u32::try_from(count).unwrap_or(u32::MAX),
                max_sge: 1,
                srq_limit: 0,
            },
        };
        // SAFETY: pd is valid; attr is initialised.
        let srq = unsafe { ffi::ibv_create_srq(dev.pd, &mut attr) };
        if srq.is_null() {
            return Err(os_err("ibv_create_srq", format!("{count} receive buffers")));
        }
        let total = count
            .checked_mul(buf_len)
            .ok_or_else(|| Error::InvalidArgument("receive slab size overflows".into()))?;
        let slab = match crate::transport::Memory::allocate(total) {
            Ok(m) => m,
            Err(e) => {
                // SAFETY: srq has no queue pair; destroyed once.
                unsafe { ffi::ibv_destroy_srq(srq) };
                return Err(e);
            }
        };
        // SAFETY: the slab lives in the Srq, which drops the region first
        // (field order) and the slab last; the device writes it between
        // posting a buffer and its completion, and it is read only through
        // `Memory`'s copies.
        let mr = match unsafe { Mr::register(dev, slab.as_ptr(), total, Access::LOCAL) } {
            Ok(m) => m,
            Err(e) => {
                // SAFETY: srq has no queue pair; destroyed once.
                unsafe { ffi::ibv_destroy_srq(srq) };
                return Err(e);
            }
        };
        let s = Srq {
            srq,
            mr,
            slab,
            buf_len,
            count,
            _dev: dev.clone(),
        };
        for i in 0..count {
            s.repost(i)?;
        }
        s.arm_limit()?;
        Ok(s)
    }

    /// Arms the limit event at a quarter of the buffers (again after it
    /// fired: the device disarms it).
    ///
    /// # Errors
    /// `ibv_modify_srq` failing.
    pub fn arm_limit(&self) -> Result<()> {
        let mut lim = ffi::ibv_srq_attr {
            max_wr: 0,
            max_sge: 0,
            srq_limit: u32::try_from(self.count / 4).unwrap_or(0),
        };
        if lim.srq_limit > 0 {
            // SAFETY: srq is valid; only the limit is modified.
            let rc = unsafe {
                ffi::ibv_modify_srq(self.srq, &mut lim, ffi::IBV_SRQ_LIMIT as i32)
            };
            if rc != 0 {
                return Err(rc_err("ibv_modify_srq", "arming the SRQ limit", rc));
            }
        }
        Ok(())
    }

    /// Number of buffers.
    pub fn count(&self) -> usize {
        self.count
    }

    /// Posts buffer `i` (again) for receiving.
    ///
    /// # Errors
    /// `i` out of range, `ibv_post_srq_recv` failing.
    pub fn repost(&self, i: usize) -> Result<()> {
        let l = Local::of(&self.mr, i * self.buf_len, self.buf_len)
            .filter(|_| i < self.count)
            .ok_or_else(|| Error::InvalidArgument(format!("receive buffer {i} out of range")))?;
        let mut sge = ffi::ibv_sge {
            addr: l.addr,
            length: l.len,
            lkey: l.lkey,
        };
        let id = WrId {
            generation: 0,
            kind: OpKind::Recv,
            slot: i as u64,
        }
        .encode()
        .ok_or_else(|| Error::InvalidArgument("receive slot too large".into()))?;
        let mut wr = ffi::ibv_recv_wr {
            wr_id: id,
            next: std::ptr::null_mut(),
            sg_list: &mut sge,
            num_sge: 1,
        };
        let mut bad: *mut ffi::ibv_recv_wr = std::ptr::null_mut();
        // SAFETY: srq is valid; wr and sge live for the call; the buffer
        // is registered and owned by self.
        let rc = unsafe { ffi::ibv_post_srq_recv(self.srq, &mut wr, &mut bad) };
        if rc != 0 {
            return Err(rc_err("ibv_post_srq_recv", format!("posting receive buffer {i}"), rc));
        }
        Ok(())
    }

    /// Copies the first `out.len()` bytes of buffer `i` into `out` (after
    /// its receive completed and before it is posted again).
    pub fn message(&self, i: usize, out: &mut [u8]) -> Option<()> {
        if i >= self.count || out.len() > self.buf_len {
            return None;
        }
        self.slab.read(i * self.buf_len, out).ok()
    }
}

impl RcQp {
    /// Posts a SEND of `src` (inline when small enough), solicited: its
    /// arrival wakes the receiver's progress agent (see `cq`).
    ///
    /// # Errors
    /// `ibv_post_send` failing.
    pub fn post_send(&self, wr_id: u64, src: Local) -> Result<()> {
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
        wr.opcode = ffi::IBV_WR_SEND;
        wr.send_flags = ffi::IBV_SEND_SIGNALED | ffi::IBV_SEND_SOLICITED;
        if src.len <= self.max_inline {
            wr.send_flags |= ffi::IBV_SEND_INLINE;
        }
        self.post(&mut wr, "SEND")
    }
}
