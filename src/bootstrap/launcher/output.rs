//! Forwarding of the ranks' output, line by line, with a `[rank] ` prefix.
//!
//! Each line is written with one `write_all` under the stream's lock, so lines
//! of different ranks never interleave inside a line. A line longer than
//! [`MAX_CHUNK`] is cut into several prefixed lines; a last line without `\n`
//! gets one. Bytes are passed through unchanged (no UTF-8 requirement). If our
//! own output is closed, forwarding keeps draining the pipe so that the rank
//! never blocks on a full pipe.

use std::io::{BufRead, BufReader, Read, Write};
use std::sync::mpsc::Sender;
use std::thread::JoinHandle;

/// Longest piece forwarded as one line.
pub const MAX_CHUNK: usize = 64 * 1024;

/// Which of our streams a rank's pipe goes to.
#[derive(Debug, Clone, Copy)]
pub enum Target {
    /// The launcher's stdout.
    Stdout,
    /// The launcher's stderr.
    Stderr,
}

/// Starts a thread copying `pipe` to `target`, prefixing each line with
/// `[rank] `. Sends `()` on `done` at end of stream.
pub fn forward(
    rank: usize,
    pipe: impl Read + Send + 'static,
    target: Target,
    done: Sender<()>,
) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name(format!("onesided-run-out-{rank}"))
        .spawn(move || {
            copy_lines(rank, pipe, target);
            let _ = done.send(());
        })
}

fn copy_lines(rank: usize, pipe: impl Read, target: Target) {
    let prefix = format!("[{rank}] ");
    let mut reader = BufReader::new(pipe);
    let mut line = Vec::with_capacity(256);
    let mut ok = true;
    loop {
        line.clear();
        line.extend_from_slice(prefix.as_bytes());
        match reader
            .by_ref()
            .take(MAX_CHUNK as u64)
            .read_until(b'\n', &mut line)
        {
            Ok(0) => return,
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => return,
        }
        if line.last() != Some(&b'\n') {
            line.push(b'\n');
        }
        if ok {
            ok = match target {
                Target::Stdout => write_flush(&mut std::io::stdout().lock(), &line),
                Target::Stderr => write_flush(&mut std::io::stderr().lock(), &line),
            };
        }
    }
}

fn write_flush(w: &mut impl Write, line: &[u8]) -> bool {
    w.write_all(line).and_then(|()| w.flush()).is_ok()
}
