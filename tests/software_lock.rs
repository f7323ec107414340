//! Multi-process tests of the software lock path (`ONESIDED_LOCK=software`:
//! a lock queue at the target served by active messages, lazy locks, one
//! message for lock + small operation + unlock). Every test sets the
//! variable itself before `World::init` (each rank is its own process).
//! Nothing synchronizes by sleeping: locks, barriers, flags in windows.

#[macro_use]
mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use onesided::protocols::soft_lock::wire::{Carried, LockMsg, Status, SubOp};
use onesided::transport::am::kind;
use onesided::transport::{AtomicOp, Datatype};
use onesided::{Assert, LockType, Op, Window, World};

const ROUNDS: u64 = 40;

type Replies = Arc<Mutex<Vec<Result<Vec<u8>, String>>>>;

fn software_world(accumulate: Option<&str>) -> World {
    std::env::set_var("ONESIDED_LOCK", "software");
    if let Some(a) = accumulate {
        std::env::set_var("ONESIDED_ACCUMULATE", a);
    }
    World::init().expect("init")
}

/// Drives progress until `done` (bounded: a hang fails the test).
fn until(world: &World, what: &str, done: impl Fn() -> bool) {
    let start = Instant::now();
    while !done() {
        world.bench_transport().progress().expect("progress");
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "rank {}: timed out waiting for {what}: {:?}",
            world.rank(),
            world.stats()
        );
        std::thread::yield_now();
    }
}

// ---- contention: exclusion and the queued lock-op-unlock ----------------

/// Every rank increments rank 0's element 0 by get + put under an
/// exclusive lock (a lost update shows a missing exclusion), and element 1
/// by lock + accumulate + unlock (one lock-op-unlock message each; under
/// contention it is queued and replayed once granted). Both totals exact.
fn contention() {
    let world = software_world(Some("software"));
    let p = world.size() as u64;
    let mut win = Window::<u64>::allocate(&world, 2).expect("allocate");
    for _ in 0..ROUNDS {
        win.lock(0, LockType::Exclusive, Assert::NONE)
            .expect("lock");
        let mut v = [0u64];
        win.get(0, 0, &mut v).expect("get");
        win.put(0, 0, &[v[0] + 1]).expect("put");
        win.unlock(0).expect("unlock");
        win.lock(0, LockType::Exclusive, Assert::NONE)
            .expect("lock");
        win.accumulate(0, 1, &[1], Op::Sum).expect("accumulate");
        win.unlock(0).expect("unlock");
    }
    // One uncontended lock-accumulate-unlock per rank, in turn: granted on
    // arrival, so applied from the message (under contention every request
    // may be queued and replayed, which the loop above covers).
    for turn in 0..p as usize {
        if turn == world.rank() {
            win.lock(0, LockType::Exclusive, Assert::NONE)
                .expect("lock");
            win.accumulate(0, 1, &[1], Op::Sum).expect("accumulate");
            win.unlock(0).expect("unlock");
        }
        world.barrier().expect("barrier");
    }
    if world.rank() == 0 {
        let got = win.local_to_vec().expect("read");
        assert_eq!(got, vec![p * ROUNDS, p * ROUNDS + p]);
        // Lazy (one message) unless the memory is node-shared (eager).
        let s = world.stats().locks;
        if std::env::var("ONESIDED_SHM").as_deref() == Ok("0") {
            assert!(s.ops_applied > 0, "no lock-op-unlock was applied: {s:?}");
        }
    }
    assert_eq!(world.stats().active_messages.protocol_errors, 0);
    win.free().expect("free");
}

// ---- a writer is not starved by readers ---------------------------------

/// Rank 0 holds a shared lock on itself. Rank 1 asks for an exclusive lock
/// (lock + put 42 + unlock) and is queued. Only once rank 0's queue shows
/// it, rank 2 is told to take a shared lock and read: with FIFO fairness it
/// queues behind the writer (although only a reader holds the lock) and
/// reads 42 once rank 0 lets go; a reader overtaking the writer would read
/// 0. Rank 0 releases only after the reader is queued too.
fn writer_not_starved() {
    let world = software_world(None);
    let rank = world.rank();
    let mut win =
        Window::<u64>::create(&world, Box::leak(vec![0u64; 1].into_boxed_slice())).expect("create");
    let mut sig = Window::<u64>::allocate(&world, 1).expect("allocate");
    world.barrier().expect("barrier");
    match rank {
        0 => {
            win.lock(0, LockType::Shared, Assert::NONE)
                .expect("lock self");
            world.barrier().expect("barrier");
            until(&world, "the writer queued", || {
                world.stats().locks.queued >= 1
            });
            sig.lock_all_with(Assert::NOCHECK).expect("lock_all");
            sig.put(2, 0, &[1]).expect("signal");
            sig.flush(2).expect("flush");
            sig.unlock_all().expect("unlock_all");
            until(&world, "the reader queued", || {
                world.stats().locks.queued >= 2
            });
            let mut v = [7u64];
            win.get(0, 0, &mut v).expect("get");
            assert_eq!(v[0], 0, "the writer got in while a reader held the lock");
            win.unlock(0).expect("unlock self");
        }
        1 => {
            world.barrier().expect("barrier");
            win.lock(0, LockType::Exclusive, Assert::NONE)
                .expect("lock");
            win.put(0, 0, &[42]).expect("put");
            win.unlock(0).expect("unlock");
        }
        2 => {
            world.barrier().expect("barrier");
            let mut flag = [0u64];
            while flag[0] == 0 {
                sig.sync().expect("sync");
                sig.local_read(0, &mut flag).expect("read flag");
            }
            win.lock(0, LockType::Shared, Assert::NONE).expect("lock");
            let mut v = [0u64];
            win.get(0, 0, &mut v).expect("get");
            win.unlock(0).expect("unlock");
            assert_eq!(v[0], 42, "the late reader overtook the waiting writer");
        }
        _ => world.barrier().expect("barrier"),
    }
    world.barrier().expect("barrier");
    sig.free().expect("free");
    win.free().expect("free");
}

// ---- message count --------------------------------------------------------

/// lock + one 8 B put + unlock on the software path is exactly one
/// active-message request and one reply, no RMA operation, and the value
/// is at the target when `unlock` returns (checked after a barrier with no
/// flush in between). The same for lock + accumulate + unlock when the
/// window's accumulates run in software.
fn message_count() {
    let world = software_world(Some("software"));
    let (rank, p) = (world.rank(), world.size());
    // `create`: never node-shared, so the lock is lazy on every path.
    let mut win =
        Window::<u64>::create(&world, Box::leak(vec![0u64; 4].into_boxed_slice())).expect("create");
    let target = (rank + 1) % p;
    // First contact (descriptor read, connection) outside the count.
    win.lock(target, LockType::Exclusive, Assert::NONE)
        .expect("lock");
    win.put(target, 3, &[1]).expect("put");
    win.unlock(target).expect("unlock");
    world.barrier().expect("barrier");
    let epoch = |f: &dyn Fn()| {
        let before = world.stats();
        win.lock(target, LockType::Exclusive, Assert::NONE)
            .expect("lock");
        f();
        win.unlock(target).expect("unlock");
        let after = world.stats();
        let am = (
            after.active_messages.requests - before.active_messages.requests,
            after.active_messages.replies - before.active_messages.replies,
        );
        let t = (after.transport, before.transport);
        let rma = (t.0.writes - t.1.writes) + (t.0.reads - t.1.reads) + (t.0.atomics - t.1.atomics);
        assert_eq!(am, (1, 1), "requests and replies of one lock-op-unlock");
        assert_eq!(t.0.sends - t.1.sends, 1, "messages sent");
        assert_eq!(rma, 0, "RMA operations posted");
    };
    // One rank at a time: replies this rank sends to others would count.
    for turn in 0..p {
        if turn == rank {
            epoch(&|| win.put(target, 0, &[100 + rank as u64]).expect("put"));
            epoch(&|| {
                win.accumulate(target, 1, &[5], Op::Sum)
                    .expect("accumulate")
            });
        }
        world.barrier().expect("barrier");
    }
    let from = (rank + p - 1) % p;
    let local = win.local_to_vec().expect("read");
    assert_eq!(&local[..2], &[100 + from as u64, 5]);
    assert_eq!(world.stats().locks.ops_applied, 3);
    world.barrier().expect("barrier");
    win.free().expect("free");
}

// ---- hostile lock messages -------------------------------------------------

/// Rank 0 sends malformed and refused lock requests to rank 1: each gets an
/// error reply, is counted as a protocol error at rank 1, and neither the
/// window memory nor the lock state changes (a normal lock works after).
fn hostile() {
    let world = software_world(None);
    let rank = world.rank();
    let mut win = Window::<u64>::allocate(&world, 2).expect("allocate");
    world.barrier().expect("barrier");
    let id = win.id();
    let msg = |sub, op, ticket| LockMsg {
        sub,
        kind: LockType::Exclusive,
        release: false,
        window: id,
        ticket,
        op,
    };
    let big = [1u8; 8];
    let mut short = msg(SubOp::Acquire, Carried::None, 0).encode();
    short.truncate(20);
    let mut bad_sub = msg(SubOp::Acquire, Carried::None, 0).encode();
    bad_sub[0] = 9;
    let mut unknown_window = msg(SubOp::Acquire, Carried::None, 0);
    unknown_window.window = id + 1000;
    let bad: Vec<Vec<u8>> = vec![
        short,
        bad_sub,
        unknown_window.encode(),
        msg(
            SubOp::Acquire,
            Carried::Put {
                offset: 12,
                data: &big,
            },
            0,
        )
        .encode(),
        msg(
            SubOp::Acquire,
            Carried::Accumulate {
                offset: 0,
                op: AtomicOp::Sum,
                datatype: Datatype::I32,
                data: &big,
            },
            0,
        )
        .encode(),
        msg(SubOp::Release, Carried::None, 0).encode(),
        msg(SubOp::Poll, Carried::None, 77).encode(),
        msg(SubOp::Cancel, Carried::None, 78).encode(),
    ];
    if rank == 0 {
        let am = world.active_messages();
        let t = world.bench_transport();
        let got: Replies = Arc::default();
        for (i, m) in bad.iter().enumerate() {
            let g = got.clone();
            am.request(
                t,
                1,
                kind::LOCK,
                m,
                Box::new(move |r| {
                    g.lock()
                        .unwrap()
                        .push(r.map(|b| b.to_vec()).map_err(|e| e.to_string()))
                }),
            )
            .expect("request");
            until(&world, "an error reply", || {
                got.lock().unwrap().len() == i + 1
            });
        }
        for (i, r) in got.lock().unwrap().iter().enumerate() {
            assert!(r.is_err(), "malformed lock request {i} was answered {r:?}");
        }
        // The queue still works: an exclusive lock-put-unlock goes through.
        win.lock(1, LockType::Exclusive, Assert::NONE)
            .expect("lock");
        win.put(1, 1, &[9]).expect("put");
        win.unlock(1).expect("unlock");
    }
    world.barrier().expect("barrier");
    if rank == 1 {
        assert_eq!(win.local_to_vec().expect("read"), vec![0, 9]);
        assert_eq!(
            world.stats().active_messages.protocol_errors,
            bad.len() as u64
        );
        assert_eq!(
            Status::decode(&Status::Granted.encode()),
            Ok(Status::Granted)
        );
    }
    world.barrier().expect("barrier");
    win.free().expect("free");
}

spmd_test!(software_lock_contention_exact, &[2, 4], contention);
spmd_test!(
    software_lock_writer_not_starved,
    &[3, 4],
    writer_not_starved
);
spmd_test!(
    software_lock_put_unlock_is_one_message,
    &[2, 3],
    message_count
);
spmd_test!(software_lock_hostile_messages_dropped, &[2], hostile);
