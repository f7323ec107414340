//! Multi-process tests of the active-message layer: request/reply between
//! every pair of ranks at once (more requests than credits and than receive
//! buffers, every byte checked), one-way messages, and hostile or malformed
//! messages that must be rejected and counted without harm.

#[macro_use]
mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use onesided::transport::am::{self, Handler, HEADER_BYTES, MAX_PAYLOAD};
use onesided::World;

const ECHO: u8 = am::kind::USER;
const COUNT: u8 = am::kind::USER + 1;
const REFUSE: u8 = am::kind::USER + 2;

/// Replies with the payload reversed, followed by the handler's rank.
struct Echo(usize);

impl Handler for Echo {
    fn handle(&self, _from: usize, p: &[u8], reply: Option<&mut [u8]>) -> Result<usize, String> {
        let reply = reply.ok_or("echo needs a request")?;
        if p.len() + 1 > reply.len() {
            return Err(format!("echo of {} bytes does not fit", p.len()));
        }
        for (i, b) in p.iter().rev().enumerate() {
            reply[i] = *b;
        }
        reply[p.len()] = self.0 as u8;
        Ok(p.len() + 1)
    }
}

/// Counts one-way messages and their bytes (checked: byte i = i + from).
#[derive(Default)]
struct Count {
    messages: AtomicU64,
    bytes: AtomicU64,
}

impl Handler for Count {
    fn handle(&self, from: usize, p: &[u8], _: Option<&mut [u8]>) -> Result<usize, String> {
        if let Some(i) = (0..p.len()).find(|&i| p[i] != (i + from) as u8) {
            return Err(format!("one-way payload byte {i} is wrong"));
        }
        self.bytes.fetch_add(p.len() as u64, Ordering::Relaxed);
        self.messages.fetch_add(1, Ordering::Relaxed);
        Ok(0)
    }
}

struct Refuse;

impl Handler for Refuse {
    fn handle(&self, _: usize, p: &[u8], _: Option<&mut [u8]>) -> Result<usize, String> {
        Err(format!("refusing {} bytes", p.len()))
    }
}

/// Drives progress until `done()` or 60 s pass.
fn until(world: &World, what: &str, done: impl Fn() -> bool) {
    let start = Instant::now();
    while !done() {
        world.bench_transport().progress().unwrap();
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "rank {}: timed out waiting for {what}; {:?}",
            world.rank(),
            world.stats()
        );
        std::thread::yield_now();
    }
}

type Replies = Arc<Mutex<Vec<(usize, usize, Result<Vec<u8>, String>)>>>;

fn payload(rank: usize, target: usize, k: usize) -> Vec<u8> {
    // Sizes from 0 to MAX_PAYLOAD - 1 (the echo adds a byte).
    let len = [0, 1, 7, 100, 1000, MAX_PAYLOAD - 1][k % 6];
    (0..len)
        .map(|i| (i * 7 + rank * 31 + target + k) as u8)
        .collect()
}

const ROUNDS: usize = 150;

/// Length of the `k`-th one-way message: every tenth fills the back-end's
/// largest message (`Caps::max_message`: beyond 4 KiB on `net` and rxm),
/// the others 0 to MAX_PAYLOAD - 1 bytes.
fn one_way_len(t: &dyn onesided::transport::Transport, k: usize) -> usize {
    if k % 10 == 9 {
        am::ActiveMessages::max_payload(t)
    } else {
        (k * 13) % MAX_PAYLOAD
    }
}

/// Every rank sends ROUNDS requests to every rank (itself included) and
/// one-way messages to its right neighbour, all at once.
fn request_reply() {
    let world = World::init().expect("init");
    let (rank, p) = (world.rank(), world.size());
    let am = world.active_messages();
    let count = Arc::new(Count::default());
    am.register(ECHO, Arc::new(Echo(rank))).unwrap();
    am.register(COUNT, count.clone()).unwrap();
    assert!(
        am.register(ECHO, Arc::new(Echo(rank))).is_err(),
        "a kind has one handler"
    );
    world.barrier().unwrap();

    let t = world.bench_transport();
    let replies: Replies = Arc::default();
    for k in 0..ROUNDS {
        for target in 0..p {
            let r = replies.clone();
            am.request(
                t,
                target,
                ECHO,
                &payload(rank, target, k),
                Box::new(move |res| {
                    r.lock().unwrap().push((
                        target,
                        k,
                        res.map(|b| b.to_vec()).map_err(|e| e.to_string()),
                    ));
                }),
            )
            .unwrap();
        }
        let right = (rank + 1) % p;
        let one: Vec<u8> = (0..one_way_len(t, k)).map(|i| (i + rank) as u8).collect();
        am.send(t, right, COUNT, &one).unwrap();
    }
    until(&world, "replies", || {
        replies.lock().unwrap().len() == ROUNDS * p
    });
    for (target, k, res) in replies.lock().unwrap().iter() {
        let sent = payload(rank, *target, *k);
        let mut want: Vec<u8> = sent.iter().rev().copied().collect();
        want.push(*target as u8);
        assert_eq!(
            res.as_ref().unwrap(),
            &want,
            "reply from {target} round {k}"
        );
    }
    let left = (rank + p - 1) % p;
    let want_bytes: u64 = (0..ROUNDS).map(|k| one_way_len(t, k) as u64).sum();
    until(&world, "one-way messages", || {
        count.messages.load(Ordering::Relaxed) == ROUNDS as u64
    });
    assert_eq!(
        count.bytes.load(Ordering::Relaxed),
        want_bytes,
        "from {left}"
    );
    let s = world.stats();
    assert_eq!(s.active_messages.protocol_errors, 0, "{s:?}");
    assert_eq!(s.active_messages.in_flight, 0, "{s:?}");
    assert_eq!(s.active_messages.replies, (ROUNDS * p) as u64, "{s:?}");
    assert!(s.transport.sends >= (ROUNDS * (p + 1)) as u64, "{s:?}");
    world.barrier().unwrap();
    common::assert_transport_clean(&world);
}

fn raw(class: u8, kind: u8, source: u32, len: u32, token: u64, payload: &[u8]) -> Vec<u8> {
    let mut m = vec![0u8; HEADER_BYTES];
    m[0..2].copy_from_slice(&0x6d61u16.to_le_bytes());
    m[2] = 1;
    m[3] = class;
    m[4] = kind;
    m[8..12].copy_from_slice(&source.to_le_bytes());
    m[12..16].copy_from_slice(&len.to_le_bytes());
    m[16..24].copy_from_slice(&token.to_le_bytes());
    m.extend_from_slice(payload);
    m
}

/// Rank 0 sends rank 1 malformed messages through the raw transport; rank
/// 1 rejects and counts each, runs no handler, and still serves requests.
/// Requests refused by a handler, or of a kind without one, fail at the
/// origin with the reason.
fn hostile() {
    let world = World::init().expect("init");
    let (rank, p) = (world.rank(), world.size());
    let am = world.active_messages();
    let count = Arc::new(Count::default());
    am.register(ECHO, Arc::new(Echo(rank))).unwrap();
    am.register(COUNT, count.clone()).unwrap();
    am.register(REFUSE, Arc::new(Refuse)).unwrap();
    world.barrier().unwrap();
    let t = world.bench_transport();
    let got: Replies = Arc::default();
    let ask = |kind: u8, bytes: &[u8]| {
        let g = got.clone();
        am.request(
            t,
            1,
            kind,
            bytes,
            Box::new(move |r| {
                g.lock().unwrap().push((
                    1,
                    kind as usize,
                    r.map(|b| b.to_vec()).map_err(|e| e.to_string()),
                ));
            }),
        )
        .unwrap();
    };
    let bad: Vec<Vec<u8>> = vec![
        vec![0xff; 3],                          // shorter than a header
        vec![0u8; 64],                          // bad magic
        raw(0, COUNT, 0, 5, 0, b"abcd"),        // length says 5, 4 arrived
        raw(0, COUNT, 0, 3, 0, b"abcd"),        // length says 3, 4 arrived
        raw(7, COUNT, 0, 0, 0, b""),            // unknown class
        raw(0, COUNT, 0, 0, 9, b""),            // one-way with a token
        raw(1, ECHO, 0, 0, 0, b""),             // request without a token
        raw(0, COUNT, p as u32, 0, 0, b""),     // source outside the job
        raw(0, 200, 0, 0, 0, b""),              // one-way of a kind without handler
        raw(2, ECHO, 0, 0, 0x5_0000_0001, b""), // reply nobody asked for
        raw(0, COUNT, 0, 3, 0, &[9, 9, 9]),     // refused by the handler (bad bytes)
    ];
    if rank == 0 {
        ask(ECHO, b"first contact");
        until(&world, "first echo", || got.lock().unwrap().len() == 1);
        for m in &bad {
            t.send(1, m).unwrap();
        }
        // One byte beyond the receive buffers: refused at the origin with
        // the limit named, never sent (and truncated) at all.
        let max = t.caps().max_message;
        let e = t.send(1, &vec![0u8; max + 1]).unwrap_err().to_string();
        assert!(e.contains(&format!("1 to {max} bytes")), "{e}");
        let e = am
            .send(
                t,
                1,
                COUNT,
                &vec![0u8; am::ActiveMessages::max_payload(t) + 1],
            )
            .unwrap_err()
            .to_string();
        assert!(e.contains("payload bytes, at most"), "{e}");
        assert!(t.send(1, &[]).is_err());
        // One at a time: replies from one target may arrive in any order.
        for (i, (kind, bytes)) in [
            (REFUSE, &b"xyz"[..]),
            (200, b"no such kind"),
            (ECHO, b"still alive"),
        ]
        .into_iter()
        .enumerate()
        {
            ask(kind, bytes);
            until(&world, "replies", || got.lock().unwrap().len() == i + 2);
        }
        let g = got.lock().unwrap();
        let e = g[1].2.as_ref().unwrap_err();
        assert!(
            e.contains("refusing 3 bytes") && e.contains("rank 1"),
            "{e}"
        );
        let e = g[2].2.as_ref().unwrap_err();
        assert!(e.contains("no handler for kind 200"), "{e}");
        assert_eq!(g[3].2.as_ref().unwrap(), &b"evila llits\x01".to_vec());
    }
    if rank == 1 {
        // The bad messages, the refused request and the unknown kind.
        let want = bad.len() as u64 + 2;
        until(&world, "rejections", || {
            world.stats().active_messages.protocol_errors == want
        });
        assert_eq!(
            count.messages.load(Ordering::Relaxed),
            0,
            "a bad message ran a handler"
        );
    }
    world.barrier().unwrap();
    assert_eq!(world.stats().active_messages.in_flight, 0);
}

spmd_test!(active_messages_request_reply, &[2, 4], request_reply);
spmd_test!(
    active_messages_hostile,
    jobs = common::matrix(&[2]),
    hostile
);

/// Receive buffers and sends under `FI_MR_LOCAL` (registered pool, copied
/// and registered sends), forced on tcp and shm.
#[test]
fn active_messages_mr_local() {
    let env = [("ONESIDED_MR_LOCAL", "1")];
    for p in common::providers()
        .iter()
        .filter(|p| *p == "tcp" || *p == "shm")
    {
        common::run_variant(module_path!(), "active_messages_request_reply", 2, p, &env);
    }
}

/// Rank 1 leaves (`process::exit`, no finalize) right after a barrier;
/// rank 0 keeps sending it requests. Requests to the departed rank must
/// end in an error naming rank 1 within `ONESIDED_TIMEOUT` (5 s here) —
/// through the reply callback when the send failed after it was posted
/// (`NoReply::Unsent`, kind `PeerUnreachable`), or from `request` itself
/// (libfabric 1.17's tcp and net keep answering `FI_EAGAIN` to sends to a
/// closed connection: kind `Timeout`) — and the credits of failed requests
/// must come back. A request posted before the connection broke may vanish
/// without a reply: each one is waited for at most 2 s, at most 8 may.
/// A request's reply, or why there is none.
type Outcome = Result<Vec<u8>, am::NoReply>;

fn departed_child() {
    let world = World::init().expect("init");
    let am = world.active_messages();
    am.register(ECHO, Arc::new(Echo(world.rank()))).unwrap();
    world.barrier().expect("barrier");
    if world.rank() == 1 {
        std::process::exit(0);
    }
    let t = world.bench_transport();
    let start = Instant::now();
    let (mut answered, mut vanished) = (0, 0);
    let mut outcome = None;
    for k in 0..10_000 {
        let got: Arc<Mutex<Option<Outcome>>> = Arc::default();
        let g = got.clone();
        let sent = am.request(
            t,
            1,
            ECHO,
            &payload(0, 1, k),
            Box::new(move |r| *g.lock().unwrap() = Some(r.map(|b| b.to_vec()))),
        );
        if let Err(e) = sent {
            outcome = Some(("request", e));
            break;
        }
        let asked = Instant::now();
        while got.lock().unwrap().is_none() && asked.elapsed() < Duration::from_secs(2) {
            t.progress().unwrap_or(0);
            std::thread::yield_now();
        }
        match got.lock().unwrap().take() {
            None => vanished += 1,
            Some(Ok(_)) => answered += 1,
            Some(Err(am::NoReply::Unsent(e))) => {
                outcome = Some(("reply callback", e));
                break;
            }
            Some(Err(am::NoReply::Refused(why))) => panic!("request {k} refused: {why}"),
        }
        assert!(
            vanished <= 8,
            "{vanished} requests vanished without an error"
        );
    }
    let (via, e) = outcome.expect("requests to a departed rank never failed");
    let secs = start.elapsed().as_secs_f64();
    println!("departed: {answered} answered, {vanished} vanished, then Err via {via} after {secs:.2} s: {e}");
    assert!(
        matches!(
            e.kind(),
            onesided::ErrorKind::PeerUnreachable | onesided::ErrorKind::Timeout
        ),
        "{e}"
    );
    assert_eq!(e.rank(), Some(1), "{e}");
    assert!(secs < 5.0 + 2.0 * (vanished + 1) as f64, "took {secs:.2} s");
    assert!(
        world.stats().active_messages.in_flight <= vanished,
        "credits of failed requests not returned: {:?}",
        world.stats().active_messages
    );
    // Skip the collective drop (rank 1 is gone).
    std::process::exit(0);
}

#[test]
fn requests_to_a_departed_rank_fail_naming_it() {
    let name = common::test_name(module_path!(), "requests_to_a_departed_rank_fail_naming_it");
    if common::is_child(&name) {
        return departed_child();
    }
    let providers: Vec<String> = common::providers()
        .into_iter()
        .filter(|p| p == "tcp" || p == "net")
        .collect();
    if providers.is_empty() {
        common::say("SKIP requests_to_a_departed_rank_fail_naming_it: no connection-based provider (tcp, net) in ONESIDED_TEST_PROVIDERS");
        return;
    }
    for p in providers {
        let mut cmd = common::onesided_run_command(&name, 2, &["--keep-going"]);
        common::select_provider(&mut cmd, &p);
        cmd.env("ONESIDED_TIMEOUT", "5");
        let out = common::run_with_limit(cmd, Duration::from_secs(60));
        common::say(&format!(
            "departed rank, provider {p}: job {} in {:.1} s; {}",
            out.status.map_or("hung".into(), |s| s.to_string()),
            out.elapsed.as_secs_f64(),
            out.stdout
                .lines()
                .find(|l| l.contains("departed: "))
                .unwrap_or("no result line")
        ));
        assert!(
            out.status.is_some_and(|s| s.success()),
            "provider {p}:\n{}",
            out.tail(30)
        );
    }
}
