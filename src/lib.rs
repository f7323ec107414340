//! onesided: MPI-3 one-sided communication (RMA) without MPI.
//!
//! Layers, data flowing downward (see `docs/architecture.md`):
//! `api` (World, Window, Request) → `epoch` (synchronization state machines)
//! → `protocols` (software accumulate, lock queue, aggregation, PSCW
//! notifications) → `meta` (window metadata: directory, remote-key cache,
//! peers) → `transport` (the seam: trait, capabilities; back-ends `ofi/`,
//! `verbs/`, `loopback/`)
//! → `sys/`. `bootstrap` (launcher, PMI, key-value exchange) and
//! `progress` sit beside.

// The internal layers. They are not part of the public API: without the
// `unstable` feature they are private to the crate, so safe code outside it
// cannot reach registries, raw transports or wire formats. The feature
// exposes them, unversioned, to the crate's own benchmark and diagnostic
// binaries and to its tests; nothing about them is stable.
//
// Dead-code analysis is meaningful in the build with `unstable` (what
// `cargo build/clippy --all-targets` and the tests compile, since the tests
// enable the feature): there every consumer is visible. Without it, items
// that only the diagnostic binaries and tests use look dead (29 warnings
// measured: test helpers such as `len`/`is_empty`, constants the
// benchmark reads, libfabric name tables for onesided-info), hence the
// allow below; code only a diagnostic binary needs is not compiled at all
// without the feature (the ofi provider survey of onesided-info).
#![cfg_attr(not(feature = "unstable"), allow(dead_code, unused_imports))]
// `unsafe` lives in `sys/`, the back-ends and the few transport modules
// that own memory peers write (see `scripts/check-unsafe.sh`, run by CI);
// everywhere else it is an error, and every unsafe block says why it is
// sound.
#![deny(unsafe_code)]
#![warn(clippy::undocumented_unsafe_blocks)]

macro_rules! internal {
    ($($(#[$meta:meta])* mod $name:ident;)*) => {$(
        #[cfg(feature = "unstable")]
        $(#[$meta])*
        pub mod $name;
        #[cfg(not(feature = "unstable"))]
        $(#[$meta])*
        pub(crate) mod $name;
    )*};
}

internal! {
    mod api;
    mod bootstrap;
    mod config;
    mod epoch;
    mod meta;
    mod progress;
    mod protocols;
    mod topology;
    mod transport;
}
pub mod error;
#[cfg(test)]
mod fuzz;
pub mod launcher;
pub mod stats;

pub use api::buffer::Buffer;
pub use api::element::{Element, Integer};
pub use api::group::{Comm, CommRef, Group};
pub use api::layout::Layout;
pub use api::op::{AnyOp, FetchOpFor, IntOp, NoOp, Op, OpFor};
pub use api::request::Request;
pub use api::window::{
    Cmp, Flavor, MemoryModel, Scope, ScopedRequest, SharedSegment, SignalOp, Window, WindowInfo,
    WindowMemory, INFO_KEYS,
};
pub use api::world::{World, WorldBuilder};
pub use config::{Backend, ProgressMode};
pub use epoch::{Assert, LockType};
pub use error::{Error, ErrorKind, Result};
pub use stats::{WindowStats, WorldStats};

// The thread-safety guarantees stated on `World` and `Window`, checked at
// compile time.
const _: () = {
    fn send_sync<T: Send + Sync>() {}
    fn check() {
        send_sync::<World>();
        send_sync::<Window<'static, u64>>();
        send_sync::<Request<u64>>();
        send_sync::<Error>();
    }
    let _ = check;
};
