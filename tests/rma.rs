//! Multi-process RMA tests: real processes, real providers, every byte checked.
//!
//! Each test runs its body in every rank of jobs started by `onesided-run`
//! and `mpiexec.hydra`, on the providers in ONESIDED_TEST_PROVIDERS
//! (default tcp, shm, sockets), with 2 and 4 ranks (see tests/common).

#[macro_use]
mod common;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use onesided::{Assert, Error, Request, Window, World};

/// Transfer sizes in bytes, 8 B to 4 MiB.
const SIZES: &[usize] = &[8, 64, 1024, 65536, 1 << 20, 4 << 20];
const MAX: usize = 4 << 20;

/// Byte `i` of the block that `origin` sends in `round`: differs per origin,
/// round, position, so misplaced, stale or truncated data is caught.
fn pattern(origin: usize, round: usize, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i.wrapping_mul(31) ^ (origin * 67) ^ (round * 13) ^ (i >> 8)) as u8)
        .collect()
}

fn first_difference(a: &[u8], b: &[u8]) -> Option<usize> {
    a.iter()
        .zip(b)
        .position(|(x, y)| x != y)
        .or((a.len() != b.len()).then_some(a.len().min(b.len())))
}

fn check(what: &str, got: &[u8], want: &[u8]) {
    if let Some(i) = first_difference(got, want) {
        panic!(
            "{what}: {} bytes, first difference at byte {i}: got {:#x} want {:#x}",
            want.len(),
            got[i],
            want[i]
        );
    }
}

fn neighbours(world: &World) -> (usize, usize) {
    let (r, n) = (world.rank(), world.size());
    ((r + 1) % n, (r + n - 1) % n)
}

/// Passive target: lock_all, put / rput, flush, get / rget back; then the
/// target checks its own memory. Displacements are odd to catch addressing bugs.
fn put_get_lock_all() {
    let world = World::init().expect("init");
    let (right, left) = neighbours(&world);
    let mut win = Window::<u8>::allocate(&world, 2 * MAX + 16).expect("allocate");
    for (round, &len) in SIZES.iter().enumerate() {
        let mine = pattern(world.rank(), round, len);
        let mine2 = pattern(world.rank() + 100, round, len);
        win.lock_all().unwrap();
        win.put(right, 3, &mine).unwrap();
        let req = win.rput(right, MAX + 5, mine2.clone()).unwrap();
        let returned = req.wait().unwrap();
        assert_eq!(returned, mine2, "rput must give its buffer back unchanged");
        win.flush(right).unwrap();
        let mut back = vec![0u8; len];
        win.get(right, 3, &mut back).unwrap();
        check(&format!("get back from rank {right}"), &back, &mine);
        let back2 = win
            .rget(right, MAX + 5, vec![0u8; len])
            .unwrap()
            .wait()
            .unwrap();
        check(&format!("rget back from rank {right}"), &back2, &mine2);
        win.unlock_all().unwrap();
        world.barrier().unwrap();
        let local = win.local_to_vec().unwrap();
        check(
            &format!("put from rank {left} as seen by its target"),
            &local[3..3 + len],
            &pattern(left, round, len),
        );
        check(
            &format!("rput from rank {left} as seen by its target"),
            &local[MAX + 5..MAX + 5 + len],
            &pattern(left + 100, round, len),
        );
        world.barrier().unwrap();
    }
    win.free().unwrap();
    common::assert_transport_clean(&world);
}

/// Active target: fence, put to the right and get from the left, fence,
/// check; every size.
fn put_get_fence() {
    let world = World::init().expect("init");
    let (right, left) = neighbours(&world);
    let mut win = Window::<u8>::allocate(&world, MAX + 8).expect("allocate");
    win.fence(Assert::NOPRECEDE).unwrap();
    for (round, &len) in SIZES.iter().enumerate() {
        let mine = pattern(world.rank(), round, len);
        win.put(right, 1, &mine).unwrap();
        win.fence(Assert::NONE).unwrap();
        let local = win.local_to_vec().unwrap();
        check(
            &format!("fence put from rank {left}"),
            &local[1..1 + len],
            &pattern(left, round, len),
        );
        // Read what the left neighbour received from its own left.
        let mut got = vec![0u8; len];
        win.get(left, 1, &mut got).unwrap();
        win.fence(Assert::NONE).unwrap();
        let left_left = (left + world.size() - 1) % world.size();
        check(
            &format!("fence get from rank {left}"),
            &got,
            &pattern(left_left, round, len),
        );
    }
    win.fence(Assert::NOSUCCEED).unwrap();
    win.free().unwrap();
}

fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// Rank 1 sleeps in user code for 2 s; rank 0's lock_all/put/flush/get to
/// it must complete *during* that sleep (asynchronous progress). Rank 0
/// sends its completion time; rank 1 compares with its wake-up time.
fn target_busy_async_progress() {
    let world = World::init().expect("init");
    let mut win = Window::<u64>::allocate(&world, 1024).expect("allocate");
    world.barrier().unwrap();
    match world.rank() {
        1 => {
            std::thread::sleep(Duration::from_secs(2)); // user computation, not synchronisation
            let wake = now_ns();
            world.barrier().unwrap();
            let mut done = [0u64];
            win.local_read(0, &mut done).unwrap();
            let data = win.local_to_vec().unwrap();
            assert!(
                (0..512).all(|i| data[8 + i] == 7_000 + i as u64),
                "data from rank 0 is wrong"
            );
            assert!(done[0] != 0, "rank 0 did not report its completion time");
            assert!(
                done[0] < wake,
                "rank 0 completed {:.3} s after rank 1 woke up: no asynchronous progress",
                (done[0] - wake) as f64 / 1e9
            );
        }
        0 => {
            let data: Vec<u64> = (0..512).map(|i| 7_000 + i as u64).collect();
            win.lock_all().unwrap();
            win.put(1, 8, &data).unwrap();
            win.flush(1).unwrap();
            let mut back = vec![0u64; 512];
            win.get(1, 8, &mut back).unwrap();
            assert_eq!(back, data);
            let done = now_ns();
            win.put(1, 0, &[done]).unwrap();
            win.unlock_all().unwrap();
            world.barrier().unwrap();
        }
        _ => world.barrier().unwrap(),
    }
    win.free().unwrap();
}

fn expect_err<T: std::fmt::Debug>(r: onesided::Result<T>, words: &[&str]) -> Error {
    let e = r.expect_err("expected an error");
    let msg = e.to_string();
    for w in words {
        assert!(msg.contains(w), "error {msg:?} lacks {w:?}");
    }
    e
}

/// Misuse returns errors that say what and where; nothing panics and the
/// window stays usable afterwards.
fn errors_are_returned() {
    let world = World::init().expect("init");
    let (rank, n) = (world.rank(), world.size());
    let (right, _) = neighbours(&world);
    let mut win = Window::<u32>::allocate(&world, 10 + rank).expect("allocate");
    let id = win.id().to_string();
    expect_err(
        win.put(right, 0, &[1]),
        &["window", &id, "put", "outside an epoch"],
    );
    expect_err(win.get(right, 0, &mut [0]), &["get", "outside an epoch"]);
    expect_err(win.flush(right), &["flush"]);
    expect_err(win.unlock_all(), &["unlock_all"]);
    win.lock_all().unwrap();
    expect_err(win.lock_all(), &["lock_all", "inside a lock_all epoch"]);
    expect_err(
        win.fence(Assert::NONE),
        &["fence", "inside a lock_all epoch"],
    );
    expect_err(win.free(), &["free", "inside a lock_all epoch"]);
    let tlen = 10 + right;
    let e = expect_err(
        win.put(right, tlen - 1, &[1, 2]),
        &["outside the target window", &right.to_string()],
    );
    assert!(
        matches!(e, Error::OutOfWindow { offset, len: 2, window_len, .. } if offset == tlen - 1 && window_len == tlen)
    );
    expect_err(win.get(right, usize::MAX, &mut [0]), &["outside"]);
    expect_err(
        win.put(n, 0, &[1]),
        &["rank", &n.to_string(), "not in the job"],
    );
    expect_err(win.flush(n + 7), &["not in the job"]);
    // The window still works after all that.
    win.put(right, tlen - 2, &[41, 42]).unwrap();
    win.flush(right).unwrap();
    let mut two = [0u32; 2];
    win.get(right, tlen - 2, &mut two).unwrap();
    assert_eq!(two, [41, 42]);
    win.unlock_all().unwrap();
    win.free().unwrap();
    expect_err(win.lock_all(), &["freed"]);

    // Element types that disagree across ranks are detected on first access.
    if rank == 0 {
        let mut w = Window::<u64>::allocate(&world, 4).unwrap();
        world.barrier().unwrap();
        w.free().unwrap();
    } else {
        let mut w = Window::<u32>::allocate(&world, 4).unwrap();
        w.lock_all().unwrap();
        expect_err(w.put(0, 0, &[1]), &["element type", "u64", "u32"]);
        w.unlock_all().unwrap();
        world.barrier().unwrap();
        w.free().unwrap();
    }
}

/// Only peers a process accesses cost it window state: a non-uniform
/// window (sizes differ by rank) caches the one descriptor rank 0 read; a
/// uniform one (same size everywhere) caches none where the provider lets
/// us choose keys (tcp, sockets) and the direct path does not map it.
fn untouched_peers_cost_nothing() {
    let world = World::init().expect("init");
    let rank = world.rank();
    for extra in [rank, 0] {
        let mut win = Window::<u64>::allocate(&world, 64 + extra).expect("allocate");
        let before = world.stats();
        win.lock_all().unwrap();
        if rank == 0 {
            win.put(1, 0, &[5]).unwrap();
            win.flush(1).unwrap();
        }
        win.unlock_all().unwrap();
        let s = win.stats();
        let by_key = s.uniform && std::env::var("ONESIDED_SHM").is_ok_and(|v| v == "0");
        let expected = usize::from(rank == 0 && !by_key);
        assert_eq!(
            s.cached_peers, expected,
            "rank {rank}: window state held for {} peers ({s:?})",
            s.cached_peers
        );
        let ws = world.stats();
        assert_eq!(ws.rkey_cache.entries, expected);
        // Address-vector entries: the barrier's ceil(log2 P) partners, plus rank 1 for rank 0,
        // plus rank 0 for rank 1 when it answered an active message of rank 0's (a lock
        // request on the software lock path, docs/semantics.md).
        let partners = (world.size() as f64).log2().ceil() as usize;
        let replied = usize::from(rank == 1 && ws.active_messages.handled > 0);
        // A connection-oriented back-end (native verbs: one queue pair per
        // connection) also holds state for the peers that contacted it:
        // the barrier's partners in the other direction.
        let inbound = if world.transport_caps().backend == "verbs" {
            partners + 1
        } else {
            0
        };
        assert!(
            ws.address_vector_entries <= partners + usize::from(rank == 0) + replied + inbound,
            "{ws:?} (before window use: {before:?})"
        );
        eprintln!("rank {rank} stats: {ws:?}");
        world.barrier().unwrap();
        win.free().unwrap();
    }
}

/// A remote-key cache of one entry, hammered by accesses to every peer.
fn tiny_rkey_cache() {
    std::env::set_var("ONESIDED_RKEY_CACHE", "1");
    let world = World::init().expect("init");
    let (rank, n) = (world.rank(), world.size());
    // Sizes differ by rank (one unused element more per rank), so the
    // window is not uniform and every access needs its peer's descriptor.
    let mut win = Window::<u64>::allocate(&world, n * 4 + rank).expect("allocate");
    assert!(!win.stats().uniform);
    win.lock_all().unwrap();
    for round in 0..4u64 {
        for t in 0..n {
            win.put(t, rank * 4 + round as usize, &[(rank as u64) << 8 | round])
                .unwrap();
        }
    }
    win.flush_all().unwrap();
    win.unlock_all().unwrap();
    world.barrier().unwrap();
    let v = win.local_to_vec().unwrap();
    for o in 0..n {
        for r in 0..4u64 {
            assert_eq!(v[o * 4 + r as usize], (o as u64) << 8 | r);
        }
    }
    let s = world.stats().rkey_cache;
    assert!(s.capacity == 1 && s.entries <= 1);
    if n > 2 {
        assert!(s.evictions > 0, "{s:?}");
    }
    world.barrier().unwrap();
    win.free().unwrap();
}

/// Request sets: rputs to every rank waited with `wait_all`, rgets of them
/// collected with `wait_any` in whatever order they complete, `test_all`
/// and `test_any` reporting completion; every byte checked.
fn request_sets() {
    let world = World::init().unwrap();
    request_sets_on(&world);
}

fn request_sets_on(world: &World) {
    let (me, n) = (world.rank(), world.size());
    const LEN: usize = 3000;
    let mut win = Window::<u8>::allocate(world, LEN * n).unwrap();
    win.lock_all().unwrap();
    let puts: Vec<_> = (0..n)
        .map(|t| win.rput(t, me * LEN, pattern(me, t, LEN)).unwrap())
        .collect();
    let back = Request::wait_all(puts).unwrap();
    for (t, b) in back.iter().enumerate() {
        check(
            "wait_all gives the buffers back in order",
            b,
            &pattern(me, t, LEN),
        );
    }
    win.flush_all().unwrap();
    world.barrier().unwrap();
    // Read back what every origin put at every target.
    let mut gets: Vec<_> = (0..n)
        .map(|t| win.rget(t, me * LEN, vec![0u8; LEN]).unwrap())
        .collect();
    let mut seen = vec![false; n];
    let mut index: Vec<usize> = (0..n).collect();
    while let Some((i, buf)) = Request::wait_any(&mut gets).unwrap() {
        let t = index.remove(i);
        assert!(!seen[t], "wait_any returned target {t} twice");
        seen[t] = true;
        check(
            &format!("wait_any rget from {t}"),
            &buf,
            &pattern(me, t, LEN),
        );
    }
    assert!(
        seen.iter().all(|&s| s),
        "wait_any missed a request: {seen:?}"
    );
    assert!(gets.is_empty());
    drop(gets);
    assert!(Request::<Vec<u8>>::wait_any(&mut Vec::new())
        .unwrap()
        .is_none());
    let gets: Vec<_> = (0..n)
        .map(|t| win.rget(t, me * LEN, vec![0u8; LEN]).unwrap())
        .collect();
    while !Request::test_all(&gets).unwrap() {}
    assert!(Request::test_any(&gets).unwrap().is_some());
    assert!(gets.iter().all(|r| r.test().unwrap()));
    for (t, b) in Request::wait_all(gets).unwrap().iter().enumerate() {
        check("test_all then wait_all", b, &pattern(me, t, LEN));
    }
    win.unlock_all().unwrap();
    world.barrier().unwrap();
    win.free().unwrap();
}

/// Borrowed transfers in a scope: rgets into parts of one buffer (one
/// waited for, two left to the scope's end),
/// an rput from a borrowed slice; every element checked after the scope.
fn scoped_borrowed_transfers() {
    let world = World::init().unwrap();
    scoped_borrowed_transfers_on(&world);
}

fn scoped_borrowed_transfers_on(world: &World) {
    let (me, n) = (world.rank(), world.size());
    let right = (me + 1) % n;
    const LEN: usize = 900;
    // LEN elements the neighbour reads, then 4 this rank patches itself.
    let mine: Vec<u32> = (0..LEN as u32 + 4).map(|i| i * 7 + me as u32).collect();
    let mut win = Window::<u32>::create(world, mine).unwrap();
    win.lock_all().unwrap();
    let mut halo = vec![0u32; 3 * 300 + 5];
    let (a, rest) = halo.split_at_mut(300);
    let (b, rest) = rest.split_at_mut(300);
    let (c, _tail) = rest.split_at_mut(300);
    let patch: Vec<u32> = vec![0xdead_0000 + me as u32; 4];
    win.scope(|s| {
        let ra = s.rget(right, 0, a)?;
        // Neither waited for: the scope's end fills them.
        let _ = s.rget(right, 300, b)?;
        let _unwaited = s.rget(right, 600, c)?;
        let rp = s.rput(me, LEN, &patch)?;
        ra.wait()?;
        rp.wait()?;
        Ok(())
    })
    .unwrap();
    let want: Vec<u32> = (0..LEN as u32).map(|i| i * 7 + right as u32).collect();
    if let Some(i) = (0..LEN).find(|&i| halo[i] != want[i]) {
        panic!(
            "scoped rgets from rank {right}: element {i} is {}, expected {}",
            halo[i], want[i]
        );
    }
    assert_eq!(&halo[LEN..], &[0; 5], "past the slices: untouched");
    // Out of the window: an error from the scope, the window still works.
    let mut big = vec![0u32; LEN + 5];
    let e = win.scope(|s| s.rget(right, 0, &mut big).map(|_| ()));
    assert!(e.is_err(), "an rget past the window must fail");
    win.flush_all().unwrap();
    win.unlock_all().unwrap();
    world.barrier().unwrap();
    let v = win.local_to_vec().unwrap();
    assert_eq!(&v[LEN..], &[0xdead_0000 + me as u32; 4], "scoped rput");
    world.barrier().unwrap();
    win.free().unwrap();
}

spmd_test!(request_sets_wait_and_test, &[2, 3], request_sets);
in_process_test!(
    in_process_request_sets_wait_and_test,
    &[2, 3],
    request_sets_on
);
spmd_test!(
    scoped_borrowed_rget_rput,
    &[1, 2, 3],
    scoped_borrowed_transfers
);
in_process_test!(
    in_process_scoped_borrowed_transfers,
    &[1, 2, 3],
    scoped_borrowed_transfers_on
);
spmd_test!(put_get_every_size_lock_all, &[2, 4], put_get_lock_all);
spmd_test!(put_get_every_size_fence, &[2, 4], put_get_fence);
spmd_test!(
    async_progress_serves_a_busy_target,
    &[2],
    target_busy_async_progress
);
spmd_test!(misuse_gives_errors, &[2, 4], errors_are_returned);
spmd_test!(
    no_state_for_untouched_peers,
    &[4],
    untouched_peers_cost_nothing
);
spmd_test!(rkey_cache_of_one_entry, &[4], tiny_rkey_cache);
spmd_test!(
    no_connection_to_uncontacted_peers,
    &[8],
    connections_only_to_contacted_peers
);

/// At 8 ranks, after start-up, barriers and a window's creation and free,
/// a rank has transport state (an address-vector entry; on native verbs a
/// queue pair) only for the barrier's partners — r ± 1, r ± 2, r + 4 —
/// never for r ± 3, which it never contacted and which never contacted it.
fn connections_only_to_contacted_peers() {
    let world = World::init().expect("init");
    let rank = world.rank();
    assert_eq!(world.size(), 8);
    world.barrier().unwrap();
    let mut win = Window::<u64>::allocate(&world, 8).expect("allocate");
    world.barrier().unwrap();
    win.free().unwrap();
    let s = world.stats();
    eprintln!(
        "rank {rank}: transport state for {} of 7 peers, {} connections made",
        s.address_vector_entries, s.transport.connections
    );
    assert!(
        s.address_vector_entries <= 5,
        "rank {rank}: state for {} peers, more than the barrier's 5 partners ({s:?})",
        s.address_vector_entries
    );
    world.barrier().unwrap();
}

/// The async-progress test can fail: with the progress agent switched off
/// (`ONESIDED_PROGRESS=manual`), rank 0's operations on tcp cannot complete
/// until rank 1 wakes up, and the same body must report it.
#[test]
fn without_the_progress_agent_a_busy_target_stalls_its_origin() {
    if common::providers().iter().all(|p| p != "tcp") {
        eprintln!("SKIP: tcp is not in ONESIDED_TEST_PROVIDERS");
        return;
    }
    let name = common::test_name(module_path!(), "async_progress_serves_a_busy_target");
    let mut cmd = common::onesided_run_command(&name, 2, &["--provider", "tcp"]);
    cmd.env("ONESIDED_PROGRESS", "manual");
    let out = common::run_with_limit(cmd, common::job_timeout());
    let stderr = &out.stderr;
    let status = out.status.expect("the job did not finish in time");
    assert!(
        !status.success(),
        "the job passed without a progress agent:\n{stderr}"
    );
    assert!(
        stderr.contains("no asynchronous progress"),
        "failed for another reason:\n{stderr}"
    );
}

/// With the longest idle sleep a polling agent may take
/// (`ONESIDED_PROGRESS_IDLE_US`, here 20 ms, on net: its agent polls), a
/// target computing outside the library still serves its origin before it
/// wakes up.
#[test]
fn a_long_idle_sleep_still_serves_a_busy_target() {
    if common::providers().iter().all(|p| p != "net") {
        eprintln!("SKIP: net is not in ONESIDED_TEST_PROVIDERS");
        return;
    }
    let env = [("ONESIDED_PROGRESS_IDLE_US", "20000")];
    common::run_variant(
        module_path!(),
        "async_progress_serves_a_busy_target",
        2,
        "net",
        &env,
    );
}

/// A program started without any launcher is rank 0 of 1 and every
/// operation (all to itself) works, on every provider.
#[test]
fn singleton_program_works() {
    let name = common::test_name(module_path!(), "singleton_program_works");
    if common::is_child(&name) {
        let world = World::init().expect("init");
        // The library installs no global tracing subscriber: the
        // application's own `init()`, which panics when one is already
        // set, succeeds after World::init.
        tracing_subscriber::fmt().with_writer(std::io::sink).init();
        assert_eq!(
            (world.rank(), world.size(), world.bootstrap_name()),
            (0, 1, "singleton")
        );
        let mut win = Window::<f64>::allocate(&world, 1000).unwrap();
        win.fence(Assert::NONE).unwrap();
        let data: Vec<f64> = (0..1000).map(|i| i as f64 * 0.5).collect();
        win.put(0, 0, &data).unwrap();
        win.fence(Assert::NOSUCCEED).unwrap();
        win.lock_all().unwrap();
        let back = win.rget(0, 0, vec![0.0; 1000]).unwrap().wait().unwrap();
        assert_eq!(back, data);
        win.put(0, 999, &[-1.0]).unwrap();
        win.flush_all().unwrap();
        assert!(win.put(0, 1000, &[1.0]).is_err());
        win.unlock_all().unwrap();
        assert_eq!(win.local_to_vec().unwrap()[999], -1.0);
        win.free().unwrap();
        println!("singleton-ok provider={}", world.provider());
        return;
    }
    for p in common::providers() {
        let mut cmd = common::child_command(&name);
        common::select_provider(&mut cmd, &p);
        let out = common::run_with_limit(cmd, common::job_timeout());
        assert!(
            out.status.is_some_and(|s| s.success()) && out.stdout.contains("singleton-ok"),
            "singleton on {p}:\n{}",
            out.tail(40)
        );
        eprintln!("[harness] singleton_program_works: provider={p}: ok");
    }
}

/// The `FI_MR_LOCAL` paths (registered staging slots for small transfers and
/// sync words, per-operation registration of large and request buffers) run
/// on tcp when forced, so they are tested without RDMA hardware; puts of
/// constants (read-only memory) must work there too.
#[test]
fn mr_local_paths_work() {
    if common::providers().iter().all(|p| p != "tcp") {
        eprintln!("SKIP: tcp is not in ONESIDED_TEST_PROVIDERS");
        return;
    }
    let env = [("ONESIDED_MR_LOCAL", "1")];
    common::run_variant(
        module_path!(),
        "put_get_every_size_lock_all",
        2,
        "tcp",
        &env,
    );
    common::run_variant(module_path!(), "misuse_gives_errors", 2, "tcp", &env);
    common::run_variant(module_path!(), "put_get_every_size_fence", 2, "tcp", &env);
}

/// A misspelt variable (`ONESIDED_TIMOUT`) would silently have no effect:
/// `World::init` names it and the variable it resembles (with
/// `ONESIDED_VERBOSE=1` on stderr, once), and the world still starts; a
/// script's own `ONESIDED_TEST_*` variables are not reported.
#[test]
fn a_misspelt_variable_is_reported() {
    let name = common::test_name(module_path!(), "a_misspelt_variable_is_reported");
    if common::is_child(&name) {
        let world = World::builder().provider("tcp").init().expect("init");
        // A second world of the same process reports nothing again.
        drop(world);
        let world = World::builder().provider("tcp").init().expect("init again");
        drop(world);
        println!("misspelt-ok");
        return;
    }
    let mut cmd = common::child_command(&name);
    cmd.env("ONESIDED_TIMOUT", "5").env("ONESIDED_VERBOSE", "1");
    let out = common::run_with_limit(cmd, common::job_timeout());
    assert!(out.stdout.contains("misspelt-ok"), "{}", out.tail(20));
    let line = "ONESIDED_TIMOUT is not a onesided variable and has no effect (did you mean ONESIDED_TIMEOUT?)";
    assert_eq!(out.stderr.matches(line).count(), 1, "{}", out.tail(20));
    assert!(!out.stderr.contains("ONESIDED_TEST_"), "{}", out.tail(20));
}

/// `World::builder()` settings override the environment, and a malformed
/// variable is still reported (kind `Config`) instead of being ignored.
#[test]
fn builder_overrides_the_environment() {
    let name = common::test_name(module_path!(), "builder_overrides_the_environment");
    if common::is_child(&name) {
        if std::env::var("ONESIDED_TEST_CASE").as_deref() == Ok("bad") {
            let e = World::builder()
                .provider("tcp")
                .init()
                .err()
                .expect("a malformed ONESIDED_RKEY_CACHE is an error");
            assert_eq!(e.kind(), onesided::ErrorKind::Config, "{e}");
            assert!(e.to_string().contains("ONESIDED_RKEY_CACHE"), "{e}");
            println!("builder-bad-ok");
            return;
        }
        let world = World::builder()
            .provider("sockets")
            .timeout(Some(std::time::Duration::from_secs(5)))
            .progress(onesided::ProgressMode::Manual)
            .init()
            .expect("init");
        assert!(world.provider().contains("sockets"), "{}", world.provider());
        let mut win = Window::<u64>::allocate(&world, 4).unwrap();
        win.lock_all().unwrap();
        win.put(0, 1, &[42]).unwrap();
        win.flush(0).unwrap();
        let mut v = [0u64];
        win.get(0, 1, &mut v).unwrap();
        win.unlock_all().unwrap();
        assert_eq!(v[0], 42);
        win.free().unwrap();
        println!("builder-ok provider={}", world.provider());
        return;
    }
    let mut cmd = common::child_command(&name);
    cmd.env("ONESIDED_PROVIDER", "tcp");
    let out = common::run_with_limit(cmd, common::job_timeout());
    assert!(out.stdout.contains("builder-ok"), "{}", out.tail(20));
    let mut cmd = common::child_command(&name);
    cmd.env("ONESIDED_TEST_CASE", "bad")
        .env("ONESIDED_RKEY_CACHE", "lots");
    let out = common::run_with_limit(cmd, common::job_timeout());
    assert!(out.stdout.contains("builder-bad-ok"), "{}", out.tail(20));
}
