//! Window metadata without O(P) state.
//!
//! Every process registers one small *control region* at start-up (see
//! [`directory`]): a flush word, the barrier flags and a fixed array of
//! window descriptors. It publishes the region's address and key once, next
//! to its endpoint address, in the bootstrap key-value store ([`peers`]).
//! An origin that first touches rank `r` fetches `r`'s card from the store,
//! inserts `r` into the address vector, and reads the descriptor of the
//! window it needs with one RMA read into a bounded LRU ([`rkey_cache`]).
//! Peers never touched cost nothing. Windows whose every rank passed the
//! same size, type and flags need not even that read ([`uniform`]). The
//! protocol is in `docs/directory.md`.

pub mod attach;
pub mod directory;
pub mod dirty;
pub mod mappings;
pub mod peers;
pub mod rkey_cache;
pub mod targets;
pub mod uniform;
pub mod valid_ops;
