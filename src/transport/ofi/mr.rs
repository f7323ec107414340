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

/// Registrations tried when a provider that chooses keys itself reports a
/// key collision (`-FI_ENOKEY`); see `register_requested`.
const PROV_KEY_ATTEMPTS: u32 = 8;

/// A registration of local memory.
pub struct LocalMr {
    mr: Owned<fi::fid_mr>,
    key: u64,
}

impl LocalMr {
    /// Registers `len` bytes at `ptr` with `access` flags.
    pub fn register(t: &OfiTransport, ptr: *mut u8, len: usize, access: u64) -> Result<LocalMr> {
        if t.props.prov_key {
            return Self::register_requested(t, ptr, len, access, 0);
        }
        let mut attempt = 1;
        loop {
            // Odd keys: 1, 3, 5, ... (even ones are window keys).
            let requested = t.next_key.fetch_add(2, Ordering::Relaxed);
            match Self::register_requested(t, ptr, len, access, requested) {
                // A key taken by the provider itself (`-FI_ENOKEY`): our
                // counter never repeats, so the next one is free.
                Err(Error::Backend { code, .. })
                    if code == fi::FI_ENOKEY as i32 && attempt < PROV_KEY_ATTEMPTS =>
                {
                    attempt += 1
                }
                other => return other,
            }
        }
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
        let mut attempt = 0;
        let rc = loop {
            // SAFETY: ptr/len describe memory the caller keeps alive for the
            // lifetime of the returned registration (window memory outlives
            // its Registration; in-flight buffers outlive their op context).
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
            // `verbs;ofi_rxm` (libfabric 1.17) keeps its own map from the
            // verbs key to the region for emulated atomics and, rarely on
            // rxe, still holds a stale entry under a key the device hands
            // out again: -FI_ENOKEY although the provider chose the key.
            // Registering again draws a fresh key from the device.
            attempt += 1;
            if rc != -(fi::FI_ENOKEY as i32) || !t.props.prov_key || attempt >= PROV_KEY_ATTEMPTS
            {
                break rc;
            }
        };
        check("fi_mr_reg", rc, || {
            format!("registering {len} bytes ({attempt} attempts)")
        })?;
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
