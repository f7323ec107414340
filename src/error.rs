//! The one error type of the library.
//!
//! Every error says *what* went wrong and *where* (window, rank, offset,
//! length, provider call), so that a user reading a log line from rank 17 of a
//! 4096-rank job can act on it without a debugger.

use std::fmt;

/// Result alias used throughout the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in onesided.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A libfabric call failed. `call` names the function, `context` says what
    /// we were doing, `code` is the positive `FI_E*`/errno value and `message`
    /// the text of `fi_strerror`.
    #[error("libfabric {call} failed while {context}: {message} (error {code})")]
    Fabric {
        call: &'static str,
        context: String,
        code: i32,
        message: String,
    },

    /// No libfabric provider offers what onesided needs.
    #[error("no usable libfabric provider: {0}")]
    NoProvider(String),

    /// Starting the job failed: launcher, PMI or key-value exchange.
    #[error("bootstrap ({via}): {message}")]
    Bootstrap { via: &'static str, message: String },

    /// A peer sent something that does not parse or does not validate.
    #[error("malformed message from {peer}: {message}")]
    Protocol { peer: String, message: String },

    /// A target range does not lie inside the target's window.
    #[error(
        "window {window}: access to rank {rank} at element offset {offset}, length {len} \
         is outside the target window of {window_len} elements"
    )]
    OutOfWindow {
        window: u64,
        rank: usize,
        offset: usize,
        len: usize,
        window_len: usize,
    },

    /// A rank outside `0..size`.
    #[error("window {window}: rank {rank} is not in the job (size {size})")]
    InvalidRank {
        window: u64,
        rank: usize,
        size: usize,
    },

    /// A call that is not allowed in the current synchronization epoch.
    #[error("window {window}: {op} is not allowed {state}")]
    Epoch {
        window: u64,
        op: &'static str,
        state: String,
    },

    /// A local or origin buffer does not match what the call needs.
    #[error("{0}")]
    InvalidArgument(String),

    /// The provider (or this release) cannot do what was asked, e.g. an
    /// accumulate operation the NIC does not offer for the element type.
    #[error("not supported: {0}")]
    Unsupported(String),

    /// An operation did not complete in the allowed time (`ONESIDED_TIMEOUT`).
    #[error("timed out after {seconds} s while {what}")]
    Timeout { what: String, seconds: u64 },

    /// A bounded resource (window directory, cache, ...) is exhausted.
    #[error("resource exhausted: {0}")]
    Exhausted(String),

    /// A configuration variable has a value we do not understand.
    #[error("environment variable {var}={value}: {message}")]
    Config {
        var: &'static str,
        value: String,
        message: String,
    },

    /// An operating-system call failed.
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
}

impl Error {
    /// Builds a [`Error::Bootstrap`].
    pub fn bootstrap(via: &'static str, message: impl fmt::Display) -> Self {
        Error::Bootstrap {
            via,
            message: message.to_string(),
        }
    }

    /// Builds a [`Error::Io`] with context.
    pub fn io(context: impl fmt::Display, source: std::io::Error) -> Self {
        Error::Io {
            context: context.to_string(),
            source,
        }
    }
}
