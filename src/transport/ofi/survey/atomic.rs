//! `fi_query_atomic` over every operation and datatype.

use libfabric_sys as fi;
use serde::Serialize;

use super::super::fid::Owned;
use super::super::info::InfoRef;
use crate::error::Result;

/// Operations asked about, with their names; `true` for the compare family
/// (`fi_compare_atomic`), `false` for the rest (`fi_atomic`, `fi_fetch_atomic`).
pub const OPS: &[(fi::fi_op, &str, bool)] = &[
    (fi::FI_MIN, "MIN", false),
    (fi::FI_MAX, "MAX", false),
    (fi::FI_SUM, "SUM", false),
    (fi::FI_PROD, "PROD", false),
    (fi::FI_LOR, "LOR", false),
    (fi::FI_LAND, "LAND", false),
    (fi::FI_BOR, "BOR", false),
    (fi::FI_BAND, "BAND", false),
    (fi::FI_LXOR, "LXOR", false),
    (fi::FI_BXOR, "BXOR", false),
    (fi::FI_ATOMIC_READ, "ATOMIC_READ", false),
    (fi::FI_ATOMIC_WRITE, "ATOMIC_WRITE", false),
    (fi::FI_CSWAP, "CSWAP", true),
    (fi::FI_CSWAP_NE, "CSWAP_NE", true),
    (fi::FI_CSWAP_LE, "CSWAP_LE", true),
    (fi::FI_CSWAP_LT, "CSWAP_LT", true),
    (fi::FI_CSWAP_GE, "CSWAP_GE", true),
    (fi::FI_CSWAP_GT, "CSWAP_GT", true),
    (fi::FI_MSWAP, "MSWAP", true),
];

/// Datatypes asked about: libfabric name and a short column label.
pub const DATATYPES: &[(fi::fi_datatype, &str, &str)] = &[
    (fi::FI_INT8, "INT8", "i8"),
    (fi::FI_UINT8, "UINT8", "u8"),
    (fi::FI_INT16, "INT16", "i16"),
    (fi::FI_UINT16, "UINT16", "u16"),
    (fi::FI_INT32, "INT32", "i32"),
    (fi::FI_UINT32, "UINT32", "u32"),
    (fi::FI_INT64, "INT64", "i64"),
    (fi::FI_UINT64, "UINT64", "u64"),
    (fi::FI_FLOAT, "FLOAT", "flt"),
    (fi::FI_DOUBLE, "DOUBLE", "dbl"),
    (fi::FI_LONG_DOUBLE, "LONG_DOUBLE", "ldbl"),
    (fi::FI_FLOAT_COMPLEX, "FLOAT_COMPLEX", "cflt"),
    (fi::FI_DOUBLE_COMPLEX, "DOUBLE_COMPLEX", "cdbl"),
    (fi::FI_LONG_DOUBLE_COMPLEX, "LONG_DOUBLE_COMPLEX", "cldb"),
    (fi::FI_INT128, "INT128", "i128"),
    (fi::FI_UINT128, "UINT128", "u128"),
];

/// What one operation on one datatype supports: the largest element count
/// per call for each kind, `None` where `fi_query_atomic` says no.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AtomicCell {
    /// Datatype name (`INT64`).
    pub datatype: &'static str,
    /// `fi_atomic` (flags 0).
    pub atomic: Option<usize>,
    /// `fi_fetch_atomic` (`FI_FETCH_ATOMIC`).
    pub fetch: Option<usize>,
    /// `fi_compare_atomic` (`FI_COMPARE_ATOMIC`).
    pub compare: Option<usize>,
}

impl AtomicCell {
    /// Whether any kind is supported.
    pub fn any(&self) -> bool {
        self.atomic.is_some() || self.fetch.is_some() || self.compare.is_some()
    }

    /// `a`, `f`, `c` for the supported kinds, `-` for none.
    pub fn letters(&self) -> String {
        let s: String = [(self.atomic, 'a'), (self.fetch, 'f'), (self.compare, 'c')]
            .iter()
            .filter(|(n, _)| n.is_some())
            .map(|(_, c)| *c)
            .collect();
        if s.is_empty() {
            "-".into()
        } else {
            s
        }
    }
}

/// One operation across all datatypes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AtomicRow {
    /// Operation name (`SUM`).
    pub op: &'static str,
    /// One cell per entry of [`DATATYPES`], in that order.
    pub cells: Vec<AtomicCell>,
}

/// The answers of `fi_query_atomic` for one domain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AtomicMatrix {
    /// One row per entry of [`OPS`], in that order.
    pub rows: Vec<AtomicRow>,
}

impl AtomicMatrix {
    /// The cell for an operation and datatype, by libfabric name.
    pub fn cell(&self, op: &str, datatype: &str) -> Option<&AtomicCell> {
        self.rows
            .iter()
            .find(|r| r.op == op)?
            .cells
            .iter()
            .find(|c| c.datatype == datatype)
    }

    /// Whether nothing at all is supported.
    pub fn is_empty(&self) -> bool {
        self.rows.iter().all(|r| r.cells.iter().all(|c| !c.any()))
    }
}

/// Opens the fabric and domain of `entry` and asks `fi_query_atomic` about
/// every pair of [`OPS`] and [`DATATYPES`].
pub fn atomic_matrix(entry: InfoRef<'_>) -> Result<AtomicMatrix> {
    // Kept whole: its fields drop in declaration order, the domain before
    // its fabric. (Destructured into two bindings, the later binding — the
    // fabric — dropped first: `fi_close` refused it, EBUSY, and the fabric
    // leaked once per surveyed provider.)
    let opened = super::super::domain::Domain::open(entry)?;
    let domain = &opened.domain;

    let rows = OPS
        .iter()
        .map(|&(op, name, compare)| AtomicRow {
            op: name,
            cells: DATATYPES
                .iter()
                .map(|&(dt, dt_name, _)| AtomicCell {
                    datatype: dt_name,
                    atomic: (!compare).then(|| query(domain, dt, op, 0)).flatten(),
                    fetch: (!compare)
                        .then(|| query(domain, dt, op, fi::FI_FETCH_ATOMIC))
                        .flatten(),
                    compare: compare
                        .then(|| query(domain, dt, op, fi::FI_COMPARE_ATOMIC))
                        .flatten(),
                })
                .collect(),
        })
        .collect();
    Ok(AtomicMatrix { rows })
}

/// Largest count for `op` on `dt` with `flags`, `None` if unsupported.
fn query(
    domain: &Owned<fi::fid_domain>,
    dt: fi::fi_datatype,
    op: fi::fi_op,
    flags: u64,
) -> Option<usize> {
    let mut attr = fi::fi_atomic_attr::default();
    // SAFETY: live domain; attr is a valid, writable fi_atomic_attr. Any
    // datatype/op value is allowed: providers reject unknown ones.
    let rc = unsafe { fi::fi_query_atomic(domain.as_ptr(), dt, op, &mut attr, flags) };
    if rc != 0 && rc != -fi::FI_EOPNOTSUPP {
        tracing::debug!(rc, dt, op, flags, "fi_query_atomic: unexpected answer");
    }
    (rc == 0).then_some(attr.count)
}
