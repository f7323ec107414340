//! Device tests: two RC queue pairs of this process connected to each
//! other over the real device (soft-RoCE in the CI guest). Without a
//! device they print why they did not run.

use std::io::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::atomic::{ByteOrder, PROBE};
use super::conn::{Access, Cq, Device, Mr, RcQp};
use super::cq::{OpKind, WrId};
use super::msg::Srq;
use super::rma::Local;
use super::{choose_from_env, devices};
use crate::transport::RemoteAddr;

fn skip(why: &str) {
    let _ = std::io::stderr().write_all(
        format!(
            "\n***********************************************************\n\
             *  SKIP verbs device test: {why}\n\
             ***********************************************************\n"
        )
        .as_bytes(),
    );
}

fn wait(cq: &Cq, wr_id: u64) {
    let start = Instant::now();
    loop {
        for wc in polled(cq, 16) {
            assert_eq!(wc.status, rdma_sys::IBV_WC_SUCCESS, "wr {} failed: {}", wc.wr_id, wc.status_text());
            if wc.wr_id == wr_id {
                return;
            }
        }
        assert!(start.elapsed() < Duration::from_secs(60), "no completion for wr {wr_id} in 60 s");
        std::thread::yield_now();
    }
}

#[test]
fn loopback_write_read_fetch_add_compare_swap() {
    match devices() {
        Ok(d) if d.is_empty() => return skip("no RDMA device here (runs in the soft-RoCE guest)"),
        Err(e) => return skip(&format!("cannot list devices: {e}")),
        Ok(_) => {}
    }
    let choice = choose_from_env().expect("a usable port");
    let dev = Device::open(choice).expect("open device");
    let cq = Cq::new(&dev, 64, false).expect("cq");
    let a = RcQp::new(&dev, &cq, 16, 1).expect("qp a");
    let b = RcQp::new(&dev, &cq, 16, 1).expect("qp b");
    a.connect(&dev.address(b.qpn, 200), 100).expect("connect a");
    b.connect(&dev.address(a.qpn, 100), 200).expect("connect b");

    // Target memory (remote access) and a local buffer, as u64 words.
    let mut target: Vec<u64> = vec![0; 512];
    let mut local: Vec<u64> = vec![0; 512];
    let all = Access {
        remote_write: true,
        remote_read: true,
        remote_atomic: true,
    };
    // SAFETY: both vectors outlive the regions (dropped at the end of the
    // test after the regions) and are only read back after completions.
    let tmr = unsafe { Mr::register(&dev, target.as_mut_ptr().cast(), 4096, all) }.expect("reg target");
    // SAFETY: as above.
    let lmr = unsafe { Mr::register(&dev, local.as_mut_ptr().cast(), 4096, Access::LOCAL) }.expect("reg local");
    let remote = |word: u64| RemoteAddr {
        addr: tmr.addr + word * 8,
        key: u64::from(tmr.rkey),
    };

    // Inline write (8 bytes) and a non-inline write (2 KiB).
    local[0] = 0xdead_beef_0000_0001;
    a.post_write(1, Local::of(&lmr, 0, 8).unwrap(), remote(0)).unwrap();
    wait(&cq, 1);
    for (i, w) in local[64..320].iter_mut().enumerate() {
        *w = i as u64 * 3 + 1;
    }
    a.post_write(2, Local::of(&lmr, 512, 2048).unwrap(), remote(64)).unwrap();
    wait(&cq, 2);
    assert_eq!(target[0], 0xdead_beef_0000_0001);
    for i in 0..256 {
        assert_eq!(target[64 + i], i as u64 * 3 + 1, "word {i}");
    }
    // Read back into another part of the local buffer.
    a.post_read(3, Local::of(&lmr, 3072, 1024).unwrap(), remote(64)).unwrap();
    wait(&cq, 3);
    for i in 0..128 {
        assert_eq!(local[384 + i], i as u64 * 3 + 1, "read word {i}");
    }
    // Byte-order self-test: fetch-add 0 on a known word.
    target[10] = PROBE;
    a.post_fetch_add(4, Local::of(&lmr, 8, 8).unwrap(), remote(10), 0).unwrap();
    wait(&cq, 4);
    let order = ByteOrder::detect(local[1]).expect("self-test");
    // Fetch-add and compare-and-swap.
    target[11] = 40;
    a.post_fetch_add(5, Local::of(&lmr, 16, 8).unwrap(), remote(11), 2).unwrap();
    wait(&cq, 5);
    assert_eq!(order.fix(local[2]), 40);
    assert_eq!(target[11], 42);
    a.post_cmp_swap(6, Local::of(&lmr, 24, 8).unwrap(), remote(11), 41, 7).unwrap();
    wait(&cq, 6);
    assert_eq!(order.fix(local[3]), 42, "failed compare returns the old value");
    assert_eq!(target[11], 42, "failed compare leaves the word");
    a.post_cmp_swap(7, Local::of(&lmr, 24, 8).unwrap(), remote(11), 42, 7).unwrap();
    wait(&cq, 7);
    assert_eq!(order.fix(local[3]), 42);
    assert_eq!(target[11], 7);
    // A misaligned atomic is refused before it reaches the device.
    let bad = RemoteAddr {
        addr: tmr.addr + 4,
        key: u64::from(tmr.rkey),
    };
    let e = a.post_fetch_add(8, Local::of(&lmr, 16, 8).unwrap(), bad, 1).unwrap_err();
    assert!(e.to_string().contains("8-byte-aligned"), "{e}");
    drop((a, b, tmr, lmr));
    let _ = Arc::strong_count(&dev);
    eprintln!("verbs loopback: write/read/fetch-add/cmp-swap ok, fetched byte order {order:?}");
}

fn have_device() -> bool {
    match devices() {
        Ok(d) if d.is_empty() => {
            skip("no RDMA device here (runs in the soft-RoCE guest)");
            false
        }
        Err(e) => {
            skip(&format!("cannot list devices: {e}"));
            false
        }
        Ok(_) => true,
    }
}

#[test]
fn srq_messages_wake_the_completion_channel() {
    use std::os::fd::BorrowedFd;
    if !have_device() {
        return;
    }
    let dev = Device::open(choose_from_env().expect("a usable port")).expect("open device");
    let cq = Cq::new(&dev, 256, true).expect("cq with channel");
    let srq = Srq::new(&dev, 16, crate::transport::MAX_MESSAGE).expect("srq");
    let a = RcQp::new(&dev, &cq, 16, 1).expect("qp a");
    let b = RcQp::with_srq(&dev, &cq, Some(&srq), 16, 0).expect("qp b on the srq");
    a.connect(&dev.address(b.qpn, 7), 9).expect("connect a");
    b.connect(&dev.address(a.qpn, 9), 7).expect("connect b");
    assert!(cq.arm().expect("arm"), "nothing happened yet: the agent may sleep");

    let mut out = vec![0u8; 8192];
    for (i, x) in out.iter_mut().enumerate() {
        *x = (i * 7 % 251) as u8;
    }
    // SAFETY: `out` outlives the region and is not touched while sends are in flight.
    let omr = unsafe { Mr::register(&dev, out.as_mut_ptr(), out.len(), Access::LOCAL) }.unwrap();
    let sizes = [100usize, crate::transport::MAX_MESSAGE];
    for (n, &len) in sizes.iter().enumerate() {
        let id = WrId {
            generation: 3,
            kind: OpKind::Send,
            slot: n as u64,
        };
        a.post_send(id.encode().unwrap(), Local::of(&omr, n * 16, len).unwrap()).unwrap();
    }
    // Sleep in the kernel on the channel's fd until the device signals.
    let fd = cq.event_fd().expect("channel fd");
    // SAFETY: the fd belongs to the channel, alive while `cq` is.
    let bfd = unsafe { BorrowedFd::borrow_raw(fd) };
    let mut fds = [nix::poll::PollFd::new(bfd, nix::poll::PollFlags::POLLIN)];
    let ready = nix::poll::poll(&mut fds, nix::poll::PollTimeout::from(60_000u16)).expect("poll");
    assert_eq!(ready, 1, "the completion channel did not wake within 60 s");

    let (mut sends, mut recvs) = (0, Vec::new());
    let start = Instant::now();
    while sends < 2 || recvs.len() < 2 {
        if cq.arm().unwrap() {
            let mut fds = [nix::poll::PollFd::new(bfd, nix::poll::PollFlags::POLLIN)];
            let _ = nix::poll::poll(&mut fds, nix::poll::PollTimeout::from(1000u16));
        }
        for wc in polled(&cq, 16) {
            assert_eq!(wc.status, rdma_sys::IBV_WC_SUCCESS, "{}", wc.status_text());
            let id = WrId::decode(wc.wr_id).expect("our wr_id");
            match id.kind {
                OpKind::Send => {
                    assert_eq!(id.generation, 3);
                    sends += 1;
                }
                OpKind::Recv => recvs.push((id.slot as usize, wc.byte_len as usize)),
                k => panic!("unexpected completion {k:?}"),
            }
        }
        assert!(start.elapsed() < Duration::from_secs(60), "messages did not arrive in 60 s");
    }
    // Messages arrive in order on one RC queue pair.
    for (n, &(slot, len)) in recvs.iter().enumerate() {
        assert_eq!(len, sizes[n]);
        let mut got = vec![0u8; len];
        srq.message(slot, &mut got).unwrap();
        assert_eq!(got, &out[n * 16..n * 16 + len], "message {n}");
        srq.repost(slot).unwrap();
    }
    assert!(cq.arm().unwrap(), "all completions consumed");
    drop((a, b, omr));
    eprintln!("verbs srq: 2 messages received, completion channel woke");
}

#[test]
fn handshake_over_ud_connects_rc_queue_pairs() {
    use super::handshake::{Card, Hello, Ud};
    if !have_device() {
        return;
    }
    let dev = Device::open(choose_from_env().expect("a usable port")).expect("open device");
    let cq = Cq::new(&dev, 256, false).expect("cq");
    // Two "processes": initiator (rank 0) and target (rank 1).
    let ud0 = Ud::new(&dev, &cq, 8).expect("ud 0");
    let ud1 = Ud::new(&dev, &cq, 8).expect("ud 1");
    let card = |ud: &Ud| {
        Card::decode(
            &Card {
                gid: dev.choice.gid.gid,
                lid: dev.choice.port.lid,
                ud_qpn: ud.qpn,
            }
            .encode(),
            0,
        )
        .unwrap()
    };
    let (card0, card1) = (card(&ud0), card(&ud1));
    let next = |want_reply: bool, ud: &Ud| -> Hello {
        let start = Instant::now();
        loop {
            for wc in polled(&cq, 8) {
                assert_eq!(wc.status, rdma_sys::IBV_WC_SUCCESS, "{}", wc.status_text());
                let id = WrId::decode(wc.wr_id).unwrap();
                if wc.opcode == rdma_sys::IBV_WC_RECV && wc.qp_num == ud.qpn {
                    let h = ud.datagram(id.slot as usize, wc.byte_len as usize).expect("a hello");
                    ud.repost(id.slot as usize).unwrap();
                    assert_eq!(h.reply, want_reply);
                    return h;
                }
            }
            assert!(start.elapsed() < Duration::from_secs(60), "no datagram in 60 s");
            std::thread::yield_now();
        }
    };
    // Initiator: RC queue pair + REQ.
    let qp0 = RcQp::new(&dev, &cq, 16, 1).unwrap();
    let req = Hello {
        reply: false,
        rank: 0,
        generation: 1,
        answers: 0,
        qp: dev.address(qp0.qpn, 0x1234),
        ud_qpn: ud0.qpn,
    };
    let hs = |slot| WrId { generation: 0, kind: OpKind::Handshake, slot }.encode().unwrap();
    ud0.send(hs(100), &card1, &req).unwrap();
    // Target's progress: REQ in, its own RC queue pair to RTS, REP out.
    let got = next(false, &ud1);
    assert_eq!(got, req);
    let qp1 = RcQp::new(&dev, &cq, 16, 1).unwrap();
    qp1.connect(&got.qp, 0x777).unwrap();
    let rep = Hello {
        reply: true,
        rank: 1,
        generation: 9,
        answers: got.generation,
        qp: dev.address(qp1.qpn, 0x777),
        ud_qpn: ud1.qpn,
    };
    ud1.send(hs(101), &card0, &rep).unwrap();
    // Initiator: REP in, RTR/RTS, then a write over the new connection.
    let got = next(true, &ud0);
    assert_eq!(got.answers, 1);
    qp0.connect(&got.qp, 0x1234).unwrap();
    let mut target = vec![0u64; 4];
    let mut local = vec![0x5eed_u64; 4];
    let acc = Access { remote_write: true, remote_read: false, remote_atomic: false };
    // SAFETY: both outlive their regions; read only after the completion.
    let tmr = unsafe { Mr::register(&dev, target.as_mut_ptr().cast(), 32, acc) }.unwrap();
    // SAFETY: as above.
    let lmr = unsafe { Mr::register(&dev, local.as_mut_ptr().cast(), 32, Access::LOCAL) }.unwrap();
    qp0.post_write(
        WrId { generation: 1, kind: OpKind::Write, slot: 0 }.encode().unwrap(),
        Local::of(&lmr, 0, 32).unwrap(),
        RemoteAddr { addr: tmr.addr, key: u64::from(tmr.rkey) },
    )
    .unwrap();
    let start = Instant::now();
    'outer: loop {
        for wc in polled(&cq, 8) {
            assert_eq!(wc.status, rdma_sys::IBV_WC_SUCCESS, "{}", wc.status_text());
            if WrId::decode(wc.wr_id).is_some_and(|w| w.kind == OpKind::Write) {
                break 'outer;
            }
        }
        assert!(start.elapsed() < Duration::from_secs(60), "write did not complete in 60 s");
        std::thread::yield_now();
    }
    assert_eq!(target, vec![0x5eed_u64; 4]);
    local[0] = 0;
    let e = Card::decode(&[1, 2, 3], 5).unwrap_err().to_string();
    assert!(e.contains("rank 5"), "{e}");
    drop((qp0, qp1, tmr, lmr));
    eprintln!("verbs handshake: REQ/REP over UD, RC write over the new connection ok");
}

#[test]
fn backend_verbs_opens_the_device_or_says_why_not() {
    use crate::transport::Transport;
    if std::env::var_os("ONESIDED_IB_DEVICE").is_some() {
        return skip("ONESIDED_IB_DEVICE is set; this test checks the automatic choice");
    }
    let config = crate::config::Config::from_env().expect("config");
    let opened = super::VerbsTransport::open(&config, 0, 2);
    match devices() {
        Ok(d) if d.is_empty() => {
            let e = opened.err().expect("no device: an error").to_string();
            assert!(e.contains("no RDMA device"), "{e}");
        }
        Ok(d) => {
            let t = opened.expect("the native transport opens on the device");
            assert!(t.caps().name.starts_with(&format!("{}:", d[0].name)), "{:?}", t.caps().name);
            // Nothing per peer at open: only our own loopback pair exists.
            assert_eq!(t.peer_count(), 0);
            assert_eq!(t.stats().connections, 1, "the loopback pair only");
            // rxe returns atomic results in host order (the self-test ran).
            assert_eq!(t.byte_order(), ByteOrder::Native);
            assert!(t.caps().atomics.lock_word(), "rxe does 64-bit FADD and CSWAP");
        }
        Err(_) => {}
    }
}

/// Rank `rank` of a 2-rank job on this process's device (60 s timeout).
fn open_rank(rank: usize) -> super::VerbsTransport {
    let mut config = crate::config::Config::from_env().expect("config");
    config.timeout = Some(Duration::from_secs(60));
    super::VerbsTransport::open(&config, rank, 2).expect("open the transport")
}

/// A thread driving `t`'s progress, as its agent would, until stopped.
struct Agent {
    stop: Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<()>,
}

impl Agent {
    fn serve(t: Arc<super::VerbsTransport>) -> Agent {
        use crate::transport::Transport;
        use std::sync::atomic::Ordering;
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            while !flag.load(Ordering::Acquire) {
                t.progress().expect("progress");
                std::thread::yield_now();
            }
        });
        Agent { stop, thread }
    }

    fn stop(self) {
        self.stop.store(true, std::sync::atomic::Ordering::Release);
        self.thread.join().expect("agent thread");
    }
}

/// Two transports of this process as ranks 0 and 1 (rank 1's progress
/// driven by a thread, as its agent would): first contact through the
/// handshake, writes, reads and NIC atomics checked byte for byte; a write
/// with a bad key fails with an error naming the rank, and the pair is made
/// again on the next operation, which works.
#[test]
fn transport_connects_recovers_after_an_error_and_counts_nic_atomics() {
    use crate::transport::{Atomic, AtomicOp, Datatype, Memory, Transport};
    if !have_device() {
        return;
    }
    let t0 = open_rank(0);
    let t1 = Arc::new(open_rank(1));
    let agent = Agent::serve(t1.clone());
    let mem = Memory::allocate(4096).expect("memory");
    let reg = t1.register(&mem).expect("register");
    let at = |off: u64| RemoteAddr { addr: reg.base + off, key: reg.key };
    assert_eq!(t0.peer_count(), 0, "nothing before first contact");
    t0.connect(1, t1.card()).expect("connect");
    assert_eq!(t0.peer_count(), 1);

    let data: Vec<u8> = (0..3000u32).map(|i| (i % 251) as u8).collect();
    t0.put(1, &data, at(64)).expect("put");
    let mut back = vec![0u8; 3000];
    mem.read(64, &mut back).unwrap();
    assert_eq!(back, data, "put landed");
    let mut got = vec![0u8; 3000];
    t0.get(1, &mut got, at(64)).expect("get");
    assert_eq!(got, data, "get returned it");

    let sum = Atomic { op: AtomicOp::Sum, datatype: Datatype::U64, count: 2 };
    mem.store_u64(8, 40).unwrap();
    mem.store_u64(16, 1).unwrap();
    let mut old = [0u8; 16];
    let ops: Vec<u8> = [2u64, 5].iter().flat_map(|v| v.to_le_bytes()).collect();
    t0.fetch_atomic(1, sum, &ops, &mut old, at(8)).expect("fetch-add");
    assert_eq!(old[..8], 40u64.to_le_bytes());
    assert_eq!(old[8..], 1u64.to_le_bytes());
    assert_eq!((mem.load_u64(8).unwrap(), mem.load_u64(16).unwrap()), (42, 6));
    let mut prev = [0u8; 8];
    t0.compare_atomic(1, Datatype::U64, &42u64.to_le_bytes(), &7u64.to_le_bytes(), &mut prev, at(8))
        .expect("compare-and-swap");
    assert_eq!(prev, 42u64.to_le_bytes());
    assert_eq!(mem.load_u64(8).unwrap(), 7);
    let s = t0.stats();
    assert!(s.nic_fetch_add >= 2 && s.nic_compare_swap >= 1, "{s:?}");

    // A bad key: the NIC refuses it, the operation fails naming the rank...
    let bad = RemoteAddr { addr: reg.base, key: reg.key ^ 0x5a5a };
    let e = t0.put(1, &[1u8; 16], bad).expect_err("a write with a bad key fails");
    assert!(e.to_string().contains("rank 1"), "{e}");
    // ...and the next operation makes the pair again and works.
    t0.put(1, &[9u8; 32], at(128)).expect("put after the error");
    let mut b = [0u8; 32];
    mem.read(128, &mut b).unwrap();
    assert_eq!(b, [9u8; 32]);
    let s = t0.stats();
    assert!(s.reconnections >= 1, "{s:?}");
    assert_eq!(s.ops_in_flight, 0, "{s:?}");
    eprintln!("verbs transport: connect, put/get, NIC atomics, error then reconnection ok: {s:?}");
    agent.stop();
    drop(reg);
}

/// Puts `data` at `off` of rank 1's `mem` (`at`) from `t0` and checks it
/// landed; inverts it there and checks a get returns the inverted bytes.
fn put_then_get(
    t0: &super::VerbsTransport,
    mem: &crate::transport::Memory<'_>,
    at: RemoteAddr,
    off: usize,
    data: Vec<u8>,
) {
    use crate::transport::Transport;
    let n = data.len();
    t0.put(1, &data, at).expect("put");
    let mut back = vec![0u8; n];
    mem.read(off, &mut back).unwrap();
    assert!(back == data, "put of {n} bytes at {off} landed");
    mem.write(off, &back.iter().map(|b| !b).collect::<Vec<u8>>()).unwrap();
    let mut got = vec![0u8; n];
    t0.get(1, &mut got, at).expect("get");
    assert!(got.iter().zip(&data).all(|(g, d)| *g == !d), "get of {n} bytes at {off}");
}

/// Bytes of read-only data (`.rodata`) a zero-copy put sends from.
static RODATA: [u8; 300_007] = {
    let mut a = [0u8; 300_007];
    let mut i = 0;
    while i < a.len() {
        a[i] = (i % 253) as u8 ^ 0x5c;
        i += 1;
    }
    a
};

/// Puts and gets at and above `ONESIDED_ZCOPY_ABOVE` (256 KiB) go from and
/// into the caller's buffer registered for the one operation — read-only
/// memory included — and below it through the staging copies; every byte
/// checked, the zero-copy count exact, nothing left in flight.
#[test]
fn large_puts_and_gets_register_the_callers_buffer() {
    use crate::transport::{Memory, Transport};
    if !have_device() {
        return;
    }
    let t0 = open_rank(0);
    let t1 = Arc::new(open_rank(1));
    let agent = Agent::serve(t1.clone());
    let size = 3 << 20;
    let mem = Memory::allocate(size).expect("memory");
    let reg = t1.register(&mem).expect("register");
    let at = |off: u64| RemoteAddr { addr: reg.base + off, key: reg.key };
    t0.connect(1, t1.card()).expect("connect");
    let before = t0.stats().zero_copy;
    let mut zero_copies = 0;
    for (n, off) in [(256 * 1024 - 1usize, 8usize), (256 * 1024, 3), (1 << 20, 4096), ((2 << 20) + 13, 77)] {
        put_then_get(&t0, &mem, at(off as u64), off, (0..n).map(|i| (i.wrapping_mul(7) ^ (n >> 3)) as u8).collect());
        zero_copies += if n >= 256 * 1024 { 2 } else { 0 };
        assert_eq!(t0.stats().zero_copy - before, zero_copies, "{n} bytes");
    }
    // From read-only memory: registered without any access right.
    t0.put(1, &RODATA, at(5)).expect("put from read-only memory");
    let mut back = vec![0u8; RODATA.len()];
    mem.read(5, &mut back).unwrap();
    assert!(back[..] == RODATA[..], "put from .rodata landed");
    assert_eq!(t0.stats().zero_copy - before, zero_copies + 1);
    let s = t0.stats();
    assert_eq!(s.ops_in_flight, 0, "{s:?}");
    eprintln!("verbs transport: zero-copy puts and gets ok: {s:?}");
    agent.stop();
    drop(reg);
}

/// The registration cache (`transport/regcache.rs`): a large put or get
/// from or into the same buffer again finds its registration, and a
/// buffer whose memory changed under the same address — unmapped and
/// mapped anew, or emptied with `MADV_DONTNEED` — is registered again, so
/// every byte put is the buffer's current content (a stale registration
/// would send the old pages' bytes). Counts exact.
#[test]
fn a_reused_buffer_address_never_hits_a_stale_registration() {
    use std::num::NonZeroUsize;
    use std::ptr::NonNull;

    use nix::sys::mman::{madvise, mmap_anonymous, munmap, MapFlags, MmapAdvise, ProtFlags};

    use crate::transport::{Memory, Transport};
    if !have_device() {
        return;
    }
    let t0 = open_rank(0);
    if t0.regcache().is_none() {
        return skip("no registration cache (no userfaultfd, or ONESIDED_MR_CACHE=0)");
    }
    let t1 = Arc::new(open_rank(1));
    let agent = Agent::serve(t1.clone());
    let size = 1 << 20;
    let mem = Memory::allocate(size).expect("memory");
    let reg = t1.register(&mem).expect("register");
    let at = RemoteAddr { addr: reg.base, key: reg.key };
    t0.connect(1, t1.card()).expect("connect");
    let len = NonZeroUsize::new(size).unwrap();
    let prot = ProtFlags::PROT_READ | ProtFlags::PROT_WRITE;
    let pattern = |seed: u8| -> Vec<u8> { (0..size).map(|i| (i % 251) as u8 ^ seed).collect() };
    let bytes = |p: NonNull<std::ffi::c_void>| {
        // SAFETY: at each use below, `p` is a live private mapping of
        // `size` bytes that nothing else references while the slice exists.
        unsafe { std::slice::from_raw_parts_mut(p.as_ptr().cast::<u8>(), size) }
    };
    let landed = |want: &[u8], what: &str| {
        let mut back = vec![0u8; size];
        mem.read(0, &mut back).unwrap();
        assert!(back[..] == want[..], "{what}: the target holds the buffer's current bytes");
    };
    let s0 = t0.stats();
    let delta = |t: &super::VerbsTransport| {
        let s = t.stats();
        (
            s.mr_cache_inserted - s0.mr_cache_inserted,
            s.mr_cache_hits - s0.mr_cache_hits,
            s.mr_cache_invalidated - s0.mr_cache_invalidated,
        )
    };

    // SAFETY: a fresh private anonymous mapping, unmapped below.
    let p = unsafe { mmap_anonymous(None, len, prot, MapFlags::MAP_PRIVATE) }.expect("mmap");
    bytes(p).copy_from_slice(&pattern(1));
    t0.put(1, bytes(p), at).expect("put A");
    landed(&pattern(1), "first put");
    assert_eq!(delta(&t0), (1, 0, 0), "registered and kept");
    bytes(p).copy_from_slice(&pattern(2));
    t0.put(1, bytes(p), at).expect("put B");
    landed(&pattern(2), "second put from the same memory");
    assert_eq!(delta(&t0), (1, 1, 0), "found in the cache");

    // Unmapped, and new memory mapped at the same address.
    let addr = p.as_ptr() as usize;
    // SAFETY: our mapping; no slice of it is alive.
    unsafe { munmap(p, size) }.expect("munmap");
    assert_eq!(delta(&t0), (1, 1, 1), "forgotten when munmap returned");
    // SAFETY: maps fresh memory where `p` was (now unmapped).
    let q = unsafe { mmap_anonymous(NonZeroUsize::new(addr), len, prot, MapFlags::MAP_PRIVATE | MapFlags::MAP_FIXED) }
        .expect("mmap at the same address");
    assert_eq!(q.as_ptr() as usize, addr, "the same address, other memory");
    bytes(q).copy_from_slice(&pattern(3));
    t0.put(1, bytes(q), at).expect("put C");
    landed(&pattern(3), "put from new memory at a reused address");
    assert_eq!(delta(&t0), (2, 1, 1));

    // Emptied in place: the next writes fault in new pages.
    // SAFETY: our mapping; its bytes are not needed.
    unsafe { madvise(q, size, MmapAdvise::MADV_DONTNEED) }.expect("madvise");
    assert_eq!(delta(&t0), (2, 1, 2), "forgotten when madvise returned");
    bytes(q).copy_from_slice(&pattern(4));
    t0.put(1, bytes(q), at).expect("put D");
    landed(&pattern(4), "put after MADV_DONTNEED");
    assert_eq!(delta(&t0), (3, 1, 2));

    // A get into the cached buffer.
    mem.write(0, &pattern(5)).unwrap();
    t0.get(1, bytes(q), at).expect("get");
    assert!(bytes(q)[..] == pattern(5)[..], "get into a cached buffer");
    assert_eq!(delta(&t0), (3, 2, 2));

    // SAFETY: our mapping; no slice of it is alive.
    unsafe { munmap(q, size) }.expect("munmap");
    let s = t0.stats();
    assert_eq!(s.ops_in_flight, 0, "{s:?}");
    eprintln!("verbs transport: registration cache ok: {s:?}");
    agent.stop();
    drop(reg);
}

/// Blocking operations of one work request take the lean path
/// (`lean.rs`): every byte and fetched word checked at the path's edges
/// (inline, staged, one whole slot, one byte past it on the general path),
/// the count exact; then four threads fetch-and-add on one word while a
/// second thread of the same process polls the completion queue too, so
/// completions are read by threads other than their posters: every old
/// value appears exactly once.
#[test]
fn blocking_operations_of_one_request_are_polled_by_their_caller() {
    use crate::transport::{Atomic, AtomicOp, Datatype, Memory, Transport};
    use super::staging::SLOT_BYTES;
    if !have_device() {
        return;
    }
    let t0 = Arc::new(open_rank(0));
    let t1 = Arc::new(open_rank(1));
    let agent = Agent::serve(t1.clone());
    let mem = Memory::allocate(256 * 1024).expect("memory");
    let reg = t1.register(&mem).expect("register");
    let at = |off: u64| RemoteAddr { addr: reg.base + off, key: reg.key };
    t0.connect(1, t1.card()).expect("connect");
    let before = t0.stats().lean;
    let mut lean = 0;
    for (n, off) in [(1usize, 3usize), (8, 8), (200, 17), (3000, 1000), (SLOT_BYTES, 4096), (SLOT_BYTES + 1, 70_001)] {
        put_then_get(&t0, &mem, at(off as u64), off, (0..n).map(|i| (i.wrapping_mul(13) ^ n) as u8).collect());
        lean += if n <= SLOT_BYTES { 2 } else { 0 };
        assert_eq!(t0.stats().lean - before, lean, "{n} bytes");
    }
    let sum = |count| Atomic { op: AtomicOp::Sum, datatype: Datatype::U64, count };
    mem.store_u64(0, u64::MAX - 1).unwrap();
    let mut old = [0u8; 8];
    t0.fetch_atomic(1, sum(1), &3u64.to_le_bytes(), &mut old, at(0)).expect("fetch-add");
    assert_eq!(u64::from_le_bytes(old), u64::MAX - 1);
    t0.atomic(1, sum(1), &5u64.to_le_bytes(), at(0)).expect("add");
    assert_eq!(mem.load_u64(0).unwrap(), 6, "wrapped: MAX - 1 + 3 + 5");
    t0.compare_atomic(1, Datatype::I64, &6u64.to_le_bytes(), &(-2i64).to_le_bytes(), &mut old, at(0))
        .expect("compare-and-swap");
    assert_eq!(u64::from_le_bytes(old), 6);
    assert_eq!(mem.load_u64(0).unwrap() as i64, -2);
    t0.compare_atomic(1, Datatype::I64, &6u64.to_le_bytes(), &1u64.to_le_bytes(), &mut old, at(0))
        .expect("compare-and-swap that does not swap");
    assert_eq!(u64::from_le_bytes(old) as i64, -2);
    assert_eq!(mem.load_u64(0).unwrap() as i64, -2);
    lean += 4;
    assert_eq!(t0.stats().lean - before, lean);

    // Completions read by other threads than their posters.
    mem.store_u64(64, 0).unwrap();
    let poller = Agent::serve(t0.clone());
    let (threads, each) = (4usize, 300usize);
    let seen: Vec<Vec<u64>> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..threads)
            .map(|_| {
                let t0 = &t0;
                s.spawn(move || {
                    (0..each)
                        .map(|_| {
                            let mut old = [0u8; 8];
                            t0.fetch_atomic(1, sum(1), &1u64.to_le_bytes(), &mut old, at(64)).expect("fetch-add");
                            u64::from_le_bytes(old)
                        })
                        .collect()
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().expect("thread")).collect()
    });
    poller.stop();
    let mut all: Vec<u64> = seen.into_iter().flatten().collect();
    all.sort_unstable();
    let n = (threads * each) as u64;
    assert!(all.iter().copied().eq(0..n), "every old value once");
    assert_eq!(mem.load_u64(64).unwrap(), n);
    let s = t0.stats();
    assert_eq!(s.lean - before, lean + n);
    assert_eq!(s.ops_in_flight, 0, "{s:?}");
    assert_eq!(s.rejected_completions, 0, "{s:?}");
    eprintln!("verbs transport: lean blocking operations ok: {s:?}");
    agent.stop();
    drop(reg);
}

/// Rank 0 with a 1-s timeout, connected to rank 1 (served by an agent),
/// and `len` bytes of rank 1's memory registered there.
fn short_timeout_pair(
    len: usize,
) -> (
    super::VerbsTransport,
    Arc<super::VerbsTransport>,
    Agent,
    crate::transport::Memory<'static>,
    crate::transport::Registration,
) {
    use crate::transport::{Memory, Transport};
    let mut config = crate::config::Config::from_env().expect("config");
    config.timeout = Some(Duration::from_secs(1));
    let t0 = super::VerbsTransport::open(&config, 0, 2).expect("open");
    let t1 = Arc::new(open_rank(1));
    let agent = Agent::serve(t1.clone());
    let mem = Memory::allocate(len).expect("memory");
    let reg = t1.register(&mem).expect("register");
    t0.connect(1, t1.card()).expect("connect");
    (t0, t1, agent, mem, reg)
}

/// Drives `t0` until no request is in flight: abandoned requests end once
/// their pair is in the error state (30 s at most).
fn until_flushed(t0: &super::VerbsTransport) {
    use crate::transport::Transport;
    let flushed = Instant::now();
    while t0.stats().ops_in_flight > 0 {
        t0.progress().expect("progress");
        assert!(flushed.elapsed() < Duration::from_secs(30), "abandoned requests never ended: {:?}", t0.stats());
        std::thread::yield_now();
    }
}

/// A lean request whose wait times out (the peer's process is gone) is
/// abandoned, not forgotten: the caller gets a timeout naming the
/// operation within the time limit; the request's staging slot stays out
/// of the pool until the device is done with it, which the pair's move to
/// the error state brings about (on rxe under kernel 6.1 the retries of a
/// request to a destroyed queue pair did not run out within 60 s); the
/// pair counts as broken; and the next operation, to a live target, works.
#[test]
fn a_timed_out_blocking_operation_keeps_its_slot_until_the_device_is_done() {
    use crate::transport::{Atomic, AtomicOp, Datatype, Memory, Transport};
    if !have_device() {
        return;
    }
    let (t0, t1, agent, mem, reg) = short_timeout_pair(4096);
    let at = RemoteAddr { addr: reg.base, key: reg.key };
    let sum = Atomic { op: AtomicOp::Sum, datatype: Datatype::U64, count: 1 };
    let mut old = [0u8; 8];
    t0.fetch_atomic(1, sum, &1u64.to_le_bytes(), &mut old, at).expect("fetch-add while the peer lives");
    // The peer's process ends: its queue pair is gone, nothing answers.
    agent.stop();
    drop(reg);
    drop(mem);
    drop(t1);
    let start = Instant::now();
    let e = t0.fetch_atomic(1, sum, &1u64.to_le_bytes(), &mut old, at).expect_err("nobody answers");
    assert!(matches!(e, crate::Error::Timeout { .. }), "{e}");
    assert!(e.to_string().contains("fetching atomic"), "{e}");
    assert_eq!(e.rank(), Some(1), "the peer awaited: {e}");
    assert!(start.elapsed() < Duration::from_secs(5), "{:?}", start.elapsed());
    // The pair went to the error state: the device flushes the request,
    // and that completion gives the slot back.
    until_flushed(&t0);
    // Broken: the next operation to rank 1 first makes a new pair, whose
    // handshake nobody answers.
    let e = t0.fetch_atomic(1, sum, &1u64.to_le_bytes(), &mut old, at).expect_err("nobody answers");
    assert!(e.to_string().contains("connecting to rank 1"), "{e}");
    // What the connect did, for whoever reads the error.
    assert!(e.to_string().contains("request(s) sent, no reply"), "{e}");
    assert_eq!(e.rank(), Some(1), "{e}");
    // The next operation, on our own memory through the loopback pair.
    let own = Memory::allocate(4096).expect("memory");
    let reg0 = t0.register(&own).expect("register");
    own.store_u64(8, 41).unwrap();
    let here = RemoteAddr { addr: reg0.base + 8, key: reg0.key };
    t0.fetch_atomic(0, sum, &1u64.to_le_bytes(), &mut old, here).expect("fetch-add on a live target");
    assert_eq!((u64::from_le_bytes(old), own.load_u64(8).unwrap()), (41, 42));
    let s = t0.stats();
    assert_eq!(s.ops_in_flight, 0, "{s:?}");
    assert_eq!(s.rejected_completions, 0, "{s:?}");
    drop(reg0);
}

/// A wait on requests of the general path (a get of two 64 KiB chunks)
/// that outlasts the timeout ends their queue pair too: rxe never ends a
/// request to a destroyed queue pair by itself, so without that the
/// requests' op-table slots and staging slots would stay taken for good.
/// The requests are flushed and everything comes back; the next operation
/// to the dead peer makes a new pair.
#[test]
fn a_timed_out_operation_of_several_requests_ends_its_queue_pair() {
    use super::staging::SLOT_BYTES;
    use crate::transport::Transport;
    if !have_device() {
        return;
    }
    let n = SLOT_BYTES + 1000;
    let (t0, t1, agent, mem, reg) = short_timeout_pair(2 * SLOT_BYTES);
    let at = RemoteAddr { addr: reg.base, key: reg.key };
    let mut buf = vec![0u8; n];
    mem.write(0, &vec![0x3c; n]).unwrap();
    t0.get(1, &mut buf, at).expect("get while the peer lives");
    assert!(buf.iter().all(|&b| b == 0x3c));
    // The peer's process ends.
    agent.stop();
    drop(reg);
    drop(mem);
    drop(t1);
    let start = Instant::now();
    let e = t0.get(1, &mut buf, at).expect_err("nobody answers");
    assert!(matches!(e, crate::Error::Timeout { .. }), "{e}");
    assert!(e.to_string().contains(&format!("get of {n} bytes")), "{e}");
    assert_eq!(e.rank(), Some(1), "the peer awaited: {e}");
    assert!(start.elapsed() < Duration::from_secs(5), "{:?}", start.elapsed());
    until_flushed(&t0);
    let e = t0.get(1, &mut buf, at).expect_err("nobody answers");
    assert!(e.to_string().contains("connecting to rank 1"), "{e}");
    assert_eq!(e.rank(), Some(1), "{e}");
    let s = t0.stats();
    assert_eq!((s.ops_in_flight, s.rejected_completions), (0, 0), "{s:?}");
}

/// A flood of handshake requests claiming ranks outside the job (a stray
/// or hostile datagram) makes no queue pair: they are dropped and counted.
#[test]
fn handshakes_from_ranks_outside_the_job_make_no_queue_pair() {
    use crate::transport::Transport;
    if !have_device() {
        return;
    }
    let t = open_rank(0);
    let dropped = t.stats().messages_dropped;
    let qp = super::conn::QpAddr {
        gid: [0xfe; 16],
        lid: 1,
        qpn: 0x1234,
        psn: 7,
    };
    for rank in 2..1002u32 {
        t.on_hello(&super::handshake::Hello {
            reply: false,
            rank,
            generation: 3,
            answers: 0,
            qp,
            ud_qpn: 99,
        });
    }
    assert_eq!(t.peer_count(), 0, "a queue pair was made for a rank outside the job");
    assert_eq!(t.stats().messages_dropped, dropped + 1000);
}

/// The shared receive queue's limit event: rank 1 stops serving its
/// receive queue, rank 0 fills three quarters of it and more; rank 1's
/// device raises `IBV_EVENT_SRQ_LIMIT_REACHED`, which its progress counts
/// (and arms again); then every message is received.
#[test]
fn srq_limit_event_is_counted_and_rearmed() {
    use crate::transport::{Receiver, Transport, RECV_BUFFERS};
    use std::sync::atomic::{AtomicUsize, Ordering};
    if !have_device() {
        return;
    }
    struct Count(AtomicUsize);
    impl Receiver for Count {
        fn receive(&self, _buf: &mut [u8], _len: usize) -> Option<(usize, usize)> {
            self.0.fetch_add(1, Ordering::Relaxed);
            None
        }
        fn resolve(&self, _rank: usize) -> crate::error::Result<()> {
            Ok(())
        }
    }
    let t0 = open_rank(0);
    let t1 = Arc::new(open_rank(1));
    let got = Arc::new(Count(AtomicUsize::new(0)));
    t1.set_receiver(got.clone());
    // Rank 1 serves the handshake, then stops.
    let agent = Agent::serve(t1.clone());
    t0.connect(1, t1.card()).expect("connect");
    t0.send(1, b"first").expect("first send");
    while got.0.load(Ordering::Relaxed) == 0 {
        t0.progress().expect("rank 0 progress");
    }
    agent.stop();
    // Nobody polls rank 1 now: its NIC fills the receive buffers.
    let n = RECV_BUFFERS * 3 / 4 + 2;
    for i in 0..n {
        t0.send(1, &(i as u64).to_le_bytes()).expect("send");
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while t1.stats().srq_limit_events == 0 {
        t1.handle_async_events();
        assert!(std::time::Instant::now() < deadline, "no SRQ limit event");
        std::thread::yield_now();
    }
    while got.0.load(Ordering::Relaxed) < n + 1 {
        t1.progress().expect("rank 1 progress");
        t0.progress().expect("rank 0 progress");
        assert!(std::time::Instant::now() < deadline, "messages lost: {:?}", got.0);
    }
    let s = t1.stats();
    assert!(s.srq_limit_events >= 1, "{s:?}");
    eprintln!("verbs SRQ limit: {n} messages while unserved, event counted: {s:?}");
}

/// Up to `n` completions of `cq`, in a vector.
fn polled(cq: &Cq, n: usize) -> Vec<super::cq::Wc> {
    let mut wcs = vec![super::cq::Wc::default(); n];
    let k = cq.poll(&mut wcs).expect("poll");
    wcs.truncate(k);
    wcs
}
