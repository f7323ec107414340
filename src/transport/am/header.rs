//! The header of an active message, and its validation.
//!
//! Layout (24 bytes, little-endian), followed by `len` payload bytes:
//!
//! | bytes | field |
//! |---|---|
//! | 0–1 | magic `0x6d61` (`"am"`) |
//! | 2 | version ([`VERSION`]) |
//! | 3 | class: 0 one-way, 1 request, 2 reply, 3 error reply |
//! | 4 | kind: which handler (see [`super::kind`]) |
//! | 5–7 | reserved, zero |
//! | 8–11 | source rank |
//! | 12–15 | payload length in bytes |
//! | 16–23 | token: 0 for one-way messages, else the origin's request token |
//!
//! [`Header::decode`] checks every field against the bytes actually
//! received before anything else looks at the message.

use crate::transport::{LARGEST_MESSAGE, MAX_MESSAGE};

/// Bytes of the header.
pub const HEADER_BYTES: usize = 24;
/// Largest payload of a message every back-end carries (a
/// [`crate::transport::MAX_MESSAGE`] message), and of every reply: what
/// fixed-size protocol messages are sized for. A one-way message or a
/// request may carry up to the back-end's `Caps::max_message` less the
/// header ([`super::ActiveMessages::max_payload`]).
pub const MAX_PAYLOAD: usize = MAX_MESSAGE - HEADER_BYTES;
/// Largest payload of a message on any back-end
/// ([`crate::transport::LARGEST_MESSAGE`] less the header).
pub const LARGEST_PAYLOAD: usize = LARGEST_MESSAGE - HEADER_BYTES;
/// Wire version.
pub const VERSION: u8 = 1;
const MAGIC: u16 = 0x6d61;

/// What a message is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// No reply expected.
    OneWay,
    /// The receiver's handler answers with a reply carrying the same token.
    Request,
    /// The answer to a request.
    Reply,
    /// The handler refused the request; the payload is a UTF-8 reason.
    ErrorReply,
}

impl Class {
    fn code(self) -> u8 {
        match self {
            Class::OneWay => 0,
            Class::Request => 1,
            Class::Reply => 2,
            Class::ErrorReply => 3,
        }
    }
}

/// A decoded, validated header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// Message class.
    pub class: Class,
    /// Handler kind.
    pub kind: u8,
    /// Rank of the sender, as it claims (checked against the job size by
    /// the dispatcher).
    pub source: u32,
    /// Payload length.
    pub len: u32,
    /// Request token (0 for one-way messages).
    pub token: u64,
}

impl Header {
    /// Encodes into the first [`HEADER_BYTES`] of `out` (which must be that long).
    pub fn encode(&self, out: &mut [u8]) {
        out[0..2].copy_from_slice(&MAGIC.to_le_bytes());
        out[2] = VERSION;
        out[3] = self.class.code();
        out[4] = self.kind;
        out[5..8].fill(0);
        out[8..12].copy_from_slice(&self.source.to_le_bytes());
        out[12..16].copy_from_slice(&self.len.to_le_bytes());
        out[16..24].copy_from_slice(&self.token.to_le_bytes());
    }

    /// Decodes the header of a message of `msg.len()` bytes as received,
    /// and checks it: length, magic, version, class, reserved bytes, that
    /// the payload length matches the bytes received, and that the token is
    /// 0 exactly for one-way messages.
    pub fn decode(msg: &[u8]) -> Result<Header, String> {
        if msg.len() < HEADER_BYTES {
            return Err(format!(
                "message of {} bytes is shorter than the {HEADER_BYTES}-byte header",
                msg.len()
            ));
        }
        if msg.len() > LARGEST_MESSAGE {
            return Err(format!(
                "message of {} bytes exceeds {LARGEST_MESSAGE}",
                msg.len()
            ));
        }
        let u32_at = |i: usize| u32::from_le_bytes([msg[i], msg[i + 1], msg[i + 2], msg[i + 3]]);
        let magic = u16::from_le_bytes([msg[0], msg[1]]);
        if magic != MAGIC {
            return Err(format!("bad magic {magic:#06x}"));
        }
        if msg[2] != VERSION {
            return Err(format!("unknown version {}", msg[2]));
        }
        let class = match msg[3] {
            0 => Class::OneWay,
            1 => Class::Request,
            2 => Class::Reply,
            3 => Class::ErrorReply,
            c => return Err(format!("unknown message class {c}")),
        };
        if msg[5..8] != [0, 0, 0] {
            return Err("reserved header bytes are not zero".into());
        }
        let len = u32_at(12);
        if len as usize != msg.len() - HEADER_BYTES {
            return Err(format!(
                "header announces {len} payload bytes, {} arrived",
                msg.len() - HEADER_BYTES
            ));
        }
        let mut t = [0u8; 8];
        t.copy_from_slice(&msg[16..24]);
        let token = u64::from_le_bytes(t);
        if (token == 0) != (class == Class::OneWay) {
            return Err(format!("token {token:#x} does not fit a {class:?}"));
        }
        Ok(Header {
            class,
            kind: msg[4],
            source: u32_at(8),
            len,
            token,
        })
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn fuzz_active_message_header() {
        let seeds: Vec<Vec<u8>> = [(Class::OneWay, 0u64, 0u32), (Class::Request, 7, 24), (Class::Reply, 7, 8)]
            .iter()
            .map(|&(class, token, len)| {
                let mut m = vec![0u8; HEADER_BYTES + len as usize];
                Header {
                    class,
                    kind: 2,
                    source: 1,
                    len,
                    token,
                }
                .encode(&mut m);
                m
            })
            .collect();
        crate::fuzz::run("active-message header", &seeds, 300, &|b| {
            Header::decode(b).is_ok()
        });
    }

    use proptest::prelude::*;

    use super::*;

    fn msg(h: &Header, payload: &[u8]) -> Vec<u8> {
        let mut m = vec![0u8; HEADER_BYTES + payload.len()];
        h.encode(&mut m);
        m[HEADER_BYTES..].copy_from_slice(payload);
        m
    }

    fn sample() -> Header {
        Header {
            class: Class::Request,
            kind: 1,
            source: 3,
            len: 5,
            token: 0x1_0000_0002,
        }
    }

    #[test]
    fn round_trip() {
        let h = sample();
        assert_eq!(Header::decode(&msg(&h, b"hello")), Ok(h));
        let one = Header {
            class: Class::OneWay,
            token: 0,
            len: 0,
            ..h
        };
        assert_eq!(Header::decode(&msg(&one, b"")), Ok(one));
    }

    #[test]
    fn rejects_each_bad_field() {
        let good = msg(&sample(), b"hello");
        let cases: [(usize, u8); 6] = [(0, 0), (1, 0), (2, 9), (3, 4), (5, 1), (7, 1)];
        for (at, v) in cases {
            let mut m = good.clone();
            m[at] = v;
            assert!(Header::decode(&m).is_err(), "byte {at} = {v} accepted");
        }
        // Length mismatches, both ways, and short messages.
        assert!(Header::decode(&good[..good.len() - 1]).is_err());
        let mut longer = good.clone();
        longer.push(0);
        assert!(Header::decode(&longer).is_err());
        for n in 0..HEADER_BYTES {
            assert!(Header::decode(&good[..n]).is_err());
        }
        // A request without a token, a one-way message with one.
        let no_token = Header {
            token: 0,
            ..sample()
        };
        assert!(Header::decode(&msg(&no_token, b"hello")).is_err());
        let one = Header {
            class: Class::OneWay,
            ..sample()
        };
        assert!(Header::decode(&msg(&one, b"hello")).is_err());
        // Oversized for every back-end; large for some is fine.
        let big = Header {
            len: LARGEST_PAYLOAD as u32 + 1,
            ..sample()
        };
        assert!(Header::decode(&msg(&big, &vec![0; LARGEST_PAYLOAD + 1])).is_err());
        let large = Header {
            len: LARGEST_PAYLOAD as u32,
            ..sample()
        };
        assert!(Header::decode(&msg(&large, &vec![0; LARGEST_PAYLOAD])).is_ok());
    }

    fn class() -> impl Strategy<Value = Class> {
        prop_oneof![
            Just(Class::OneWay),
            Just(Class::Request),
            Just(Class::Reply),
            Just(Class::ErrorReply)
        ]
    }

    proptest! {
        /// Whatever arrives, decoding never panics, and what it accepts is
        /// self-consistent.
        #[test]
        fn decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            if let Ok(h) = Header::decode(&bytes) {
                prop_assert_eq!(h.len as usize + HEADER_BYTES, bytes.len());
                prop_assert_eq!(h.token == 0, h.class == Class::OneWay);
            }
        }

        /// Every valid header survives a round trip with its payload.
        #[test]
        fn encode_decode(class in class(), kind in any::<u8>(), source in any::<u32>(),
                         token in 1u64.., payload in proptest::collection::vec(any::<u8>(), 0..300)) {
            let token = if class == Class::OneWay { 0 } else { token };
            let h = Header { class, kind, source, len: payload.len() as u32, token };
            prop_assert_eq!(Header::decode(&msg(&h, &payload)), Ok(h));
        }

        /// Flipping any single bit of the fixed fields (but kind, source
        /// and token, which carry free values) is detected.
        #[test]
        fn bit_flips_in_checked_fields_are_rejected(bit in 0usize..64) {
            let byte = [0usize, 1, 2, 3, 5, 6, 7, 12][bit / 8];
            let mut m = msg(&sample(), b"hello");
            m[byte] ^= 1 << (bit % 8);
            // A class flip 1 -> 0/3/... may still be a valid class; a token
            // mismatch or an unknown class catches the rest.
            let r = Header::decode(&m);
            if byte == 3 {
                if let Ok(h) = r { prop_assert!(h.class != Class::OneWay); }
            } else {
                prop_assert!(r.is_err(), "flip of bit {} of byte {} accepted", bit % 8, byte);
            }
        }
    }
}
