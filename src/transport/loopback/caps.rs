//! What the in-process back-end can do, as the seam's switches.
//!
//! | switch | value | why |
//! |---|---|---|
//! | `atomics` | every (op, type) `cpu_atomic` applies, and compare-and-swap on every type | the origin's thread applies them with CPU atomics |
//! | `native_atomics` | true | no target CPU involved (the lock word is used, as on a NIC) |
//! | `needs_target_progress` | false | puts, gets and atomics are done by the origin's thread; *messages* still wait for the target's progress |
//! | `batch_small` | false | an operation is a memory copy: nothing to amortize (`ONESIDED_AGGREGATE=on` still batches, for testing) |
//! | `completion` | acknowledged | a completed write is in the target's memory |
//! | `ordered_atomic_raw`, `atomic_order` | true, all | one origin's operations run in issue order (`cq.rs`) |
//! | `max_message` | 64 KiB (`LARGEST_MESSAGE`) | a message is a copy into the target's inbox; no posted buffers to bound |
//! | `mr` | offsets, chosen keys, no local registration | keys are table entries; any local buffer can be copied |

use crate::transport::{
    cpu_atomic, AtomicKind, AtomicOp, AtomicOrder, AtomicTable, Caps, MrCaps, RemoteCompletion,
    LARGEST_MESSAGE, MAX_MESSAGE,
};

/// Elements of one atomic call (larger calls are split by the caller).
const ATOMIC_COUNT: usize = 1 << 16;
/// Largest single transfer.
const MAX_TRANSFER: usize = 1 << 30;

/// The capabilities of an endpoint of fabric `id`.
pub(super) fn caps(id: u64, size: usize) -> Caps {
    Caps {
        backend: "loopback",
        name: "loopback".into(),
        fabric: format!("in-process fabric {id} ({size} threads)"),
        domain: "loopback".into(),
        atomics: AtomicTable::from_fn(|op, dt, kind| match kind {
            AtomicKind::Compare => (op == AtomicOp::Cswap).then_some(1),
            _ => cpu_atomic::supports(op, dt).then_some(ATOMIC_COUNT),
        }),
        native_atomics: true,
        needs_target_progress: false,
        batch_small: false,
        inject_size: MAX_MESSAGE,
        rma_ranges: 1,
        max_msg_size: MAX_TRANSFER,
        // A message is a copy into the target's inbox: no receive buffers
        // to bound, so the largest size any back-end declares (exercises
        // large batches in-process).
        max_message: LARGEST_MESSAGE,
        completion: RemoteCompletion::Acknowledged,
        // A bad key is an error returned to the origin; nothing breaks.
        remote_errors_break_connection: false,
        ordered_atomic_raw: true,
        atomic_order: AtomicOrder::ALL,
        mr: MrCaps {
            local: false,
            virt_addr: false,
            chosen_keys: true,
        },
    }
}
