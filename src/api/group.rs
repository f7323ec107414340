//! Groups: windows and collectives over a subset of the processes (what
//! MPI's communicator argument selects).
//!
//! A [`Group`] is made collectively over its parent (the world or another
//! group) by [`World::split`] (MPI_Comm_split: by colour, ordered by key)
//! or [`World::subgroup`] (MPI_Comm_create: the listed ranks, in that
//! order). Windows are created over it by passing `&group` where a
//! `&World` goes ([`Comm`]); its collectives ([`Group::barrier`],
//! [`Group::broadcast`], [`Group::allgather`], [`Group::allreduce`]) and
//! its windows' fences run among its members only. Ranks passed to a
//! group's window are group ranks.
//!
//! # State
//! A group holds its members' world ranks (O(group size), nothing for the
//! processes outside it) and one of `ONESIDED_MAX_GROUPS` *group slots* of
//! its process: the slot selects an area of the control region
//! (`meta::directory::Layout`) with the group's barrier flags, its
//! window-creation reduction slots and `ONESIDED_GROUP_WINDOWS` directory
//! entries, so collectives of different groups never share a flag. The
//! creation's allreduce over the parent picks the lowest slot free on every
//! parent process, so it is free on every member.
//!
//! # Invariants
//! * Flags only grow within a slot: each process keeps, per slot, the last
//!   epoch any group used there; a new group starts past the largest of
//!   its parent's values, so a stale flag of an earlier group in that slot
//!   can never satisfy a wait of the new one.
//! * Window ids stay unique per process: a group window's id is
//!   `(slot + 1) << 40 | epoch` (the world's count from 1 below 2^40), the
//!   epoch growing per slot as above.
//! * A slot is released when the group is dropped; windows over a group
//!   borrow it, so that happens after they are freed.

use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::api::element::Element;
use crate::api::op::AnyOp;
use crate::api::world::World;
use crate::error::{Error, Result};
use crate::meta::directory::BARRIER_ROUNDS;
use crate::transport::RemoteAddr;

/// Bit position of the group slot in a group window's id.
const SLOT_SHIFT: u32 = 40;

/// The processes a collective call runs over: `&World` or `&Group`.
/// Window constructors take one ([`Window::allocate`] and the others).
/// Sealed: implemented by the library's types only.
///
/// [`Window::allocate`]: crate::Window::allocate
pub trait Comm<'a>: sealed::AsTeam<'a> {}

pub(crate) mod sealed {
    /// Not nameable outside the crate.
    pub trait AsTeam<'a>: Copy {
        fn team(self) -> super::Team<'a>;
    }
}

impl<'a> sealed::AsTeam<'a> for &'a World {
    fn team(self) -> Team<'a> {
        Team::of(self)
    }
}
impl<'a> Comm<'a> for &'a World {}

impl<'a, 'w: 'a> sealed::AsTeam<'a> for &'a Group<'w> {
    fn team(self) -> Team<'a> {
        Team {
            world: self.world,
            group: Some(&self.state),
        }
    }
}
impl<'a, 'w: 'a> Comm<'a> for &'a Group<'w> {}

impl<'a> sealed::AsTeam<'a> for Team<'a> {
    fn team(self) -> Team<'a> {
        self
    }
}
impl<'a> Comm<'a> for Team<'a> {}

/// A world or a group chosen at run time — what a binding's communicator
/// handle holds, or code that works on either: the collectives of both,
/// and a [`Comm`] for window creation. Ranks are the group's for a group.
#[derive(Clone, Copy)]
pub enum CommRef<'a> {
    /// The whole job.
    World(&'a World),
    /// A group of it.
    Group(&'a Group<'a>),
}

impl std::fmt::Debug for CommRef<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CommRef::World(w) => write!(f, "CommRef::World(rank {} of {})", w.rank(), w.size()),
            CommRef::Group(g) => f.debug_tuple("CommRef::Group").field(g).finish(),
        }
    }
}

impl<'a> sealed::AsTeam<'a> for CommRef<'a> {
    fn team(self) -> Team<'a> {
        match self {
            CommRef::World(w) => w.team(),
            CommRef::Group(g) => g.team(),
        }
    }
}
impl<'a> Comm<'a> for CommRef<'a> {}

impl<'a> CommRef<'a> {
    /// This process's rank in it.
    pub fn rank(self) -> usize {
        match self {
            CommRef::World(w) => w.rank(),
            CommRef::Group(g) => g.rank(),
        }
    }

    /// The number of processes in it.
    pub fn size(self) -> usize {
        match self {
            CommRef::World(w) => w.size(),
            CommRef::Group(g) => g.size(),
        }
    }

    /// The world it belongs to.
    pub fn world(self) -> &'a World {
        match self {
            CommRef::World(w) => w,
            CommRef::Group(g) => g.world(),
        }
    }

    /// [`World::barrier`] or [`Group::barrier`].
    ///
    /// # Errors
    /// As theirs.
    pub fn barrier(self) -> Result<()> {
        sealed::AsTeam::team(self).barrier()
    }

    /// [`World::broadcast`] or [`Group::broadcast`].
    ///
    /// # Errors
    /// As theirs.
    pub fn broadcast<T: Element>(self, root: usize, data: &mut [T]) -> Result<()> {
        crate::api::collective::broadcast(sealed::AsTeam::team(self), root, data)
    }

    /// [`World::allgather`] or [`Group::allgather`].
    ///
    /// # Errors
    /// As theirs.
    pub fn allgather<T: Element>(self, mine: &[T]) -> Result<Vec<T>> {
        crate::api::collective::allgather(sealed::AsTeam::team(self), mine)
    }

    /// [`World::allreduce`] or [`Group::allreduce`].
    ///
    /// # Errors
    /// As theirs.
    pub fn allreduce<T: Element>(self, data: &mut [T], op: impl Into<AnyOp>) -> Result<()> {
        crate::api::collective::allreduce(sealed::AsTeam::team(self), data, op.into())
    }

    /// [`World::split`] or [`Group::split`].
    ///
    /// # Errors
    /// As theirs.
    pub fn split(self, color: Option<u32>, key: i64) -> Result<Option<Group<'a>>> {
        match self {
            CommRef::World(w) => w.split(color, key),
            CommRef::Group(g) => g.split(color, key),
        }
    }

    /// [`World::subgroup`] or [`Group::subgroup`].
    ///
    /// # Errors
    /// As theirs.
    pub fn subgroup(self, ranks: &[usize]) -> Result<Option<Group<'a>>> {
        match self {
            CommRef::World(w) => w.subgroup(ranks),
            CommRef::Group(g) => g.subgroup(ranks),
        }
    }
}

/// A subset of the job's processes, numbered 0..size in the order the
/// creating call gave them. See the module documentation.
///
/// Dropping a group is local; every member must have finished its
/// collectives on it (as in MPI, collectives are called by every member in
/// the same order). Windows created over a group borrow it.
pub struct Group<'w> {
    world: &'w World,
    state: Arc<GroupState>,
}

impl std::fmt::Debug for Group<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Group")
            .field("rank", &self.state.rank)
            .field("members", &self.state.members)
            .field("slot", &self.state.slot)
            .finish()
    }
}

/// A group's membership and counters, shared with its windows.
pub(crate) struct GroupState {
    slot: usize,
    /// World ranks in group-rank order.
    members: Box<[usize]>,
    /// (world rank, group rank), sorted by world rank.
    by_world: Box<[(usize, usize)]>,
    rank: usize,
    barrier_epoch: Mutex<u64>,
    /// The epoch of the last window created over the group.
    window_epoch: AtomicU64,
    table: Arc<GroupTable>,
}

impl GroupState {
    /// The group rank of world rank `w` (`None` outside the group).
    pub(crate) fn group_rank(&self, w: usize) -> Option<usize> {
        self.by_world
            .binary_search_by_key(&w, |&(w, _)| w)
            .ok()
            .map(|i| self.by_world[i].1)
    }

    /// The world rank of group rank `r` (in range).
    pub(crate) fn world_rank(&self, r: usize) -> usize {
        self.members[r]
    }
}

impl Drop for GroupState {
    fn drop(&mut self) {
        let barriers = match self.barrier_epoch.lock() {
            Ok(e) => *e,
            Err(poisoned) => *poisoned.into_inner(),
        };
        let windows = self.window_epoch.load(Ordering::Relaxed);
        self.table.release(self.slot, barriers.max(windows));
    }
}

/// The group slots of one process: which are taken, and the last epoch
/// used in each (fixed size: `ONESIDED_MAX_GROUPS`).
pub(crate) struct GroupTable {
    slots: Mutex<Vec<SlotRecord>>,
}

#[derive(Clone, Copy, Default)]
struct SlotRecord {
    used: bool,
    epoch: u64,
}

impl GroupTable {
    pub(crate) fn new(slots: usize) -> Self {
        GroupTable {
            slots: Mutex::new(vec![SlotRecord::default(); slots]),
        }
    }

    fn lock(&self) -> Result<std::sync::MutexGuard<'_, Vec<SlotRecord>>> {
        self.slots
            .lock()
            .map_err(|_| Error::InvalidArgument("group table lock poisoned".into()))
    }

    /// Groups alive in this process.
    pub(crate) fn in_use(&self) -> usize {
        self.lock()
            .map(|s| s.iter().filter(|r| r.used).count())
            .unwrap_or(0)
    }

    fn release(&self, slot: usize, epoch: u64) {
        if let Ok(mut s) = self.lock() {
            if let Some(r) = s.get_mut(slot) {
                r.used = false;
                r.epoch = r.epoch.max(epoch);
            }
        }
    }
}

/// The processes of a collective call and where in the control regions
/// their flags go: the world's, or a group's. Not nameable outside the
/// crate.
#[derive(Clone, Copy)]
pub struct Team<'a> {
    pub(crate) world: &'a World,
    pub(crate) group: Option<&'a Arc<GroupState>>,
}

impl<'a> Team<'a> {
    pub(crate) fn of(world: &'a World) -> Self {
        Team { world, group: None }
    }

    /// This process's rank in the team.
    pub(crate) fn rank(&self) -> usize {
        self.group.map_or(self.world.rank(), |g| g.rank)
    }

    pub(crate) fn size(&self) -> usize {
        self.group.map_or(self.world.size(), |g| g.members.len())
    }

    /// The world rank of team rank `r` (in range).
    pub(crate) fn world_rank(&self, r: usize) -> usize {
        self.group.map_or(r, |g| g.world_rank(r))
    }

    fn slot(&self) -> Option<usize> {
        self.group.map(|g| g.slot)
    }

    /// "the world" or "group 3 (4 processes)", for messages.
    pub(crate) fn describe(&self) -> String {
        match self.group {
            None => "the world".into(),
            Some(g) => format!("group in slot {} ({} processes)", g.slot, g.members.len()),
        }
    }

    /// The id the next window over the team gets (the same on every member:
    /// window creation is collective and never concurrent in one process).
    pub(crate) fn peek_window_id(&self) -> u64 {
        match self.group {
            None => self.world.peek_window_id(),
            Some(g) => Self::group_window_id(g, g.window_epoch.load(Ordering::Relaxed) + 1),
        }
    }

    pub(crate) fn next_window_id(&self) -> u64 {
        match self.group {
            None => self.world.next_window_id(),
            Some(g) => Self::group_window_id(g, g.window_epoch.fetch_add(1, Ordering::Relaxed) + 1),
        }
    }

    fn group_window_id(g: &GroupState, epoch: u64) -> u64 {
        ((g.slot as u64 + 1) << SLOT_SHIFT) | (epoch & ((1 << SLOT_SHIFT) - 1))
    }

    /// The directory slots of the team's windows.
    pub(crate) fn dir_slots(&self) -> Range<usize> {
        self.world.config.layout().dir_slots(self.slot())
    }

    /// Offset of the team's reduction slots in every control region.
    pub(crate) fn reduce_area(&self) -> usize {
        self.world.config.layout().sync_areas(self.slot()).1
    }

    /// Waits until every member has called `barrier` (a dissemination
    /// barrier over RMA: ⌈log2 P⌉ rounds, one flag write each, driving
    /// progress while it waits).
    pub(crate) fn barrier(&self) -> Result<()> {
        self.barrier_confirming(Confirm::Delivered)
    }

    /// The barrier of a fence: each round's flag write waits for its local
    /// completion only, not for the proof of delivery (one round trip on
    /// providers whose writes complete locally). The receiver of a flag
    /// waits for it in any case, and every operation of the closing epoch
    /// was completed at its target before the barrier began. The barriers
    /// a process may leave the job after (`free`, `World::barrier`,
    /// finalize) keep the proof: a flag that left a process that then
    /// exited must still arrive.
    pub(crate) fn fence_barrier(&self) -> Result<()> {
        self.barrier_confirming(Confirm::Sent)
    }

    fn barrier_confirming(&self, confirm: Confirm) -> Result<()> {
        let epochs = self.group.map_or(&self.world.barrier_epoch, |g| &g.barrier_epoch);
        let mut epoch = epochs
            .lock()
            .map_err(|_| Error::InvalidArgument("barrier lock poisoned".into()))?;
        *epoch += 1;
        let e = *epoch;
        let world = self.world;
        let area = world.config.layout().sync_areas(self.slot()).0;
        let (rank, size) = (self.rank(), self.size());
        let ctrl = world.control_memory();
        let mut dist = 1usize;
        let mut round = 0usize;
        while dist < size && round < BARRIER_ROUNDS {
            let to = self.world_rank((rank + dist) % size);
            let flag = area + 8 * round;
            // A node-local peer's flag is a release store into its mapped
            // control region (see `api::node`); others get a provider write.
            if world
                .with_local_ctrl(to, |m| m.store_u64(flag, e))?
                .is_none()
            {
                let c = world.control(to)?;
                let dst = RemoteAddr {
                    addr: c.addr + flag as u64,
                    key: c.key,
                };
                let sent = match confirm {
                    Confirm::Delivered => world.transport().put_signal(to, e, dst),
                    Confirm::Sent => world.transport().put_flag(to, e, dst),
                };
                match sent {
                    // The flag's confirmation failed because `to` is gone.
                    // In this round `to` waits for our flag and for nobody
                    // else's, so a `to` that left after the barrier had
                    // received it (the last collective before a peer
                    // exits); a `to` that died before is not waiting for
                    // anyone, and the ranks waiting for it time out.
                    Err(err) if err.kind() == crate::ErrorKind::PeerUnreachable => {
                        tracing::debug!("barrier {e}: rank {to} is gone: {err}");
                    }
                    other => other?,
                }
            }
            let from = self.world_rank((rank + size - dist) % size);
            let what = || {
                format!(
                    "barrier {e} of {}, round {round}: waiting for rank {from}'s flag",
                    self.describe()
                )
            };
            let arrived = || Ok(ctrl.load_u64(flag)? >= e);
            let limit = world.config.timeout;
            match world.config.shm && world.node.is_local(from) {
                // Stored by a node-local peer: spin on it first.
                true => crate::progress::wait::until_local(world.transport(), limit, &what, arrived),
                false => crate::progress::wait::until(world.transport(), limit, &what, arrived),
            }
            .map_err(|err| err.awaiting(from))?;
            dist *= 2;
            round += 1;
        }
        Ok(())
    }

    /// A group of the team's ranks `members` (in that order; `None` on the
    /// processes outside it), collective over the team. `check` must be
    /// the same on every process (else every process gets an error), `bad`
    /// makes every process fail with it.
    fn make_group(
        &self,
        members: Option<Vec<usize>>,
        check: u64,
        bad: Option<String>,
    ) -> Result<Option<Group<'a>>> {
        let table = &self.world.groups;
        let snapshot = table.lock()?.clone();
        let g = snapshot.len();
        let mut words = vec![0u64; 2 * g + 3];
        for (i, r) in snapshot.iter().enumerate() {
            words[i] = u64::from(r.used);
            words[g + i] = r.epoch;
        }
        words[2 * g] = check;
        words[2 * g + 1] = !check;
        words[2 * g + 2] = u64::from(bad.is_some());
        crate::api::collective::allreduce(*self, &mut words, AnyOp::Max)?;
        if let Some(bad) = bad {
            return Err(Error::InvalidArgument(bad));
        }
        if words[2 * g + 2] != 0 {
            return Err(Error::InvalidArgument(
                "group creation: another process passed an invalid rank list".into(),
            ));
        }
        if words[2 * g] != check || words[2 * g + 1] != !check {
            return Err(Error::InvalidArgument(
                "group creation: the processes passed different rank lists".into(),
            ));
        }
        let slot = (0..g).find(|&i| words[i] == 0).ok_or_else(|| {
            Error::Exhausted(format!(
                "group creation over {}: every one of the {g} group slots is taken on some \
                 process (drop groups, or raise ONESIDED_MAX_GROUPS)",
                self.describe()
            ))
        })?;
        let Some(members) = members else {
            return Ok(None);
        };
        let members: Box<[usize]> = members.iter().map(|&r| self.world_rank(r)).collect();
        let me = self.world.rank();
        let rank = members.iter().position(|&w| w == me).ok_or_else(|| {
            Error::InvalidArgument("group creation: this process is not a member".into())
        })?;
        let mut by_world: Vec<(usize, usize)> =
            members.iter().enumerate().map(|(r, &w)| (w, r)).collect();
        by_world.sort_unstable();
        let epoch = words[g + slot];
        {
            let mut s = table.lock()?;
            let rec = s.get_mut(slot).ok_or_else(|| {
                Error::InvalidArgument(format!("group slot {slot} out of range"))
            })?;
            if rec.used {
                return Err(Error::InvalidArgument(format!(
                    "group slot {slot} was taken during the creation (collective calls \
                     must not run concurrently in one process)"
                )));
            }
            rec.used = true;
        }
        Ok(Some(Group {
            world: self.world,
            state: Arc::new(GroupState {
                slot,
                members,
                by_world: by_world.into_boxed_slice(),
                rank,
                barrier_epoch: Mutex::new(epoch),
                window_epoch: AtomicU64::new(epoch),
                table: table.clone(),
            }),
        }))
    }

    /// MPI_Comm_split over the team: see [`World::split`].
    fn split(&self, color: Option<u32>, key: i64) -> Result<Option<Group<'a>>> {
        let mine = [
            color.map_or(u64::MAX, u64::from),
            (key as u64) ^ (1 << 63), // ordered as the signed key
        ];
        let all = crate::api::collective::allgather(*self, &mine)?;
        let members = color.map(|c| {
            let mut m: Vec<(u64, usize)> = all
                .chunks_exact(2)
                .enumerate()
                .filter(|(_, w)| w[0] == u64::from(c))
                .map(|(r, w)| (w[1], r))
                .collect();
            m.sort_unstable();
            m.into_iter().map(|(_, r)| r).collect()
        });
        self.make_group(members, 0, None)
    }

    /// MPI_Comm_create over the team: see [`World::subgroup`].
    fn subgroup(&self, ranks: &[usize]) -> Result<Option<Group<'a>>> {
        let size = self.size();
        let mut seen = ranks.to_vec();
        seen.sort_unstable();
        let bad = if let Some(&r) = ranks.iter().find(|&&r| r >= size) {
            Some(format!(
                "subgroup: rank {r} is not a rank of {} (size {size})",
                self.describe()
            ))
        } else if seen.windows(2).any(|w| w[0] == w[1]) {
            Some("subgroup: a rank is listed twice".to_string())
        } else {
            None
        };
        // FNV-1a over the list: every process must pass the same one.
        let check = ranks.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &r| {
            (h ^ r as u64).wrapping_mul(0x0100_0000_01b3)
        });
        let me = self.rank();
        let members = (bad.is_none() && ranks.contains(&me)).then(|| ranks.to_vec());
        self.make_group(members, check, bad)
    }
}

impl World {
    /// Splits the job into groups by colour (MPI_Comm_split; collective):
    /// the processes passing the same `color` form one group, ranked by
    /// `key` (ties by world rank). A process passing `None`
    /// (MPI_UNDEFINED) takes part and gets `None`.
    ///
    /// # Errors
    /// Every group slot taken on some process (`ONESIDED_MAX_GROUPS`):
    /// [`ErrorKind::ResourceExhausted`] on every process. A dead peer:
    /// [`ErrorKind::Timeout`] or [`ErrorKind::PeerUnreachable`].
    ///
    /// [`ErrorKind::ResourceExhausted`]: crate::ErrorKind::ResourceExhausted
    /// [`ErrorKind::Timeout`]: crate::ErrorKind::Timeout
    /// [`ErrorKind::PeerUnreachable`]: crate::ErrorKind::PeerUnreachable
    pub fn split(&self, color: Option<u32>, key: i64) -> Result<Option<Group<'_>>> {
        Team::of(self).split(color, key)
    }

    /// The group of the listed world ranks, in that order
    /// (MPI_Comm_create; collective: every process passes the same list).
    /// Processes not listed get `None`.
    ///
    /// # Errors
    /// A rank out of range or listed twice, or processes passing different
    /// lists: [`ErrorKind::InvalidArgument`] on every process. Otherwise as
    /// [`World::split`].
    ///
    /// [`ErrorKind::InvalidArgument`]: crate::ErrorKind::InvalidArgument
    pub fn subgroup(&self, ranks: &[usize]) -> Result<Option<Group<'_>>> {
        Team::of(self).subgroup(ranks)
    }
}

impl<'w> Group<'w> {
    fn team(&self) -> Team<'_> {
        sealed::AsTeam::team(self)
    }

    /// This process's rank in the group.
    pub fn rank(&self) -> usize {
        self.state.rank
    }

    /// Number of processes in the group.
    pub fn size(&self) -> usize {
        self.state.members.len()
    }

    /// The world ranks of the members, in group-rank order.
    pub fn world_ranks(&self) -> &[usize] {
        &self.state.members
    }

    /// The world rank of group rank `rank`, `None` if out of range.
    pub fn world_rank(&self, rank: usize) -> Option<usize> {
        self.state.members.get(rank).copied()
    }

    /// The group rank of world rank `world_rank`, `None` if not a member
    /// (MPI_Group_translate_ranks).
    pub fn rank_of(&self, world_rank: usize) -> Option<usize> {
        self.state.group_rank(world_rank)
    }

    /// The world the group is part of.
    pub fn world(&self) -> &'w World {
        self.world
    }

    /// [`World::barrier`] among the members.
    pub fn barrier(&self) -> Result<()> {
        self.team().barrier()
    }

    /// [`World::broadcast`] among the members (`root` a group rank).
    pub fn broadcast<T: Element>(&self, root: usize, data: &mut [T]) -> Result<()> {
        crate::api::collective::broadcast(self.team(), root, data)
    }

    /// [`World::allgather`] among the members, in group-rank order.
    pub fn allgather<T: Element>(&self, mine: &[T]) -> Result<Vec<T>> {
        crate::api::collective::allgather(self.team(), mine)
    }

    /// [`World::allreduce`] among the members.
    pub fn allreduce<T: Element>(&self, data: &mut [T], op: impl Into<AnyOp>) -> Result<()> {
        crate::api::collective::allreduce(self.team(), data, op.into())
    }

    /// [`World::split`] of this group (collective over it; ranks and keys
    /// are the group's).
    pub fn split(&self, color: Option<u32>, key: i64) -> Result<Option<Group<'w>>> {
        self.team()
            .split(color, key)
            .map(|g| g.map(|g| rebind(g, self.world)))
    }

    /// [`World::subgroup`] of this group: `ranks` are group ranks of this
    /// group (collective over it).
    pub fn subgroup(&self, ranks: &[usize]) -> Result<Option<Group<'w>>> {
        self.team()
            .subgroup(ranks)
            .map(|g| g.map(|g| rebind(g, self.world)))
    }
}

/// The same group with the world's full lifetime (a group made over a
/// group borrows only the world, not its parent).
fn rebind<'w>(g: Group<'_>, world: &'w World) -> Group<'w> {
    Group {
        world,
        state: g.state,
    }
}

/// How a barrier round's flag write is confirmed before the round waits.
#[derive(Clone, Copy)]
enum Confirm {
    /// Delivered at the peer (`Transport::put_signal`).
    Delivered,
    /// Left this process (`Transport::put_flag`).
    Sent,
}
