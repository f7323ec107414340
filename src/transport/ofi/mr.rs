//! Memory registration honouring the provider's `mr_mode`.
//!
//! * `FI_MR_PROV_KEY`: the provider picks the key; otherwise we request
//!   unique keys: odd ones from a per-transport counter, and even ones,
//!   2 × window id, for window memory (`LocalMr::register_keyed`, so that
//!   peers can compute a uniform window's key, `meta::uniform`). The two
//!   sets are disjoint and window ids are unique per process, so requested
//!   keys never collide within a process.
//! * `FI_MR_ENDPOINT`: the region is bound to our endpoint and enabled.
//! * `FI_MR_VIRT_ADDR`: remote addresses are virtual addresses (the caller
//!   publishes the base); otherwise offsets from 0.
//! * `FI_MR_LOCAL`: local buffers need a descriptor; see [`LocalMr::desc`].
//! * `FI_MR_ALLOCATED`: we only ever register allocated, mapped memory.

use std::sync::atomic::Ordering;

use libfabric_sys as fi;

use super::fault::check;
use super::fid::Owned;
use super::OfiTransport;
use crate::error::{Error, Result};

/// A registration of local memory.
pub struct LocalMr {
    mr: Owned<fi::fid_mr>,
    key: u64,
}

impl LocalMr {
    /// Registers `len` bytes at `ptr` with `access` flags.
    pub fn register(t: &OfiTransport, ptr: *mut u8, len: usize, access: u64) -> Result<LocalMr> {
        let requested = if t.props.prov_key {
            0
        } else {
            // Odd keys: 1, 3, 5, ... (even ones are window keys).
            t.next_key.fetch_add(2, Ordering::Relaxed)
        };
        Self::register_requested(t, ptr, len, access, requested)
    }

    /// [`LocalMr::register`] asking for key `key` where the provider lets
    /// us choose (else the provider's key; the caller compares).
    pub fn register_keyed(
        t: &OfiTransport,
        ptr: *mut u8,
        len: usize,
        access: u64,
        key: u64,
    ) -> Result<LocalMr> {
        if t.props.prov_key {
            return Self::register(t, ptr, len, access);
        }
        Self::register_requested(t, ptr, len, access, key)
    }

    fn register_requested(
        t: &OfiTransport,
        ptr: *mut u8,
        len: usize,
        access: u64,
        requested: u64,
    ) -> Result<LocalMr> {
        let mut mr: *mut fi::fid_mr = std::ptr::null_mut();
        // SAFETY: ptr/len describe memory the caller keeps alive for the
        // lifetime of the returned registration (window memory outlives its
        // Registration; in-flight buffers outlive their op context).
        let rc = unsafe {
            fi::fi_mr_reg(
                t.domain.as_ptr(),
                ptr as *const _,
                len,
                access,
                0,
                requested,
                0,
                &mut mr,
                std::ptr::null_mut(),
            )
        };
        check("fi_mr_reg", rc, || format!("registering {len} bytes"))?;
        let mr =
            Owned::new(mr).ok_or_else(|| Error::NoProvider("fi_mr_reg returned NULL".into()))?;
        if t.props.mr_endpoint {
            // SAFETY: live MR and endpoint of the same domain.
            unsafe {
                check(
                    "fi_mr_bind",
                    fi::fi_mr_bind(mr.as_ptr(), t.ep.fid(), 0),
                    || "binding a registration to the endpoint (FI_MR_ENDPOINT)".into(),
                )?;
                check("fi_mr_enable", fi::fi_mr_enable(mr.as_ptr()), || {
                    "enabling a registration (FI_MR_ENDPOINT)".into()
                })?;
            }
        }
        // SAFETY: live MR.
        let key = unsafe { fi::fi_mr_key(mr.as_ptr()) };
        if key == fi::FI_KEY_NOTAVAIL {
            return Err(Error::NoProvider(
                "the provider returned FI_KEY_NOTAVAIL (it needs FI_MR_RAW keys, not supported yet)".into(),
            ));
        }
        Ok(LocalMr { mr, key })
    }

    /// The remote key.
    pub fn key(&self) -> u64 {
        self.key
    }

    /// Descriptor for local buffers under `FI_MR_LOCAL`.
    pub fn desc(&self) -> *mut std::os::raw::c_void {
        // SAFETY: live MR.
        unsafe { fi::fi_mr_desc(self.mr.as_ptr()) }
    }
}
