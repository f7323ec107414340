//! Junk bytes sent to the ranks' listening TCP ports (issue 12, item 5):
//! every rank finds the ports its provider listens on (its own sockets in
//! LISTEN state, from /proc), the ranks exchange them, and a thread in each
//! rank connects to every port of every rank, round after round, and sends
//! junk — random bytes, zeros, 0xff, a 7-byte stub, a header-sized block
//! claiming a 4 GiB payload, and the tcp provider's connection request cut
//! short after 10 of its 256 data bytes (half of the connections are held
//! open, half-sent) — before and while the job runs a put/get ring checked
//! byte for byte; then each window is checked and freed. On the default
//! provider (`ONESIDED_PROVIDER` unset: net here, never sockets) the job
//! must finish correctly, at 2 and 4 ranks; on `sockets`, which
//! crashes on such input (a known provider defect, docs/reliability.md),
//! the outcome is printed and counted, not asserted.

mod common;

use std::collections::HashSet;
use std::io::Write;
use std::net::{Ipv4Addr, SocketAddrV4, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use onesided::{Window, World};

const NAME: &str = "junk_bytes_to_listening_ports";

/// TCP ports this process listens on (IPv4), with their bound address.
fn listening_ports() -> Vec<SocketAddrV4> {
    let inodes: HashSet<String> = std::fs::read_dir("/proc/self/fd")
        .map(|d| {
            d.flatten()
                .filter_map(|e| std::fs::read_link(e.path()).ok())
                .filter_map(|l| {
                    let s = l.to_string_lossy().to_string();
                    s.strip_prefix("socket:[")
                        .and_then(|r| r.strip_suffix(']'))
                        .map(str::to_string)
                })
                .collect()
        })
        .unwrap_or_default();
    let table = std::fs::read_to_string("/proc/self/net/tcp").unwrap_or_default();
    let mut out = Vec::new();
    for line in table.lines().skip(1) {
        let f: Vec<&str> = line.split_whitespace().collect();
        // sl local_address rem_address st ... inode (field 9)
        if f.len() < 10 || f[3] != "0A" || !inodes.contains(f[9]) {
            continue;
        }
        let Some((ip, port)) = f[1].split_once(':') else {
            continue;
        };
        let (Ok(ip), Ok(port)) = (u32::from_str_radix(ip, 16), u16::from_str_radix(port, 16))
        else {
            continue;
        };
        // /proc prints the address in host order of a little-endian u32.
        out.push(SocketAddrV4::new(Ipv4Addr::from(ip.swap_bytes()), port));
    }
    out
}

fn junk(seed: u64) -> Vec<Vec<u8>> {
    let mut x = seed | 1;
    let mut random = |n: usize| {
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect::<Vec<u8>>()
    };
    // The tcp provider's connection request as libfabric 1.17 reads it
    // (`struct ofi_ctrl_hdr`: version 3, type connreq, seg_size 256 in
    // network order, then 24 bytes of ids) with 10 of its 256 data bytes.
    let connreq: Vec<u8> = [&[3u8, 0][..], &256u16.to_be_bytes(), &[0; 28], &[0x5a; 10]].concat();
    vec![
        random(4096),
        vec![0u8; 64],
        vec![0xff; 64],
        random(7),
        // A header-sized block claiming a huge payload, then nothing.
        [
            &[0x01, 0x00, 0x00, 0x00][..],
            &u32::MAX.to_le_bytes(),
            &[0; 24],
        ]
        .concat(),
        connreq,
    ]
}

/// Ports are shared as `ip << 16 | port` in a fixed number of slots (the
/// allgather wants the same count from every rank); 0 is an empty slot.
const PORT_SLOTS: usize = 16;

fn encode(ports: &[SocketAddrV4]) -> Vec<u64> {
    let mut out: Vec<u64> = ports
        .iter()
        .take(PORT_SLOTS)
        .map(|a| (u64::from(u32::from(*a.ip())) << 16) | u64::from(a.port()))
        .collect();
    out.resize(PORT_SLOTS, 0);
    out
}

fn decode(v: u64) -> Option<SocketAddrV4> {
    let (ip, port) = (Ipv4Addr::from((v >> 16) as u32), v as u16);
    if v == 0 || port == 0 {
        return None;
    }
    // A wildcard listener is reached through loopback.
    let ip = if ip.is_unspecified() {
        Ipv4Addr::LOCALHOST
    } else {
        ip
    };
    Some(SocketAddrV4::new(ip, port))
}

/// What the junk thread did: rounds over every port, connections made.
struct JunkReport {
    rounds: u64,
    connections: u64,
}

/// Sends every kind of junk to every port, round after round, until `stop`
/// (at least one round); keeps the connections that stop after a truncated
/// header open (up to 64) until it returns. Signals `first` after round 1.
fn junk_until(
    targets: Vec<SocketAddrV4>,
    seed: u64,
    stop: Arc<AtomicBool>,
    first: mpsc::Sender<()>,
) -> JunkReport {
    let mut held = Vec::new();
    let mut report = JunkReport {
        rounds: 0,
        connections: 0,
    };
    loop {
        for addr in &targets {
            let kinds = junk(seed ^ report.rounds.wrapping_mul(0x9e37) ^ u64::from(addr.port()));
            for (i, bytes) in kinds.iter().enumerate() {
                let Ok(mut s) = TcpStream::connect_timeout(&(*addr).into(), Duration::from_secs(2))
                else {
                    continue;
                };
                let _ = s.write_all(bytes);
                report.connections += 1;
                if i % 2 == 1 && held.len() < 64 {
                    held.push(s); // half-sent: the reader waits for the rest
                } else {
                    let _ = s.shutdown(std::net::Shutdown::Both);
                }
            }
        }
        report.rounds += 1;
        if report.rounds == 1 {
            let _ = first.send(());
        }
        if stop.load(Ordering::Acquire) {
            return report;
        }
    }
}

fn body() {
    let world = World::init().unwrap();
    let (me, p) = (world.rank(), world.size());
    if std::env::var_os("ONESIDED_PROVIDER").is_none() {
        // The automatic choice never falls on sockets (its junk defect).
        assert!(
            !world.provider().starts_with("sockets"),
            "default provider {}",
            world.provider()
        );
    }
    let right = (me + 1) % p;
    const LEN: usize = 1 << 16;
    let mut win = Window::<u8>::allocate(&world, LEN).unwrap();
    // Our own provider listens now (the endpoint is enabled); every rank
    // learns every rank's listening ports.
    let ports = listening_ports();
    assert!(
        !ports.is_empty(),
        "rank {me}: the provider listens on no TCP port"
    );
    let all = world.allgather(&encode(&ports)).unwrap();
    let targets: Vec<SocketAddrV4> = all.iter().copied().filter_map(decode).collect();
    let stop = Arc::new(AtomicBool::new(false));
    let (first_tx, first_rx) = mpsc::channel();
    let junker = {
        let (targets, stop) = (targets.clone(), Arc::clone(&stop));
        std::thread::spawn(move || junk_until(targets, me as u64 * 31 + 7, stop, first_tx))
    };
    // Junk has reached every port once; it goes on during the workload.
    first_rx.recv().expect("the junk thread ended early");
    // The job still works: a put/get ring, every byte checked (the first
    // contact between ranks, hence the provider's connections, happens
    // under fire).
    win.lock_all().unwrap();
    for round in 0..16u8 {
        let data: Vec<u8> = (0..LEN)
            .map(|i| (i as u8) ^ round ^ (me as u8 * 17))
            .collect();
        win.put(right, 0, &data).unwrap();
        win.flush(right).unwrap();
        let mut back = vec![0u8; LEN];
        win.get(right, 0, &mut back).unwrap();
        assert!(
            back == data,
            "round {round}: data read back from rank {right} differs"
        );
        world.barrier().unwrap();
    }
    win.unlock_all().unwrap();
    stop.store(true, Ordering::Release);
    let report = junker.join().expect("junk thread");
    println!(
        "JUNK rank {me}: {} listening ports of {p} ranks, {} junk connections in {} rounds",
        targets.len(),
        report.connections,
        report.rounds
    );
    world.barrier().unwrap();
    // Nothing changed behind the ring's back: my window holds my left
    // neighbour's last round.
    let left = (me + p - 1) % p;
    let mine = win.local_to_vec().unwrap();
    let want: Vec<u8> = (0..LEN)
        .map(|i| (i as u8) ^ 15 ^ (left as u8 * 17))
        .collect();
    assert!(
        mine == want,
        "rank {me}: window differs from rank {left}'s last put"
    );
    world.barrier().unwrap();
    win.free().unwrap();
}

#[test]
fn junk_bytes_to_listening_ports() {
    let name = common::test_name(module_path!(), NAME);
    if common::is_child(&name) {
        body();
        common::child_done();
        return;
    }
    // The default provider (ONESIDED_PROVIDER unset: net) must survive it,
    // and so must tcp, its fallback.
    for (label, provider) in [("default provider", None), ("provider tcp", Some("tcp"))] {
        for ranks in [2, 4] {
            let mut cmd = common::onesided_run_command(&name, ranks, &[]);
            match provider {
                None => {
                    cmd.env_remove("ONESIDED_PROVIDER");
                }
                Some(p) => common::select_provider(&mut cmd, p),
            }
            let out = common::run_with_limit(cmd, common::job_timeout());
            let passed = out.stdout.matches("test result: ok. 1 passed").count();
            assert!(
                out.status.is_some_and(|s| s.success()) && passed == ranks,
                "{NAME} on the {label}, {ranks} ranks: {passed} of {ranks} ranks passed\n{}",
                out.tail(40)
            );
            for line in out.stdout.lines().filter(|l| l.contains("JUNK rank")) {
                common::say(line);
            }
            common::say(&format!(
                "[harness] {NAME}: onesided-run -n {ranks} {label}: ok"
            ));
        }
    }
    // sockets: a known provider defect; report what happened, on request
    // only (ONESIDED_TEST_SOCKETS_DEFECT=1): a hung sockets job can leave
    // rank processes behind when the launcher is stopped.
    if std::env::var("ONESIDED_TEST_SOCKETS_DEFECT").map_or(true, |v| v != "1") {
        common::say(&format!(
            "[harness] {NAME} on sockets: not run (known provider defect; \
             ONESIDED_TEST_SOCKETS_DEFECT=1 runs it)"
        ));
        return;
    }
    let mut cmd = common::onesided_run_command(&name, 2, &[]);
    common::select_provider(&mut cmd, "sockets");
    let out = common::run_with_limit(cmd, common::job_timeout().min(Duration::from_secs(30)));
    let verdict = match out.status {
        Some(s) if s.success() => "survived this time".to_string(),
        Some(s) => format!("the job failed ({s})"),
        None => "the job hung (stopped after 30 s)".to_string(),
    };
    let signal = out
        .stderr
        .lines()
        .find(|l| l.contains("signal") || l.contains("exited with"))
        .unwrap_or("");
    common::say(&format!(
        "[harness] {NAME} on sockets (known provider defect, not asserted): {verdict} in {:.1} s {signal}",
        out.elapsed.as_secs_f64()
    ));
}

const BIND: &str = "single_machine_jobs_listen_on_loopback";

/// A single-machine job listens on loopback only (issue 12, item 5);
/// `ONESIDED_IFACE` names another interface, and an unknown one is a clear
/// error at start-up.
#[test]
fn single_machine_jobs_listen_on_loopback() {
    let name = common::test_name(module_path!(), BIND);
    if common::is_child(&name) {
        let want = std::env::var("ONESIDED_TEST_WANT").unwrap();
        let world = match World::init() {
            Ok(w) => w,
            Err(e) => {
                assert_eq!(want, "error", "{e}");
                assert!(e.to_string().contains("ONESIDED_IFACE"), "{e}");
                common::child_done();
                return;
            }
        };
        assert_ne!(want, "error", "an unknown interface was accepted");
        let ports = listening_ports();
        assert!(!ports.is_empty(), "the provider listens on no TCP port");
        for p in &ports {
            let lo = p.ip().is_loopback();
            assert_eq!(
                lo,
                want == "loopback",
                "rank {} listens on {p}",
                world.rank()
            );
        }
        world.barrier().unwrap();
        common::child_done();
        return;
    }
    // The interface of the default route, named explicitly.
    let eth = std::fs::read_to_string("/proc/net/route")
        .unwrap_or_default()
        .lines()
        .skip(1)
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|f| f.len() > 1 && f[1] == "00000000")
        .map(|f| f[0].to_string());
    // net: the automatic choice; tcp: its fallback (tcp;ofi_rxm).
    for provider in ["net", "tcp"] {
        common::run_variant(
            module_path!(),
            BIND,
            2,
            provider,
            &[("ONESIDED_TEST_WANT", "loopback")],
        );
        if let Some(eth) = &eth {
            common::run_variant(
                module_path!(),
                BIND,
                2,
                provider,
                &[
                    ("ONESIDED_TEST_WANT", "external"),
                    ("ONESIDED_IFACE", eth.as_str()),
                ],
            );
        }
    }
    let mut cmd = common::onesided_run_command(&name, 1, &[]);
    common::select_provider(&mut cmd, "tcp");
    cmd.env("ONESIDED_TEST_WANT", "error")
        .env("ONESIDED_IFACE", "no-such-if0");
    let out = common::run_with_limit(cmd, common::job_timeout());
    assert!(
        out.status.is_some_and(|s| s.success()) && out.stdout.contains("test result: ok. 1 passed"),
        "unknown ONESIDED_IFACE:\n{}",
        out.tail(30)
    );
}
