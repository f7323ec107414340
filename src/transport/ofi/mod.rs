//! The libfabric back-end: RDM endpoints with RMA.
//!
//! * **Provider** from `ONESIDED_PROVIDER`, or the first of
//!   [`info::AUTO_ORDER`] that is present.
//! * **Threading**: the domain is opened `FI_THREAD_SAFE`, so the user's
//!   threads and the progress agent call in concurrently.
//! * **Progress**: `FI_PROGRESS_MANUAL`; [`OfiTransport::progress`] reads the
//!   completion queue, which also drives the provider's protocol engine.
//! * **Completion** (see `docs/transport.md`): with `FI_ORDER_RMA_RAW` (tcp,
//!   sockets) writes complete locally and a flush is one ordered read; without
//!   it (shm) each write asks for `FI_DELIVERY_COMPLETE`.
//! * **Peers** are inserted into the address vector when first contacted
//!   (`conn.rs`).

mod atomic;
mod caps;
mod conn;
mod counters;
mod cq;
mod domain;
pub mod fault;
mod fid;
pub mod info;
mod bounce;
mod mr;
mod msg;
mod ops;
mod rma;
mod staging;
// Only `onesided-info` (an unstable-feature binary) surveys providers.
#[cfg(feature = "unstable")]
pub mod survey;
pub mod vocab;
mod waiting;

pub use waiting::backoff;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use libfabric_sys as fi;

use self::fault::check;
use self::fid::Owned;
use self::info::InfoList;
use super::{
    Atomic, AtomicKind, AtomicOp, AtomicTable, Caps, Completion, Datatype, InFlight, Memory,
    MrCaps, Receiver, Registration, RemoteAddr, Transport, TransportStats,
};
use crate::config::Config;
use crate::error::{Error, Result};

/// What the provider negotiated, in libfabric's terms (the seam sees
/// [`Caps`], built from these by `caps.rs`).
#[derive(Debug, Clone)]
pub(crate) struct Props {
    /// Provider name, e.g. `tcp;ofi_rxm`.
    pub provider: String,
    /// Local buffers must be registered (`FI_MR_LOCAL`).
    pub mr_local: bool,
    /// Remote addresses are virtual addresses (`FI_MR_VIRT_ADDR`), else offsets.
    pub virt_addr: bool,
    /// The provider chooses keys (`FI_MR_PROV_KEY`).
    pub prov_key: bool,
    /// Registrations are bound to the endpoint (`FI_MR_ENDPOINT`).
    pub mr_endpoint: bool,
    /// Largest `fi_inject_write` payload.
    pub inject_size: usize,
    /// Largest single transfer.
    pub max_msg_size: usize,
    /// Remote ranges one `fi_writemsg`/`fi_readmsg` carries in
    /// `rma::scatter` (1 under `FI_MR_LOCAL`, where they are not used).
    pub rma_iov_limit: usize,
    /// RMA reads are ordered after earlier RMA writes to the same peer
    /// (`FI_ORDER_RMA_RAW`): a flush is one small read. Otherwise every write
    /// asks for `FI_DELIVERY_COMPLETE` and a flush waits for completions.
    pub ordered_raw: bool,
    /// The endpoint offers `FI_ATOMIC`.
    pub atomics: bool,
    /// Atomic fetches are ordered after earlier atomic updates to the same
    /// peer (`FI_ORDER_ATOMIC_RAW`) and a 64-bit atomic read is offered:
    /// atomic updates complete locally and a flush is one atomic read.
    /// Otherwise every atomic update is posted as a fetch.
    pub ordered_atomic_raw: bool,
    /// The largest blocking transfer that goes through a bounce cell
    /// (`bounce.rs`): [`bounce::BOUNCE_MAX`] on network providers, where
    /// the copy is lost in the transfer; [`bounce::CELL_BYTES`] on `shm`,
    /// whose transfer is itself a memory copy, so another one costs as
    /// much again (paired A/B on 2026-12-03, 5 rounds: 64 KiB put 1.61×,
    /// get 1.28×; 256 KiB put 1.58×, get 1.33× the in-place time).
    pub bounce_max: usize,
}

/// How many times an shm endpoint is opened again under a fresh name when
/// `fi_enable` finds its name taken.
const SHM_NAME_TRIES: u32 = 3;

/// A name for an shm endpoint no other process or open uses: the shm
/// provider names its `/dev/shm` region after the endpoint's source address
/// (`<address>:<uid>:<endpoint index>`), by default `fi_shm://<pid>`. A
/// region left by a killed process whose pid was reused, or by the same
/// pid in another pid namespace sharing `/dev/shm`, then makes `fi_enable`
/// fail with `EBUSY` (issue 12 item 9). This name adds a per-process
/// counter and 64 random bits to the pid, and says whose region it is.
pub fn shm_endpoint_name() -> String {
    use std::hash::{BuildHasher, Hasher};
    static OPENS: AtomicU64 = AtomicU64::new(0);
    let count = OPENS.fetch_add(1, Ordering::Relaxed);
    // RandomState's keys are random per process (and per thread's first
    // use); mix in the time and the counter so that every call differs.
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(count);
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    format!(
        "fi_shm://onesided-{}-{count}-{:016x}",
        std::process::id(),
        h.finish()
    )
}

/// A libfabric RDM endpoint with its fabric, domain, address vector and CQ.
pub struct OfiTransport {
    // Drop order matters: registrations before the endpoint, the endpoint
    // before what it is bound to.
    staging: Option<staging::Staging>,
    // Contexts of operations in flight hold registrations: before the endpoint.
    ops: ops::ContextTable,
    counters: counters::Counters,
    ep: Owned<fi::fid_ep>,
    // Receive buffers: the provider may write them until the endpoint is
    // closed, so they go after it (and their registration before the domain).
    msgs: Option<msg::Messages>,
    /// Cells the provider writes small results into (`bounce.rs`): after
    /// the endpoint, which may still write an abandoned one until closed.
    bounce: bounce::Bounce,
    av: Owned<fi::fid_av>,
    cq: Owned<fi::fid_cq>,
    /// The fd of the CQ's wait object, which wakes on traffic (`cq::wait_fd`).
    wait_fd: Option<std::os::fd::RawFd>,
    domain: Owned<fi::fid_domain>,
    fabric: Owned<fi::fid_fabric>,
    _info: InfoList,
    props: Props,
    caps: Caps,
    address: Vec<u8>,
    peers: Mutex<HashMap<usize, fi::fi_addr_t>>,
    next_key: AtomicU64,
    timeout: Option<Duration>,
    poisoned: AtomicBool,
    poison_reason: Mutex<Option<String>>,
    /// Application threads polling in a wait (the agent stands down).
    pollers: crate::progress::wait::Pollers,
}

impl OfiTransport {
    /// Opens an endpoint on the chosen provider.
    ///
    /// On shm every open gets a fresh endpoint name (see
    /// [`shm_endpoint_name`]); should `fi_enable` still find its name taken
    /// (`EBUSY`), the open is retried with another name.
    pub fn open(config: &Config) -> Result<OfiTransport> {
        // A single-machine job listens on loopback only (unless an
        // interface is named): nothing outside the machine can reach it.
        let iface = match (&config.iface, config.single_node) {
            (Some(name), _) => Some(info::Iface::Named(name.as_str())),
            (None, true) => Some(info::Iface::LoopbackIfPresent),
            (None, false) => None,
        };
        let selected = InfoList::select(config.provider.as_deref(), iface)?;
        if selected.first().core_provider() != "shm" {
            return Self::open_with(config, selected);
        }
        let mut tries = 0;
        loop {
            let mut info = InfoList::dup(selected.first())?;
            let name = shm_endpoint_name();
            info.set_src_name(&name)?;
            match Self::open_with(config, info) {
                Err(e) if e.errno() == Some(fi::FI_EBUSY) && tries < SHM_NAME_TRIES => {
                    tracing::warn!("shm endpoint name {name} is taken ({e}); trying another");
                    tries += 1;
                }
                result => return result,
            }
        }
    }

    /// Opens an endpoint of the provider `info` describes.
    fn open_with(config: &Config, info: InfoList) -> Result<OfiTransport> {
        let entry = info.first();
        let mr_mode = entry.mr_mode();
        let props = Props {
            provider: entry.provider(),
            mr_local: mr_mode & fi::FI_MR_LOCAL != 0 || config.force_mr_local,
            virt_addr: mr_mode & fi::FI_MR_VIRT_ADDR != 0,
            prov_key: mr_mode & fi::FI_MR_PROV_KEY != 0,
            mr_endpoint: mr_mode & fi::FI_MR_ENDPOINT != 0,
            inject_size: entry.inject_size(),
            max_msg_size: entry.max_msg_size(),
            rma_iov_limit: if mr_mode & fi::FI_MR_LOCAL != 0 || config.force_mr_local {
                1
            } else {
                entry.rma_iov_limit().max(1)
            },
            ordered_raw: entry.msg_order() & fi::FI_ORDER_RMA_RAW != 0,
            atomics: entry.caps() & fi::FI_ATOMIC != 0,
            // Decided below, once the endpoint can be asked.
            ordered_atomic_raw: false,
            bounce_max: if entry.core_provider() == "shm" {
                bounce::CELL_BYTES
            } else {
                bounce::BOUNCE_MAX
            },
        };
        let (fabric_name, domain_name) = (entry.fabric(), entry.domain());
        let msg_order = entry.msg_order();
        let what = |step: &str| format!("{step} on provider {}", props.provider);

        // Bindings drop in reverse order: `fabric` bound first, so that on
        // an error below the domain closes before its fabric.
        let domain::Domain { fabric, domain } = domain::Domain::open(entry)?;

        let (cq, cq_waitable) = cq::open(&domain, &props.provider)?;
        let wait_fd = if cq_waitable { cq::wait_fd(&cq) } else { None };

        let mut av_attr = fi::fi_av_attr {
            type_: fi::FI_AV_TABLE,
            ..Default::default()
        };
        let mut av: *mut fi::fid_av = std::ptr::null_mut();
        // SAFETY: as above.
        let rc =
            unsafe { fi::fi_av_open(domain.as_ptr(), &mut av_attr, &mut av, std::ptr::null_mut()) };
        check("fi_av_open", rc, || what("opening the address vector"))?;
        let av =
            Owned::new(av).ok_or_else(|| Error::NoProvider("fi_av_open returned NULL".into()))?;

        let mut ep: *mut fi::fid_ep = std::ptr::null_mut();
        // SAFETY: as above.
        let rc = unsafe {
            fi::fi_endpoint(
                domain.as_ptr(),
                entry.as_ptr(),
                &mut ep,
                std::ptr::null_mut(),
            )
        };
        check("fi_endpoint", rc, || what("creating the endpoint"))?;
        let ep =
            Owned::new(ep).ok_or_else(|| Error::NoProvider("fi_endpoint returned NULL".into()))?;

        // SAFETY: live endpoint, AV and CQ from the same domain.
        unsafe {
            check(
                "fi_ep_bind",
                fi::fi_ep_bind(ep.as_ptr(), av.fid(), 0),
                || what("binding the address vector"),
            )?;
            check(
                "fi_ep_bind",
                fi::fi_ep_bind(ep.as_ptr(), cq.fid(), fi::FI_TRANSMIT | fi::FI_RECV),
                || what("binding the completion queue"),
            )?;
            check("fi_enable", fi::fi_enable(ep.as_ptr()), || {
                what("enabling the endpoint")
            })?;
        }

        let mut name = vec![0u8; 256];
        let mut len = name.len();
        // SAFETY: buffer and length are valid; the provider writes at most len bytes.
        let mut rc = unsafe { fi::fi_getname(ep.fid(), name.as_mut_ptr().cast(), &mut len) };
        if rc == -(fi::FI_ETOOSMALL as i32) {
            name.resize(len, 0);
            // SAFETY: as above with the size the provider asked for.
            rc = unsafe { fi::fi_getname(ep.fid(), name.as_mut_ptr().cast(), &mut len) };
        }
        check("fi_getname", rc, || what("reading the endpoint address"))?;
        name.truncate(len);

        let mut t = OfiTransport {
            staging: None,
            ops: ops::ContextTable::with_capacity(config.rma_slots, super::RECV_BUFFERS),
            counters: counters::Counters::default(),
            ep,
            msgs: None,
            bounce: bounce::Bounce::default(),
            av,
            cq,
            wait_fd,
            domain,
            fabric,
            _info: info,
            caps: caps::caps(caps::ProviderFacts {
                provider: &props.provider,
                fabric: "",
                domain: "",
                inject_size: 0,
                max_msg_size: 0,
                rma_iov_limit: 1,
                ordered_raw: false,
                ordered_atomic_raw: false,
                atomic_order: Default::default(),
                mr: MrCaps::default(),
                atomics: AtomicTable::none(),
            }),
            props,
            address: name,
            peers: Mutex::new(HashMap::new()),
            next_key: AtomicU64::new(1),
            timeout: config.timeout,
            poisoned: AtomicBool::new(false),
            poison_reason: Mutex::new(None),
            pollers: Default::default(),
        };
        if t.props.mr_local {
            t.staging = Some(staging::Staging::new(&t)?);
        }
        t.msgs = Some(msg::Messages::new(&t)?);
        msg::post_all(&t);
        // A flush of atomics is an atomic read of a 64-bit word, ordered
        // after the updates (FI_ORDER_ATOMIC_RAW); see docs/semantics.md.
        let read_word = atomic::query(&t, AtomicOp::Read, Datatype::U64, AtomicKind::Fetch);
        t.props.ordered_atomic_raw =
            msg_order & fi::FI_ORDER_ATOMIC_RAW != 0 && read_word.is_some();
        // What the seam offers: updates are posted as fetches where atomic
        // reads are not ordered after updates (`atomic.rs`), so an update is
        // offered only with the matching fetch.
        let atomics = AtomicTable::from_fn(|op, dt, kind| atomic::valid(&t, op, dt, kind));
        t.caps = caps::caps(caps::ProviderFacts {
            provider: &t.props.provider,
            fabric: &fabric_name,
            domain: &domain_name,
            inject_size: t.props.inject_size,
            max_msg_size: t.props.max_msg_size,
            rma_iov_limit: t.props.rma_iov_limit,
            ordered_raw: t.props.ordered_raw,
            ordered_atomic_raw: t.props.ordered_atomic_raw,
            atomic_order: vocab::atomic_order(msg_order),
            mr: MrCaps {
                local: t.props.mr_local,
                virt_addr: t.props.virt_addr,
                chosen_keys: !t.props.prov_key && !t.props.virt_addr,
            },
            atomics,
        });
        Ok(t)
    }

    fn peer(&self, rank: usize) -> Result<fi::fi_addr_t> {
        self.peers
            .lock()
            .map_err(|_| Error::InvalidArgument("peer table lock poisoned".into()))?
            .get(&rank)
            .copied()
            .ok_or_else(|| {
                Error::InvalidArgument(format!("rank {rank} has not been added as a peer"))
            })
    }

    fn ensure_alive(&self) -> Result<()> {
        if self.poisoned.load(Ordering::Acquire) {
            let why = self
                .poison_reason
                .lock()
                .ok()
                .and_then(|r| r.clone())
                .unwrap_or_default();
            return Err(Error::backend(
                "ofi",
                "endpoint",
                "using a transport that failed earlier",
                0,
                why,
            ));
        }
        Ok(())
    }

    /// Stops all further use of the provider: after an operation into a
    /// caller's buffer timed out we may not return while the provider could
    /// still write there, unless it never runs again.
    fn poison(&self, reason: String) {
        if let Ok(mut r) = self.poison_reason.lock() {
            r.get_or_insert(reason);
        }
        self.poisoned.store(true, Ordering::Release);
    }
}

impl Transport for OfiTransport {
    fn stats(&self) -> TransportStats {
        let m = self.msgs.as_ref();
        let get =
            |f: fn(&msg::Messages) -> &AtomicU64| m.map_or(0, |m| f(m).load(Ordering::Relaxed));
        let mut stats = TransportStats {
            ops_in_flight: self
                .ops
                .in_flight()
                .saturating_sub(m.map_or(0, |m| m.held())),
            rejected_completions: self.ops.rejected(),
            stale_completions: 0,
            sends: get(|m| &m.sends),
            send_bytes: get(|m| &m.send_bytes),
            messages_received: get(|m| &m.received),
            messages_dropped: get(|m| &m.dropped),
            op_slots: self.ops.capacity(),
            op_slots_exhausted: self.ops.exhausted(),
            agent_stand_downs: self.pollers.stand_downs(),
            ..TransportStats::default()
        };
        self.counters.fill(&mut stats);
        stats
    }

    fn caps(&self) -> &Caps {
        &self.caps
    }

    fn card(&self) -> &[u8] {
        &self.address
    }

    fn connect(&self, rank: usize, address: &[u8]) -> Result<()> {
        conn::insert(self, rank, address)
    }

    fn is_connected(&self, rank: usize) -> bool {
        self.peers
            .lock()
            .map(|p| p.contains_key(&rank))
            .unwrap_or(false)
    }

    fn peer_count(&self) -> usize {
        self.peers.lock().map(|p| p.len()).unwrap_or(0)
    }

    fn register(&self, mem: &Memory<'_>) -> Result<Registration> {
        self.ensure_alive()?;
        let mr = mr::LocalMr::register(
            self,
            mem.as_ptr(),
            mem.len().max(1),
            fi::FI_REMOTE_READ | fi::FI_REMOTE_WRITE | fi::FI_READ | fi::FI_WRITE,
        )?;
        let base = if self.props.virt_addr { mem.addr() } else { 0 };
        Ok(Registration::new(mr.key(), base, Box::new(mr)))
    }

    fn register_keyed(&self, mem: &Memory<'_>, key: u64) -> Result<Registration> {
        self.ensure_alive()?;
        let mr = mr::LocalMr::register_keyed(
            self,
            mem.as_ptr(),
            mem.len().max(1),
            fi::FI_REMOTE_READ | fi::FI_REMOTE_WRITE | fi::FI_READ | fi::FI_WRITE,
            key,
        )?;
        let base = if self.props.virt_addr { mem.addr() } else { 0 };
        Ok(Registration::new(mr.key(), base, Box::new(mr)))
    }

    fn put(&self, target: usize, data: &[u8], dst: RemoteAddr) -> Result<()> {
        rma::put_blocking(self, target, data, dst)
    }

    fn get(&self, target: usize, buf: &mut [u8], src: RemoteAddr) -> Result<()> {
        rma::get_blocking(self, target, buf, src)
    }

    fn put_scatter(&self, target: usize, data: &[u8], dst: &[(RemoteAddr, usize)]) -> Result<()> {
        rma::put_scatter(self, target, data, dst)
    }

    fn get_gather(&self, target: usize, buf: &mut [u8], src: &[(RemoteAddr, usize)]) -> Result<()> {
        rma::get_gather(self, target, buf, src)
    }

    fn put_async(&self, target: usize, src: &InFlight, dst: RemoteAddr) -> Result<()> {
        rma::put_async(self, target, src, dst)
    }

    fn get_async(&self, target: usize, dst: &InFlight, src: RemoteAddr) -> Result<()> {
        rma::get_async(self, target, dst, src)
    }

    fn put_signal(&self, target: usize, value: u64, dst: RemoteAddr) -> Result<()> {
        rma::put_signal(self, target, value, dst)
    }

    fn put_flag(&self, target: usize, value: u64, dst: RemoteAddr) -> Result<()> {
        rma::put_flag(self, target, value, dst)
    }

    fn atomic(&self, target: usize, what: Atomic, data: &[u8], dst: RemoteAddr) -> Result<()> {
        atomic::update(self, target, what, data, dst)
    }

    fn fetch_atomic(
        &self,
        target: usize,
        what: Atomic,
        data: &[u8],
        result: &mut [u8],
        dst: RemoteAddr,
    ) -> Result<()> {
        atomic::fetch(self, target, what, data, result, dst)
    }

    fn compare_atomic(
        &self,
        target: usize,
        datatype: Datatype,
        compare: &[u8],
        swap: &[u8],
        result: &mut [u8],
        dst: RemoteAddr,
    ) -> Result<()> {
        atomic::compare(self, target, datatype, (compare, swap), result, dst)
    }

    fn atomic_async(
        &self,
        target: usize,
        what: Atomic,
        src: &InFlight,
        dst: RemoteAddr,
    ) -> Result<()> {
        atomic::update_async(self, target, what, src, dst)
    }

    fn fetch_atomic_async(
        &self,
        target: usize,
        what: Atomic,
        data: Vec<u8>,
        result: &InFlight,
        dst: RemoteAddr,
    ) -> Result<()> {
        atomic::fetch_async(self, target, what, data, result, dst)
    }

    fn send(&self, target: usize, bytes: &[u8]) -> Result<()> {
        msg::send(self, target, bytes)
    }

    fn send_posted(
        &self,
        target: usize,
        bytes: &[u8],
        failed: crate::transport::SendFailed,
    ) -> Result<()> {
        msg::send_posted(self, target, bytes, failed)
    }

    fn set_receiver(&self, receiver: Arc<dyn Receiver>) {
        if let Some(m) = &self.msgs {
            m.set_receiver(receiver);
        }
    }

    fn progress(&self) -> Result<usize> {
        self.ensure_alive()?;
        cq::drain(self)
    }

    fn wait(&self, done: &Completion, what: &dyn Fn() -> String) -> Result<()> {
        waiting::wait(self, done, what)
    }

    fn pollers(&self) -> Option<&crate::progress::wait::Pollers> {
        Some(&self.pollers)
    }

    fn event_fds(&self) -> Vec<std::os::fd::BorrowedFd<'_>> {
        self.wait_fd
            .iter()
            // SAFETY: the fd belongs to the CQ's wait object, which lives
            // as long as the CQ, i.e. as long as `self` that the borrow is
            // tied to.
            .map(|&fd| unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) })
            .collect()
    }

    fn arm(&self) -> Result<bool> {
        self.ensure_alive()?;
        Ok(cq::arm(self))
    }
}
