//! Connections on the libfabric back-end: the seam's connection hook on a
//! connectionless (RDM) endpoint is one `fi_av_insert` of the peer's
//! published address, made on first contact and kept in the peer table;
//! the provider makes and keeps its own connections underneath.

use libfabric_sys as fi;

use super::OfiTransport;
use crate::error::{Error, Result};

/// Inserts `rank`'s endpoint `address` into the address vector (once).
///
/// # Errors
/// A poisoned peer table, or an address the provider rejects.
pub(super) fn insert(t: &OfiTransport, rank: usize, address: &[u8]) -> Result<()> {
    let mut peers = t
        .peers
        .lock()
        .map_err(|_| Error::InvalidArgument("peer table lock poisoned".into()))?;
    if peers.contains_key(&rank) {
        return Ok(());
    }
    let mut fi_addr: fi::fi_addr_t = fi::FI_ADDR_NOTAVAIL;
    // SAFETY: address is a valid buffer holding one provider address (its
    // format was validated by length on the publishing side and the
    // provider validates content); fi_addr is a valid out-pointer.
    let n = unsafe {
        fi::fi_av_insert(
            t.av.as_ptr(),
            address.as_ptr().cast(),
            1,
            &mut fi_addr,
            0,
            std::ptr::null_mut(),
        )
    };
    if n != 1 || fi_addr == fi::FI_ADDR_NOTAVAIL {
        return Err(Error::Protocol {
            peer: format!("rank {rank}"),
            message: format!(
                "its endpoint address was rejected by fi_av_insert (returned {n})"
            ),
        });
    }
    peers.insert(rank, fi_addr);
    Ok(())
}
