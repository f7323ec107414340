//! The creation allreduce of a window (collective; also a barrier): each
//! rank's contribution and its meaning are `meta::uniform`'s, the
//! dissemination over the world's control regions is here.

use crate::api::group::Team;
use crate::error::{Error, Result};
use crate::meta::directory::{self, Descriptor, REDUCE_ROUNDS, REDUCE_WORDS};
use crate::meta::uniform::{conclude, words, Agreement};
use crate::transport::{RemoteAddr, RemoteCompletion};

/// Runs the creation allreduce of window `id` (collective; also a barrier).
/// `d` is this rank's descriptor, `None` if its part of the creation failed;
/// `keyed` says whether its memory is registered under [`window_key`] with
/// offset addressing.
pub(super) fn agree(team: Team<'_>, id: u64, d: Option<&Descriptor>, keyed: bool) -> Result<Agreement> {
    let mut w = words(d, keyed);
    allreduce_max(team, id, &mut w)?;
    Ok(conclude(&w))
}

/// Element-wise maximum of `w` over the team's ranks, in place, through
/// the team's reduction slots. `epoch` must grow from one call to the next
/// over the same team (window ids do, `api::group`).
fn allreduce_max(team: Team<'_>, epoch: u64, w: &mut [u64; REDUCE_WORDS]) -> Result<()> {
    let world = team.world;
    let (rank, size) = (team.rank(), team.size());
    let area = team.reduce_area();
    let ctrl = world.control_memory();
    let mut dist = 1usize;
    let mut round = 0usize;
    while dist < size {
        if round >= REDUCE_ROUNDS {
            return Err(Error::InvalidArgument(format!(
                "window {epoch}: {size} processes exceed the allreduce's {REDUCE_ROUNDS} rounds"
            )));
        }
        let to = team.world_rank((rank + dist) % size);
        let off = directory::reduce_offset(area, round, epoch);
        let flag = off + 8 * REDUCE_WORDS;
        let mut payload = [0u8; 8 * REDUCE_WORDS];
        for (i, v) in w.iter().enumerate() {
            payload[8 * i..8 * i + 8].copy_from_slice(&v.to_le_bytes());
        }
        // A node-local peer's slot is written by stores into its mapped
        // control region (release store of the flag last); others by the
        // provider: the payload, a read that proves it delivered (ordered
        // after the write, FI_ORDER_RMA_RAW; without that promise writes
        // complete only when delivered), then the flag.
        let local = world.with_local_ctrl(to, |m| {
            m.write(off, &payload)?;
            m.store_u64(flag, epoch)
        })?;
        if local.is_none() {
            let c = world.control(to)?;
            let at = |o: usize| RemoteAddr {
                addr: c.addr + o as u64,
                key: c.key,
            };
            let t = world.transport();
            t.put(to, &payload, at(off))?;
            if t.caps().completion == RemoteCompletion::OrderedRead {
                let mut probe = [0u8; 8];
                t.get(to, &mut probe, at(off))?;
            }
            t.put_signal(to, epoch, at(flag))?;
        }
        let from = team.world_rank((rank + size - dist) % size);
        let what = || {
            format!(
                "window creation over {} (agreement {epoch}, round {round}): waiting for rank {from}",
                team.describe()
            )
        };
        crate::progress::wait::until(world.transport(), world.config.timeout, &what, || {
            Ok(ctrl.load_u64(flag)? >= epoch)
        })
        .map_err(|e| e.awaiting(from))?;
        let mut got = [0u8; 8 * REDUCE_WORDS];
        ctrl.read(off, &mut got)?;
        for (i, v) in w.iter_mut().enumerate() {
            let mut b = [0u8; 8];
            b.copy_from_slice(&got[8 * i..8 * i + 8]);
            *v = (*v).max(u64::from_le_bytes(b));
        }
        dist *= 2;
        round += 1;
    }
    Ok(())
}

