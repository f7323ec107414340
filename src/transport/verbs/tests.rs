//! Device tests: two RC queue pairs of this process connected to each
//! other over the real device (soft-RoCE in the CI guest). Without a
//! device they print why they did not run.

use std::io::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::atomic::{ByteOrder, PROBE};
use super::conn::{Access, Cq, Device, Mr, RcQp};
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
        for wc in cq.poll(16).expect("poll") {
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
    let cq = Cq::new(&dev, 64).expect("cq");
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
