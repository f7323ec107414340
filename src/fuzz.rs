//! Deterministic fuzzing of every decoder of peer or launcher input (test
//! builds only; `scripts/fuzz.sh`, docs/reliability.md "Fuzzing").
//!
//! Each decoder gets `ONESIDED_FUZZ_CASES` inputs (default 100,000) from a
//! fixed-seed generator: its seed corpus of valid encodings, then
//! mutations of them (bit flips, interesting bytes and words at random
//! places, truncation, extension, splices of two seeds) and random bytes.
//! A decoder must return (`Ok` or `Err`) on every input, never panic; the
//! first panicking input is reported in hex. One `FUZZ-COUNT` line per
//! decoder gives the inputs and how many decoded.
//!
//! The decoders of private modules (the active-message header, the batch
//! format) run from tests in those modules through [`run`].

use std::panic::{catch_unwind, AssertUnwindSafe};

/// The generator's seed (`ONESIDED_FUZZ_SEED` overrides it).
pub const SEED: u64 = 0x0e5e_71de_d0fa_2026;

/// Inputs per decoder.
pub fn cases() -> usize {
    std::env::var("ONESIDED_FUZZ_CASES")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100_000)
}

fn seed() -> u64 {
    std::env::var("ONESIDED_FUZZ_SEED")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(SEED)
}

/// xorshift64*: small, deterministic, good enough to steer mutations.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed | 1)
    }
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
}

const BYTES: [u8; 8] = [0, 1, 0x7f, 0x80, 0xfe, 0xff, b'=', b'\n'];
const WORDS: [u64; 8] = [
    0,
    1,
    8,
    0x7fff_ffff,
    0xffff_ffff,
    1 << 32,
    i64::MAX as u64,
    u64::MAX,
];

/// One input: a seed as it is, mutated, spliced, or random bytes.
fn input(r: &mut Rng, seeds: &[Vec<u8>], max_len: usize) -> Vec<u8> {
    let pick = |r: &mut Rng| seeds[r.below(seeds.len())].clone();
    let mut v = match (seeds.is_empty(), r.below(10)) {
        (true, _) | (false, 0) => {
            let n = r.below(max_len + 1);
            (0..n).map(|_| r.next() as u8).collect()
        }
        (false, 1) => {
            let (a, b) = (pick(r), pick(r));
            let cut_a = r.below(a.len() + 1);
            let cut_b = r.below(b.len() + 1);
            let mut v = a[..cut_a].to_vec();
            v.extend_from_slice(&b[cut_b..]);
            v
        }
        _ => pick(r),
    };
    // 1–4 mutations.
    for _ in 0..=r.below(4) {
        match r.below(6) {
            0 if !v.is_empty() => {
                let i = r.below(v.len());
                v[i] ^= 1 << r.below(8);
            }
            1 if !v.is_empty() => {
                let i = r.below(v.len());
                v[i] = BYTES[r.below(BYTES.len())];
            }
            2 if v.len() >= 8 => {
                let w = WORDS[r.below(WORDS.len())];
                let width = [1usize, 2, 4, 8][r.below(4)];
                let i = r.below(v.len() - width + 1);
                v[i..i + width].copy_from_slice(&w.to_le_bytes()[..width]);
            }
            3 => v.truncate(r.below(v.len() + 1)),
            4 => {
                for _ in 0..r.below(16) {
                    v.push(r.next() as u8);
                }
            }
            _ => {}
        }
    }
    v.truncate(max_len.max(1));
    v
}

/// Feeds `cases()` inputs to `target` (which returns whether the input
/// decoded) and asserts that none panicked.
pub fn run(name: &str, seeds: &[Vec<u8>], max_len: usize, target: &dyn Fn(&[u8]) -> bool) {
    let mut r = Rng::new(
        seed()
            ^ name
                .bytes()
                .fold(0u64, |h, b| h.rotate_left(5) ^ u64::from(b)),
    );
    let n = cases();
    let (mut ok, mut panics) = (0usize, 0usize);
    let mut first: Option<Vec<u8>> = None;
    for i in 0..n {
        let v = match seeds.get(i) {
            Some(s) => s.clone(),
            None => input(&mut r, seeds, max_len),
        };
        match catch_unwind(AssertUnwindSafe(|| target(&v))) {
            Ok(true) => ok += 1,
            Ok(false) => {}
            Err(_) => {
                panics += 1;
                first.get_or_insert(v);
            }
        }
    }
    println!(
        "FUZZ-COUNT {name}: {n} inputs, {ok} ok, {} err, {panics} panics (seed {:#x})",
        n - ok - panics,
        seed()
    );
    if let Some(v) = first {
        let hex: String = v.iter().map(|b| format!("{b:02x}")).collect();
        panic!("{name}: {panics} inputs panicked; the first: {hex}");
    }
    assert!(
        seeds.is_empty() || ok > 0,
        "{name}: not even the seed corpus decoded"
    );
}

#[cfg(test)]
mod targets {
    use super::run;
    use crate::epoch::LockType;
    use crate::meta::{attach, directory, peers};
    use crate::protocols::accumulate::wire as acc;
    use crate::protocols::soft_lock::wire as lock;
    use crate::transport::{AtomicOp, Datatype, Memory, RemoteAddr};

    #[test]
    fn fuzz_software_accumulate_request() {
        let data = [7u8; 24];
        let seeds: Vec<Vec<u8>> = [
            (AtomicOp::Sum, Datatype::F64, 3, false),
            (AtomicOp::Read, Datatype::I32, 2, true),
            (AtomicOp::Cswap, Datatype::U64, 1, true),
        ]
        .iter()
        .map(|&(op, datatype, count, fetch)| {
            let bytes = if op == AtomicOp::Read {
                0
            } else if op == AtomicOp::Cswap {
                16
            } else {
                count as usize * datatype.size()
            };
            acc::Request {
                window: 3,
                offset: 64,
                op,
                datatype,
                count,
                fetch,
                data: &data[..bytes],
            }
            .encode()
        })
        .collect();
        run("software accumulate request", &seeds, 200, &|b| {
            acc::Request::decode(b).is_ok()
        });
    }

    #[test]
    fn fuzz_lock_queue_messages_and_replies() {
        let data = [1u8; 16];
        let seeds: Vec<Vec<u8>> = [
            lock::Carried::None,
            lock::Carried::Put {
                offset: 8,
                data: &data,
            },
            lock::Carried::Accumulate {
                offset: 16,
                op: AtomicOp::Sum,
                datatype: Datatype::I64,
                data: &data,
            },
        ]
        .iter()
        .map(|&op| {
            lock::LockMsg {
                sub: lock::SubOp::Acquire,
                kind: LockType::Exclusive,
                release: true,
                window: 5,
                ticket: 9,
                op,
            }
            .encode()
        })
        .collect();
        run("lock queue message", &seeds, 200, &|b| {
            lock::LockMsg::decode(b).is_ok()
        });
        let replies: Vec<Vec<u8>> = [
            lock::Status::Granted,
            lock::Status::Queued(4),
            lock::Status::Busy,
            lock::Status::Done,
        ]
        .iter()
        .map(|s| s.encode().to_vec())
        .collect();
        run("lock queue reply", &replies, 40, &|b| {
            lock::Status::decode(b).is_ok()
        });
    }

    #[test]
    fn fuzz_directory_descriptor() {
        let d = directory::Descriptor {
            id: 4,
            base: 0x1000,
            len: 4096,
            disp_unit: 8,
            key: 8,
            tag: 7,
            flags: 0x101,
            aux: 2,
        };
        let seeds = vec![d.encode().to_vec()];
        run(
            "directory descriptor",
            &seeds,
            directory::ENTRY_BYTES,
            &|b| {
                let mut e = [0u8; directory::ENTRY_BYTES];
                let n = b.len().min(e.len());
                e[..n].copy_from_slice(&b[..n]);
                directory::Descriptor::decode(&e, 1, 4).is_ok()
            },
        );
    }

    #[test]
    fn fuzz_attach_table() {
        let table = Memory::allocate(4 * attach::ENTRY).unwrap();
        let regions = [
            attach::Region {
                addr: 0x10_0000,
                len: 4096,
                key: 3,
            },
            attach::Region {
                addr: 0x20_0000,
                len: 64,
                key: 5,
            },
        ];
        for (i, r) in regions.iter().enumerate() {
            attach::publish(&table, i, r).unwrap();
        }
        let mut bytes = vec![0u8; 4 * attach::ENTRY];
        table.read(0, &mut bytes).unwrap();
        let seeds = vec![bytes.clone(), bytes[..2 * attach::ENTRY].to_vec()];
        run("attach table", &seeds, 8 * attach::ENTRY, &|b| {
            attach::decode(b, 1, 2).is_ok()
        });
    }

    #[test]
    fn fuzz_peer_card() {
        let card = peers::encode_card(
            &[1, 2, 3, 4, 5, 6, 7, 8, 9],
            RemoteAddr {
                addr: 0x7f00_1000,
                key: 42,
            },
        );
        run("peer card", &[card.into_bytes()], 300, &|b| {
            peers::decode_card(3, &String::from_utf8_lossy(b)).is_ok()
        });
    }

    #[test]
    fn fuzz_pmi1_and_launcher_wire() {
        let seeds: Vec<Vec<u8>> = [
            crate::bootstrap::wire::encode("get_result", &[("rc", "0"), ("value", "abc=d")]),
            crate::bootstrap::wire::encode("barrier_out", &[]),
            crate::bootstrap::wire::encode(
                "put",
                &[("kvsname", "k"), ("key", "x"), ("value", "1")],
            ),
            "cmd=init pmi_version=1 pmi_subversion=1\n".to_string(),
        ]
        .into_iter()
        .map(String::into_bytes)
        .collect();
        run("PMI-1 / launcher wire line", &seeds, 600, &|b| {
            crate::bootstrap::wire::parse(b).is_ok()
        });
    }

    #[test]
    fn fuzz_pmi2_frames() {
        use crate::bootstrap::pmi2::frame;
        let seeds: Vec<Vec<u8>> = [
            frame::encode(
                "kvs-get-response",
                &[("rc", "0"), ("found", "TRUE"), ("value", "v;;x")],
            ),
            frame::encode(
                "fullinit-response",
                &[("rc", "0"), ("rank", "1"), ("size", "4")],
            ),
        ]
        .into_iter()
        .filter_map(Result::ok)
        .collect();
        let bodies: Vec<Vec<u8>> = seeds.iter().map(|s| s[6.min(s.len())..].to_vec()).collect();
        let headers: Vec<Vec<u8>> = seeds.iter().map(|s| s[..6.min(s.len())].to_vec()).collect();
        run("PMI-2 frame header", &headers, 12, &|b| {
            frame::parse_header(b).is_ok()
        });
        run("PMI-2 frame body", &bodies, 400, &|b| {
            frame::parse(b).is_ok()
        });
    }

    #[test]
    fn fuzz_node_mapping_and_pmix_local_peers() {
        let maps: Vec<Vec<u8>> = ["(vector,(0,2,2))", "(vector,(0,4,1),(4,1,3))"]
            .iter()
            .map(|s| s.as_bytes().to_vec())
            .collect();
        run("node mapping (PMI_process_mapping)", &maps, 200, &|b| {
            crate::bootstrap::node::parse_mapping(&String::from_utf8_lossy(b)).is_ok()
        });
        let peers: Vec<Vec<u8>> = ["0,1,2", "3"]
            .iter()
            .map(|s| s.as_bytes().to_vec())
            .collect();
        run("PMIx local peers", &peers, 200, &|b| {
            crate::bootstrap::pmix::parse_local_peers(&String::from_utf8_lossy(b), 1, 8).is_ok()
        });
    }

    #[test]
    fn fuzz_verbs_handshake() {
        use crate::transport::verbs::conn::QpAddr;
        use crate::transport::verbs::cq::WrId;
        use crate::transport::verbs::handshake::{Card, Hello};
        let qp = QpAddr {
            gid: [0xfe; 16],
            lid: 3,
            qpn: 0x1234,
            psn: 99,
        };
        let card = Card {
            gid: [1; 16],
            lid: 2,
            ud_qpn: 77,
        };
        run("verbs card", &[card.encode()], 64, &|b| {
            Card::decode(b, 1).is_ok()
        });
        let hello = Hello {
            reply: true,
            rank: 1,
            generation: 4,
            answers: 3,
            qp,
            ud_qpn: 8,
        };
        run(
            "verbs handshake datagram",
            &[hello.encode().to_vec()],
            96,
            &|b| Hello::decode(b).is_some(),
        );
        run(
            "verbs queue pair address",
            &[qp.encode().to_vec()],
            64,
            &|b| QpAddr::decode(b).is_some(),
        );
        let ids: Vec<Vec<u8>> = [1u64, 0x0001_0002_0000_0003]
            .iter()
            .map(|v| v.to_le_bytes().to_vec())
            .collect();
        run("verbs work request id", &ids, 8, &|b| {
            let mut w = [0u8; 8];
            let n = b.len().min(8);
            w[..n].copy_from_slice(&b[..n]);
            WrId::decode(u64::from_le_bytes(w)).is_some()
        });
    }
}
