//! This rank's part of window creation (`Window::build` runs it, then the
//! creation's allreduce, `meta::uniform`).

use super::{agreement, direct, info, lock, soft_lock, Window, WindowInfo};
use crate::api::element::Element;
use crate::api::group::Team;
use crate::error::{Error, Result};
use crate::meta::directory::{self, Descriptor, FLAG_DYNAMIC};
use crate::meta::uniform;
use crate::transport::exposed::ExposedEntry;
use crate::transport::{Memory, Registration};
use std::sync::Arc;

/// This rank's part of a window, before the creation's allreduce.
pub(super) struct Prepared<T: Element> {
    /// Which accumulates take the software path.
    pub paths: info::Paths,
    /// Directory slot of the descriptor.
    pub slot: usize,
    /// The memory's registration.
    pub reg: Registration,
    /// What peers read (or, for uniform windows, compute).
    pub desc: Descriptor,
    /// Open for software accumulates.
    pub exposure: Option<ExposedEntry>,
    /// Registered under `uniform::window_key(id)` with offset addressing.
    pub keyed: bool,
    /// The target-side lock queue, when locks take the software path.
    pub soft_lock: Option<soft_lock::SoftLock<T>>,
    /// Small puts and accumulates queued per target (none for dynamic windows).
    pub agg: Option<crate::protocols::aggregation::Aggregation>,
}

impl<'a, T: Element> Window<'a, T> {
    /// This rank's part of creating window `id`: the accumulate paths, the
    /// directory slot, the registration (under the window's own key where
    /// the provider lets us choose, `meta::uniform`), the descriptor, the
    /// software-accumulate exposure, and whether the key is the window's.
    pub(super) fn prepare_local(
        team: Team<'a>,
        mem: &Arc<Memory<'static>>,
        id: u64,
        kind: u64,
        info: &WindowInfo,
    ) -> Result<Prepared<T>> {
        let world = team.world;
        // Decided identically on every rank (same provider, same variable,
        // same hints); recorded in the descriptor flags, which the
        // creation's allreduce (uniform windows) or peers on first access
        // compare. Dynamic windows: where a remote access error breaks the
        // connection, every operation is a message the target checks
        // against its attached regions (exposed one by one at attach);
        // elsewhere every operation is on the provider.
        let paths = if kind & FLAG_DYNAMIC != 0 {
            if world.transport().caps().remote_errors_break_connection {
                info::Paths::all_software::<T>()
            } else {
                info::Paths::provider_only()
            }
        } else {
            info::Paths::decide::<T>(world.transport(), world.config.accumulate, info)?
        };
        let ctrl = world.control_memory();
        let mut slots = team.dir_slots();
        let n = slots.len();
        // Every rank of the team creates and frees the team's windows in the
        // same collective order, so the lowest free slot of the team's part
        // of the directory is the same everywhere; descriptors carry the
        // id, so a disagreement is detected on first access.
        let slot = slots
            .find(|s| directory::slot_free(ctrl, *s).unwrap_or(false))
            .ok_or_else(|| {
                let var = match team.group {
                    None => "ONESIDED_MAX_WINDOWS",
                    Some(_) => "ONESIDED_GROUP_WINDOWS",
                };
                Error::Exhausted(format!(
                    "window {id}: {n} windows over {} are alive already (raise {var})",
                    team.describe()
                ))
            })?;
        let key = uniform::window_key(id);
        // The registration co-owns the memory: a leaked registration leaks
        // the memory rather than leaving it registered after it is freed.
        let reg = world.transport().register_keyed(mem, key)?.holding(mem.clone());
        let keyed = reg.key == key && reg.base == 0;
        let (node_flags, aux) = direct::window_flags(world, mem);
        // `no_locks`: the window is never locked, so no lock queue.
        let soft_locks = !info.locks_disabled() && lock::software_locks(world)?;
        let desc = Descriptor {
            id,
            base: reg.base,
            len: mem.len() as u64,
            disp_unit: std::mem::size_of::<T>() as u64,
            key: reg.key,
            tag: T::TAG,
            flags: kind | paths.flags() | node_flags | lock::lock_flags(soft_locks),
            aux,
        };
        // Open for lock messages before peers can see the window.
        let soft_lock = if soft_locks {
            Some(lock::open_soft_lock::<T>(world, &desc, paths.software)?)
        } else {
            None
        };
        // Open for software accumulates and batched puts before peers can
        // see the window (dynamic windows: their regions, at attach).
        let dynamic = kind & FLAG_DYNAMIC != 0;
        let exposure = if dynamic {
            None
        } else {
            let policy = paths.software | crate::protocols::aggregation::PUT_POLICY;
            Some(world.exposed.expose(id, mem, T::DATATYPE, policy)?)
        };
        let agg = match dynamic {
            true => None,
            false => {
                crate::protocols::aggregation::Aggregation::new(id, &world.ops, world.transport().caps().batch_small)
            }
        };
        Ok(Prepared {
            paths,
            slot,
            reg,
            desc,
            exposure,
            keyed,
            soft_lock,
            agg,
        })
    }

    /// `build` over `mem`, or, when this rank could not even get its memory,
    /// its part of the creation's allreduce with the failure bit set, so that
    /// every rank returns an error instead of waiting for this one.
    pub(super) fn build_from(
        team: Team<'a>,
        mem: Result<Memory<'static>>,
        len: usize,
        kind: u64,
        info: &WindowInfo,
    ) -> Result<Self> {
        match mem {
            Ok(mem) => Self::build(team, mem, len, kind, info),
            Err(e) => {
                let id = team.next_window_id();
                if let Err(e2) = agreement::agree(team, id, None, false) {
                    tracing::warn!("window {id}: telling the other ranks failed: {e2}");
                }
                Err(e)
            }
        }
    }
}
