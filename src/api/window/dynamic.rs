//! Dynamic windows (`MPI_Win_create_dynamic`): a window created with no
//! memory, to which each process attaches and detaches regions at any time.
//!
//! * [`Window::attach`] takes ownership of a `Vec<T>`, registers it, and
//!   returns the displacement peers use to address its first element (its
//!   address divided by the element size, so displacements stay in elements
//!   as for every other window). [`Window::detach`] gives the `Vec` back.
//! * Attach and detach send nothing. The owner lists its regions in an
//!   *attachment table* in registered memory (`meta::attach`), published
//!   through the window descriptor. A peer resolves a displacement against
//!   its cached copy of the target's table; on a miss it reads the whole
//!   table again (one RMA read) and, if the address is still not attached,
//!   returns `Error::OutOfWindow` (kind `OutOfWindow`) naming rank and address. Copies are kept for at most
//!   `ONESIDED_RKEY_CACHE` targets (LRU): no state for untouched peers.
//! * Every operation, also to oneself, goes through the transport: attached
//!   memory is not in a node-shared segment. Where a remote access error
//!   breaks the connection (`Caps::remote_errors_break_connection`: every
//!   libfabric provider), each attached region is exposed to message
//!   handlers and every operation — put and get included, as REPLACE and
//!   NO_OP — takes the software accumulate path: the target finds the
//!   region by address and refuses an address no region holds, so a stale
//!   access is one refused message and the pair of ranks keeps working.
//!   Elsewhere (native verbs, in-process) put and get are RDMA on the
//!   region's key; a bad key breaks the queue pair, which is re-created on
//!   the next contact.
//!
//! * Cached tables are forgotten whenever an access epoch begins (`fence`,
//!   `lock`, `lock_all`, `start`): a peer's attach or detach made before
//!   the epoch (MPI requires the program to synchronize it) is then seen,
//!   also when a region is attached again at the same address.
//!
//! Using memory after its owner detached it, inside the same epoch, is
//! erroneous in MPI; here the target refuses the message (or the NIC the
//! stale key) and the operation, or the next flush, returns an error
//! naming the target; later operations between the two ranks work
//! (`tests/dynamic.rs` `dynamic_access_after_detach_keeps_the_pair`).

use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use lru::LruCache;

use super::{Window, WindowInfo};
use crate::api::element::Element;
use crate::api::group::Comm;
use crate::error::{Error, Result};
use crate::meta::attach::{self, Decoded, Region, ENTRY};
use crate::meta::directory::{Descriptor, FLAG_DYNAMIC};
use crate::transport::exposed::RegionEntry;
use crate::transport::{Memory, Registration, RemoteAddr};

/// Largest attachment table accepted from a peer (bytes).
const MAX_TABLE: u64 = 1 << 20;
/// Re-reads of a peer's table that found an entry being rewritten.
const TORN_RETRIES: usize = 1000;

/// One region this process attached. Dropped in field order: withdrawn
/// from message handlers, then deregistered, then the memory is freed.
struct Attached {
    region: Region,
    // Exposed to software-path messages (`Window::dynamic_messages`).
    exposed: Option<RegionEntry>,
    // Deregistered before the memory is given back or freed.
    reg: Registration,
    mem: Arc<Memory<'static>>,
}

/// The dynamic part of a window.
pub(super) struct Dynamic {
    /// Our regions, indexed by attachment-table entry.
    own: Mutex<Vec<Option<Attached>>>,
    /// Copies of peers' tables (bounded).
    peers: Mutex<LruCache<usize, Vec<Region>>>,
    /// Attachment tables read from peers.
    table_reads: AtomicU64,
}

impl Dynamic {
    fn new(entries: usize, cache: usize) -> Dynamic {
        let cap = NonZeroUsize::new(cache.max(1)).unwrap_or(NonZeroUsize::MIN);
        Dynamic {
            own: Mutex::new((0..entries).map(|_| None).collect()),
            peers: Mutex::new(LruCache::new(cap)),
            table_reads: AtomicU64::new(0),
        }
    }

    /// Attachment tables read from peers so far.
    pub(super) fn table_reads(&self) -> u64 {
        self.table_reads.load(Ordering::Relaxed)
    }

    /// Forgets every cached peer table: called when an access epoch
    /// begins, so a region a peer detached and attached again (possibly at
    /// the same address, under a new key) before this epoch is looked up
    /// afresh instead of through a stale entry whose key the peer's NIC
    /// would reject (on tcp, by tearing the connection down).
    pub(super) fn forget_peer_tables(&self) {
        if let Ok(mut p) = self.peers.lock() {
            p.clear();
        }
    }

    /// Peers whose table is cached.
    pub(super) fn cached_tables(&self) -> usize {
        self.peers.lock().map(|p| p.len()).unwrap_or(0)
    }
}

fn poisoned(id: u64) -> Error {
    Error::InvalidArgument(format!("window {id}: attachment lock poisoned"))
}

impl<'a, T: Element> Window<'a, T> {
    /// Creates a dynamic window (collective): no memory until processes
    /// [`attach`](Window::attach) some. Each process can have at most
    /// `ONESIDED_MAX_ATTACH` regions attached at once.
    pub fn create_dynamic(comm: impl Comm<'a>) -> Result<Self> {
        let team = comm.team();
        let world = team.world;
        let entries = world.config.max_attach;
        let table = Memory::allocate(entries * ENTRY)?;
        let mut win = Self::build(team, table, 0, FLAG_DYNAMIC, &WindowInfo::default())?;
        win.dynamic = Some(Dynamic::new(entries, world.config.rkey_cache));
        win.flavor = super::Flavor::Dynamic;
        Ok(win)
    }

    /// Whether this is a dynamic window.
    pub fn is_dynamic(&self) -> bool {
        self.dynamic.is_some()
    }

    /// Whether this dynamic window carries every operation as a message
    /// the target checks against its attached regions (decided at
    /// creation from `Caps::remote_errors_break_connection`, the same on
    /// every rank): put and get are then atomic REPLACE and NO_OP
    /// accumulates on the software path, and a stale or wrong address is
    /// one refused message instead of a connection the provider drops.
    pub(super) fn dynamic_messages(&self) -> bool {
        self.is_dynamic() && self.paths.software != 0
    }

    fn dyn_part(&self, call: &str) -> Result<&Dynamic> {
        self.dynamic.as_ref().ok_or_else(|| {
            Error::InvalidArgument(format!(
                "window {}: {call} needs a dynamic window (Window::create_dynamic)",
                self.id
            ))
        })
    }

    /// Attaches `buf` to this dynamic window (local, sends nothing) and
    /// returns the displacement of its first element, for peers to use
    /// with this process's rank.
    pub fn attach(&self, buf: Vec<T>) -> Result<usize> {
        self.alive("attach")?;
        let dy = self.dyn_part("attach")?;
        if buf.is_empty() {
            return Err(Error::InvalidArgument(format!(
                "window {}: attach of an empty buffer",
                self.id
            )));
        }
        let mut own = dy.own.lock().map_err(|_| poisoned(self.id))?;
        let index = own.iter().position(Option::is_none).ok_or_else(|| {
            Error::Exhausted(format!(
                "window {}: {} regions are attached already (raise ONESIDED_MAX_ATTACH)",
                self.id,
                own.len()
            ))
        })?;
        let mem = Arc::new(Memory::from_vec(buf));
        let reg = self.world.transport().register(&mem)?;
        let region = Region {
            addr: mem.addr(),
            len: mem.len() as u64,
            key: reg.key,
        };
        // Handlers can reach it before peers can see it in the table.
        let exposed = self.dynamic_messages().then(|| {
            self.world
                .exposed
                .expose_region(self.id, &mem, T::DATATYPE, self.paths.software)
        });
        attach::publish(&self.mem, index, &region)?;
        own[index] = Some(Attached {
            region,
            exposed,
            reg,
            mem,
        });
        Ok(region.addr as usize / std::mem::size_of::<T>())
    }

    /// Detaches the region whose first element is at `disp` (as returned by
    /// [`attach`](Window::attach)) and gives its buffer back. Peers must have
    /// completed their accesses to it (MPI's rule).
    pub fn detach(&self, disp: usize) -> Result<Vec<T>> {
        self.alive("detach")?;
        let dy = self.dyn_part("detach")?;
        let addr = disp as u64 * std::mem::size_of::<T>() as u64;
        let mut own = dy.own.lock().map_err(|_| poisoned(self.id))?;
        let index = own
            .iter()
            .position(|a| a.as_ref().is_some_and(|a| a.region.addr == addr))
            .ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "window {}: detach of displacement {disp}: no region attached there",
                    self.id
                ))
            })?;
        attach::retract(&self.mem, index)?;
        let Some(Attached {
            exposed, reg, mem, ..
        }) = own[index].take()
        else {
            return Err(poisoned(self.id));
        };
        // Withdrawn from handlers (waits for one that is using it), then
        // deregistered: afterwards nothing but this window holds the memory.
        drop(exposed);
        drop(reg);
        let lost = || Error::InvalidArgument(format!("window {}: detached buffer lost", self.id));
        Arc::try_unwrap(mem)
            .map_err(|_| lost())?
            .into_vec::<T>()
            .ok_or_else(lost)
    }

    /// Local access to our own attached memory: the region holding `n`
    /// elements at `disp`, and the byte offset in it.
    pub(super) fn own_region<R>(
        &self,
        disp: usize,
        n: usize,
        f: impl FnOnce(&Memory<'static>, usize) -> Result<R>,
    ) -> Result<R> {
        let dy = self.dyn_part("local access")?;
        let (addr, bytes) = self.dyn_range(self.world.rank(), disp, n)?;
        let own = dy.own.lock().map_err(|_| poisoned(self.id))?;
        let a = own
            .iter()
            .flatten()
            .find(|a| a.region.contains(addr, bytes))
            .ok_or_else(|| self.not_attached(self.world.rank(), addr, bytes))?;
        f(&a.mem, (addr - a.region.addr) as usize)
    }

    /// An access epoch begins: cached peer attachment tables are stale.
    pub(super) fn new_access_epoch(&self) {
        if let Some(dy) = self.dynamic.as_ref() {
            dy.forget_peer_tables();
        }
    }

    fn dyn_range(&self, rank: usize, disp: usize, n: usize) -> Result<(u64, u64)> {
        let size = std::mem::size_of::<T>();
        match (disp.checked_mul(size), n.checked_mul(size)) {
            (Some(a), Some(b)) if (a as u64).checked_add(b as u64).is_some() => {
                Ok((a as u64, b as u64))
            }
            _ => Err(Error::OutOfWindow {
                window: self.id,
                rank,
                offset: disp,
                len: n,
                window_len: 0,
                unattached: None,
            }),
        }
    }

    fn not_attached(&self, rank: usize, addr: u64, bytes: u64) -> Error {
        let size = std::mem::size_of::<T>() as u64;
        Error::OutOfWindow {
            window: self.id,
            rank,
            offset: (addr / size) as usize,
            len: (bytes / size) as usize,
            window_len: 0,
            unattached: Some((addr, bytes)),
        }
    }

    /// Resolves `n` elements at `disp` of `rank`'s dynamic window to the
    /// remote address and key to use (the epoch was checked by the caller).
    pub(super) fn dynamic_remote(&self, rank: usize, disp: usize, n: usize) -> Result<RemoteAddr> {
        let dy = self.dyn_part("access")?;
        let (addr, bytes) = self.dyn_range(rank, disp, n)?;
        let region = if rank == self.world.rank() {
            // Loopback through our own endpoint: contacts ourselves once.
            self.world.control(rank)?;
            let own = dy.own.lock().map_err(|_| poisoned(self.id))?;
            own.iter()
                .flatten()
                .map(|a| a.region)
                .find(|r| r.contains(addr, bytes))
        } else {
            let cached = dy
                .peers
                .lock()
                .map_err(|_| poisoned(self.id))?
                .get(&rank)
                .and_then(|rs| attach::find(rs, addr, bytes));
            match cached {
                Some(r) => Some(r),
                None => {
                    let rs = self.read_table(dy, rank)?;
                    let found = attach::find(&rs, addr, bytes);
                    dy.peers
                        .lock()
                        .map_err(|_| poisoned(self.id))?
                        .put(rank, rs);
                    found
                }
            }
        };
        let r = region.ok_or_else(|| self.not_attached(rank, addr, bytes))?;
        let base = if self.world.transport().caps().mr.virt_addr {
            addr
        } else {
            addr - r.addr
        };
        Ok(RemoteAddr {
            addr: base,
            key: r.key,
        })
    }

    /// Reads `rank`'s attachment table, retrying while an entry is torn.
    fn read_table(&self, dy: &Dynamic, rank: usize) -> Result<Vec<Region>> {
        let d: Descriptor = self.target(rank)?;
        if d.len > MAX_TABLE || d.len % ENTRY as u64 != 0 {
            return Err(Error::Protocol {
                peer: format!("rank {rank}"),
                message: format!(
                    "window {}: attachment table of {} bytes (at most {MAX_TABLE})",
                    self.id, d.len
                ),
            });
        }
        let mut bytes = vec![0u8; d.len as usize];
        for _ in 0..TORN_RETRIES {
            dy.table_reads.fetch_add(1, Ordering::Relaxed);
            self.world
                .transport()
                .get(rank, &mut bytes, Self::remote(&d, 0))?;
            if let Decoded::Regions(rs) = attach::decode(&bytes, rank, self.id)? {
                return Ok(rs);
            }
            self.world.transport().progress()?;
        }
        Err(Error::Protocol {
            peer: format!("rank {rank}"),
            message: format!(
                "window {}: attachment table still being rewritten after {TORN_RETRIES} reads",
                self.id
            ),
        })
    }
}
