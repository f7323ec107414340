//! Post/start/complete/wait notifications: posts travel as one-way active
//! messages (`origin.rs`) counted per (window, origin) at the receiving
//! side (`target.rs`).

pub mod origin;
pub mod ring;
pub mod target;

pub use origin::Origin;
