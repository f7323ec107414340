//! Post/start/complete/wait notifications: posts travel as one-way active
//! messages counted per (window, origin) at the receiving side
//! (`target.rs`).

pub mod target;
