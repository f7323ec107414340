//! onesided: MPI-3 one-sided communication (RMA) without MPI.
//!
//! Layers, data flowing downward (see `docs/architecture.md`):
//! `api` (World, Window, Request) → `epoch` (synchronization state machines)
//! → `window` (directory, remote-key cache) → `transport` (trait; `ofi/`
//! back-end) → `libfabric-sys`. `bootstrap` (launcher, PMI, key-value
//! exchange) and `progress` sit beside.

pub mod bootstrap;
pub mod error;
pub mod topology;

pub use error::{Error, Result};
pub mod api;
pub mod config;
pub mod epoch;
pub mod ops;
pub mod progress;
pub mod transport;
pub mod window;

pub use api::element::{Element, Integer};
pub use api::op::{AnyOp, FetchOpFor, IntOp, NoOp, Op, OpFor};
pub use api::request::Request;
pub use api::window::{Window, WindowInfo, WindowStats};
pub use api::world::{World, WorldStats};
pub use epoch::{Assert, LockType};
