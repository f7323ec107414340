//! Owned libfabric objects, closed with `fi_close` when dropped.

use std::ptr::NonNull;

use libfabric_sys as fi;

/// A libfabric object we opened and must close. `T` is one of the `fid_*`
/// structs, all of which start with a `struct fid`.
pub struct Owned<T: FidKind> {
    ptr: NonNull<T>,
}

/// The `fid_*` structs whose first member is `struct fid fid`.
pub trait FidKind {
    /// Pointer to the embedded `struct fid`.
    fn fid(p: *mut Self) -> *mut fi::fid;
}

macro_rules! fid_kind {
    ($($t:ty),*) => {$(
        impl FidKind for $t {
            fn fid(p: *mut Self) -> *mut fi::fid {
                // SAFETY: only computes the address of the first field; p
                // points to a live object (callers hold an Owned).
                unsafe { std::ptr::addr_of_mut!((*p).fid) }
            }
        }
    )*};
}
fid_kind!(
    fi::fid_fabric,
    fi::fid_domain,
    fi::fid_ep,
    fi::fid_av,
    fi::fid_cq,
    fi::fid_mr
);

// SAFETY: every domain is opened with FI_THREAD_SAFE, so libfabric objects may
// be used from any thread concurrently.
unsafe impl<T: FidKind> Send for Owned<T> {}
// SAFETY: as above.
unsafe impl<T: FidKind> Sync for Owned<T> {}

impl<T: FidKind> Owned<T> {
    /// Takes ownership of an object a successful `fi_*open` call returned.
    pub fn new(p: *mut T) -> Option<Self> {
        NonNull::new(p).map(|ptr| Owned { ptr })
    }
    /// The raw object pointer for libfabric calls.
    pub fn as_ptr(&self) -> *mut T {
        self.ptr.as_ptr()
    }
    /// The embedded `struct fid`.
    pub fn fid(&self) -> *mut fi::fid {
        T::fid(self.ptr.as_ptr())
    }
}

impl<T: FidKind> Drop for Owned<T> {
    fn drop(&mut self) {
        // SAFETY: the object is live and closed exactly once, here.
        let rc = unsafe { fi::fi_close(self.fid()) };
        if rc != 0 {
            // Which object (e.g. `fid_av`), for a reader of the log.
            let kind = std::any::type_name::<T>().rsplit("::").next().unwrap_or("fid");
            tracing::warn!("fi_close failed ({kind}): {}", super::fault::strerror(-rc));
        }
    }
}
