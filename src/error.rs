//! The one error type of the library.
//!
//! Every error says *what* went wrong and *where* (window, rank, offset,
//! length, provider call), so that a user reading a log line from rank 17 of a
//! 4096-rank job can act on it without a debugger.

use std::fmt;

fn out_of_window(
    window: u64,
    rank: usize,
    offset: usize,
    len: usize,
    window_len: usize,
    unattached: Option<(u64, u64)>,
) -> String {
    match unattached {
        Some((addr, bytes)) => format!(
            "window {window}: access to rank {rank} at element offset {offset}, length {len}: \
             rank {rank} has no region attached at address {addr:#x} covering {bytes} bytes"
        ),
        None => format!(
            "window {window}: access to rank {rank} at element offset {offset}, length {len} \
             is outside the target window of {window_len} elements"
        ),
    }
}

/// Result alias used throughout the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in onesided.
///
/// Match on [`Error::kind`] to decide what to do (retry, report a dead
/// peer, fix the call); [`Error::errno`] and [`Error::rank`] give the
/// errno of a failed back-end or OS call and the rank the error is about.
/// The variants carry the details for the message and may gain siblings
/// (the enum is `#[non_exhaustive]`) and fields (each struct variant is
/// `#[non_exhaustive]`: match them with `..`) in later releases; errors
/// are made by the library, not by callers.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A call into the network back-end failed. `backend` names the
    /// back-end as `ONESIDED_BACKEND` spells it ("ofi" for libfabric),
    /// `call` the function, `context` what we were doing, `code` the
    /// positive errno / `FI_E*` value (0 when the back-end reported only a
    /// text) and `message` its text.
    #[error("{backend} {call} failed while {context}: {message} (error {code})")]
    #[non_exhaustive]
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
    #[non_exhaustive]
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
    #[non_exhaustive]
    Bootstrap { via: &'static str, message: String },

    /// A peer sent something that does not parse or does not validate.
    #[error("malformed message from {peer}: {message}")]
    #[non_exhaustive]
    Protocol { peer: String, message: String },

    /// A target range does not lie inside the target's window (of a
    /// dynamic window: inside no region the target has attached).
    #[error("{}", out_of_window(*.window, *.rank, *.offset, *.len, *.window_len, *.unattached))]
    #[non_exhaustive]
    OutOfWindow {
        window: u64,
        rank: usize,
        offset: usize,
        len: usize,
        window_len: usize,
        /// Dynamic windows: the address and byte length that no attached
        /// region of `rank` covers (`window_len` is then 0).
        unattached: Option<(u64, u64)>,
    },

    /// A rank outside `0..size`.
    #[error("window {window}: rank {rank} is not in the job (size {size})")]
    #[non_exhaustive]
    InvalidRank {
        window: u64,
        rank: usize,
        size: usize,
    },

    /// A call that is not allowed in the current synchronization epoch.
    #[error("window {window}: {op} is not allowed {state}")]
    #[non_exhaustive]
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
    /// `rank` is the peer that was awaited, where one is known
    /// ([`Error::rank`]).
    #[error("timed out after {seconds} s while {what}")]
    #[non_exhaustive]
    Timeout {
        what: String,
        seconds: u64,
        rank: Option<usize>,
    },

    /// A bounded resource (window directory, cache, ...) is exhausted.
    #[error("resource exhausted: {0}")]
    Exhausted(String),

    /// A configuration variable has a value we do not understand.
    #[error("environment variable {var}={value}: {message}")]
    #[non_exhaustive]
    Config {
        var: &'static str,
        value: String,
        message: String,
    },

    /// An operating-system call failed.
    #[error("{context}: {source}")]
    #[non_exhaustive]
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

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ErrorKind::Timeout => "timeout",
            ErrorKind::PeerUnreachable => "peer unreachable",
            ErrorKind::OutOfWindow => "out of window",
            ErrorKind::EpochMisuse => "epoch misuse",
            ErrorKind::InvalidArgument => "invalid argument",
            ErrorKind::ResourceExhausted => "resource exhausted",
            ErrorKind::Unsupported => "unsupported",
            ErrorKind::Backend => "back-end error",
            ErrorKind::Bootstrap => "bootstrap error",
            ErrorKind::Malformed => "malformed message",
            ErrorKind::Config => "configuration error",
            ErrorKind::Io => "I/O error",
        })
    }
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
            Error::Timeout { rank, .. } => *rank,
            _ => None,
        }
    }

    /// A timeout of `seconds` while `what` (no particular peer awaited).
    pub(crate) fn timeout(what: impl Into<String>, seconds: u64) -> Self {
        Error::Timeout {
            what: what.into(),
            seconds,
            rank: None,
        }
    }

    /// Names `rank` as the peer awaited, if this is a timeout that names
    /// none yet (other errors are returned unchanged).
    pub(crate) fn awaiting(self, peer: usize) -> Self {
        match self {
            Error::Timeout {
                what,
                seconds,
                rank: None,
            } => Error::Timeout {
                what,
                seconds,
                rank: Some(peer),
            },
            other => other,
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

    /// Builds an [`Error::PeerUnreachable`]: `rank` is the peer, `what`
    /// what this process was doing, `message` what showed it was gone.
    pub(crate) fn peer_unreachable(
        rank: usize,
        what: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        Error::PeerUnreachable {
            rank,
            what: what.into(),
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

    /// One error of every variant (the `match` below stops compiling when a
    /// variant is added, so the table grows with the enum) with the kind,
    /// errno and rank a caller reads from it.
    fn every_variant() -> Vec<(Error, ErrorKind, Option<i32>, Option<usize>)> {
        let all = vec![
            (
                Error::backend("ofi", "fi_mr_reg", "registering", 12, "no memory"),
                ErrorKind::Backend,
                Some(12),
                None,
            ),
            (
                Error::peer_unreachable(5, "putting to rank 5", "connection reset"),
                ErrorKind::PeerUnreachable,
                None,
                Some(5),
            ),
            (
                Error::NoProvider("no tcp".into()),
                ErrorKind::Backend,
                None,
                None,
            ),
            (
                Error::bootstrap("pmi1", "no PMI_FD"),
                ErrorKind::Bootstrap,
                None,
                None,
            ),
            (
                Error::Protocol {
                    peer: "rank 2".into(),
                    message: "short header".into(),
                },
                ErrorKind::Malformed,
                None,
                None,
            ),
            (
                Error::OutOfWindow {
                    window: 1,
                    rank: 4,
                    offset: 10,
                    len: 2,
                    window_len: 11,
                    unattached: None,
                },
                ErrorKind::OutOfWindow,
                None,
                Some(4),
            ),
            (
                Error::InvalidRank {
                    window: 1,
                    rank: 9,
                    size: 4,
                },
                ErrorKind::InvalidArgument,
                None,
                Some(9),
            ),
            (
                Error::Epoch {
                    window: 1,
                    op: "put",
                    state: "outside an epoch".into(),
                },
                ErrorKind::EpochMisuse,
                None,
                None,
            ),
            (
                Error::InvalidArgument("lengths differ".into()),
                ErrorKind::InvalidArgument,
                None,
                None,
            ),
            (
                Error::Unsupported("max on bool".into()),
                ErrorKind::Unsupported,
                None,
                None,
            ),
            (
                Error::timeout("waiting for rank 3", 2).awaiting(3),
                ErrorKind::Timeout,
                None,
                Some(3),
            ),
            (
                Error::Exhausted("windows".into()),
                ErrorKind::ResourceExhausted,
                None,
                None,
            ),
            (
                Error::Config {
                    var: "ONESIDED_TIMEOUT",
                    value: "soon".into(),
                    message: "not a number of seconds".into(),
                },
                ErrorKind::Config,
                None,
                None,
            ),
            (
                Error::io("opening", std::io::Error::from_raw_os_error(2)),
                ErrorKind::Io,
                Some(2),
                None,
            ),
        ];
        for (e, ..) in &all {
            match e {
                Error::Backend { .. }
                | Error::PeerUnreachable { .. }
                | Error::NoProvider(_)
                | Error::Bootstrap { .. }
                | Error::Protocol { .. }
                | Error::OutOfWindow { .. }
                | Error::InvalidRank { .. }
                | Error::Epoch { .. }
                | Error::InvalidArgument(_)
                | Error::Unsupported(_)
                | Error::Timeout { .. }
                | Error::Exhausted(_)
                | Error::Config { .. }
                | Error::Io { .. } => {}
            }
        }
        all
    }

    #[test]
    fn every_variant_has_the_kind_errno_and_rank_callers_match_on() {
        let all = every_variant();
        assert_eq!(all.len(), 14, "one row per variant");
        for (e, kind, errno, rank) in all {
            assert_eq!((e.kind(), e.errno(), e.rank()), (kind, errno, rank), "{e}");
            assert!(!e.to_string().is_empty());
        }
    }

    #[test]
    fn a_backend_errno_that_means_the_peer_is_gone_is_peer_unreachable() {
        for code in PEER_GONE {
            let e = Error::backend("ofi", "fi_write", "putting to rank 1", code, "gone");
            assert_eq!(
                (e.kind(), e.errno()),
                (ErrorKind::PeerUnreachable, Some(code))
            );
        }
        // A back-end failure reported only as text has no errno.
        let text = Error::backend("ofi", "endpoint", "using it", 0, "failed earlier");
        assert_eq!((text.kind(), text.errno()), (ErrorKind::Backend, None));
    }

    #[test]
    fn messages_name_what_and_where() {
        let e = Error::backend("ofi", "fi_write", "putting 8 bytes to rank 1", 5, "I/O");
        assert_eq!(
            e.to_string(),
            "ofi fi_write failed while putting 8 bytes to rank 1: I/O (error 5)"
        );
        let e = Error::peer_unreachable(3, "waiting for a lock reply", "connection reset");
        assert_eq!(
            e.to_string(),
            "rank 3 is unreachable while waiting for a lock reply: connection reset"
        );
        assert_eq!(ErrorKind::PeerUnreachable.to_string(), "peer unreachable");
    }
}
