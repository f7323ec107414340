//! Groups (`World::split`, `World::subgroup`, `Group::split`): windows of
//! every flavour over a group, addressed by group rank (checked against
//! world ranks so a missing or doubled translation shows), the group's
//! collectives, groups of different sizes working at different paces next
//! to world windows, and errors on every rank after which the world and
//! the groups still work. Real processes, real providers (see
//! tests/common).

#[macro_use]
mod common;

use onesided::{Assert, ErrorKind, Group, LockType, Op, Window, World};

/// Every operation kind over a window of `g`, each result checked against
/// the world ranks of the group.
fn exercise(g: &Group<'_>) {
    let (me, n) = (g.rank(), g.size());
    let wr = |r: usize| g.world_rank(r).unwrap() as i64;
    let win = Window::<i64>::allocate(g, n + 4).unwrap();
    assert_eq!(win.len_of(n - 1).unwrap(), n + 4);

    // Fence: put my world rank into slot `me` of my right neighbour.
    let right = (me + 1) % n;
    let left = (me + n - 1) % n;
    win.fence(Assert::NONE).unwrap();
    win.put(right, me, &[wr(me)]).unwrap();
    win.fence(Assert::NONE).unwrap();
    let mut got = [0i64];
    win.local_read(left, &mut got).unwrap();
    assert_eq!(got[0], wr(left), "fence put from group rank {left}");
    // Rank `left` holds its left neighbour's world rank in that one's slot.
    let ll = (left + n - 1) % n;
    win.get(left, ll, &mut got).unwrap();
    win.fence(Assert::NONE).unwrap();
    let want = [wr(ll)];
    assert_eq!(got, want, "fence get from group rank {left}");

    // Passive target: accumulate world ranks into group rank 0, then
    // fetch_and_op and compare_and_swap there.
    win.lock_all().unwrap();
    win.accumulate(0, n, &[wr(me)], Op::Sum).unwrap();
    win.flush_all().unwrap();
    win.unlock_all().unwrap();
    g.barrier().unwrap();
    let total: i64 = (0..n).map(wr).sum();
    let mut seen = [0i64];
    win.lock(0, LockType::Shared, Assert::NONE).unwrap();
    win.get(0, n, &mut seen).unwrap();
    win.unlock(0).unwrap();
    assert_eq!(seen[0], total, "accumulated world ranks at group rank 0");
    g.barrier().unwrap();
    win.lock(n - 1, LockType::Exclusive, Assert::NONE).unwrap();
    let before = win.fetch_and_op(n - 1, n + 1, 1, Op::Sum).unwrap();
    win.unlock(n - 1).unwrap();
    assert!(
        before >= 0 && before < n as i64,
        "fetch_and_op returned {before}"
    );
    g.barrier().unwrap();
    if me == 0 {
        win.lock(n - 1, LockType::Exclusive, Assert::NONE).unwrap();
        let old = win.compare_and_swap(n - 1, n + 1, n as i64, -7).unwrap();
        win.unlock(n - 1).unwrap();
        assert_eq!(old, n as i64, "every member's fetch_and_op landed");
    }
    g.barrier().unwrap();
    if me == n - 1 {
        let mut v = [0i64];
        win.local_read(n + 1, &mut v).unwrap();
        assert_eq!(v[0], -7);
    }

    // PSCW by group rank: everyone exposes to its left, accesses its right.
    win.post(&[left], Assert::NONE).unwrap();
    win.start(&[right], Assert::NONE).unwrap();
    win.put(right, n + 2, &[wr(me) * 10]).unwrap();
    win.complete().unwrap();
    win.wait().unwrap();
    let mut v = [0i64];
    win.local_read(n + 2, &mut v).unwrap();
    assert_eq!(v[0], wr(left) * 10, "pscw put from group rank {left}");

    // A rank outside the group is an error naming it; the window still works.
    let e = win.put(n, 0, &[1]).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    let e = win.post(&[n], Assert::NONE).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    win.lock(right, LockType::Shared, Assert::NONE).unwrap();
    win.get(right, me, &mut v).unwrap();
    win.unlock(right).unwrap();
    assert_eq!(v[0], wr(me), "slot {me} of group rank {right}");

    let s = win.stats();
    assert!(s.cached_peers <= n, "{s:?}");
    drop(win.into_vec().unwrap());
}

fn groups() {
    let world = World::init().unwrap();
    groups_on(&world);
}

fn groups_on(world: &World) {
    let (me, p) = (world.rank(), world.size());

    // Two groups by parity, ranked in reverse world order.
    let row = world
        .split(Some((me % 2) as u32), -(me as i64))
        .unwrap()
        .unwrap();
    let mine: Vec<usize> = (0..p).filter(|r| r % 2 == me % 2).rev().collect();
    assert_eq!(row.world_ranks(), mine.as_slice());
    assert_eq!(row.size(), mine.len());
    assert_eq!(row.world_rank(row.rank()), Some(me));
    assert_eq!(row.rank_of(me), Some(row.rank()));
    if me + 1 < p {
        assert_eq!(row.rank_of(me + 1), None);
    }

    // The group's collectives.
    let all = row.allgather(&[me as u64]).unwrap();
    assert_eq!(all, mine.iter().map(|&r| r as u64).collect::<Vec<_>>());
    let mut b = [if row.rank() == 0 { me as i32 + 100 } else { -1 }];
    row.broadcast(0, &mut b).unwrap();
    assert_eq!(b[0], mine[0] as i32 + 100);
    let mut s = [me as u64, 1];
    row.allreduce(&mut s, Op::Sum).unwrap();
    assert_eq!(s, [mine.iter().sum::<usize>() as u64, mine.len() as u64]);

    // The groups work at different paces: the odd group creates two more
    // windows and runs more collectives than the even one.
    let world_win = Window::<u64>::allocate(world, 2).unwrap();
    // The window's group (MPI_Win_get_group): the world's here, the row's
    // below (its ranks in reverse world order).
    assert_eq!((world_win.rank(), world_win.size()), (me, p));
    assert_eq!(world_win.world_rank(p - 1), Some(p - 1));
    assert_eq!(world_win.world_rank(p), None);
    {
        let w = Window::<u32>::allocate(&row, 1).unwrap();
        assert_eq!((w.rank(), w.size()), (row.rank(), row.size()));
        let translated: Vec<usize> = (0..w.size()).filter_map(|r| w.world_rank(r)).collect();
        assert_eq!(translated, mine);
        assert_eq!(w.world_rank(w.size()), None);
        drop(w.into_vec().unwrap());
    }
    if me % 2 == 1 {
        for _ in 0..2 {
            let w = Window::<u8>::allocate(&row, 3).unwrap();
            row.barrier().unwrap();
            drop(w.into_vec().unwrap());
        }
    }
    exercise(&row);
    // World windows keep their own ids and slots beside the groups'.
    let ids = world.allgather(&[world_win.id()]).unwrap();
    assert!(ids.iter().all(|&i| i == world_win.id()), "{ids:?}");
    world_win.fence(Assert::NONE).unwrap();
    world_win.put((me + 1) % p, 0, &[me as u64 + 1]).unwrap();
    world_win.fence(Assert::NONE).unwrap();
    let mut v = [0u64];
    world_win.local_read(0, &mut v).unwrap();
    assert_eq!(v[0], ((me + p - 1) % p) as u64 + 1);
    let second = Window::<u64>::allocate(world, 1).unwrap();
    let ids = world.allgather(&[second.id()]).unwrap();
    assert!(ids.iter().all(|&i| i == second.id()), "{ids:?}");
    drop(second.into_vec().unwrap());
    drop(world_win.into_vec().unwrap());

    // A listed group: the last rank first; the others outside get None.
    let listed = [p - 1, 0];
    let sub = world
        .subgroup(if p > 1 { &listed } else { &listed[..1] })
        .unwrap();
    match (me, sub) {
        (r, Some(g)) => {
            assert!(r == p - 1 || r == 0);
            assert_eq!(g.rank(), if r == p - 1 { 0 } else { 1 });
            exercise(&g);
            // Nested: a group of the group, ranks of the group.
            let inner = g.subgroup(&[g.size() - 1]).unwrap();
            assert_eq!(inner.is_some(), g.rank() == g.size() - 1);
            if let Some(inner) = inner {
                assert_eq!(inner.world_ranks(), &[g.world_rank(g.size() - 1).unwrap()]);
                exercise(&inner);
            }
            // Dynamic window over the group, addresses shared by the group.
            let mut dynw = Window::<i64>::create_dynamic(&g).unwrap();
            let at = dynw.attach(vec![0i64; 4]).unwrap();
            let addrs = g.allgather(&[at as u64]).unwrap();
            let to = (g.rank() + 1) % g.size();
            dynw.fence(Assert::NONE).unwrap();
            dynw.put(to, addrs[to] as usize + 1, &[me as i64 + 5])
                .unwrap();
            dynw.fence(Assert::NONE).unwrap();
            let from = g.world_rank((g.rank() + g.size() - 1) % g.size()).unwrap();
            let back = dynw.detach(at).unwrap();
            assert_eq!(
                back[1],
                from as i64 + 5,
                "dynamic put from world rank {from}"
            );
            dynw.free().unwrap();
        }
        (r, None) => assert!(r != p - 1 && r != 0),
    }

    // Shared window over the even group (the harness keeps ranks on one node).
    if me % 2 == 0 {
        let sh = Window::<u32>::allocate_shared(&row, 3).unwrap();
        sh.fence(Assert::NONE).unwrap();
        let last = sh.shared_query(row.size() - 1).unwrap();
        let first = sh.shared_query(0).unwrap();
        sh.local_write(0, &[me as u32]).unwrap();
        sh.fence(Assert::NONE).unwrap();
        let mut x = [0u32];
        last.read(0, &mut x).unwrap();
        assert_eq!(x[0], row.world_rank(row.size() - 1).unwrap() as u32);
        first.read(0, &mut x).unwrap();
        assert_eq!(x[0], row.world_rank(0).unwrap() as u32);
        drop((first, last));
        drop(sh.into_vec().unwrap());
    }
    assert_eq!(world.stats().groups, 1);
    drop(row);
    assert_eq!(world.stats().groups, 0);
    world.barrier().unwrap();
}

spmd_test!(windows_and_collectives_over_groups, &[1, 3, 4], groups);

in_process_test!(
    in_process_windows_and_collectives_over_groups,
    &[1, 3, 4],
    groups_on
);

fn group_errors() {
    let world = World::init().unwrap();
    group_errors_on(&world);
}

fn group_errors_on(world: &World) {
    let (me, p) = (world.rank(), world.size());

    // Invalid lists: an error on every rank, then the world still works.
    let e = world.subgroup(&[0, p]).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    let e = world.subgroup(&[0, 0]).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    let differ: Vec<usize> = if me == 0 { vec![0] } else { vec![0, 1] };
    let e = world.subgroup(&differ).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    assert!(e.to_string().contains("different rank lists"), "{e}");
    world.barrier().unwrap();

    // Undefined colour: takes part, gets nothing.
    let g = world.split((me != 0).then_some(7), 0).unwrap();
    assert_eq!(g.is_some(), me != 0);
    drop(g);

    // Every group slot taken (ONESIDED_MAX_GROUPS = 16): an error on every
    // rank; a slot freed is used again.
    let mut held: Vec<Group<'_>> = (0..16)
        .map(|i| world.split(Some(i), 0).unwrap().unwrap())
        .collect();
    let e = world.split(Some(0), 0).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::ResourceExhausted, "{e}");
    assert!(e.to_string().contains("ONESIDED_MAX_GROUPS"), "{e}");
    // A window over the sixteenth group works; dropping one group frees a
    // slot.
    let win = Window::<u64>::allocate(&held[15], 1).unwrap();
    win.fence(Assert::NONE).unwrap();
    win.put((me + 1) % p, 0, &[me as u64 + 1]).unwrap();
    win.fence(Assert::NONE).unwrap();
    let mut v = [0u64];
    win.local_read(0, &mut v).unwrap();
    assert_eq!(v[0], ((me + p - 1) % p) as u64 + 1);
    drop(win.into_vec().unwrap());
    held.remove(3);
    // The slot is free again, with flags past the old group's.
    let again = world.split(Some(1), me as i64).unwrap().unwrap();
    for round in 0..3u64 {
        let mut x = [round + me as u64];
        again.allreduce(&mut x, Op::Max).unwrap();
        assert_eq!(x[0], round + p as u64 - 1);
    }
    drop(again);
    drop(held);
    assert_eq!(world.stats().groups, 0);
    world.barrier().unwrap();
}

spmd_test!(group_errors_on_every_rank, &[2, 3], group_errors);

in_process_test!(in_process_group_errors, &[2, 3], group_errors_on);
