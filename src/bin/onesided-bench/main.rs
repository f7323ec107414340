//! `onesided-bench`: latency, bandwidth, fence and message-rate figures of
//! the window layer, optionally beside the same patterns issued directly on
//! the transport (`--raw`), with a correctness check after the timing.
//!
//!     onesided-run -n 2 target/release/onesided-bench [--raw] [--ops put_lat,get_lat] \
//!         [--sizes 8,1K,1M] [--reps 5] [--time 0.5] [--max-iters 10000] \
//!         [--json] [--json-file F.json] [--plot F.svg]
//!     target/release/onesided-bench --plot-from DIR --plot F.svg   # a bench-vs-mpi run
//!
//! Rank 0 is the origin and the only rank that times; every other rank is a
//! target that waits in `World::barrier` (driving progress) while rank 0
//! measures. Each measurement is one *step*: rank 0 writes a command into
//! every target's control window, barrier, work, barrier. See
//! `docs/performance.md`.

mod atomics;
mod cli;
mod halo;
mod op;
mod patterns;
mod plot;
mod plot_from;
mod pscw;
mod report;
mod stats;
mod steps;

use std::error::Error;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use onesided::{Window, World};

use atomics::{AtomicWindows, Atomics};
use cli::Cli;
use halo::{Halo, HALO_N};
use patterns::{Mode, Op, Origin};
use report::{emit, header, Record};
use steps::{target, verify, Commander, CTL_WORDS, RUN, STOP};

/// Bytes of the put/get round trip of the final check.
const CHECK_BYTES: usize = 1 << 20;
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
        if world.transport_caps().completion == onesided::transport::RemoteCompletion::OrderedRead {
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
        if cli.ops.contains(&Op::LockAllLat) {
            n.push(
                "lock_all_lat raw = transport fetch-add + put + flush + fetch-add on a word of \
                 the last rank's window: the wire work of one shared lock, put and unlock"
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
        if cli.ops.contains(&Op::PscwLat) {
            n.push(
                "pscw_lat raw = rank 1 writes a post count into rank 0's control window \
                 (transport put), rank 0 polls for it, puts 8 B, flushes and fetch-adds a \
                 complete count rank 1 polls for: the library's post message and complete \
                 (flush + fetch-add) without the window layer"
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
    halo: &mut Option<Halo<'_>>,
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
    let mut pscw = pscw::RawPscw::new(world, ctl);
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
                halo: &mut Option<Halo<'_>>,
                atom: &mut Atomics<'_, '_>,
                pscw: &mut pscw::RawPscw<'_, '_>,
                cmd: &mut Commander<'_, '_>,
                op: Op,
                mode,
                size,
                iters|
     -> onesided::Result<Duration> {
        cmd.send(RUN, op, mode, size, iters, &[])?;
        let t = if op.atomic() {
            atom.run(op, mode, iters)?
        } else if op == Op::PscwLat {
            pscw.origin(o, mode, iters)?
        } else if op == Op::HaloLat {
            halo_of(halo)?.run(iters)?
        } else {
            o.run(op, mode, size, iters)?
        };
        world.barrier()?;
        Ok(t)
    };
    for &op in &cli.ops {
        let sizes = if op.sized() {
            cli.sizes.clone()
        } else if op == Op::HaloLat {
            vec![HALO_N]
        } else {
            vec![8]
        };
        let per_iter = op.ops_per_iter(n);
        for size in sizes {
            for &mode in modes {
                if op == Op::HaloLat && mode == Mode::Raw {
                    continue; // no transport-level equivalent of a layout and a fence
                }
                if mode == Mode::Raw {
                    // Every rank decides alike (same back-end), so the
                    // patterns' barriers stay matched.
                    if let Some(why) = atomics::raw_unavailable(world, op) {
                        if world.rank() == 0 {
                            eprintln!("{} {size} raw: skipped: {why}", op.name());
                        }
                        continue;
                    }
                }
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
                step(
                    &mut o, halo, &mut atom, &mut pscw, &mut cmd, op, mode, size, warm,
                )?;
                // Calibrate: grow until one call takes a twentieth of the target.
                let mut it = 1u64;
                let per = loop {
                    let t = step(
                        &mut o, halo, &mut atom, &mut pscw, &mut cmd, op, mode, size, it,
                    )?
                    .as_secs_f64();
                    if t >= cli.time / 20.0 || it >= cli.max_iters {
                        break t / it as f64;
                    }
                    it = (it * 4).min(cli.max_iters);
                };
                let iters = stats::plan_iters(per, cli.time, cli.max_iters);
                o.samples.reset(cli.per_iter);
                atom.samples.reset(cli.per_iter);
                let mut per_op_us = Vec::with_capacity(reps);
                for _ in 0..reps {
                    let t = step(
                        &mut o, halo, &mut atom, &mut pscw, &mut cmd, op, mode, size, iters,
                    )?;
                    per_op_us.push(t.as_secs_f64() * 1e6 / (iters as f64 * per_iter as f64));
                }
                o.leave(op, mode)?;
                let s = stats::summarize(&per_op_us);
                let mut rec = Record::new(op, mode, size, iters, per_iter, reps, s);
                let samples = if op.atomic() {
                    &atom.samples
                } else {
                    &o.samples
                };
                if let Some((p50, p99)) = samples.percentiles(per_iter) {
                    (rec.lat_p50_us, rec.lat_p99_us) = (Some(p50), Some(p99));
                }
                o.samples.reset(false);
                atom.samples.reset(false);
                out.results.push(rec);
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
                if op == Op::HaloLat {
                    // Every rank checks its halos after the last step.
                    o.last_stamp.fill(1);
                    o.last_stamp[0] = 0;
                    let stamp = if cli.expect_wrong { 1_000_001 } else { 1 };
                    match halo_of(halo)?.wrong(stamp)? {
                        0 => out.checked.push(format!("{label}: rank 0's halos")),
                        bad => out.failed.push(format!(
                            "{label}: {bad} of rank 0's {} halo elements wrong",
                            2 * HALO_N
                        )),
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

/// The halo window, allocated when `halo_lat` is among the patterns.
fn halo_of<'a, 'w>(halo: &'a mut Option<Halo<'w>>) -> onesided::Result<&'a mut Halo<'w>> {
    halo.as_mut()
        .ok_or_else(|| onesided::Error::InvalidArgument("halo_lat: no halo window".into()))
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
    let mut halo = if cli.ops.contains(&Op::HaloLat) {
        Some(Halo::allocate(&world)?)
    } else {
        None
    };
    ctl.lock_all()?;
    let ok = if world.rank() == 0 {
        let out = origin(&world, cli, win, &ctl, &aw, &mut halo, max_size)?;
        ctl.unlock_all()?;
        ctl.free()?;
        aw.free()?;
        emit(cli, head, out)?
    } else {
        let ok = target(&world, win, &ctl, &aw, &mut halo)?;
        ctl.unlock_all()?;
        ctl.free()?;
        aw.free()?;
        ok
    };
    if let Some(h) = halo {
        h.free()?;
    }
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
    if let (Some(dir), Some(svg)) = (&cli.plot_from, &cli.plot) {
        let written = plot_from::plot(dir).and_then(|p| {
            plot::write(svg, &p).map_err(|e| format!("{}: {e}", svg.display()).into())
        });
        return match written {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("onesided-bench --plot-from: {e}");
                ExitCode::FAILURE
            }
        };
    }
    match run(&cli) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("onesided-bench: {e}");
            ExitCode::FAILURE
        }
    }
}
