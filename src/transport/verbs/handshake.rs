//! The connection handshake over a small unreliable-datagram (UD) queue pair.
//!
//! A process's card is its port GID, LID and UD queue pair number
//! ([`Card`]). To connect, the initiator creates an RC queue pair and sends
//! a REQ datagram ([`Hello`]: its rank, the RC queue pair's number and first
//! PSN, and the generation of the connection) to the target's UD queue
//! pair; the target's progress agent creates its own RC queue pair, moves it
//! to RTS against the initiator's, and answers with a REP carrying its
//! queue pair; the initiator then moves its queue pair to RTR/RTS. Nothing
//! is created for a peer before first contact.
//!
//! Datagrams arrive behind the 40-byte GRH that UD receives always reserve.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use rdma_sys as ffi;

use super::conn::{os_err, rc_err, Device, QpAddr};
use super::cq::Cq;
use crate::error::{Error, Result};

/// The Q_Key of handshake datagrams.
pub const QKEY: u32 = 0x0153_4944; // "\x01SID"
/// Bytes UD receives reserve for the GRH.
pub const GRH: usize = 40;

/// What a peer needs to start the handshake with us.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Card {
    /// Port GID.
    pub gid: [u8; 16],
    /// Port LID (InfiniBand; 0 on RoCE).
    pub lid: u16,
    /// The UD queue pair accepting REQs.
    pub ud_qpn: u32,
}

impl Card {
    /// Encoded length.
    pub const LEN: usize = 22;

    /// Encodes (little-endian).
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(Self::LEN);
        b.extend_from_slice(&self.gid);
        b.extend_from_slice(&self.lid.to_le_bytes());
        b.extend_from_slice(&self.ud_qpn.to_le_bytes());
        b
    }

    /// Decodes; a clear error for a card of another length.
    ///
    /// # Errors
    /// [`Error::Protocol`] naming `rank`.
    pub fn decode(b: &[u8], rank: usize) -> Result<Card> {
        if b.len() != Self::LEN {
            return Err(Error::Protocol {
                peer: format!("rank {rank}"),
                message: format!(
                    "its verbs card has {} bytes, expected {} (another back-end?)",
                    b.len(),
                    Self::LEN
                ),
            });
        }
        let mut gid = [0u8; 16];
        gid.copy_from_slice(&b[..16]);
        Ok(Card {
            gid,
            lid: u16::from_le_bytes([b[16], b[17]]),
            ud_qpn: u32::from_le_bytes([b[18], b[19], b[20], b[21]]),
        })
    }
}

/// A handshake datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hello {
    /// `false`: REQ (initiator to target); `true`: REP.
    pub reply: bool,
    /// Rank of the sender.
    pub rank: u32,
    /// Generation of the sender's queue pair (each new queue pair of a
    /// process gets a newer one): a REQ older than the connection in place
    /// is stale and ignored, a newer one replaces it.
    pub generation: u16,
    /// In a REP: the generation of the REQ it answers (0 in a REQ).
    pub answers: u16,
    /// The sender's RC queue pair.
    pub qp: QpAddr,
    /// The sender's UD queue pair (where the REP goes).
    pub ud_qpn: u32,
}

impl Hello {
    /// Encoded length.
    pub const LEN: usize = 4 + 1 + 4 + 2 + 2 + QpAddr::LEN + 4;
    const MAGIC: [u8; 4] = *b"OSHS";

    /// Encodes.
    pub fn encode(&self) -> [u8; Self::LEN] {
        let mut b = [0u8; Self::LEN];
        b[..4].copy_from_slice(&Self::MAGIC);
        b[4] = u8::from(self.reply);
        b[5..9].copy_from_slice(&self.rank.to_le_bytes());
        b[9..11].copy_from_slice(&self.generation.to_le_bytes());
        b[11..13].copy_from_slice(&self.answers.to_le_bytes());
        b[13..13 + QpAddr::LEN].copy_from_slice(&self.qp.encode());
        b[13 + QpAddr::LEN..].copy_from_slice(&self.ud_qpn.to_le_bytes());
        b
    }

    /// Decodes; `None` for anything that is not a handshake datagram.
    pub fn decode(b: &[u8]) -> Option<Hello> {
        let b = b.get(..Self::LEN)?;
        if b[..4] != Self::MAGIC || b[4] > 1 {
            return None;
        }
        let u = &b[13 + QpAddr::LEN..];
        Some(Hello {
            reply: b[4] == 1,
            rank: u32::from_le_bytes([b[5], b[6], b[7], b[8]]),
            generation: u16::from_le_bytes([b[9], b[10]]),
            answers: u16::from_le_bytes([b[11], b[12]]),
            qp: QpAddr::decode(&b[13..13 + QpAddr::LEN])?,
            ud_qpn: u32::from_le_bytes([u[0], u[1], u[2], u[3]]),
        })
    }
}

/// The UD queue pair with its receive buffers.
pub struct Ud {
    qp: *mut ffi::ibv_qp,
    /// Our UD queue pair number.
    pub qpn: u32,
    // The region before the slab it covers.
    mr: super::conn::Mr,
    slab: Box<[u8]>,
    count: usize,
    /// Address handles by destination (GID, LID), kept until drop: a
    /// datagram's AH must outlive its send.
    ahs: Mutex<HashMap<([u8; 16], u16), usize>>,
    dev: Arc<Device>,
    _cq: Arc<Cq>,
}

// SAFETY: posting to a QP from several threads is allowed by libibverbs.
unsafe impl Send for Ud {}
// SAFETY: as above.
unsafe impl Sync for Ud {}

impl Drop for Ud {
    fn drop(&mut self) {
        // SAFETY: qp came from ibv_create_qp; destroyed once, before the
        // address handles its sends used.
        unsafe { ffi::ibv_destroy_qp(self.qp) };
        if let Ok(ahs) = self.ahs.get_mut() {
            for &ah in ahs.values() {
                // SAFETY: each came from ibv_create_ah and is destroyed once.
                unsafe { ffi::ibv_destroy_ah(ah as *mut ffi::ibv_ah) };
            }
        }
    }
}

/// Size of one UD slot (GRH + datagram).
const SLOT: usize = GRH + Hello::LEN;

impl Ud {
    /// Creates the UD queue pair on `cq` with `count` receive buffers,
    /// moves it to RTS and posts the buffers.
    ///
    /// # Errors
    /// Creating, registering, modifying or posting failing.
    pub fn new(dev: &Arc<Device>, cq: &Arc<Cq>, count: usize) -> Result<Ud> {
        // SAFETY: plain data; all-zero is valid.
        let mut init: ffi::ibv_qp_init_attr = unsafe { std::mem::zeroed() };
        init.send_cq = cq.cq;
        init.recv_cq = cq.cq;
        init.qp_type = ffi::IBV_QPT_UD;
        init.cap.max_send_wr = 64;
        init.cap.max_recv_wr = u32::try_from(count).unwrap_or(64);
        init.cap.max_send_sge = 1;
        init.cap.max_recv_sge = 1;
        init.cap.max_inline_data = 64;
        // SAFETY: pd and cq are valid; init is initialised.
        let mut qp = unsafe { ffi::ibv_create_qp(dev.pd, &mut init) };
        if qp.is_null() {
            init.cap.max_inline_data = 0;
            // SAFETY: as above, without inline data.
            qp = unsafe { ffi::ibv_create_qp(dev.pd, &mut init) };
        }
        if qp.is_null() {
            return Err(os_err("ibv_create_qp", "creating the handshake UD queue pair"));
        }
        if (init.cap.max_inline_data as usize) < Hello::LEN {
            // SAFETY: destroyed once.
            unsafe { ffi::ibv_destroy_qp(qp) };
            return Err(Error::backend(
                super::device::BACKEND,
                "ibv_create_qp",
                "creating the handshake UD queue pair",
                nix::libc::ENOTSUP,
                format!("the device gives no inline data for {} byte datagrams", Hello::LEN),
            ));
        }
        // SAFETY: qp is valid.
        let qpn = unsafe { (*qp).qp_num };
        let mut slab = vec![0u8; SLOT * count].into_boxed_slice();
        // SAFETY: the slab lives in the Ud, dropped after the region (field
        // order); the device writes it only while a receive is posted.
        let mr = unsafe {
            super::conn::Mr::register(dev, slab.as_mut_ptr(), slab.len(), super::conn::Access::LOCAL)
        };
        let mr = match mr {
            Ok(m) => m,
            Err(e) => {
                // SAFETY: destroyed once.
                unsafe { ffi::ibv_destroy_qp(qp) };
                return Err(e);
            }
        };
        let ud = Ud {
            qp,
            qpn,
            mr,
            slab,
            count,
            ahs: Mutex::new(HashMap::new()),
            dev: dev.clone(),
            _cq: cq.clone(),
        };
        let steps: [(u32, u32); 3] = [
            (
                ffi::IBV_QPS_INIT,
                ffi::IBV_QP_STATE | ffi::IBV_QP_PKEY_INDEX | ffi::IBV_QP_PORT | ffi::IBV_QP_QKEY,
            ),
            (ffi::IBV_QPS_RTR, ffi::IBV_QP_STATE),
            (ffi::IBV_QPS_RTS, ffi::IBV_QP_STATE | ffi::IBV_QP_SQ_PSN),
        ];
        for (state, mask) in steps {
            // SAFETY: plain data; all-zero is valid.
            let mut a: ffi::ibv_qp_attr = unsafe { std::mem::zeroed() };
            a.qp_state = state;
            a.port_num = dev.choice.port.port;
            a.qkey = QKEY;
            a.sq_psn = 0;
            // SAFETY: qp is valid; a holds the fields of mask.
            let rc = unsafe { ffi::ibv_modify_qp(ud.qp, &mut a, i32::try_from(mask).unwrap_or(0)) };
            if rc != 0 {
                return Err(rc_err("ibv_modify_qp", format!("moving the UD queue pair to state {state}"), rc));
            }
        }
        for i in 0..count {
            ud.repost(i)?;
        }
        Ok(ud)
    }

    /// Posts receive slot `i` (again).
    ///
    /// # Errors
    /// `ibv_post_recv` failing.
    pub fn repost(&self, i: usize) -> Result<()> {
        if i >= self.count {
            return Err(Error::InvalidArgument(format!("handshake slot {i} out of range")));
        }
        let mut sge = ffi::ibv_sge {
            addr: self.mr.addr + (i * SLOT) as u64,
            length: SLOT as u32,
            lkey: self.mr.lkey,
        };
        let id = super::cq::WrId {
            generation: 0,
            kind: super::cq::OpKind::Handshake,
            slot: i as u64,
        }
        .encode()
        .unwrap_or(0);
        let mut wr = ffi::ibv_recv_wr {
            wr_id: id,
            next: std::ptr::null_mut(),
            sg_list: &mut sge,
            num_sge: 1,
        };
        let mut bad: *mut ffi::ibv_recv_wr = std::ptr::null_mut();
        // SAFETY: qp is valid; the slot is registered and owned by self.
        let rc = unsafe { ffi::ibv_post_recv(self.qp, &mut wr, &mut bad) };
        if rc != 0 {
            return Err(rc_err("ibv_post_recv", "posting a handshake buffer", rc));
        }
        Ok(())
    }

    /// Moves the queue pair back to RTS after a send completed in error
    /// (UD queue pairs then stop in the send-queue-error state).
    ///
    /// # Errors
    /// `ibv_modify_qp` failing.
    pub fn recover(&self) -> Result<()> {
        // SAFETY: plain data; all-zero is valid.
        let mut a: ffi::ibv_qp_attr = unsafe { std::mem::zeroed() };
        a.qp_state = ffi::IBV_QPS_RTS;
        let mask = i32::try_from(ffi::IBV_QP_STATE).unwrap_or(0);
        // SAFETY: qp is valid; a holds the state, the only field of the mask.
        let rc = unsafe { ffi::ibv_modify_qp(self.qp, &mut a, mask) };
        if rc != 0 {
            return Err(rc_err("ibv_modify_qp", "moving the handshake UD queue pair back to RTS", rc));
        }
        Ok(())
    }

    /// The datagram in slot `i` after its receive completed with `byte_len`.
    pub fn datagram(&self, i: usize, byte_len: usize) -> Option<Hello> {
        if i >= self.count || byte_len < GRH {
            return None;
        }
        let slot = self.slab.get(i * SLOT..(i + 1) * SLOT)?;
        Hello::decode(slot.get(GRH..byte_len.min(SLOT))?)
    }

    /// Sends `hello` to the UD queue pair of `card` (signalled with `wr_id`).
    ///
    /// # Errors
    /// `ibv_create_ah` or `ibv_post_send` failing.
    pub fn send(&self, wr_id: u64, card: &Card, hello: &Hello) -> Result<()> {
        let ah = self.ah(card)?;
        let mut bytes = hello.encode();
        let mut sge = ffi::ibv_sge {
            addr: bytes.as_mut_ptr() as u64,
            length: Hello::LEN as u32,
            lkey: 0,
        };
        // SAFETY: plain data; all-zero is valid.
        let mut wr: ffi::ibv_send_wr = unsafe { std::mem::zeroed() };
        wr.wr_id = wr_id;
        wr.sg_list = &mut sge;
        wr.num_sge = 1;
        wr.opcode = ffi::IBV_WR_SEND;
        // Inline: the bytes are copied at post time (a stack buffer).
        // Solicited: the datagram wakes the peer's progress agent (see `cq`).
        wr.send_flags = ffi::IBV_SEND_SIGNALED | ffi::IBV_SEND_INLINE | ffi::IBV_SEND_SOLICITED;
        wr.wr.ud = ffi::ibv_send_wr__bindgen_ty_2__bindgen_ty_3 {
            ah,
            remote_qpn: card.ud_qpn,
            remote_qkey: QKEY,
        };
        let mut bad: *mut ffi::ibv_send_wr = std::ptr::null_mut();
        // SAFETY: qp, wr and sge are valid for the call; inline data is
        // copied; the AH lives until self is dropped.
        let rc = unsafe { ffi::ibv_post_send(self.qp, &mut wr, &mut bad) };
        if rc != 0 {
            return Err(rc_err("ibv_post_send", "sending a handshake datagram", rc));
        }
        Ok(())
    }

    /// The address handle for `card`'s port (created once).
    fn ah(&self, card: &Card) -> Result<*mut ffi::ibv_ah> {
        let mut ahs = self
            .ahs
            .lock()
            .map_err(|_| Error::InvalidArgument("handshake AH table lock poisoned".into()))?;
        if let Some(&ah) = ahs.get(&(card.gid, card.lid)) {
            return Ok(ah as *mut ffi::ibv_ah);
        }
        let c = &self.dev.choice;
        // SAFETY: plain data; all-zero is valid.
        let mut ah_attr: ffi::ibv_ah_attr = unsafe { std::mem::zeroed() };
        ah_attr.port_num = c.port.port;
        ah_attr.dlid = card.lid;
        if c.port.is_ethernet() || card.lid == 0 {
            ah_attr.is_global = 1;
            ah_attr.grh.dgid.raw = card.gid;
            ah_attr.grh.sgid_index = u8::try_from(c.gid.index).unwrap_or(0);
            ah_attr.grh.hop_limit = 64;
        }
        // SAFETY: pd is valid; ah_attr is initialised.
        let ah = unsafe { ffi::ibv_create_ah(self.dev.pd, &mut ah_attr) };
        if ah.is_null() {
            return Err(os_err("ibv_create_ah", "addressing a handshake datagram"));
        }
        ahs.insert((card.gid, card.lid), ah as usize);
        Ok(ah)
    }
}
