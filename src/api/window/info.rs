//! Window creation hints (`MPI_Info` keys onesided understands) and the
//! per-window choice of accumulate path they feed into.

use crate::api::element::Element;
use crate::api::op::AnyOp;
use crate::config::AccumulateMode;
use crate::error::{Error, Result};
use crate::protocols::accumulate::op_bit;
use crate::transport::{AtomicKind, AtomicOp, AtomicOrder, Transport};

const RAR: u8 = AtomicOrder::RAR.0;
const RAW: u8 = AtomicOrder::RAW.0;
const WAR: u8 = AtomicOrder::WAR.0;
const WAW: u8 = AtomicOrder::WAW.0;

/// Hints given at window creation, as MPI's `MPI_Info` keys
/// `accumulate_ordering`, `accumulate_ops` (see `docs/semantics.md`),
/// `no_locks`, `same_size`, `same_disp_unit` and, for
/// [`Window::allocate_shared_with`](crate::Window::allocate_shared_with),
/// `alloc_shared_noncontig` (see `docs/shm.md`). Every rank passes the
/// same hints. [`Window::info`](crate::Window::info) returns the hints in
/// effect (MPI_Win_get_info).
///
/// ```
/// # fn f() -> onesided::Result<()> {
/// let info = onesided::WindowInfo::new()
///     .accumulate_ordering("none")?
///     .accumulate_ops("same_op")?
///     .set("no_locks", "true")?;
/// assert_eq!(info.get("no_locks").as_deref(), Some("true"));
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowInfo {
    ordering: u8,
    same_op: bool,
    noncontig: bool,
    no_locks: bool,
    same_size: bool,
}

impl Default for WindowInfo {
    fn default() -> Self {
        WindowInfo {
            ordering: RAR | RAW | WAR | WAW,
            same_op: false,
            noncontig: false,
            no_locks: false,
            same_size: false,
        }
    }
}

/// The keys [`WindowInfo::set`] and [`WindowInfo::get`] know.
pub const INFO_KEYS: [&str; 6] = [
    "accumulate_ordering",
    "accumulate_ops",
    "no_locks",
    "same_size",
    "same_disp_unit",
    "alloc_shared_noncontig",
];

impl WindowInfo {
    /// MPI's defaults: `accumulate_ordering = rar,raw,war,waw`,
    /// `accumulate_ops = same_op_no_op`.
    pub fn new() -> Self {
        Self::default()
    }

    /// `accumulate_ordering`: a comma-separated subset of `rar`, `raw`,
    /// `war`, `waw`, or `none`. Accumulates from one origin to one target
    /// location are applied in program order for the listed kinds of
    /// conflict (read-after-read, read-after-write, ...); with `none` they
    /// may be applied in any order, and onesided keeps several in flight.
    pub fn accumulate_ordering(mut self, spec: &str) -> Result<Self> {
        let mut bits = 0;
        for word in spec.split(',').map(str::trim) {
            bits |= match word {
                "rar" => RAR,
                "raw" => RAW,
                "war" => WAR,
                "waw" => WAW,
                "none" if spec.trim() == "none" => 0,
                _ => {
                    return Err(Error::InvalidArgument(format!(
                        "accumulate_ordering {spec:?}: expected a comma-separated subset of \
                         rar, raw, war, waw, or none"
                    )))
                }
            };
        }
        self.ordering = bits;
        Ok(self)
    }

    /// `accumulate_ops`: `same_op_no_op` (default: concurrent accumulates
    /// to one location use one operation, or `NO_OP`) or `same_op` (one
    /// operation, no `NO_OP` reads mixed in). With `same_op`, each
    /// operation may take its own path (provider or software); with
    /// `same_op_no_op` a window's operations all take the same path.
    pub fn accumulate_ops(mut self, spec: &str) -> Result<Self> {
        self.same_op = match spec.trim() {
            "same_op_no_op" => false,
            "same_op" => true,
            _ => {
                return Err(Error::InvalidArgument(format!(
                    "accumulate_ops {spec:?}: expected same_op_no_op or same_op"
                )))
            }
        };
        Ok(self)
    }

    /// `alloc_shared_noncontig` (default `false`): with `true`, each rank's
    /// segment of a shared-memory window is its own page-aligned memfd
    /// instead of its part of one node segment in rank order. Every rank
    /// must pass the same value.
    pub fn alloc_shared_noncontig(mut self, noncontig: bool) -> Self {
        self.noncontig = noncontig;
        self
    }

    /// `no_locks` (default `false`): with `true` the window is never
    /// locked — `lock`, `lock_all` and `lock_all_with` return an error —
    /// and no lock queue is opened for it ([`WindowStats::lock_queue`]).
    ///
    /// [`WindowStats::lock_queue`]: crate::WindowStats::lock_queue
    pub fn no_locks(mut self, on: bool) -> Self {
        self.no_locks = on;
        self
    }

    /// Whether `no_locks` was asked for.
    pub fn locks_disabled(&self) -> bool {
        self.no_locks
    }

    /// `same_size` (default `false`): every rank passes the same length.
    /// onesided checks it at creation anyway (the creation's agreement
    /// compares the lengths); with `true` a mismatch is an error on every
    /// rank instead of a window of unequal parts.
    pub fn same_size(mut self, on: bool) -> Self {
        self.same_size = on;
        self
    }

    /// Whether every rank's part has the same length: asked for (`same_size`
    /// given), or, for [`Window::info`](crate::Window::info), found at
    /// creation.
    pub fn sizes_equal(&self) -> bool {
        self.same_size
    }

    /// Sets hint `key` from its MPI string form (`"true"`/`"false"` for the
    /// flags; MPI's values for `accumulate_ordering` and `accumulate_ops`).
    /// `same_disp_unit` is always in effect (the displacement unit is the
    /// element size on every rank) and accepts either value. Keys onesided
    /// does not know are ignored, as MPI implementations ignore hints they
    /// do not understand; [`INFO_KEYS`] lists the known ones.
    ///
    /// # Errors
    /// A known key with a value it does not take.
    pub fn set(self, key: &str, value: &str) -> Result<Self> {
        let flag = || match value.trim() {
            "true" => Ok(true),
            "false" => Ok(false),
            _ => Err(Error::InvalidArgument(format!(
                "info key {key}: expected true or false, got {value:?}"
            ))),
        };
        Ok(match key {
            "accumulate_ordering" => self.accumulate_ordering(value)?,
            "accumulate_ops" => self.accumulate_ops(value)?,
            "no_locks" => self.no_locks(flag()?),
            "same_size" => self.same_size(flag()?),
            "same_disp_unit" => {
                flag()?;
                self
            }
            "alloc_shared_noncontig" => self.alloc_shared_noncontig(flag()?),
            _ => self,
        })
    }

    /// Hint `key` in MPI's string form, `None` for a key onesided does not
    /// know.
    pub fn get(&self, key: &str) -> Option<String> {
        let b = |v: bool| Some(v.to_string());
        match key {
            "accumulate_ordering" => Some(if self.ordering == 0 {
                "none".to_string()
            } else {
                [(RAR, "rar"), (RAW, "raw"), (WAR, "war"), (WAW, "waw")]
                    .iter()
                    .filter(|(bit, _)| self.ordering & bit != 0)
                    .map(|(_, name)| *name)
                    .collect::<Vec<_>>()
                    .join(",")
            }),
            "accumulate_ops" => Some(
                if self.same_op {
                    "same_op"
                } else {
                    "same_op_no_op"
                }
                .to_string(),
            ),
            "no_locks" => b(self.no_locks),
            "same_size" => b(self.same_size),
            "same_disp_unit" => b(true),
            "alloc_shared_noncontig" => b(self.noncontig),
            _ => None,
        }
    }

    /// The hints in effect for a created window: `same_size` as found.
    pub(crate) fn in_effect(mut self, same_size: bool) -> Self {
        self.same_size = same_size;
        self
    }

    /// Whether `alloc_shared_noncontig` was asked for.
    pub fn shared_noncontig(&self) -> bool {
        self.noncontig
    }

    /// The orderings the `accumulate_ordering` hint asks for.
    pub(crate) fn order(&self) -> AtomicOrder {
        AtomicOrder(self.ordering)
    }

    /// Whether any ordering is asked for.
    pub fn ordered(&self) -> bool {
        self.ordering != 0
    }
}

/// Which operations of one window run on the software path, decided at
/// creation from the provider's atomics, `ONESIDED_ACCUMULATE` and the
/// hints; the same on every rank with the same provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Paths {
    /// Bit `op_bit(op)` set: `op` runs in software.
    pub software: u64,
    /// Bits of every operation defined on the element type.
    pub defined: u64,
}

/// Operations defined on `T` with the provider calls each needs.
fn defined<T: Element>() -> Vec<(AtomicOp, &'static [AtomicKind], &'static str)> {
    const BOTH: &[AtomicKind] = &[AtomicKind::Update, AtomicKind::Fetch];
    let mut v: Vec<(AtomicOp, &'static [AtomicKind], &'static str)> = AnyOp::ALL
        .into_iter()
        .filter(|op| T::INTEGER || !op.integer_only())
        .map(|op| {
            let kinds: &'static [AtomicKind] = if op == AnyOp::NoOp {
                &[AtomicKind::Fetch]
            } else {
                BOTH
            };
            (op.atomic_op(), kinds, op.name())
        })
        .collect();
    v.push((AtomicOp::Cswap, &[AtomicKind::Compare], "CSWAP"));
    v
}

impl Paths {
    /// Decides the paths of a window of `T` on transport `t`.
    pub(crate) fn decide<T: Element>(
        t: &dyn Transport,
        mode: AccumulateMode,
        info: &WindowInfo,
    ) -> Result<Paths> {
        let caps = t.caps();
        let has = |op, kind| caps.atomics.offers(op, T::DATATYPE, kind);
        Self::decide_with::<T>(&has, &caps.name, !caps.native_atomics, mode, info)
    }

    /// The decision, given what the provider offers (`has(fi_op, kind)`)
    /// and whether its atomics are emulated by the target's CPU anyway.
    fn decide_with<T: Element>(
        has: &dyn Fn(AtomicOp, AtomicKind) -> bool,
        provider: &str,
        emulated: bool,
        mode: AccumulateMode,
        info: &WindowInfo,
    ) -> Result<Paths> {
        let mut all = 0u64;
        let mut missing = 0u64;
        let mut names = Vec::new();
        for (op, kinds, name) in defined::<T>() {
            let bit = 1u64 << op_bit(op);
            all |= bit;
            if !kinds.iter().all(|k| has(op, *k)) {
                missing |= bit;
                names.push(name);
            }
        }
        let software = match mode {
            AccumulateMode::Software => all,
            AccumulateMode::Hardware if missing != 0 => {
                return Err(Error::Unsupported(format!(
                "ONESIDED_ACCUMULATE=hardware, but provider {provider} has no atomics for {} on {}",
                names.join(" "),
                T::NAME
            )))
            }
            AccumulateMode::Hardware => 0,
            // The provider's atomics run in the target's CPU anyway (tcp,
            // sockets): the software path does the same work, and its
            // accumulates are batched (issue 13: 1024 accumulates + flush
            // cost ~90 µs each through tcp's emulated atomics, ~1 µs
            // batched).
            AccumulateMode::Auto if emulated => all,
            AccumulateMode::Auto if info.same_op => missing,
            AccumulateMode::Auto if missing != 0 => all,
            AccumulateMode::Auto => 0,
        };
        Ok(Paths {
            software,
            defined: all,
        })
    }

    /// Every operation defined on `T` in software: dynamic windows on a
    /// back-end where a remote access error breaks the connection (their
    /// puts and gets travel as messages too, `Window::dynamic_messages`).
    pub(crate) fn all_software<T: Element>() -> Paths {
        let all = defined::<T>()
            .into_iter()
            .fold(0u64, |m, (op, _, _)| m | 1u64 << op_bit(op));
        Paths {
            software: all,
            defined: all,
        }
    }

    /// Every operation on the provider (dynamic windows elsewhere).
    pub(crate) fn provider_only() -> Paths {
        Paths {
            software: 0,
            defined: 0,
        }
    }

    /// Whether `op` runs on the software path.
    pub(crate) fn software(&self, op: AtomicOp) -> bool {
        self.software & (1 << op_bit(op)) != 0
    }

    /// The descriptor flag bits (0–7) recording the decision, so that ranks
    /// that decided differently find out on first access: bits 0–1 say
    /// none / all / some operations run in software, bits 2–7 fold the
    /// per-operation mask.
    pub(crate) fn flags(&self) -> u64 {
        let m = self.software;
        let class = match m {
            0 => 0,
            _ if m == self.defined => 1,
            _ => 2,
        };
        let fold = (m ^ (m >> 6) ^ (m >> 12)) & 0x3f;
        class | (fold << 2)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_prod(op: AtomicOp, _: AtomicKind) -> bool {
        op != AtomicOp::Prod
    }

    #[test]
    fn hints_parse() {
        assert_eq!(WindowInfo::new().order(), AtomicOrder::ALL);
        let i = WindowInfo::new().accumulate_ordering("raw, waw").unwrap();
        assert_eq!(i.order(), AtomicOrder::RAW | AtomicOrder::WAW);
        let none = WindowInfo::new().accumulate_ordering("none").unwrap();
        assert!(!none.ordered());
        for bad in ["", "raw,", "RAW", "none,rar", "x"] {
            assert!(
                WindowInfo::new().accumulate_ordering(bad).is_err(),
                "{bad:?}"
            );
        }
        assert!(WindowInfo::new().accumulate_ops("same_op").is_ok());
        assert!(WindowInfo::new().accumulate_ops("same").is_err());
    }

    #[test]
    fn string_keys_round_trip() {
        let i = WindowInfo::new();
        for key in INFO_KEYS {
            let v = i.get(key).unwrap();
            assert_eq!(i.set(key, &v).unwrap(), i, "{key}={v}");
        }
        assert_eq!(i.get("accumulate_ordering").unwrap(), "rar,raw,war,waw");
        let j = i
            .set("accumulate_ordering", "none")
            .unwrap()
            .set("no_locks", "true")
            .unwrap()
            .set("same_size", "true")
            .unwrap()
            .set("mpi_unknown_hint", "whatever")
            .unwrap();
        assert!(j.locks_disabled() && j.sizes_equal() && !j.ordered());
        assert_eq!(j.get("accumulate_ordering").unwrap(), "none");
        assert!(j.get("mpi_unknown_hint").is_none());
        assert!(i.set("no_locks", "yes").is_err());
        assert!(i.set("accumulate_ops", "x").is_err());
    }

    #[test]
    fn one_missing_pair_moves_the_whole_window_unless_same_op() {
        let def = WindowInfo::new();
        let same_op = WindowInfo::new().accumulate_ops("same_op").unwrap();
        let auto = AccumulateMode::Auto;
        let all_hw = Paths::decide_with::<f64>(&|_, _| true, "p", false, auto, &def).unwrap();
        assert_eq!(all_hw.software, 0);
        assert_eq!(all_hw.flags(), 0);
        // Default hint: PROD missing puts every f64 op in software.
        let p = Paths::decide_with::<f64>(&no_prod, "p", false, auto, &def).unwrap();
        for op in [
            AtomicOp::Sum,
            AtomicOp::Prod,
            AtomicOp::Read,
            AtomicOp::Cswap,
        ] {
            assert!(p.software(op), "{op}");
        }
        assert_eq!(p.flags() & 3, 1);
        // same_op: only PROD.
        let q = Paths::decide_with::<f64>(&no_prod, "p", false, auto, &same_op).unwrap();
        assert!(q.software(AtomicOp::Prod) && !q.software(AtomicOp::Sum));
        assert!(!q.software(AtomicOp::Read));
        assert_eq!(q.flags() & 3, 2);
        assert_ne!(p.flags(), q.flags());
        // hardware refuses, naming the op; software takes everything.
        let e = Paths::decide_with::<f64>(&no_prod, "p", false, AccumulateMode::Hardware, &def)
            .unwrap_err()
            .to_string();
        assert!(e.contains("PROD") && e.contains("f64"), "{e}");
        let s =
            Paths::decide_with::<i8>(&|_, _| true, "p", false, AccumulateMode::Software, &def).unwrap();
        assert!(s.software(AtomicOp::Bxor) && s.software(AtomicOp::Cswap));
        // Bitwise ops are not defined on floats: never part of their mask.
        let f =
            Paths::decide_with::<f32>(&|_, _| true, "p", false, AccumulateMode::Software, &def).unwrap();
        assert!(!f.software(AtomicOp::Bxor));
        // Emulated atomics (tcp, sockets): everything in software by default,
        // the provider still when asked for.
        let e = Paths::decide_with::<f64>(&|_, _| true, "p", true, auto, &def).unwrap();
        assert_eq!(e.software, e.defined);
        let h = Paths::decide_with::<f64>(&|_, _| true, "p", true, AccumulateMode::Hardware, &def)
            .unwrap();
        assert_eq!(h.software, 0);
        // A missing integer-only op does not matter to a float window.
        let no_band = |op: AtomicOp, _: AtomicKind| op != AtomicOp::Band;
        assert_eq!(
            Paths::decide_with::<f32>(&no_band, "p", false, auto, &def)
                .unwrap()
                .software,
            0
        );
    }
}
