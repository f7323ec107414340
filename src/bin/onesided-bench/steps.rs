//! The step protocol between rank 0 and the targets: rank 0 writes a
//! command (kind, pattern, mode, size, iterations, stamp) into every
//! target's control window and enters a barrier; the targets follow the
//! commands until STOP and run the correctness checks on VERIFY.

use std::error::Error;

use onesided::{Window, World};

use crate::atomics::AtomicWindows;
use crate::halo::Halo;
use crate::patterns::{expected, target_run, Mode, Op};
use crate::pscw::RawPscw;
use crate::Outcome;

/// Words of the control window: seq, kind, op, size, iters, mode, stamp | failures,
/// then the raw PSCW counters (`pscw.rs`).
pub const CTL_WORDS: usize = 10;
const FAILURES_WORD: usize = 7;

pub const RUN: u64 = 1;
pub const VERIFY: u64 = 2;
pub const STOP: u64 = 3;

/// Rank 0's side of the step protocol.
pub struct Commander<'a, 'w> {
    pub world: &'w World,
    pub ctl: &'a Window<'w, u64>,
    pub seq: u64,
    pub expect_wrong: bool,
}

impl Commander<'_, '_> {
    /// Writes a command to every target and enters the first barrier.
    pub fn send(
        &mut self,
        kind: u64,
        op: Op,
        mode: Mode,
        size: usize,
        iters: u64,
        stamps: &[u64],
    ) -> onesided::Result<()> {
        self.seq += 1;
        for r in 1..self.world.size() {
            let words = [
                self.seq,
                kind,
                op.code(),
                size as u64,
                iters,
                u64::from(mode == Mode::Raw),
                stamps.get(r).copied().unwrap_or(0),
            ];
            self.ctl.put(r, 0, &words)?;
        }
        self.ctl.flush_all()?;
        self.world.barrier()
    }

    fn failures(&self, rank: usize) -> onesided::Result<u64> {
        let mut w = [0u64];
        self.ctl.get(rank, FAILURES_WORD, &mut w)?;
        Ok(w[0])
    }
}

/// The targets compare what they hold with the last value the pattern wrote
/// to them, or for an atomic pattern with the number of operations issued
/// (ranks it did not write skip the check).
pub fn verify(
    cmd: &mut Commander<'_, '_>,
    last_stamp: &[u64],
    op: Op,
    mode: Mode,
    size: usize,
    label: &str,
    out: &mut Outcome,
) -> onesided::Result<()> {
    let n = cmd.world.size();
    let mut stamps = last_stamp.to_vec();
    if cmd.expect_wrong {
        for s in stamps.iter_mut().filter(|s| **s != 0) {
            *s += 1_000_000;
        }
    }
    let before: Vec<u64> = (1..n)
        .map(|r| cmd.failures(r))
        .collect::<onesided::Result<_>>()?;
    cmd.send(VERIFY, op, mode, size, 0, &stamps)?;
    cmd.world.barrier()?;
    for r in 1..n {
        if cmd.failures(r)? != before[r - 1] {
            out.failed
                .push(format!("{label}: rank {r} holds the wrong last value"));
        } else if stamps[r] != 0 {
            out.checked.push(format!("{label}: last value at rank {r}"));
        }
    }
    Ok(())
}

/// A target: follows rank 0's commands until STOP; true if every check passed.
pub fn target(
    world: &World,
    mut win: Window<'_, u8>,
    ctl: &Window<'_, u64>,
    aw: &AtomicWindows<'_>,
    halo: &mut Option<Halo<'_>>,
) -> Result<bool, Box<dyn Error>> {
    let mut last = 0u64;
    let mut failures = 0u64;
    let mut pscw = RawPscw::new(world, ctl);
    loop {
        world.barrier()?;
        let mut w = [0u64; 7];
        ctl.local_read(0, &mut w)?;
        if w[0] != last + 1 {
            return Err(format!("rank {}: command {} after {last}", world.rank(), w[0]).into());
        }
        last = w[0];
        let op = Op::from_code(w[2]).ok_or("bad op code in command")?;
        let mode = if w[5] == 1 { Mode::Raw } else { Mode::Onesided };
        let (size, iters, stamp) = (w[3] as usize, w[4], w[6]);
        match w[1] {
            RUN if op == Op::HaloLat => {
                crate::halo_of(halo)?.run(iters)?;
            }
            VERIFY if stamp != 0 && op == Op::HaloLat => {
                let bad = crate::halo_of(halo)?.wrong(stamp)?;
                if bad != 0 {
                    failures += 1;
                    eprintln!(
                        "rank {}: after halo_lat: {bad} halo elements wrong",
                        world.rank()
                    );
                    ctl.local_write(FAILURES_WORD, &[failures])?;
                }
            }
            RUN => target_run(world, &win, &mut pscw, op, mode, iters)?,
            VERIFY if stamp != 0 && op.atomic() => {
                if let Err(e) = aw.check(op, stamp)? {
                    failures += 1;
                    eprintln!(
                        "rank {}: after {} {}: the word {e}",
                        world.rank(),
                        op.name(),
                        mode.name()
                    );
                    ctl.local_write(FAILURES_WORD, &[failures])?;
                }
            }
            VERIFY if stamp != 0 => {
                let want = expected(stamp, size);
                let mut have = vec![0u8; size];
                win.local_read(0, &mut have)?;
                if have != want {
                    failures += 1;
                    let first = have
                        .iter()
                        .zip(&want)
                        .position(|(a, b)| a != b)
                        .unwrap_or(0);
                    eprintln!(
                        "rank {}: after {} {} B {}: byte {first} is {:#04x}, expected {:#04x}",
                        world.rank(),
                        op.name(),
                        size,
                        mode.name(),
                        have[first],
                        want[first]
                    );
                    ctl.local_write(FAILURES_WORD, &[failures])?;
                }
            }
            VERIFY => {}
            STOP => {
                world.barrier()?;
                break;
            }
            k => return Err(format!("unknown command kind {k}").into()),
        }
        world.barrier()?;
    }
    win.free()?;
    Ok(failures == 0)
}
