//! Randomized checker: every rank issues random sequences of put, get,
//! accumulate, get_accumulate, fetch_and_op and compare_and_swap to random
//! targets under a random synchronization mode per round (fence with
//! assertions, lock_all with or without NOCHECK, lock_all with flushes,
//! per-target shared/exclusive locks, post/start/complete/wait with post
//! notifications or NOCHECK). The
//! schedule makes every result computable:
//!
//! * each target's window has a region per origin, written only by that
//!   origin, and a shared region that only receives SUM accumulates (they
//!   commute), so the final contents do not depend on timing;
//! * inside one epoch (or between two flushes of a target) an origin uses a
//!   location for one class of access only: one put, or gets, or a sequence
//!   of accumulate-family operations (ordered by MPI's default accumulate
//!   ordering) — never a mix MPI leaves undefined.
//!
//! Every rank regenerates every origin's operations from the seed and
//! simulates them, so it knows what each of its fetches must return and
//! what its window must hold at the end; it checks every element.
//!
//! Seed: `ONESIDED_TEST_SEED`, else rank 0 draws one from the clock and
//! sends it to everyone; it is printed when a rank fails.

#[macro_use]
mod common;

use std::collections::HashMap;

use onesided::{AnyOp, Assert, LockType, Window, World};

/// Elements per origin region and in the shared region.
const K: usize = 6;
const SHARED: usize = 4;
const ROUNDS: u64 = 24;
const OPS: usize = 14;

/// SplitMix64: small, seedable, the same on every rank.
struct Rng(u64);

impl Rng {
    fn new(seed: u64, a: u64, b: u64) -> Rng {
        let mut r = Rng(seed
            ^ a.wrapping_mul(0x9e37_79b9_7f4a_7c15)
            ^ b.wrapping_mul(0xd1b5_4a32_d192_ed03));
        r.next();
        r
    }
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn value(&mut self) -> i64 {
        self.below(64) as i64
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Fence,
    LockAll { nocheck: bool },
    LockAllFlush,
    Locks,
    Pscw,
}

#[derive(Debug, Clone)]
enum Rma {
    Put(usize, usize, Vec<i64>),
    Get(usize, usize, usize),
    Acc(usize, usize, Vec<i64>, AnyOp),
    GetAcc(usize, usize, Vec<i64>, AnyOp),
    Fao(usize, usize, i64, AnyOp),
    Cas(usize, usize, i64, i64),
    Flush(usize),
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Class {
    Put,
    Get,
    Atomic,
}

/// The round's mode and, for PSCW, the access graph (same on every rank).
fn round_plan(seed: u64, round: u64, p: usize) -> (Mode, Vec<Vec<bool>>) {
    let mut r = Rng::new(seed, round, u64::MAX);
    let mode = match r.below(5) {
        0 => Mode::Fence,
        1 => Mode::LockAll {
            nocheck: r.below(2) == 0,
        },
        2 => Mode::LockAllFlush,
        3 => Mode::Locks,
        _ => Mode::Pscw,
    };
    let edges = (0..p)
        .map(|_| (0..p).map(|_| r.below(2) == 0).collect())
        .collect();
    (mode, edges)
}

/// Origin `o`'s targets this round and (Locks mode) lock kinds.
fn targets_of(
    mode: Mode,
    edges: &[Vec<bool>],
    o: usize,
    r: &mut Rng,
    p: usize,
) -> Vec<(usize, LockType)> {
    let kind = |r: &mut Rng| {
        if r.below(2) == 0 {
            LockType::Shared
        } else {
            LockType::Exclusive
        }
    };
    match mode {
        Mode::Pscw => (0..p)
            .filter(|&t| edges[o][t])
            .map(|t| (t, LockType::Shared))
            .collect(),
        Mode::Locks => {
            let mut out = Vec::new();
            for t in 0..p {
                if r.below(2) == 0 {
                    out.push((t, kind(r)));
                }
            }
            out
        }
        _ => (0..p).map(|t| (t, LockType::Shared)).collect(),
    }
}

/// Origin `o`'s operations of one round, applied to the model as they are
/// generated; returns them with the value each must fetch.
fn generate(
    mode: Mode,
    targets: &[(usize, LockType)],
    o: usize,
    r: &mut Rng,
    model: &mut [Vec<i64>],
    p: usize,
) -> Vec<(Rma, Vec<i64>)> {
    let mut out = Vec::new();
    if targets.is_empty() {
        return out;
    }
    let mut used: HashMap<(usize, usize), Class> = HashMap::new();
    for _ in 0..OPS {
        let t = targets[r.below(targets.len())].0;
        if mode == Mode::LockAllFlush && r.below(5) == 0 {
            used.retain(|k, _| k.0 != t);
            out.push((Rma::Flush(t), vec![]));
            continue;
        }
        let kind = r.below(7);
        if kind == 6 {
            // SUM into the shared region: commutes with every origin's.
            let d = p * K + r.below(SHARED);
            let v = r.value();
            model[t][d] = model[t][d].wrapping_add(v);
            out.push((Rma::Acc(t, d, vec![v], AnyOp::Sum), vec![]));
            continue;
        }
        let j = r.below(K);
        let n = 1 + r.below((K - j).min(3));
        let d = o * K + j;
        let class = match kind {
            0 => Class::Put,
            1 => Class::Get,
            _ => Class::Atomic,
        };
        let free = (d..d + n).all(|e| match used.get(&(t, e)) {
            None => true,
            Some(c) => *c == class && class != Class::Put,
        });
        if !free {
            continue;
        }
        for e in d..d + n {
            used.insert((t, e), class);
        }
        let before: Vec<i64> = model[t][d..d + n].to_vec();
        let vals: Vec<i64> = (0..n).map(|_| r.value()).collect();
        let ops = [
            AnyOp::Sum,
            AnyOp::Max,
            AnyOp::Min,
            AnyOp::Band,
            AnyOp::Bor,
            AnyOp::Bxor,
            AnyOp::Replace,
        ];
        let apply = |m: &mut [i64], vals: &[i64], op: AnyOp| {
            for (x, v) in m.iter_mut().zip(vals) {
                *x = match op {
                    AnyOp::Sum => x.wrapping_add(*v),
                    AnyOp::Max => (*x).max(*v),
                    AnyOp::Min => (*x).min(*v),
                    AnyOp::Band => *x & v,
                    AnyOp::Bor => *x | v,
                    AnyOp::Bxor => *x ^ v,
                    AnyOp::Replace => *v,
                    _ => *x,
                };
            }
        };
        let op = match kind {
            0 => {
                model[t][d..d + n].copy_from_slice(&vals);
                Rma::Put(t, d, vals)
            }
            1 => Rma::Get(t, d, n),
            2 => {
                let op = ops[r.below(ops.len())];
                apply(&mut model[t][d..d + n], &vals, op);
                Rma::Acc(t, d, vals, op)
            }
            3 => {
                let op = if r.below(4) == 0 {
                    AnyOp::NoOp
                } else {
                    ops[r.below(ops.len())]
                };
                apply(&mut model[t][d..d + n], &vals, op);
                Rma::GetAcc(t, d, vals, op)
            }
            4 => {
                let op = [AnyOp::Sum, AnyOp::NoOp, AnyOp::Replace, AnyOp::Max][r.below(4)];
                apply(&mut model[t][d..d + 1], &vals[..1], op);
                Rma::Fao(t, d, vals[0], op)
            }
            _ => {
                let compare = before[0] + (r.below(2) as i64);
                if model[t][d] == compare {
                    model[t][d] = vals[0];
                }
                Rma::Cas(t, d, compare, vals[0])
            }
        };
        let fetched = match op {
            Rma::Put(..) | Rma::Acc(..) => vec![],
            Rma::Fao(..) | Rma::Cas(..) => vec![before[0]],
            _ => before,
        };
        out.push((op, fetched));
    }
    out
}

fn execute(win: &Window<i64>, ops: &[(Rma, Vec<i64>)], ctx: &str) {
    for (i, (op, want)) in ops.iter().enumerate() {
        let got = match op {
            Rma::Put(t, d, v) => win.put(*t, *d, v).map(|_| vec![]),
            Rma::Get(t, d, n) => {
                let mut out = vec![0; *n];
                win.get(*t, *d, &mut out).map(|_| out)
            }
            Rma::Acc(t, d, v, op) => win.accumulate(*t, *d, v, *op).map(|_| vec![]),
            Rma::GetAcc(t, d, v, op) => {
                let mut out = vec![0; v.len()];
                let data: &[i64] = if *op == AnyOp::NoOp { &[] } else { v };
                win.get_accumulate(*t, *d, data, &mut out, *op).map(|_| out)
            }
            Rma::Fao(t, d, v, op) => win.fetch_and_op(*t, *d, *v, *op).map(|x| vec![x]),
            Rma::Cas(t, d, c, s) => win.compare_and_swap(*t, *d, *c, *s).map(|x| vec![x]),
            Rma::Flush(t) => win.flush(*t).map(|_| vec![]),
        };
        let got = got.unwrap_or_else(|e| panic!("{ctx} op {i} {op:?}: {e}"));
        assert_eq!(&got, want, "{ctx} op {i} {op:?}: fetched value");
    }
}

fn seed(world: &World) -> u64 {
    let fixed = std::env::var("ONESIDED_TEST_SEED")
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok());
    let mut win = Window::<u64>::allocate(world, 1).expect("allocate");
    win.fence(Assert::NOPRECEDE).expect("fence");
    if world.rank() == 0 {
        let s = fixed.unwrap_or_else(|| {
            let t = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default();
            t.as_nanos() as u64 ^ std::process::id() as u64
        });
        for r in 0..world.size() {
            win.put(r, 0, &[s]).expect("put seed");
        }
    }
    win.fence(Assert::NOSUCCEED).expect("fence");
    let s = win.local_to_vec().expect("read")[0];
    win.free().expect("free");
    s
}

fn random_rma() {
    let world = World::init().expect("init");
    let (me, p) = (world.rank(), world.size());
    let seed = seed(&world);
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        eprintln!("random_rma FAILED on rank {me} of {p}: rerun with ONESIDED_TEST_SEED={seed}");
        hook(info)
    }));
    let len = p * K + SHARED;
    let mut win = Window::<i64>::allocate(&world, len).expect("allocate");
    let mut model = vec![vec![0i64; len]; p];
    let mut in_fence = false;
    // More rounds for the long runs (scripts/netns-test.sh).
    let rounds = std::env::var("ONESIDED_TEST_ROUNDS")
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
        .unwrap_or(ROUNDS);
    let mut executed = 0usize;
    for round in 0..rounds {
        let (mode, edges) = round_plan(seed, round, p);
        let mut mine = (Vec::new(), Vec::new());
        for o in 0..p {
            let mut r = Rng::new(seed, round, o as u64);
            let targets = targets_of(mode, &edges, o, &mut r, p);
            let ops = generate(mode, &targets, o, &mut r, &mut model, p);
            if o == me {
                mine = (targets, ops);
            }
        }
        let (targets, ops) = mine;
        executed += ops.len();
        let ctx = format!("seed {seed} round {round} {mode:?} rank {me}");
        let ranks: Vec<usize> = targets.iter().map(|t| t.0).collect();
        if mode != Mode::Fence {
            in_fence = false; // the last fence opened an epoch nobody used
        }
        match mode {
            Mode::Fence => {
                if !in_fence {
                    win.fence(Assert::NOPRECEDE | Assert::NOSTORE).expect(&ctx);
                }
                execute(&win, &ops, &ctx);
                let close = Rng::new(seed, round, u64::MAX - 1).below(2) == 0;
                let a = if close {
                    Assert::NOSUCCEED
                } else {
                    Assert::NOSTORE
                };
                win.fence(a).expect(&ctx);
                in_fence = !close;
            }
            Mode::LockAll { .. } | Mode::LockAllFlush => {
                // NOCHECK: no process takes a conflicting lock on the data
                // touched (regions are disjoint per origin).
                let nocheck = matches!(mode, Mode::LockAll { nocheck: true });
                let a = if nocheck {
                    Assert::NOCHECK
                } else {
                    Assert::NONE
                };
                win.lock_all_with(a).expect(&ctx);
                execute(&win, &ops, &ctx);
                win.unlock_all().expect(&ctx);
            }
            Mode::Locks => {
                for &(t, kind) in &targets {
                    win.lock(t, kind, Assert::NONE).expect(&ctx);
                }
                execute(&win, &ops, &ctx);
                for &(t, _) in targets.iter().rev() {
                    win.unlock(t).expect(&ctx);
                }
            }
            Mode::Pscw => {
                // Half the rounds with post notifications, half with
                // NOCHECK across a barrier.
                let notify = Rng::new(seed, round, u64::MAX - 2).below(2) == 0;
                let origins: Vec<usize> = (0..p).filter(|&o| edges[o][me]).collect();
                let a = if notify {
                    Assert::NONE
                } else {
                    Assert::NOCHECK
                };
                win.post(&origins, a).expect(&ctx);
                if !notify {
                    world.barrier().expect(&ctx);
                }
                win.start(&ranks, a).expect(&ctx);
                execute(&win, &ops, &ctx);
                win.complete().expect(&ctx);
                win.wait().expect(&ctx);
            }
        }
    }
    if in_fence {
        win.fence(Assert::NOPRECEDE | Assert::NOSUCCEED)
            .expect("final fence");
    }
    world.barrier().expect("barrier");
    let local = win.local_to_vec().expect("read");
    for (e, (got, want)) in local.iter().zip(&model[me]).enumerate() {
        assert_eq!(got, want, "seed {seed}: rank {me} element {e} at the end");
    }
    println!(
        "RANDOM-RMA rank {me} of {p}: {executed} operations in {rounds} rounds checked, \
         {len} elements match the model (seed {seed})"
    );
    world.barrier().expect("barrier");
    win.free().expect("free");
}

spmd_test!(random_rma_checker, &[2, 4], random_rma);
spmd_test!(
    random_rma_checker_8,
    jobs = common::matrix_one_provider(&[8]),
    random_rma
);

/// The same checker with every accumulate on the software path (active
/// messages applied by the target's CPU atomics), on each provider, with
/// aggregation on (small puts and accumulates queued in the op table and
/// shipped as batches; `auto` leaves it off on shm).
#[test]
fn random_rma_checker_software_accumulates() {
    for provider in common::providers() {
        for ranks in [2, 4] {
            common::run_variant(
                module_path!(),
                "random_rma_checker",
                ranks,
                &provider,
                &[
                    ("ONESIDED_ACCUMULATE", "software"),
                    ("ONESIDED_AGGREGATE", "on"),
                ],
            );
        }
    }
}

/// The same checker with every lock on the software path (the target's
/// lock queue, lazy locks, lock-op-unlock messages), on each provider.
#[test]
fn random_rma_checker_software_locks() {
    for provider in common::providers() {
        for ranks in [2, 4] {
            common::run_variant(
                module_path!(),
                "random_rma_checker",
                ranks,
                &provider,
                &[
                    ("ONESIDED_LOCK", "software"),
                    ("ONESIDED_ACCUMULATE", "software"),
                ],
            );
        }
    }
}

/// Aggregation with every pool of one element (batches of at most two
/// operations, cleanups all the time), software accumulates.
#[test]
fn random_rma_checker_aggregation_pools_of_1() {
    let mut env = vec![
        ("ONESIDED_ACCUMULATE", "software"),
        ("ONESIDED_AGGREGATE", "on"),
    ];
    for v in [
        "ONESIDED_OP_ELEMENTS",
        "ONESIDED_WIN_OP_ELEMENTS",
        "ONESIDED_TARGET_ELEMENTS",
        "ONESIDED_WIN_TARGET_ELEMENTS",
    ] {
        env.push((v, "1"));
    }
    for provider in common::providers() {
        common::run_variant(module_path!(), "random_rma_checker", 4, &provider, &env);
    }
}
