//! The transport layer: moving bytes between registered memories.
//!
//! [`Transport`] is the seam between the protocols above and the network
//! back-ends below: peers connected on first contact, memory registration,
//! put/get/atomics to a remote address and key, messages for the protocols
//! that need the target's CPU, progress and the event sources an idle
//! progress agent sleeps on. What a back-end can do is a [`Caps`] value
//! (capability flags); the layers above choose protocols from it, never
//! from a back-end's name. The vocabulary ([`Datatype`], [`AtomicOp`],
//! [`Atomic`]) is the crate's own; each back-end maps it to its values.
//! Back-ends: [`ofi`] (libfabric), [`verbs`] (native ibverbs),
//! [`loopback`] (ranks as threads of one process). [`open`] picks one.
//!
//! Buffer ownership is the transport's business: a blocking [`Transport::put`]
//! returns only when the caller's buffer may be reused, a blocking
//! [`Transport::get`] only when the data has arrived, and the non-blocking
//! forms take an [`InFlight`] buffer that cannot be touched or freed before the
//! operation completes.

pub mod am;
pub mod caps;
pub mod completion;
// unsafe allowed: CPU atomics on exposed window memory (raw pointers into registered memory).
#[allow(unsafe_code)]
pub mod cpu_atomic;
pub mod exposed;
// unsafe allowed: buffers the network writes while an operation is in flight.
#[allow(unsafe_code)]
pub mod inflight;
// unsafe allowed: the in-process back-end (registration aliases, buffers of
// operations in flight).
#[allow(unsafe_code)]
pub mod loopback;
// unsafe allowed: the one owner of memory peers may write (registration, mappings).
#[allow(unsafe_code)]
pub mod memory;
// unsafe allowed: the libfabric back-end (FFI).
#[allow(unsafe_code)]
pub mod ofi;
// unsafe allowed: intra-node mapping of node-shared segments (mmap).
#[allow(unsafe_code)]
pub mod shm;
// unsafe allowed: the userfaultfd ioctls that keep cached registrations of
// user buffers from going stale.
#[allow(unsafe_code)]
pub mod regcache;
// unsafe allowed: the native ibverbs back-end (FFI).
#[allow(unsafe_code)]
pub mod verbs;
pub mod vocab;

use std::any::Any;
use std::sync::Arc;

pub use caps::{AtomicTable, Caps, MrCaps, RemoteCompletion};
pub use completion::{Completion, PerTarget};
pub use inflight::InFlight;
pub use memory::Memory;
pub use vocab::{Atomic, AtomicKind, AtomicOp, AtomicOrder, Datatype};

/// Checks the length of a message for [`Transport::send`]: 1 to `max`
/// bytes, `max` being the back-end's [`Caps::max_message`] (the size of
/// the receive buffers every rank of the job posts: a longer message would
/// not fit the target's buffer, so it is refused here, never truncated).
///
/// # Errors
/// [`Error::InvalidArgument`] naming the length, the limit and `target`.
///
/// [`Error::InvalidArgument`]: crate::error::Error::InvalidArgument
pub fn check_message(target: usize, len: usize, max: usize) -> Result<()> {
    if len == 0 || len > max {
        return Err(crate::error::Error::InvalidArgument(format!(
            "message of {len} bytes to rank {target}: messages on this back-end hold 1 to \
             {max} bytes (its receive buffers)"
        )));
    }
    Ok(())
}

/// Checks that the lengths of `ranges` sum to `len` (the buffer of
/// [`Transport::put_scatter`] and [`Transport::get_gather`]).
pub fn check_ranges(len: usize, ranges: &[(RemoteAddr, usize)]) -> Result<()> {
    let total = ranges
        .iter()
        .try_fold(0usize, |sum, r| sum.checked_add(r.1));
    if total != Some(len) {
        return Err(crate::error::Error::InvalidArgument(format!(
            "{} remote ranges of {} bytes in all for a buffer of {len} bytes",
            ranges.len(),
            total.map_or("more than usize::MAX".to_string(), |t| t.to_string())
        )));
    }
    Ok(())
}

/// What [`Transport::send_posted`] runs when a posted send fails later.
pub type SendFailed = Box<dyn FnOnce(crate::error::Error) + Send>;

use crate::error::Result;

/// Where an operation lands: an address in the target's registration and its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RemoteAddr {
    /// Address as the provider expects it (virtual address or offset).
    pub addr: u64,
    /// Remote protection key.
    pub key: u64,
}

/// A registered memory region; dropping it deregisters.
///
/// A registration made for a window holds the window's memory
/// ([`Registration::holding`]), so the memory outlives the registration
/// even if the registration is leaked: peers can never write through a
/// registration into memory the program has freed.
pub struct Registration {
    /// Key peers use to access the region.
    pub key: u64,
    /// Base address peers use (the virtual address, or 0 for offset addressing).
    pub base: u64,
    // Field order: deregister (`_handle`) before letting go of the memory.
    _handle: Box<dyn Any + Send + Sync>,
    _memory: Option<std::sync::Arc<Memory<'static>>>,
}

impl Registration {
    /// Wraps a back-end handle.
    pub fn new(key: u64, base: u64, handle: Box<dyn Any + Send + Sync>) -> Self {
        Registration {
            key,
            base,
            _handle: handle,
            _memory: None,
        }
    }

    /// Keeps `mem` (the registered memory) alive as long as this
    /// registration.
    pub fn holding(mut self, mem: std::sync::Arc<Memory<'static>>) -> Self {
        self._memory = Some(mem);
        self
    }
}

/// Counters of a back-end.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct TransportStats {
    /// Operations posted and not completed yet (receive buffers not counted).
    pub ops_in_flight: usize,
    /// Completions ignored because their context did not match an
    /// operation in flight (a provider bug, if ever non-zero).
    pub rejected_completions: u64,
    /// Completions of requests on a connection that was made again after
    /// an error, read after their operations had failed (native verbs:
    /// flushed work requests of the old queue pair). Expected after a
    /// peer error, and dropped.
    pub stale_completions: u64,
    /// Messages sent (`Transport::send` and replies built by a `Receiver`).
    pub sends: u64,
    /// Bytes of those messages.
    pub send_bytes: u64,
    /// Messages received and handed to the receiver.
    pub messages_received: u64,
    /// Messages received and dropped: no receiver installed, truncated, or
    /// a reply to a rank that could not be reached.
    pub messages_dropped: u64,
    /// Slots of the op table (`ONESIDED_RMA_SLOTS`).
    pub op_slots: usize,
    /// Posts that found every op-table slot in use and read the CQ until
    /// one freed.
    pub op_slots_exhausted: u64,
    /// RMA writes posted (one per provider call: chunks count separately;
    /// includes flag writes of barriers).
    pub writes: u64,
    /// RMA reads posted (includes flush reads, directory reads and barrier
    /// confirmations).
    pub reads: u64,
    /// Atomic operations posted (per provider call).
    pub atomics: u64,
    /// Bytes written by [`TransportStats::writes`].
    pub bytes_written: u64,
    /// Bytes read by [`TransportStats::reads`].
    pub bytes_read: u64,
    /// Operand bytes of [`TransportStats::atomics`].
    pub bytes_atomic: u64,
    /// Atomics the NIC carried as 64-bit FETCH_AND_ADD (native verbs).
    pub nic_fetch_add: u64,
    /// Atomics the NIC carried as 64-bit CMP_AND_SWP (native verbs).
    pub nic_compare_swap: u64,
    /// Connections made (connection-oriented back-ends: queue pairs to
    /// peers, counting both sides of each handshake once per process).
    pub connections: u64,
    /// Connections made again after an error.
    pub reconnections: u64,
    /// Times the shared receive queue fell below its limit (native verbs:
    /// `IBV_EVENT_SRQ_LIMIT_REACHED`; the credits should keep this 0).
    pub srq_limit_events: u64,
    /// Blocking puts and gets whose caller's buffer the NIC read or wrote
    /// directly, registered for the one operation (native verbs,
    /// `ONESIDED_ZCOPY_ABOVE`), instead of through staging copies.
    pub zero_copy: u64,
    /// Blocking operations of one work request that their caller posted
    /// and polled without the general op table (native verbs).
    pub lean: u64,
    /// Large blocking puts and gets whose caller's buffer was found
    /// registered in the registration cache (native verbs,
    /// `ONESIDED_MR_CACHE`).
    pub mr_cache_hits: u64,
    /// Registrations of callers' buffers kept in that cache.
    pub mr_cache_inserted: u64,
    /// Cached registrations forgotten because their memory was unmapped,
    /// moved or emptied.
    pub mr_cache_invalidated: u64,
    /// Times the progress agent stood down (parked) because an application
    /// thread had been polling the back-end in a wait for a while, where
    /// the agent shares that thread's one CPU (libfabric back-ends;
    /// `progress`, "Standing down").
    pub agent_stand_downs: u64,
}

/// The smallest [`Caps::max_message`] of any back-end: a message of at most
/// this many bytes is accepted everywhere, and every receive buffer is at
/// least this long. Fixed-size protocol messages (requests, replies, lock
/// and accumulate segments) stay within it; only messages sized from the
/// back-end's capability (BATCH messages of aggregation) go beyond it.
/// Small enough for every provider's eager protocol here (shm sends 4 KiB
/// inline).
pub const MAX_MESSAGE: usize = 4096;

/// The largest [`Caps::max_message`] a back-end may declare (the bound of
/// the checks a receiver makes before it trusts a length).
pub const LARGEST_MESSAGE: usize = 64 * 1024;

/// Receive buffers each process keeps posted (a constant pool of
/// `RECV_BUFFERS` x [`Caps::max_message`] bytes: 256 KiB at 4 KiB, 4 MiB
/// at 64 KiB).
pub const RECV_BUFFERS: usize = 64;

/// What the transport does with a message that arrived.
///
/// Invariants (relied on by the back-end and by implementors):
/// * `receive` runs on whichever thread reads the completion queue — the
///   progress agent or an application thread waiting in the library — so
///   two calls may run at the same time, on different buffers. It must not
///   block on the network (it must not wait for completions, post and wait,
///   or call [`Transport::progress`]): a receiver that waited could hold the
///   buffer the awaited message needs.
/// * `buf` is the whole receive buffer (at least [`MAX_MESSAGE`] bytes,
///   the back-end's [`Caps::max_message`]; the in-process back-end hands a
///   buffer at least as long as the message), the message its first `len`
///   bytes; nobody else touches it during the call.
/// * Returning `Some((to, n))` sends `buf[..n]` to rank `to` as a reply,
///   without blocking: the buffer is posted again for receiving only once
///   that send completed. Replies therefore need no buffer of their own, and
///   the messages a process has in flight as replies are bounded by
///   [`RECV_BUFFERS`].
pub trait Receiver: Send + Sync {
    /// Handles one message; optionally asks for a reply built in `buf`.
    fn receive(&self, buf: &mut [u8], len: usize) -> Option<(usize, usize)>;
    /// Makes `rank` reachable (adds it as a peer) before a reply is sent to
    /// it; called at most once per peer the reply path has not seen yet.
    fn resolve(&self, rank: usize) -> Result<()>;
}

/// A network back-end.
pub trait Transport: Send + Sync {
    /// Counters.
    fn stats(&self) -> TransportStats;
    /// What the back-end can do (fixed once it is open).
    fn caps(&self) -> &Caps;
    /// What a peer needs to reach this process (an endpoint address, a
    /// device address and the queue pair that accepts connections, ...),
    /// published once through the bootstrap as part of our card.
    fn card(&self) -> &[u8];
    /// The connection hook: first contact with `rank`, whose published card
    /// is `card`. A connectionless back-end inserts an address; a
    /// connection-oriented one makes the connection here, and the target's
    /// side of the handshake is served by the target's [`progress`]
    /// (its progress agent). Idempotent; bounded by `ONESIDED_TIMEOUT`.
    ///
    /// A connection that fails later (an error completion) is the
    /// back-end's to repair: it is torn down and made again on the next
    /// operation to `rank`, under a new generation number, so that
    /// completions of the old connection are recognised and dropped
    /// ([`TransportStats::stale_completions`]) — a failed access never
    /// leaves the pair of ranks unusable.
    ///
    /// # Errors
    /// A card that does not decode, a peer that does not answer the
    /// handshake in time: an error naming `rank`.
    ///
    /// [`progress`]: Transport::progress
    fn connect(&self, rank: usize, card: &[u8]) -> Result<()>;
    /// Whether `rank` was connected (contacted).
    fn is_connected(&self, rank: usize) -> bool;
    /// Number of peers with transport state (address-vector entries,
    /// connections): only peers this process contacted or that contacted
    /// it.
    fn peer_count(&self) -> usize;
    /// Registers memory for remote read and write.
    fn register(&self, mem: &Memory<'_>) -> Result<Registration>;
    /// [`Transport::register`] asking for remote key `key` (even: window
    /// keys, see `meta::uniform`); providers that choose keys
    /// (`FI_MR_PROV_KEY`) return their own, so the caller compares.
    fn register_keyed(&self, mem: &Memory<'_>, _key: u64) -> Result<Registration> {
        self.register(mem)
    }
    /// Writes `data` to `dst` at `target`; returns when `data` may be reused.
    fn put(&self, target: usize, data: &[u8], dst: RemoteAddr) -> Result<()>;
    /// Reads `buf.len()` bytes from `src` at `target`; returns when they arrived.
    fn get(&self, target: usize, buf: &mut [u8], src: RemoteAddr) -> Result<()>;
    /// Starts writing `src` to `dst`; `src.completion()` counts it.
    fn put_async(&self, target: usize, src: &InFlight, dst: RemoteAddr) -> Result<()>;
    /// Starts reading into `dst` from `src`; `dst.completion()` counts it.
    fn get_async(&self, target: usize, dst: &InFlight, src: RemoteAddr) -> Result<()>;
    /// Writes one 64-bit word and returns once it is visible at the target
    /// (synchronization flags).
    fn put_signal(&self, target: usize, value: u64, dst: RemoteAddr) -> Result<()>;
    /// Writes one 64-bit word and returns once it has left this process
    /// (local completion: on a provider whose writes complete locally, the
    /// word is in the kernel's socket buffer), without waiting for a proof
    /// of delivery. For flags whose receiver waits for them anyway (the
    /// rounds of a fence's barrier), where the proof would only add a
    /// round trip. Defaults to [`Transport::put_signal`].
    fn put_flag(&self, target: usize, value: u64, dst: RemoteAddr) -> Result<()> {
        self.put_signal(target, value, dst)
    }
    /// Applies `what` with the elements of `data` to `dst` at `target`;
    /// returns when `data` may be reused. Counts above the provider's limit
    /// are split into several calls.
    fn atomic(&self, target: usize, what: Atomic, data: &[u8], dst: RemoteAddr) -> Result<()>;
    /// As [`Transport::atomic`], and returns the previous target values in
    /// `result` (same length as `data`) once they arrived.
    fn fetch_atomic(
        &self,
        target: usize,
        what: Atomic,
        data: &[u8],
        result: &mut [u8],
        dst: RemoteAddr,
    ) -> Result<()>;
    /// Compare-and-swap of one element: writes `swap` where the target's
    /// bits equal `compare`'s; the previous value lands in `result`.
    fn compare_atomic(
        &self,
        target: usize,
        datatype: Datatype,
        compare: &[u8],
        swap: &[u8],
        result: &mut [u8],
        dst: RemoteAddr,
    ) -> Result<()>;
    /// Starts [`Transport::atomic`] from a buffer the transport holds.
    fn atomic_async(
        &self,
        target: usize,
        what: Atomic,
        src: &InFlight,
        dst: RemoteAddr,
    ) -> Result<()>;
    /// Starts [`Transport::fetch_atomic`]; `data` is kept alive by the
    /// operation, the previous values land in `result`.
    fn fetch_atomic_async(
        &self,
        target: usize,
        what: Atomic,
        data: Vec<u8>,
        result: &InFlight,
        dst: RemoteAddr,
    ) -> Result<()>;
    /// Writes `data` to the remote ranges `dst` in order — range `i` gets
    /// the next `dst[i].1` bytes; the lengths sum to `data.len()` — with as
    /// few operations as the back-end allows ([`Caps::rma_ranges`] ranges
    /// per operation: a noncontiguous put as one provider call). Returns
    /// when `data` may be reused, as [`Transport::put`] does. The default
    /// puts range by range.
    ///
    /// # Errors
    /// Lengths that do not sum to `data.len()` (nothing sent), or what
    /// [`Transport::put`] returns.
    fn put_scatter(&self, target: usize, data: &[u8], dst: &[(RemoteAddr, usize)]) -> Result<()> {
        check_ranges(data.len(), dst)?;
        let mut at = 0;
        for &(d, n) in dst {
            self.put(target, &data[at..at + n], d)?;
            at += n;
        }
        Ok(())
    }
    /// Reads the remote ranges `src`, in order, into `buf` (range `i` into
    /// the next `src[i].1` bytes), with as few operations as the back-end
    /// allows, as [`Transport::put_scatter`] writes them. Returns when the
    /// data is in `buf`.
    ///
    /// # Errors
    /// As [`Transport::put_scatter`], or what [`Transport::get`] returns.
    fn get_gather(&self, target: usize, buf: &mut [u8], src: &[(RemoteAddr, usize)]) -> Result<()> {
        check_ranges(buf.len(), src)?;
        let mut at = 0;
        for &(s, n) in src {
            self.get(target, &mut buf[at..at + n], s)?;
            at += n;
        }
        Ok(())
    }
    /// Sends `bytes` (1 to [`Caps::max_message`]; see [`check_message`])
    /// to one of `target`'s pre-posted receive buffers; returns when `bytes` may be
    /// reused. The receiver's [`Receiver`] sees the message when its CQ is
    /// read.
    fn send(&self, target: usize, bytes: &[u8]) -> Result<()>;
    /// Posts `bytes` like [`Transport::send`] but returns without waiting
    /// for the send's local completion: the bytes are copied (or injected)
    /// first. Meant for requests whose reply proves delivery. When the send
    /// fails after this returned `Ok`, `failed` runs once with the error
    /// (naming `target`; kind `PeerUnreachable` when the peer is gone) on
    /// whichever thread reads the completion; otherwise it is dropped
    /// uncalled. On `Err` nothing is in flight and `failed` is not called.
    ///
    /// The default waits like [`Transport::send`] (a failure is then its
    /// `Err`). Messages to one target arrive in the order they were posted,
    /// whichever of the two calls posted them.
    fn send_posted(&self, target: usize, bytes: &[u8], failed: SendFailed) -> Result<()> {
        drop(failed);
        self.send(target, bytes)
    }
    /// Installs the handler of incoming messages (messages that arrive
    /// before are dropped and counted in [`TransportStats::messages_dropped`]).
    fn set_receiver(&self, receiver: Arc<dyn Receiver>);
    /// Reads completions and drives the provider; returns how much work it
    /// served: every incoming message, and the completions of this
    /// process's own operations unless the back-end leaves them out (native
    /// verbs does, so that the progress agent, which reads the count to
    /// decide when to sleep, does not stay awake beside an application
    /// thread that posts and waits for its own RDMA operations).
    fn progress(&self) -> Result<usize>;
    /// File descriptors that become readable when the back-end has work:
    /// a completion, incoming traffic that needs serving, a connection
    /// request. Empty when the back-end has none that covers all of its
    /// work; an idle progress agent then polls instead of sleeping.
    fn event_fds(&self) -> Vec<std::os::fd::BorrowedFd<'_>> {
        Vec::new()
    }
    /// Prepares to sleep on [`Transport::event_fds`]: re-arms the
    /// notifications. `Ok(true)`: nothing is pending, the caller may sleep
    /// until a descriptor is readable; `Ok(false)`: work arrived meanwhile,
    /// call [`Transport::progress`] first (the `fi_trywait` /
    /// `ibv_req_notify_cq` pattern, which closes the race between the last
    /// poll and the sleep).
    fn arm(&self) -> Result<bool> {
        Ok(false)
    }
    /// Drives progress until `done` has nothing pending (bounded by the
    /// configured timeout), then reports the first error it recorded.
    fn wait(&self, done: &Completion, what: &dyn Fn() -> String) -> Result<()>;
    /// The count of application threads polling this back-end in a wait,
    /// where the progress agent stands down while any does
    /// ([`crate::progress`]): back-ends whose agent polls (it yields and
    /// sleeps in short steps instead of sleeping in the kernel) or wakes
    /// on every arriving packet, and whose progress call by any thread
    /// serves everything the agent would. `None` (the default): the agent
    /// keeps its own pace.
    fn pollers(&self) -> Option<&crate::progress::wait::Pollers> {
        None
    }
}

/// A shared transport.
pub type SharedTransport = Arc<dyn Transport>;

/// The automatic back-end choice ([`open`] under `ONESIDED_BACKEND=auto`):
/// native verbs unless a libfabric provider is named, when
/// `ONESIDED_IB_DEVICE` names a device or an ACTIVE verbs port with a
/// usable GID exists. `onesided-info` reports it with the same rule.
///
/// # Errors
/// A malformed `ONESIDED_IB_DEVICE`: [`Error::Config`](crate::error::Error::Config).
pub fn auto_picks_verbs(provider_named: bool) -> Result<bool> {
    Ok(!provider_named
        && (verbs::device::DeviceSpec::from_env()?.name.is_some()
            || verbs::device::usable_port_exists()))
}

/// Why `ONESIDED_IB_DEVICE`, set, selects nothing in this configuration:
/// libfabric is opened (`ONESIDED_BACKEND=ofi`, or `auto` with a provider
/// named, which wins over a named device), whose domain `ONESIDED_IFACE`
/// picks. `None` when the variable is unset or empty, or the native
/// back-end may read it. [`open`] reports it as a warning (on stderr too
/// with `ONESIDED_VERBOSE=1`), `onesided-info` on its back-end line: a user
/// who names a device expects it to be used.
pub fn ib_device_ignored(config: &crate::config::Config) -> Option<String> {
    use crate::config::Backend;
    let device = std::env::var("ONESIDED_IB_DEVICE")
        .ok()
        .filter(|v| !v.trim().is_empty())?;
    let why = match (config.backend, &config.provider) {
        (Backend::Ofi, _) => "ONESIDED_BACKEND=ofi selects libfabric".to_string(),
        (Backend::Auto, Some(p)) => format!("ONESIDED_PROVIDER={p} selects libfabric"),
        _ => return None,
    };
    Some(format!(
        "ONESIDED_IB_DEVICE={device} is ignored: {why} (whose domain ONESIDED_IFACE picks); \
         for the native verbs back-end on that device unset ONESIDED_PROVIDER or set \
         ONESIDED_BACKEND=verbs"
    ))
}

/// Opens the back-end `ONESIDED_BACKEND` names (`config.backend`): the one
/// constructor of a transport.
///
/// * `verbs` — native ibverbs on the device `ONESIDED_IB_DEVICE` names
///   (`rxe0:1`), or the first ACTIVE port with a usable GID;
/// * `ofi` — libfabric, with the provider `ONESIDED_PROVIDER` names or the
///   first of its automatic order (libfabric's `verbs;ofi_rxm` only when
///   named);
/// * `loopback` — the in-process back-end: its ranks are threads of one
///   process, each opened by `World::run_threads` on the job's fabric
///   ([`loopback::LoopbackTransport::open`]); for a launched process this
///   is an error saying so;
/// * `auto` (default) — unless a libfabric provider was named: native
///   verbs when `ONESIDED_IB_DEVICE` names a device (which must then be
///   usable: a device that is absent, DOWN or without a usable GID is an
///   error naming it, never a silent fall back to libfabric's tcp) or when
///   an ACTIVE verbs port exists; libfabric otherwise. A named provider
///   wins over a named device.
///
/// # Errors
/// The back-end cannot be opened here (no provider, no device, loopback
/// outside a job of threads): the error names the back-end and what is
/// missing. A malformed `ONESIDED_IB_DEVICE` under `auto` or `verbs`:
/// [`Error::Config`](crate::error::Error::Config).
pub fn open(config: &crate::config::Config, rank: usize, size: usize) -> Result<SharedTransport> {
    use crate::config::Backend;
    match config.backend {
        Backend::Auto if auto_picks_verbs(config.provider.is_some())? => {
            Ok(Arc::new(verbs::VerbsTransport::open(config, rank, size)?))
        }
        Backend::Auto | Backend::Ofi => {
            if let Some(text) = ib_device_ignored(config) {
                tracing::warn!("{text}");
                if config.verbose {
                    eprintln!("onesided: {text}");
                }
            }
            Ok(Arc::new(ofi::OfiTransport::open(config)?))
        }
        Backend::Verbs => Ok(Arc::new(verbs::VerbsTransport::open(config, rank, size)?)),
        Backend::Loopback => Err(loopback::launched()),
    }
}
