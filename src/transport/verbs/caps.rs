//! What the native verbs back-end offers the layers above, as [`Caps`].
//!
//! | switch | value | why |
//! |---|---|---|
//! | `atomics` | 64-bit integer SUM (update, fetch) and compare-and-swap, one element per call | what `IBV_WR_ATOMIC_FETCH_AND_ADD` / `CMP_AND_SWP` do; every other (op, type) takes the software accumulate path |
//! | `native_atomics` | `atomic_cap` is HCA or GLOB | the device applies them without the target's CPU |
//! | `completion` | `Acknowledged` | an RC WRITE completes once the target's HCA acknowledged it (placed in its memory) |
//! | `needs_target_progress` | false | RDMA WRITE/READ/atomics need no target CPU (messages and the handshake do: the progress agent serves them) |
//! | `batch_small` | false | one work request per put is the hardware's fast path |
//! | `inject_size` | the queue pair's `max_inline_data` | small writes are posted inline |
//! | `atomic_order` | none promised | reads and atomics may pass earlier writes on one RC queue pair; the layers above order what they need |
//! | `mr` | local keys needed, virtual addresses, device-chosen keys | verbs |

use super::device::DeviceInfo;
use crate::transport::{
    AtomicKind, AtomicOp, AtomicOrder, AtomicTable, Caps, Datatype, MrCaps, RemoteCompletion,
};

/// The atomic calls the device carries natively.
pub fn atomic_table(device: &DeviceInfo) -> AtomicTable {
    if !device.has_atomics() {
        return AtomicTable::none();
    }
    AtomicTable::from_fn(|op, dt, kind| {
        let sixty_four = matches!(dt, Datatype::U64 | Datatype::I64);
        let ok = sixty_four
            && matches!(
                (op, kind),
                (AtomicOp::Sum, AtomicKind::Update | AtomicKind::Fetch)
                    | (AtomicOp::Cswap, AtomicKind::Compare)
            );
        ok.then_some(1)
    })
}

/// The capabilities of the back-end on `device` port `port`, posting
/// writes inline up to `max_inline` bytes, transfers up to `max_msg`.
pub fn caps(device: &DeviceInfo, port: u8, max_inline: usize, max_msg: usize) -> Caps {
    Caps {
        backend: "verbs",
        name: format!("{}:{port}", device.name),
        fabric: "ibverbs".into(),
        domain: device.name.clone(),
        atomics: atomic_table(device),
        native_atomics: device.has_atomics(),
        needs_target_progress: false,
        batch_small: false,
        inject_size: max_inline,
        // A verbs WR writes or reads one remote range.
        rma_ranges: 1,
        max_msg_size: max_msg,
        // The SRQ's buffers: RECV_BUFFERS x 4 KiB = 256 KiB of registered
        // memory per process, kept small (a NIC sends a message of any size
        // without a software rendezvous; the bound is memory, not speed).
        max_message: crate::transport::MAX_MESSAGE,
        completion: RemoteCompletion::Acknowledged,
        // A remote access error moves the queue pair to the error state;
        // the pair is re-created on the next contact (generations).
        remote_errors_break_connection: false,
        ordered_atomic_raw: false,
        atomic_order: AtomicOrder::NONE,
        mr: MrCaps {
            local: true,
            virt_addr: true,
            chosen_keys: false,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dev(atomic_cap: &'static str) -> DeviceInfo {
        DeviceInfo {
            name: "rxe0".into(),
            atomic_cap,
            max_qp_rd_atom: 128,
            max_qp_init_rd_atom: 128,
            max_cqe: 32767,
            max_qp_wr: 1 << 20,
            max_srq_wr: 1 << 20,
            max_mr_size: u64::MAX,
            max_inline_data: Some(512),
            ports: Vec::new(),
        }
    }

    #[test]
    fn only_64_bit_sum_and_compare_and_swap_are_native() {
        let c = caps(&dev("IBV_ATOMIC_HCA"), 1, 256, 1 << 30);
        assert_eq!(c.name, "rxe0:1");
        assert!(c.native_atomics && c.atomics.lock_word());
        let offered: Vec<_> = c.atomics.entries().collect();
        assert_eq!(offered.len(), 6, "{offered:?}");
        for (op, dt, kind, n) in offered {
            assert!(matches!(dt, Datatype::U64 | Datatype::I64), "{dt:?}");
            assert!(matches!(op, AtomicOp::Sum | AtomicOp::Cswap), "{op:?}");
            assert_eq!(n, 1, "{op:?} {kind:?}");
        }
        assert!(!c.atomics.offers(AtomicOp::Max, Datatype::U64, AtomicKind::Fetch));
        assert!(!c.atomics.offers(AtomicOp::Sum, Datatype::U32, AtomicKind::Fetch));
        assert!(!c.atomics.offers(AtomicOp::Sum, Datatype::F64, AtomicKind::Update));
        assert_eq!(c.completion, RemoteCompletion::Acknowledged);
    }

    #[test]
    fn a_device_without_atomics_offers_none() {
        let c = caps(&dev("IBV_ATOMIC_NONE"), 1, 0, 1 << 30);
        assert!(!c.native_atomics);
        assert_eq!(c.atomics.entries().count(), 0);
    }
}
