//! 64-bit network atomics: `IBV_WR_ATOMIC_FETCH_AND_ADD` and
//! `IBV_WR_ATOMIC_CMP_AND_SWP` on 8-byte-aligned words, and the byte-order
//! self-test of their fetched results.
//!
//! Some HCAs return the fetched value big-endian (libfabric issue 10911).
//! [`ByteOrder::detect`] compares the result of a fetch-add of 0 on a word
//! holding a known value with that value; the per-device flag then says
//! whether fetched results must be byte-swapped ([`ByteOrder::fix`]).

use rdma_sys as ffi;

use super::conn::RcQp;
use super::rma::Local;
use crate::error::{Error, Result};
use crate::transport::{AtomicOp, Datatype, RemoteAddr};

/// The word the self-test reads: distinct bytes, so a reversal is visible.
pub const PROBE: u64 = 0x0102_0304_0506_0708;

/// How fetched atomic results arrive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ByteOrder {
    /// Host order.
    Native,
    /// Byte-reversed.
    Swapped,
}

impl ByteOrder {
    /// Classifies the result of fetching [`PROBE`].
    ///
    /// # Errors
    /// A reply that is neither `PROBE` nor its reversal.
    pub fn detect(fetched: u64) -> Result<ByteOrder> {
        if fetched == PROBE {
            Ok(ByteOrder::Native)
        } else if fetched == PROBE.swap_bytes() {
            Ok(ByteOrder::Swapped)
        } else {
            Err(Error::backend(
                super::device::BACKEND,
                "atomic self-test",
                "checking the byte order of fetched atomic results",
                0,
                format!("fetch-add of 0 on {PROBE:#018x} returned {fetched:#018x}"),
            ))
        }
    }

    /// A fetched result in host order.
    pub fn fix(self, v: u64) -> u64 {
        match self {
            ByteOrder::Native => v,
            ByteOrder::Swapped => v.swap_bytes(),
        }
    }
}

/// Whether the device carries `(op, datatype)` natively at a displacement
/// (absolute address) `addr`: only 64-bit integer SUM (fetch-and-add) and
/// compare-and-swap on 8-byte-aligned words. Everything else takes the
/// software accumulate path.
pub fn native(op: AtomicOp, datatype: Datatype, addr: u64) -> bool {
    let sixty_four = matches!(datatype, Datatype::U64 | Datatype::I64);
    sixty_four && matches!(op, AtomicOp::Sum | AtomicOp::Cswap) && addr % 8 == 0
}

impl RcQp {
    fn post_atomic(
        &self,
        wr_id: u64,
        opcode: u32,
        result: Local,
        dst: RemoteAddr,
        (compare_add, swap): (u64, u64),
        what: &str,
    ) -> Result<()> {
        if result.len != 8 || dst.addr % 8 != 0 {
            return Err(Error::backend(
                super::device::BACKEND,
                "ibv_post_send",
                what.to_string(),
                nix::libc::EINVAL,
                format!(
                    "atomics need an 8-byte result and an 8-byte-aligned target (got {} bytes at {:#x})",
                    result.len, dst.addr
                ),
            ));
        }
        let mut sge = ffi::ibv_sge {
            addr: result.addr,
            length: 8,
            lkey: result.lkey,
        };
        // SAFETY: plain data; all-zero is valid.
        let mut wr: ffi::ibv_send_wr = unsafe { std::mem::zeroed() };
        wr.wr_id = wr_id;
        wr.sg_list = &mut sge;
        wr.num_sge = 1;
        wr.opcode = opcode;
        wr.send_flags = ffi::IBV_SEND_SIGNALED;
        wr.wr.atomic = ffi::ibv_send_wr__bindgen_ty_2__bindgen_ty_2 {
            remote_addr: dst.addr,
            compare_add,
            swap,
            rkey: u32::try_from(dst.key).unwrap_or(u32::MAX),
        };
        self.post(&mut wr, what)
    }

    /// Posts a 64-bit fetch-and-add of `add`; the previous value lands in `result`.
    ///
    /// # Errors
    /// A misaligned target, `ibv_post_send` failing.
    pub fn post_fetch_add(&self, wr_id: u64, result: Local, dst: RemoteAddr, add: u64) -> Result<()> {
        self.post_atomic(wr_id, ffi::IBV_WR_ATOMIC_FETCH_AND_ADD, result, dst, (add, 0), "FETCH_AND_ADD")
    }

    /// Posts a 64-bit compare-and-swap; the previous value lands in `result`.
    ///
    /// # Errors
    /// A misaligned target, `ibv_post_send` failing.
    pub fn post_cmp_swap(
        &self,
        wr_id: u64,
        result: Local,
        dst: RemoteAddr,
        compare: u64,
        swap: u64,
    ) -> Result<()> {
        self.post_atomic(wr_id, ffi::IBV_WR_ATOMIC_CMP_AND_SWP, result, dst, (compare, swap), "CMP_AND_SWP")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_order_self_test() {
        assert_eq!(ByteOrder::detect(PROBE).unwrap(), ByteOrder::Native);
        // A reversed reply, as a big-endian HCA gives.
        let reversed = u64::from_be_bytes(PROBE.to_le_bytes());
        let o = ByteOrder::detect(reversed).unwrap();
        assert_eq!(o, ByteOrder::Swapped);
        assert_eq!(o.fix(reversed), PROBE);
        assert_eq!(ByteOrder::Native.fix(42), 42);
        let e = ByteOrder::detect(7).unwrap_err().to_string();
        assert!(e.contains("returned 0x0000000000000007"), "{e}");
    }

    #[test]
    fn only_aligned_64_bit_sum_and_cas_are_native() {
        assert!(native(AtomicOp::Sum, Datatype::U64, 64));
        assert!(native(AtomicOp::Cswap, Datatype::I64, 8));
        assert!(!native(AtomicOp::Sum, Datatype::U64, 4));
        assert!(!native(AtomicOp::Sum, Datatype::U32, 0));
        assert!(!native(AtomicOp::Max, Datatype::U64, 0));
        assert!(!native(AtomicOp::Cswap, Datatype::F64, 0));
    }
}
