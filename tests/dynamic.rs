//! Dynamic windows: attach, access by displacement from peers and oneself,
//! attach after peers cached the table, detach, and the errors. Real
//! processes, real providers, every byte checked (see tests/common).

#[macro_use]
mod common;

use onesided::{Assert, Op, Window, World};

const N: usize = 1000;

fn value(owner: usize, region: usize, i: usize) -> u64 {
    ((owner as u64) << 40) ^ ((region as u64) << 32) ^ (i as u64 * 0x9e37)
}

/// Compares element by element, reporting the first difference only.
fn same(got: &[u64], want: &[u64], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    if let Some(i) = (0..got.len()).find(|&i| got[i] != want[i]) {
        panic!(
            "{what}: element {i} is {:#x}, expected {:#x}",
            got[i], want[i]
        );
    }
}

/// Exchanges every rank's `disp` through a regular window (as an MPI
/// program would with an allgather); returns them by rank.
fn exchange(world: &World, disp: usize) -> Vec<usize> {
    let mut dir = Window::<u64>::allocate(world, 1).unwrap();
    dir.local_write(0, &[disp as u64]).unwrap();
    dir.fence(Assert::NONE).unwrap();
    let all = (0..world.size())
        .map(|r| {
            let mut v = [0u64];
            dir.get(r, 0, &mut v).unwrap();
            v[0] as usize
        })
        .collect();
    dir.fence(Assert::NOSUCCEED).unwrap();
    dir.free().unwrap();
    all
}

fn attach_put_get_detach() {
    let world = World::init().unwrap();
    let (me, n) = (world.rank(), world.size());
    let right = (me + 1) % n;
    let mut win = Window::<u64>::create_dynamic(&world).unwrap();
    assert!(win.is_dynamic());

    // Region 0: attached before anyone accesses it.
    let d0 = win
        .attach((0..N).map(|i| value(me, 0, i)).collect())
        .unwrap();
    let disps0 = exchange(&world, d0);

    win.lock_all().unwrap();
    // Read the neighbour's region, then overwrite its second half at an odd
    // displacement, and read that back.
    let mut got = vec![0u64; N];
    win.get(right, disps0[right], &mut got).unwrap();
    let want: Vec<u64> = (0..N).map(|i| value(right, 0, i)).collect();
    same(
        &got,
        &want,
        &format!("get of rank {right}'s attached region"),
    );
    // Nobody writes before everybody has read the initial contents.
    win.unlock_all().unwrap();
    world.barrier().unwrap();
    win.lock_all().unwrap();
    let mine: Vec<u64> = (0..N / 2).map(|i| value(me, 7, i)).collect();
    win.put(right, disps0[right] + N / 2 - 1, &mine).unwrap();
    win.flush(right).unwrap();
    let mut back = vec![0u64; N / 2];
    win.get(right, disps0[right] + N / 2 - 1, &mut back)
        .unwrap();
    same(&back, &mine, &format!("put then get on rank {right}"));
    // To oneself, through the provider's loopback (elements 1 and 2).
    win.put(me, d0 + 1, &[42, 43]).unwrap();
    win.flush(me).unwrap();
    let mut two = [0u64; 2];
    win.get(me, d0 + 1, &mut two).unwrap();
    assert_eq!(two, [42, 43], "self put/get");
    // Accumulates go through the same resolution (element 0).
    let old = win.fetch_and_op(right, disps0[right], 5, Op::Sum).unwrap();
    assert_eq!(old, value(right, 0, 0), "fetch_and_op on rank {right}");
    let reads_before = win.stats().attach_table_reads;
    assert!(reads_before >= 1, "the table was read: {:?}", win.stats());
    win.unlock_all().unwrap();
    world.barrier().unwrap();

    // Every owner checks its region: its left neighbour's put and SUM, its
    // own self put.
    let left = (me + n - 1) % n;
    let mut mem = vec![0u64; N];
    win.local_read(d0, &mut mem).unwrap();
    let mut expect: Vec<u64> = (0..N).map(|i| value(me, 0, i)).collect();
    expect[0] = expect[0].wrapping_add(5);
    expect[1] = 42;
    expect[2] = 43;
    for (i, v) in (0..N / 2).map(|i| value(left, 7, i)).enumerate() {
        expect[N / 2 - 1 + i] = v;
    }
    same(
        &mem,
        &expect,
        &format!("rank {me}'s region after the epoch"),
    );

    // Region 1: attached after peers cached our table; their first access
    // misses and re-reads it.
    let d1 = win.attach(vec![7u64; 16]).unwrap();
    let disps1 = exchange(&world, d1);
    win.lock_all().unwrap();
    let mut x = [0u64; 16];
    win.get(right, disps1[right], &mut x).unwrap();
    assert_eq!(x, [7u64; 16]);
    assert!(
        win.stats().attach_table_reads > reads_before || right == me,
        "a new region is found by re-reading the table: {:?}",
        win.stats()
    );
    // Errors: unattached address, straddling the end, past region 1.
    let err = win.get(right, 1, &mut x).unwrap_err();
    assert_eq!(err.kind(), onesided::ErrorKind::OutOfWindow, "{err}");
    assert_eq!(err.rank(), Some(right), "{err}");
    let e = err.to_string();
    assert!(
        e.contains("no region attached") && e.contains(&format!("rank {right}")),
        "{e}"
    );
    let e = win
        .get(right, disps1[right] + 8, &mut x)
        .unwrap_err()
        .to_string();
    assert!(e.contains("no region attached"), "{e}");
    win.unlock_all().unwrap();
    world.barrier().unwrap();

    // Detach gives the buffers back with what peers wrote.
    let r1 = win.detach(d1).unwrap();
    assert_eq!(r1, vec![7u64; 16]);
    let r0 = win.detach(d0).unwrap();
    assert_eq!(r0.len(), N);
    same(&r0, &mem, "the detached buffer holds what peers wrote");
    assert!(win.detach(d0).is_err(), "detach twice");
    assert!(
        win.local_read(d0, &mut x).is_err(),
        "local access after detach"
    );
    world.barrier().unwrap();
    win.free().unwrap();
    common::assert_transport_clean(&world);
}

fn misuse() {
    let world = World::init().unwrap();
    let win = Window::<u64>::allocate(&world, 8).unwrap();
    let e = win.attach(vec![1]).unwrap_err().to_string();
    assert!(e.contains("dynamic"), "{e}");
    assert!(win.detach(0).is_err());
    let mut dynw = Window::<u64>::create_dynamic(&world).unwrap();
    assert!(dynw.attach(Vec::new()).is_err(), "empty attach");
    let limit: usize = std::env::var("ONESIDED_MAX_ATTACH")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(64);
    let disps: Vec<usize> = (0..limit)
        .map(|i| dynw.attach(vec![i as u64]).unwrap())
        .collect();
    let e = dynw.attach(vec![0]).unwrap_err().to_string();
    assert!(e.contains("ONESIDED_MAX_ATTACH"), "{e}");
    dynw.detach(disps[0]).unwrap();
    dynw.attach(vec![9]).unwrap();
    // No epoch: an access is refused before anything is resolved.
    let mut x = [0u64];
    assert!(dynw.get(0, disps[1], &mut x).is_err());
    dynw.free().unwrap();
    let mut win = win;
    win.free().unwrap();
}

spmd_test!(
    dynamic_attach_put_get_detach,
    &[2, 4],
    attach_put_get_detach
);
spmd_test!(dynamic_misuse, &[2], misuse);

/// A 1 MiB put and an 8-byte put into one's own attached region, then
/// `flush(me)`: every element is there when the region is read back (issue
/// 12 item 7: flush returned before a put to oneself completed on tcp).
fn put_to_self() {
    let world = World::init().unwrap();
    let me = world.rank();
    let mut win = Window::<u64>::create_dynamic(&world).unwrap();
    const M: usize = 1 << 17; // 1 MiB of u64
    let d = win.attach(vec![0u64; M]).unwrap();
    win.lock_all().unwrap();
    let data: Vec<u64> = (0..M).map(|i| value(me, 7, i)).collect();
    win.put(me, d, &data).unwrap();
    win.flush(me).unwrap();
    let mut back = vec![0u64; M];
    win.get(me, d, &mut back).unwrap();
    same(
        &back,
        &data,
        "1 MiB put to oneself, after flush(me), read by get",
    );
    win.put(me, d + 5, &[42]).unwrap();
    win.unlock_all().unwrap();
    let region = win.detach(d).unwrap();
    let mut want = data;
    want[5] = 42;
    same(&region, &want, "region after put to oneself and unlock_all");
    win.free().unwrap();
}
spmd_test!(dynamic_put_to_self_is_flushed, &[1, 2], put_to_self);

/// Every rank detaches its region and attaches the same `Vec` again (same
/// address, new contents, new key); in the next epoch peers read the new
/// contents and write it (issue 12 item 6: peers used their cached
/// attachment and failed with "Permission denied" / "Operation canceled").
/// Each epoch kind is tried: lock_all, lock, fence.
fn reattach() {
    let world = World::init().unwrap();
    let (me, n) = (world.rank(), world.size());
    let right = (me + 1) % n;
    let left = (me + n - 1) % n;
    let mut win = Window::<u64>::create_dynamic(&world).unwrap();
    let mut region: Vec<u64> = (0..N).map(|i| value(me, 0, i)).collect();
    for round in 1..=3usize {
        let d = win.attach(region).unwrap();
        let disps = exchange(&world, d);
        let mut got = vec![0u64; N];
        match round {
            1 => {
                win.lock_all().unwrap();
                win.get(right, disps[right], &mut got).unwrap();
                win.put(right, disps[right] + 1, &[round as u64]).unwrap();
                win.unlock_all().unwrap();
            }
            2 => {
                win.lock(right, onesided::LockType::Shared, Assert::NONE)
                    .unwrap();
                win.get(right, disps[right], &mut got).unwrap();
                win.put(right, disps[right] + 1, &[round as u64]).unwrap();
                win.unlock(right).unwrap();
            }
            _ => {
                win.fence(Assert::NONE).unwrap();
                win.get(right, disps[right], &mut got).unwrap();
                win.put(right, disps[right] + 1, &[round as u64]).unwrap();
                win.fence(Assert::NOSUCCEED).unwrap();
            }
        }
        // Everyone's epoch is over before the target detaches.
        world.barrier().unwrap();
        let mut want: Vec<u64> = (0..N).map(|i| value(right, round - 1, i)).collect();
        if round > 1 {
            want[1] = round as u64 - 1;
        }
        same(
            &got,
            &want,
            &format!("round {round}: rank {right}'s re-attached region"),
        );
        region = win.detach(d).unwrap();
        assert_eq!(region[1], round as u64, "round {round}: rank {left}'s put");
        // New contents for the next round, in the same Vec (same address).
        for (i, v) in region.iter_mut().enumerate() {
            *v = value(me, round, i);
        }
        region[1] = round as u64;
    }
    win.free().unwrap();
}
spmd_test!(dynamic_reattach_same_vec, &[2, 4], reattach);

#[test]
fn dynamic_attach_table_of_two() {
    if common::providers().iter().all(|p| p != "tcp") {
        eprintln!("SKIP: tcp is not in ONESIDED_TEST_PROVIDERS");
        return;
    }
    common::run_variant(
        module_path!(),
        "dynamic_misuse",
        2,
        "tcp",
        &[("ONESIDED_MAX_ATTACH", "2")],
    );
}

/// Issue 12 item 2: a put, a get and an accumulate to a region its owner
/// detached *within* the origin's epoch (erroneous in MPI; the origin's
/// cached table still lists it). Each returns `Err` (at the call or at the
/// next flush) naming the target rank; nothing lands in the detached
/// buffer; and the pair keeps working: operations to the owner's other
/// region, in the same epoch and the next, move every element. Before,
/// on tcp the provider dropped the connection and every later operation
/// between the two ranks failed (or crashed in libfabric).
fn detached_within_epoch() {
    let world = World::init().unwrap();
    let me = world.rank();
    let mut win = Window::<u64>::create_dynamic(&world).unwrap();
    let (a, b) = if me == 1 {
        let a = win
            .attach((0..N).map(|i| value(1, 0, i)).collect())
            .unwrap();
        let b = win.attach(vec![0u64; N]).unwrap();
        (a, b)
    } else {
        (0, 0)
    };
    let da = exchange(&world, a)[1];
    let db = exchange(&world, b)[1];
    win.lock_all().unwrap();
    let mut got = vec![0u64; N];
    if me == 0 {
        // Caches rank 1's table (both regions).
        win.get(1, da, &mut got).unwrap();
        win.flush(1).unwrap();
    }
    world.barrier().unwrap();
    let detached = if me == 1 {
        Some(win.detach(da).unwrap())
    } else {
        None
    };
    world.barrier().unwrap();
    if me == 0 {
        same(
            &got,
            &(0..N).map(|i| value(1, 0, i)).collect::<Vec<_>>(),
            "before the detach",
        );
        let named = |e: &onesided::Error, what: &str| {
            let text = e.to_string();
            assert!(
                text.contains("rank 1") || e.rank() == Some(1),
                "{what}: {text}"
            );
        };
        let put = win.put(1, da, &[7u64; 16]).and_then(|()| win.flush(1));
        named(&put.expect_err("put to a detached region"), "put");
        let get = win
            .get(1, da + 3, &mut got[..8])
            .and_then(|()| win.flush(1));
        named(&get.expect_err("get from a detached region"), "get");
        let acc = win
            .accumulate(1, da, &[1u64; 4], Op::Sum)
            .and_then(|()| win.flush(1));
        named(
            &acc.expect_err("accumulate to a detached region"),
            "accumulate",
        );
        // The pair still works, in this epoch.
        let data: Vec<u64> = (0..N).map(|i| value(0, 9, i)).collect();
        win.put(1, db, &data).unwrap();
        win.flush(1).unwrap();
        let mut back = vec![0u64; N];
        win.get(1, db, &mut back).unwrap();
        same(&back, &data, "region b after the refused operations");
    }
    win.unlock_all().unwrap();
    world.barrier().unwrap();
    if let Some(buf) = detached {
        same(
            &buf,
            &(0..N).map(|i| value(1, 0, i)).collect::<Vec<_>>(),
            "the detached buffer (nothing may land in it)",
        );
    }
    // And in the next epoch, both directions.
    win.fence(Assert::NONE).unwrap();
    if me == 0 {
        win.accumulate(1, db, &[1u64; N], Op::Sum).unwrap();
    }
    win.fence(Assert::NONE).unwrap();
    if me == 1 {
        let mut mine = vec![0u64; N];
        win.local_read(db, &mut mine).unwrap();
        let want: Vec<u64> = (0..N).map(|i| value(0, 9, i) + 1).collect();
        same(&mine, &want, "region b after the next epoch");
        win.detach(db).unwrap();
    }
    win.free().unwrap();
}
spmd_test!(
    dynamic_access_after_detach_keeps_the_pair,
    &[2],
    detached_within_epoch
);
