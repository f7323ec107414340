//! onesided: MPI-3 one-sided communication (RMA) without MPI.
//!
//! Layers, data flowing downward (see `docs/architecture.md`):
//! `api` (World, Window, Request) → `epoch` (synchronization state machines)
//! → `protocols` (software accumulate, lock queue, aggregation, PSCW
//! notifications) → `meta` (window metadata: directory, remote-key cache,
//! peers) → `transport` (the seam: trait, capabilities; back-ends `ofi/`)
//! → `sys/`. `bootstrap` (launcher, PMI, key-value exchange) and
//! `progress` sit beside.

pub mod bootstrap;
pub mod error;
pub mod topology;

pub use error::{Error, Result};
pub mod api;
pub mod config;
pub mod epoch;
pub mod meta;
pub mod progress;
pub mod protocols;
pub mod transport;

pub use api::element::{Element, Integer};
pub use api::op::{AnyOp, FetchOpFor, IntOp, NoOp, Op, OpFor};
pub use api::request::Request;
pub use api::window::{Window, WindowInfo, WindowStats};
pub use api::world::{World, WorldStats};
pub use epoch::{Assert, LockType};
