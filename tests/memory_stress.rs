//! Window memory that peers write while its owner reads it: the owner's
//! `local_read` runs concurrently with a peer's puts (and with its own
//! threads' `local_write`s to other words). Every 8-byte word is written
//! whole as (k << 32 | k); a read must never see a word whose halves differ
//! (a torn or garbled word), and the final state must be exact. Direct path
//! (peer stores into the node-shared segment) and provider path.

mod common;

use onesided::{Assert, Window, World};

const WORDS: usize = 4096;
const ROUNDS: u64 = 200;

fn word(k: u64) -> u64 {
    (k << 32) | k
}

fn stress() {
    let world = World::init().expect("init");
    let (rank, size) = (world.rank(), world.size());
    let win = Window::<u64>::allocate(&world, WORDS + 1).expect("allocate");
    win.fence(Assert::NONE).expect("fence");
    if rank == 1 {
        // The writer: rounds of whole-window puts, then a done flag.
        win.lock_all().expect("lock_all");
        for k in 1..=ROUNDS {
            let block = vec![word(k); WORDS];
            win.put(0, 0, &block).expect("put");
            win.flush(0).expect("flush");
        }
        win.put(0, WORDS, &[1]).expect("put flag");
        win.unlock_all().expect("unlock_all");
    } else if rank == 0 {
        // The owner: two threads read the window while rank 1 writes it.
        let torn = std::sync::atomic::AtomicUsize::new(0);
        let reads = std::sync::atomic::AtomicUsize::new(0);
        std::thread::scope(|s| {
            for _ in 0..2 {
                s.spawn(|| {
                    let mut buf = vec![0u64; WORDS + 1];
                    loop {
                        win.sync().expect("sync");
                        win.local_read(0, &mut buf).expect("local_read");
                        reads.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let bad = buf[..WORDS]
                            .iter()
                            .filter(|&&w| (w >> 32) != (w & 0xffff_ffff) || (w >> 32) > ROUNDS)
                            .count();
                        torn.fetch_add(bad, std::sync::atomic::Ordering::Relaxed);
                        if buf[WORDS] == 1 {
                            break;
                        }
                    }
                });
            }
        });
        let (torn, reads) = (torn.into_inner(), reads.into_inner());
        println!("memory_stress: {reads} concurrent local_reads, {torn} bad words");
        assert_eq!(torn, 0, "words torn or garbled while a peer wrote them");
    }
    win.fence(Assert::NONE).expect("fence");
    if rank == 0 {
        let v = win.local_to_vec().expect("read");
        assert!(v[..WORDS].iter().all(|&w| w == word(ROUNDS)), "final state");
    }
    let _ = size;
    let mut win = win;
    win.free().expect("free");
}

spmd_test!(
    local_reads_race_with_peer_puts,
    jobs = common::matrix_direct(&[2])
        .into_iter()
        .chain(common::matrix_one_provider(&[2]))
        .collect::<Vec<_>>(),
    stress
);

// ---- several processes and threads on one window ----------------------
//
// Rank 0 owns a window of three regions; while the other ranks write it,
// two of rank 0's threads read and write it locally:
// * `COUNTERS`: every other rank, from `THREADS` threads at once, adds 1 to
//   every counter `ROUNDS` times (one accumulate of the whole region per
//   round). Accumulates are atomic per element, so a concurrent local read
//   sees a count between 0 and the final one, and the final count is exact.
// * `PUTS`: the last rank puts whole words `word(k)`, k = 1..=ROUNDS; a
//   concurrent local read sees whole words only, the final state is exact.
// * `LOCAL`: rank 0's threads each own half and `local_write` then
//   `local_read` it: no peer writes there, so every read gives back exactly
//   what the thread wrote, while the other regions are being written.
// Then one flag word per rank, put last, tells rank 0 that rank is done.

const THREADS: usize = 2;
const COUNTERS: usize = 256;
const PUTS: usize = 512;
const LOCAL: usize = 512;
const HAMMER_ROUNDS: u64 = 100;
const FLAGS: usize = COUNTERS + PUTS + LOCAL;

fn hammer() {
    let world = World::init().expect("init");
    let (rank, size) = (world.rank(), world.size());
    assert!(size >= 2, "the test needs two ranks");
    let win = Window::<u64>::allocate(&world, FLAGS + size).expect("allocate");
    win.fence(Assert::NONE).expect("fence");
    let expect_count = (size as u64 - 1) * THREADS as u64 * HAMMER_ROUNDS;
    if rank != 0 {
        win.lock_all().expect("lock_all");
        std::thread::scope(|s| {
            for _ in 0..THREADS {
                s.spawn(|| {
                    let ones = vec![1u64; COUNTERS];
                    for _ in 0..HAMMER_ROUNDS {
                        win.accumulate(0, 0, &ones, onesided::Op::Sum)
                            .expect("accumulate");
                        win.flush(0).expect("flush");
                    }
                });
            }
            if rank == size - 1 {
                s.spawn(|| {
                    for k in 1..=HAMMER_ROUNDS {
                        win.put(0, COUNTERS, &vec![word(k); PUTS]).expect("put");
                        win.flush(0).expect("flush");
                    }
                });
            }
        });
        win.put(0, FLAGS + rank, &[1]).expect("put flag");
        win.unlock_all().expect("unlock_all");
    } else {
        let bad = std::sync::atomic::AtomicUsize::new(0);
        let reads = std::sync::atomic::AtomicUsize::new(0);
        std::thread::scope(|s| {
            for t in 0..THREADS {
                let (bad, reads, win) = (&bad, &reads, &win);
                s.spawn(move || {
                    let half = LOCAL / THREADS;
                    let mine = COUNTERS + PUTS + t * half;
                    let mut buf = vec![0u64; FLAGS + size];
                    let mut back = vec![0u64; half];
                    for i in 1u64.. {
                        let pattern: Vec<u64> = (0..half as u64)
                            .map(|j| word(i ^ (j << 8)) ^ t as u64)
                            .collect();
                        win.local_write(mine, &pattern).expect("local_write");
                        win.sync().expect("sync");
                        win.local_read(0, &mut buf).expect("local_read");
                        win.local_read(mine, &mut back)
                            .expect("local_read own half");
                        let mut n = buf[..COUNTERS]
                            .iter()
                            .filter(|&&c| c > expect_count)
                            .count();
                        n += buf[COUNTERS..COUNTERS + PUTS]
                            .iter()
                            .filter(|&&w| {
                                (w >> 32) != (w & 0xffff_ffff) || (w >> 32) > HAMMER_ROUNDS
                            })
                            .count();
                        n += back.iter().zip(&pattern).filter(|(a, b)| a != b).count();
                        bad.fetch_add(n, std::sync::atomic::Ordering::Relaxed);
                        reads.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        if buf[FLAGS + 1..FLAGS + size].iter().all(|&f| f == 1) {
                            break;
                        }
                    }
                });
            }
        });
        let (bad, reads) = (bad.into_inner(), reads.into_inner());
        println!("memory_stress: {reads} local read/write rounds under peer puts and accumulates, {bad} bad words");
        assert_eq!(
            bad, 0,
            "a local access saw a torn, out-of-range or foreign word"
        );
    }
    win.fence(Assert::NONE).expect("fence");
    if rank == 0 {
        let v = win.local_to_vec().expect("read");
        let counts = v[..COUNTERS].iter().filter(|&&c| c == expect_count).count();
        assert_eq!(
            counts,
            COUNTERS,
            "counters at {expect_count}: {:?}",
            &v[..8]
        );
        assert!(
            v[COUNTERS..COUNTERS + PUTS]
                .iter()
                .all(|&w| w == word(HAMMER_ROUNDS)),
            "final puts"
        );
    }
    let mut win = win;
    win.free().expect("free");
}

spmd_test!(
    threads_and_processes_hammer_one_window,
    jobs = common::matrix_direct(&[3])
        .into_iter()
        .chain(common::matrix_one_provider(&[3]))
        .collect::<Vec<_>>(),
    hammer
);

/// The same on the software accumulate path: the target's progress agent
/// applies the accumulates while rank 0's threads read and write locally.
#[test]
fn hammer_on_the_software_accumulate_path() {
    let p = common::providers().into_iter().next().expect("a provider");
    common::run_variant(
        module_path!(),
        "threads_and_processes_hammer_one_window",
        3,
        &p,
        &[("ONESIDED_ACCUMULATE", "software")],
    );
}
