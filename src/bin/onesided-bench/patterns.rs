//! The measured patterns, issued either through the window layer
//! (`onesided`) or directly on the transport (`raw`).

use std::time::{Duration, Instant};

use onesided::transport::{Atomic, AtomicOp, Datatype, RemoteAddr, RemoteCompletion};
use onesided::{Assert, LockType, Window, World};

pub use crate::op::{Mode, Op, BW_WINDOW};
use crate::pscw::RawPscw;

/// Byte `i` (≥ 8) of every buffer; bytes 0..8 carry the operation's stamp.
fn base(i: usize) -> u8 {
    (i % 251) as u8 ^ 0x5a
}

/// What `len` bytes at offset 0 of a target look like after a write stamped `stamp`.
pub fn expected(stamp: u64, len: usize) -> Vec<u8> {
    let mut v: Vec<u8> = (0..len).map(base).collect();
    let s = stamp.to_le_bytes();
    let k = len.min(8);
    v[..k].copy_from_slice(&s[..k]);
    v
}

/// Alignment of the origin buffer: a page, as `fi_rma_raw`
/// (`aligned_alloc(4096, ..)`) and `benches/mpi/rma_bench.c`
/// (`posix_memalign`) allocate theirs.
const BUF_ALIGN: usize = 4096;

/// The origin buffer: `len` bytes starting on a page boundary. A `Vec` of
/// 1 MiB starts 16 bytes past a page (the allocator's chunk header), and
/// the kernel copies of the shm provider (`process_vm_readv`/`writev`)
/// run measurably slower to or from a destination that is not 64-byte
/// aligned (docs/performance.md, "Issue 13's 1 MiB rows: the origin
/// buffer's alignment").
pub struct PageBuf {
    storage: Vec<u8>,
    start: usize,
    len: usize,
}

impl PageBuf {
    fn new(content: Vec<u8>) -> Self {
        let len = content.len();
        let mut storage = vec![0u8; len + BUF_ALIGN - 1];
        let start = storage.as_ptr().align_offset(BUF_ALIGN).min(BUF_ALIGN - 1);
        storage[start..start + len].copy_from_slice(&content);
        PageBuf {
            storage,
            start,
            len,
        }
    }
}

impl std::ops::Deref for PageBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.storage[self.start..self.start + self.len]
    }
}

impl std::ops::DerefMut for PageBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        &mut self.storage[self.start..self.start + self.len]
    }
}

/// Rank 0's state: the bench window, the origin buffer, stamps.
pub struct Origin<'w> {
    pub world: &'w World,
    pub win: Window<'w, u8>,
    pub buf: PageBuf,
    /// Last stamp written to each rank (0: nothing written).
    pub last_stamp: Vec<u64>,
    stamp: u64,
    /// Transport address of each target's window (raw mode).
    remote: Vec<Option<RemoteAddr>>,
    /// Targets written in raw mode since their last raw flush (the window
    /// layer keeps the same set: a flush after gets only sends no read).
    raw_dirty: Vec<bool>,
    ordered_raw: bool,
    /// Per-iteration times (`--per-iter`).
    pub samples: crate::stats::Samples,
}

impl<'w> Origin<'w> {
    pub fn new(world: &'w World, win: Window<'w, u8>, max_size: usize) -> Self {
        Origin {
            world,
            win,
            buf: PageBuf::new(expected(0, max_size)),
            last_stamp: vec![0; world.size()],
            stamp: 0,
            remote: vec![None; world.size()],
            raw_dirty: vec![false; world.size()],
            ordered_raw: (world.transport_caps().completion == RemoteCompletion::OrderedRead),
            samples: crate::stats::Samples::default(),
        }
    }

    /// Forgets which ranks were written (at the start of each pattern, so
    /// that only the ranks a pattern wrote are checked, with its size).
    pub fn clear_stamps(&mut self) {
        self.last_stamp.fill(0);
    }

    fn next_stamp(&mut self, len: usize) -> u64 {
        self.stamp += 1;
        let s = self.stamp.to_le_bytes();
        let k = len.min(8);
        self.buf[..k].copy_from_slice(&s[..k]);
        self.stamp
    }

    fn remote(&mut self, rank: usize) -> onesided::Result<RemoteAddr> {
        if let Some(r) = self.remote[rank] {
            return Ok(r);
        }
        let r = self.win.bench_remote(rank, 0)?;
        self.remote[rank] = Some(r);
        Ok(r)
    }

    /// Raw remote completion: on providers with ordered read-after-write, if
    /// `rank` was written since the last flush, an 8-byte read of the target's window (the window layer reads its control
    /// word instead); otherwise every put was already delivery-complete.
    pub fn raw_flush(&mut self, rank: usize) -> onesided::Result<()> {
        if self.ordered_raw && std::mem::take(&mut self.raw_dirty[rank]) {
            let at = self.remote(rank)?;
            let mut word = [0u8; 8];
            self.world.bench_transport().get(rank, &mut word, at)?;
        }
        Ok(())
    }

    /// The wire work of an uncontended shared lock of `rank` alone, an 8 B
    /// put and the unlock, as `lock_all`, put and `unlock_all` do it per
    /// target: fetch-add (reader), put, flush, fetch-add (release), on
    /// bytes 8..16 of the target's window (left unchanged).
    fn raw_lock_all(&mut self, rank: usize) -> onesided::Result<()> {
        let word = self.raw_lock_word(rank)?;
        self.raw_word_add(rank, word, 1)?;
        self.put1(Mode::Raw, rank, 8)?;
        self.raw_flush(rank)?;
        self.raw_word_add(rank, word, u64::MAX)?;
        Ok(())
    }

    /// Bytes 8..16 of `rank`'s window: the raw lock patterns' lock word.
    fn raw_lock_word(&mut self, rank: usize) -> onesided::Result<RemoteAddr> {
        let base = self.remote(rank)?;
        Ok(RemoteAddr {
            addr: base.addr + 8,
            key: base.key,
        })
    }

    /// Transport fetch-add of `delta` on `word` at `rank`; the old value.
    fn raw_word_add(&self, rank: usize, word: RemoteAddr, delta: u64) -> onesided::Result<u64> {
        let sum = Atomic {
            op: AtomicOp::Sum,
            datatype: Datatype::U64,
            count: 1,
        };
        let mut old = [0u8; 8];
        self.world.bench_transport().fetch_atomic(
            rank,
            sum,
            &delta.to_ne_bytes(),
            &mut old,
            word,
        )?;
        Ok(u64::from_ne_bytes(old))
    }

    /// The wire work of an uncontended exclusive lock + 8 B put + unlock of
    /// rank 1, on the transport: fetch-add (announce) and compare-and-swap
    /// (take), put, flush, fetch-add (release). The word is bytes 8..16 of
    /// the target's window; the CAS swaps in the value it compares with and
    /// the release undoes the add, so the window ends unchanged.
    fn raw_lock_unlock(&mut self) -> onesided::Result<()> {
        const DELTA: u64 = 1 << 32;
        let word = self.raw_lock_word(1)?;
        let old = self.raw_word_add(1, word, DELTA)?;
        let seen = old.wrapping_add(DELTA).to_ne_bytes();
        let mut got = [0u8; 8];
        self.world.bench_transport().compare_atomic(
            1,
            Datatype::U64,
            &seen,
            &seen,
            &mut got,
            word,
        )?;
        self.put1(Mode::Raw, 1, 8)?;
        self.raw_flush(1)?;
        self.raw_word_add(1, word, DELTA.wrapping_neg())?;
        Ok(())
    }

    pub fn put1(&mut self, mode: Mode, rank: usize, len: usize) -> onesided::Result<()> {
        let s = self.next_stamp(len);
        self.last_stamp[rank] = s;
        match mode {
            Mode::Onesided => self.win.put(rank, 0, &self.buf[..len]),
            Mode::Raw => {
                let at = self.remote(rank)?;
                self.raw_dirty[rank] = true;
                self.world.bench_transport().put(rank, &self.buf[..len], at)
            }
        }
    }

    fn get1(&mut self, mode: Mode, rank: usize, len: usize) -> onesided::Result<()> {
        match mode {
            Mode::Onesided => self.win.get(rank, 0, &mut self.buf[..len]),
            Mode::Raw => {
                let at = self.remote(rank)?;
                self.world
                    .bench_transport()
                    .get(rank, &mut self.buf[..len], at)
            }
        }
    }

    fn flush(&mut self, mode: Mode, rank: usize) -> onesided::Result<()> {
        match mode {
            Mode::Onesided => self.win.flush(rank),
            Mode::Raw => self.raw_flush(rank),
        }
    }

    /// Before a get pattern: a stamped block at the target, so the last get
    /// can be checked. Returns the expected content.
    pub fn prepare_get(&mut self, len: usize) -> onesided::Result<Vec<u8>> {
        self.put1(Mode::Onesided, 1, len)?;
        self.win.flush(1)?;
        let want = self.buf[..len].to_vec();
        self.buf[..len].fill(0);
        Ok(want)
    }

    /// The final check: `len` stamped bytes put to rank 1, flushed, read back
    /// into the (cleared) buffer. Returns what was written.
    pub fn roundtrip(&mut self, len: usize) -> onesided::Result<Vec<u8>> {
        self.put1(Mode::Onesided, 1, len)?;
        self.win.flush(1)?;
        let want = self.buf[..len].to_vec();
        self.buf[..len].fill(0);
        self.win.get(1, 0, &mut self.buf[..len])?;
        self.win.flush(1)?;
        Ok(want)
    }

    /// Gives the window back (to free it).
    pub fn into_window(self) -> Window<'w, u8> {
        self.win
    }

    /// Before/after a fence or lock pattern in onesided mode the `lock_all`
    /// epoch is closed/reopened (outside the timed region).
    pub fn enter(&mut self, op: Op, mode: Mode) -> onesided::Result<()> {
        if op.outside_lock_all() && mode == Mode::Onesided {
            self.win.unlock_all()?;
        }
        Ok(())
    }

    pub fn leave(&mut self, op: Op, mode: Mode) -> onesided::Result<()> {
        if op.outside_lock_all() && mode == Mode::Onesided {
            self.win.lock_all()?;
        }
        Ok(())
    }

    /// Runs `iters` iterations of `op`; returns the elapsed time.
    pub fn run(
        &mut self,
        op: Op,
        mode: Mode,
        len: usize,
        iters: u64,
    ) -> onesided::Result<Duration> {
        let n = self.world.size();
        if op == Op::PutPingpong {
            // Rank 1 reads its starting value before the first ping.
            self.world.barrier()?;
        }
        let t0 = Instant::now();
        self.samples.start();
        for _ in 0..iters {
            match op {
                Op::PutLat => {
                    self.put1(mode, 1, len)?;
                    self.flush(mode, 1)?;
                }
                Op::GetLat => {
                    self.get1(mode, 1, len)?;
                    self.flush(mode, 1)?;
                }
                Op::PutBw => {
                    for _ in 0..BW_WINDOW {
                        self.put1(mode, 1, len)?;
                    }
                    self.flush(mode, 1)?;
                }
                Op::GetBw => {
                    for _ in 0..BW_WINDOW {
                        self.get1(mode, 1, len)?;
                    }
                    self.flush(mode, 1)?;
                }
                Op::FenceLat => match mode {
                    Mode::Onesided => {
                        self.win.fence(Assert::NOPRECEDE)?;
                        self.put1(mode, 1, 8)?;
                        self.win.fence(Assert::NOSUCCEED)?;
                    }
                    Mode::Raw => {
                        self.world.barrier()?;
                        self.put1(mode, 1, 8)?;
                        self.raw_flush(1)?;
                        self.world.barrier()?;
                    }
                },
                Op::LockUnlockLat => match mode {
                    Mode::Onesided => {
                        self.win.lock(1, LockType::Exclusive, Assert::NONE)?;
                        self.put1(mode, 1, 8)?;
                        self.win.unlock(1)?;
                    }
                    Mode::Raw => self.raw_lock_unlock()?,
                },
                Op::LockAllLat => match mode {
                    Mode::Onesided => {
                        self.win.lock_all()?;
                        self.put1(mode, n - 1, 8)?;
                        self.win.unlock_all()?;
                    }
                    Mode::Raw => self.raw_lock_all(n - 1)?,
                },
                Op::PutPingpong => {
                    let s = self.put1(mode, 1, 8).map(|()| self.last_stamp[1])?;
                    self.flush(mode, 1)?;
                    // The pong: rank 1 writes the same stamp into our window.
                    wait_word(&self.win, s)?;
                }
                Op::AccLat | Op::AccRate | Op::FopLat | Op::CasLat | Op::PscwLat | Op::HaloLat => {
                    return Err(onesided::Error::InvalidArgument(format!(
                        "{} runs in atomics.rs / pscw.rs / halo.rs",
                        op.name()
                    )))
                }
                Op::MsgRate => {
                    for k in 0..op.ops_per_iter(n) {
                        self.put1(mode, 1 + k % (n - 1), 8)?;
                    }
                    match mode {
                        Mode::Onesided => self.win.flush_all()?,
                        Mode::Raw => {
                            for r in 1..n {
                                self.raw_flush(r)?;
                            }
                        }
                    }
                }
            }
            self.samples.mark();
        }
        Ok(t0.elapsed())
    }
}

/// A target's part of a collective pattern.
pub fn target_run(
    world: &World,
    win: &Window<'_, u8>,
    pscw: &mut RawPscw<'_, '_>,
    op: Op,
    mode: Mode,
    iters: u64,
) -> onesided::Result<()> {
    if op == Op::PscwLat {
        if world.rank() == 1 {
            pscw.target(win, mode, iters)?;
        }
    } else if op == Op::PutPingpong {
        if world.rank() == 1 {
            pong(world, win, mode, iters)?;
        } else {
            world.barrier()?;
        }
    } else if op.collective() {
        for _ in 0..iters {
            match mode {
                Mode::Onesided => {
                    win.fence(Assert::NOPRECEDE)?;
                    win.fence(Assert::NOSUCCEED)?;
                }
                Mode::Raw => {
                    world.barrier()?;
                    world.barrier()?;
                }
            }
        }
    }
    Ok(())
}

/// Waits until the first 8 bytes of our own window hold `stamp` (a
/// ping-pong partner's write), reading them as the unified memory model
/// allows; bounded, so a lost write is an error and not a hang. Polls back
/// to back, as `ib_write_lat` does: no `pause` (under qemu's TCG each one
/// leaves the translated code) and the clock read once per 4096 polls.
fn wait_word(win: &Window<'_, u8>, stamp: u64) -> onesided::Result<u64> {
    let start = Instant::now();
    let mut b = [0u8; 8];
    let mut polls = 0u32;
    loop {
        win.local_read(0, &mut b)?;
        let v = u64::from_le_bytes(b);
        if v >= stamp {
            return Ok(v);
        }
        polls = polls.wrapping_add(1);
        if polls % 4096 == 0 && start.elapsed() > Duration::from_secs(60) {
            return Err(onesided::Error::InvalidArgument(format!(
                "ping-pong: stamp {stamp} did not arrive in 60 s (last seen {v})"
            )));
        }
    }
}

/// Rank 1's side of `put_pingpong`: every new stamp that lands in its
/// window is put back, unchanged, to rank 0's window (and flushed).
fn pong(world: &World, win: &Window<'_, u8>, mode: Mode, iters: u64) -> onesided::Result<()> {
    let mut b = [0u8; 8];
    win.local_read(0, &mut b)?;
    let mut seen = u64::from_le_bytes(b);
    let raw = match mode {
        Mode::Raw => Some(win.bench_remote(0, 0)?),
        Mode::Onesided => None,
    };
    let ordered = world.transport_caps().completion == RemoteCompletion::OrderedRead;
    win.lock_all()?;
    // Rank 0 pings only after this barrier: `seen` is older than every ping.
    world.barrier()?;
    for _ in 0..iters {
        seen = wait_word(win, seen + 1)?;
        let bytes = seen.to_le_bytes();
        match raw {
            None => {
                win.put(0, 0, &bytes)?;
                win.flush(0)?;
            }
            Some(at) => {
                let t = world.bench_transport();
                t.put(0, &bytes, at)?;
                if ordered {
                    let mut word = [0u8; 8];
                    t.get(0, &mut word, at)?;
                }
            }
        }
    }
    win.unlock_all()
}

#[cfg(test)]
mod tests {
    use super::{expected, PageBuf, BUF_ALIGN};

    #[test]
    fn page_buf_starts_on_a_page_and_keeps_its_content() {
        for len in [0, 1, 8, 4095, 4096, 1 << 20] {
            let want = expected(7, len);
            let mut b = PageBuf::new(want.clone());
            assert_eq!(b.as_ptr() as usize % BUF_ALIGN, 0, "len {len}");
            assert_eq!(&b[..], &want[..]);
            b.fill(1);
            assert!(b.iter().all(|&x| x == 1));
            assert_eq!(b.len(), len);
        }
    }
}
