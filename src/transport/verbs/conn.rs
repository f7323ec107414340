//! Reliable connected queue pairs and what they are made from: the
//! process-wide protection domain, a completion queue, memory regions
//! (`mr.rs`, re-exported here).
//!
//! Queue-pair settings (a slow emulated guest included): `timeout` 18
//! (4.096 µs × 2^18 ≈ 1 s per retry), `retry_cnt` 7, `rnr_retry` 7
//! (infinite), `min_rnr_timer` 12 (0.64 ms); `max_rd_atomic` and
//! `max_dest_rd_atomic` capped by the device's `max_qp_init_rd_atom` and
//! `max_qp_rd_atom`; path MTU from the port; on Ethernet a GRH with the
//! chosen RoCE v2 GID index.

use std::sync::Arc;

use rdma_sys as ffi;

pub use super::cq::{Cq, Wc};
pub use super::mr::{Access, Mr};
use super::device::{Choice, Context, BACKEND};
use crate::error::{Error, Result};

pub(crate) fn rc_err(call: &'static str, ctx: impl Into<String>, rc: i32) -> Error {
    Error::backend(
        BACKEND,
        call,
        ctx,
        rc,
        std::io::Error::from_raw_os_error(rc).to_string(),
    )
}

pub(crate) fn os_err(call: &'static str, ctx: impl Into<String>) -> Error {
    let e = std::io::Error::last_os_error();
    Error::backend(BACKEND, call, ctx, e.raw_os_error().unwrap_or(0), e.to_string())
}

/// An open device with its protection domain.
pub struct Device {
    pub(crate) ctx: Arc<Context>,
    pub(crate) pd: *mut ffi::ibv_pd,
    /// Device, port and GID in use.
    pub choice: Choice,
}

// SAFETY: ibv_pd and ibv_context are thread-safe objects of libibverbs.
unsafe impl Send for Device {}
// SAFETY: as above.
unsafe impl Sync for Device {}

impl Drop for Device {
    fn drop(&mut self) {
        // SAFETY: pd came from ibv_alloc_pd; everything made from it holds
        // an Arc<Device> and is gone by now.
        unsafe { ffi::ibv_dealloc_pd(self.pd) };
    }
}

impl Device {
    /// Opens the chosen device and allocates the protection domain.
    ///
    /// # Errors
    /// The device cannot be opened or has no protection domain to give.
    pub fn open(choice: Choice) -> Result<Arc<Device>> {
        let ctx = Arc::new(Context::open(&choice.device.name)?);
        // SAFETY: ctx is open.
        let pd = unsafe { ffi::ibv_alloc_pd(ctx.ctx) };
        if pd.is_null() {
            return Err(os_err("ibv_alloc_pd", format!("opening {}", choice.device.name)));
        }
        Ok(Arc::new(Device { ctx, pd, choice }))
    }

    /// The address a peer needs to reach a queue pair `qpn` of ours.
    pub fn address(&self, qpn: u32, psn: u32) -> QpAddr {
        QpAddr {
            gid: self.choice.gid.gid,
            lid: self.choice.port.lid,
            qpn,
            psn,
        }
    }
}

/// What a peer needs to connect to one of our queue pairs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QpAddr {
    /// Port GID (GRH destination on RoCE).
    pub gid: [u8; 16],
    /// Port LID (InfiniBand).
    pub lid: u16,
    /// Queue pair number.
    pub qpn: u32,
    /// First packet sequence number.
    pub psn: u32,
}

impl QpAddr {
    /// Encoded size.
    pub const LEN: usize = 16 + 2 + 4 + 4;

    /// Encodes (little-endian).
    pub fn encode(&self) -> [u8; Self::LEN] {
        let mut b = [0u8; Self::LEN];
        b[..16].copy_from_slice(&self.gid);
        b[16..18].copy_from_slice(&self.lid.to_le_bytes());
        b[18..22].copy_from_slice(&self.qpn.to_le_bytes());
        b[22..26].copy_from_slice(&self.psn.to_le_bytes());
        b
    }

    /// Decodes; `None` when `b` is too short.
    pub fn decode(b: &[u8]) -> Option<QpAddr> {
        let b = b.get(..Self::LEN)?;
        let mut gid = [0u8; 16];
        gid.copy_from_slice(&b[..16]);
        Some(QpAddr {
            gid,
            lid: u16::from_le_bytes([b[16], b[17]]),
            qpn: u32::from_le_bytes([b[18], b[19], b[20], b[21]]),
            psn: u32::from_le_bytes([b[22], b[23], b[24], b[25]]) & 0x00ff_ffff,
        })
    }
}

/// Path MTU enum for a byte count.
fn mtu_enum(bytes: u32) -> u32 {
    match bytes {
        4096.. => ffi::IBV_MTU_4096,
        2048.. => ffi::IBV_MTU_2048,
        1024.. => ffi::IBV_MTU_1024,
        512.. => ffi::IBV_MTU_512,
        _ => ffi::IBV_MTU_256,
    }
}

/// A reliable connected queue pair.
pub struct RcQp {
    pub(crate) qp: *mut ffi::ibv_qp,
    /// Our queue pair number.
    pub qpn: u32,
    /// Inline data granted at creation.
    pub max_inline: u32,
    /// Reads and atomics this side may have outstanding.
    pub max_rd_atomic: u8,
    pub(crate) dev: Arc<Device>,
    _cq: Arc<Cq>,
}

// SAFETY: posting to a QP from several threads is allowed by libibverbs (it locks).
unsafe impl Send for RcQp {}
// SAFETY: as above.
unsafe impl Sync for RcQp {}

impl Drop for RcQp {
    fn drop(&mut self) {
        // SAFETY: qp came from ibv_create_qp and is destroyed once.
        unsafe { ffi::ibv_destroy_qp(self.qp) };
    }
}

impl RcQp {
    /// Creates a queue pair on `cq` (send and receive) and moves it to INIT.
    ///
    /// # Errors
    /// `ibv_create_qp` or `ibv_modify_qp` failing.
    pub fn new(dev: &Arc<Device>, cq: &Arc<Cq>, send_wr: u32, recv_wr: u32) -> Result<RcQp> {
        Self::with_srq(dev, cq, None, send_wr, recv_wr)
    }

    /// As [`RcQp::new`]; receives come from `srq` when given.
    ///
    /// # Errors
    /// `ibv_create_qp` or `ibv_modify_qp` failing.
    pub fn with_srq(
        dev: &Arc<Device>,
        cq: &Arc<Cq>,
        srq: Option<&super::msg::Srq>,
        send_wr: u32,
        recv_wr: u32,
    ) -> Result<RcQp> {
        let d = &dev.choice.device;
        let mut created = None;
        for inline in [256u32, 128, 64, 0] {
            // SAFETY: plain data; all-zero is valid.
            let mut init: ffi::ibv_qp_init_attr = unsafe { std::mem::zeroed() };
            init.send_cq = cq.cq;
            init.recv_cq = cq.cq;
            init.qp_type = ffi::IBV_QPT_RC;
            init.sq_sig_all = 0;
            init.cap.max_send_wr = send_wr.min(d.max_qp_wr.max(1));
            init.cap.max_recv_wr = recv_wr.min(d.max_qp_wr.max(1));
            init.cap.max_send_sge = 1;
            init.cap.max_recv_sge = 1;
            init.cap.max_inline_data = inline;
            if let Some(srq) = srq {
                init.srq = srq.srq;
                init.cap.max_recv_wr = 0;
            }
            // SAFETY: pd and cq (and srq) are valid; init is initialised.
            let qp = unsafe { ffi::ibv_create_qp(dev.pd, &mut init) };
            if !qp.is_null() {
                created = Some((qp, init.cap.max_inline_data));
                break;
            }
        }
        let Some((qp, max_inline)) = created else {
            return Err(os_err("ibv_create_qp", format!("on {}", d.name)));
        };
        // SAFETY: qp is valid.
        let qpn = unsafe { (*qp).qp_num };
        let rd = u8::try_from(d.max_qp_init_rd_atom.min(d.max_qp_rd_atom).clamp(1, 16))
            .unwrap_or(1);
        let q = RcQp {
            qp,
            qpn,
            max_inline,
            max_rd_atomic: rd,
            dev: dev.clone(),
            _cq: cq.clone(),
        };
        // SAFETY: plain data; all-zero is valid.
        let mut a: ffi::ibv_qp_attr = unsafe { std::mem::zeroed() };
        a.qp_state = ffi::IBV_QPS_INIT;
        a.pkey_index = 0;
        a.port_num = dev.choice.port.port;
        a.qp_access_flags = ffi::IBV_ACCESS_REMOTE_WRITE
            | ffi::IBV_ACCESS_REMOTE_READ
            | ffi::IBV_ACCESS_REMOTE_ATOMIC;
        let mask = ffi::IBV_QP_STATE | ffi::IBV_QP_PKEY_INDEX | ffi::IBV_QP_PORT | ffi::IBV_QP_ACCESS_FLAGS;
        q.modify(&mut a, mask, "INIT")?;
        Ok(q)
    }

    fn modify(&self, a: &mut ffi::ibv_qp_attr, mask: u32, to: &str) -> Result<()> {
        let mask = i32::try_from(mask).unwrap_or(0);
        // SAFETY: qp is valid; a is initialised for the fields in mask.
        let rc = unsafe { ffi::ibv_modify_qp(self.qp, a, mask) };
        if rc != 0 {
            return Err(rc_err(
                "ibv_modify_qp",
                format!("moving queue pair {} to {to}", self.qpn),
                rc,
            ));
        }
        Ok(())
    }

    /// Connects to `remote` (RTR, then RTS starting at `my_psn`).
    ///
    /// # Errors
    /// `ibv_modify_qp` failing (e.g. a GID the port cannot route to).
    pub fn connect(&self, remote: &QpAddr, my_psn: u32) -> Result<()> {
        let c = &self.dev.choice;
        // SAFETY: plain data; all-zero is valid.
        let mut a: ffi::ibv_qp_attr = unsafe { std::mem::zeroed() };
        a.qp_state = ffi::IBV_QPS_RTR;
        a.path_mtu = mtu_enum(c.port.active_mtu);
        a.dest_qp_num = remote.qpn;
        a.rq_psn = remote.psn;
        a.max_dest_rd_atomic = self.max_rd_atomic;
        a.min_rnr_timer = 12;
        a.ah_attr.port_num = c.port.port;
        a.ah_attr.dlid = remote.lid;
        if c.port.is_ethernet() || remote.lid == 0 {
            a.ah_attr.is_global = 1;
            a.ah_attr.grh.dgid.raw = remote.gid;
            a.ah_attr.grh.sgid_index = u8::try_from(c.gid.index).unwrap_or(0);
            a.ah_attr.grh.hop_limit = 64;
        }
        let mask = ffi::IBV_QP_STATE
            | ffi::IBV_QP_AV
            | ffi::IBV_QP_PATH_MTU
            | ffi::IBV_QP_DEST_QPN
            | ffi::IBV_QP_RQ_PSN
            | ffi::IBV_QP_MAX_DEST_RD_ATOMIC
            | ffi::IBV_QP_MIN_RNR_TIMER;
        self.modify(&mut a, mask, "RTR")?;
        // SAFETY: plain data; all-zero is valid.
        let mut a: ffi::ibv_qp_attr = unsafe { std::mem::zeroed() };
        a.qp_state = ffi::IBV_QPS_RTS;
        a.timeout = 18;
        a.retry_cnt = 7;
        a.rnr_retry = 7;
        a.sq_psn = my_psn & 0x00ff_ffff;
        a.max_rd_atomic = self.max_rd_atomic;
        let mask = ffi::IBV_QP_STATE
            | ffi::IBV_QP_TIMEOUT
            | ffi::IBV_QP_RETRY_CNT
            | ffi::IBV_QP_RNR_RETRY
            | ffi::IBV_QP_SQ_PSN
            | ffi::IBV_QP_MAX_QP_RD_ATOMIC;
        self.modify(&mut a, mask, "RTS")
    }

    /// Moves the pair to the error state: the device stops processing its
    /// requests and completes every one still queued or in flight with
    /// `IBV_WC_WR_FLUSH_ERR`, so none of them reaches its local buffer
    /// afterwards.
    ///
    /// # Errors
    /// `ibv_modify_qp` failing.
    pub fn to_error(&self) -> Result<()> {
        // SAFETY: plain data; all-zero is valid.
        let mut a: ffi::ibv_qp_attr = unsafe { std::mem::zeroed() };
        a.qp_state = ffi::IBV_QPS_ERR;
        self.modify(&mut a, ffi::IBV_QP_STATE, "ERR")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qp_addr_round_trips() {
        let a = QpAddr {
            gid: [7; 16],
            lid: 3,
            qpn: 0x11_2233,
            psn: 0x45_6789,
        };
        assert_eq!(QpAddr::decode(&a.encode()), Some(a));
        assert_eq!(QpAddr::decode(&a.encode()[..10]), None);
    }
}
