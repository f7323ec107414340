use std::sync::Arc;

use super::*;

const INT_OPS: [AtomicOp; 12] = [
    AtomicOp::Sum,
    AtomicOp::Prod,
    AtomicOp::Min,
    AtomicOp::Max,
    AtomicOp::Band,
    AtomicOp::Bor,
    AtomicOp::Bxor,
    AtomicOp::Land,
    AtomicOp::Lor,
    AtomicOp::Lxor,
    AtomicOp::Replace,
    AtomicOp::Read,
];

fn what(op: AtomicOp, datatype: Datatype, count: usize) -> Atomic {
    Atomic {
        op,
        datatype,
        count,
    }
}

/// The reference: plain arithmetic on i64 values, the way MPI defines it.
fn reference(op: AtomicOp, t: i64, o: i64) -> i64 {
    let b = |x: i64| x != 0;
    match op {
        AtomicOp::Sum => t.wrapping_add(o),
        AtomicOp::Prod => t.wrapping_mul(o),
        AtomicOp::Min => t.min(o),
        AtomicOp::Max => t.max(o),
        AtomicOp::Band => t & o,
        AtomicOp::Bor => t | o,
        AtomicOp::Bxor => t ^ o,
        AtomicOp::Land => (b(t) && b(o)) as i64,
        AtomicOp::Lor => (b(t) || b(o)) as i64,
        AtomicOp::Lxor => (b(t) != b(o)) as i64,
        AtomicOp::Replace => o,
        _ => t,
    }
}

#[test]
fn every_integer_op_matches_the_reference() {
    let targets: [i64; 6] = [0, 1, -3, 7, 100, -128];
    let origins: [i64; 6] = [5, 0, 2, -7, 3, 1];
    for op in INT_OPS {
        let mem = Memory::allocate(64).unwrap();
        for (i, t) in targets.iter().enumerate() {
            mem.write(i * 8, &t.to_ne_bytes()).unwrap();
        }
        let src: Vec<u8> = origins.iter().flat_map(|o| o.to_ne_bytes()).collect();
        let mut old = vec![0u8; 48];
        accumulate(&mem, 0, what(op, Datatype::I64, 6), &src, Some(&mut old)).unwrap();
        for i in 0..6 {
            let mut b = [0u8; 8];
            mem.read(i * 8, &mut b).unwrap();
            let got = i64::from_ne_bytes(b);
            assert_eq!(
                got,
                reference(op, targets[i], origins[i]),
                "op {op} element {i}"
            );
            let prev = i64::from_ne_bytes(old[i * 8..i * 8 + 8].try_into().unwrap());
            assert_eq!(prev, targets[i], "fetched value, op {op} element {i}");
        }
    }
}

/// Every integer width, signed and unsigned, through the one-instruction
/// path (`SUM`, `BAND`, `BOR`, `BXOR` as `fetch_add` ... on the bits) and
/// the compare-exchange path: the result and the fetched value are the
/// reference's, truncated to the width, and the neighbours are untouched
/// (64-bit: `every_integer_op_matches_the_reference`).
#[test]
fn every_width_matches_the_reference() {
    fn bytes(v: i64, size: usize) -> Vec<u8> {
        v.to_le_bytes()[..size].to_vec()
    }
    fn value(b: &[u8], signed: bool) -> i64 {
        let mut w = [0u8; 8];
        w[..b.len()].copy_from_slice(b);
        let shift = 64 - 8 * b.len() as u32;
        let v = i64::from_le_bytes(w) << shift;
        if signed {
            v >> shift
        } else {
            ((v as u64) >> shift) as i64
        }
    }
    let types = [
        (Datatype::I8, true),
        (Datatype::U8, false),
        (Datatype::I16, true),
        (Datatype::U16, false),
        (Datatype::I32, true),
        (Datatype::U32, false),
    ];
    let pairs: [(i64, i64); 5] = [(-3, 5), (127, 1), (-128, -1), (0x55, -0x56), (-1, -1)];
    for (dt, signed) in types {
        let size = dt.size();
        for op in INT_OPS {
            for (t, o) in pairs {
                let mem = Memory::allocate(32).unwrap();
                mem.write(0, &[0xA5; 32]).unwrap();
                mem.write(8, &bytes(t, size)).unwrap();
                let mut old = vec![0u8; size];
                accumulate(&mem, 8, what(op, dt, 1), &bytes(o, size), Some(&mut old)).unwrap();
                let mut all = [0u8; 32];
                mem.read(0, &mut all).unwrap();
                let t = value(&bytes(t, size), signed);
                let o = value(&bytes(o, size), signed);
                let want = value(&bytes(reference(op, t, o), size), signed);
                let case = format!("{op} on {dt}: {t} with {o}");
                assert_eq!(value(&all[8..8 + size], signed), want, "{case}");
                assert_eq!(value(&old, signed), t, "fetched, {case}");
                assert!(all[..8].iter().chain(&all[8 + size..]).all(|&b| b == 0xA5), "{case}: neighbours");
            }
        }
    }
}

#[test]
fn small_types_wrap_and_keep_neighbours() {
    let mem = Memory::allocate(8).unwrap();
    mem.write(0, &[250u8, 9, 9, 9]).unwrap();
    accumulate(&mem, 0, what(AtomicOp::Sum, Datatype::U8, 1), &[10], None).unwrap();
    let mut b = [0u8; 4];
    mem.read(0, &mut b).unwrap();
    assert_eq!(b, [4, 9, 9, 9], "u8 SUM wraps and touches one byte");
    mem.write(0, &(-100i16).to_ne_bytes()).unwrap();
    accumulate(
        &mem,
        0,
        what(AtomicOp::Min, Datatype::I16, 1),
        &(-200i16).to_ne_bytes(),
        None,
    )
    .unwrap();
    let mut h = [0u8; 2];
    mem.read(0, &mut h).unwrap();
    assert_eq!(i16::from_ne_bytes(h), -200, "signed MIN");
}

#[test]
fn floats_and_their_refusals() {
    let mem = Memory::allocate(16).unwrap();
    mem.write(0, &1.5f64.to_ne_bytes()).unwrap();
    accumulate(
        &mem,
        0,
        what(AtomicOp::Prod, Datatype::F64, 1),
        &4.0f64.to_ne_bytes(),
        None,
    )
    .unwrap();
    let mut b = [0u8; 8];
    mem.read(0, &mut b).unwrap();
    assert_eq!(f64::from_ne_bytes(b), 6.0);
    mem.write(8, &2.0f32.to_ne_bytes()).unwrap();
    let mut old = [0u8; 4];
    accumulate(
        &mem,
        8,
        what(AtomicOp::Max, Datatype::F32, 1),
        &(-1.0f32).to_ne_bytes(),
        Some(&mut old),
    )
    .unwrap();
    assert_eq!(f32::from_ne_bytes(old), 2.0);
    for op in [AtomicOp::Band, AtomicOp::Lor] {
        assert!(!supports(op, Datatype::F64));
        let e = accumulate(&mem, 0, what(op, Datatype::F64, 1), &[0; 8], None);
        assert!(matches!(e, Err(Error::Unsupported(_))), "{e:?}");
    }
}

#[test]
fn compare_swap_compares_bits() {
    let mem = Memory::allocate(8).unwrap();
    mem.write(0, &7u64.to_ne_bytes()).unwrap();
    let mut old = [0u8; 8];
    compare_swap(
        &mem,
        0,
        Datatype::U64,
        &3u64.to_ne_bytes(),
        &9u64.to_ne_bytes(),
        &mut old,
    )
    .unwrap();
    assert_eq!(
        u64::from_ne_bytes(old),
        7,
        "no swap: returns the current value"
    );
    compare_swap(
        &mem,
        0,
        Datatype::U64,
        &7u64.to_ne_bytes(),
        &9u64.to_ne_bytes(),
        &mut old,
    )
    .unwrap();
    assert_eq!(u64::from_ne_bytes(old), 7);
    assert_eq!(mem.load_u64(0).unwrap(), 9, "swapped");
    let mut o1 = [0u8; 1];
    mem.write(3, &[5]).unwrap();
    compare_swap(&mem, 3, Datatype::I8, &[5], &[6], &mut o1).unwrap();
    let mut b = [0u8; 1];
    mem.read(3, &mut b).unwrap();
    assert_eq!((o1[0], b[0]), (5, 6));
}

#[test]
fn bad_arguments_are_errors_not_accesses() {
    let mem = Memory::allocate(16).unwrap();
    let sum = |n| what(AtomicOp::Sum, Datatype::U64, n);
    assert!(
        accumulate(&mem, 16, sum(1), &[0; 8], None).is_err(),
        "past the end"
    );
    assert!(
        accumulate(&mem, 8, sum(2), &[0; 16], None).is_err(),
        "straddles the end"
    );
    assert!(accumulate(&mem, usize::MAX, sum(1), &[0; 8], None).is_err());
    assert!(accumulate(&mem, 0, sum(usize::MAX), &[], None).is_err());
    assert!(
        accumulate(&mem, 4, sum(1), &[0; 8], None).is_err(),
        "misaligned"
    );
    assert!(
        accumulate(&mem, 0, sum(1), &[0; 4], None).is_err(),
        "short source"
    );
    let mut short = [0u8; 4];
    assert!(accumulate(&mem, 0, sum(1), &[0; 8], Some(&mut short)).is_err());
    assert!(accumulate(
        &mem,
        0,
        what(AtomicOp::Cswap, Datatype::U64, 1),
        &[0; 8],
        None
    )
    .is_err());
    let mut old = [0u8; 8];
    assert!(compare_swap(&mem, 12, Datatype::U64, &[0; 8], &[0; 8], &mut old).is_err());
    assert!(compare_swap(&mem, 0, Datatype::U64, &[0; 4], &[0; 8], &mut old).is_err());
    assert_eq!(mem.load_u64(0).unwrap(), 0, "nothing was written");
}

#[test]
fn concurrent_updates_lose_nothing() {
    const THREADS: u64 = 4;
    const ADDS: u64 = 20_000;
    let mem = Arc::new(Memory::allocate(16).unwrap());
    let workers: Vec<_> = (0..THREADS)
        .map(|_| {
            let mem = mem.clone();
            std::thread::spawn(move || {
                for _ in 0..ADDS {
                    accumulate(
                        &mem,
                        0,
                        what(AtomicOp::Sum, Datatype::U64, 1),
                        &1u64.to_ne_bytes(),
                        None,
                    )
                    .unwrap();
                    // f64 adds of 1.0 are exact up to 2^53: a lost update shows.
                    accumulate(
                        &mem,
                        8,
                        what(AtomicOp::Sum, Datatype::F64, 1),
                        &1.0f64.to_ne_bytes(),
                        None,
                    )
                    .unwrap();
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    assert_eq!(mem.load_u64(0).unwrap(), THREADS * ADDS);
    let mut b = [0u8; 8];
    mem.read(8, &mut b).unwrap();
    assert_eq!(f64::from_ne_bytes(b), (THREADS * ADDS) as f64);
}
