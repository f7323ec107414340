//! The atomic patterns (`acc_lat`, `acc_rate`, `fop_lat`, `cas_lat`), issued
//! through the window layer or directly on the transport (`raw`), and their
//! correctness checks.
//!
//! Two small windows besides the byte window: an `f64` one for the
//! accumulates and an `i64` one (element 0 for fetch-and-op, element 1 for
//! compare-and-swap). Before each (pattern, mode) the word at rank 1 is
//! reset to 0; afterwards it must hold exactly the number of operations
//! issued (every accumulate adds 1.0, every fetch-and-op adds 1, every
//! compare-and-swap replaces k by k + 1). On the origin, fetch-and-op must
//! return 0, 1, 2, ... in order and every compare-and-swap the value it
//! compared with.

use std::time::{Duration, Instant};

use onesided::transport::{Atomic, AtomicOp, Datatype, RemoteAddr};
use onesided::{Op as Rop, Window, World};

use crate::patterns::{Mode, Op};

/// Accumulates per iteration of `acc_rate`.
pub const ACC_BATCH: usize = 1024;
/// Element of the `i64` window used by each integer pattern.
const FOP_WORD: usize = 0;
const CAS_WORD: usize = 1;
/// Elements of the integer window.
pub const INT_WORDS: usize = 2;

/// The atomic windows, as every rank holds them.
pub struct AtomicWindows<'w> {
    pub acc: Window<'w, f64>,
    pub int: Window<'w, i64>,
}

impl<'w> AtomicWindows<'w> {
    /// The integer window carries the `accumulate_ops=same_op` hint, as an
    /// application that wants the NIC's atomics gives it: every operation
    /// the back-end offers natively (on native verbs: 64-bit sum and
    /// compare-and-swap) then runs on it even though others would not; on
    /// back-ends that offer every operation it changes nothing.
    pub fn allocate(world: &'w World) -> onesided::Result<Self> {
        let same_op = onesided::WindowInfo::new().accumulate_ops("same_op")?;
        Ok(AtomicWindows {
            acc: Window::allocate(world, 1)?,
            int: Window::allocate_with(world, INT_WORDS, &same_op)?,
        })
    }

    pub fn lock_all(&self) -> onesided::Result<()> {
        self.acc.lock_all()?;
        self.int.lock_all()
    }

    pub fn unlock_all(&self) -> onesided::Result<()> {
        self.acc.unlock_all()?;
        self.int.unlock_all()
    }

    pub fn free(mut self) -> onesided::Result<()> {
        self.acc.free()?;
        self.int.free()
    }

    /// A target's check after `op`: its word must equal `want` (the number
    /// of operations the origin issued). `Err` names what was found.
    pub fn check(&self, op: Op, want: u64) -> onesided::Result<Result<(), String>> {
        let have = match op {
            Op::AccLat | Op::AccRate => {
                let mut v = [0f64];
                self.acc.local_read(0, &mut v)?;
                if v[0] == want as f64 {
                    return Ok(Ok(()));
                }
                format!("{}", v[0])
            }
            _ => {
                let mut v = [0i64];
                let word = if op == Op::CasLat { CAS_WORD } else { FOP_WORD };
                self.int.local_read(word, &mut v)?;
                if v[0] == want as i64 {
                    return Ok(Ok(()));
                }
                v[0].to_string()
            }
        };
        Ok(Err(format!("holds {have}, expected {want}")))
    }
}

/// Rank 0's state for the atomic patterns against rank 1.
pub struct Atomics<'a, 'w> {
    world: &'w World,
    win: &'a AtomicWindows<'w>,
    acc_at: Option<RemoteAddr>,
    int_at: Option<RemoteAddr>,
    /// Raw accumulates not yet flushed.
    raw_dirty: bool,
    /// Operations issued since the last reset (the expected target value).
    pub count: u64,
    /// Added to the values the origin expects back (negative control).
    skew: i64,
    /// First wrong value returned in the current pattern, and how many.
    pub wrong: Option<String>,
    pub wrong_count: u64,
    /// Per-iteration times (`--per-iter`).
    pub samples: crate::stats::Samples,
}

const RAW_SUM_F64: Atomic = Atomic {
    op: AtomicOp::Sum,
    datatype: Datatype::F64,
    count: 1,
};
const RAW_SUM_I64: Atomic = Atomic {
    op: AtomicOp::Sum,
    datatype: Datatype::I64,
    count: 1,
};

/// Why the raw form of `op` cannot run on `world`'s back-end (it lacks
/// the native atomic the pattern calls), or `None` when it can. libfabric's
/// `net` offers no atomics at all; native verbs only 64-bit integer sum
/// and compare-and-swap.
pub fn raw_unavailable(world: &World, op: Op) -> Option<String> {
    use onesided::transport::AtomicKind;
    let needs: &[(AtomicOp, Datatype, AtomicKind)] = match op {
        Op::AccLat | Op::AccRate => &[(AtomicOp::Sum, Datatype::F64, AtomicKind::Update)],
        Op::FopLat => &[(AtomicOp::Sum, Datatype::I64, AtomicKind::Fetch)],
        Op::CasLat => &[(AtomicOp::Cswap, Datatype::I64, AtomicKind::Compare)],
        // The raw PSCW completes with a fetch-add on the target's counter.
        Op::PscwLat | Op::LockAllLat => &[(AtomicOp::Sum, Datatype::U64, AtomicKind::Fetch)],
        Op::LockUnlockLat => &[
            (AtomicOp::Sum, Datatype::U64, AtomicKind::Fetch),
            (AtomicOp::Cswap, Datatype::U64, AtomicKind::Compare),
        ],
        _ => return None,
    };
    let caps = world.transport_caps();
    needs
        .iter()
        .find(|(o, d, k)| !caps.atomics.offers(*o, *d, *k))
        .map(|(o, d, k)| {
            format!(
                "back-end {} ({}) offers no native {k:?} {o:?} on {d:?}",
                caps.backend, caps.name
            )
        })
}

impl<'a, 'w> Atomics<'a, 'w> {
    pub fn new(world: &'w World, win: &'a AtomicWindows<'w>, expect_wrong: bool) -> Self {
        Atomics {
            world,
            win,
            acc_at: None,
            int_at: None,
            raw_dirty: false,
            count: 0,
            skew: i64::from(expect_wrong),
            wrong: None,
            wrong_count: 0,
            samples: crate::stats::Samples::default(),
        }
    }

    /// Sets rank 1's word of `op` to 0 (put + flush) and the counters to 0.
    pub fn reset(&mut self, op: Op) -> onesided::Result<()> {
        match op {
            Op::AccLat | Op::AccRate => {
                self.win.acc.put(1, 0, &[0.0])?;
                self.win.acc.flush(1)?;
            }
            _ => {
                let word = if op == Op::CasLat { CAS_WORD } else { FOP_WORD };
                self.win.int.put(1, word, &[0])?;
                self.win.int.flush(1)?;
            }
        }
        self.count = 0;
        self.wrong = None;
        self.wrong_count = 0;
        Ok(())
    }

    fn acc_at(&mut self) -> onesided::Result<RemoteAddr> {
        if let Some(a) = self.acc_at {
            return Ok(a);
        }
        let a = self.win.acc.bench_remote(1, 0)?;
        self.acc_at = Some(a);
        Ok(a)
    }

    fn int_at(&mut self, word: usize) -> onesided::Result<RemoteAddr> {
        let base = match self.int_at {
            Some(a) => a,
            None => {
                let a = self.win.int.bench_remote(1, 0)?;
                self.int_at = Some(a);
                a
            }
        };
        Ok(RemoteAddr {
            addr: base.addr + (word * 8) as u64,
            key: base.key,
        })
    }

    fn returned(&mut self, what: &str, old: i64) {
        let want = self.count as i64 + self.skew;
        if old != want {
            self.wrong_count += 1;
            if self.wrong.is_none() {
                self.wrong = Some(format!(
                    "{what} number {} returned {old}, expected {want}",
                    self.count
                ));
            }
        }
    }

    fn acc1(&mut self, mode: Mode) -> onesided::Result<()> {
        match mode {
            Mode::Onesided => self.win.acc.accumulate(1, 0, &[1.0], Rop::Sum)?,
            Mode::Raw => {
                let at = self.acc_at()?;
                self.world
                    .bench_transport()
                    .atomic(1, RAW_SUM_F64, &1.0f64.to_ne_bytes(), at)?;
                self.raw_dirty = true;
            }
        }
        self.count += 1;
        Ok(())
    }

    /// Makes the accumulates visible at rank 1. Raw: on providers with
    /// ordered atomic read-after-write, one 8-byte atomic read of the
    /// target word (the window layer reads its control word); otherwise the
    /// updates were delivery-complete already and nothing is sent.
    fn acc_flush(&mut self, mode: Mode) -> onesided::Result<()> {
        match mode {
            Mode::Onesided => self.win.acc.flush(1),
            Mode::Raw => {
                if self.world.transport_caps().ordered_atomic_raw
                    && std::mem::take(&mut self.raw_dirty)
                {
                    let at = self.acc_at()?;
                    let read = Atomic {
                        op: AtomicOp::Read,
                        datatype: Datatype::U64,
                        count: 1,
                    };
                    let mut word = [0u8; 8];
                    self.world
                        .bench_transport()
                        .fetch_atomic(1, read, &[0u8; 8], &mut word, at)?;
                }
                Ok(())
            }
        }
    }

    fn fop1(&mut self, mode: Mode) -> onesided::Result<()> {
        let old = match mode {
            Mode::Onesided => {
                let v = self.win.int.fetch_and_op(1, FOP_WORD, 1, Rop::Sum)?;
                self.win.int.flush(1)?;
                v
            }
            Mode::Raw => {
                let at = self.int_at(FOP_WORD)?;
                let mut old = [0u8; 8];
                self.world.bench_transport().fetch_atomic(
                    1,
                    RAW_SUM_I64,
                    &1i64.to_ne_bytes(),
                    &mut old,
                    at,
                )?;
                i64::from_ne_bytes(old)
            }
        };
        self.returned("fetch_and_op", old);
        self.count += 1;
        Ok(())
    }

    fn cas1(&mut self, mode: Mode) -> onesided::Result<()> {
        let k = self.count as i64;
        let old = match mode {
            Mode::Onesided => {
                let v = self.win.int.compare_and_swap(1, CAS_WORD, k, k + 1)?;
                self.win.int.flush(1)?;
                v
            }
            Mode::Raw => {
                let at = self.int_at(CAS_WORD)?;
                let mut old = [0u8; 8];
                self.world.bench_transport().compare_atomic(
                    1,
                    Datatype::I64,
                    &k.to_ne_bytes(),
                    &(k + 1).to_ne_bytes(),
                    &mut old,
                    at,
                )?;
                i64::from_ne_bytes(old)
            }
        };
        self.returned("compare_and_swap", old);
        self.count += 1;
        Ok(())
    }

    /// Runs `iters` iterations of the atomic pattern `op`; returns the time.
    pub fn run(&mut self, op: Op, mode: Mode, iters: u64) -> onesided::Result<Duration> {
        let t0 = Instant::now();
        self.samples.start();
        for _ in 0..iters {
            match op {
                Op::AccLat => {
                    self.acc1(mode)?;
                    self.acc_flush(mode)?;
                }
                Op::AccRate => {
                    for _ in 0..ACC_BATCH {
                        self.acc1(mode)?;
                    }
                    self.acc_flush(mode)?;
                }
                Op::FopLat => self.fop1(mode)?,
                Op::CasLat => self.cas1(mode)?,
                _ => {
                    return Err(onesided::Error::InvalidArgument(format!(
                        "{} is not an atomic pattern",
                        op.name()
                    )))
                }
            }
            self.samples.mark();
        }
        Ok(t0.elapsed())
    }
}
