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
