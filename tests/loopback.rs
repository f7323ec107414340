//! The protocol suites on the in-process back-end (`World::run_threads`):
//! ranks are threads of this test process, memory copies and CPU atomics
//! move the data, messages wait for the target's progress. Every suite
//! runs at 2 and 4 ranks, under the back-end's own choices (`Native`: lock
//! word, hardware-path accumulates) and under the software protocols
//! (`Software`: lock queue, active-message accumulates, aggregation), and
//! checks every byte. Protocols are chosen through the configuration
//! (`run_threads_with`), never the process's environment (the tests of
//! this file run in parallel in one process). Nothing synchronizes by
//! sleeping: locks, fences, barriers, PSCW.

use std::fmt::Debug;
use std::time::Duration;

use onesided::config::{AccumulateMode, AggregateMode, Config, LockMode, ProgressMode};
use onesided::transport::{RemoteAddr, RemoteCompletion};
use onesided::{AnyOp, Assert, Element, ErrorKind, LockType, Op, Window, World};

/// Which protocols the window layer uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// What the back-end's capabilities choose: provider (CPU) atomics,
    /// the lock word, no aggregation.
    Native,
    /// Software accumulates, the lock queue, aggregation of small puts.
    Software,
    /// The intra-node direct path on (`direct_path(true)`): windows of
    /// `allocate` are node-shared segments the other threads map, reached
    /// by loads, stores and CPU atomics instead of the back-end.
    Direct,
}

const MODES: [Mode; 3] = [Mode::Native, Mode::Software, Mode::Direct];
const RANKS: [usize; 2] = [2, 4];

fn config(mode: Mode) -> Config {
    let mut c = Config::from_env().expect("configuration");
    // A hang fails the test instead of blocking it forever.
    c.timeout = Some(Duration::from_secs(60));
    // As `run_threads` does unless `direct_path(true)`: the back-end
    // carries every operation.
    c.shm = mode == Mode::Direct;
    if mode == Mode::Software {
        c.accumulate = AccumulateMode::Software;
        c.lock = LockMode::Software;
        c.ops.mode = AggregateMode::On;
    }
    c
}

fn run_with<R: Send>(
    c: Config,
    ranks: usize,
    what: &str,
    f: impl Fn(&World) -> onesided::Result<R> + Sync,
) -> Vec<R> {
    World::run_threads_with(c, ranks, f).unwrap_or_else(|e| panic!("{what}, {ranks} ranks: {e}"))
}

/// Runs `f` at every rank count and mode.
fn every_job<R: Send>(what: &str, f: impl Fn(&World, Mode) -> onesided::Result<R> + Sync) {
    for mode in MODES {
        for ranks in RANKS {
            run_with(config(mode), ranks, &format!("{what} ({mode:?})"), |w| {
                f(w, mode)
            });
        }
    }
}

/// Runs `f(0)`, …, `f(n - 1)` on `n` threads of this rank at once; the
/// first error, after every thread ended (a panic fails the test).
fn on_threads(n: usize, f: impl Fn(usize) -> onesided::Result<()> + Sync) -> onesided::Result<()> {
    std::thread::scope(|s| {
        let threads: Vec<_> = (0..n)
            .map(|t| {
                let f = &f;
                s.spawn(move || f(t))
            })
            .collect();
        let mut first = Ok(());
        for h in threads {
            let done = h.join().expect("thread");
            if first.is_ok() {
                first = done;
            }
        }
        first
    })
}

fn pattern(origin: usize, round: usize, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i.wrapping_mul(31) ^ (origin * 71) ^ (round * 13)) as u8 | 1)
        .collect()
}

fn check_bytes(what: &str, got: &[u8], want: &[u8]) {
    if let Some(i) = got.iter().zip(want).position(|(a, b)| a != b) {
        panic!(
            "{what}: byte {i} of {} is {:#04x}, expected {:#04x}",
            want.len(),
            got[i],
            want[i]
        );
    }
    assert_eq!(got.len(), want.len(), "{what}: length");
}

// ---- the back-end itself ----------------------------------------------------

#[test]
fn caps_describe_the_back_end() {
    run_with(config(Mode::Native), 2, "caps", |w| {
        let c = w.transport_caps();
        assert_eq!(c.backend, "loopback");
        assert_eq!(w.provider(), "loopback");
        assert_eq!(w.bootstrap_name(), "threads");
        assert!(c.native_atomics && !c.needs_target_progress && !c.batch_small);
        assert_eq!(c.completion, RemoteCompletion::Acknowledged);
        assert!(c.atomics.lock_word() && c.ordered_atomics() && c.ordered_atomic_raw);
        // Every rank shares the node, but the direct path is off: the
        // back-end carries every operation.
        assert!(w.all_node_local());
        Ok(())
    });
}

#[test]
fn loopback_for_a_launched_process_is_an_error() {
    let e = World::builder()
        .backend(onesided::Backend::Loopback)
        .init()
        .err()
        .expect("a launched process cannot use the loopback back-end");
    assert_eq!(e.kind(), ErrorKind::Unsupported, "{e}");
    assert!(e.to_string().contains("run_threads"), "{e}");
}

/// The public entry point: the direct path is off unless the builder turns
/// it on; peer state exists only for peers contacted.
#[test]
fn builder_direct_path_and_peer_state() {
    for direct in [false, true] {
        let b = World::builder().timeout(Some(Duration::from_secs(60)));
        let b = if direct { b.direct_path(true) } else { b };
        let got = b
            .run_threads(4, |w| {
                let mut win = Window::<u64>::allocate(w, 8)?;
                let right = (w.rank() + 1) % w.size();
                win.lock_all()?;
                win.put(right, 0, &[7; 8])?;
                win.unlock_all()?;
                let s = w.stats();
                win.free()?;
                Ok((
                    s.shm.direct_ops,
                    s.peers_contacted,
                    s.address_vector_entries,
                ))
            })
            .expect("run_threads");
        for (rank, (direct_ops, contacted, entries)) in got.into_iter().enumerate() {
            assert_eq!(direct_ops > 0, direct, "rank {rank}: direct path {direct}");
            assert_eq!(contacted, entries, "rank {rank}: peer state");
            assert!(entries <= 4, "rank {rank}: {entries} peers");
        }
    }
}

/// A rank's panic reaches the caller of `run_threads` (after the other
/// ranks, told through the job, ended).
#[test]
#[should_panic(expected = "rank 1 panics on purpose")]
fn a_panicking_rank_panics_run_threads() {
    let _ = World::run_threads_with(config(Mode::Native), 2, |w| {
        if w.rank() == 1 {
            panic!("rank 1 panics on purpose");
        }
        w.barrier()
    });
}

/// The same through the environment, in a process of its own (this test
/// binary again, so the variable never touches the other tests).
#[test]
fn env_loopback_for_a_launched_process_is_an_error() {
    const NAME: &str = "env_loopback_for_a_launched_process_is_an_error";
    if std::env::var_os("ONESIDED_LOOPBACK_CHILD").is_some() {
        let e = World::init()
            .err()
            .expect("ONESIDED_BACKEND=loopback must not start a launched process");
        assert_eq!(e.kind(), ErrorKind::Unsupported, "{e}");
        assert!(e.to_string().contains("ONESIDED_BACKEND=loopback"), "{e}");
        println!("child saw: {e}");
        return;
    }
    let exe = std::env::current_exe().expect("test binary");
    let out = std::process::Command::new(exe)
        .args([NAME, "--exact", "--nocapture", "--test-threads=1"])
        .env("ONESIDED_LOOPBACK_CHILD", "1")
        .env("ONESIDED_BACKEND", "loopback")
        .output()
        .expect("running the child");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "child failed: {text}");
    assert!(
        text.contains("child saw:") && text.contains("1 passed"),
        "{text}"
    );
}

#[test]
fn zero_ranks_is_an_error() {
    let e = World::run_threads(0, |_| Ok(())).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
}

/// Bad remote addresses and keys at the transport: an error naming the
/// rank and the address, and the next correct operation works.
#[test]
fn bad_remote_addresses_are_errors_naming_rank_and_address() {
    run_with(config(Mode::Native), 2, "bad addresses", |w| {
        let mut win = Window::<u64>::allocate(w, 4)?;
        win.fence(Assert::NONE)?;
        let peer = 1 - w.rank();
        let t = w.bench_transport();
        let at = win.bench_remote(peer, 0)?;
        let key = at.key;
        let e = t
            .put(
                peer,
                &[1; 8],
                RemoteAddr {
                    addr: at.addr + 4096,
                    key,
                },
            )
            .unwrap_err();
        let text = e.to_string();
        assert!(
            text.contains(&format!("rank {peer}"))
                && text.contains(&format!("{:#x}", at.addr + 4096)),
            "{text}"
        );
        let mut buf = [0u8; 16];
        let e = t
            .get(
                peer,
                &mut buf,
                RemoteAddr {
                    addr: at.addr + 24,
                    key,
                },
            )
            .unwrap_err();
        assert!(e.to_string().contains("outside"), "{e}");
        let e = t
            .get(
                peer,
                &mut buf,
                RemoteAddr {
                    addr: at.addr,
                    key: key ^ 0x5555_0000,
                },
            )
            .unwrap_err();
        assert!(e.to_string().contains("no registration"), "{e}");
        let e = t
            .put(
                peer,
                &[1; 8],
                RemoteAddr {
                    addr: u64::MAX - 3,
                    key,
                },
            )
            .unwrap_err();
        assert!(e.to_string().contains(&format!("rank {peer}")), "{e}");
        // The window layer refuses out-of-window accesses before the
        // transport sees them.
        let e = win.put(peer, 4, &[1]).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::OutOfWindow, "{e}");
        // The next correct operation works.
        win.put(peer, 3, &[w.rank() as u64 + 10])?;
        win.fence(Assert::NONE)?;
        let mut v = [0u64];
        win.local_read(3, &mut v)?;
        assert_eq!(v[0], peer as u64 + 10);
        win.free()?;
        Ok(())
    });
}

/// A rank that fails ends the job for the others at once (not at
/// `ONESIDED_TIMEOUT`), and `run_threads` returns that rank's error.
#[test]
fn a_failing_rank_ends_the_job_with_its_error() {
    let mut c = config(Mode::Native);
    c.timeout = Some(Duration::from_secs(600));
    let r = World::run_threads_with(c, 3, |w| {
        if w.rank() == 2 {
            return Err(onesided::Error::InvalidArgument("rank 2 gives up".into()));
        }
        // Waits for rank 2, which never comes.
        w.barrier()?;
        Ok(())
    });
    let e = r.unwrap_err();
    assert!(e.to_string().contains("rank 2 gives up"), "{e}");
}

// ---- put and get ------------------------------------------------------------

const SIZES: [usize; 12] = [1, 2, 3, 7, 8, 9, 63, 64, 65, 4095, 4097, 70_001];
const WIN_BYTES: usize = 70_016;

/// Every size, at odd and even offsets: put to the right neighbour, get
/// back from it, blocking and request-based, under lock_all + flush and
/// under fences.
#[test]
fn put_get_every_size() {
    every_job("put/get", |w, _| {
        let (me, n) = (w.rank(), w.size());
        let (right, left) = ((me + 1) % n, (me + n - 1) % n);
        let mut win = Window::<u8>::allocate(w, WIN_BYTES)?;
        for (round, &len) in SIZES.iter().enumerate() {
            let off = round % 3;
            // Passive target: put, flush, get back.
            win.lock_all()?;
            let data = pattern(me, round, len);
            win.put(right, off, &data)?;
            win.flush(right)?;
            let mut back = vec![0u8; len];
            win.get(right, off, &mut back)?;
            win.flush(right)?;
            check_bytes(&format!("get back of {len} bytes"), &back, &data);
            win.unlock_all()?;
            w.barrier()?;
            let mut mine = vec![0u8; len];
            win.local_read(off, &mut mine)?;
            check_bytes(
                &format!("rank {me}: {len} bytes from rank {left}"),
                &mine,
                &pattern(left, round, len),
            );
            // Active target, request-based.
            win.fence(Assert::NONE)?;
            let data = pattern(me, round + 100, len);
            let req = win.rput(right, off + 1, data.clone())?;
            req.wait()?;
            win.fence(Assert::NONE)?;
            let req = win.rget(right, off + 1, vec![0u8; len])?;
            let back = req.wait()?;
            win.fence(Assert::NONE)?;
            check_bytes(&format!("rget of {len} bytes"), &back, &data);
        }
        win.free()?;
        Ok(())
    });
}

// ---- atomics: every operation on every type ---------------------------------

/// Element types with a model of every operation.
trait Num: Element + Copy + PartialEq + Debug + Send + Sync {
    fn of(v: i8) -> Self;
    fn integer() -> bool;
    fn apply(op: AnyOp, t: Self, o: Self) -> Self;
}

macro_rules! int_num {
    ($($t:ty),*) => {$(
        impl Num for $t {
            fn of(v: i8) -> Self { v as $t }
            fn integer() -> bool { true }
            fn apply(op: AnyOp, t: Self, o: Self) -> Self {
                let b = |x: Self| x != 0;
                match op {
                    AnyOp::Sum => t.wrapping_add(o),
                    AnyOp::Prod => t.wrapping_mul(o),
                    AnyOp::Min => t.min(o),
                    AnyOp::Max => t.max(o),
                    AnyOp::Band => t & o,
                    AnyOp::Bor => t | o,
                    AnyOp::Bxor => t ^ o,
                    AnyOp::Land => (b(t) && b(o)) as $t,
                    AnyOp::Lor => (b(t) || b(o)) as $t,
                    AnyOp::Lxor => (b(t) != b(o)) as $t,
                    AnyOp::Replace => o,
                    AnyOp::NoOp => t,
                }
            }
        }
    )*};
}
int_num!(i8, i16, i32, i64, u8, u16, u32, u64);

macro_rules! float_num {
    ($($t:ty),*) => {$(
        impl Num for $t {
            fn of(v: i8) -> Self { v as $t }
            fn integer() -> bool { false }
            fn apply(op: AnyOp, t: Self, o: Self) -> Self {
                match op {
                    AnyOp::Sum => t + o,
                    AnyOp::Prod => t * o,
                    AnyOp::Min => if o < t { o } else { t },
                    AnyOp::Max => if o > t { o } else { t },
                    AnyOp::Replace => o,
                    AnyOp::NoOp => t,
                    _ => unreachable!("integer-only operation on a float"),
                }
            }
        }
    )*};
}
float_num!(f32, f64);

/// The operations and operands each origin applies, in order.
fn script<T: Num>() -> Vec<(AnyOp, T)> {
    let mut s = vec![
        (AnyOp::Sum, T::of(5)),
        (AnyOp::Prod, T::of(3)),
        (AnyOp::Min, T::of(4)),
        (AnyOp::Max, T::of(9)),
        (AnyOp::Sum, T::of(-2)),
        (AnyOp::Replace, T::of(12)),
    ];
    if T::integer() {
        s.extend([
            (AnyOp::Band, T::of(10)),
            (AnyOp::Bor, T::of(5)),
            (AnyOp::Bxor, T::of(3)),
            (AnyOp::Land, T::of(2)),
            (AnyOp::Lor, T::of(0)),
            (AnyOp::Lxor, T::of(1)),
            (AnyOp::Lxor, T::of(1)),
            (AnyOp::Replace, T::of(100)),
        ]);
    }
    s.push((AnyOp::NoOp, T::of(0)));
    s
}

/// Each origin drives its own element at its right neighbour through the
/// script: fetch_and_op (the previous value checked against the model at
/// every step), compare_and_swap (a hit and a miss), then the same script
/// as accumulates and vector get_accumulates; then every rank adds into
/// one shared element (contention) and the owner checks every element.
fn atomics_for<T: Num>(w: &World) -> onesided::Result<()> {
    let (me, n) = (w.rank(), w.size());
    let right = (me + 1) % n;
    let left = (me + n - 1) % n;
    let shared = n; // one more element every rank adds into
    let mut win = Window::<T>::allocate(w, n + 1 + 2 * n)?;
    let name = T::NAME;
    win.lock_all()?;
    let mut model = T::of(0);
    for (step, (op, v)) in script::<T>().into_iter().enumerate() {
        let old = win.fetch_and_op(right, me, v, op)?;
        assert_eq!(old, model, "{name}: fetch_and_op step {step} ({op:?})");
        model = T::apply(op, model, v);
    }
    let old = win.compare_and_swap(right, me, model, T::of(7))?;
    assert_eq!(old, model, "{name}: compare_and_swap hit");
    let old = win.compare_and_swap(right, me, T::of(8), T::of(9))?;
    assert_eq!(old, T::of(7), "{name}: compare_and_swap miss");
    model = T::of(7);
    // The script again as accumulates (no result), checked by a read.
    for (op, v) in script::<T>() {
        if op != AnyOp::NoOp {
            win.accumulate(right, me, &[v], op)?;
            model = T::apply(op, model, v);
        }
    }
    win.flush(right)?;
    let mut now = [T::of(0)];
    win.get_accumulate(right, me, &[T::of(0)], &mut now, AnyOp::NoOp)?;
    assert_eq!(now[0], model, "{name}: after the accumulates");
    // Vector get_accumulate over two elements of the origin's pair.
    let base = n + 1 + 2 * me;
    let mut before = [T::of(1); 2];
    win.get_accumulate(right, base, &[T::of(2), T::of(3)], &mut before, AnyOp::Sum)?;
    assert_eq!(
        before,
        [T::of(0), T::of(0)],
        "{name}: vector get_accumulate"
    );
    win.get_accumulate(right, base, &[T::of(4), T::of(1)], &mut before, AnyOp::Prod)?;
    assert_eq!(
        before,
        [T::of(2), T::of(3)],
        "{name}: vector get_accumulate"
    );
    // Contention: everyone adds 1 to the shared element of rank 0.
    for _ in 0..10 {
        win.accumulate(0, shared, &[T::of(1)], AnyOp::Sum)?;
    }
    win.unlock_all()?;
    w.barrier()?;
    // The owner checks what its left neighbour did.
    let mut all = vec![T::of(0); n + 1 + 2 * n];
    win.local_read(0, &mut all)?;
    assert_eq!(
        all[left], model,
        "{name}: rank {me}'s element of rank {left}"
    );
    assert_eq!(
        &all[n + 1 + 2 * left..n + 3 + 2 * left],
        &[T::of(8), T::of(3)],
        "{name}: pair of rank {left}"
    );
    if me == 0 && (T::integer() || n * 10 < 100) {
        assert_eq!(all[shared], T::of((10 * n) as i8), "{name}: contended sum");
    }
    win.free()?;
    Ok(())
}

#[test]
fn atomics_every_op_and_type() {
    every_job("atomics", |w, _| {
        atomics_for::<i8>(w)?;
        atomics_for::<i16>(w)?;
        atomics_for::<i32>(w)?;
        atomics_for::<i64>(w)?;
        atomics_for::<u8>(w)?;
        atomics_for::<u16>(w)?;
        atomics_for::<u32>(w)?;
        atomics_for::<u64>(w)?;
        atomics_for::<f32>(w)?;
        atomics_for::<f64>(w)?;
        Ok(())
    });
}

/// The software path really is the software path: accumulates become
/// messages applied by the target, aggregated into batches; and the
/// native one sends none.
#[test]
fn software_accumulates_travel_as_messages() {
    for mode in [Mode::Native, Mode::Software] {
        let stats = run_with(config(mode), 2, "accumulate paths", |w| {
            let mut win = Window::<u64>::allocate(w, 64)?;
            w.barrier()?;
            let before = w.stats();
            win.lock_all()?;
            for i in 0..64 {
                win.accumulate(1 - w.rank(), i, &[i as u64], Op::Sum)?;
            }
            win.unlock_all()?;
            w.barrier()?;
            let mut v = vec![0u64; 64];
            win.local_read(0, &mut v)?;
            assert_eq!(v, (0..64).collect::<Vec<u64>>());
            let after = w.stats();
            win.free()?;
            Ok((
                after.transport.sends - before.transport.sends,
                after.transport.atomics - before.transport.atomics,
                after.ops.ops_aggregated - before.ops.ops_aggregated,
            ))
        });
        for (sends, atomics, aggregated) in stats {
            match mode {
                Mode::Native => assert!(sends == 0 && atomics >= 64, "{mode:?}: {sends} {atomics}"),
                Mode::Software => {
                    assert!(
                        sends > 0 && aggregated > 0,
                        "{mode:?}: {sends} {aggregated}"
                    );
                    // How many messages depends on the pool sizes
                    // (scripts/test-tiny.sh runs this with pools of one).
                }
                Mode::Direct => unreachable!(),
            }
        }
    }
}

// ---- locks --------------------------------------------------------------------

const ROUNDS: u64 = 50;

/// Exclusive locks: a get-increment-put under the lock from every rank
/// (a lost update shows a missing exclusion). Shared locks: readers see
/// the two words an exclusive holder writes always equal.
#[test]
fn lock_contention_exclusive_and_shared() {
    every_job("locks", |w, _| {
        let (me, n) = (w.rank(), w.size());
        let mut win = Window::<u64>::allocate(w, 3)?;
        w.barrier()?;
        for round in 0..ROUNDS {
            win.lock(0, LockType::Exclusive, Assert::NONE)?;
            let mut v = [0u64; 2];
            win.get(0, 0, &mut v)?;
            win.flush(0)?;
            assert_eq!(
                v[0], v[1],
                "rank {me} round {round}: torn pair under exclusion"
            );
            // The two words one at a time, each completed: a reader let in
            // between sees them differ.
            win.put(0, 0, &[v[0] + 1])?;
            win.flush(0)?;
            win.put(0, 1, &[v[1] + 1])?;
            win.unlock(0)?;
            win.lock(0, LockType::Shared, Assert::NONE)?;
            for pass in 0..4 {
                let (mut a, mut b) = ([0u64], [0u64]);
                win.get(0, 0, &mut a)?;
                win.flush(0)?;
                win.get(0, 1, &mut b)?;
                win.flush(0)?;
                assert_eq!(
                    a, b,
                    "rank {me} round {round} pass {pass}: a reader saw a writer"
                );
            }
            win.unlock(0)?;
            // Shared holders together: an accumulate under a shared lock.
            win.lock(0, LockType::Shared, Assert::NONE)?;
            win.accumulate(0, 2, &[1], Op::Sum)?;
            win.unlock(0)?;
        }
        w.barrier()?;
        if me == 0 {
            let mut v = [0u64; 3];
            win.local_read(0, &mut v)?;
            let want = n as u64 * ROUNDS;
            assert_eq!(v, [want, want, want], "lock totals");
        }
        win.free()?;
        Ok(())
    });
}

/// lock_all from everyone at once, with flushes: each rank writes a slot
/// in every other rank, then reads them all back.
#[test]
fn lock_all_and_flush() {
    every_job("lock_all", |w, _| {
        let (me, n) = (w.rank(), w.size());
        let mut win = Window::<u64>::allocate(w, n)?;
        win.lock_all()?;
        for t in 0..n {
            win.put(t, me, &[(me * 1000 + t) as u64])?;
        }
        win.flush_all()?;
        for t in 0..n {
            let mut v = [0u64];
            win.get(t, me, &mut v)?;
            win.flush(t)?;
            assert_eq!(v[0], (me * 1000 + t) as u64);
        }
        win.unlock_all()?;
        w.barrier()?;
        let mut all = vec![0u64; n];
        win.local_read(0, &mut all)?;
        let want: Vec<u64> = (0..n).map(|o| (o * 1000 + me) as u64).collect();
        assert_eq!(all, want);
        win.free()?;
        Ok(())
    });
}

// ---- fence and PSCW ---------------------------------------------------------

/// Rounds of fences: every rank accumulates into and puts to everyone.
#[test]
fn fence_rounds() {
    every_job("fence", |w, _| {
        let (me, n) = (w.rank(), w.size());
        let mut win = Window::<i64>::allocate(w, n + 1)?;
        win.fence(Assert::NOPRECEDE)?;
        for round in 1..=10i64 {
            for t in 0..n {
                win.put(t, me, &[round * 100 + me as i64])?;
                win.accumulate(t, n, &[round], Op::Sum)?;
            }
            win.fence(Assert::NONE)?;
            let mut all = vec![0i64; n + 1];
            win.local_read(0, &mut all)?;
            for (o, &v) in all[..n].iter().enumerate() {
                assert_eq!(v, round * 100 + o as i64, "round {round}, from rank {o}");
            }
            assert_eq!(all[n], n as i64 * round * (round + 1) / 2, "round {round}");
            win.fence(Assert::NONE)?;
        }
        win.free()?;
        Ok(())
    });
}

/// Post/start/complete/wait: rank 0 exposes to everyone else, then
/// everyone else exposes to rank 0, for several rounds.
#[test]
fn pscw_rounds() {
    every_job("pscw", |w, _| {
        let (me, n) = (w.rank(), w.size());
        let others: Vec<usize> = (1..n).collect();
        let mut win = Window::<u64>::allocate(w, n)?;
        for round in 1..=8u64 {
            if me == 0 {
                win.post(&others, Assert::NONE)?;
                win.wait()?;
                let mut all = vec![0u64; n];
                win.local_read(0, &mut all)?;
                for (o, &v) in all.iter().enumerate().skip(1) {
                    assert_eq!(v, round * 10 + o as u64, "round {round}, from {o}");
                }
                // Now rank 0 is the origin of everyone.
                win.start(&others, Assert::NONE)?;
                for t in 1..n {
                    win.put(t, 0, &[round * 1000 + t as u64])?;
                }
                win.complete()?;
            } else {
                win.start(&[0], Assert::NONE)?;
                win.put(0, me, &[round * 10 + me as u64])?;
                win.complete()?;
                win.post(&[0], Assert::NONE)?;
                win.wait()?;
                let mut v = [0u64];
                win.local_read(0, &mut v)?;
                assert_eq!(v[0], round * 1000 + me as u64, "round {round}");
            }
        }
        win.free()?;
        Ok(())
    });
}

// ---- aggregation ---------------------------------------------------------------

/// Many small puts and accumulates to one target (batched in software
/// mode), with a flush in the middle; every element checked.
#[test]
fn aggregation_batches() {
    every_job("aggregation", |w, mode| {
        let (me, n) = (w.rank(), w.size());
        let right = (me + 1) % n;
        const K: usize = 300;
        let mut win = Window::<u64>::allocate(w, 2 * K)?;
        w.barrier()?;
        let before = w.stats().ops;
        win.lock_all()?;
        for i in 0..K {
            win.put(right, i, &[(me * 100_000 + i) as u64])?;
            win.accumulate(right, K + i, &[i as u64 + 1], Op::Sum)?;
            if i == K / 2 {
                win.flush(right)?;
                let mut v = [0u64];
                win.get(right, i, &mut v)?;
                win.flush(right)?;
                assert_eq!(v[0], (me * 100_000 + i) as u64, "after a flush");
            }
        }
        win.unlock_all()?;
        w.barrier()?;
        let left = (me + n - 1) % n;
        let mut all = vec![0u64; 2 * K];
        win.local_read(0, &mut all)?;
        for i in 0..K {
            assert_eq!(all[i], (left * 100_000 + i) as u64, "put {i}");
            assert_eq!(all[K + i], i as u64 + 1, "accumulate {i}");
        }
        let after = w.stats().ops;
        if mode == Mode::Software {
            assert!(
                after.batches_sent > before.batches_sent,
                "no batch sent: {after:?}"
            );
        }
        win.free()?;
        Ok(())
    });
}

// ---- dynamic windows -------------------------------------------------------------

/// Attach, exchange displacements through a window, put into the right
/// neighbour's attached region, detach and check; an access to the
/// detached region is an error, and the window keeps working.
#[test]
fn dynamic_attach_detach() {
    every_job("dynamic", |w, _| {
        let (me, n) = (w.rank(), w.size());
        let right = (me + 1) % n;
        let mut dy = Window::<u64>::create_dynamic(w)?;
        let mut disps = Window::<u64>::allocate(w, 1)?;
        for round in 0..3u64 {
            let disp = dy.attach(vec![0u64; 16])?;
            disps.local_write(0, &[disp as u64])?;
            disps.fence(Assert::NONE)?;
            let mut theirs = [0u64];
            disps.get(right, 0, &mut theirs)?;
            disps.fence(Assert::NONE)?;
            let data: Vec<u64> = (0..16)
                .map(|i| round * 1000 + me as u64 * 100 + i)
                .collect();
            dy.lock_all()?;
            dy.put(right, theirs[0] as usize, &data)?;
            dy.unlock_all()?;
            w.barrier()?;
            let got = dy.detach(disp)?;
            let left = ((me + n - 1) % n) as u64;
            let want: Vec<u64> = (0..16).map(|i| round * 1000 + left * 100 + i).collect();
            assert_eq!(got, want, "round {round}: detached region");
            w.barrier()?;
            dy.lock_all()?;
            let e = dy.put(right, theirs[0] as usize, &data);
            let e = e.and_then(|()| dy.flush(right));
            assert!(
                e.is_err(),
                "round {round}: a put into a detached region succeeded"
            );
            dy.unlock_all().ok();
            w.barrier()?;
        }
        disps.free()?;
        dy.free()?;
        Ok(())
    });
}

// ---- soundness under stress ------------------------------------------------------

/// Several threads of every origin rank hammer rank 0's window with
/// accumulates and puts while rank 0 reads it through the window's atomic
/// copies (`local_read`) the whole time. Word-sized values are never torn
/// (each put writes one round number into every word of its slot), counts
/// never go backwards and the totals are exact. With the software path,
/// rank 0's progress agent applies the accumulates and batched puts while
/// its own thread reads: the race the atomic copies make well defined.
#[test]
fn stress_accumulates_and_puts_while_the_owner_reads() {
    const THREADS: usize = 3;
    const ITER: u64 = 300;
    const SLOT: usize = 32;
    for mode in MODES {
        for ranks in [2, 4] {
            run_with(config(mode), ranks, &format!("stress {mode:?}"), |w| {
                let (me, n) = (w.rank(), w.size());
                let slots = (n - 1) * THREADS;
                let len = 1 + slots * SLOT;
                let mut win = Window::<u64>::allocate(w, len)?;
                let total = (n as u64 - 1) * THREADS as u64 * ITER;
                w.barrier()?;
                if me == 0 {
                    let mut last = 0u64;
                    let mut buf = vec![0u64; len];
                    loop {
                        win.local_read(0, &mut buf)?;
                        assert!(
                            buf[0] >= last && buf[0] <= total,
                            "counter {} after {last}",
                            buf[0]
                        );
                        last = buf[0];
                        for (s, slot) in buf[1..].chunks(SLOT).enumerate() {
                            for &v in slot {
                                assert!(v <= ITER, "slot {s}: word {v:#x} was never written");
                            }
                        }
                        if last == total {
                            break;
                        }
                        // The owner also drives its progress (needed in
                        // manual mode; harmless with the agent).
                        w.bench_transport().progress()?;
                    }
                } else {
                    win.lock_all()?;
                    std::thread::scope(|s| {
                        let hs: Vec<_> = (0..THREADS)
                            .map(|th| {
                                let win = &win;
                                s.spawn(move || -> onesided::Result<()> {
                                    let slot = 1 + ((me - 1) * THREADS + th) * SLOT;
                                    for i in 1..=ITER {
                                        win.accumulate(0, 0, &[1], Op::Sum)?;
                                        win.put(0, slot, &[i; SLOT])?;
                                        // Puts to one place are unordered
                                        // until a flush (MPI): the last one
                                        // gets a flush of its own before it.
                                        if i % 50 == 0 || i == ITER - 1 {
                                            win.flush(0)?;
                                        }
                                    }
                                    Ok(())
                                })
                            })
                            .collect();
                        hs.into_iter()
                            .try_for_each(|h| h.join().expect("hammer thread"))
                    })?;
                    win.unlock_all()?;
                }
                w.barrier()?;
                if me == 0 {
                    let mut buf = vec![0u64; len];
                    win.local_read(0, &mut buf)?;
                    assert_eq!(buf[0], total);
                    let stale: Vec<(usize, u64)> = buf[1..]
                        .iter()
                        .enumerate()
                        .filter(|(_, &v)| v != ITER)
                        .map(|(i, &v)| (i, v))
                        .collect();
                    assert!(
                        stale.is_empty(),
                        "{mode:?} {n} ranks: final slots (word, value): {stale:?}"
                    );
                }
                win.free()?;
                Ok(())
            });
        }
    }
}

// ---- manual progress --------------------------------------------------------------

/// Without progress agents, messages wait for the target's library calls:
/// the software protocols still complete because every rank waits inside
/// the library (lock queue, accumulates, PSCW).
#[test]
fn manual_progress_software_protocols() {
    let mut c = config(Mode::Software);
    c.progress = ProgressMode::Manual;
    for ranks in RANKS {
        run_with(c.clone(), ranks, "manual progress", |w| {
            let n = w.size();
            let mut win = Window::<u64>::allocate(w, 1)?;
            for _ in 0..20 {
                win.lock(0, LockType::Exclusive, Assert::NONE)?;
                win.accumulate(0, 0, &[1], Op::Sum)?;
                win.unlock(0)?;
            }
            w.barrier()?;
            if w.rank() == 0 {
                let mut v = [0u64];
                win.local_read(0, &mut v)?;
                assert_eq!(v[0], 20 * n as u64);
            }
            win.free()?;
            Ok(())
        });
    }
}

// ---- seeded property test: random epochs against a model ---------------------------

mod model {
    use super::*;
    use proptest::prelude::*;

    /// One operation of an epoch: origin, target, slot, kind, value.
    #[derive(Debug, Clone)]
    struct Step {
        origin: usize,
        target: usize,
        slot: usize,
        put: bool,
        value: u64,
    }

    const RANKS: usize = 3;
    const SLOTS: usize = 4;

    fn step() -> impl Strategy<Value = Step> {
        (0..RANKS, 0..RANKS, 0..SLOTS, any::<bool>(), 1..1000u64).prop_map(
            |(origin, target, slot, put, value)| Step {
                origin,
                target,
                slot,
                put,
                value,
            },
        )
    }

    // Layout of each rank's window: per origin, SLOTS put slots (only that
    // origin writes them: puts never conflict), then SLOTS counters every
    // origin adds into.
    fn put_index(origin: usize, slot: usize) -> usize {
        origin * SLOTS + slot
    }
    fn sum_index(slot: usize) -> usize {
        RANKS * SLOTS + slot
    }
    /// The operation of counter `slot` (one per counter: the result of an
    /// epoch does not depend on the order of its accumulates).
    fn counter_op(slot: usize) -> Op {
        [Op::Sum, Op::Max, Op::Min][slot % 3]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]

        /// Random epochs (fence, or lock_all with a barrier) of puts and
        /// accumulates (sum, max, min) from every rank; after each epoch
        /// every rank's window equals the sequential model (where one
        /// origin put twice to a location in an epoch, one of its values).
        #[test]
        fn random_epochs_match_the_model(
            epochs in proptest::collection::vec(proptest::collection::vec(step(), 0..24), 1..5),
            software in any::<bool>(),
        ) {
            let mode = if software { Mode::Software } else { Mode::Native };
            // Per epoch: fence, or lock_all ... unlock_all + barrier.
            let passive: Vec<bool> = epochs.iter().map(|e| e.len() % 2 == 1).collect();
            // The model: each rank's window after each epoch.
            let mut model = vec![vec![0u64; RANKS * SLOTS + SLOTS]; RANKS];
            for w in &mut model {
                for slot in 0..SLOTS {
                    if counter_op(slot) == Op::Min {
                        w[sum_index(slot)] = u64::MAX;
                    }
                }
            }
            let mut expect = Vec::new();
            for epoch in &epochs {
                for s in epoch {
                    let w = &mut model[s.target];
                    if s.put {
                        w[put_index(s.origin, s.slot)] = s.value;
                    } else {
                        let c = &mut w[sum_index(s.slot)];
                        *c = match counter_op(s.slot) {
                            Op::Sum => *c + s.value,
                            Op::Max => (*c).max(s.value),
                            _ => (*c).min(s.value),
                        };
                    }
                }
                expect.push(model.clone());
            }
            let got = run_with(config(mode), RANKS, "model", |w| {
                let me = w.rank();
                let mut win = Window::<u64>::allocate(w, RANKS * SLOTS + SLOTS)?;
                let mut seen = Vec::new();
                // Min counters start at the top.
                for slot in 0..SLOTS {
                    if counter_op(slot) == Op::Min {
                        win.local_write(sum_index(slot), &[u64::MAX])?;
                    }
                }
                w.barrier()?;
                for (epoch, &passive) in epochs.iter().zip(&passive) {
                    if passive {
                        win.lock_all()?;
                    } else {
                        win.fence(Assert::NONE)?;
                    }
                    for s in epoch.iter().filter(|s| s.origin == me) {
                        if s.put {
                            win.put(s.target, put_index(me, s.slot), &[s.value])?;
                        } else {
                            let op = counter_op(s.slot);
                            win.accumulate(s.target, sum_index(s.slot), &[s.value], op)?;
                        }
                    }
                    if passive {
                        win.unlock_all()?;
                        w.barrier()?;
                    } else {
                        win.fence(Assert::NONE)?;
                    }
                    let mut v = vec![0u64; RANKS * SLOTS + SLOTS];
                    win.local_read(0, &mut v)?;
                    seen.push(v);
                    if passive {
                        w.barrier()?;
                    } else {
                        win.fence(Assert::NONE)?;
                    }
                }
                win.free()?;
                Ok(seen)
            });
            for (e, want) in expect.iter().enumerate() {
                for (rank, seen) in got.iter().enumerate() {
                    // Two puts of one origin to one location in one epoch
                    // conflict: MPI leaves which lands last undefined (a
                    // batch of aggregated puts may be applied after a later
                    // batch). Such a location holds one of the values put.
                    // Such a location holds one of the values put, and
                    // keeps it through epochs that do not put there.
                    let mut fair = seen[e].clone();
                    for (i, v) in fair.iter_mut().enumerate().take(RANKS * SLOTS) {
                        let (origin, slot) = (i / SLOTS, i % SLOTS);
                        let put: Vec<u64> = epochs[e]
                            .iter()
                            .filter(|s| {
                                s.put && s.origin == origin && s.target == rank && s.slot == slot
                            })
                            .map(|s| s.value)
                            .collect();
                        let kept = put.is_empty() && e > 0 && seen[e - 1][i] == *v;
                        if (put.len() > 1 && put.contains(v)) || kept {
                            *v = want[rank][i];
                        }
                    }
                    prop_assert_eq!(&fair, &want[rank], "epoch {} rank {}", e, rank);
                }
            }
        }
    }
}

/// `ONESIDED_TIMEOUT` holds as on the other back-ends: without progress
/// agents, a target that does not call into the library leaves a software
/// accumulate unacknowledged, and its origin's flush fails with a timeout
/// naming the wait. Once the target calls in again, the same epoch
/// completes and the value is there.
#[test]
fn manual_progress_a_silent_target_times_out_its_origin() {
    let mut c = config(Mode::Software);
    c.progress = ProgressMode::Manual;
    c.timeout = Some(Duration::from_secs(2));
    let (gate, left) = (std::sync::Barrier::new(2), std::sync::Barrier::new(2));
    run_with(c, 2, "silent target", |w| {
        // Each rank passes both gates however it leaves this block (an
        // error, a failed assertion): no rank waits on one forever.
        let opened = Gate(&gate);
        let allocated = Gate(&left);
        let mut win = Window::<u64>::allocate(w, 1)?;
        // Rank 1 has returned from the collective call (which serves
        // messages while it waits) before rank 0 sends.
        drop(allocated);
        if w.rank() == 0 {
            win.lock_all_with(Assert::NOCHECK)?;
            win.accumulate(1, 0, &[5], Op::Sum)?;
            match win.flush(1) {
                Err(e) => assert_eq!(e.kind(), ErrorKind::Timeout, "{e}"),
                Ok(()) => panic!("flush to a target outside the library succeeded"),
            }
            // Let rank 1 call into the library again.
            drop(opened);
            win.unlock_all()?;
        } else {
            // Outside the library until rank 0 has timed out.
            drop(opened);
        }
        w.barrier()?;
        if w.rank() == 1 {
            let mut v = [0u64];
            win.local_read(0, &mut v)?;
            assert_eq!(v[0], 5);
        }
        win.free()?;
        Ok(())
    });
}

/// A PSCW `wait` whose origins do not all complete in time (a program
/// whose rank 2 is late to `start`) fails with a timeout that names the
/// post group and how many of it completed; the exposure epoch stays
/// open, and once the late origin completes, `wait` called again returns
/// with every origin's data in place. An origin's access to a target that
/// never posts times out naming that target.
#[test]
fn a_pscw_wait_that_times_out_names_its_group_and_can_be_called_again() {
    for mode in MODES {
        let mut c = config(mode);
        c.timeout = Some(Duration::from_secs(1));
        let late = std::sync::Barrier::new(2);
        // Every rank leaves its part (whose timeouts take different
        // times) before any enters the closing barrier, whose own wait
        // has the same one-second bound.
        let ended = std::sync::Barrier::new(3);
        run_with(c, 3, &format!("late origin ({mode:?})"), |w| {
            let end = Gate(&ended);
            let me = w.rank();
            let mut win = Window::<u64>::allocate(w, 3)?;
            w.barrier()?;
            match me {
                0 => {
                    let let_in = Gate(&late);
                    win.post(&[1, 2], Assert::NONE)?;
                    let e = win.wait().expect_err("wait with rank 2 not started");
                    assert_eq!(e.kind(), ErrorKind::Timeout, "{e}");
                    let msg = e.to_string();
                    assert!(
                        msg.contains("[1, 2]") && msg.contains("1 of 2"),
                        "the wait's error names the group and its count: {msg}"
                    );
                    // Rank 2 may start now; the epoch is still open.
                    drop(let_in);
                    win.wait()?;
                    let mut v = [0u64; 3];
                    win.local_read(0, &mut v)?;
                    assert_eq!(v, [0, 11, 12]);
                }
                1 => {
                    win.start(&[0], Assert::NONE)?;
                    win.put(0, 1, &[11])?;
                    win.complete()?;
                    // A start to a target that does not post: the put
                    // gives up naming it.
                    win.start(&[2], Assert::NONE)?;
                    let e = win.put(2, 0, &[1]).expect_err("put without a post");
                    assert_eq!((e.kind(), e.rank()), (ErrorKind::Timeout, Some(2)), "{e}");
                    assert!(win.complete().is_err(), "complete without a post");
                }
                _ => {
                    // Late: only after rank 0's wait gave up.
                    drop(Gate(&late));
                    win.start(&[0], Assert::NONE)?;
                    win.put(0, 2, &[12])?;
                    win.complete()?;
                }
            }
            drop(end);
            w.barrier()?;
            win.free()
        });
    }
}

/// Waits on its barrier when dropped, also while unwinding.
struct Gate<'a>(&'a std::sync::Barrier);

impl Drop for Gate<'_> {
    fn drop(&mut self) {
        self.0.wait();
    }
}

// ---- seeded property test: random lock sections, tiny queues and pools -----------

mod lock_model {
    use super::*;
    use proptest::prelude::*;

    const RANKS: usize = 3;

    /// One locked section: target, exclusive or shared, an amount to add.
    type Section = (usize, bool, u64);

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(16))]

        /// Every rank runs a random script of locked sections on random
        /// targets — exclusive: a get-increment-put of a counter and its
        /// mirror, written one at a time; shared: a read of both — each
        /// adding an amount to a third word, with the lock queue, the
        /// operation pools and the slots of the op table all random and
        /// tiny (busy answers, cleanups, pool exhaustion). Against the
        /// model: no reader or writer ever sees the pair differ, and every
        /// target ends with exactly the number of exclusive sections and
        /// the sum of amounts aimed at it.
        #[test]
        fn random_lock_sections_match_the_model(
            scripts in proptest::collection::vec(
                proptest::collection::vec((0..RANKS, any::<bool>(), 1..50u64), 0..12),
                RANKS..=RANKS,
            ),
            software in any::<bool>(),
            lock_queue in 1..4usize,
            pools in (0..3usize, 1..3usize, 0..2usize, 1..2usize, 1..3usize),
        ) {
            let mut c = config(if software { Mode::Software } else { Mode::Native });
            c.lock_queue = lock_queue;
            (c.ops.op_elements, c.ops.win_op_elements, c.ops.target_elements,
             c.ops.win_target_elements, c.ops.slots) = pools;
            let got = run_with(c, RANKS, "lock model", |w| {
                let me = w.rank();
                let mut win = Window::<u64>::allocate(w, 3)?;
                w.barrier()?;
                let script: &Vec<Section> = &scripts[me];
                for (i, &(t, exclusive, k)) in script.iter().enumerate() {
                    if exclusive {
                        win.lock(t, LockType::Exclusive, Assert::NONE)?;
                        let mut v = [0u64; 2];
                        win.get(t, 0, &mut v)?;
                        win.flush(t)?;
                        assert_eq!(v[0], v[1], "rank {me} section {i}: writer saw a torn pair");
                        win.put(t, 0, &[v[0] + 1])?;
                        win.flush(t)?;
                        win.put(t, 1, &[v[1] + 1])?;
                    } else {
                        win.lock(t, LockType::Shared, Assert::NONE)?;
                        let (mut a, mut b) = ([0u64], [0u64]);
                        win.get(t, 0, &mut a)?;
                        win.flush(t)?;
                        win.get(t, 1, &mut b)?;
                        win.flush(t)?;
                        assert_eq!(a, b, "rank {me} section {i}: reader saw a writer");
                    }
                    win.accumulate(t, 2, &[k], Op::Sum)?;
                    win.unlock(t)?;
                }
                w.barrier()?;
                let mut v = [0u64; 3];
                win.local_read(0, &mut v)?;
                win.free()?;
                Ok(v)
            });
            for (t, v) in got.iter().enumerate() {
                let aimed = scripts.iter().flatten().filter(|s| s.0 == t);
                let writers = aimed.clone().filter(|s| s.1).count() as u64;
                let sum: u64 = aimed.map(|s| s.2).sum();
                prop_assert_eq!(*v, [writers, writers, sum], "target {}", t);
            }
        }
    }
}

/// Broadcast, allgather and allreduce at every rank count from 1 to 9
/// (powers of two, the folded ranks of the others), every element checked.
#[test]
fn collectives_at_1_to_9_ranks() {
    for ranks in 1..=9 {
        let got = run_with(config(Mode::Native), ranks, "collectives", |w| {
            let (me, p) = (w.rank(), w.size());
            let root = p / 2;
            let mut b: Vec<u32> = if me == root {
                (0..11).collect()
            } else {
                vec![0; 11]
            };
            w.broadcast(root, &mut b)?;
            assert_eq!(b, (0..11).collect::<Vec<u32>>(), "broadcast, {p} ranks");
            let all = w.allgather(&[me as u16, 7])?;
            let want: Vec<u16> = (0..p).flat_map(|r| [r as u16, 7]).collect();
            assert_eq!(all, want, "allgather, {p} ranks");
            let mut s = vec![me as i64 + 1, -(me as i64)];
            w.allreduce(&mut s, Op::Sum)?;
            let mut m = vec![(me as f32) - 2.5];
            w.allreduce(&mut m, Op::Max)?;
            Ok((s, m[0]))
        });
        let p = ranks as i64;
        for (s, m) in got {
            assert_eq!(
                s,
                vec![p * (p + 1) / 2, -(p * (p - 1) / 2)],
                "{ranks} ranks"
            );
            assert_eq!(m, ranks as f32 - 3.5, "{ranks} ranks");
        }
    }
}

/// `no_locks`: no lock queue even where locks take the software protocol
/// (one is open without the hint), lock and lock_all refused, fences work.
#[test]
fn no_locks_opens_no_lock_queue() {
    for ranks in RANKS {
        run_with(config(Mode::Software), ranks, "no_locks", |w| {
            let plain = Window::<u64>::allocate(w, 4)?;
            assert!(plain.stats().lock_queue, "software locks open a queue");
            let info = onesided::WindowInfo::new().no_locks(true);
            let win = Window::<u64>::allocate_with(w, 4, &info)?;
            assert!(!win.stats().lock_queue);
            let e = win.lock_all().unwrap_err();
            assert_eq!(e.kind(), ErrorKind::EpochMisuse);
            let e = win.lock(0, LockType::Shared, Assert::NONE).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::EpochMisuse);
            win.fence(Assert::NONE)?;
            win.accumulate((w.rank() + 1) % w.size(), 1, &[5], Op::Sum)?;
            win.fence(Assert::NONE)?;
            assert_eq!(win.local_to_vec()?, vec![0, 5, 0, 0]);
            let (mut a, mut b) = (plain, win);
            b.free()?;
            a.free()
        });
    }
}

/// Issue 13, on the in-process back-end: `lock_all`, one put to rank P−1
/// and `unlock_all` at rank 0 contact exactly one new peer, and the epoch's
/// remote operations are the same at 4 and 8 ranks, on both lock paths.
#[test]
fn lock_all_per_target() {
    for lock in [LockMode::Hardware, LockMode::Software] {
        let mut counts = Vec::new();
        for ranks in [4usize, 8] {
            let mut c = config(Mode::Native);
            c.lock = lock;
            let got = run_with(c, ranks, &format!("lock_all per target ({lock:?})"), |w| {
                let mut win = Window::<u64>::allocate(w, 4)?;
                w.barrier()?;
                let (me, p) = (w.rank(), w.size());
                let mut seen = None;
                if me == 0 {
                    let before = w.stats();
                    win.lock_all()?;
                    win.put(p - 1, 1, &[500 + p as u64])?;
                    win.unlock_all()?;
                    let after = w.stats();
                    let ops = |s: &onesided::WorldStats| {
                        s.transport.sends
                            + s.transport.writes
                            + s.transport.reads
                            + s.transport.atomics
                    };
                    seen = Some((
                        after.peers_contacted - before.peers_contacted,
                        ops(&after) - ops(&before),
                    ));
                }
                w.barrier()?;
                if me == p - 1 {
                    assert_eq!(win.local_to_vec()?[1], 500 + p as u64, "the put landed");
                }
                w.barrier()?;
                win.free()?;
                Ok(seen)
            });
            let (peers, ops) = got[0].expect("rank 0 measured");
            assert_eq!(peers, 1, "{lock:?}, {ranks} ranks: new peers contacted");
            counts.push(ops);
        }
        assert_eq!(
            counts[0], counts[1],
            "{lock:?}: remote operations at 4 and 8 ranks"
        );
        println!(
            "lock_all per target ({lock:?}): 1 new peer, {} remote operations",
            counts[0]
        );
    }
}

/// Threads sharing one per-target lock epoch on the software lock path:
/// rank 0 locks rank 1 (lazily: nothing sent) while rank 1 holds its own
/// exclusive lock. Thread A's `get` starts acquiring (its request is
/// queued); only then thread B puts 512 bytes (too large to carry in the
/// lock message) to the other half. B's put must wait for the grant like A's get: rank 1
/// checks that its memory stays untouched while it holds the exclusive
/// lock (for 200 ms once A's request is queued), and afterwards that B's
/// bytes landed and A read the bytes from before.
#[test]
fn lock_shared_by_threads_waits_for_the_grant() {
    let mut c = config(Mode::Software);
    c.ops.mode = AggregateMode::Off;
    run_with(c, 2, "per-target lock shared by threads", |w| {
        const N: usize = 128;
        const H: usize = N / 2;
        let mut win = Window::<u64>::allocate(w, N)?;
        let before: Vec<u64> = (0..N as u64).map(|i| 7 + i).collect();
        let data: Vec<u64> = (0..N as u64).map(|i| 1000 + i).collect();
        if w.rank() == 1 {
            win.lock(1, LockType::Exclusive, Assert::NONE)?;
            win.put(1, 0, &before)?;
            win.flush(1)?;
        }
        w.barrier()?;
        if w.rank() == 1 {
            let start = std::time::Instant::now();
            while w.stats().locks.queued == 0 {
                assert!(start.elapsed() < Duration::from_secs(60), "A never queued");
                std::thread::yield_now();
            }
            let seen = std::time::Instant::now();
            while seen.elapsed() < Duration::from_millis(200) {
                let now = win.local_to_vec()?;
                assert_eq!(
                    now, before,
                    "rank 1's memory changed while it held its exclusive lock"
                );
                std::thread::yield_now();
            }
            win.unlock(1)?;
        } else {
            let sent = w.stats().active_messages.requests;
            win.lock(1, LockType::Exclusive, Assert::NONE)?;
            std::thread::scope(|s| -> onesided::Result<()> {
                let a = s.spawn(|| -> onesided::Result<Vec<u64>> {
                    let mut out = vec![0u64; H];
                    win.get(1, 0, &mut out)?;
                    Ok(out)
                });
                // A's acquire request is out: its lock is being acquired.
                let start = std::time::Instant::now();
                while w.stats().active_messages.requests == sent && !a.is_finished() {
                    assert!(start.elapsed() < Duration::from_secs(60), "A never sent");
                    std::thread::yield_now();
                }
                let b = s.spawn(|| win.put(1, H, &data[H..]));
                b.join().expect("thread B")?;
                let got = a.join().expect("thread A")?;
                assert_eq!(got, before[..H], "A's get ran after rank 1's epoch");
                Ok(())
            })?;
            win.unlock(1)?;
        }
        w.barrier()?;
        if w.rank() == 1 {
            let now = win.local_to_vec()?;
            assert_eq!(now[..H], before[..H], "untouched half");
            assert_eq!(now[H..], data[H..], "B's put landed");
        }
        w.barrier()?;
        win.free()
    });
}

/// Two threads of each process lock, use and unlock different targets at
/// once, many rounds: one thread's lock is often taken without the state
/// mutex (the lane of `epoch::permit`, an idle state's node-local lock)
/// while the other takes the mutex, which must record it before deciding
/// anything. Thread 0 locks exclusively, thread 1 shared (itself at 2
/// ranks); every lock, operation and unlock must succeed and every value
/// land. Under every mode.
#[test]
fn threads_lock_different_targets_at_once() {
    const T: usize = 2;
    const ROUNDS: u64 = 1000;
    every_job("threads lock different targets at once", |w, _mode| {
        let (me, p) = (w.rank(), w.size());
        let mut win = Window::<u64>::allocate(w, p * T)?;
        w.barrier()?;
        on_threads(T, |t| {
            let target = (me + 1 + t) % p;
            let kind = [LockType::Exclusive, LockType::Shared][t];
            let at = me * T + t;
            for round in 0..ROUNDS {
                let v = round << 16 | (me as u64) << 8 | t as u64;
                win.lock(target, kind, Assert::NONE)?;
                win.put(target, at, &[v])?;
                win.flush(target)?;
                let mut back = [0u64];
                win.get(target, at, &mut back)?;
                assert_eq!(back[0], v, "thread {t}, round {round}");
                win.unlock(target)?;
            }
            Ok(())
        })?;
        w.barrier()?;
        let mine = win.local_to_vec()?;
        for origin in 0..p {
            for t in 0..T {
                if (origin + 1 + t) % p == me {
                    let want = (ROUNDS - 1) << 16 | (origin as u64) << 8 | t as u64;
                    assert_eq!(mine[origin * T + t], want, "origin {origin}, thread {t}");
                }
            }
        }
        // The window is idle again: an epoch of another kind opens.
        win.fence(Assert::NONE)?;
        win.fence(Assert::NOSUCCEED)?;
        w.barrier()?;
        win.free()
    });
}

/// Four threads share one per-target lock epoch (the lock-free permit of
/// a single held lock): each puts its own 64 elements, flushes, reads them
/// back with get and fetch_and_op, many rounds; then every byte is checked
/// at the target. Under every mode (lock word, lock queue, direct path).
#[test]
fn one_lock_epoch_shared_by_threads() {
    const T: usize = 4;
    const N: usize = 64;
    const ROUNDS: u64 = 20;
    every_job("one lock epoch shared by threads", |w, _mode| {
        let p = w.size();
        let mut win = Window::<u64>::allocate(w, T * N + T)?;
        w.barrier()?;
        let target = (w.rank() + 1) % p;
        win.lock(target, LockType::Exclusive, Assert::NONE)?;
        on_threads(T, |t| {
            for round in 0..ROUNDS {
                let v: Vec<u64> = (0..N as u64)
                    .map(|i| (w.rank() as u64) << 32 | (t as u64) << 24 | round << 8 | i)
                    .collect();
                win.put(target, t * N, &v)?;
                win.flush(target)?;
                let mut back = vec![0u64; N];
                win.get(target, t * N, &mut back)?;
                assert_eq!(back, v, "thread {t}, round {round}");
                let old = win.fetch_and_op(target, T * N + t, 1, Op::Sum)?;
                assert_eq!(old, round, "thread {t}'s counter");
            }
            Ok(())
        })?;
        win.unlock(target)?;
        w.barrier()?;
        let mine = win.local_to_vec()?;
        let origin = (w.rank() + p - 1) % p;
        for t in 0..T {
            for i in 0..N {
                let want = (origin as u64) << 32 | (t as u64) << 24 | (ROUNDS - 1) << 8 | i as u64;
                assert_eq!(mine[t * N + i], want, "thread {t}, element {i}");
            }
            assert_eq!(mine[T * N + t], ROUNDS, "thread {t}'s counter");
        }
        w.barrier()?;
        win.free()
    });
}
