//! The byte stream under a PMI-1 client: a Unix socket (our launcher), a TCP
//! connection (`PMI_PORT`) or a socket inherited by number (`PMI_FD`).
//!
//! Adopting an inherited descriptor: the std way is
//! `UnixStream::from_raw_fd`, which is `unsafe` (it asserts sole ownership),
//! and the crate allows `unsafe` only in `sys/` and the transport layer. So we
//! keep the descriptor as a plain number and do all I/O through `nix`'s safe
//! wrappers that take a `RawFd` (`fstat`, `fcntl`, `send`, `recv`, `close`).
//! The worst a wrong number can do is make those calls fail with `EBADF` or
//! `ENOTSOCK`, which we report; we check up front that it is a socket, mark it
//! close-on-exec so children do not inherit it, and adopt `PMI_FD` at most
//! once per process so a closed number that was reused is never touched.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::os::fd::RawFd;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};

use nix::fcntl::{fcntl, FcntlArg, FdFlag};
use nix::sys::socket::{recv, send, MsgFlags};
use nix::sys::stat::{fstat, SFlag};

/// `PMI_FD` is adopted at most once per process, by PMI-1 or PMI-2.
static PMI_FD_TAKEN: AtomicBool = AtomicBool::new(false);

/// Adopts the inherited `PMI_FD` (number `fd`) for the client `via`.
pub(crate) fn adopt_pmi_fd(via: &'static str, fd: RawFd) -> crate::error::Result<InheritedFd> {
    if PMI_FD_TAKEN.swap(true, Ordering::SeqCst) {
        return Err(crate::error::Error::bootstrap(
            via,
            "PMI_FD was already used by this process (init called twice?)",
        ));
    }
    InheritedFd::adopt(fd).map_err(|m| crate::error::Error::Config {
        var: "PMI_FD",
        value: fd.to_string(),
        message: m,
    })
}

/// A connected stream to a PMI server.
#[derive(Debug)]
pub(crate) enum Conn {
    Unix(UnixStream),
    Tcp(TcpStream),
    Fd(InheritedFd),
}

impl Read for Conn {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Conn::Unix(s) => s.read(buf),
            Conn::Tcp(s) => s.read(buf),
            Conn::Fd(f) => f.read(buf),
        }
    }
}

impl Write for Conn {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Conn::Unix(s) => s.write(buf),
            Conn::Tcp(s) => s.write(buf),
            Conn::Fd(f) => f.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A socket inherited from the launcher by descriptor number; closed on drop.
#[derive(Debug)]
pub(crate) struct InheritedFd(RawFd);

impl InheritedFd {
    /// Checks that `fd` is an open socket and marks it close-on-exec.
    pub(crate) fn adopt(fd: RawFd) -> Result<Self, String> {
        if fd < 0 {
            return Err(format!("descriptor {fd} is negative"));
        }
        let st = fstat(fd).map_err(|e| format!("descriptor {fd} is not open: {e}"))?;
        if SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT != SFlag::S_IFSOCK {
            return Err(format!("descriptor {fd} is not a socket"));
        }
        fcntl(fd, FcntlArg::F_SETFD(FdFlag::FD_CLOEXEC))
            .map_err(|e| format!("cannot set close-on-exec on descriptor {fd}: {e}"))?;
        Ok(InheritedFd(fd))
    }
}

impl Read for InheritedFd {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            match recv(self.0, buf, MsgFlags::empty()) {
                Err(nix::errno::Errno::EINTR) => continue,
                r => return r.map_err(io::Error::from),
            }
        }
    }
}

impl Write for InheritedFd {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        loop {
            // MSG_NOSIGNAL: a dead server is an EPIPE error, not a SIGPIPE.
            match send(self.0, buf, MsgFlags::MSG_NOSIGNAL) {
                Err(nix::errno::Errno::EINTR) => continue,
                r => return r.map_err(io::Error::from),
            }
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Drop for InheritedFd {
    fn drop(&mut self) {
        let _ = nix::unistd::close(self.0);
    }
}
