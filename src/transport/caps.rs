//! What a back-end can do, as named switches: the layers above choose their
//! protocols from these flags alone, never from a back-end's or provider's
//! name (as UCX's protocol layer reads uct capability flags, and MPICH ch4
//! turns provider knowledge into one capability set). Each back-end fills a
//! [`Caps`] once, when it opens; provider knowledge lives in the back-end's
//! own `caps.rs`.

use super::vocab::{AtomicKind, AtomicOp, AtomicOrder, Datatype};

/// How a flush makes earlier writes to a target *remotely* complete
/// (visible in the target's memory), per back-end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RemoteCompletion {
    /// Writes complete locally; reads to a target are ordered after earlier
    /// writes to it, so one small read after them proves them applied (a
    /// flush is one read). libfabric tcp and sockets (`FI_ORDER_RMA_RAW`).
    OrderedRead,
    /// Each write asks for delivery completion; a flush waits for the
    /// completions of the writes (libfabric shm, which promises no
    /// read-after-write order).
    DeliveryComplete,
    /// The local completion of a write already means it was placed in the
    /// target's memory (an acknowledged reliable connection: verbs RC; the
    /// in-process back-end, whose writes are memory copies): a flush waits
    /// for completions only.
    Acknowledged,
}

impl RemoteCompletion {
    /// For messages and reports.
    pub fn describe(self) -> &'static str {
        match self {
            RemoteCompletion::OrderedRead => "ordered read",
            RemoteCompletion::DeliveryComplete => "delivery-complete writes",
            RemoteCompletion::Acknowledged => "acknowledged writes",
        }
    }
}

/// Which atomic calls a back-end offers, and how many elements per call:
/// one entry per (operation, datatype, kind). Filled at open; looked up on
/// the decision paths only (window creation, lock-path choice).
#[derive(Clone, PartialEq, Eq, Default)]
pub struct AtomicTable {
    // [op][datatype - 1][kind]: the largest element count of one call, 0
    // when the call is not offered.
    max: [[[u32; 3]; 10]; 13],
}

impl std::fmt::Debug for AtomicTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let offered = self.entries().count();
        write!(f, "AtomicTable({offered} calls offered)")
    }
}

fn kind_index(kind: AtomicKind) -> usize {
    match kind {
        AtomicKind::Update => 0,
        AtomicKind::Fetch => 1,
        AtomicKind::Compare => 2,
    }
}

impl AtomicTable {
    /// Nothing offered.
    pub fn none() -> AtomicTable {
        AtomicTable::default()
    }

    /// Fills every entry with `offer(op, datatype, kind)`: the largest
    /// element count of one call, or `None`.
    pub fn from_fn(
        mut offer: impl FnMut(AtomicOp, Datatype, AtomicKind) -> Option<usize>,
    ) -> AtomicTable {
        let mut t = AtomicTable::default();
        for op in AtomicOp::ALL {
            for dt in Datatype::ALL {
                for kind in AtomicKind::ALL {
                    if let Some(n) = offer(op, dt, kind) {
                        t.set(op, dt, kind, n);
                    }
                }
            }
        }
        t
    }

    /// Records that `kind` calls of `op` on `datatype` take up to `count`
    /// elements (0: not offered).
    pub fn set(&mut self, op: AtomicOp, datatype: Datatype, kind: AtomicKind, count: usize) {
        let c = u32::try_from(count).unwrap_or(u32::MAX);
        self.max[op as usize][datatype as usize - 1][kind_index(kind)] = c;
    }

    /// The largest element count of one `kind` call of `op` on `datatype`,
    /// `None` when the back-end does not offer it.
    pub fn limit(&self, op: AtomicOp, datatype: Datatype, kind: AtomicKind) -> Option<usize> {
        let n = self.max[op as usize][datatype as usize - 1][kind_index(kind)];
        (n > 0).then_some(n as usize)
    }

    /// Whether the call is offered.
    pub fn offers(&self, op: AtomicOp, datatype: Datatype, kind: AtomicKind) -> bool {
        self.limit(op, datatype, kind).is_some()
    }

    /// Every offered call with its limit.
    pub fn entries(&self) -> impl Iterator<Item = (AtomicOp, Datatype, AtomicKind, usize)> + '_ {
        AtomicOp::ALL.into_iter().flat_map(move |op| {
            Datatype::ALL.into_iter().flat_map(move |dt| {
                AtomicKind::ALL
                    .into_iter()
                    .filter_map(move |k| self.limit(op, dt, k).map(|n| (op, dt, k, n)))
            })
        })
    }

    /// 64-bit fetch-and-add and compare-and-swap: what a lock word needs.
    pub fn lock_word(&self) -> bool {
        self.offers(AtomicOp::Sum, Datatype::U64, AtomicKind::Fetch)
            && self.offers(AtomicOp::Cswap, Datatype::U64, AtomicKind::Compare)
    }
}

/// Memory-registration properties.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MrCaps {
    /// Local buffers of operations must be registered (staging copies for
    /// unregistered user memory).
    pub local: bool,
    /// Remote addresses are virtual addresses (else offsets from the
    /// registration's start).
    pub virt_addr: bool,
    /// A requested key is honoured (`Transport::register_keyed`): window
    /// memory can be reached with a key computed from the window id.
    pub chosen_keys: bool,
}

/// What a back-end can do (see the module doc).
#[derive(Debug, Clone)]
pub struct Caps {
    /// The back-end: `ofi`, `verbs`, `loopback`.
    pub backend: &'static str,
    /// Display name of what carries the data: a libfabric provider
    /// (`tcp;ofi_rxm`), a device and port (`rxe0:1`), ...
    pub name: String,
    /// Fabric name (display).
    pub fabric: String,
    /// Domain / NIC name (display).
    pub domain: String,
    /// The atomic calls offered, with their element limits.
    pub atomics: AtomicTable,
    /// Atomics are applied by a NIC (or by the memory system, for the
    /// in-process back-end) without the target's CPU; `false` where the
    /// provider emulates them in the target's progress engine (libfabric
    /// tcp, sockets, udp, shm): then a lock is cheaper as one message to a
    /// lock queue than as a chain of emulated atomics.
    pub native_atomics: bool,
    /// Data reaches a target only while the target's CPU drives the
    /// back-end (manual progress): the progress agent is required for
    /// passive-target operations.
    pub needs_target_progress: bool,
    /// Many small operations cost far more as separate back-end operations
    /// than batched into one message (software transports): small puts and
    /// software-path accumulates are aggregated by default.
    pub batch_small: bool,
    /// Largest write the back-end sends from the caller's buffer at once
    /// (inject / inline), in bytes.
    pub inject_size: usize,
    /// Largest single transfer, in bytes.
    pub max_msg_size: usize,
    /// Largest message [`crate::transport::Transport::send`] carries, in
    /// bytes, and the size of each pre-posted receive buffer (so the same
    /// on every rank of a job, which all run the same back-end): from
    /// [`crate::transport::MAX_MESSAGE`] to
    /// [`crate::transport::LARGEST_MESSAGE`]. Chosen per back-end as large
    /// as the provider sends eagerly, without a rendezvous: messages are
    /// then fewer where each costs a round of system calls (BATCH messages
    /// of aggregation are sized from it). The receive pool is
    /// `RECV_BUFFERS` x this.
    pub max_message: usize,
    /// Remote ranges one [`crate::transport::Transport::put_scatter`] or
    /// [`crate::transport::Transport::get_gather`] operation carries (the
    /// provider's `rma_iov_limit`); 1 where every range is its own
    /// operation.
    pub rma_ranges: usize,
    /// How a flush makes writes remotely complete.
    pub completion: RemoteCompletion,
    /// A remote access error (a stale or wrong key, an address outside a
    /// registration) can leave the connection to that peer unusable (the
    /// target's provider drops it, or the error completion is never
    /// recovered from). Dynamic windows, whose regions come and go, then
    /// carry every operation as a message the target checks against its
    /// attached regions, so a bad access is one refused message.
    pub remote_errors_break_connection: bool,
    /// Atomic fetches to a target are ordered after earlier atomic updates
    /// to it and a 64-bit atomic read is offered: updates complete locally
    /// and a flush of atomics is one atomic read. Otherwise updates are
    /// confirmed individually (posted as fetches).
    pub ordered_atomic_raw: bool,
    /// The orderings between atomics to one target the back-end keeps.
    pub atomic_order: AtomicOrder,
    /// Memory registration.
    pub mr: MrCaps,
}

impl Caps {
    /// Whether several request-based atomics to one target may be in
    /// flight at once without breaking MPI's default accumulate ordering.
    pub fn ordered_atomics(&self) -> bool {
        self.atomic_order.contains(AtomicOrder::ALL)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_records_limits_per_call() {
        let mut t = AtomicTable::none();
        assert!(!t.lock_word());
        t.set(AtomicOp::Sum, Datatype::U64, AtomicKind::Fetch, 1);
        assert!(!t.lock_word());
        t.set(AtomicOp::Cswap, Datatype::U64, AtomicKind::Compare, 1);
        assert!(t.lock_word());
        assert_eq!(
            t.limit(AtomicOp::Sum, Datatype::U64, AtomicKind::Fetch),
            Some(1)
        );
        assert_eq!(
            t.limit(AtomicOp::Sum, Datatype::U64, AtomicKind::Update),
            None
        );
        assert_eq!(t.entries().count(), 2);
        let all = AtomicTable::from_fn(|op, dt, _| op.defined_on(dt).then_some(64));
        assert_eq!(
            all.limit(AtomicOp::Band, Datatype::F64, AtomicKind::Update),
            None
        );
        assert_eq!(
            all.limit(AtomicOp::Max, Datatype::F64, AtomicKind::Fetch),
            Some(64)
        );
    }
}
