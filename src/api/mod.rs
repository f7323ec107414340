//! The public API: [`World`], [`Window`], [`Request`].

pub mod element;
pub mod op;
pub mod request;
pub mod window;
pub mod world;
