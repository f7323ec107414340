//! The PMI-1 "simple" wire format, shared by the client ([`super::pmi1`]) and
//! our launcher's server ([`super::launcher::server`]).
//!
//! One message is one line: space-separated `name=value` tokens, the first
//! being `cmd=<command>`, ended by `\n`. For example
//! `cmd=get kvsname=kvs_1 key=addr-3` and its answer
//! `cmd=get_result rc=0 msg=success value=0a1b`. The value of a token is
//! everything after its first `=` (Hydra answers `value=a=b` for a stored
//! `a=b`); a value may be empty.
//!
//! The parser is strict, since lines come from another process: a line is at
//! most [`MAX_LINE`] bytes, printable ASCII only (no control characters, no
//! bytes above 0x7e), every token has a non-empty name, and no name repeats.
//! Anything else is an error message naming the problem, never a panic.

use std::io::{self, BufRead, Read};

use super::{MAX_KEY_LEN, MAX_VALUE_LEN};

/// Longest line, newline included, either side accepts.
pub const MAX_LINE: usize = 4096;

/// One parsed line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    cmd: String,
    fields: Vec<(String, String)>,
}

impl Message {
    /// A message from its parts (the PMI-2 decoder builds these too).
    pub(crate) fn from_parts(cmd: String, fields: Vec<(String, String)>) -> Message {
        Message { cmd, fields }
    }

    /// The `cmd=` value.
    pub fn cmd(&self) -> &str {
        &self.cmd
    }

    /// The value of field `name`, if present.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The value of field `name`, or an error naming it.
    pub fn require(&self, name: &str) -> Result<&str, String> {
        self.get(name)
            .ok_or_else(|| format!("cmd={} lacks field '{name}'", self.cmd))
    }

    /// Field `name` as a non-negative integer, or an error naming it.
    pub fn require_usize(&self, name: &str) -> Result<usize, String> {
        let v = self.require(name)?;
        parse_usize(v).ok_or_else(|| {
            format!(
                "cmd={}: field '{name}' is not a non-negative integer: '{}'",
                self.cmd,
                shorten(v)
            )
        })
    }

    /// Checks an optional `rc=` field: absent or `0` is success, anything else
    /// an error carrying the `msg=` text.
    pub fn check_rc(&self) -> Result<(), String> {
        match self.get("rc") {
            None | Some("0") => Ok(()),
            Some(rc) => Err(format!(
                "cmd={} failed: rc={} msg={}",
                self.cmd,
                shorten(rc),
                shorten(self.get("msg").unwrap_or("(none)"))
            )),
        }
    }
}

/// Parses a decimal `usize` without sign, spaces or leading `+`.
fn parse_usize(v: &str) -> Option<usize> {
    if v.is_empty() || v.len() > 19 || !v.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    v.parse().ok()
}

/// At most 80 characters of `s`, for error messages.
pub fn shorten(s: &str) -> String {
    if s.len() <= 80 {
        s.to_string()
    } else {
        // `s` is ASCII here (validated), but stay on char boundaries anyway.
        let mut end = 80;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        format!("{}...({} bytes)", &s[..end], s.len())
    }
}

/// Parses one line (with or without its trailing `\n`).
pub fn parse(line: &[u8]) -> Result<Message, String> {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    if line.len() >= MAX_LINE {
        return Err(format!(
            "line of {} bytes exceeds {MAX_LINE}",
            line.len() + 1
        ));
    }
    if let Some(pos) = line.iter().position(|&b| !(b == b' ' || is_token_byte(b))) {
        return Err(format!(
            "byte 0x{:02x} at column {pos} is not printable ASCII",
            line[pos]
        ));
    }
    // Every byte is ASCII now, so this cannot fail; stay panic-free anyway.
    let text = std::str::from_utf8(line).map_err(|e| format!("not UTF-8: {e}"))?;
    let mut tokens = text.split(' ').filter(|t| !t.is_empty());
    let first = tokens.next().ok_or("empty line")?;
    let cmd = match first.split_once('=') {
        Some(("cmd", c)) if !c.is_empty() => c.to_string(),
        _ => {
            return Err(format!(
                "line does not start with cmd=: '{}'",
                shorten(first)
            ))
        }
    };
    let mut fields: Vec<(String, String)> = Vec::new();
    for tok in tokens {
        let (name, value) = tok
            .split_once('=')
            .ok_or_else(|| format!("cmd={cmd}: token '{}' has no '='", shorten(tok)))?;
        if name.is_empty() {
            return Err(format!(
                "cmd={cmd}: token '{}' has an empty name",
                shorten(tok)
            ));
        }
        if name == "cmd" || fields.iter().any(|(n, _)| n == name) {
            return Err(format!("cmd={cmd}: field '{name}' repeated"));
        }
        fields.push((name.to_string(), value.to_string()));
    }
    Ok(Message { cmd, fields })
}

/// Formats one line, `\n` included. Callers pass validated field values;
/// anything that would break the framing is replaced by `_` so that a bug can
/// never inject a second message.
pub fn encode(cmd: &str, fields: &[(&str, &str)]) -> String {
    let clean = |s: &str| -> String {
        s.chars()
            .map(|c| {
                if c.is_ascii() && is_token_byte(c as u8) {
                    c
                } else {
                    '_'
                }
            })
            .collect()
    };
    let mut line = format!("cmd={}", clean(cmd));
    for (name, value) in fields {
        line.push(' ');
        line.push_str(&clean(name));
        line.push('=');
        line.push_str(&clean(value));
    }
    line.push('\n');
    line
}

/// Printable ASCII other than space.
fn is_token_byte(b: u8) -> bool {
    (0x21..=0x7e).contains(&b)
}

/// Checks a key for `put`/`get`: 1..=`max` characters, printable ASCII, no
/// space, no `=`.
pub fn validate_key(key: &str, max: usize) -> Result<(), String> {
    validate("key", key, 1, max.min(MAX_KEY_LEN))
}

/// Checks a value for `put`: 0..=`max` characters, printable ASCII, no space,
/// no `=`.
pub fn validate_value(value: &str, max: usize) -> Result<(), String> {
    validate("value", value, 0, max.min(MAX_VALUE_LEN))
}

fn validate(what: &str, s: &str, min: usize, max: usize) -> Result<(), String> {
    if s.len() < min {
        return Err(format!("{what} is empty"));
    }
    if s.len() > max {
        return Err(format!(
            "{what} '{}' is {} characters, the limit is {max}",
            shorten(s),
            s.len()
        ));
    }
    if let Some((i, c)) = s
        .char_indices()
        .find(|&(_, c)| c == '=' || !(c.is_ascii() && is_token_byte(c as u8)))
    {
        return Err(format!(
            "{what} '{}' contains {c:?} at position {i}; only printable ASCII \
             without spaces and '=' is allowed (hex-encode binary data)",
            shorten(s)
        ));
    }
    Ok(())
}

/// Reads one line of at most [`MAX_LINE`] bytes. `Ok(None)` at a clean end of
/// stream; an error for an over-long line or a stream ending mid-line.
pub fn read_line(reader: &mut impl BufRead) -> io::Result<Option<Vec<u8>>> {
    let mut buf = Vec::with_capacity(128);
    let n = reader
        .by_ref()
        .take(MAX_LINE as u64)
        .read_until(b'\n', &mut buf)?;
    if n == 0 {
        return Ok(None);
    }
    if buf.last() != Some(&b'\n') {
        let msg = if buf.len() >= MAX_LINE {
            format!("line longer than {MAX_LINE} bytes")
        } else {
            "stream ended in the middle of a line".to_string()
        };
        return Err(io::Error::new(io::ErrorKind::InvalidData, msg));
    }
    Ok(Some(buf))
}

#[cfg(test)]
mod tests;
