use std::sync::Arc;

use super::queue::LockTable;
use super::target::*;
use super::wire::*;
use crate::epoch::LockType;
use crate::protocols::accumulate::op_bit;
use crate::transport::{AtomicOp, Datatype};

#[test]
fn round_trip_and_rejects() {
    let data = [7u8; 8];
    let m = LockMsg {
        sub: SubOp::Acquire,
        kind: LockType::Exclusive,
        release: true,
        window: 3,
        ticket: 0,
        op: Carried::Put {
            offset: 8,
            data: &data,
        },
    };
    let b = m.encode();
    assert_eq!(LockMsg::decode(&b).unwrap(), m);
    for i in [0usize, 1, 2, 3, 4, 16] {
        let mut bad = b.clone();
        bad[i] ^= 0x40;
        assert!(LockMsg::decode(&bad).is_err(), "byte {i}");
    }
    assert!(LockMsg::decode(&b[..FIELDS - 1]).is_err());
    // A release with an operation is refused.
    let mut r = b.clone();
    r[0] = 3;
    assert!(LockMsg::decode(&r).is_err());
    for s in [
        Status::Granted,
        Status::Queued(9),
        Status::Busy,
        Status::Done,
    ] {
        assert_eq!(Status::decode(&s.encode()), Ok(s));
    }
    assert!(Status::decode(&[9u8; REPLY_BYTES]).is_err());
}

#[test]
fn checks_before_touching_memory() {
    let table = Arc::new(LockTable::default());
    let mem = Arc::new(crate::transport::Memory::allocate(64).unwrap());
    let exposed = Arc::new(crate::transport::exposed::ExposedTable::default());
    let _m = exposed.expose(5, &mem, Datatype::U64, 0).unwrap();
    let sum_bit = 1u64 << op_bit(AtomicOp::Sum);
    let _x = table.expose(5, 4, Datatype::U64, sum_bit).unwrap();
    let h = LockHandler::new(table.clone(), exposed);
    let acquire = |op| LockMsg {
        sub: SubOp::Acquire,
        kind: LockType::Exclusive,
        release: true,
        window: 5,
        ticket: 0,
        op,
    };
    let data = 3u64.to_le_bytes();
    let out = Carried::Put {
        offset: 60,
        data: &data,
    };
    assert!(h.serve(1, &acquire(out)).is_err(), "past the end");
    let prod = Carried::Accumulate {
        offset: 0,
        op: AtomicOp::Prod,
        datatype: Datatype::U64,
        data: &data,
    };
    assert!(
        h.serve(1, &acquire(prod)).is_err(),
        "op not on the CPU path"
    );
    let wrong_type = Carried::Accumulate {
        offset: 0,
        op: AtomicOp::Sum,
        datatype: Datatype::I32,
        data: &data,
    };
    assert!(h.serve(1, &acquire(wrong_type)).is_err());
    let mut none = acquire(Carried::None);
    none.window = 6;
    assert!(h.serve(1, &none).is_err(), "unknown window");
    // Nothing was held by the refused requests.
    assert_eq!(table.queue(5, |q| q.holders()), Some((0, None)));
    let sum = Carried::Accumulate {
        offset: 8,
        op: AtomicOp::Sum,
        datatype: Datatype::U64,
        data: &data,
    };
    assert_eq!(h.serve(1, &acquire(sum)), Ok(Status::Granted));
    assert_eq!(h.serve(1, &acquire(sum)), Ok(Status::Granted));
    assert_eq!(mem.load_u64(8).unwrap(), 6);
    assert_eq!(table.queue(5, |q| q.holders()), Some((0, None)));
    assert_eq!(h.stats().ops_applied, 2);
}
