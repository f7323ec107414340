//! What libfabric providers can do, as the seam's named switches: the one
//! place where a provider's *name* decides anything (MPICH ch4's capability
//! sets, UCX's uct flags). Everything else above this file reads [`Caps`].
//!
//! | switch | rule | why (measured, `docs/transport.md`, `docs/semantics.md`) |
//! |---|---|---|
//! | `native_atomics` | false for tcp, net, sockets, udp, shm | their atomics run in the target's progress engine: a lock is cheaper as one message than a chain of emulated atomics |
//! | `batch_small` | tcp, net, sockets | one provider operation per 8-byte put cost ~20 µs; batched, 0.4 µs per put (`docs/op-table.md`) |
//! | `completion` | `FI_ORDER_RMA_RAW` → ordered read, else delivery-complete writes | shm promises no RAW order |
//! | `needs_target_progress` | always | the endpoint runs `FI_PROGRESS_MANUAL` (AUTO measured ≈3× slower on tcp) |
//! | `max_message` | 64 KiB for `net`, 8 KiB for rxm over tcp/net, else 4 KiB ([`max_message`]) | as large as the provider sends eagerly: a 4-KiB cap made the halo six messages a step on net |
//! | `remote_errors_break_connection` | always | tcp drops the connection on a bad key (issue 12 item 2), shm hangs, rxm does not reconnect |

use crate::transport::{
    AtomicTable, Caps, MrCaps, RemoteCompletion, LARGEST_MESSAGE, MAX_MESSAGE,
};

/// Providers whose atomics are emulated by the target's CPU (`net` in
/// libfabric 1.17 offers none at all; `net;ofi_rxm` emulates them as
/// `tcp;ofi_rxm` does).
const EMULATED_ATOMICS: &[&str] = &["tcp", "net", "sockets", "udp", "shm"];

/// Providers where small operations are batched into messages by default
/// (`net` is the same sockets as `tcp`, without rxm).
const BATCH_SMALL: &[&str] = &["tcp", "net", "sockets"];

/// The receive-buffer size ([`Caps::max_message`]) of a provider: as large
/// as it sends eagerly, so that a message never waits for a rendezvous.
/// * `net` (libfabric's own RDM over TCP, no rxm): a message of any size is
///   written to the stream at once and read into the posted buffer; the
///   buffers are credited, so one is always posted: 64 KiB (a pool of
///   4 MiB per process).
/// * rxm over tcp or net: rxm sends eagerly up to its bounce-buffer size
///   (`FI_OFI_RXM_BUFFER_SIZE`, 16 KiB, less its packet header), beyond it
///   in segments or a rendezvous: 8 KiB stays well inside.
/// * everything else (shm inlines 4 KiB; sockets, udp, NIC providers):
///   [`MAX_MESSAGE`].
pub fn max_message(provider: &str) -> usize {
    if provider == "net" {
        LARGEST_MESSAGE
    } else if provider.ends_with("ofi_rxm") && named(provider, &["tcp", "net"]) {
        8 * 1024
    } else {
        MAX_MESSAGE
    }
}

fn named(provider: &str, list: &[&str]) -> bool {
    list.iter().any(|p| provider.starts_with(p))
}

/// The provider facts [`caps`] turns into switches.
pub struct ProviderFacts<'a> {
    pub provider: &'a str,
    pub fabric: &'a str,
    pub domain: &'a str,
    pub inject_size: usize,
    pub max_msg_size: usize,
    pub rma_iov_limit: usize,
    pub ordered_raw: bool,
    pub ordered_atomic_raw: bool,
    pub atomic_order: crate::transport::AtomicOrder,
    pub mr: MrCaps,
    pub atomics: AtomicTable,
}

/// The capabilities of an endpoint on a provider.
pub fn caps(f: ProviderFacts<'_>) -> Caps {
    Caps {
        backend: "ofi",
        name: f.provider.to_string(),
        fabric: f.fabric.to_string(),
        domain: f.domain.to_string(),
        native_atomics: !named(f.provider, EMULATED_ATOMICS),
        needs_target_progress: true,
        batch_small: named(f.provider, BATCH_SMALL),
        inject_size: f.inject_size,
        max_msg_size: f.max_msg_size,
        max_message: max_message(f.provider),
        rma_ranges: f.rma_iov_limit.max(1),
        completion: if f.ordered_raw {
            RemoteCompletion::OrderedRead
        } else {
            RemoteCompletion::DeliveryComplete
        },
        // libfabric 1.17's tcp closes the connection on a bad key (the
        // origin's next operations fail or crash in the provider), shm
        // hangs, and rxm does not re-establish a failed connection.
        remote_errors_break_connection: true,
        ordered_atomic_raw: f.ordered_atomic_raw,
        atomic_order: f.atomic_order,
        mr: f.mr,
        atomics: f.atomics,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn net_is_treated_like_tcp() {
        for p in ["tcp;ofi_rxm", "net", "net;ofi_rxm"] {
            assert!(named(p, EMULATED_ATOMICS), "{p}: emulated atomics");
            assert!(named(p, BATCH_SMALL), "{p}: small ops batched");
        }
        for p in ["efa", "verbs;ofi_rxm", "psm3"] {
            assert!(!named(p, EMULATED_ATOMICS), "{p}");
            assert!(!named(p, BATCH_SMALL), "{p}");
        }
    }

    #[test]
    fn message_size_follows_the_eager_limit() {
        assert_eq!(max_message("net"), LARGEST_MESSAGE);
        assert_eq!(max_message("tcp;ofi_rxm"), 8 * 1024);
        assert_eq!(max_message("net;ofi_rxm"), 8 * 1024);
        for p in ["shm", "sockets", "udp;ofi_rxd", "verbs;ofi_rxm", "efa", "tcp"] {
            assert_eq!(max_message(p), MAX_MESSAGE, "{p}");
        }
    }
}
