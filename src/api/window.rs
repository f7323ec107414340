//! Windows: memory exposed for one-sided access. This file holds creation,
//! the window state and the descriptor of a target (`target`); the checks
//! every operation shares are in `access`, the operations in the
//! submodules (`rma`, `accumulate`, `sync`, `lock`,
//! `pscw`, `local`, `dynamic`, `shared`, `direct`, `software`).

use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex};

mod access;
mod accumulate;
mod aggregate;
mod agreement;
mod create;
mod deferred;
mod direct;
mod dynamic;
mod info;
mod issuing;
mod local;
mod lock;
mod pscw;
mod rma;
mod shared;
mod signal;
mod layout;
mod scope;
mod soft_lock;
mod software;
mod sync;

pub use info::{WindowInfo, INFO_KEYS};
pub use scope::{Scope, ScopedRequest};
pub use shared::SharedSegment;
pub use signal::{Cmp, SignalOp};

use super::element::{tag_name, Element};
use super::group::{Comm, GroupState, Team};
use super::world::World;
use crate::epoch::{Permit, SyncState};
use crate::error::{Error, Result};
use crate::meta::directory::{self, Descriptor, ENTRY_BYTES};
use crate::meta::dirty::Dirty;
use crate::meta::targets::{Hold, Target, Targets};
use crate::meta::valid_ops::ValidOps;
use crate::transport::exposed::ExposedEntry;
use crate::transport::{
    AtomicOrder, Memory, PerTarget, Registration, RemoteAddr, RemoteCompletion,
};

/// Counters of one window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct WindowStats {
    /// Peers whose descriptor of this window is cached (per-peer state held).
    pub cached_peers: usize,
    /// Targets with writes not yet flushed.
    pub dirty_targets: usize,
    /// Dynamic windows: attachment tables read from peers (cache misses).
    pub attach_table_reads: u64,
    /// Dynamic windows: peers whose attachment table is cached.
    pub cached_attach_tables: usize,
    /// Every rank passed the same size, type and flags and the provider lets
    /// us choose keys: peers are reached with no descriptor read
    /// (`meta::uniform`).
    pub uniform: bool,
    /// A lock queue (the software lock protocol) is open for this window:
    /// `false` on a window created with the `no_locks` hint, or where
    /// locks take the back-end's lock word.
    pub lock_queue: bool,
}

/// How a window's public and private copies relate (MPI's memory models).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum MemoryModel {
    /// One copy: RMA operations and local accesses see the same memory
    /// (MPI_WIN_UNIFIED); `sync` orders them.
    Unified,
}

/// How a window was created (MPI_WIN_CREATE_FLAVOR).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Flavor {
    /// Over memory the program gave: [`Window::create`],
    /// [`Window::create_borrowed`] (MPI_WIN_FLAVOR_CREATE).
    Create,
    /// Over memory the library allocated: [`Window::allocate`]
    /// (MPI_WIN_FLAVOR_ALLOCATE).
    Allocate,
    /// Node-shared memory: [`Window::allocate_shared`]
    /// (MPI_WIN_FLAVOR_SHARED).
    Shared,
    /// Attached regions: [`Window::create_dynamic`]
    /// (MPI_WIN_FLAVOR_DYNAMIC).
    Dynamic,
}

/// The back-end capabilities on the operation path (see `Caps`).
#[derive(Clone, Copy)]
struct Props {
    ordered_raw: bool,
    ordered_atomic_raw: bool,
    atomic_order: AtomicOrder,
}

/// A window of `T` elements, created collectively by every process.
///
/// A window is `Send` and `Sync`: several threads may issue operations on
/// it at once (MPI_THREAD_MULTIPLE); synchronization calls that open or
/// close epochs (`fence`, `start`/`complete`, `post`/`wait`,
/// `lock_all`/`unlock_all`) are the program's to order, as in MPI. A window
/// borrows its [`World`] and cannot outlive it. The per-operation path takes no lock in the
/// common case (see `docs/performance.md`, "Per-operation cost"): the epoch
/// check reads `permit` (`epoch::permit`), the target's descriptor and
/// mapping come from the window's own write-once slots (`meta::targets`),
/// the flush bookkeeping is atomic bits (`meta::dirty`). Everything else
/// takes the mutex path, which stays the reference.
pub struct Window<'a, T: Element> {
    world: &'a World,
    // `world.rank()`, `world.size()` and the transport properties the
    // operations consult, copied once (they never change; each is a
    // dynamic call on the world).
    me: usize,
    size: usize,
    // The group the window is over (`None`: the world); ranks given to the
    // window are its ranks, translated to world ranks by `check_rank`.
    group: Option<Arc<GroupState>>,
    props: Props,
    id: u64,
    slot: usize,
    len: usize,
    desc: Descriptor,
    // Same geometry everywhere: peers' descriptors are computed, not read.
    uniform: bool,
    // Every rank passed the same length (collectives rely on it).
    same_len: bool,
    epoch: Mutex<SyncState>,
    // `epoch`'s `permit()`, stored by `EpochGuard` before each unlock.
    permit: AtomicU64,
    // Whether a lock may be taken on the permit's lane (`epoch::permit`):
    // the lock words are node-local CPU atomics (hardware lock path).
    lane: bool,
    // The lane is open: `lane`, and this window has taken a lock (set
    // under the state mutex, never cleared). Until then an idle state's
    // permit is stored as `NONE`, and taking the state mutex has no lane
    // to close: a window used only for fence or PSCW epochs never pays
    // for it.
    lane_open: AtomicBool,
    // Set by operations under a marking permit (a fence epoch's first):
    // folded into `epoch` whenever it is locked (`epoch::permit`).
    fence_ops: AtomicBool,
    // Operations posting under a guarded permit (`lock_all`'s targets,
    // which a retreat releases only once none is: `issuing.rs`).
    issuing: issuing::Registrations,
    // Serializes `lock_all`'s acquisitions and retreats of this process.
    lock_all_gate: Mutex<()>,
    // Descriptors (and mappings) of up to `targets::SLOTS` targets.
    targets: Targets,
    // Request-based operations in flight, per target.
    outstanding: PerTarget,
    dirty: Dirty,
    // Targets with atomic updates not yet flushed (may include ourselves:
    // accumulates to oneself go through the provider too).
    atomic_dirty: Dirty,
    // The provider's answers to `atomic_valid` for `T`.
    valid_ops: ValidOps,
    // Which accumulate operations take the software path, and the hints.
    paths: info::Paths,
    info: WindowInfo,
    // Small puts and accumulates queued per target (`protocols/aggregation/origin.rs`).
    agg: Option<crate::protocols::aggregation::Aggregation>,
    // Strided puts to node-local peers written at the epoch's end
    // (`deferred.rs`).
    deferred: deferred::Deferred,
    freed: bool,
    flavor: Flavor,
    // Attached regions (dynamic windows): deregistered with the window.
    dynamic: Option<dynamic::Dynamic>,
    // The software lock path (None: lock words), open in the lock table.
    // Withdraw from message handlers and deregister before the memory goes
    // away (fields drop in declaration order; `release` does it explicitly).
    soft_lock: Option<soft_lock::SoftLock<T>>,
    exposure: Option<ExposedEntry>,
    reg: Option<Registration>,
    // Shared with `reg` and the exposed-memory table (`transport::exposed`):
    // freed when the last of them lets go, never while one may write it.
    mem: Arc<Memory<'static>>,
    _t: PhantomData<T>,
}

impl<'a, T: Element> Window<'a, T> {
    /// Allocates a window of `len` zeroed elements (collective).
    ///
    /// `comm` is `&world`, or `&group` for a window over a [`Group`]'s
    /// members (then ranks given to the window are group ranks).
    ///
    /// [`Group`]: crate::Group
    pub fn allocate(comm: impl Comm<'a>, len: usize) -> Result<Self> {
        Self::allocate_with(comm, len, &WindowInfo::default())
    }

    /// [`Window::allocate`] with creation hints (collective; every rank
    /// should pass the same hints).
    pub fn allocate_with(comm: impl Comm<'a>, len: usize, info: &WindowInfo) -> Result<Self> {
        let team = comm.team();
        let mem = len
            .checked_mul(std::mem::size_of::<T>())
            .ok_or_else(|| Error::InvalidArgument(format!("window of {len} {} overflows", T::NAME)))
            .and_then(|bytes| direct::window_memory(team, bytes, false));
        let mut win = Self::build_from(team, mem, len, 0, info)?;
        win.flavor = Flavor::Allocate;
        Ok(win)
    }

    /// Exposes `mem` as this process's part of a new window (collective).
    ///
    /// The window owns the memory while peers may access it: pass a
    /// `Vec<T>` or `Box<[T]>` (given back by [`Window::into_vec`]), or a
    /// `&'static mut [T]` (e.g. from `Box::leak`). Because the window owns
    /// it, leaking the window (`std::mem::forget`) leaks the memory instead
    /// of handing peers memory the program has freed. To expose memory the
    /// program only borrows, see the `unsafe` [`Window::create_borrowed`].
    ///
    /// # Errors
    /// As [`Window::allocate`]; every rank returns an error if creation
    /// failed on any rank.
    pub fn create(comm: impl Comm<'a>, mem: impl WindowMemory<T>) -> Result<Self> {
        Self::create_with(comm, mem, &WindowInfo::default())
    }

    /// [`Window::create`] with creation hints (collective).
    pub fn create_with(
        comm: impl Comm<'a>,
        mem: impl WindowMemory<T>,
        info: &WindowInfo,
    ) -> Result<Self> {
        let mem = sealed::Sealed::into_memory(mem);
        let len = mem.len() / std::mem::size_of::<T>().max(1);
        Self::build(comm.team(), mem, len, 0, info)
    }

    /// Exposes borrowed memory as a window (collective).
    ///
    /// # Safety
    /// The window must be freed or dropped before `mem`'s borrow ends; it
    /// must not be leaked (`std::mem::forget`, a reference cycle, ...):
    /// peers, and the progress agent on their behalf, write the memory
    /// until the window is freed or dropped, so a leaked window lets them
    /// write memory the program has reused. Prefer [`Window::create`].
    ///
    /// # Errors
    /// As [`Window::create`].
    #[allow(unsafe_code)] // the contract, and the one call that relies on it
    pub unsafe fn create_borrowed(
        comm: impl Comm<'a>,
        mem: &'a mut [T],
        info: &WindowInfo,
    ) -> Result<Self> {
        let len = mem.len();
        // SAFETY: the caller frees or drops the window before the borrow
        // ends and never leaks it (this function's contract); the window's
        // release drops the registration and the exposed-memory entry (the
        // only other holders of the memory) before the window lets go of it.
        let mem = unsafe { Memory::borrow_unbounded(mem) };
        Self::build(comm.team(), mem, len, 0, info)
    }

    /// Frees the window (collective, as [`Window::free`]) and gives back
    /// its memory: the `Vec` or `Box` given to [`Window::create`], or a copy
    /// of the local elements for other windows.
    ///
    /// # Errors
    /// As [`Window::free`]. When freeing fails the memory is not given
    /// back: the window is dropped, which deregisters it and withdraws it
    /// from message handlers locally before the memory is released (so
    /// nothing writes it afterwards, whatever the other ranks do).
    pub fn into_vec(mut self) -> Result<Vec<T>> {
        // Dynamic windows hold no memory of their own here: as before,
        // whatever `local_to_vec` says.
        let dynamic_copy = if self.is_dynamic() {
            Some(self.local_to_vec()?)
        } else {
            None
        };
        // Copied only after `free`: its barrier is where every peer's
        // operations on this memory have completed (a copy taken before it
        // would miss what peers wrote until their own `free`).
        self.free()?;
        if let Some(v) = dynamic_copy {
            return Ok(v);
        }
        if !self.mem.owns_vec::<T>() {
            let mut v = vec![T::zeroed(); self.len];
            self.mem.read(0, bytemuck::cast_slice_mut(&mut v))?;
            return Ok(v);
        }
        let mem = std::mem::replace(&mut self.mem, Arc::new(Memory::from_vec::<u8>(Vec::new())));
        // `free` dropped the registration and the exposed entry: the window
        // holds the memory alone (else it stays with its other holder).
        let mem = Arc::try_unwrap(mem).map_err(|_| {
            Error::InvalidArgument(format!("window {}: memory still exposed", self.id))
        })?;
        mem.into_vec::<T>().ok_or_else(|| {
            Error::InvalidArgument(format!("window {}: memory is not a Vec<{}>", self.id, T::NAME))
        })
    }

    /// Creates the window over `mem` (`len` local elements), with the
    /// window-kind bits `kind` in its descriptor flags (bits 16 and up) and
    /// the accumulate-path bits (0–7) decided here.
    fn build(
        team: Team<'a>,
        mem: Memory<'static>,
        len: usize,
        kind: u64,
        info: &WindowInfo,
    ) -> Result<Self> {
        let world = team.world;
        let id = team.next_window_id();
        let ctrl = world.control_memory();
        // Shared with the registration and the exposed-memory table, which
        // keep it alive for as long as they may write it.
        let mem = Arc::new(mem);
        // This rank's part; a failure still takes part in the creation's
        // allreduce (so every rank returns an error instead of hanging).
        let local = Self::prepare_local(team, &mem, id, kind, info).and_then(|l| {
            directory::publish(ctrl, l.slot, &l.desc)?;
            Ok(l)
        });
        // Peers may post to this window as soon as they leave the allreduce.
        world.posts.open(id);
        let agreed = agreement::agree(
            team,
            id,
            local.as_ref().ok().map(|l| &l.desc),
            local.as_ref().is_ok_and(|l| l.keyed),
        );
        let published = local.as_ref().ok().map(|l| l.slot);
        let fail = |e: Error| {
            world.posts.close(id);
            if let Some(slot) = published {
                // Leave no descriptor behind for a window that does not exist.
                let _ = directory::retract(ctrl, slot);
            }
            Err(e)
        };
        let agreed = match agreed {
            Ok(a) if a.failed && published.is_some() => {
                return fail(Error::InvalidArgument(format!(
                    "window {id}: creation failed on another rank"
                )))
            }
            Ok(a) if info.sizes_equal() && !a.same_len && published.is_some() => {
                return fail(Error::InvalidArgument(format!(
                    "window {id}: created with the same_size hint, but the ranks passed \
                     different lengths (this rank {len})"
                )))
            }
            Ok(a) => a,
            Err(e) => return fail(e),
        };
        let create::Prepared {
            paths,
            slot,
            reg,
            desc,
            exposure,
            soft_lock,
            agg,
            ..
        } = match local {
            Ok(l) => l,
            Err(e) => return fail(e),
        };
        let p = world.transport().caps();
        let lane = soft_lock.is_none() && world.sync_words_by_cpu();
        Ok(Window {
            world,
            me: world.rank(),
            size: team.size(),
            group: team.group.cloned(),
            props: Props {
                ordered_raw: p.completion == RemoteCompletion::OrderedRead,
                ordered_atomic_raw: p.ordered_atomic_raw,
                atomic_order: p.atomic_order,
            },
            id,
            slot,
            len,
            desc,
            uniform: agreed.uniform,
            same_len: agreed.same_len,
            epoch: Mutex::new(SyncState::default()),
            permit: AtomicU64::new(Permit::NONE.0),
            lane,
            lane_open: AtomicBool::new(false),
            fence_ops: AtomicBool::new(false),
            issuing: issuing::Registrations::default(),
            lock_all_gate: Mutex::new(()),
            targets: Targets::default(),
            outstanding: PerTarget::default(),
            dirty: Dirty::default(),
            atomic_dirty: Dirty::default(),
            valid_ops: ValidOps::of(&p.atomics, T::DATATYPE),
            paths,
            info: *info,
            agg,
            deferred: deferred::Deferred::default(),
            freed: false,
            dynamic: None,
            flavor: Flavor::Create,
            soft_lock,
            exposure,
            reg: Some(reg),
            mem,
            _t: PhantomData,
        })
    }

    /// Collective window id (the same on every rank).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Number of elements in the local window.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True for an empty local window.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Counters of per-peer state.
    pub fn stats(&self) -> WindowStats {
        WindowStats {
            cached_peers: self
                .world
                .rkeys
                .lock()
                .map(|c| c.entries_for(self.id))
                .unwrap_or(0),
            dirty_targets: {
                let (low, high) = self.dirty_targets();
                low.count_ones() as usize + high.len()
            },
            attach_table_reads: self.dynamic.as_ref().map_or(0, |d| d.table_reads()),
            cached_attach_tables: self.dynamic.as_ref().map_or(0, |d| d.cached_tables()),
            uniform: self.uniform,
            lock_queue: self.soft_lock.is_some(),
        }
    }

    /// The hints in effect (MPI_Win_get_info): those given at creation,
    /// with `same_size` as the creation found it.
    pub fn info(&self) -> WindowInfo {
        self.info.in_effect(self.same_len)
    }

    /// This process's rank in the window: its rank in the group the window
    /// was created over, or its world rank for a window over the world
    /// (MPI_Comm_rank of the group from MPI_Win_get_group). The ranks every
    /// operation of the window takes are these.
    pub fn rank(&self) -> usize {
        self.window_rank(self.me)
    }

    /// The number of processes of the window (MPI_Group_size of
    /// MPI_Win_get_group): valid target ranks are `0..size()`. Not to be
    /// confused with [`Window::len`] (elements) or [`Window::size_bytes`].
    pub fn size(&self) -> usize {
        self.size
    }

    /// The world rank of the window's rank `rank` (MPI_Win_get_group with
    /// MPI_Group_translate_ranks), or `None` when `rank` is out of range.
    pub fn world_rank(&self, rank: usize) -> Option<usize> {
        (rank < self.size).then(|| match &self.group {
            Some(g) => g.world_rank(rank),
            None => rank,
        })
    }

    /// How the window was created (MPI_WIN_CREATE_FLAVOR).
    pub fn flavor(&self) -> Flavor {
        self.flavor
    }

    /// The address of this process's part of the window (MPI_WIN_BASE):
    /// the first element, or null for a dynamic window (MPI_BOTTOM: its
    /// memory is the attached regions). For comparing and for handing to
    /// code that needs an address; reading or writing through it while
    /// peers may access the window is undefined behaviour — use
    /// [`Window::local_read`] / [`Window::local_write`], or for a
    /// node-shared window [`Window::shared_query`]. A peer's base is an
    /// address in the peer's process, so MPI offers it only for shared
    /// windows: [`SharedSegment::as_ptr`].
    pub fn base(&self) -> *const T {
        if self.is_dynamic() {
            return std::ptr::null();
        }
        self.mem.as_ptr().cast::<T>()
    }

    /// The length in bytes of this process's part (MPI_WIN_SIZE); see
    /// [`Window::len_of`] for a peer's, in elements.
    pub fn size_bytes(&self) -> usize {
        self.len * std::mem::size_of::<T>()
    }

    /// The memory model (MPI_WIN_MODEL): always [`MemoryModel::Unified`].
    pub fn memory_model(&self) -> MemoryModel {
        MemoryModel::Unified
    }

    /// The displacement unit (MPI_WIN_DISP_UNIT): displacements count
    /// elements of `T`, so this is `size_of::<T>()` on every rank.
    pub fn disp_unit(&self) -> usize {
        std::mem::size_of::<T>()
    }

    /// The length in elements of `rank`'s part of the window (MPI_WIN_SIZE
    /// of a peer; [`Window::len`] for this rank). Reads the peer's
    /// descriptor on first use unless every rank passed the same length.
    /// Dynamic windows: 0 (their memory is the attached regions).
    ///
    /// # Errors
    /// A rank out of range, a freed window, or the peer unreachable.
    pub fn len_of(&self, rank: usize) -> Result<usize> {
        self.alive("len_of")?;
        let rank = self.check_rank(rank)?;
        if self.is_dynamic() {
            return Ok(0);
        }
        if rank == self.me || self.same_len {
            return Ok(self.len);
        }
        let d = self.target(rank)?;
        Ok(d.len as usize / std::mem::size_of::<T>())
    }

    /// Benchmark support (`onesided-bench --raw`), not a stable API: the
    /// transport address and key of element `disp` of `rank`'s window
    /// (fetching the descriptor on first contact), for use with
    /// [`World::bench_transport`].
    #[doc(hidden)]
    #[cfg(feature = "unstable")]
    pub fn bench_remote(&self, rank: usize, disp: usize) -> Result<RemoteAddr> {
        self.alive("bench_remote")?;
        let rank = self.check_rank(rank)?;
        let d = self.target(rank)?;
        // The raw transport needs the peer even if the direct path does not.
        self.world.control(rank)?;
        Ok(Self::remote(&d, disp * std::mem::size_of::<T>()))
    }

    // ---- validation shared by the operations (local.rs, rma.rs, ...) ------

    /// Every rank passed the same length at creation.
    pub(crate) fn same_len(&self) -> bool {
        self.same_len
    }

    /// Refuses passive-target synchronization on a `no_locks` window.
    fn check_locks_allowed(&self, op: &'static str) -> Result<()> {
        if self.info.locks_disabled() {
            return Err(Error::Epoch {
                window: self.id,
                op,
                state: "on a window created with the no_locks hint".into(),
            });
        }
        Ok(())
    }

    fn alive(&self, op: &'static str) -> Result<()> {
        if self.freed {
            return Err(Error::Epoch {
                window: self.id,
                op,
                state: "after the window was freed".into(),
            });
        }
        Ok(())
    }

    /// Checks a rank given to the window and returns its world rank (the
    /// rank every internal call and the transport take).
    fn check_rank(&self, rank: usize) -> Result<usize> {
        if rank >= self.size {
            return Err(Error::InvalidRank {
                window: self.id,
                rank,
                size: self.size,
            });
        }
        Ok(match &self.group {
            Some(g) => g.world_rank(rank),
            None => rank,
        })
    }

    /// The window's rank of world rank `w` (a member), for calls that
    /// re-enter the public operations with a rank already translated.
    fn window_rank(&self, w: usize) -> usize {
        match &self.group {
            Some(g) => g.group_rank(w).unwrap_or(usize::MAX),
            None => w,
        }
    }

    /// The processes of the window, for its collective calls.
    pub(super) fn team(&self) -> Team<'_> {
        Team {
            world: self.world,
            group: self.group.as_ref(),
        }
    }

    /// The descriptor of `rank`'s window: our own, cached, or read remotely.
    fn target(&self, rank: usize) -> Result<Descriptor> {
        if rank == self.me {
            return Ok(self.desc);
        }
        if let Some(t) = self.targets.get(rank) {
            return Ok(t.desc);
        }
        // Uniform window: the peer's descriptor is ours (same key, offset
        // addressing, same length) unless node-shared memory is reached by
        // the peer's own mapping (bits 8–15, the direct path).
        if self.uniform && (self.desc.flags & 0xff00 == 0 || !self.world.node.is_local(rank)) {
            self.world.control(rank)?;
            // No control region mapped for the slot here: this path maps
            // nothing (lock words then take the world's path).
            let _ = self.targets.offer(rank, self.desc, None, None);
            return Ok(self.desc);
        }
        if let Some(d) = self
            .world
            .rkeys
            .lock()
            .ok()
            .and_then(|mut c| c.get(self.id, rank))
        {
            return Ok(d);
        }
        let mut bytes = [0u8; ENTRY_BYTES];
        let entry = directory::entry_offset(self.slot);
        // A node-local peer's directory is read from its mapped control
        // region (`api::node`), else with one provider read.
        let read_locally = self
            .world
            .with_local_ctrl(rank, |m| m.read(entry, &mut bytes))?;
        if read_locally.is_none() {
            let ctrl = self.world.control(rank)?;
            let at = RemoteAddr {
                addr: ctrl.addr + entry as u64,
                key: ctrl.key,
            };
            self.world.transport().get(rank, &mut bytes, at)?;
        }
        let d = Descriptor::decode(&bytes, rank, self.id)?;
        if read_locally.is_some() && !direct::all_by_cpu(d.flags) {
            // Some operations to this peer will use the provider.
            self.world.control(rank)?;
        }
        if d.tag != T::TAG {
            return Err(Error::InvalidArgument(format!(
                "window {}: rank {rank} created it with element type {}, this rank with {}",
                self.id,
                tag_name(d.tag),
                T::NAME
            )));
        }
        if d.flags != self.desc.flags {
            return Err(Error::Protocol {
                peer: format!("rank {rank}"),
                message: format!(
                    "window {}: it decided the per-window flags {:#x}, this rank {:#x} \
                     (ranks must agree on the accumulate path and window kind)",
                    self.id, d.flags, self.desc.flags
                ),
            });
        }
        if let Ok(mut c) = self.world.rkeys.lock() {
            c.insert(rank, d);
        }
        // Into the window's own slot, with the mapping if the direct path
        // reaches it (mapped on first contact instead of first operation),
        // pinned there if the world's mapping cache grants it.
        let map = self.mapping(rank, &d)?.map(|m| m.to_arc());
        let ctrl = self.ctrl_for_slot(rank)?;
        let vacant = self.targets.vacant(rank);
        let hold = |key: (u64, usize), m: Arc<Memory<'static>>| {
            if vacant && self.world.mappings.pin(key, &m) {
                Hold::Pinned(m)
            } else {
                Hold::Weak(Arc::downgrade(&m))
            }
        };
        let map = map.map(|m| hold((d.id, rank), m));
        let ctrl = ctrl.map(|m| hold(crate::api::node::ctrl_key(rank), m));
        if let Err(lost) = self.targets.offer(rank, d, map, ctrl) {
            // Filled by another thread meanwhile: give our pins back.
            self.unpin_target(&lost);
        }
        Ok(d)
    }

    /// Gives back the mapping cache's pins of a slot's target.
    fn unpin_target(&self, t: &Target) {
        if t.map.as_ref().is_some_and(Hold::is_pinned) {
            self.world.mappings.unpin((self.id, t.rank));
        }
        if t.ctrl.as_ref().is_some_and(Hold::is_pinned) {
            self.world.mappings.unpin(crate::api::node::ctrl_key(t.rank));
        }
    }

    /// `rank`'s control region for its slot, when lock words are driven by
    /// CPU atomics (`lock.rs` then skips the world's mapping cache).
    fn ctrl_for_slot(&self, rank: usize) -> Result<Option<Arc<Memory<'static>>>> {
        if !self.world.sync_words_by_cpu() {
            return Ok(None);
        }
        self.world.peer_ctrl(rank)
    }
}

/// The window's identity (id, element type, local length, flavor, rank
/// and size), so a `Result<Window<_>>` can be `unwrap_err`'d and printed.
impl<T: Element> std::fmt::Debug for Window<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Window")
            .field("id", &self.id)
            .field("element", &T::NAME)
            .field("len", &self.len)
            .field("flavor", &self.flavor)
            .field("rank", &self.me)
            .field("size", &self.size)
            .field("freed", &self.freed)
            .finish()
    }
}

impl<T: Element> Drop for Window<'_, T> {
    fn drop(&mut self) {
        if !self.freed {
            if !std::thread::panicking() {
                tracing::warn!(
                    "window {} dropped without free(): released locally, peers may see access errors",
                    self.id
                );
            }
            let _ = self.complete_local(None);
            self.release();
        }
    }
}

/// Memory a window can own: `Vec<T>`, `Box<[T]>`, or `&'static mut [T]`.
/// Sealed: the window must own (or never see freed) what peers write, so
/// no other type can implement it, and the conversion into the library's
/// memory is not callable outside the crate.
pub trait WindowMemory<T: Element>: sealed::Sealed<T> {}

impl<T: Element> WindowMemory<T> for Vec<T> {}
impl<T: Element> WindowMemory<T> for Box<[T]> {}
impl<T: Element> WindowMemory<T> for &'static mut [T] {}

mod sealed {
    use super::{Element, Memory};

    /// Not nameable outside the crate: neither implementable nor callable.
    pub trait Sealed<T> {
        fn into_memory(self) -> Memory<'static>;
    }

    impl<T: Element> Sealed<T> for Vec<T> {
        fn into_memory(self) -> Memory<'static> {
            Memory::from_vec(self)
        }
    }

    impl<T: Element> Sealed<T> for Box<[T]> {
        fn into_memory(self) -> Memory<'static> {
            Memory::from_vec(self.into_vec())
        }
    }

    impl<T: Element> Sealed<T> for &'static mut [T] {
        fn into_memory(self) -> Memory<'static> {
            Memory::borrow(self)
        }
    }
}
