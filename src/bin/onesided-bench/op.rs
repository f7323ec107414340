//! The benchmark patterns (`--ops`) and the two modes they run in.

use clap::ValueEnum;
use serde::Serialize;

/// Operations per iteration of the bandwidth patterns.
pub const BW_WINDOW: usize = 64;
/// Puts per iteration of `msg_rate` (at least one per target).
pub const RATE_BATCH: usize = 64;

/// A benchmark pattern.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Op {
    /// One put + flush.
    #[value(name = "put_lat")]
    PutLat,
    /// One get + flush.
    #[value(name = "get_lat")]
    GetLat,
    /// 64 puts, one flush.
    #[value(name = "put_bw")]
    PutBw,
    /// 64 gets, one flush.
    #[value(name = "get_bw")]
    GetBw,
    /// fence + 8 B put + fence (active target, collective).
    #[value(name = "fence_lat")]
    FenceLat,
    /// 8 B puts spread over every other rank, one flush_all.
    #[value(name = "msg_rate")]
    MsgRate,
    /// Exclusive lock(1) + 8 B put + unlock(1) (uncontended).
    #[value(name = "lock_unlock_lat")]
    LockUnlockLat,
    /// accumulate(SUM, 1 × f64) + flush.
    #[value(name = "acc_lat")]
    AccLat,
    /// 1024 × accumulate(SUM, 1 × f64), one flush (million ops/s).
    #[value(name = "acc_rate")]
    AccRate,
    /// fetch_and_op(SUM, i64) + flush.
    #[value(name = "fop_lat")]
    FopLat,
    /// compare_and_swap(i64) + flush.
    #[value(name = "cas_lat")]
    CasLat,
    /// start(1) + 8 B put + complete at rank 0 against post(0) + wait at
    /// rank 1 (generalized active target; `pscw.rs`).
    #[value(name = "pscw_lat")]
    PscwLat,
    /// 8 B put + flush to rank 1, which puts it back when it sees it (half
    /// the round trip, as `ib_write_lat` reports).
    #[value(name = "put_pingpong")]
    PutPingpong,
    /// One step of a 2-D halo exchange at every rank: two strided column
    /// puts to the ring neighbours + fence (`halo.rs`; onesided mode only).
    #[value(name = "halo_lat")]
    HaloLat,
    /// lock_all + 8 B put to the last rank + unlock_all (uncontended; the
    /// cost of a short lock_all epoch to one far target).
    #[value(name = "lock_all_lat")]
    LockAllLat,
}

impl Op {
    pub const ALL: [Op; 15] = [
        Op::PutLat,
        Op::GetLat,
        Op::PutBw,
        Op::GetBw,
        Op::FenceLat,
        Op::MsgRate,
        Op::LockUnlockLat,
        Op::AccLat,
        Op::AccRate,
        Op::FopLat,
        Op::CasLat,
        Op::PscwLat,
        Op::PutPingpong,
        Op::HaloLat,
        Op::LockAllLat,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Op::PutLat => "put_lat",
            Op::GetLat => "get_lat",
            Op::PutBw => "put_bw",
            Op::GetBw => "get_bw",
            Op::FenceLat => "fence_lat",
            Op::MsgRate => "msg_rate",
            Op::LockUnlockLat => "lock_unlock_lat",
            Op::AccLat => "acc_lat",
            Op::AccRate => "acc_rate",
            Op::FopLat => "fop_lat",
            Op::CasLat => "cas_lat",
            Op::PscwLat => "pscw_lat",
            Op::PutPingpong => "put_pingpong",
            Op::HaloLat => "halo_lat",
            Op::LockAllLat => "lock_all_lat",
        }
    }

    pub fn code(self) -> u64 {
        Op::ALL.iter().position(|o| *o == self).unwrap_or(0) as u64
    }

    pub fn from_code(c: u64) -> Option<Op> {
        Op::ALL.get(c as usize).copied()
    }

    /// Whether the pattern uses the size list (the others use 8 B).
    pub fn sized(self) -> bool {
        matches!(self, Op::PutLat | Op::GetLat | Op::PutBw | Op::GetBw)
    }

    /// Whether the pattern runs on the atomic windows (`atomics.rs`).
    pub fn atomic(self) -> bool {
        matches!(self, Op::AccLat | Op::AccRate | Op::FopLat | Op::CasLat)
    }

    /// Whether the figure of merit is an operation rate.
    pub fn is_rate(self) -> bool {
        matches!(self, Op::MsgRate | Op::AccRate)
    }

    /// Whether the pattern runs outside the `lock_all` epoch (onesided mode).
    pub fn outside_lock_all(self) -> bool {
        matches!(
            self,
            Op::FenceLat | Op::LockUnlockLat | Op::PscwLat | Op::LockAllLat
        )
    }

    /// Whether the pattern writes (its last value is checked at the target).
    pub fn writes(self) -> bool {
        !matches!(self, Op::GetLat | Op::GetBw)
    }

    /// Whether the targets take part (collective synchronization; for
    /// `pscw_lat` only rank 1, the exposure side).
    pub fn collective(self) -> bool {
        matches!(
            self,
            Op::FenceLat | Op::PscwLat | Op::PutPingpong | Op::HaloLat
        )
    }

    /// Whether the figure of merit is bandwidth.
    pub fn is_bw(self) -> bool {
        matches!(self, Op::PutBw | Op::GetBw)
    }

    /// Operations per timed iteration.
    pub fn ops_per_iter(self, ranks: usize) -> usize {
        match self {
            Op::PutBw | Op::GetBw => BW_WINDOW,
            Op::MsgRate => RATE_BATCH.max(ranks.saturating_sub(1)),
            Op::AccRate => crate::atomics::ACC_BATCH,
            // A round trip is two one-way latencies: report one, as
            // `ib_write_lat` does.
            Op::PutPingpong => 2,
            _ => 1,
        }
    }
}

/// Through the window layer or directly on the transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    Onesided,
    Raw,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::Onesided => "onesided",
            Mode::Raw => "raw",
        }
    }
}
