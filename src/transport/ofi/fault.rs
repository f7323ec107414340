//! Turning libfabric return codes into [`Error`]s that say what and where.

use std::ffi::CStr;

use libfabric_sys as fi;

use crate::error::Error;

/// Text of `fi_strerror` for a positive error code.
pub fn strerror(code: i32) -> String {
    // SAFETY: fi_strerror returns a pointer to a static, NUL-terminated string
    // for any input value.
    let ptr = unsafe { fi::fi_strerror(code) };
    if ptr.is_null() {
        return format!("unknown error {code}");
    }
    // SAFETY: non-null, static, NUL-terminated (see above).
    unsafe { CStr::from_ptr(ptr) }
        .to_string_lossy()
        .into_owned()
}

/// Builds an [`Error::Backend`] from a negative libfabric return value.
pub fn fabric_error(call: &'static str, rc: isize, context: impl Into<String>) -> Error {
    let code = i32::try_from(rc.unsigned_abs()).unwrap_or(i32::MAX);
    Error::backend("ofi", call, context, code, strerror(code))
}

/// `Ok(())` for `rc == 0`, the error otherwise.
pub fn check(call: &'static str, rc: i32, context: impl FnOnce() -> String) -> Result<(), Error> {
    if rc == 0 {
        Ok(())
    } else {
        Err(fabric_error(call, rc as isize, context()))
    }
}

/// `-FI_EAGAIN` as the negative value the data-path calls return.
pub const EAGAIN: isize = -(fi::FI_EAGAIN as isize);
/// `-FI_EAVAIL`: an error completion is waiting in the CQ.
pub const EAVAIL: isize = -(fi::FI_EAVAIL as isize);
