//! `onesided-bench`: latency, bandwidth, fence and message-rate figures of
//! the window layer, optionally beside the same patterns issued directly on
//! the transport (`--raw`), with a correctness check after the timing.
//!
//!     onesided-run -n 2 target/release/onesided-bench [--raw] [--ops put_lat,get_lat] \
//!         [--sizes 8,1K,1M] [--reps 5] [--time 0.5] [--max-iters 10000] \
//!         [--json] [--json-file F.json] [--plot F.svg]
//!
//! Rank 0 is the origin and the only rank that times; every other rank is a
//! target that waits in `World::barrier` (driving progress) while rank 0
//! measures. Each measurement is one *step*: rank 0 writes a command into
//! every target's control window, barrier, work, barrier. See
//! `docs/performance.md`.

mod atomics;
mod cli;
mod patterns;
mod plot;
mod report;
mod stats;

use std::error::Error;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use onesided::{Window, World};

use atomics::{AtomicWindows, Atomics};
use cli::Cli;
use patterns::{expected, target_run, Mode, Op, Origin};
use report::{emit, header, Record};

/// Bytes of the put/get round trip of the final check.
const CHECK_BYTES: usize = 1 << 20;
/// Words of the control window: seq, kind, op, size, iters, mode, stamp | failures.
const CTL_WORDS: usize = 8;
const FAILURES_WORD: usize = 7;

const RUN: u64 = 1;
const VERIFY: u64 = 2;
const STOP: u64 = 3;

/// Rank 0's side of the step protocol.
struct Commander<'a, 'w> {
    world: &'w World,
    ctl: &'a Window<'w, u64>,
    seq: u64,
    expect_wrong: bool,
}

impl Commander<'_, '_> {
    /// Writes a command to every target and enters the first barrier.
    fn send(
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

pub struct Outcome {
    pub results: Vec<Record>,
    pub notes: Vec<String>,
    pub checked: Vec<String>,
    pub failed: Vec<String>,
}

fn notes(world: &World, cli: &Cli) -> Vec<String> {
    let mut n = vec![
        "put_bw/get_bw and msg_rate issue blocking Window::put/get (each returns after local \
         completion, as the window layer does); raw issues the same blocking transport calls"
            .to_string(),
    ];
    if cli.raw {
        if world.transport_props().ordered_raw {
            n.push(
                "raw flush = one 8-byte transport get of the target's window (ordered \
                 read-after-write), as the window layer's flush reads the control word"
                    .into(),
            );
        } else {
            n.push(
                "raw put = delivery-complete write waited for; raw flush is empty (the \
                 window layer does the same on this provider)"
                    .into(),
            );
        }
        if cli.ops.contains(&Op::LockUnlockLat) {
            n.push(
                "lock_unlock_lat raw = transport fetch-add + compare-and-swap + put + flush + \
                 fetch-add on a word of the target's window: the wire work of an uncontended \
                 exclusive lock, put and unlock"
                    .into(),
            );
        }
        if cli.ops.iter().any(|o| o.atomic()) {
            n.push(
                "acc_lat/acc_rate/fop_lat/cas_lat raw = transport atomic / fetch_atomic / \
                 compare_atomic on the target word; raw acc flush = one 8-byte atomic read of \
                 it where atomics are ordered read-after-write (else nothing: the updates were \
                 delivery-complete); fop/cas need no flush (the result arrived)"
                    .into(),
            );
        }
        if cli.ops.contains(&Op::FenceLat) {
            n.push(
                "fence_lat raw = World::barrier + transport put + flush read + World::barrier: \
                 a fence has no transport equivalent, so this floor still contains the \
                 library's barrier"
                    .into(),
            );
        }
    }
    n
}

fn origin(
    world: &World,
    cli: &Cli,
    win: Window<'_, u8>,
    ctl: &Window<'_, u64>,
    aw: &AtomicWindows<'_>,
    max_size: usize,
) -> Result<Outcome, Box<dyn Error>> {
    let n = world.size();
    let mut cmd = Commander {
        world,
        ctl,
        seq: 0,
        expect_wrong: cli.expect_wrong,
    };
    let mut o = Origin::new(world, win, max_size);
    o.win.lock_all()?;
    aw.lock_all()?;
    let mut atom = Atomics::new(world, aw, cli.expect_wrong);
    let mut out = Outcome {
        results: Vec::new(),
        notes: notes(world, cli),
        checked: Vec::new(),
        failed: Vec::new(),
    };
    let modes: &[Mode] = if cli.raw {
        &[Mode::Onesided, Mode::Raw]
    } else {
        &[Mode::Onesided]
    };
    let reps = cli.reps as usize;
    let step = |o: &mut Origin<'_>,
                atom: &mut Atomics<'_, '_>,
                cmd: &mut Commander<'_, '_>,
                op: Op,
                mode,
                size,
                iters|
     -> onesided::Result<Duration> {
        cmd.send(RUN, op, mode, size, iters, &[])?;
        let t = if op.atomic() {
            atom.run(op, mode, iters)?
        } else {
            o.run(op, mode, size, iters)?
        };
        world.barrier()?;
        Ok(t)
    };
    for &op in &cli.ops {
        let sizes = if op.sized() {
            cli.sizes.clone()
        } else {
            vec![8]
        };
        let per_iter = op.ops_per_iter(n);
        for size in sizes {
            for &mode in modes {
                let label = format!("{} {} {}", op.name(), size, mode.name());
                o.clear_stamps();
                if op.atomic() {
                    atom.reset(op)?;
                }
                let want_get = if op.writes() {
                    None
                } else {
                    Some(o.prepare_get(size)?)
                };
                o.enter(op, mode)?;
                let warm = if size * per_iter >= 1 << 22 {
                    1
                } else {
                    10.min(cli.max_iters)
                };
                step(&mut o, &mut atom, &mut cmd, op, mode, size, warm)?;
                // Calibrate: grow until one call takes a twentieth of the target.
                let mut it = 1u64;
                let per = loop {
                    let t = step(&mut o, &mut atom, &mut cmd, op, mode, size, it)?.as_secs_f64();
                    if t >= cli.time / 20.0 || it >= cli.max_iters {
                        break t / it as f64;
                    }
                    it = (it * 4).min(cli.max_iters);
                };
                let iters = stats::plan_iters(per, cli.time, cli.max_iters);
                let mut per_op_us = Vec::with_capacity(reps);
                for _ in 0..reps {
                    let t = step(&mut o, &mut atom, &mut cmd, op, mode, size, iters)?;
                    per_op_us.push(t.as_secs_f64() * 1e6 / (iters as f64 * per_iter as f64));
                }
                o.leave(op, mode)?;
                let s = stats::summarize(&per_op_us);
                out.results
                    .push(Record::new(op, mode, size, iters, per_iter, reps, s));
                if let Some(want) = want_get {
                    if o.buf[..size] == want[..] {
                        out.checked.push(format!("{label}: last get"));
                    } else {
                        out.failed
                            .push(format!("{label}: last get returned wrong data"));
                    }
                }
                if op.atomic() {
                    o.last_stamp[1] = atom.count;
                    match atom.wrong.take() {
                        Some(w) => out.failed.push(format!(
                            "{label}: {} wrong return values, first: {w}",
                            atom.wrong_count
                        )),
                        None if op == Op::FopLat => out
                            .checked
                            .push(format!("{label}: returned 0..{} in order", atom.count)),
                        None if op == Op::CasLat => out
                            .checked
                            .push(format!("{label}: {} expected old values", atom.count)),
                        None => {}
                    }
                }
                verify(&mut cmd, &o.last_stamp, op, mode, size, &label, &mut out)?;
            }
        }
    }
    // Round trip: 1 MiB put, flush, get back; the target checks it too.
    o.clear_stamps();
    let want = o.roundtrip(CHECK_BYTES)?;
    if o.buf[..CHECK_BYTES] == want[..] {
        out.checked.push("1MiB put/get round trip".into());
    } else {
        let bad = o.buf[..CHECK_BYTES]
            .iter()
            .zip(&want)
            .filter(|(a, b)| a != b)
            .count();
        out.failed
            .push(format!("1MiB put/get round trip: {bad} bytes differ"));
    }
    verify(
        &mut cmd,
        &o.last_stamp,
        Op::PutLat,
        Mode::Onesided,
        CHECK_BYTES,
        "1MiB put",
        &mut out,
    )?;
    cmd.send(STOP, Op::PutLat, Mode::Onesided, 0, 0, &[])?;
    world.barrier()?;
    let mut win = o.into_window();
    win.unlock_all()?;
    win.free()?;
    aw.unlock_all()?;
    Ok(out)
}

/// The targets compare what they hold with the last value the pattern wrote
/// to them, or for an atomic pattern with the number of operations issued
/// (ranks it did not write skip the check).
fn verify(
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
fn target(
    world: &World,
    mut win: Window<'_, u8>,
    ctl: &Window<'_, u64>,
    aw: &AtomicWindows<'_>,
) -> Result<bool, Box<dyn Error>> {
    let mut last = 0u64;
    let mut failures = 0u64;
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
            RUN => target_run(world, &win, op, mode, iters)?,
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

fn run(cli: &Cli) -> Result<bool, Box<dyn Error>> {
    let world = World::init()?;
    if world.size() < 2 {
        return Err(
            "onesided-bench needs at least 2 ranks (onesided-run -n 2 onesided-bench)".into(),
        );
    }
    let head = header(&world, cli);
    let max_size = cli
        .sizes
        .iter()
        .copied()
        .filter(|_| cli.ops.iter().any(|o| o.sized()))
        .max()
        .unwrap_or(8)
        .max(CHECK_BYTES);
    let win = Window::<u8>::allocate(&world, max_size)?;
    let mut ctl = Window::<u64>::allocate(&world, CTL_WORDS)?;
    let aw = AtomicWindows::allocate(&world)?;
    ctl.lock_all()?;
    let ok = if world.rank() == 0 {
        let out = origin(&world, cli, win, &ctl, &aw, max_size)?;
        ctl.unlock_all()?;
        ctl.free()?;
        aw.free()?;
        emit(cli, head, out)?
    } else {
        let ok = target(&world, win, &ctl, &aw)?;
        ctl.unlock_all()?;
        ctl.free()?;
        aw.free()?;
        ok
    };
    Ok(ok)
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            // Under a launcher every rank parses the same line: let rank 0 speak.
            let speak = std::env::var("PMI_RANK")
                .or_else(|_| std::env::var("ONESIDED_RANK"))
                .map_or(true, |r| r == "0");
            if speak {
                let _ = e.print();
            }
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    match run(&cli) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("onesided-bench: {e}");
            ExitCode::FAILURE
        }
    }
}
