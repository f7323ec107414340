//! Shared-memory windows (`allocate_shared`, `shared_query`): the default
//! contiguous layout (every rank's part in one node segment, in rank order,
//! reachable from rank 0's pointer) and `alloc_shared_noncontig` (separate
//! page-aligned segments). Each test runs on every provider with
//! `ONESIDED_SHM=0` (RMA through the provider into the registered parts)
//! and with the direct path (load/store, CPU atomics), under every launcher.

#[macro_use]
mod common;

use onesided::{Assert, Error, Op, Window, WindowInfo, World};

/// Elements of rank `r`'s part: odd ranks have none (so with 2 ranks the
/// last part is empty), even ranks a length that is not a page multiple.
fn part_len(r: usize) -> usize {
    if r % 2 == 1 {
        0
    } else {
        1000 + 3 * r
    }
}

fn value(r: usize, i: usize) -> u64 {
    ((r as u64 + 1) << 40) ^ (i as u64).wrapping_mul(0x9e37_79b9) ^ 0x5a5a
}

/// Reads `n` elements at `p` with volatile loads (other processes write
/// this memory: no references to it).
fn read_raw(p: *const u64, n: usize) -> Vec<u64> {
    // SAFETY: the callers pass a pointer from `shared_query` valid for `n`
    // elements while the window lives; no other process writes between the
    // fences that surround these reads.
    (0..n)
        .map(|i| unsafe { p.add(i).read_volatile() })
        .collect()
}

/// Every rank stores its part by raw pointer; after a fence every rank
/// checks every element of every part — through rank 0's base pointer
/// alone when the window is contiguous — and through RMA get; then RMA
/// put and accumulate from every rank (the provider with `ONESIDED_SHM=0`)
/// land where the pointers say.
fn layout(noncontig: bool) {
    let world = World::init().expect("init");
    let (rank, p) = (world.rank(), world.size());
    let info = WindowInfo::new().alloc_shared_noncontig(noncontig);
    let mut win = Window::<u64>::allocate_shared_with(&world, part_len(rank), &info)
        .expect("allocate_shared");
    let mine = win.shared_query(rank).unwrap();
    assert_eq!(mine.len(), part_len(rank));
    let ptr = mine.as_ptr();
    for i in 0..mine.len() {
        // SAFETY: our own part, `len()` elements; nobody else touches it
        // before the fence.
        unsafe { ptr.add(i).write_volatile(value(rank, i)) };
    }
    drop(mine);
    win.fence(Assert::NONE).unwrap();

    let base = win.shared_query(0).unwrap().as_ptr();
    let mut off = 0;
    for r in 0..p {
        let seg = win.shared_query(r).unwrap();
        assert_eq!((seg.rank(), seg.len()), (r, part_len(r)));
        let want: Vec<u64> = (0..part_len(r)).map(|i| value(r, i)).collect();
        if noncontig {
            assert_eq!(seg.as_ptr() as usize % 4096, 0, "rank {r}: page-aligned");
            assert_eq!(
                read_raw(seg.as_ptr(), seg.len()),
                want,
                "rank {r} via its pointer"
            );
        } else {
            // Rank r's part starts right after rank r-1's last element.
            assert_eq!(seg.as_ptr(), base.wrapping_add(off), "rank {r}: contiguous");
            assert_eq!(
                read_raw(base.wrapping_add(off), seg.len()),
                want,
                "rank {r} via rank 0's pointer"
            );
        }
        assert_eq!(seg.to_vec().unwrap(), want, "rank {r} via read");
        if !want.is_empty() {
            let mut got = vec![0u64; want.len()];
            win.get(r, 0, &mut got).unwrap();
            assert_eq!(got, want, "rank {r} via RMA get");
        }
        off += part_len(r);
    }
    if !noncontig {
        assert_eq!(base as usize % 4096, 0, "the node segment is page-aligned");
        // One read through rank 0's pointer covers every part.
        let all: Vec<u64> = (0..p)
            .flat_map(|r| (0..part_len(r)).map(move |i| value(r, i)))
            .collect();
        assert_eq!(
            read_raw(base, all.len()),
            all,
            "all parts from one base pointer"
        );
    }
    win.fence(Assert::NONE).unwrap();

    // RMA into the parts: every rank adds 1 to element 0 of every
    // non-empty part.
    for r in (0..p).filter(|&r| part_len(r) > 0) {
        win.accumulate(r, 0, &[1], Op::Sum).unwrap();
    }
    // A marker into element 1 of the right neighbour's part.
    let right = (rank + 1) % p;
    let marker = |from: usize| 7_000_000 + from as u64;
    if part_len(right) > 1 {
        win.put(right, 1, &[marker(rank)]).unwrap();
    }
    win.fence(Assert::NOSUCCEED).unwrap();
    let mut off = 0;
    for r in 0..p {
        let seg = win.shared_query(r).unwrap();
        let mut want: Vec<u64> = (0..part_len(r)).map(|i| value(r, i)).collect();
        if let Some(w) = want.first_mut() {
            *w += p as u64;
        }
        if want.len() > 1 {
            want[1] = marker((r + p - 1) % p);
        }
        let at = if noncontig {
            seg.as_ptr()
        } else {
            base.wrapping_add(off)
        };
        assert_eq!(read_raw(at, seg.len()), want, "rank {r} after RMA");
        off += part_len(r);
    }
    world.barrier().unwrap();
    win.free().unwrap();
}

spmd_test!(
    allocate_shared_contiguous,
    jobs = common::matrix(&[2, 3, 4]),
    || layout(false)
);
spmd_test!(
    allocate_shared_noncontig,
    jobs = common::matrix(&[2, 3]),
    || layout(true)
);

/// allocate_shared + shared_query: every rank writes its own segment
/// through its handle, everyone reads every segment directly after a
/// barrier; RMA to the same window agrees; misuse errors.
fn shared_windows() {
    let world = World::init().expect("init");
    let (rank, n) = (world.rank(), world.size());
    const LEN: usize = 1000;
    let mut win = Window::<u32>::allocate_shared(&world, LEN + rank).expect("allocate_shared");
    let mine = win.shared_query(rank).unwrap();
    assert_eq!(mine.len(), LEN + rank);
    let data: Vec<u32> = (0..(LEN + rank) as u32)
        .map(|i| i * 7 + rank as u32)
        .collect();
    mine.write(0, &data).unwrap();
    drop(mine);
    win.fence(Assert::NONE).unwrap();
    for q in 0..n {
        let seg = win.shared_query(q).unwrap();
        assert_eq!((seg.rank(), seg.len()), (q, LEN + q));
        let want: Vec<u32> = (0..(LEN + q) as u32).map(|i| i * 7 + q as u32).collect();
        assert_eq!(seg.to_vec().unwrap(), want, "segment of rank {q}");
        let mut tail = [0u32; 2];
        assert!(seg.read(LEN + q - 1, &mut tail).is_err(), "bounds");
        // The same bytes through RMA.
        let mut g = vec![0u32; 10];
        win.get(q, 3, &mut g).unwrap();
        assert_eq!(&g[..], &want[3..13]);
    }
    // Everyone is done reading before anyone stores again.
    win.fence(Assert::NONE).unwrap();
    // Store into the right neighbour's segment, visible to it after a fence.
    let right = (rank + 1) % n;
    win.shared_query(right)
        .unwrap()
        .write(LEN - 1, &[9000 + rank as u32])
        .unwrap();
    win.fence(Assert::NOSUCCEED).unwrap();
    let last = win.local_to_vec().unwrap()[LEN - 1];
    assert_eq!(last, 9000 + ((rank + n - 1) % n) as u32);
    // Misuse.
    assert!(matches!(
        win.shared_query(n),
        Err(Error::InvalidRank { .. })
    ));
    let plain = vec![7u32; 4];
    let user = Window::create(&world, plain).unwrap();
    let e = user
        .shared_query(rank)
        .err()
        .expect("user memory is not shared");
    assert!(e.to_string().contains("not node-shared"), "{e}");
    // The window owned the Vec and gives it back.
    assert_eq!(user.into_vec().unwrap(), vec![7u32; 4]);
    win.free().unwrap();
}
spmd_test!(
    allocate_shared_and_query,
    jobs = common::matrix_one_provider(&[2, 3])
        .into_iter()
        .chain(common::matrix_direct(&[2, 3]))
        .collect::<Vec<_>>(),
    shared_windows
);

/// Oversized `allocate_shared` requests fail on every rank with an error
/// (issue 12 item 3: the part-size exchange returned with `lock_all` open,
/// the temporary window was dropped while peers read it, and the next
/// creation crashed a rank), and the next windows work.
fn oversized() {
    let world = World::init().unwrap();
    let (rank, n) = (world.rank(), world.size());
    // Overflows the element-to-byte conversion.
    assert!(Window::<u64>::allocate_shared(&world, 1 << 60).is_err());
    // 2^60 bytes per rank: no node segment that large can be made.
    assert!(Window::<u8>::allocate_shared(&world, 1 << 60).is_err());
    // The parts' sum overflows usize.
    assert!(Window::<u8>::allocate_shared(&world, usize::MAX / 2 + 1).is_err());
    // The job is intact: a shared window and a plain one work.
    let mut win = Window::<u32>::allocate_shared(&world, 8).unwrap();
    let mut other = Window::<u32>::allocate(&world, 8).unwrap();
    win.fence(Assert::NONE).unwrap();
    other.fence(Assert::NONE).unwrap();
    let right = (rank + 1) % n;
    win.put(right, 0, &[rank as u32 + 10]).unwrap();
    other.put(right, 1, &[rank as u32 + 20]).unwrap();
    win.fence(Assert::NOSUCCEED).unwrap();
    other.fence(Assert::NOSUCCEED).unwrap();
    let left = (rank + n - 1) % n;
    assert_eq!(win.local_to_vec().unwrap()[0], left as u32 + 10);
    assert_eq!(other.local_to_vec().unwrap()[1], left as u32 + 20);
    other.free().unwrap();
    win.free().unwrap();
}
spmd_test!(
    allocate_shared_oversized_fails_cleanly,
    jobs = common::matrix_one_provider(&[2, 3])
        .into_iter()
        .chain(common::matrix_direct(&[2, 3]))
        .collect::<Vec<_>>(),
    oversized
);
