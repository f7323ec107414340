//! The public API: [`World`], [`Window`], [`Request`].

pub mod buffer;
pub mod element;
pub mod group;
pub mod layout;
mod node;
pub mod op;
pub mod request;
mod collective;
mod threads;
pub mod window;
pub mod world;
