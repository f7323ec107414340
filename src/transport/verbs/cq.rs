//! The completion queue with its completion channel, and what a work
//! request id carries.
//!
//! The channel's fd is what the progress agent sleeps on
//! ([`Cq::event_fd`]); [`Cq::arm`] acknowledges the events that woke it,
//! re-arms with `ibv_req_notify_cq` and then polls once, closing the race
//! between the last poll and the sleep: completions found there are kept
//! for the next [`Cq::poll`] and `arm` says "do not sleep".
//!
//! The CQ is armed for *solicited* completions only. Every message that
//! needs the receiver's CPU (active messages on the RC queue pairs,
//! handshake datagrams on the UD pair) is sent with `IBV_SEND_SOLICITED`,
//! so its arrival wakes the agent; the completions of the process's own
//! RDMA WRITE/READ/ATOMIC requests do not. Those are polled by the
//! application thread that waits for them, and waking the agent for each
//! of them (as a plain `ibv_req_notify_cq(cq, 0)` does) put a second busy
//! thread beside every blocking operation (docs/performance.md, issue 11
//! §3). Unsuccessful completions raise an event for a solicited-only arm
//! as well (InfiniBand specification), and the waiting thread polls its
//! own in any case.
//!
//! Work request ids ([`WrId`]) carry the queue pair's generation: after an
//! error completion a queue pair is re-created under a new generation, and
//! completions still arriving for the old one are recognised and dropped.

use std::collections::VecDeque;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use rdma_sys as ffi;

use super::conn::{os_err, rc_err, Device};
use crate::error::{Error, Result};

/// What a work request was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum OpKind {
    /// RDMA WRITE.
    Write = 1,
    /// RDMA READ.
    Read = 2,
    /// 64-bit FETCH_AND_ADD.
    FetchAdd = 3,
    /// 64-bit CMP_AND_SWP.
    CmpSwap = 4,
    /// SEND (active message).
    Send = 5,
    /// A receive buffer of the shared receive queue.
    Recv = 6,
    /// Connection handshake (UD).
    Handshake = 7,
}

impl OpKind {
    fn from_u8(v: u8) -> Option<OpKind> {
        Some(match v {
            1 => OpKind::Write,
            2 => OpKind::Read,
            3 => OpKind::FetchAdd,
            4 => OpKind::CmpSwap,
            5 => OpKind::Send,
            6 => OpKind::Recv,
            7 => OpKind::Handshake,
            _ => return None,
        })
    }
}

/// A work request id: generation (16 bits), kind (8 bits), slot (40 bits).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WrId {
    /// Generation of the queue pair the request was posted on.
    pub generation: u16,
    /// What the request was.
    pub kind: OpKind,
    /// Slot of the operation (op table index, receive buffer index).
    pub slot: u64,
}

impl WrId {
    /// Largest slot.
    pub const MAX_SLOT: u64 = (1 << 40) - 1;

    /// Packs into a `wr_id`; `None` when the slot does not fit.
    pub fn encode(self) -> Option<u64> {
        (self.slot <= Self::MAX_SLOT).then(|| {
            (u64::from(self.generation) << 48) | ((self.kind as u64) << 40) | self.slot
        })
    }

    /// Unpacks a `wr_id`; `None` for a kind this back-end never posts.
    pub fn decode(v: u64) -> Option<WrId> {
        Some(WrId {
            generation: u16::try_from(v >> 48).ok()?,
            kind: OpKind::from_u8(((v >> 40) & 0xff) as u8)?,
            slot: v & Self::MAX_SLOT,
        })
    }
}

/// Completions one poll reads at most.
pub const POLL_BATCH: usize = 32;

/// One completion.
#[derive(Debug, Clone, Copy, Default)]
pub struct Wc {
    /// The work request's id.
    pub wr_id: u64,
    /// `IBV_WC_SUCCESS` or an error status.
    pub status: u32,
    /// `IBV_WC_RECV`, `IBV_WC_RDMA_WRITE`, ...
    pub opcode: u32,
    /// Bytes received (receives).
    pub byte_len: u32,
    /// The local queue pair.
    pub qp_num: u32,
}

impl Wc {
    /// The status as text.
    pub fn status_text(&self) -> String {
        status_text(self.status)
    }
}

/// A completion status as text.
pub fn status_text(status: u32) -> String {
    // SAFETY: ibv_wc_status_str accepts any value and returns a static string.
    let s = unsafe { std::ffi::CStr::from_ptr(ffi::ibv_wc_status_str(status)) };
    s.to_string_lossy().into_owned()
}

/// A completion queue, optionally with a completion channel.
pub struct Cq {
    pub(crate) cq: *mut ffi::ibv_cq,
    channel: *mut ffi::ibv_comp_channel,
    /// Completions found by [`Cq::arm`], handed out by the next poll.
    stash: Mutex<VecDeque<Wc>>,
    /// `stash`'s length, so that a poll need not lock it when it is empty
    /// (always, but after an arm that found completions). Changed only
    /// under the stash's mutex.
    stashed: AtomicUsize,
    /// Events taken from the channel and not acknowledged yet.
    unacked: Mutex<u32>,
    _dev: Arc<Device>,
}

// SAFETY: polling a CQ and reading its channel from several threads is
// allowed by libibverbs (it locks); our own state is behind mutexes.
unsafe impl Send for Cq {}
// SAFETY: as above.
unsafe impl Sync for Cq {}

impl Drop for Cq {
    fn drop(&mut self) {
        let unacked = self.unacked.get_mut().map(|n| *n).unwrap_or(0);
        // SAFETY: cq came from ibv_create_cq; queue pairs using it hold an
        // Arc<Cq> and are gone. Events taken must be acknowledged before
        // the CQ is destroyed; the channel goes after its CQ.
        unsafe {
            if unacked > 0 {
                ffi::ibv_ack_cq_events(self.cq, unacked);
            }
            ffi::ibv_destroy_cq(self.cq);
            if !self.channel.is_null() {
                ffi::ibv_destroy_comp_channel(self.channel);
            }
        }
    }
}

impl Cq {
    /// Creates a completion queue of `entries` (capped by the device's
    /// `max_cqe`), with a completion channel when `channel`.
    ///
    /// # Errors
    /// `ibv_create_comp_channel`, `ibv_create_cq` or `fcntl` failing.
    pub fn new(dev: &Arc<Device>, entries: u32, channel: bool) -> Result<Arc<Cq>> {
        let n = entries.min(dev.choice.device.max_cqe.max(1));
        let n = i32::try_from(n).unwrap_or(i32::MAX);
        let ch = if channel {
            // SAFETY: ctx is open.
            let ch = unsafe { ffi::ibv_create_comp_channel(dev.ctx.ctx) };
            if ch.is_null() {
                return Err(os_err("ibv_create_comp_channel", "creating the completion channel"));
            }
            // SAFETY: ch is valid; its fd is open while it exists.
            let fd = unsafe { (*ch).fd };
            if let Err(e) = set_nonblocking(fd) {
                // SAFETY: ch has no CQ yet; destroyed once.
                unsafe { ffi::ibv_destroy_comp_channel(ch) };
                return Err(e);
            }
            ch
        } else {
            std::ptr::null_mut()
        };
        // SAFETY: ctx is open; ch is NULL or a channel of this context.
        let cq = unsafe { ffi::ibv_create_cq(dev.ctx.ctx, n, std::ptr::null_mut(), ch, 0) };
        if cq.is_null() {
            let e = os_err("ibv_create_cq", format!("{n} entries"));
            if !ch.is_null() {
                // SAFETY: ch has no CQ; destroyed once.
                unsafe { ffi::ibv_destroy_comp_channel(ch) };
            }
            return Err(e);
        }
        Ok(Arc::new(Cq {
            cq,
            channel: ch,
            stash: Mutex::new(VecDeque::new()),
            stashed: AtomicUsize::new(0),
            unacked: Mutex::new(0),
            _dev: dev.clone(),
        }))
    }

    /// The completion channel's fd (readable when an armed CQ got a
    /// completion); `None` without a channel.
    pub fn event_fd(&self) -> Option<RawFd> {
        // SAFETY: the channel is valid while self is.
        (!self.channel.is_null()).then(|| unsafe { (*self.channel).fd })
    }

    /// Reads up to `max` (at most [`POLL_BATCH`]) completions from the
    /// device and hands each to `f`; returns how many.
    fn poll_raw(&self, max: usize, mut f: impl FnMut(&Wc)) -> Result<usize> {
        let mut wcs = [const { std::mem::MaybeUninit::<ffi::ibv_wc>::uninit() }; POLL_BATCH];
        let n = max.min(POLL_BATCH);
        if n == 0 {
            return Ok(0);
        }
        // SAFETY: cq is valid; `wcs` has room for n entries, which
        // ibv_poll_cq writes before reporting them (it reads none).
        let got = unsafe { ffi::ibv_poll_cq(self.cq, n as i32, wcs.as_mut_ptr().cast()) };
        if got < 0 {
            return Err(rc_err("ibv_poll_cq", "reading completions", -got));
        }
        let got = usize::try_from(got).unwrap_or(0).min(n);
        for w in &wcs[..got] {
            // SAFETY: ibv_poll_cq wrote the first `got` entries.
            let w = unsafe { w.assume_init_ref() };
            f(&Wc {
                wr_id: w.wr_id,
                status: w.status,
                opcode: w.opcode,
                byte_len: w.byte_len,
                qp_num: w.qp_num,
            });
        }
        Ok(got)
    }

    /// Reads up to `max` completions (those [`Cq::arm`] found first) and
    /// hands each to `f`; returns how many. Allocates nothing.
    ///
    /// # Errors
    /// `ibv_poll_cq` failing.
    pub fn poll_each(&self, max: usize, mut f: impl FnMut(&Wc)) -> Result<usize> {
        let mut k = 0;
        if self.stashed.load(Ordering::Acquire) > 0 {
            let mut st = self.stash.lock().map_err(|_| poisoned())?;
            let take = st.len().min(max);
            let found: Vec<Wc> = st.drain(..take).collect();
            self.stashed.store(st.len(), Ordering::Release);
            drop(st);
            for w in &found {
                f(w);
            }
            k = found.len();
        }
        if k < max {
            k += self.poll_raw(max - k, f)?;
        }
        Ok(k)
    }

    /// Reads up to `out.len()` completions into `out`; returns how many.
    ///
    /// # Errors
    /// `ibv_poll_cq` failing.
    pub fn poll(&self, out: &mut [Wc]) -> Result<usize> {
        let mut k = 0;
        self.poll_each(out.len(), |w| {
            out[k] = *w;
            k += 1;
        })
    }

    /// Prepares to sleep on [`Cq::event_fd`]: takes and acknowledges the
    /// channel's pending events (without blocking), requests the next
    /// notification, then polls once. `Ok(true)`: the CQ was empty after
    /// arming, sleep; `Ok(false)`: completions arrived (kept for the next
    /// [`Cq::poll`]), do not sleep. Without a channel always `Ok(false)`.
    ///
    /// # Errors
    /// `ibv_req_notify_cq` or `ibv_poll_cq` failing.
    pub fn arm(&self) -> Result<bool> {
        if self.channel.is_null() {
            return Ok(false);
        }
        {
            let mut unacked = self.unacked.lock().map_err(|_| poisoned())?;
            loop {
                let mut cq: *mut ffi::ibv_cq = std::ptr::null_mut();
                let mut ctx: *mut std::os::raw::c_void = std::ptr::null_mut();
                // SAFETY: the channel is valid and non-blocking; out-pointers are valid.
                let rc = unsafe { ffi::ibv_get_cq_event(self.channel, &mut cq, &mut ctx) };
                if rc != 0 {
                    break; // EAGAIN: no more events
                }
                *unacked += 1;
            }
            if *unacked > 0 {
                // SAFETY: acknowledges exactly the events taken above for this CQ.
                unsafe { ffi::ibv_ack_cq_events(self.cq, *unacked) };
                *unacked = 0;
            }
        }
        // SAFETY: cq is valid and has a channel. 1: solicited completions
        // only (see the module documentation).
        let rc = unsafe { ffi::ibv_req_notify_cq(self.cq, 1) };
        if rc != 0 {
            return Err(rc_err("ibv_req_notify_cq", "arming the completion queue", rc));
        }
        let mut found = Vec::new();
        let n = self.poll_raw(16, |w| found.push(*w))?;
        if n == 0 {
            return Ok(true);
        }
        let mut st = self.stash.lock().map_err(|_| poisoned())?;
        st.extend(found);
        self.stashed.store(st.len(), Ordering::Release);
        Ok(false)
    }
}

fn poisoned() -> Error {
    Error::InvalidArgument("verbs completion queue lock poisoned".into())
}

fn set_nonblocking(fd: RawFd) -> Result<()> {
    use nix::fcntl::{fcntl, FcntlArg, OFlag};
    let flags = fcntl(fd, FcntlArg::F_GETFL).map_err(|e| Error::io("fcntl(F_GETFL) on the completion channel", e.into()))?;
    let flags = OFlag::from_bits_truncate(flags) | OFlag::O_NONBLOCK;
    fcntl(fd, FcntlArg::F_SETFL(flags))
        .map_err(|e| Error::io("fcntl(F_SETFL) on the completion channel", e.into()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wr_ids_round_trip_and_carry_the_generation() {
        for kind in [
            OpKind::Write,
            OpKind::Read,
            OpKind::FetchAdd,
            OpKind::CmpSwap,
            OpKind::Send,
            OpKind::Recv,
            OpKind::Handshake,
        ] {
            let w = WrId {
                generation: 0xbeef,
                kind,
                slot: WrId::MAX_SLOT,
            };
            assert_eq!(WrId::decode(w.encode().unwrap()), Some(w));
        }
        let too_big = WrId {
            generation: 1,
            kind: OpKind::Write,
            slot: WrId::MAX_SLOT + 1,
        };
        assert_eq!(too_big.encode(), None);
        assert_eq!(WrId::decode(0), None, "kind 0 is never posted");
        let a = WrId {
            generation: 1,
            kind: OpKind::Read,
            slot: 5,
        };
        let b = WrId { generation: 2, ..a };
        assert_ne!(a.encode(), b.encode());
    }
}
