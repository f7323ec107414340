//! The intra-node direct path (`ONESIDED_SHM`): put/get as copies into
//! mapped node-shared segments, accumulates as CPU atomics, the cache of
//! mappings, shared-memory windows. Every test runs with the direct path
//! (`provider=tcp+direct`) and with `ONESIDED_SHM=0` (the provider carries
//! everything), and checks from the counters which path was taken.

#[macro_use]
mod common;

use onesided::{Assert, Error, LockType, NoOp, Op, Window, World};

/// The provider path (first provider) and the direct path, every launcher.
fn both(ranks: &[usize]) -> Vec<common::Job> {
    let mut jobs = common::matrix_one_provider(ranks);
    jobs.extend(common::matrix_direct(ranks));
    jobs
}

fn direct_on() -> bool {
    std::env::var("ONESIDED_SHM").map_or(true, |v| v != "0")
}

fn pattern(origin: usize, round: usize, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i.wrapping_mul(29) ^ (origin * 71) ^ (round * 17) ^ (i >> 9)) as u8)
        .collect()
}

fn check(what: &str, got: &[u8], want: &[u8]) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    if let Some(i) = got.iter().zip(want).position(|(a, b)| a != b) {
        panic!(
            "{what}: first difference at byte {i} of {}: got {:#x} want {:#x}",
            want.len(),
            got[i],
            want[i]
        );
    }
}

const SIZES: &[usize] = &[1, 8, 1000, 4096, 65536 + 3, 1 << 20];
const MAX: usize = 1 << 20;

/// put/rput/get/rget of every size to the right neighbour under lock_all,
/// fence and exclusive locks; the target checks its memory after each
/// epoch, the origin what it reads back. The counters show the path.
fn put_get_all_epochs() {
    let world = World::init().expect("init");
    assert!(world.all_node_local(), "every rank is on this node");
    let (rank, n) = (world.rank(), world.size());
    let (right, left) = ((rank + 1) % n, (rank + n - 1) % n);
    let before = world.stats().shm;
    let mut win = Window::<u8>::allocate(&world, 2 * MAX + 7).expect("allocate");
    let mut expect = 0u64;
    for (round, &len) in SIZES.iter().enumerate() {
        let (a, b) = (pattern(rank, round, len), pattern(rank + 50, round, len));
        let mode = round % 3;
        match mode {
            0 => win.lock_all().unwrap(),
            1 => win.fence(Assert::NONE).unwrap(),
            _ => win.lock(right, LockType::Exclusive, Assert::NONE).unwrap(),
        }
        win.put(right, 5, &a).unwrap();
        let req = win.rput(right, MAX + 7, b.clone()).unwrap();
        req.wait().unwrap();
        if mode != 1 {
            // Read back inside passive-target epochs (after a flush).
            win.flush(right).unwrap();
            let mut back = vec![0u8; len];
            win.get(right, 5, &mut back).unwrap();
            check("get after put", &back, &a);
            let back2 = win
                .rget(right, MAX + 7, vec![0u8; len])
                .unwrap()
                .wait()
                .unwrap();
            check("rget after rput", &back2, &b);
            expect += 2;
        }
        expect += 2;
        match mode {
            0 => win.unlock_all().unwrap(),
            1 => win.fence(Assert::NOSUCCEED).unwrap(),
            _ => win.unlock(right).unwrap(),
        }
        world.barrier().unwrap();
        let mut mine = vec![0u8; len];
        win.local_read(5, &mut mine).unwrap();
        check("target memory (put)", &mine, &pattern(left, round, len));
        win.local_read(MAX + 7, &mut mine).unwrap();
        check(
            "target memory (rput)",
            &mine,
            &pattern(left + 50, round, len),
        );
        world.barrier().unwrap();
    }
    let s = world.stats().shm;
    let ops = s.direct_ops - before.direct_ops;
    if direct_on() {
        assert_eq!(ops, expect, "every put/get was direct: {s:?}");
        let w = world.stats();
        assert_eq!(
            (w.peers_contacted, w.address_vector_entries),
            (0, 0),
            "{w:?}"
        );
        assert!(s.mapped >= 1, "{s:?}");
    } else {
        assert_eq!((ops, s.maps, s.mapped), (0, 0, 0), "ONESIDED_SHM=0: {s:?}");
    }
    let mapped = world.stats().shm.mapped;
    win.free().unwrap();
    let s = world.stats().shm;
    if direct_on() && s.capacity >= 2 {
        // Only the right neighbour's segment was mapped for this window (the
        // control regions of peers stay mapped while the world lives).
        assert_eq!(s.mapped, mapped - 1, "free unmaps");
    } else {
        // A cache of one (ONESIDED_SHM_CACHE=1) may hold a control region
        // instead of the window's segment; it stays bounded.
        assert!(s.mapped <= s.capacity, "{s:?}");
    }
}
spmd_test!(
    direct_put_get_every_epoch,
    jobs = both(&[2, 4]),
    put_get_all_epochs
);

/// The accumulate family from every rank to every rank (itself included),
/// every element checked; CPU atomics exactly when the direct path is on.
fn accumulates() {
    let world = World::init().expect("init");
    let (rank, n) = (world.rank(), world.size());
    const K: usize = 64;
    const HITS: i64 = 50;
    let before = world.stats().shm;
    let mut sum = Window::<i64>::allocate(&world, K + 2).expect("allocate");
    let mut fsum = Window::<f64>::allocate(&world, K).expect("allocate");
    sum.lock_all().unwrap();
    fsum.lock_all().unwrap();
    for t in 0..n {
        let data: Vec<i64> = (0..K as i64).map(|i| i * 1000 + rank as i64).collect();
        sum.accumulate(t, 0, &data, Op::Sum).unwrap();
        let quarter: Vec<f64> = (0..K).map(|i| (i as f64) * 0.25).collect();
        fsum.raccumulate(t, 0, quarter, Op::Sum)
            .unwrap()
            .wait()
            .unwrap();
        for _ in 0..HITS {
            sum.fetch_and_op(t, K, 1, Op::Sum).unwrap();
        }
        // Elect exactly one winner per target.
        let _ = sum.compare_and_swap(t, K + 1, 0, rank as i64 + 1).unwrap();
    }
    sum.flush_all().unwrap();
    fsum.unlock_all().unwrap();
    sum.unlock_all().unwrap();
    world.barrier().unwrap();
    let ranks_sum: i64 = (0..n as i64).sum();
    let got = sum.local_to_vec().unwrap();
    for (i, v) in got[..K].iter().enumerate() {
        assert_eq!(*v, n as i64 * i as i64 * 1000 + ranks_sum, "element {i}");
    }
    assert_eq!(got[K], n as i64 * HITS, "fetch_and_op counter");
    assert!(
        (1..=n as i64).contains(&got[K + 1]),
        "cas winner {}",
        got[K + 1]
    );
    for (i, v) in fsum.local_to_vec().unwrap().iter().enumerate() {
        assert_eq!(*v, n as f64 * i as f64 * 0.25, "f64 element {i}");
    }
    world.barrier().unwrap();
    // get_accumulate and rget_accumulate read what is there.
    sum.lock_all().unwrap();
    let t = (rank + 1) % n;
    let mut old = vec![0i64; K];
    sum.get_accumulate(t, 0, &[], &mut old, NoOp).unwrap();
    assert_eq!(&old[..], &got[..K], "get_accumulate NO_OP");
    let r = sum
        .rget_accumulate(t, K, &[0], vec![0i64; 1], Op::Sum)
        .unwrap()
        .wait()
        .unwrap();
    assert_eq!(r[0], n as i64 * HITS);
    sum.unlock_all().unwrap();
    let s = world.stats().shm;
    let atomics = s.cpu_atomics - before.cpu_atomics;
    if direct_on() {
        assert_eq!(atomics, n as u64 * (3 + HITS as u64) + 2, "{s:?}");
        // No network at all: no peer (not even ourselves) was contacted.
        let w = world.stats();
        assert_eq!(
            (w.peers_contacted, w.address_vector_entries),
            (0, 0),
            "{w:?}"
        );
    } else {
        assert_eq!(atomics, 0, "{s:?}");
    }
    fsum.free().unwrap();
    sum.free().unwrap();
}
spmd_test!(accumulate_family_direct, jobs = both(&[2, 4]), accumulates);

/// Exclusive-lock contention: every rank increments every rank's counter
/// by get + put under an exclusive lock; no update may be lost.
fn lock_counter() {
    let world = World::init().expect("init");
    let n = world.size();
    const ROUNDS: u64 = 20;
    let mut win = Window::<u64>::allocate(&world, 1).expect("allocate");
    for _ in 0..ROUNDS {
        for t in 0..n {
            win.lock(t, LockType::Exclusive, Assert::NONE).unwrap();
            let mut v = [0u64];
            win.get(t, 0, &mut v).unwrap();
            win.put(t, 0, &[v[0] + 1]).unwrap();
            win.unlock(t).unwrap();
        }
    }
    world.barrier().unwrap();
    assert_eq!(win.local_to_vec().unwrap()[0], n as u64 * ROUNDS);
    win.free().unwrap();
}
spmd_test!(
    exclusive_lock_counter_direct,
    jobs = both(&[2, 4]),
    lock_counter
);

/// A cache of one mapping: every rank writes to every other rank in turn,
/// so each access maps again after an eviction; data stays right and at
/// most one segment is mapped.
fn tiny_cache() {
    std::env::set_var("ONESIDED_SHM_CACHE", "1");
    let world = World::init().expect("init");
    let (rank, n) = (world.rank(), world.size());
    let mut win = Window::<u32>::allocate(&world, n * 4).expect("allocate");
    win.lock_all().unwrap();
    for round in 0..3u32 {
        for t in (0..n).filter(|t| *t != rank) {
            let v = [rank as u32 * 100 + round; 4];
            win.put(t, rank * 4, &v).unwrap();
            let mut back = [0u32; 4];
            win.get(t, rank * 4, &mut back).unwrap();
            assert_eq!(back, v, "read back from rank {t}");
            assert!(world.stats().shm.mapped <= 1);
        }
    }
    win.unlock_all().unwrap();
    world.barrier().unwrap();
    let mine = win.local_to_vec().unwrap();
    for o in (0..n).filter(|o| *o != rank) {
        assert_eq!(
            &mine[o * 4..o * 4 + 4],
            &[o as u32 * 100 + 2; 4],
            "from {o}"
        );
    }
    let s = world.stats().shm;
    if direct_on() {
        assert_eq!(s.capacity, 1);
        assert!(s.evictions >= 3 * (n as u64 - 1) - 1, "{s:?}");
    }
    win.free().unwrap();
}
spmd_test!(mapping_cache_of_one, jobs = both(&[4]), tiny_cache);

/// Two "nodes" on one machine (`ONESIDED_NODE_MAPPING`): ranks {0,1} and
/// {2,3}. Puts to the node peer are direct, to the others through the
/// provider, in the same window; accumulates all go through the provider
/// (not every rank is local), shared windows are refused.
fn mixed_nodes() {
    std::env::set_var("ONESIDED_NODE_MAPPING", "(vector,(0,2,2))");
    let world = World::init().expect("init");
    let rank = world.rank();
    assert!(!world.all_node_local());
    let buddy = rank ^ 1;
    assert!(world.is_node_local(buddy) && !world.is_node_local(rank ^ 2));
    let mut win = Window::<u64>::allocate(&world, 8).expect("allocate");
    win.lock_all().unwrap();
    for t in 0..4 {
        win.put(t, rank, &[(rank * 10 + t) as u64]).unwrap();
        win.accumulate(t, 4, &[rank as u64 + 1], Op::Sum).unwrap();
    }
    win.unlock_all().unwrap();
    world.barrier().unwrap();
    let got = win.local_to_vec().unwrap();
    for (o, v) in got[..4].iter().enumerate() {
        assert_eq!(*v, (o * 10 + rank) as u64, "put from {o}");
    }
    assert_eq!(got[4], 1 + 2 + 3 + 4, "accumulates");
    let s = world.stats().shm;
    if direct_on() {
        // Mapped: the buddy's window segment and its control region (with
        // a cache of one they evict each other, so maybe mapped again).
        assert_eq!((s.direct_ops, s.cpu_atomics), (1, 0), "{s:?}");
        if s.capacity >= 2 {
            assert_eq!(s.maps, 2, "{s:?}");
        } else {
            assert!(s.maps >= 2 && s.mapped <= 1, "{s:?}");
        }
        assert!(win.shared_query(buddy).is_ok());
    } else {
        assert_eq!((s.direct_ops, s.cpu_atomics, s.maps), (0, 0, 0), "{s:?}");
    }
    let e = win
        .shared_query(rank ^ 2)
        .err()
        .expect("a rank on another node");
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    let e = Window::<u64>::allocate_shared(&world, 4).expect_err("not all local");
    assert!(e.to_string().contains("not all on this node"), "{e}");
    win.free().unwrap();
}
spmd_test!(mixed_local_and_remote_peers, jobs = both(&[4]), mixed_nodes);

/// Segments by name, with their mode bits.
type Segments = Vec<(String, u32)>;

/// Mode bits of the memfd segments of this library this process holds
/// (`/proc/self/fd`) and has mapped (`/proc/self/maps`, the mode read
/// through `/proc/self/map_files`): (held, mapped).
fn own_segments() -> (Segments, Segments) {
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &std::path::Path| {
        std::fs::metadata(p)
            .unwrap_or_else(|e| panic!("stat {}: {e}", p.display()))
            .permissions()
            .mode()
            & 0o777
    };
    let mut held = Vec::new();
    for e in std::fs::read_dir("/proc/self/fd")
        .expect("/proc/self/fd")
        .flatten()
    {
        let Ok(link) = std::fs::read_link(e.path()) else {
            continue; // the directory's own descriptor, closed meanwhile
        };
        let link = link.to_string_lossy().into_owned();
        if link.starts_with("/memfd:onesided-") {
            held.push((link, mode(&e.path())));
        }
    }
    let maps = std::fs::read_to_string("/proc/self/maps").expect("/proc/self/maps");
    let mut mapped = Vec::new();
    for line in maps.lines().filter(|l| l.contains("/memfd:onesided-")) {
        let (range, rest) = line.split_once(' ').expect("maps line");
        let path = std::path::Path::new("/proc/self/map_files").join(range);
        let name = rest.split_whitespace().nth(4).unwrap_or("").to_string();
        mapped.push((name, mode(&path)));
    }
    (held, mapped)
}

/// Node-shared segments (issue 12 item 8): after an `allocate` window every
/// rank put into at every peer (so each maps every peer's segment on the
/// direct path) and a contiguous `allocate_shared` window exist, at a
/// barrier: every segment this process holds or has mapped is mode 0600,
/// and /dev/shm has no file of the job (named after the library or after
/// any rank's pid): segments are memfds, which have no name to leave behind
/// when a rank crashes.
fn segments_private_and_nameless() {
    let world = World::init().expect("init");
    let (rank, n) = (world.rank(), world.size());
    let pids = world
        .allgather(&[u64::from(std::process::id())])
        .expect("allgather");
    let mut win = Window::<u64>::allocate(&world, n).expect("allocate");
    let mut shared = Window::<u64>::allocate_shared(&world, 8).expect("allocate_shared");
    win.lock_all().unwrap();
    for t in 0..n {
        win.put(t, rank, &[rank as u64 + 1]).unwrap();
    }
    win.unlock_all().unwrap();
    world.barrier().unwrap();

    let (held, mapped) = own_segments();
    for (name, mode) in held.iter().chain(&mapped) {
        assert_eq!(*mode, 0o600, "{name} has mode {mode:o}");
    }
    // The node segment of the shared window, and on the direct path this
    // rank's window segment and every peer's, as many as the mapping cache
    // holds (`ONESIDED_SHM_CACHE`: scripts/test-tiny.sh runs with one).
    let want = if direct_on() {
        2 + (n - 1).min(world.stats().shm.capacity)
    } else {
        1
    };
    assert!(
        mapped.len() >= want,
        "{} segments mapped, want >= {want}: {mapped:?}",
        mapped.len()
    );
    if direct_on() {
        assert!(!held.is_empty(), "no segment descriptor held");
    }
    // On the shm provider its endpoint regions are there by design (the
    // provider maps them by name, lazily): they are named
    // `onesided-<pid>-<n>-<hex>:<uid>:<index>` (docs/reliability.md).
    let provider_shm = world.provider().starts_with("shm");
    let endpoint_region = |name: &str| provider_shm && name.contains(':');
    // Another job's shm-provider endpoint regions (`onesided-<pid>-…:…`,
    // a pid outside this job): a job running beside this one on the
    // machine, not a file of ours.
    let other_job = |name: &str| {
        let pid = name
            .strip_prefix("onesided-")
            .and_then(|r| r.split('-').next())
            .and_then(|p| p.parse::<u64>().ok());
        name.contains(':') && pid.is_some_and(|p| !pids.contains(&p))
    };
    let of_the_job = |name: &str| {
        !endpoint_region(name)
            && !other_job(name)
            && (name.contains("onesided")
                || pids.iter().any(|p| {
                    let p = p.to_string();
                    name.starts_with(&format!("{p}:")) || name.contains(&format!("-{p}-"))
                }))
    };
    let left: Vec<String> = std::fs::read_dir("/dev/shm")
        .expect("/dev/shm")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| of_the_job(name))
        .collect();
    assert!(left.is_empty(), "files of the job in /dev/shm: {left:?}");
    world.barrier().unwrap();

    let mine = win.local_to_vec().unwrap();
    assert_eq!(mine, (1..=n as u64).collect::<Vec<_>>());
    shared.free().unwrap();
    win.free().unwrap();
    drop((shared, win));
    world.finalize().unwrap();
}
spmd_test!(
    node_segments_owner_only_and_not_in_dev_shm,
    jobs = both(&[2, 4]),
    segments_private_and_nameless
);
