//! The system PMIx client library: raw bindings (`ffi`, bindgen over
//! `pmix.h`) and the small safe [`Client`] onesided's bootstrap uses — init,
//! put, commit, fence without data collection, get, finalize.
//!
//! Built without PMIx (no `libpmix-dev` at build time, or
//! `PMIX_SYS_DISABLE=1`), [`AVAILABLE`] is false and every [`Client`] call
//! fails with "PMIx support not built" and the reason ([`BUILD`]).
//!
//! All `unsafe` of the PMIx bootstrap lives here: strings handed to PMIx are
//! checked for interior NULs and length; strings PMIx hands back are copied
//! out with a length bound and checked for UTF-8; values PMIx allocated are
//! released with `PMIx_Value_destruct` + `free`, as `PMIX_VALUE_RELEASE`
//! does.

use std::fmt;

/// Whether this build has PMIx support.
pub const AVAILABLE: bool = cfg!(pmix);

/// What was built: `PMIx <version> (<library dir>)`, or `not built: <why>`.
pub const BUILD: &str = env!("PMIX_SYS_BUILT");

/// The raw bindings (only with PMIx).
#[cfg(pmix)]
#[allow(
    non_upper_case_globals,
    non_camel_case_types,
    non_snake_case,
    dead_code,
    clippy::all
)]
pub mod ffi {
    include!(concat!(env!("OUT_DIR"), "/bindings.rs"));
}

/// A failed PMIx call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    /// The PMIx function (or "build" when PMIx support is missing).
    pub call: &'static str,
    /// The `pmix_status_t` (0 when the error is ours, e.g. a bad string).
    pub status: i32,
    /// `PMIx_Error_string` of the status, or our explanation.
    pub message: String,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.status != 0 {
            write!(
                f,
                "{} failed: {} ({})",
                self.call, self.message, self.status
            )
        } else {
            write!(f, "{}: {}", self.call, self.message)
        }
    }
}

impl std::error::Error for Error {}

/// `PMIX_RANK_WILDCARD`: job-level information.
pub const RANK_WILDCARD: u32 = u32::MAX - 1;
/// Longest key PMIx stores (`PMIX_MAX_KEYLEN`).
pub const MAX_KEYLEN: usize = 511;
/// `PMIX_ERR_NOT_FOUND`.
pub const ERR_NOT_FOUND: i32 = -46;
/// `PMIX_ERR_TIMEOUT`.
pub const ERR_TIMEOUT: i32 = -24;

#[cfg(pmix)]
mod client;
#[cfg(not(pmix))]
mod stub;

#[cfg(pmix)]
pub use client::Client;
#[cfg(not(pmix))]
pub use stub::Client;

/// Checks a key or value we hand to PMIx: no NUL, bounded length.
fn c_string(what: &str, s: &str, max: usize) -> Result<std::ffi::CString, Error> {
    if s.len() > max {
        return Err(Error {
            call: "pmix-sys",
            status: 0,
            message: format!("{what} of {} bytes exceeds {max}", s.len()),
        });
    }
    std::ffi::CString::new(s).map_err(|_| Error {
        call: "pmix-sys",
        status: 0,
        message: format!("{what} contains a NUL byte"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_are_checked() {
        assert!(c_string("key", "a\0b", 10).is_err());
        assert!(c_string("key", "abcdef", 3).is_err());
        assert_eq!(c_string("key", "abc", 3).unwrap().as_bytes(), b"abc");
    }

    #[test]
    fn build_is_described() {
        if AVAILABLE {
            assert!(BUILD.starts_with("PMIx "), "{BUILD}");
        } else {
            assert!(BUILD.starts_with("not built"), "{BUILD}");
            let e = Client::init().unwrap_err().to_string();
            assert!(e.contains("PMIx support not built"), "{e}");
        }
    }
}
