//! What MPI RMA programs do, translated: the corner cases of MPI-3.1
//! chapter 11 an experienced user leans on (fence assertions, PSCW with
//! self and empty groups, locks to self and lock misuse, accumulate
//! ordering and the atomics on every element type, zero-length and
//! out-of-window accesses, request-based operations completed in any
//! order, windows of different sizes, many windows, dynamic and shared
//! windows). Each case is one function of a `World`; every case runs
//!
//! * in-process (`World::run_threads_with`) at 1, 2 and 4 ranks, under the
//!   back-end's own protocols, under the software ones (lock queue,
//!   active-message accumulates, aggregation) with manual progress, and on
//!   the direct path, and
//! * as real processes at 2 and 4 ranks on every provider and under every
//!   launcher of the test matrix (`tests/common`: `ONESIDED_TEST_PROVIDERS`,
//!   `ONESIDED_TEST_LAUNCHERS`), with the direct path, and over tcp with
//!   `ONESIDED_PROGRESS=manual` (one job per rank count runs every case in
//!   turn, to keep the launches few; `ONESIDED_AUDIT_CASES=a,b` picks
//!   cases).
//!
//! Every byte is checked; nothing synchronizes by sleeping.

#[macro_use]
mod common;

use std::time::Duration;

use onesided::config::{AccumulateMode, AggregateMode, Config, LockMode, ProgressMode};
use onesided::{AnyOp, Assert, ErrorKind, IntOp, LockType, NoOp, Op, Request, Window, World};

type Case = fn(&World) -> onesided::Result<()>;

/// Every case, by name.
const CASES: &[(&str, Case)] = &[
    ("fence_assertions", fence_assertions),
    ("fence_misuse", fence_misuse),
    ("pscw_self_and_empty", pscw_self_and_empty),
    ("pscw_ring_overlapping", pscw_ring_overlapping),
    ("pscw_misuse", pscw_misuse),
    ("lock_self_and_nested", lock_self_and_nested),
    ("lock_counter", lock_counter),
    ("lock_all_flushes", lock_all_flushes),
    ("lock_misuse", lock_misuse),
    ("accumulate_ordering", accumulate_ordering),
    ("atomics_every_type", atomics_every_type),
    ("accumulate_multi_element", accumulate_multi_element),
    ("op_type_mismatch", op_type_mismatch),
    ("zero_length_and_bounds", zero_length_and_bounds),
    ("requests_any_order", requests_any_order),
    ("uneven_windows", uneven_windows),
    ("many_windows", many_windows),
    ("interleaved_windows", interleaved_windows),
    ("free_in_epoch", free_in_epoch),
    ("dynamic_reattach", dynamic_reattach),
    ("shared_load_store", shared_load_store),
    ("cas_mutex", cas_mutex),
    ("no_op_reads_during_sums", no_op_reads_during_sums),
    ("empty_windows_everywhere", empty_windows_everywhere),
    ("mismatched_element_types", mismatched_element_types),
    ("no_locks_hint", no_locks_hint),
    ("after_free", after_free),
    ("peer_dropped_window", peer_dropped_window),
    ("pscw_many_to_one", pscw_many_to_one),
    ("dynamic_regions", dynamic_regions),
    ("requests_across_epochs", requests_across_epochs),
    ("group_windows", group_windows),
    ("threads_share_a_window", threads_share_a_window),
    (
        "threads_lock_different_targets",
        threads_lock_different_targets,
    ),
    (
        "threads_flush_their_own_targets",
        threads_flush_their_own_targets,
    ),
    (
        "other_epochs_after_plain_fence",
        other_epochs_after_plain_fence,
    ),
    ("self_spin_serves_peers", self_spin_serves_peers),
    ("huge_and_duplicate_arguments", huge_and_duplicate_arguments),
    ("many_groups", many_groups),
    ("lock_all_excludes_exclusive", lock_all_excludes_exclusive),
];

// ---- helpers ----------------------------------------------------------------

fn kind_of<T: std::fmt::Debug>(r: onesided::Result<T>, what: &str) -> (ErrorKind, String) {
    match r {
        Ok(v) => panic!("{what}: expected an error, got Ok({v:?})"),
        Err(e) => (e.kind(), e.to_string()),
    }
}

/// `r` is an epoch error whose message names `op`.
fn epoch_err<T: std::fmt::Debug>(r: onesided::Result<T>, op: &str) {
    let (k, msg) = kind_of(r, op);
    assert_eq!(k, ErrorKind::EpochMisuse, "{op}: {msg}");
    assert!(msg.contains(op), "{op}: {msg}");
}

/// `r` is an out-of-window error naming `rank`.
fn oow<T: std::fmt::Debug>(r: onesided::Result<T>, what: &str, rank: usize) {
    let (k, msg) = kind_of(r, what);
    assert_eq!(k, ErrorKind::OutOfWindow, "{what}: {msg}");
    assert!(msg.contains(&format!("rank {rank}")), "{what}: {msg}");
}

/// Panics once a spin loop outlived `SPIN_LIMIT` (a peer that never
/// answers would otherwise keep a test spinning forever).
struct Spin(std::time::Instant, &'static str);

const SPIN_LIMIT: Duration = Duration::from_secs(30);

impl Spin {
    fn new(what: &'static str) -> Spin {
        Spin(std::time::Instant::now(), what)
    }
    fn check(&self) {
        assert!(
            self.0.elapsed() < SPIN_LIMIT,
            "{}: still spinning after {SPIN_LIMIT:?}",
            self.1
        );
    }
}

fn val(rank: usize, i: usize) -> u64 {
    ((rank as u64 + 1) << 32) | (i as u64 * 0x9e37 + 1)
}

// ---- fence --------------------------------------------------------------------

/// The usual fence program with every assertion where it is true: a first
/// fence with NOPRECEDE, puts, a fence with NOSTORE, gets, a closing fence
/// with NOSUCCEED; then empty epochs, consecutive fences, a fence that both
/// opens nothing and closes nothing, local stores made visible by a fence,
/// and a fence after a passive-target epoch.
fn fence_assertions(w: &World) -> onesided::Result<()> {
    let (me, p) = (w.rank(), w.size());
    let (right, left) = ((me + 1) % p, (me + p - 1) % p);
    let n = 16;
    let mut win = Window::<u64>::allocate(w, n)?;
    win.fence(Assert::NOPRECEDE)?;
    let mine: Vec<u64> = (0..n).map(|i| val(me, i)).collect();
    win.put(right, 0, &mine)?;
    win.fence(Assert::NOSTORE)?;
    let got = win.local_to_vec()?;
    let want: Vec<u64> = (0..n).map(|i| val(left, i)).collect();
    assert_eq!(got, want, "after the fence: what the left neighbour put");
    let mut back = vec![0u64; n];
    win.get(right, 0, &mut back)?;
    win.fence(Assert::NOSUCCEED | Assert::NOPUT)?;
    assert_eq!(back, mine, "get of what we put into the right neighbour");
    // Outside any epoch after NOSUCCEED.
    epoch_err(win.put(right, 0, &[1]), "put");
    // Empty epochs and consecutive fences.
    win.fence(Assert::NOPRECEDE)?;
    for _ in 0..5 {
        win.fence(Assert::NONE)?;
    }
    win.fence(Assert::NOSUCCEED)?;
    win.fence(Assert::NOPRECEDE | Assert::NOSUCCEED)?;
    win.fence(Assert::NOPRECEDE | Assert::NOSUCCEED | Assert::NOSTORE | Assert::NOPUT)?;
    // Local stores, then a fence, then peers read them.
    win.local_write(0, &[val(me, 100), val(me, 101)])?;
    win.fence(Assert::NOPRECEDE)?;
    let mut two = [0u64; 2];
    win.get(left, 0, &mut two)?;
    win.fence(Assert::NOSUCCEED)?;
    assert_eq!(
        two,
        [val(left, 100), val(left, 101)],
        "local stores of the left"
    );
    // A passive-target epoch, then fences again.
    win.lock(right, LockType::Exclusive, Assert::NONE)?;
    win.put(right, 2, &[val(me, 200)])?;
    win.unlock(right)?;
    win.lock_all()?;
    win.put(right, 3, &[val(me, 300)])?;
    win.unlock_all()?;
    win.fence(Assert::NONE)?;
    let mut v = [0u64; 2];
    win.get(me, 2, &mut v)?;
    win.fence(Assert::NONE)?;
    assert_eq!(
        v,
        [val(left, 200), val(left, 300)],
        "passive epoch then fence"
    );
    // The last fence did not assert NOSUCCEED: free is allowed (no
    // operation since it).
    win.free()
}

/// Fence misuse: NOPRECEDE after operations, unknown bits, fence inside
/// lock_all or a lock; the window works afterwards.
fn fence_misuse(w: &World) -> onesided::Result<()> {
    let (me, p) = (w.rank(), w.size());
    let right = (me + 1) % p;
    let mut win = Window::<u32>::allocate(w, 4)?;
    win.fence(Assert::NONE)?;
    win.put(right, 0, &[7])?;
    epoch_err(win.fence(Assert::NOPRECEDE), "fence(NOPRECEDE)");
    let (k, msg) = kind_of(win.fence(Assert(64)), "fence with bad bits");
    assert_eq!(k, ErrorKind::InvalidArgument, "{msg}");
    assert!(msg.contains("0x40"), "{msg}");
    let (k, msg) = kind_of(win.fence(Assert::NOCHECK), "fence with NOCHECK");
    assert_eq!(k, ErrorKind::InvalidArgument, "{msg}");
    win.fence(Assert::NOSUCCEED)?;
    assert_eq!(win.local_to_vec()?, vec![7, 0, 0, 0]);
    win.lock_all()?;
    epoch_err(win.fence(Assert::NONE), "fence");
    win.unlock_all()?;
    win.lock(right, LockType::Shared, Assert::NONE)?;
    epoch_err(win.fence(Assert::NONE), "fence");
    win.unlock(right)?;
    win.fence(Assert::NONE)?;
    win.put(right, 1, &[8])?;
    win.fence(Assert::NONE)?;
    assert_eq!(win.local_to_vec()?, vec![7, 8, 0, 0]);
    win.free()
}

// ---- PSCW ---------------------------------------------------------------------

/// Every rank exposes to and accesses every rank, itself included; then
/// empty groups, which complete at once.
fn pscw_self_and_empty(w: &World) -> onesided::Result<()> {
    let (me, p) = (w.rank(), w.size());
    let all: Vec<usize> = (0..p).collect();
    let mut win = Window::<u64>::allocate(w, p)?;
    for round in 0..3u64 {
        win.post(&all, Assert::NONE)?;
        win.start(&all, Assert::NONE)?;
        for t in 0..p {
            win.put(t, me, &[val(me, t) + round])?;
        }
        win.complete()?;
        win.wait()?;
        let want: Vec<u64> = (0..p).map(|o| val(o, me) + round).collect();
        assert_eq!(win.local_to_vec()?, want, "round {round}");
    }
    // Self only.
    win.post(&[me], Assert::NONE)?;
    win.start(&[me], Assert::NONE)?;
    win.put(me, 0, &[42])?;
    let mut v = [0u64];
    win.get(me, 0, &mut v)?;
    win.complete()?;
    win.wait()?;
    assert_eq!(win.local_to_vec()?[0], 42);
    // Empty groups.
    win.post(&[], Assert::NONE)?;
    win.start(&[], Assert::NONE)?;
    win.complete()?;
    assert!(win.test()?, "test of an exposure to nobody");
    win.post(&[], Assert::NONE)?;
    win.wait()?;
    w.barrier()?;
    win.free()
}

/// A ring where each rank is at once exposed to its left neighbour and
/// accessing its right one; the exposure is closed by `test` polling (the
/// non-blocking `MPI_Win_test`), and a get in the access epoch.
fn pscw_ring_overlapping(w: &World) -> onesided::Result<()> {
    let (me, p) = (w.rank(), w.size());
    let (right, left) = ((me + 1) % p, (me + p - 1) % p);
    let n = 33;
    let mut win = Window::<u16>::allocate(w, n)?;
    for round in 0..4usize {
        win.post(&[left], Assert::NONE)?;
        win.start(&[right], Assert::NONE)?;
        let data: Vec<u16> = (0..n)
            .map(|i| (me * 1000 + round * 50 + i) as u16)
            .collect();
        win.put(right, 0, &data)?;
        win.complete()?;
        let spin = Spin::new("test() of the exposure epoch");
        while !win.test()? {
            spin.check();
        }
        let want: Vec<u16> = (0..n)
            .map(|i| (left * 1000 + round * 50 + i) as u16)
            .collect();
        assert_eq!(win.local_to_vec()?, want, "round {round}");
        // test after completion is an error: no exposure epoch is open.
        assert!(win.test().is_err(), "test with no exposure epoch");
    }
    // A get inside an access epoch; the target does not change its window.
    win.post(&[left], Assert::NOPUT)?;
    win.start(&[right], Assert::NONE)?;
    let mut got = vec![0u16; n];
    win.get(right, 0, &mut got)?;
    win.complete()?;
    win.wait()?;
    let want: Vec<u16> = (0..n).map(|i| (me * 1000 + 150 + i) as u16).collect();
    assert_eq!(got, want);
    win.free()
}

/// PSCW misuse: access to a rank outside the start group, complete
/// without start, wait without post, start twice, fence during PSCW.
fn pscw_misuse(w: &World) -> onesided::Result<()> {
    let (me, p) = (w.rank(), w.size());
    let right = (me + 1) % p;
    let left = (me + p - 1) % p;
    let mut win = Window::<u64>::allocate(w, 2)?;
    epoch_err(win.complete(), "complete");
    epoch_err(win.wait(), "wait");
    assert!(win.test().is_err(), "test without post");
    win.post(&[left], Assert::NONE)?;
    win.start(&[right], Assert::NONE)?;
    epoch_err(win.start(&[right], Assert::NONE), "start");
    if p > 2 {
        let other = (me + 2) % p;
        epoch_err(win.put(other, 0, &[1]), "put");
    }
    epoch_err(win.fence(Assert::NONE), "fence");
    epoch_err(win.lock_all(), "lock_all");
    win.put(right, 0, &[val(me, 0)])?;
    win.complete()?;
    win.wait()?;
    assert_eq!(win.local_to_vec()?, vec![val(left, 0), 0]);
    // Out of range ranks in groups.
    let (k, msg) = kind_of(win.start(&[p], Assert::NONE), "start(&[p])");
    assert!(
        k == ErrorKind::InvalidArgument || k == ErrorKind::EpochMisuse,
        "{msg}"
    );
    assert!(msg.contains(&p.to_string()), "{msg}");
    let (_, msg) = kind_of(win.post(&[p + 3], Assert::NONE), "post(&[p+3])");
    assert!(msg.contains(&(p + 3).to_string()), "{msg}");
    // An exposure epoch alone opens no access: a put is an epoch error.
    win.post(&[left], Assert::NONE)?;
    epoch_err(win.put(right, 0, &[1]), "put");
    epoch_err(win.flush(right), "flush");
    win.start(&[right], Assert::NONE)?;
    win.complete()?;
    win.wait()?;
    // lock_all with NOCHECK, then PSCW again.
    win.lock_all_with(Assert::NOCHECK)?;
    let mut v = [0u64; 2];
    win.get(right, 0, &mut v)?;
    win.unlock_all()?;
    assert_eq!(v, [val(me, 0), 0]);
    w.barrier()?;
    // The window still works.
    win.post(&[left], Assert::NONE)?;
    win.start(&[right], Assert::NONE)?;
    win.put(right, 1, &[val(me, 1)])?;
    win.complete()?;
    win.wait()?;
    assert_eq!(win.local_to_vec()?, vec![val(left, 0), val(left, 1)]);
    win.free()
}

// ---- locks ----------------------------------------------------------------------

/// Locks to oneself (both kinds), two locks on different targets held at
/// once and released in either order, an accumulate under a shared lock
/// from every rank.
fn lock_self_and_nested(w: &World) -> onesided::Result<()> {
    let (me, p) = (w.rank(), w.size());
    let right = (me + 1) % p;
    let mut win = Window::<i64>::allocate(w, 4)?;
    for kind in [LockType::Exclusive, LockType::Shared] {
        win.lock(me, kind, Assert::NONE)?;
        win.put(me, 0, &[me as i64 + 10])?;
        let mut v = [0i64];
        win.get(me, 0, &mut v)?;
        win.flush(me)?;
        win.unlock(me)?;
        assert_eq!(v[0], me as i64 + 10, "{kind:?} self lock");
    }
    w.barrier()?;
    if p > 1 && right != me {
        // Nested: self and right, released in both orders.
        for first_self in [true, false] {
            win.lock(me, LockType::Shared, Assert::NONE)?;
            win.lock(right, LockType::Shared, Assert::NONE)?;
            win.accumulate(right, 1, &[1], Op::Sum)?;
            win.accumulate(me, 2, &[1], Op::Sum)?;
            if first_self {
                win.unlock(me)?;
                win.unlock(right)?;
            } else {
                win.unlock(right)?;
                win.unlock(me)?;
            }
        }
    }
    w.barrier()?;
    let got = win.local_to_vec()?;
    let twice = if p > 1 { 2 } else { 0 };
    assert_eq!(got, vec![me as i64 + 10, twice, twice, 0]);
    win.free()
}

/// Every rank increments a counter on rank 0 under an exclusive lock with
/// get + put (not atomic: only exclusion makes the total exact), and a
/// second counter with fetch_and_op under a shared lock.
fn lock_counter(w: &World) -> onesided::Result<()> {
    let p = w.size() as u64;
    let rounds = 20u64;
    let mut win = Window::<u64>::allocate(w, 2)?;
    let mut seen = Vec::new();
    for _ in 0..rounds {
        win.lock(0, LockType::Exclusive, Assert::NONE)?;
        let mut v = [0u64];
        win.get(0, 0, &mut v)?;
        win.put(0, 0, &[v[0] + 1])?;
        win.unlock(0)?;
        win.lock(0, LockType::Shared, Assert::NONE)?;
        seen.push(win.fetch_and_op(0, 1, 1, Op::Sum)?);
        win.unlock(0)?;
    }
    // The fetched tickets are distinct across ranks.
    let all = w.allgather(&seen)?;
    let mut sorted = all.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, (0..p * rounds).collect::<Vec<_>>(), "tickets");
    if w.rank() == 0 {
        assert_eq!(win.local_to_vec()?, vec![p * rounds, p * rounds]);
    }
    w.barrier()?;
    win.free()
}

/// lock_all with flush, flush_local, flush_all, flush_local_all between
/// puts that overwrite each other, and a reader that sees the flushed data
/// after a barrier.
fn lock_all_flushes(w: &World) -> onesided::Result<()> {
    let (me, p) = (w.rank(), w.size());
    let right = (me + 1) % p;
    let left = (me + p - 1) % p;
    let n = 64;
    let mut win = Window::<u32>::allocate(w, n)?;
    win.lock_all()?;
    // Element n-1 is each rank's own: only the first n-1 go to the right.
    let mut buf: Vec<u32> = (0..n as u32 - 1).map(|i| i + 1000 * me as u32).collect();
    win.put(right, 0, &buf)?;
    win.flush_local(right)?;
    // The origin buffer may be reused after flush_local.
    buf.iter_mut().for_each(|x| *x += 7);
    win.put(right, 0, &buf[..n / 2])?;
    win.flush_local_all()?;
    win.flush(right)?;
    win.put(me, n - 1, &[0xdead])?;
    win.flush_all()?;
    w.barrier()?;
    let mut got = vec![0u32; n];
    win.get(left, 0, &mut got)?;
    win.flush(left)?;
    // The left neighbour's window holds what its own left neighbour put.
    let ll = (left + p - 1) % p;
    let mut want: Vec<u32> = (0..n as u32).map(|i| i + 1000 * ll as u32).collect();
    for x in &mut want[..n / 2] {
        *x += 7;
    }
    want[n - 1] = 0xdead;
    assert_eq!(got, want, "window of the left neighbour");
    win.unlock_all()?;
    // Flushes outside a passive epoch are errors.
    epoch_err(win.flush(right), "flush");
    epoch_err(win.flush_all(), "flush_all");
    epoch_err(win.flush_local(right), "flush_local");
    epoch_err(win.flush_local_all(), "flush_local_all");
    epoch_err(win.unlock_all(), "unlock_all");
    w.barrier()?;
    win.free()
}

/// lock while lock_all is held, lock_all while a lock is held, unlock of a
/// target never locked, double lock of one target, unlock_all after lock:
/// all errors, none a hang; the window works afterwards.
fn lock_misuse(w: &World) -> onesided::Result<()> {
    let (me, p) = (w.rank(), w.size());
    let right = (me + 1) % p;
    let mut win = Window::<u8>::allocate(w, 8)?;
    epoch_err(win.unlock(right), "unlock");
    epoch_err(win.unlock(me), "unlock");
    win.lock_all()?;
    epoch_err(win.lock(right, LockType::Exclusive, Assert::NONE), "lock");
    epoch_err(win.lock(me, LockType::Shared, Assert::NONE), "lock");
    epoch_err(win.lock_all(), "lock_all");
    epoch_err(win.unlock(right), "unlock");
    win.put(right, me % 8, &[me as u8 + 1])?;
    win.unlock_all()?;
    win.lock(right, LockType::Shared, Assert::NONE)?;
    epoch_err(win.lock_all(), "lock_all");
    epoch_err(win.lock(right, LockType::Shared, Assert::NONE), "lock");
    epoch_err(win.unlock_all(), "unlock_all");
    win.unlock(right)?;
    epoch_err(win.get(right, 0, &mut [0u8]), "get");
    let (k, msg) = kind_of(
        win.lock(p + 1, LockType::Shared, Assert::NONE),
        "lock of a rank outside",
    );
    assert!(k == ErrorKind::InvalidArgument, "{msg}");
    assert!(msg.contains(&(p + 1).to_string()), "{msg}");
    w.barrier()?;
    let mut want = vec![0u8; 8];
    want[((me + p - 1) % p) % 8] = ((me + p - 1) % p) as u8 + 1;
    assert_eq!(win.local_to_vec()?, want);
    win.free()
}

// ---- accumulate ------------------------------------------------------------------

/// MPI's default accumulate ordering: accumulates from one origin to one
/// location land in program order (REPLACE after REPLACE, SUM between
/// REPLACEs, a get_accumulate seeing the accumulates before it), in
/// lock_all, lock and fence epochs.
fn accumulate_ordering(w: &World) -> onesided::Result<()> {
    let (me, p) = (w.rank(), w.size());
    let target = (me + 1) % p;
    let mut win = Window::<u64>::allocate(w, p)?;
    let k = 100u64;
    win.lock_all()?;
    for i in 0..k {
        win.accumulate(target, me, &[i + 1], Op::Replace)?;
    }
    win.flush(target)?;
    let mut now = [0u64];
    win.get_accumulate(target, me, &[], &mut now, NoOp)?;
    assert_eq!(now[0], k, "REPLACEs in order");
    // SUM, REPLACE, SUM: only in order is the result 1000 + 3.
    for _ in 0..5 {
        win.accumulate(target, me, &[5], Op::Sum)?;
        win.accumulate(target, me, &[1000], Op::Replace)?;
        win.accumulate(target, me, &[3], Op::Sum)?;
        let mut r = [0u64];
        // Sees every accumulate issued before it.
        win.get_accumulate(target, me, &[1], &mut r, Op::Sum)?;
        assert_eq!(r[0], 1003, "get_accumulate after SUM/REPLACE/SUM");
        win.accumulate(target, me, &[0], Op::Replace)?;
    }
    win.unlock_all()?;
    w.barrier()?;
    // Fence epoch: REPLACE chain and a last SUM.
    win.fence(Assert::NONE)?;
    for i in 0..k {
        win.accumulate(target, me, &[i * 3], Op::Replace)?;
    }
    win.accumulate(target, me, &[1], Op::Sum)?;
    win.fence(Assert::NONE)?;
    let left = (me + p - 1) % p;
    let got = win.local_to_vec()?;
    assert_eq!(got[left], (k - 1) * 3 + 1, "fence epoch ordering");
    win.fence(Assert::NOSUCCEED)?;
    win.free()
}

macro_rules! atomics_for {
    ($w:expr, $t:ty, int) => {{
        let (me, p) = ($w.rank(), $w.size());
        let target = (me + 1) % p;
        // Elements 1..=p: one per origin; p+1..p+5: a block.
        let win = Window::<$t>::allocate($w, p + 5)?;
        atomics_for!(@common win, me, target, $t);
        let d = me + 1;
        let block = p + 1;
        let c = |x: i64| x as $t;
        let ops: [(IntOp, i64, i64); 6] = [
            (IntOp::Band, 3, 3),  // 7 & 3
            (IntOp::Bor, 8, 11),  // 3 | 8
            (IntOp::Bxor, 1, 10), // 11 ^ 1
            (IntOp::Land, 0, 0),
            (IntOp::Lor, 5, 1),
            (IntOp::Lxor, 1, 0),
        ];
        let mut before = 7i64;
        win.lock(target, LockType::Exclusive, Assert::NONE)?;
        for (op, arg, after) in ops {
            let old = win.fetch_and_op(target, d, c(arg), op)?;
            assert_eq!(old, c(before), "{} {op:?}", stringify!($t));
            before = after;
        }
        let now = win.fetch_and_op(target, d, c(0), NoOp)?;
        assert_eq!(now, c(0), "{}", stringify!($t));
        // Wrapping: MAX + 1 = MIN.
        win.accumulate(target, d, &[<$t>::MAX], Op::Replace)?;
        win.accumulate(target, d, &[1 as $t], Op::Sum)?;
        let now = win.fetch_and_op(target, d, c(0), NoOp)?;
        assert_eq!(now, <$t>::MIN, "{} wraps", stringify!($t));
        // MIN/MAX/PROD/SUM with the sign of the type (negative operands
        // are large ones on unsigned types), element-wise over several
        // elements: the expected values come from Rust's own arithmetic.
        let mut cur: Vec<$t> = vec![c(-3), c(5), c(-128), c(127)];
        win.accumulate(target, block, &cur, Op::Replace)?;
        let args: [(Op, [i64; 4]); 5] = [
            (Op::Max, [-5, -1, 3, -2]),
            (Op::Min, [-7, 2, -1, 1]),
            (Op::Sum, [-1, -9, 100, -127]),
            (Op::Prod, [-3, 7, -2, 11]),
            (Op::Max, [0, 0, 0, 0]),
        ];
        for (op, a) in args {
            let a: Vec<$t> = a.iter().map(|&x| c(x)).collect();
            let mut old = vec![c(0); 4];
            win.get_accumulate(target, block, &a, &mut old, op)?;
            assert_eq!(old, cur, "{} {op:?}: previous values", stringify!($t));
            for (x, y) in cur.iter_mut().zip(&a) {
                *x = match op {
                    Op::Max => (*x).max(*y),
                    Op::Min => (*x).min(*y),
                    Op::Sum => x.wrapping_add(*y),
                    Op::Prod => x.wrapping_mul(*y),
                    Op::Replace => *y,
                };
            }
        }
        let mut now = vec![c(0); 4];
        win.get(target, block, &mut now)?;
        win.flush(target)?;
        assert_eq!(now, cur, "{} after MIN/MAX/SUM/PROD", stringify!($t));
        win.unlock(target)?;
        $w.barrier()?;
        let mut win = win;
        win.free()?;
    }};
    ($w:expr, $t:ty, float) => {{
        let (me, p) = ($w.rank(), $w.size());
        let target = (me + 1) % p;
        let win = Window::<$t>::allocate($w, p + 5)?;
        atomics_for!(@common win, me, target, $t);
        // A fractional value and a NaN-free CAS on bits.
        let d = me + 1;
        win.lock(target, LockType::Exclusive, Assert::NONE)?;
        win.accumulate(target, d, &[0.25 as $t], Op::Replace)?;
        let old = win.fetch_and_op(target, d, 0.5 as $t, Op::Sum)?;
        assert_eq!(old, 0.25 as $t);
        let old = win.compare_and_swap(target, d, 0.75 as $t, -1.5 as $t)?;
        assert_eq!(old, 0.75 as $t);
        let now = win.fetch_and_op(target, d, 0 as $t, NoOp)?;
        assert_eq!(now, -1.5 as $t);
        // Signed MIN/MAX and PROD of negatives.
        win.accumulate(target, d, &[-2.5 as $t], Op::Max)?;
        win.accumulate(target, d, &[-4.0 as $t], Op::Prod)?;
        win.accumulate(target, d, &[-0.5 as $t], Op::Min)?;
        let now = win.fetch_and_op(target, d, 0 as $t, NoOp)?;
        // max(-1.5, -2.5) = -1.5; * -4 = 6; min(6, -0.5) = -0.5.
        assert_eq!(now, -0.5 as $t, "{} max/prod/min", stringify!($t));
        // compare_and_swap compares bits: -0.0 is not 0.0.
        win.accumulate(target, d, &[0.0 as $t], Op::Replace)?;
        let old = win.compare_and_swap(target, d, -0.0 as $t, 1.0 as $t)?;
        assert_eq!(old.to_bits(), (0.0 as $t).to_bits());
        let now = win.fetch_and_op(target, d, 0 as $t, NoOp)?;
        assert_eq!(now, 0.0 as $t, "{} CAS of -0.0 against 0.0", stringify!($t));
        win.unlock(target)?;
        $w.barrier()?;
        let mut win = win;
        win.free()?;
    }};
    (@common $win:ident, $me:ident, $target:ident, $t:ty) => {{
        let c = |x: i64| x as $t;
        let d = $me + 1; // an odd element offset for even ranks
        $win.lock_all()?;
        let steps: [(Op, i64, i64); 5] = [
            (Op::Sum, 3, 0),
            (Op::Prod, 2, 3),
            (Op::Max, 5, 6),
            (Op::Min, 4, 6),
            (Op::Replace, 9, 4),
        ];
        for (op, arg, old_want) in steps {
            let old = $win.fetch_and_op($target, d, c(arg), op)?;
            assert_eq!(old, c(old_want), "{} {op:?}", stringify!($t));
        }
        let now = $win.fetch_and_op($target, d, c(0), NoOp)?;
        assert_eq!(now, c(9), "{} NO_OP", stringify!($t));
        let old = $win.compare_and_swap($target, d, c(9), c(7))?;
        assert_eq!(old, c(9), "{} CAS hit", stringify!($t));
        let old = $win.compare_and_swap($target, d, c(1), c(2))?;
        assert_eq!(old, c(7), "{} CAS miss", stringify!($t));
        let mut r = [c(0); 1];
        $win.get_accumulate($target, d, &[], &mut r, NoOp)?;
        assert_eq!(r[0], c(7), "{} get_accumulate NO_OP", stringify!($t));
        // The neighbours' elements are untouched.
        let mut all = vec![c(0); $win.len()];
        $win.get($target, 0, &mut all)?;
        $win.flush($target)?;
        assert_eq!(all[d], c(7));
        assert_eq!(all[0], c(0), "{} element 0 untouched", stringify!($t));
        $win.unlock_all()?;
    }};
}

/// fetch_and_op with every operation and compare_and_swap (hit and miss)
/// on each of the ten element types, at element offsets other than 0,
/// and the NO_OP reads.
fn atomics_every_type(w: &World) -> onesided::Result<()> {
    atomics_for!(w, i8, int);
    atomics_for!(w, u8, int);
    atomics_for!(w, i16, int);
    atomics_for!(w, u16, int);
    atomics_for!(w, i32, int);
    atomics_for!(w, u32, int);
    atomics_for!(w, i64, int);
    atomics_for!(w, u64, int);
    atomics_for!(w, f32, float);
    atomics_for!(w, f64, float);
    Ok(())
}

/// Accumulates of many elements at a displacement, from every rank at
/// once (fence), on 2-, 4- and 8-byte elements; get_accumulate of many
/// elements returns the old values.
fn accumulate_multi_element(w: &World) -> onesided::Result<()> {
    let (me, p) = (w.rank(), w.size());
    let n = 37;
    let off = 3;
    // i16, SUM of negatives and positives.
    let mut a = Window::<i16>::allocate(w, n + off + 2)?;
    a.fence(Assert::NONE)?;
    let data: Vec<i16> = (0..n).map(|i| i as i16 - 18 + me as i16).collect();
    for t in 0..p {
        a.accumulate(t, off, &data, Op::Sum)?;
    }
    a.fence(Assert::NONE)?;
    let got = a.local_to_vec()?;
    for (i, g) in got.iter().enumerate() {
        let want = if (off..off + n).contains(&i) {
            let j = (i - off) as i16;
            (0..p as i16).map(|r| j - 18 + r).sum::<i16>()
        } else {
            0
        };
        assert_eq!(*g, want, "i16 element {i}");
    }
    a.fence(Assert::NOSUCCEED)?;
    a.free()?;
    // f64 MAX from everyone, then get_accumulate REPLACE of all.
    let mut b = Window::<f64>::allocate(w, n + off)?;
    b.fence(Assert::NONE)?;
    let data: Vec<f64> = (0..n).map(|i| (i * p + me) as f64 * 0.5).collect();
    for t in 0..p {
        b.accumulate(t, off, &data, Op::Max)?;
    }
    b.fence(Assert::NONE)?;
    let got = b.local_to_vec()?;
    for i in 0..n {
        assert_eq!(
            got[off + i],
            (i * p + p - 1) as f64 * 0.5,
            "f64 element {i}"
        );
    }
    assert_eq!(&got[..off], &[0.0; 3]);
    b.fence(Assert::NONE)?;
    if me == 0 {
        let mut old = vec![0f64; n];
        let new: Vec<f64> = (0..n).map(|i| -(i as f64)).collect();
        b.get_accumulate(p - 1, off, &new, &mut old, Op::Replace)?;
        for (i, o) in old.iter().enumerate() {
            assert_eq!(*o, (i * p + p - 1) as f64 * 0.5, "old {i}");
        }
    }
    b.fence(Assert::NONE)?;
    if me == p - 1 {
        let got = b.local_to_vec()?;
        for i in 0..n {
            assert_eq!(got[off + i], -(i as f64), "replaced {i}");
        }
    }
    b.fence(Assert::NOSUCCEED)?;
    b.free()?;
    // u32 raccumulate of BXOR with a request.
    let mut c = Window::<u32>::allocate(w, n)?;
    c.lock_all()?;
    let right = (me + 1) % p;
    let r = c.raccumulate(right, 0, vec![0x5a5a_0000u32 | me as u32; n], IntOp::Bxor)?;
    let back = r.wait()?;
    assert_eq!(back.len(), n);
    c.unlock_all()?;
    w.barrier()?;
    let left = (me + p - 1) % p;
    assert_eq!(c.local_to_vec()?, vec![0x5a5a_0000u32 | left as u32; n]);
    c.free()
}

/// Operations the type or call does not take, chosen at run time, and
/// mismatched buffer lengths: `InvalidArgument`, nothing sent, the window
/// works afterwards.
fn op_type_mismatch(w: &World) -> onesided::Result<()> {
    let (me, p) = (w.rank(), w.size());
    let right = (me + 1) % p;
    let mut win = Window::<f64>::allocate(w, 4)?;
    win.lock_all()?;
    for op in [
        AnyOp::Band,
        AnyOp::Bor,
        AnyOp::Bxor,
        AnyOp::Land,
        AnyOp::Lor,
        AnyOp::Lxor,
    ] {
        let (k, msg) = kind_of(win.accumulate(right, 0, &[1.0], op), "int op on f64");
        assert_eq!(k, ErrorKind::InvalidArgument, "{msg}");
        assert!(msg.contains(op.name()), "{msg}");
        let (k, _) = kind_of(win.fetch_and_op(right, 0, 1.0, op), "int op on f64");
        assert_eq!(k, ErrorKind::InvalidArgument);
    }
    let (k, msg) = kind_of(
        win.accumulate(right, 0, &[1.0], AnyOp::NoOp),
        "NO_OP accumulate",
    );
    assert_eq!(k, ErrorKind::InvalidArgument, "{msg}");
    let mut res = [0.0f64; 2];
    let (k, msg) = kind_of(
        win.get_accumulate(right, 0, &[1.0], &mut res, Op::Sum),
        "lengths differ",
    );
    assert_eq!(k, ErrorKind::InvalidArgument, "{msg}");
    let (k, _) = kind_of(
        win.get_accumulate(right, 0, &[], &mut res, Op::Sum),
        "empty origin with SUM",
    );
    assert_eq!(k, ErrorKind::InvalidArgument);
    let (k, _) = kind_of(
        win.rget_accumulate(right, 0, &[1.0, 2.0], vec![0.0f64; 3], Op::Sum),
        "rget_accumulate lengths differ",
    );
    assert_eq!(k, ErrorKind::InvalidArgument);
    let (k, _) = kind_of(
        win.raccumulate(right, 0, vec![1.0f64], AnyOp::Band),
        "raccumulate BAND on f64",
    );
    assert_eq!(k, ErrorKind::InvalidArgument);
    let (k, _) = kind_of(
        win.raccumulate(right, 0, vec![1.0f64], AnyOp::NoOp),
        "raccumulate NO_OP",
    );
    assert_eq!(k, ErrorKind::InvalidArgument);
    win.accumulate(right, 1, &[2.5], AnyOp::Sum)?;
    win.flush(right)?;
    win.unlock_all()?;
    w.barrier()?;
    assert_eq!(win.local_to_vec()?, vec![0.0, 2.5, 0.0, 0.0]);
    win.free()
}

// ---- bounds ------------------------------------------------------------------------

/// Zero-length put/get/accumulate at the start and at the end of the
/// window succeed; out-of-window accesses of every kind are
/// `OutOfWindow` naming the rank, huge displacements do not overflow,
/// and the next correct operation works.
fn zero_length_and_bounds(w: &World) -> onesided::Result<()> {
    let (me, p) = (w.rank(), w.size());
    let right = (me + 1) % p;
    let n = 8;
    let mut win = Window::<u32>::allocate(w, n)?;
    // Zero-length operations in every kind of epoch.
    win.fence(Assert::NONE)?;
    win.put(right, 0, &[])?;
    win.put(right, n, &[])?;
    win.get(right, n, &mut [])?;
    win.accumulate(right, 0, &[], Op::Sum)?;
    win.get_accumulate(right, n, &[], &mut [], NoOp)?;
    win.fence(Assert::NOSUCCEED)?;
    win.lock(right, LockType::Shared, Assert::NONE)?;
    win.put(right, 0, &[])?;
    win.get(right, 0, &mut [])?;
    win.unlock(right)?;
    win.lock_all()?;
    let rq = win.rput(right, n, Vec::<u32>::new())?;
    rq.wait()?;
    let rq = win.rget(right, 0, Vec::<u32>::new())?;
    assert!(rq.wait()?.is_empty());
    // Out of the window, each kind.
    oow(win.put(right, n, &[1]), "put past the end", right);
    oow(
        win.put(right, n - 1, &[1, 2]),
        "put straddling the end",
        right,
    );
    oow(
        win.get(right, n + 100, &mut [0; 2]),
        "get past the end",
        right,
    );
    oow(win.accumulate(right, n, &[1], Op::Sum), "accumulate", right);
    oow(
        win.fetch_and_op(right, n, 1, Op::Sum),
        "fetch_and_op",
        right,
    );
    oow(
        win.compare_and_swap(right, n, 0, 1),
        "compare_and_swap",
        right,
    );
    oow(
        win.get_accumulate(right, n - 1, &[1, 1], &mut [0, 0], Op::Sum),
        "get_accumulate",
        right,
    );
    oow(win.rput(right, n, vec![1u32]), "rput", right);
    oow(win.rget(right, n, vec![0u32; 1]), "rget", right);
    oow(
        win.raccumulate(right, n, vec![1u32], Op::Sum),
        "raccumulate",
        right,
    );
    oow(win.put(me, n, &[1]), "put to self past the end", me);
    // Displacements near usize::MAX: an error, no overflow, no panic.
    for disp in [usize::MAX, usize::MAX / 4, usize::MAX - 1] {
        oow(win.put(right, disp, &[1]), "put at a huge disp", right);
        oow(win.get(right, disp, &mut [0]), "get at a huge disp", right);
        oow(
            win.accumulate(right, disp, &[1], Op::Sum),
            "accumulate at a huge disp",
            right,
        );
        oow(
            win.fetch_and_op(right, disp, 1, Op::Sum),
            "fetch_and_op huge",
            right,
        );
    }
    // A message naming the range.
    let msg = win.put(right, n - 1, &[1, 2]).unwrap_err().to_string();
    assert!(
        msg.contains(&(n - 1).to_string()),
        "names the offset: {msg}"
    );
    // Ranks outside the job.
    let (k, msg) = kind_of(win.put(p, 0, &[1]), "put to rank p");
    assert_eq!(k, ErrorKind::InvalidArgument, "{msg}");
    assert!(msg.contains(&format!("rank {p}")), "{msg}");
    // The next correct operations work.
    win.put(right, n - 1, &[0xabcd])?;
    let v = win.fetch_and_op(right, 0, 5, Op::Sum)?;
    assert_eq!(v, 0);
    win.unlock_all()?;
    // Outside any epoch: each kind.
    epoch_err(win.put(right, 0, &[1]), "put");
    epoch_err(win.get(right, 0, &mut [0]), "get");
    epoch_err(win.accumulate(right, 0, &[1], Op::Sum), "accumulate");
    epoch_err(win.fetch_and_op(right, 0, 1, Op::Sum), "fetch_and_op");
    epoch_err(win.compare_and_swap(right, 0, 1, 2), "compare_and_swap");
    epoch_err(win.rput(right, 0, vec![1u32]), "rput");
    w.barrier()?;
    let mut want = vec![0u32; n];
    want[0] = 5;
    want[n - 1] = 0xabcd;
    assert_eq!(win.local_to_vec()?, want);
    win.free()
}

// ---- requests ---------------------------------------------------------------------

/// rput/rget/raccumulate/rget_accumulate completed by wait in reverse
/// order, by wait_any, by test polling; a dropped request; a request
/// waited after the epoch closed.
fn requests_any_order(w: &World) -> onesided::Result<()> {
    let (me, p) = (w.rank(), w.size());
    let right = (me + 1) % p;
    let left = (me + p - 1) % p;
    let n = 100;
    let mut win = Window::<u64>::allocate(w, 4 * n + 3)?;
    win.lock_all()?;
    let a = win.rput(right, 0, (0..n).map(|i| val(me, i)).collect::<Vec<_>>())?;
    let b = win.raccumulate(right, n, vec![me as u64 + 1; n], Op::Sum)?;
    let c = win.rput(right, 2 * n, vec![val(me, 7); n])?;
    // Reverse order.
    c.wait()?;
    b.wait()?;
    a.wait()?;
    win.flush(right)?;
    w.barrier()?;
    // Reads of what the left neighbour wrote into our window, in any order.
    let g1 = win.rget(me, 0, vec![0u64; n])?;
    let g2 = win.rget_accumulate(me, n, &[], vec![0u64; n], NoOp)?;
    let g3 = win.rget(right, 2 * n, vec![0u64; n])?;
    let mut reqs = vec![g1, g2, g3];
    let mut done = vec![None; 3];
    let mut order = vec![0usize, 1, 2];
    while let Some((i, buf)) = Request::wait_any(&mut reqs)? {
        let idx = order.remove(i);
        done[idx] = Some(buf);
    }
    assert!(reqs.is_empty());
    drop(reqs);
    let want0: Vec<u64> = (0..n).map(|i| val(left, i)).collect();
    assert_eq!(done[0].as_deref(), Some(&want0[..]), "rget of self");
    assert_eq!(
        done[1].as_deref(),
        Some(&vec![left as u64 + 1; n][..]),
        "rget_accumulate NO_OP"
    );
    assert_eq!(
        done[2].as_deref(),
        Some(&vec![val(me, 7); n][..]),
        "rget of the right neighbour"
    );
    // Test polling.
    let t = win.rget(right, 0, vec![0u64; 4])?;
    let spin = Spin::new("Request::test");
    while !t.test()? {
        spin.check();
    }
    let got = t.wait()?;
    assert_eq!(got, (0..4).map(|i| val(me, i)).collect::<Vec<_>>());
    // A dropped request: the epoch still completes it.
    let d = win.rput(right, 3 * n, vec![val(me, 9); n])?;
    drop(d);
    // Put and accumulate to one location are ordered only by a flush.
    win.flush(right)?;
    let d2 = win.raccumulate(right, 3 * n, vec![1u64; n], Op::Sum)?;
    drop(d2);
    // A request outliving its epoch's end (elements no other operation
    // of the epoch touches: a put and an accumulate to one location
    // conflict).
    let late = win.rput(right, 4 * n + 1, vec![val(me, 11); 2])?;
    win.unlock_all()?;
    late.wait()?;
    w.barrier()?;
    let got = win.local_to_vec()?;
    assert!(
        got[3 * n..4 * n].iter().all(|&x| x == val(left, 9) + 1),
        "dropped rput then dropped raccumulate"
    );
    assert_eq!(&got[4 * n..], &[0, val(left, 11), val(left, 11)]);
    // wait_all.
    win.lock_all()?;
    let reqs = (0..p)
        .map(|t| win.rget(t, 0, vec![0u64; 2]))
        .collect::<onesided::Result<Vec<_>>>()?;
    let bufs = Request::wait_all(reqs)?;
    for (t, b) in bufs.iter().enumerate() {
        let l = (t + p - 1) % p;
        assert_eq!(b, &vec![val(l, 0), val(l, 1)], "wait_all buffer {t}");
    }
    win.unlock_all()?;
    w.barrier()?;
    win.free()
}

// ---- windows -------------------------------------------------------------------------

/// Windows whose sizes differ per rank, with size 0 on the odd ranks:
/// len_of says each, zero-length access to an empty window works, any
/// other access to it is OutOfWindow.
fn uneven_windows(w: &World) -> onesided::Result<()> {
    let (me, p) = (w.rank(), w.size());
    let len = |r: usize| if r % 2 == 1 { 0 } else { 5 + 3 * r };
    let mut win = Window::<u32>::allocate(w, len(me))?;
    assert_eq!(win.len(), len(me));
    for r in 0..p {
        assert_eq!(win.len_of(r)?, len(r), "len_of({r})");
    }
    assert!(win.len_of(p).is_err());
    win.fence(Assert::NONE)?;
    for t in 0..p {
        win.put(t, 0, &[])?;
        if len(t) == 0 {
            oow(win.put(t, 0, &[1]), "put to an empty window", t);
        } else {
            // The last element, each origin in turn writing its rank into
            // one element of its own.
            let d = len(t) - 1 - me.min(len(t) - 1);
            if me < len(t) {
                win.put(t, d, &[me as u32 + 1])?;
            }
            oow(win.get(t, len(t), &mut [0]), "get past an uneven end", t);
        }
    }
    win.fence(Assert::NONE)?;
    let got = win.local_to_vec()?;
    let mut want = vec![0u32; len(me)];
    for o in 0..p {
        if o < len(me) {
            want[len(me) - 1 - o] = o as u32 + 1;
        }
    }
    assert_eq!(got, want);
    win.fence(Assert::NOSUCCEED)?;
    win.free()?;
    // create with the caller's memory, different per rank, back by into_vec.
    let mine: Vec<u64> = (0..len(me)).map(|i| val(me, i)).collect();
    let win = Window::create(w, mine.clone())?;
    win.lock_all()?;
    for t in 0..p {
        let mut got = vec![0u64; len(t)];
        win.get(t, 0, &mut got)?;
        win.flush(t)?;
        assert_eq!(got, (0..len(t)).map(|i| val(t, i)).collect::<Vec<_>>());
    }
    win.unlock_all()?;
    w.barrier()?;
    assert_eq!(win.into_vec()?, mine);
    Ok(())
}

/// Creating and freeing many windows in a loop (more than the window
/// directory's slots), each used once: nothing leaks.
fn many_windows(w: &World) -> onesided::Result<()> {
    let (me, p) = (w.rank(), w.size());
    let right = (me + 1) % p;
    let left = (me + p - 1) % p;
    for i in 0..300u64 {
        let mut win = Window::<u64>::allocate(w, 2)?;
        win.fence(Assert::NOPRECEDE)?;
        win.put(right, (i % 2) as usize, &[i + me as u64])?;
        win.fence(Assert::NOSUCCEED)?;
        assert_eq!(
            win.local_to_vec()?[(i % 2) as usize],
            i + left as u64,
            "window {i}"
        );
        win.free()?;
    }
    // Dynamic and shared ones too, fewer.
    for i in 0..40u64 {
        let win = Window::<u64>::create_dynamic(w)?;
        let d = win.attach(vec![i; 4])?;
        let disps = w.allgather(&[d as u64])?;
        win.lock_all()?;
        let mut v = [0u64; 4];
        win.get(right, disps[right] as usize, &mut v)?;
        win.unlock_all()?;
        assert_eq!(v, [i; 4]);
        w.barrier()?;
        win.detach(d)?;
        let mut win = win;
        win.free()?;
    }
    Ok(())
}

/// Several windows alive at once, of different element types, in
/// different epochs at the same time (fence on one, lock_all on another,
/// PSCW on a third).
fn interleaved_windows(w: &World) -> onesided::Result<()> {
    let (me, p) = (w.rank(), w.size());
    let right = (me + 1) % p;
    let left = (me + p - 1) % p;
    let mut a = Window::<u8>::allocate(w, 16)?;
    let mut b = Window::<u64>::allocate(w, 16)?;
    let mut c = Window::<i32>::allocate(w, 16)?;
    a.fence(Assert::NOPRECEDE)?;
    b.lock_all()?;
    c.post(&[left], Assert::NONE)?;
    c.start(&[right], Assert::NONE)?;
    for i in 0..16usize {
        a.put(right, i, &[(me * 16 + i) as u8])?;
        b.accumulate(right, i, &[i as u64], Op::Sum)?;
        c.put(right, i, &[-((me * 100 + i) as i32)])?;
    }
    c.complete()?;
    b.flush_all()?;
    a.fence(Assert::NOSUCCEED)?;
    c.wait()?;
    b.unlock_all()?;
    w.barrier()?;
    let av = a.local_to_vec()?;
    let bv = b.local_to_vec()?;
    let cv = c.local_to_vec()?;
    for i in 0..16usize {
        assert_eq!(av[i], (left * 16 + i) as u8, "a[{i}]");
        assert_eq!(bv[i], i as u64, "b[{i}]");
        assert_eq!(cv[i], -((left * 100 + i) as i32), "c[{i}]");
    }
    // Freed in another order than created.
    b.free()?;
    c.free()?;
    a.free()
}

/// free inside an access epoch is an error (the window stays usable and
/// its peers, already waiting in their own free, are not disturbed); a
/// rank that frees first waits for the others.
fn free_in_epoch(w: &World) -> onesided::Result<()> {
    let (me, p) = (w.rank(), w.size());
    let right = (me + 1) % p;
    let left = (me + p - 1) % p;
    let mut win = Window::<u64>::allocate(w, 2)?;
    if me % 2 == 1 {
        win.lock_all()?;
        win.put(right, 0, &[val(me, 0)])?;
        epoch_err(win.free(), "free");
        win.put(right, 1, &[val(me, 1)])?;
        win.unlock_all()?;
        win.lock(right, LockType::Exclusive, Assert::NONE)?;
        epoch_err(win.free(), "free");
        win.unlock(right)?;
    }
    // Even ranks are in free at once: it waits for the odd ones, whose
    // puts into them completed at their unlock_all, before it returns.
    let left_wrote = left % 2 == 1 && left != me;
    let mem = win.into_vec()?;
    if left_wrote {
        assert_eq!(mem, vec![val(left, 0), val(left, 1)], "puts before free");
    }
    Ok(())
}

// ---- dynamic windows ------------------------------------------------------------------

/// attach, access, detach, access after detach (OutOfWindow), re-attach
/// the same buffer (same address), access again.
fn dynamic_reattach(w: &World) -> onesided::Result<()> {
    let (me, p) = (w.rank(), w.size());
    let right = (me + 1) % p;
    let left = (me + p - 1) % p;
    let mut win = Window::<u64>::create_dynamic(w)?;
    let n = 8;
    let d = win.attach(vec![0u64; n])?;
    let disps = w.allgather(&[d as u64])?;
    let rd = disps[right] as usize;
    win.lock_all()?;
    win.put(right, rd, &(0..n).map(|i| val(me, i)).collect::<Vec<_>>())?;
    win.flush(right)?;
    win.unlock_all()?;
    w.barrier()?;
    let buf = win.detach(d)?;
    assert_eq!(buf, (0..n).map(|i| val(left, i)).collect::<Vec<_>>());
    w.barrier()?;
    // After detach: an error naming the rank, no crash, the pair works on.
    win.lock_all()?;
    oow(win.put(right, rd, &[1]), "put after detach", right);
    oow(win.get(right, rd, &mut [0]), "get after detach", right);
    oow(
        win.fetch_and_op(right, rd, 1, Op::Sum),
        "fetch_and_op after detach",
        right,
    );
    win.unlock_all()?;
    w.barrier()?;
    // Re-attach the same buffer: same address again.
    let d2 = win.attach(buf)?;
    assert_eq!(
        d2, d,
        "re-attach of the same Vec gives the same displacement"
    );
    w.barrier()?;
    win.lock_all()?;
    let old = win.fetch_and_op(right, rd + 1, 5, Op::Sum)?;
    assert_eq!(old, val(me, 1), "after re-attach");
    let mut v = [0u64; 2];
    win.get(right, rd, &mut v)?;
    win.flush(right)?;
    assert_eq!(v, [val(me, 0), val(me, 1) + 5]);
    win.unlock_all()?;
    w.barrier()?;
    let back = win.detach(d2)?;
    assert_eq!(back[1], val(left, 1) + 5);
    assert!(win.detach(d2).is_err(), "detach twice");
    w.barrier()?;
    win.free()
}

// ---- shared windows ---------------------------------------------------------------------

/// allocate_shared, shared_query, stores through the pointer, the MPI
/// "lock_all; store; sync; barrier; sync; load" pattern, and RMA on the
/// same memory.
fn shared_load_store(w: &World) -> onesided::Result<()> {
    let (me, p) = (w.rank(), w.size());
    let right = (me + 1) % p;
    let left = (me + p - 1) % p;
    let n = 10;
    let mut win = match Window::<u64>::allocate_shared(w, n) {
        Ok(win) => win,
        // A back-end without node-shared memory says so, on every rank.
        Err(e) if e.kind() == ErrorKind::Unsupported => return Ok(()),
        Err(e) => return Err(e),
    };
    let seg = win.shared_query(me)?;
    assert_eq!(seg.len(), n);
    win.lock_all()?;
    seg.write(0, &(0..n).map(|i| val(me, i)).collect::<Vec<_>>())?;
    win.sync()?;
    w.barrier()?;
    win.sync()?;
    let theirs = win.shared_query(right)?;
    assert_eq!(theirs.len(), n);
    assert_eq!(
        theirs.to_vec()?,
        (0..n).map(|i| val(right, i)).collect::<Vec<_>>()
    );
    // RMA into the same memory, seen by load after flush + barrier.
    win.accumulate(right, 0, &[1], Op::Sum)?;
    win.flush(right)?;
    w.barrier()?;
    win.sync()?;
    let mut first = [0u64];
    seg.read(0, &mut first)?;
    assert_eq!(first[0], val(me, 0) + 1, "accumulate from the left {left}");
    win.unlock_all()?;
    drop(theirs);
    drop(seg);
    win.free()
}

// ---- classic patterns and more misuse -----------------------------------------------

/// The classic MPI mutex: a lock word on rank 0 taken by
/// compare_and_swap in a loop inside lock_all, a counter incremented with
/// get + put (not atomic) while holding it, flushed before release by an
/// atomic REPLACE. Only mutual exclusion makes the total exact.
fn cas_mutex(w: &World) -> onesided::Result<()> {
    let (me, p) = (w.rank(), w.size());
    let rounds = 15u64;
    let mut win = Window::<u64>::allocate(w, 2)?;
    win.lock_all()?;
    for _ in 0..rounds {
        let spin = Spin::new("compare_and_swap on the lock word");
        while win.compare_and_swap(0, 0, 0, me as u64 + 1)? != 0 {
            spin.check();
        }
        let mut v = [0u64];
        win.get(0, 1, &mut v)?;
        win.flush(0)?;
        win.put(0, 1, &[v[0] + 1])?;
        win.flush(0)?;
        let old = win.fetch_and_op(0, 0, 0, Op::Replace)?;
        assert_eq!(old, me as u64 + 1, "the lock word held our mark");
    }
    win.unlock_all()?;
    w.barrier()?;
    if me == 0 {
        assert_eq!(win.local_to_vec()?, vec![0, p as u64 * rounds]);
    }
    w.barrier()?;
    win.free()
}

/// get_accumulate NO_OP and fetch_and_op NO_OP are atomic reads: while
/// every other rank adds 1 to a counter, rank 0's reads never go down and
/// never see a torn value; the final count is exact.
fn no_op_reads_during_sums(w: &World) -> onesided::Result<()> {
    let (me, p) = (w.rank(), w.size());
    let adds = 200u64;
    // 0x0001_0001... per add: a torn read would break the pattern.
    let step = 0x0000_0001_0000_0001u64;
    let mut win = Window::<u64>::allocate(w, 1)?;
    win.lock_all()?;
    if me == 0 {
        let mut last = 0u64;
        for i in 0..4 * adds {
            let v = if i % 2 == 0 {
                win.fetch_and_op(0, 0, 0, NoOp)?
            } else {
                let mut r = [0u64];
                win.get_accumulate(0, 0, &[], &mut r, NoOp)?;
                r[0]
            };
            assert_eq!(v >> 32, v & 0xffff_ffff, "torn read {v:#x}");
            assert!(v >= last, "went down: {v:#x} after {last:#x}");
            last = v;
        }
    } else {
        for _ in 0..adds {
            win.accumulate(0, 0, &[step], Op::Sum)?;
        }
    }
    win.unlock_all()?;
    w.barrier()?;
    if me == 0 {
        assert_eq!(win.local_to_vec()?, vec![step * adds * (p as u64 - 1)]);
    }
    w.barrier()?;
    win.free()
}

/// Windows of zero elements on every rank: every epoch kind works,
/// zero-length accesses succeed, others are OutOfWindow.
fn empty_windows_everywhere(w: &World) -> onesided::Result<()> {
    let (me, p) = (w.rank(), w.size());
    let right = (me + 1) % p;
    let left = (me + p - 1) % p;
    let mut win = Window::<u16>::allocate(w, 0)?;
    assert!(win.is_empty());
    win.fence(Assert::NONE)?;
    win.put(right, 0, &[])?;
    oow(win.put(right, 0, &[1]), "put to an empty window", right);
    win.fence(Assert::NOSUCCEED)?;
    win.lock(right, LockType::Exclusive, Assert::NONE)?;
    win.get(right, 0, &mut [])?;
    oow(
        win.fetch_and_op(right, 0, 1, Op::Sum),
        "fetch_and_op",
        right,
    );
    win.unlock(right)?;
    win.post(&[left], Assert::NONE)?;
    win.start(&[right], Assert::NONE)?;
    win.put(right, 0, &[])?;
    win.complete()?;
    win.wait()?;
    win.free()?;
    let win = Window::create(w, Vec::<u32>::new())?;
    assert!(win.into_vec()?.is_empty());
    Ok(())
}

/// Ranks that create one window with different element types (an MPI
/// program whose ranks disagree on the datatype): an error on every rank
/// at creation or at first access, never a silent reinterpretation.
fn mismatched_element_types(w: &World) -> onesided::Result<()> {
    let (me, p) = (w.rank(), w.size());
    if p == 1 {
        return Ok(());
    }
    let right = (me + 1) % p;
    if me % 2 == 0 {
        match Window::<u64>::allocate(w, 4) {
            Err(e) => assert!(
                e.to_string().contains("u64") || e.to_string().contains("type"),
                "{e}"
            ),
            Ok(mut win) => {
                win.lock_all()?;
                let r = win.put(right, 0, &[1]);
                let r = r.and_then(|_| win.flush(right));
                let e = r.expect_err("a u64 put into a u32 window");
                assert!(e.to_string().contains("type"), "{e}");
                win.unlock_all()?;
                win.free()?;
            }
        }
    } else {
        match Window::<u32>::allocate(w, 4) {
            Err(e) => assert!(
                e.to_string().contains("u32") || e.to_string().contains("type"),
                "{e}"
            ),
            Ok(mut win) => {
                win.lock_all()?;
                let r = win.put(right, 0, &[1]);
                let r = r.and_then(|_| win.flush(right));
                if right % 2 == 0 {
                    let e = r.expect_err("a u32 put into a u64 window");
                    assert!(e.to_string().contains("type"), "{e}");
                } else {
                    r?;
                }
                win.unlock_all()?;
                win.free()?;
            }
        }
    }
    w.barrier()
}

/// The `no_locks` hint: lock and lock_all are refused with an error that
/// says why; fence and PSCW work.
fn no_locks_hint(w: &World) -> onesided::Result<()> {
    let (me, p) = (w.rank(), w.size());
    let right = (me + 1) % p;
    let info = onesided::WindowInfo::new().no_locks(true);
    let mut win = Window::<u64>::allocate_with(w, 2, &info)?;
    let (_, msg) = kind_of(
        win.lock(right, LockType::Shared, Assert::NONE),
        "lock with no_locks",
    );
    assert!(msg.contains("no_locks"), "{msg}");
    win.fence(Assert::NONE)?;
    win.put(right, 0, &[me as u64 + 1])?;
    win.fence(Assert::NOSUCCEED)?;
    assert_eq!(win.local_to_vec()?[0], ((me + p - 1) % p) as u64 + 1);
    win.free()
}

/// Every call on a freed window is an error naming it; free twice too.
fn after_free(w: &World) -> onesided::Result<()> {
    let (me, p) = (w.rank(), w.size());
    let right = (me + 1) % p;
    let mut win = Window::<u64>::allocate(w, 2)?;
    let id = win.id();
    win.free()?;
    let named = |r: onesided::Result<()>, what: &str| {
        let (_, msg) = kind_of(r, what);
        assert!(
            msg.contains(&format!("window {id}")) && msg.contains("free"),
            "{what}: {msg}"
        );
    };
    named(win.free(), "free twice");
    named(win.fence(Assert::NONE), "fence");
    named(win.lock_all(), "lock_all");
    named(win.lock(right, LockType::Shared, Assert::NONE), "lock");
    named(win.put(right, 0, &[1]), "put");
    named(win.get(right, 0, &mut [0]), "get");
    named(win.accumulate(right, 0, &[1], Op::Sum), "accumulate");
    named(
        win.fetch_and_op(right, 0, 1, Op::Sum).map(|_| ()),
        "fetch_and_op",
    );
    named(win.post(&[right], Assert::NONE), "post");
    named(win.start(&[right], Assert::NONE), "start");
    named(win.local_read(0, &mut [0]), "local_read");
    named(win.flush_all(), "flush_all");
    named(win.sync(), "sync");
    w.barrier()
}

/// A peer that drops its window without free (an error path of its own):
/// accesses to it fail with an error naming it, or succeed, but never
/// hang or crash, and the pair keeps working on another window.
fn peer_dropped_window(w: &World) -> onesided::Result<()> {
    let (me, p) = (w.rank(), w.size());
    // On libfabric a bad key costs the connection (`docs/semantics.md`):
    // with the lock word on the provider (`ONESIDED_LOCK=hardware`), the
    // lazy lock's atomic on the dropped window would lose the pair.
    let fragile = w.transport_caps().remote_errors_break_connection
        && std::env::var("ONESIDED_LOCK").as_deref() == Ok("hardware");
    if p == 1 || fragile {
        return Ok(());
    }
    let mut keep = Window::<u64>::allocate(w, 4)?;
    let gone = Window::<u64>::allocate(w, 4)?;
    // Everybody contacts everybody on both windows first.
    gone.lock_all()?;
    keep.lock_all()?;
    for t in 0..p {
        gone.put(t, 0, &[1])?;
        keep.put(t, 0, &[1])?;
    }
    gone.unlock_all()?;
    keep.unlock_all()?;
    w.barrier()?;
    if me == 1 {
        drop(gone);
        w.barrier()?;
    } else {
        w.barrier()?;
        gone.lock_all()?;
        let r = gone.put(1, 0, &[2]).and_then(|_| gone.flush(1));
        if let Err(e) = &r {
            assert!(e.to_string().contains("rank 1"), "{e}");
        }
        let mut v = [0u64];
        let r = gone.get(1, 0, &mut v).and_then(|_| gone.flush(1));
        if let Err(e) = &r {
            assert!(e.to_string().contains("rank 1"), "{e}");
        }
        let _ = gone.unlock_all();
        drop(gone);
    }
    w.barrier()?;
    // The pair still works.
    keep.lock_all()?;
    let right = (me + 1) % p;
    keep.put(right, 1, &[val(me, 1)])?;
    keep.unlock_all()?;
    w.barrier()?;
    let left = (me + p - 1) % p;
    assert_eq!(keep.local_to_vec()?, vec![1, val(left, 1), 0, 0]);
    w.barrier()?;
    keep.free()
}

/// One target exposed to every other rank (a gather), then one origin
/// accessing every other rank (a scatter), with PSCW.
fn pscw_many_to_one(w: &World) -> onesided::Result<()> {
    let (me, p) = (w.rank(), w.size());
    let others: Vec<usize> = (0..p).filter(|&r| r != 0).collect();
    let mut win = Window::<u32>::allocate(w, p * 3)?;
    for round in 0..3u32 {
        if me == 0 {
            win.post(&others, Assert::NONE)?;
            win.wait()?;
            let got = win.local_to_vec()?;
            for r in 1..p {
                assert_eq!(got[r * 3..r * 3 + 3], [r as u32 + round; 3], "gather {r}");
            }
            // Scatter back.
            win.start(&others, Assert::NONE)?;
            for &r in &others {
                win.put(r, 0, &[round * 10 + r as u32])?;
            }
            win.complete()?;
        } else {
            win.start(&[0], Assert::NONE)?;
            win.put(0, me * 3, &[me as u32 + round; 3])?;
            win.complete()?;
            win.post(&[0], Assert::NONE)?;
            win.wait()?;
            assert_eq!(win.local_to_vec()?[0], round * 10 + me as u32, "scatter");
        }
    }
    win.free()
}

/// Several regions attached at once, detached in another order; an
/// access spanning two regions is an error even where they happen to be
/// adjacent; a different buffer attached after a detach is reached at its
/// own displacement.
fn dynamic_regions(w: &World) -> onesided::Result<()> {
    let (me, p) = (w.rank(), w.size());
    let right = (me + 1) % p;
    let mut win = Window::<u32>::create_dynamic(w)?;
    let d: Vec<usize> = (0..4)
        .map(|k| win.attach(vec![(me * 100 + k) as u32; 8]))
        .collect::<onesided::Result<_>>()?;
    let mut mine: Vec<u64> = d.iter().map(|&x| x as u64).collect();
    let all = w.allgather(&mine)?;
    let theirs: Vec<usize> = all[right * 4..right * 4 + 4]
        .iter()
        .map(|&x| x as usize)
        .collect();
    win.lock_all()?;
    for (k, &td) in theirs.iter().enumerate() {
        let mut v = [0u32; 8];
        win.get(right, td, &mut v)?;
        win.flush(right)?;
        assert_eq!(v, [(right * 100 + k) as u32; 8]);
        oow(
            win.get(right, td + 4, &mut [0u32; 8]),
            "get across a region's end",
            right,
        );
    }
    win.unlock_all()?;
    w.barrier()?;
    // Detach 2 and 0; attach a new, larger one.
    win.detach(d[2])?;
    win.detach(d[0])?;
    let dn = win.attach(vec![7u32; 64])?;
    mine = vec![dn as u64];
    let all = w.allgather(&mine)?;
    let tn = all[right] as usize;
    w.barrier()?;
    win.lock_all()?;
    oow(
        win.put(right, theirs[2], &[1]),
        "put into detached region 2",
        right,
    );
    win.put(right, theirs[1], &[me as u32; 8])?;
    win.put(right, tn + 60, &[me as u32 + 1; 4])?;
    win.flush(right)?;
    win.unlock_all()?;
    w.barrier()?;
    let left = (me + p - 1) % p;
    assert_eq!(win.detach(d[1])?, vec![left as u32; 8]);
    let big = win.detach(dn)?;
    assert_eq!(&big[..60], &[7u32; 60][..]);
    assert_eq!(&big[60..], &[left as u32 + 1; 4]);
    assert_eq!(win.detach(d[3])?, vec![(me * 100 + 3) as u32; 8]);
    w.barrier()?;
    win.free()
}

/// Requests issued in a fence epoch and waited after the closing fence;
/// requests in a PSCW access epoch waited after complete; and the data.
fn requests_across_epochs(w: &World) -> onesided::Result<()> {
    let (me, p) = (w.rank(), w.size());
    let right = (me + 1) % p;
    let left = (me + p - 1) % p;
    let mut win = Window::<i32>::allocate(w, 8)?;
    win.fence(Assert::NONE)?;
    let a = win.rput(right, 0, vec![me as i32 + 1; 4])?;
    let b = win.raccumulate(right, 4, vec![-(me as i32) - 1; 4], Op::Sum)?;
    win.fence(Assert::NONE)?;
    a.wait()?;
    b.wait()?;
    assert_eq!(
        win.local_to_vec()?,
        [vec![left as i32 + 1; 4], vec![-(left as i32) - 1; 4]].concat()
    );
    win.fence(Assert::NOSUCCEED)?;
    win.post(&[left], Assert::NONE)?;
    win.start(&[right], Assert::NONE)?;
    let g = win.rget(right, 0, vec![0i32; 8])?;
    let ga = win.rget_accumulate(right, 4, &[10; 4], vec![0i32; 4], Op::Sum)?;
    win.complete()?;
    let got = g.wait()?;
    let old = ga.wait()?;
    win.wait()?;
    assert_eq!(
        got,
        [vec![me as i32 + 1; 4], vec![-(me as i32) - 1; 4]].concat()
    );
    assert_eq!(old, vec![-(me as i32) - 1; 4]);
    assert_eq!(win.local_to_vec()?[4..], [9 - left as i32; 4]);
    win.free()
}

/// Windows over groups (MPI_Comm_split): ranks are group ranks, fences
/// synchronize the members only, two groups' windows live at once.
fn group_windows(w: &World) -> onesided::Result<()> {
    let (me, p) = (w.rank(), w.size());
    let g = w
        .split(Some((me % 2) as u32), -(me as i64))?
        .expect("every rank has a colour");
    let (gr, gp) = (g.rank(), g.size());
    assert_eq!(g.world_rank(gr), Some(me));
    // Keys are descending world ranks: group rank 0 is the highest.
    let members: Vec<usize> = (0..p).filter(|r| r % 2 == me % 2).rev().collect();
    assert_eq!(g.world_ranks(), &members[..]);
    let mut win = Window::<u64>::allocate(&g, gp)?;
    win.fence(Assert::NONE)?;
    for t in 0..gp {
        win.put(t, gr, &[me as u64 + 1])?;
    }
    oow(win.put(0, gp, &[1]), "put past a group window", 0);
    let (_, msg) = kind_of(win.put(gp, 0, &[1]), "put to a rank outside the group");
    assert!(msg.contains(&format!("rank {gp}")), "{msg}");
    win.fence(Assert::NONE)?;
    let want: Vec<u64> = members.iter().map(|&r| r as u64 + 1).collect();
    assert_eq!(win.local_to_vec()?, want);
    g.barrier()?;
    // Locks in group ranks.
    win.lock((gr + 1) % gp, LockType::Exclusive, Assert::NONE)?;
    win.accumulate((gr + 1) % gp, gr, &[100], Op::Sum)?;
    win.unlock((gr + 1) % gp)?;
    g.barrier()?;
    let got = win.local_to_vec()?;
    let from = (gr + gp - 1) % gp;
    assert_eq!(got[from], members[from] as u64 + 1 + 100);
    win.fence(Assert::NOSUCCEED)?;
    win.free()?;
    w.barrier()
}

/// Runs `f(t)` on `n` threads (t = 0..n) of this rank and joins them.
fn in_threads(n: usize, f: impl Fn(usize) -> onesided::Result<()> + Sync) -> onesided::Result<()> {
    std::thread::scope(|s| {
        let f = &f;
        let hs: Vec<_> = (0..n).map(|t| s.spawn(move || f(t))).collect();
        hs.into_iter()
            .map(|h| h.join().expect("thread"))
            .collect::<onesided::Result<Vec<_>>>()
    })
    .map(|_| ())
}

/// Several threads of one rank issue operations on one window in one
/// lock_all epoch (MPI_THREAD_MULTIPLE): every put and accumulate lands.
fn threads_share_a_window(w: &World) -> onesided::Result<()> {
    let (me, p) = (w.rank(), w.size());
    let right = (me + 1) % p;
    let left = (me + p - 1) % p;
    let threads = 3usize;
    let per = 50usize;
    let mut win = Window::<u64>::allocate(w, threads * per + 1)?;
    win.lock_all()?;
    in_threads(threads, |t| {
        for i in 0..per {
            win.put(right, t * per + i, &[val(me, t * per + i)])?;
            win.accumulate(right, threads * per, &[1], Op::Sum)?;
            if i % 10 == 0 {
                win.flush(right)?;
            }
        }
        Ok(())
    })?;
    win.unlock_all()?;
    w.barrier()?;
    let got = win.local_to_vec()?;
    for (i, g) in got[..threads * per].iter().enumerate() {
        assert_eq!(*g, val(left, i), "element {i}");
    }
    assert_eq!(got[threads * per], (threads * per) as u64);
    w.barrier()?;
    win.free()
}

/// Several threads of one rank each lock a different target of one
/// window, over and over (MPI_THREAD_MULTIPLE: the lock is the process's,
/// per target): exclusive and shared locks, a get and a fetch_and_op
/// inside each. No thread waits for another thread's lock: every count
/// arrives, and no lock times out (before the fix, a thread whose lock
/// was granted waited behind another thread's acquisition, which waited
/// for a lock held by a third process in the same state: a deadlock
/// across processes from 4 ranks and 3 threads on the software lock path).
fn threads_lock_different_targets(w: &World) -> onesided::Result<()> {
    let (me, p) = (w.rank(), w.size());
    let threads = (p - 1).clamp(1, 3);
    let rounds = 40usize;
    let mut win = Window::<u64>::allocate(w, 1 + threads)?;
    w.barrier()?;
    in_threads(threads, |t| {
        let target = (me + 1 + t) % p;
        for k in 0..rounds {
            let kind = match k % 3 {
                0 => LockType::Exclusive,
                _ => LockType::Shared,
            };
            win.lock(target, kind, Assert::NONE)?;
            let mut seen = [0u64];
            win.get(target, 1 + t, &mut seen)?;
            win.fetch_and_op(target, 0, 1u64, Op::Sum)?;
            if kind == LockType::Exclusive {
                // Only this thread of this rank writes it.
                win.put(target, 1 + t, &[val(me, k)])?;
            }
            win.unlock(target)?;
        }
        Ok(())
    })?;
    w.barrier()?;
    let mut total = win.local_to_vec()?[..1].to_vec();
    w.allreduce(&mut total, Op::Sum)?;
    assert_eq!(
        total[0],
        (p * threads * rounds) as u64,
        "increments counted"
    );
    w.barrier()?;
    win.free()
}

/// Threads of one rank, each with its own target, in one lock_all epoch
/// (MPI_THREAD_MULTIPLE): each issues request-based puts and accumulates
/// and `flush(target)`es its target alone while the others issue to
/// theirs; after each flush, the thread reads back exactly what it wrote
/// (`flush(rank)` completes that rank's operations, which are counted per
/// target, while other targets' trackers come and go).
fn threads_flush_their_own_targets(w: &World) -> onesided::Result<()> {
    let (me, p) = (w.rank(), w.size());
    let threads = (p - 1).clamp(1, 3);
    let (rounds, len) = (30usize, 48usize);
    // Per (origin, thread): `len` values and one counter.
    let slot = len + 1;
    let mut win = Window::<u64>::allocate(w, p * threads * slot)?;
    w.barrier()?;
    win.lock_all()?;
    in_threads(threads, |t| {
        let target = (me + 1 + t) % p;
        let base = (me * threads + t) * slot;
        for k in 0..rounds {
            let data: Vec<u64> = (0..len).map(|i| val(me, k * len + i)).collect();
            let put = win.rput(target, base, data)?;
            let acc = win.raccumulate(target, base + len, vec![k as u64 + 1], Op::Sum)?;
            win.flush(target)?;
            put.wait()?;
            acc.wait()?;
            let mut back = vec![0u64; slot];
            win.get(target, base, &mut back)?;
            win.flush(target)?;
            for (i, v) in back[..len].iter().enumerate() {
                assert_eq!(
                    *v,
                    val(me, k * len + i),
                    "thread {t}, round {k}, element {i}"
                );
            }
            let sum: u64 = (1..=k as u64 + 1).sum();
            assert_eq!(back[len], sum, "thread {t}, round {k}: counter");
        }
        Ok(())
    })?;
    win.unlock_all()?;
    w.barrier()?;
    win.free()
}

/// The common program shape: fence, operations, fence (without
/// NOSUCCEED), then a passive-target or PSCW phase. MPI-3.1 §11.5 lets the
/// last fence of a phase omit NOSUCCEED; the next kind of epoch may begin
/// when no operation followed it.
fn other_epochs_after_plain_fence(w: &World) -> onesided::Result<()> {
    let (me, p) = (w.rank(), w.size());
    let right = (me + 1) % p;
    let left = (me + p - 1) % p;
    let mut win = Window::<u64>::allocate(w, 4)?;
    win.fence(Assert::NONE)?;
    win.put(right, 0, &[val(me, 0)])?;
    win.fence(Assert::NONE)?;
    // A per-target lock after it.
    win.lock(right, LockType::Exclusive, Assert::NONE)?;
    win.put(right, 1, &[val(me, 1)])?;
    win.unlock(right)?;
    w.barrier()?;
    win.fence(Assert::NONE)?;
    win.put(right, 2, &[val(me, 2)])?;
    win.fence(Assert::NONE)?;
    // PSCW after it.
    win.post(&[left], Assert::NONE)?;
    win.start(&[right], Assert::NONE)?;
    win.put(right, 3, &[val(me, 3)])?;
    win.complete()?;
    win.wait()?;
    win.fence(Assert::NONE)?;
    win.fence(Assert::NONE)?;
    // lock_all after it.
    win.lock_all()?;
    let mut v = [0u64; 4];
    win.get(me, 0, &mut v)?;
    win.unlock_all()?;
    assert_eq!(v, [val(left, 0), val(left, 1), val(left, 2), val(left, 3)]);
    w.barrier()?;
    win.free()
}

/// A rank spinning on compare_and_swap to a lock word in its own window
/// while the holder, another rank, still needs it to serve a put and the
/// releasing REPLACE (without a progress agent, only the spinner's own
/// calls can serve them); then a rank polling a flag in its own window
/// with get until a peer's put lands.
fn self_spin_serves_peers(w: &World) -> onesided::Result<()> {
    let (me, p) = (w.rank(), w.size());
    if p == 1 {
        return Ok(());
    }
    let mut win = Window::<u64>::allocate(w, 3)?;
    win.lock_all()?;
    if me == 1 {
        assert_eq!(
            win.compare_and_swap(0, 0, 0, 2)?,
            0,
            "rank 1 takes it first"
        );
    }
    w.barrier()?;
    match me {
        0 => {
            let spin = Spin::new("compare_and_swap on our own lock word");
            while win.compare_and_swap(0, 0, 0, 1)? != 0 {
                spin.check();
            }
            let mut v = [0u64];
            win.get(0, 1, &mut v)?;
            assert_eq!(v[0], 77, "the holder's put before its release");
            // Poll our own flag with get until rank 1 sets it.
            let mut flag = [0u64];
            let spin = Spin::new("get polling our own flag");
            while flag[0] == 0 {
                spin.check();
                win.get(0, 2, &mut flag)?;
                win.flush(0)?;
            }
            assert_eq!(flag[0], 5);
        }
        1 => {
            win.put(0, 1, &[77])?;
            win.flush(0)?;
            assert_eq!(win.fetch_and_op(0, 0, 0, Op::Replace)?, 2);
            win.put(0, 2, &[5])?;
            win.flush(0)?;
        }
        _ => {}
    }
    win.unlock_all()?;
    w.barrier()?;
    // Polling with local loads and sync (MPI_Win_sync in the loop), while
    // the peer's put needs this rank's progress.
    win.lock_all()?;
    match me {
        0 => {
            let spin = Spin::new("local_read + sync polling");
            let mut v = [0u64];
            while v[0] != 9 {
                spin.check();
                win.sync()?;
                win.local_read(1, &mut v)?;
            }
        }
        1 => {
            win.put(0, 1, &[9])?;
            win.flush(0)?;
        }
        _ => {}
    }
    win.unlock_all()?;
    w.barrier()?;
    // An exclusive lock on oneself while every peer holds a shared one
    // and releases it only after this rank asked.
    if me != 0 {
        win.lock(0, LockType::Shared, Assert::NONE)?;
        let mut v = [0u64];
        win.get(0, 1, &mut v)?;
        win.flush(0)?;
        assert_eq!(v[0], 9);
    }
    w.barrier()?;
    if me == 0 {
        win.lock(0, LockType::Exclusive, Assert::NONE)?;
        win.put(0, 1, &[10])?;
        win.unlock(0)?;
    } else {
        win.unlock(0)?;
    }
    w.barrier()?;
    if me == 0 {
        assert_eq!(win.local_to_vec()?[1], 10);
    }
    win.free()
}

/// Window sizes no memory can hold (on every rank, or on one rank only)
/// are an error on every rank, not an abort; groups with a rank twice are
/// an error, not a wait for a second post that never comes.
fn huge_and_duplicate_arguments(w: &World) -> onesided::Result<()> {
    let (me, p) = (w.rank(), w.size());
    let right = (me + 1) % p;
    let left = (me + p - 1) % p;
    for huge in [usize::MAX, usize::MAX / 8, 1usize << 50] {
        let (_, msg) = kind_of(
            Window::<u64>::allocate(w, huge),
            "allocate of a huge window",
        );
        assert!(!msg.is_empty());
        let (_, msg) = kind_of(
            Window::<u64>::allocate_shared(w, huge),
            "allocate_shared huge",
        );
        assert!(!msg.is_empty());
    }
    let n = if me == p - 1 { 1usize << 50 } else { 4 };
    let (_, msg) = kind_of(Window::<u32>::allocate(w, n), "one rank's huge window");
    assert!(!msg.is_empty());
    // Still able to make windows.
    let mut win = Window::<u64>::allocate(w, 2)?;
    if p > 1 {
        let r = win.start(&[right, right], Assert::NONE);
        let (k, msg) = kind_of(r, "start with a rank twice");
        assert_eq!(k, ErrorKind::InvalidArgument, "{msg}");
        let (k, msg) = kind_of(
            win.post(&[left, left], Assert::NONE),
            "post with a rank twice",
        );
        assert_eq!(k, ErrorKind::InvalidArgument, "{msg}");
    }
    win.post(&[left], Assert::NONE)?;
    win.start(&[right], Assert::NONE)?;
    win.put(right, 0, &[3])?;
    win.complete()?;
    win.wait()?;
    assert_eq!(win.local_to_vec()?, vec![3, 0]);
    win.free()
}

/// Communicators made and dropped in a loop, each with a window used once
/// (more than `ONESIDED_MAX_GROUPS` in all): nothing leaks.
fn many_groups(w: &World) -> onesided::Result<()> {
    let (me, p) = (w.rank(), w.size());
    for i in 0..20u64 {
        let colour = ((me as u64 + i) % 2) as u32;
        let g = w.split(Some(colour), me as i64)?.expect("a colour");
        let (gr, gp) = (g.rank(), g.size());
        let mut win = Window::<u64>::allocate(&g, 1)?;
        win.fence(Assert::NOPRECEDE)?;
        win.accumulate((gr + 1) % gp, 0, &[i + 1], Op::Sum)?;
        win.fence(Assert::NOSUCCEED)?;
        assert_eq!(win.local_to_vec()?, vec![i + 1], "group {i}");
        win.free()?;
        let ends: &[usize] = if p > 1 { &[0, p - 1] } else { &[0] };
        let sub = w.subgroup(ends)?;
        assert_eq!(sub.is_some(), me == 0 || me == p - 1);
    }
    w.barrier()
}

/// lock_all takes a shared lock on each target it accesses: a reader in
/// lock_all epochs never sees a pair of words half written by a writer
/// holding an exclusive lock (which writes one word, flushes, writes the
/// other).
fn lock_all_excludes_exclusive(w: &World) -> onesided::Result<()> {
    let (me, p) = (w.rank(), w.size());
    let target = p - 1;
    let rounds = 30u64;
    let mut win = Window::<u64>::allocate(w, 2)?;
    for i in 0..rounds {
        if me == 0 {
            win.lock(target, LockType::Exclusive, Assert::NONE)?;
            win.put(target, 0, &[i + 1])?;
            win.flush(target)?;
            win.put(target, 1, &[i + 1])?;
            win.unlock(target)?;
        } else {
            win.lock_all()?;
            let mut pair = [0u64; 2];
            win.get(target, 0, &mut pair)?;
            win.flush(target)?;
            win.unlock_all()?;
            assert_eq!(pair[0], pair[1], "torn pair under lock_all: {pair:?}");
        }
    }
    w.barrier()?;
    if me == target {
        assert_eq!(win.local_to_vec()?, vec![rounds, rounds]);
    }
    w.barrier()?;
    win.free()
}

// ---- drivers ---------------------------------------------------------------------

/// How an in-process job runs.
#[derive(Debug, Clone, Copy)]
enum Mode {
    /// The back-end's own protocols (lock word, provider atomics).
    Native,
    /// The software protocols (lock queue, active-message accumulates,
    /// aggregation) with manual progress: no agent, peers are served only
    /// inside library calls.
    SoftwareManual,
    /// The direct path: node-shared windows, loads, stores, CPU atomics.
    Direct,
}

fn config(mode: Mode) -> Config {
    let mut c = Config::from_env().expect("configuration");
    c.timeout = Some(Duration::from_secs(20));
    c.shm = matches!(mode, Mode::Direct);
    if let Mode::SoftwareManual = mode {
        c.accumulate = AccumulateMode::Software;
        c.lock = LockMode::Software;
        c.ops.mode = AggregateMode::On;
        c.progress = ProgressMode::Manual;
    }
    c
}

fn in_process(name: &str, case: Case) {
    for mode in [Mode::Native, Mode::SoftwareManual, Mode::Direct] {
        for ranks in [1, 2, 4] {
            World::run_threads_with(config(mode), ranks, case)
                .unwrap_or_else(|e| panic!("{name}: {ranks} ranks in-process ({mode:?}): {e}"));
        }
    }
}

macro_rules! in_process_tests {
    ($($name:ident),* $(,)?) => {
        mod in_process {
            $(
                #[test]
                fn $name() {
                    super::in_process(stringify!($name), super::$name);
                }
            )*
        }
    };
}

in_process_tests!(
    fence_assertions,
    fence_misuse,
    pscw_self_and_empty,
    pscw_ring_overlapping,
    pscw_misuse,
    lock_self_and_nested,
    lock_counter,
    lock_all_flushes,
    lock_misuse,
    accumulate_ordering,
    atomics_every_type,
    accumulate_multi_element,
    op_type_mismatch,
    zero_length_and_bounds,
    requests_any_order,
    uneven_windows,
    many_windows,
    interleaved_windows,
    free_in_epoch,
    dynamic_reattach,
    shared_load_store,
    cas_mutex,
    no_op_reads_during_sums,
    empty_windows_everywhere,
    mismatched_element_types,
    no_locks_hint,
    after_free,
    peer_dropped_window,
    pscw_many_to_one,
    dynamic_regions,
    requests_across_epochs,
    group_windows,
    threads_share_a_window,
    threads_lock_different_targets,
    threads_flush_their_own_targets,
    other_epochs_after_plain_fence,
    self_spin_serves_peers,
    huge_and_duplicate_arguments,
    many_groups,
    lock_all_excludes_exclusive,
);

/// Every case in one process per rank: `ONESIDED_AUDIT_CASES` (comma
/// separated) picks some.
fn all_cases() {
    let world = World::init().expect("init");
    let pick = std::env::var("ONESIDED_AUDIT_CASES").ok();
    for (name, case) in CASES {
        if let Some(p) = &pick {
            if !p.split(',').any(|x| x == *name) {
                continue;
            }
        }
        if let Err(e) = case(&world) {
            panic!("case {name}, rank {}: {e}", world.rank());
        }
    }
    common::assert_transport_clean(&world);
    world.finalize().expect("finalize");
}

// One job per rank count runs every case in turn, on every provider under
// every launcher of the test matrix (`ONESIDED_TEST_PROVIDERS`,
// `ONESIDED_TEST_LAUNCHERS`: on the host net, tcp, shm and sockets under
// onesided-run and Hydra; under Slurm and mpirun in the Slurm stage; native
// verbs in the soft-RoCE guest), and with the intra-node direct path on
// (load/store and CPU atomics to node-local ranks).
spmd_test!(every_case, &[2, 4], all_cases);

/// Every case over tcp without a progress agent (`ONESIDED_PROGRESS=manual`):
/// peers are served only inside library calls, a rank spinning on its own
/// window's operations included.
#[test]
fn every_case_over_tcp_manual_progress() {
    for ranks in [2, 4] {
        common::run_variant(
            module_path!(),
            "every_case",
            ranks,
            "tcp",
            &[("ONESIDED_PROGRESS", "manual")],
        );
    }
}
