use proptest::prelude::*;

use std::sync::Arc;

use super::target::*;
use super::wire::*;
use crate::transport::am::{Handler, MAX_PAYLOAD};
use crate::transport::exposed::ExposedTable;
use crate::transport::Memory;
use crate::transport::{AtomicOp, Datatype};

fn sum(window: u64, offset: u64, data: &[u8]) -> Request<'_> {
    Request {
        window,
        offset,
        op: AtomicOp::Sum,
        datatype: Datatype::I64,
        count: (data.len() / 8) as u32,
        fetch: false,
        data,
    }
}

#[test]
fn round_trip_and_rejects() {
    let data = 5i64.to_le_bytes();
    let r = sum(3, 16, &data);
    let m = r.encode();
    assert_eq!(Request::decode(&m), Ok(r));
    let bad = |f: &dyn Fn(&mut Vec<u8>)| {
        let mut m = r.encode();
        f(&mut m);
        Request::decode(&m).is_err()
    };
    assert!(bad(&|m| m.truncate(REQUEST_BYTES - 1)), "short");
    assert!(bad(&|m| m.push(0)), "operand length");
    assert!(bad(&|m| m[16] = 0xee), "unknown op");
    assert!(bad(&|m| m[20] = 0xee), "unknown type");
    assert!(
        bad(&|m| m[24..28].copy_from_slice(&0u32.to_le_bytes())),
        "count 0"
    );
    assert!(
        bad(&|m| m[24..28].copy_from_slice(&u32::MAX.to_le_bytes())),
        "huge count"
    );
    assert!(bad(&|m| m[28] = 2), "unknown flags");
    // Reads and compare-and-swap must fetch; CSWAP is one element.
    let read = Request {
        op: AtomicOp::Read,
        data: &[],
        count: 1,
        ..r
    };
    assert!(Request::decode(&read.encode()).is_err());
    assert!(Request::decode(
        &Request {
            fetch: true,
            ..read
        }
        .encode()
    )
    .is_ok());
    let two = [0u8; 16];
    let cas = Request {
        op: AtomicOp::Cswap,
        data: &two,
        count: 1,
        fetch: true,
        ..r
    };
    assert!(Request::decode(&cas.encode()).is_ok());
    assert!(Request::decode(&Request { count: 2, ..cas }.encode()).is_err());
}

fn table_with(
    mem: &Arc<Memory<'static>>,
    software: u64,
) -> (Arc<ExposedTable>, crate::transport::exposed::ExposedEntry) {
    let t = Arc::new(ExposedTable::default());
    let e = t.expose(9, mem, Datatype::I64, software).unwrap();
    (t, e)
}

#[test]
fn handler_applies_and_refuses_without_touching_memory() {
    let mem = Arc::new(Memory::allocate(32).unwrap());
    let (table, exposure) = table_with(&mem, u64::MAX);
    let h = AccumulateHandler {
        table: table.clone(),
    };
    let mut reply = [0u8; MAX_PAYLOAD];
    let add = [7i64.to_le_bytes(), 9i64.to_le_bytes()].concat();
    let ok = sum(9, 8, &add);
    assert_eq!(h.handle(1, &ok.encode(), Some(&mut reply)), Ok(0));
    let fetch = Request { fetch: true, ..ok };
    assert_eq!(h.handle(1, &fetch.encode(), Some(&mut reply)), Ok(16));
    assert_eq!(&reply[..16], &add[..]);
    let before = {
        let mut b = [0u8; 32];
        mem.read(0, &mut b).unwrap();
        b
    };
    // Out of range, misaligned, unknown window, wrong type: all refused.
    for (r, why) in [
        (sum(9, 24, &add), "outside"),
        (sum(9, 32, &add[..8]), "outside"),
        (sum(9, u64::MAX - 3, &add[..8]), "outside"),
        (sum(9, 4, &add[..8]), "aligned"),
        (sum(10, 0, &add[..8]), "not open"),
        (
            Request {
                datatype: Datatype::I32,
                count: 2,
                ..sum(9, 0, &add[..8])
            },
            "the window holds",
        ),
    ] {
        let e = h.handle(1, &r.encode(), Some(&mut reply)).unwrap_err();
        assert!(e.contains(why) || e.contains("overflows"), "{e}");
    }
    assert!(h.handle(1, &ok.encode(), None).is_err(), "one-way refused");
    let mut after = [0u8; 32];
    mem.read(0, &mut after).unwrap();
    assert_eq!(before, after, "a refused request changed memory");
    // A window whose SUM runs in hardware refuses software SUMs.
    drop(exposure);
    let (table, _e) = table_with(&mem, 0);
    let h = AccumulateHandler { table };
    let e = h.handle(1, &ok.encode(), Some(&mut reply)).unwrap_err();
    assert!(e.contains("hardware path"), "{e}");
}

proptest! {
    #[test]
    fn decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..120)) {
        if let Ok(r) = Request::decode(&bytes) {
            prop_assert!(r.count > 0);
            prop_assert_eq!(r.data.len() + REQUEST_BYTES, bytes.len());
        }
    }

    #[test]
    fn handler_never_writes_outside(offset in 0u64..80, count in 1u32..12, fetch: bool) {
        let mem = Arc::new(Memory::allocate(48).unwrap());
        let (table, _e) = table_with(&mem, u64::MAX);
        let h = AccumulateHandler { table };
        let data = vec![1u8; count as usize * 8];
        let r = Request { count, fetch, ..sum(9, offset, &data) };
        let mut reply = [0u8; MAX_PAYLOAD];
        let res = h.handle(0, &r.encode(), Some(&mut reply));
        let fits = offset % 8 == 0 && offset + count as u64 * 8 <= 48;
        prop_assert_eq!(res.is_ok(), fits, "{:?}", res);
    }
}
