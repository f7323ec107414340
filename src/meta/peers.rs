//! Reaching a peer: its endpoint address and control region, fetched from the
//! bootstrap key-value store the first time the peer is contacted.
//!
//! Each process publishes one key, `os-<rank>`, whose value is
//! `<endpoint address hex>.<control base hex>.<control key hex>`. The table
//! below holds an entry only for peers actually contacted.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::bootstrap::Bootstrap;
use crate::error::{Error, Result};
use crate::transport::{RemoteAddr, Transport};

/// Longest endpoint address we accept from a peer (bytes).
pub const MAX_ADDRESS: usize = 256;

/// The bootstrap key of `rank`'s card.
pub fn card_key(rank: usize) -> String {
    format!("os-{rank}")
}

/// Encodes our card.
pub fn encode_card(address: &[u8], ctrl: RemoteAddr) -> String {
    let hex: String = address.iter().map(|b| format!("{b:02x}")).collect();
    format!("{hex}.{:x}.{:x}", ctrl.addr, ctrl.key)
}

/// Decodes and validates a card published by `rank`.
pub fn decode_card(rank: usize, value: &str) -> Result<(Vec<u8>, RemoteAddr)> {
    let bad = |message: &str| Error::Protocol {
        peer: format!("rank {rank}"),
        message: format!("bootstrap card {value:?}: {message}"),
    };
    let mut parts = value.split('.');
    let (Some(hex), Some(base), Some(key), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(bad("expected three dot-separated fields"));
    };
    if !hex.is_ascii() || hex.is_empty() || hex.len() % 2 != 0 || hex.len() / 2 > MAX_ADDRESS {
        return Err(bad("endpoint address has a bad length"));
    }
    let address = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16))
        .collect::<std::result::Result<Vec<u8>, _>>()
        .map_err(|_| bad("endpoint address is not hexadecimal"))?;
    let addr = u64::from_str_radix(base, 16).map_err(|_| bad("control base is not hexadecimal"))?;
    let key = u64::from_str_radix(key, 16).map_err(|_| bad("control key is not hexadecimal"))?;
    Ok((address, RemoteAddr { addr, key }))
}

/// Peers contacted so far and where their control regions are.
#[derive(Default)]
pub struct PeerTable {
    ctrl: Mutex<HashMap<usize, RemoteAddr>>,
}

impl PeerTable {
    /// Returns `rank`'s control region, contacting it first if needed.
    pub fn control(
        &self,
        rank: usize,
        boot: &dyn Bootstrap,
        transport: &dyn Transport,
    ) -> Result<RemoteAddr> {
        let poisoned = || Error::InvalidArgument("peer table lock poisoned".into());
        if let Some(c) = self.ctrl.lock().map_err(|_| poisoned())?.get(&rank) {
            return Ok(*c);
        }
        let value = boot.get(&card_key(rank))?;
        let (address, ctrl) = decode_card(rank, &value)?;
        transport.connect(rank, &address)?;
        self.ctrl.lock().map_err(|_| poisoned())?.insert(rank, ctrl);
        tracing::debug!(rank, "contacted peer");
        Ok(ctrl)
    }

    /// Number of peers contacted.
    pub fn len(&self) -> usize {
        self.ctrl.lock().map(|m| m.len()).unwrap_or(0)
    }

    /// True before any peer was contacted.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn card_round_trip_and_rejects() {
        let c = RemoteAddr {
            addr: 0xdead_beef,
            key: 7,
        };
        let s = encode_card(&[1, 2, 0xff], c);
        assert_eq!(decode_card(3, &s).unwrap(), (vec![1, 2, 0xff], c));
        for bad in [
            "",
            "zz.1.1",
            "0102.1",
            "0102.1.1.1",
            "010.1.1",
            "0102.x.1",
            "0102.1.-1",
            "é1.1.1",
            "aé1.1.1",
        ] {
            assert!(decode_card(3, bad).is_err(), "accepted {bad:?}");
        }
        let long = "00".repeat(MAX_ADDRESS + 1) + ".1.1";
        assert!(decode_card(3, &long).is_err());
    }
}
