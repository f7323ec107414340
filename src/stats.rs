//! Counters a program can read: [`World::stats`](crate::World::stats) and
//! [`Window::stats`](crate::Window::stats).
//!
//! Every struct here is `#[non_exhaustive]`: fields are added as the library
//! learns to count more, so read them by name and do not construct them.
//! The values are snapshots; what each counts is documented on the field.

pub use crate::api::window::WindowStats;
pub use crate::api::world::WorldStats;
pub use crate::bootstrap::BootstrapStats;
pub use crate::meta::mappings::ShmStats;
pub use crate::meta::rkey_cache::CacheStats;
pub use crate::protocols::aggregation::OpStats;
pub use crate::protocols::soft_lock::target::LockStats;
pub use crate::transport::am::AmStats;
pub use crate::transport::TransportStats;
