//! `pscw_lat`: generalized active target between rank 0 (access side:
//! `start(1)` + 8 B put + `complete`) and rank 1 (exposure side: `post(0)` +
//! `wait`); other ranks sit it out.
//!
//! Raw floor: the same wire work without the window layer. The library's
//! post is one message from the target to the origin and its complete is a
//! flush plus a fetch-add on a counter the target watches, so raw does:
//! rank 1 writes its post count into word [`POST_WORD`] of rank 0's control
//! window (a transport put) and polls word [`DONE_WORD`] of its own; rank 0
//! polls its `POST_WORD` until the count arrives, puts 8 B to the data
//! window, flushes as the other raw patterns do, and fetch-adds 1 to rank
//! 1's `DONE_WORD`. Both poll local memory and drive the transport's
//! progress in between; the notification write replaces the library's
//! active message, so the floor is a 2-message handshake plus the put and
//! the flush.

use std::time::{Duration, Instant};

use onesided::transport::{Atomic, AtomicOp, Datatype, RemoteAddr};
use onesided::{Assert, Window, World};

use crate::patterns::{Mode, Origin};

/// Word of rank 0's control window that rank 1's raw posts count up.
pub const POST_WORD: usize = 8;
/// Word of rank 1's control window that rank 0's raw completes count up.
pub const DONE_WORD: usize = 9;

/// One side's raw PSCW state: how many handshakes it has done, and the
/// peer's control word (fetched on first use).
pub struct RawPscw<'a, 'w> {
    world: &'w World,
    ctl: &'a Window<'w, u64>,
    count: u64,
    peer: Option<RemoteAddr>,
}

impl<'a, 'w> RawPscw<'a, 'w> {
    pub fn new(world: &'w World, ctl: &'a Window<'w, u64>) -> Self {
        RawPscw {
            world,
            ctl,
            count: 0,
            peer: None,
        }
    }

    fn peer(&mut self, rank: usize, word: usize) -> onesided::Result<RemoteAddr> {
        if let Some(p) = self.peer {
            return Ok(p);
        }
        let p = self.ctl.bench_remote(rank, word)?;
        self.peer = Some(p);
        Ok(p)
    }

    /// Polls local control word `word` until it reaches `want`, driving the
    /// transport's progress between reads.
    fn await_word(&self, word: usize, want: u64) -> onesided::Result<()> {
        let t = self.world.bench_transport();
        let mut v = [0u64];
        let mut spins = 0u32;
        loop {
            self.ctl.local_read(word, &mut v)?;
            if v[0] >= want {
                return Ok(());
            }
            t.progress()?;
            spins += 1;
            if spins % 64 == 0 {
                // Two loaded cores: let the peer (or its progress agent) run.
                std::thread::yield_now();
            }
        }
    }

    /// Rank 0: `iters` × (start, 8 B put to rank 1, complete).
    pub fn origin(
        &mut self,
        o: &mut Origin<'_>,
        mode: Mode,
        iters: u64,
    ) -> onesided::Result<Duration> {
        let t0 = Instant::now();
        for _ in 0..iters {
            match mode {
                Mode::Onesided => {
                    o.win.start(&[1], Assert::NONE)?;
                    o.put1(mode, 1, 8)?;
                    o.win.complete()?;
                }
                Mode::Raw => {
                    self.count += 1;
                    self.await_word(POST_WORD, self.count)?;
                    o.put1(mode, 1, 8)?;
                    o.raw_flush(1)?;
                    let done = self.peer(1, DONE_WORD)?;
                    let sum = Atomic {
                        op: AtomicOp::Sum,
                        datatype: Datatype::U64,
                        count: 1,
                    };
                    let mut old = [0u8; 8];
                    self.world.bench_transport().fetch_atomic(
                        1,
                        sum,
                        &1u64.to_ne_bytes(),
                        &mut old,
                        done,
                    )?;
                }
            }
        }
        Ok(t0.elapsed())
    }

    /// Rank 1: `iters` × (post to rank 0, wait).
    pub fn target(&mut self, win: &Window<'_, u8>, mode: Mode, iters: u64) -> onesided::Result<()> {
        for _ in 0..iters {
            match mode {
                Mode::Onesided => {
                    win.post(&[0], Assert::NONE)?;
                    win.wait()?;
                }
                Mode::Raw => {
                    self.count += 1;
                    let at = self.peer(0, POST_WORD)?;
                    self.world
                        .bench_transport()
                        .put(0, &self.count.to_ne_bytes(), at)?;
                    self.await_word(DONE_WORD, self.count)?;
                }
            }
        }
        Ok(())
    }
}
