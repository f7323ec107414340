//! The one error type of the library.
//!
//! Every error says *what* went wrong and *where* (window, rank, offset,
//! length, provider call), so that a user reading a log line from rank 17 of a
//! 4096-rank job can act on it without a debugger.

use std::fmt;

/// Result alias used throughout the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in onesided.
///
/// Match on [`Error::kind`] to decide what to do (retry, report a dead
/// peer, fix the call); the variants carry the details for the message and
/// may gain fields or siblings in later releases (`#[non_exhaustive]`).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A call into the network back-end failed. `backend` names the
    /// library ("libfabric", "ibverbs"), `call` the function, `context`
    /// what we were doing, `code` the positive errno / `FI_E*` value (0
    /// when the back-end reported only a text) and `message` its text.
    #[error("{backend} {call} failed while {context}: {message} (error {code})")]
    Backend {
        backend: &'static str,
        call: &'static str,
        context: String,
        code: i32,
        message: String,
    },

    /// A peer is gone or cannot be reached: it exited (or was killed), or
    /// the network between us failed. `rank` is the peer.
    #[error("rank {rank} is unreachable while {what}: {message}")]
    PeerUnreachable {
        rank: usize,
        what: String,
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

/// What kind of failure an [`Error`] is: the part of an error a caller
/// matches on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// A blocking call did not finish within `ONESIDED_TIMEOUT` (often: a
    /// peer it waits for is dead or stuck).
    Timeout,
    /// A peer is gone or unreachable (its rank is in [`Error::rank`]).
    PeerUnreachable,
    /// An access outside the target's window (nothing was transferred).
    OutOfWindow,
    /// A call not allowed in the current synchronization epoch.
    EpochMisuse,
    /// A bad argument: rank outside the job, buffer lengths that differ,
    /// an operation the element type does not support, ...
    InvalidArgument,
    /// A bounded resource (windows, caches, credits) is exhausted.
    ResourceExhausted,
    /// Not supported by this back-end or release.
    Unsupported,
    /// The network back-end failed ([`Error::errno`] has its code).
    Backend,
    /// Starting the job failed (launcher, PMI, key-value exchange).
    Bootstrap,
    /// A peer sent a message that does not parse or validate.
    Malformed,
    /// A configuration variable has a value that is not understood.
    Config,
    /// An operating-system call failed.
    Io,
}

/// errno values that mean the peer (or the path to it) is gone.
const PEER_GONE: [i32; 6] = [
    nix::errno::Errno::ECONNREFUSED as i32,
    nix::errno::Errno::ECONNRESET as i32,
    nix::errno::Errno::ENOTCONN as i32,
    nix::errno::Errno::EPIPE as i32,
    nix::errno::Errno::EHOSTUNREACH as i32,
    nix::errno::Errno::ETIMEDOUT as i32,
];

impl Error {
    /// What kind of failure this is.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Backend { code, .. } if PEER_GONE.contains(code) => ErrorKind::PeerUnreachable,
            Error::Backend { .. } | Error::NoProvider(_) => ErrorKind::Backend,
            Error::PeerUnreachable { .. } => ErrorKind::PeerUnreachable,
            Error::Bootstrap { .. } => ErrorKind::Bootstrap,
            Error::Protocol { .. } => ErrorKind::Malformed,
            Error::OutOfWindow { .. } => ErrorKind::OutOfWindow,
            Error::InvalidRank { .. } | Error::InvalidArgument(_) => ErrorKind::InvalidArgument,
            Error::Epoch { .. } => ErrorKind::EpochMisuse,
            Error::Unsupported(_) => ErrorKind::Unsupported,
            Error::Timeout { .. } => ErrorKind::Timeout,
            Error::Exhausted(_) => ErrorKind::ResourceExhausted,
            Error::Config { .. } => ErrorKind::Config,
            Error::Io { .. } => ErrorKind::Io,
        }
    }

    /// The errno (or `FI_E*`) value of a back-end or OS failure, if known.
    pub fn errno(&self) -> Option<i32> {
        match self {
            Error::Backend { code, .. } if *code != 0 => Some(*code),
            Error::Io { source, .. } => source.raw_os_error(),
            _ => None,
        }
    }

    /// The rank the error is about, where one is known (the target of an
    /// out-of-window access, an unreachable peer, a rank outside the job).
    pub fn rank(&self) -> Option<usize> {
        match self {
            Error::OutOfWindow { rank, .. }
            | Error::InvalidRank { rank, .. }
            | Error::PeerUnreachable { rank, .. } => Some(*rank),
            _ => None,
        }
    }

    /// Builds an [`Error::Backend`].
    pub(crate) fn backend(
        backend: &'static str,
        call: &'static str,
        context: impl Into<String>,
        code: i32,
        message: impl Into<String>,
    ) -> Self {
        Error::Backend {
            backend,
            call,
            context: context.into(),
            code,
            message: message.into(),
        }
    }

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_callers_match_on() {
        let gone = Error::backend("libfabric", "fi_write", "putting", 107, "not connected");
        assert_eq!(gone.kind(), ErrorKind::PeerUnreachable);
        assert_eq!(gone.errno(), Some(107));
        let other = Error::backend("libfabric", "fi_mr_reg", "registering", 12, "no memory");
        assert_eq!(other.kind(), ErrorKind::Backend);
        let t = Error::Timeout {
            what: "waiting for rank 3".into(),
            seconds: 2,
        };
        assert_eq!(
            (t.kind(), t.errno(), t.rank()),
            (ErrorKind::Timeout, None, None)
        );
        let oow = Error::OutOfWindow {
            window: 1,
            rank: 4,
            offset: 10,
            len: 2,
            window_len: 11,
        };
        assert_eq!((oow.kind(), oow.rank()), (ErrorKind::OutOfWindow, Some(4)));
        let epoch = Error::Epoch {
            window: 1,
            op: "put",
            state: "outside an epoch".into(),
        };
        assert_eq!(epoch.kind(), ErrorKind::EpochMisuse);
        assert_eq!(
            Error::Exhausted("windows".into()).kind(),
            ErrorKind::ResourceExhausted
        );
        let io = Error::io("opening", std::io::Error::from_raw_os_error(2));
        assert_eq!((io.kind(), io.errno()), (ErrorKind::Io, Some(2)));
    }
}
