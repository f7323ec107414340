//! The PMI-2 wire format, as MPICH's simple PMI-2 client and Slurm's
//! `mpi/pmi2` plugin speak it over `PMI_FD`.
//!
//! A message is a 6-character decimal length, left-aligned and padded with
//! spaces (`printf("%-6d")`), followed by that many bytes of body:
//!
//! ```text
//! 38    cmd=fullinit;pmirank=0;threaded=FALSE;
//! ```
//!
//! The body is `name=value` pairs, each ended by `;`, the first being
//! `cmd=<command>`. A `;` inside a value is written `;;` (MPICH's escape;
//! Slurm never sends one). The last `;` may be missing.
//!
//! Everything read here comes from another process and is parsed as hostile
//! input: the length is at most [`MAX_BODY`], the body printable ASCII
//! (spaces allowed: Slurm's `errmsg=` has them), every pair has a non-empty
//! name, no name repeats. Anything else is an error naming the problem,
//! never a panic.

use std::io::{self, Read};

use crate::bootstrap::wire::{shorten, Message};

/// Characters of the length header.
pub const HEADER: usize = 6;
/// Longest body accepted (the PMI-2 limits are 1024 per value; the node
/// mapping of a large job can be longer, so leave room).
pub const MAX_BODY: usize = 64 * 1024;

/// Parses a length header: decimal digits, then only spaces (leading
/// spaces tolerated too), at most [`MAX_BODY`].
pub fn parse_header(h: &[u8]) -> Result<usize, String> {
    let text = std::str::from_utf8(h).map_err(|_| format!("length header {h:?} is not ASCII"))?;
    let digits = text.trim_matches(' ');
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("length header {text:?} is not a decimal number"));
    }
    let n: usize = digits
        .parse()
        .map_err(|_| format!("length header {text:?} is out of range"))?;
    if n > MAX_BODY {
        return Err(format!("message of {n} bytes exceeds {MAX_BODY}"));
    }
    Ok(n)
}

/// Reads one framed message body. `Ok(None)` at a clean end of stream
/// (before the header); an error for a stream ending mid-message or a bad
/// header.
pub fn read_body(reader: &mut impl Read) -> io::Result<Option<Vec<u8>>> {
    let mut header = [0u8; HEADER];
    let mut got = 0;
    while got < HEADER {
        match reader.read(&mut header[got..]) {
            Ok(0) if got == 0 => return Ok(None),
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "stream ended inside a PMI-2 length header",
                ))
            }
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
    let n = parse_header(&header).map_err(|m| io::Error::new(io::ErrorKind::InvalidData, m))?;
    let mut body = vec![0u8; n];
    reader.read_exact(&mut body).map_err(|e| {
        if e.kind() == io::ErrorKind::UnexpectedEof {
            io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("stream ended inside a PMI-2 message of {n} bytes"),
            )
        } else {
            e
        }
    })?;
    Ok(Some(body))
}

/// Parses one body (without its header).
pub fn parse(body: &[u8]) -> Result<Message, String> {
    if body.len() > MAX_BODY {
        return Err(format!(
            "message of {} bytes exceeds {MAX_BODY}",
            body.len()
        ));
    }
    if let Some(pos) = body.iter().position(|&b| !(0x20..=0x7e).contains(&b)) {
        return Err(format!(
            "byte 0x{:02x} at offset {pos} is not printable ASCII",
            body[pos]
        ));
    }
    // Printable ASCII only, so this cannot fail; stay panic-free anyway.
    let text = std::str::from_utf8(body).map_err(|e| format!("not UTF-8: {e}"))?;
    let mut pairs: Vec<(String, String)> = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        let eq = rest
            .find('=')
            .ok_or_else(|| format!("pair '{}' has no '='", shorten(rest)))?;
        let name = &rest[..eq];
        if name.is_empty() || name.contains(';') {
            return Err(format!("pair name '{}' is empty or broken", shorten(name)));
        }
        // The value runs to the first ';' that is not doubled.
        let bytes = rest.as_bytes();
        let mut value = String::new();
        let mut i = eq + 1;
        loop {
            match bytes.get(i) {
                None => break,
                Some(b';') if bytes.get(i + 1) == Some(&b';') => {
                    value.push(';');
                    i += 2;
                }
                Some(b';') => {
                    i += 1;
                    break;
                }
                Some(&b) => {
                    value.push(b as char);
                    i += 1;
                }
            }
        }
        if pairs.iter().any(|(n, _)| n == name) {
            return Err(format!("field '{}' repeated", shorten(name)));
        }
        pairs.push((name.to_string(), value));
        rest = rest.get(i..).unwrap_or("");
    }
    if pairs.is_empty() {
        return Err("empty message".into());
    }
    let (first, value) = pairs.remove(0);
    if first != "cmd" || value.is_empty() {
        return Err(format!(
            "message does not start with cmd=: '{}'",
            shorten(text)
        ));
    }
    Ok(Message::from_parts(value, pairs))
}

/// Formats one framed message: header and body. `;` in names or values is
/// escaped as `;;`; bytes that are not printable ASCII become `_` (callers
/// pass validated strings; this only keeps a bug from breaking the framing).
/// A body longer than [`MAX_BODY`] is an error.
pub fn encode(cmd: &str, fields: &[(&str, &str)]) -> Result<Vec<u8>, String> {
    let clean = |s: &str, out: &mut String| {
        for c in s.chars() {
            match c {
                ';' => out.push_str(";;"),
                ' '..='~' => out.push(c),
                _ => out.push('_'),
            }
        }
    };
    let mut body = String::from("cmd=");
    clean(cmd, &mut body);
    body.push(';');
    for (name, value) in fields {
        clean(name, &mut body);
        body.push('=');
        clean(value, &mut body);
        body.push(';');
    }
    if body.len() > MAX_BODY {
        return Err(format!(
            "cmd={cmd}: message of {} bytes exceeds {MAX_BODY}",
            body.len()
        ));
    }
    let mut out = format!("{:<width$}", body.len(), width = HEADER).into_bytes();
    out.extend_from_slice(body.as_bytes());
    Ok(out)
}
