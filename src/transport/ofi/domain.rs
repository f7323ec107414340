//! Opening the fabric and domain of one `fi_info` entry.

use libfabric_sys as fi;

use super::fault::check;
use super::fid::Owned;
use super::info::InfoRef;
use crate::error::{Error, Result};

/// A fabric and a domain opened from the same entry. The domain is declared
/// first so that it closes before its fabric.
pub struct Domain {
    /// The domain.
    pub domain: Owned<fi::fid_domain>,
    /// The fabric it belongs to.
    pub fabric: Owned<fi::fid_fabric>,
}

impl Domain {
    /// Opens the fabric and domain `entry` describes.
    pub fn open(entry: InfoRef<'_>) -> Result<Domain> {
        let what = |step: &str| {
            format!(
                "{step} on provider {} (domain {})",
                entry.provider(),
                entry.domain()
            )
        };
        let mut fabric: *mut fi::fid_fabric = std::ptr::null_mut();
        // SAFETY: entry points into a live fi_info list whose fabric_attr
        // fi_getinfo filled in; the out-pointer is valid.
        let rc = unsafe {
            fi::fi_fabric(
                (*entry.as_ptr()).fabric_attr,
                &mut fabric,
                std::ptr::null_mut(),
            )
        };
        check("fi_fabric", rc, || what("opening the fabric"))?;
        let fabric = Owned::new(fabric)
            .ok_or_else(|| Error::NoProvider("fi_fabric returned NULL".into()))?;

        let mut domain: *mut fi::fid_domain = std::ptr::null_mut();
        // SAFETY: live fabric opened from this entry, the entry itself, valid
        // out-pointer.
        let rc = unsafe {
            fi::fi_domain(
                fabric.as_ptr(),
                entry.as_ptr(),
                &mut domain,
                std::ptr::null_mut(),
            )
        };
        check("fi_domain", rc, || what("opening the domain"))?;
        let domain = Owned::new(domain)
            .ok_or_else(|| Error::NoProvider("fi_domain returned NULL".into()))?;
        Ok(Domain { domain, fabric })
    }
}
