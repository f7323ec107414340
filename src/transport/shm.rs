//! Node-shared window segments: a memfd per window, mapped `MAP_SHARED` by
//! its owner and lazily by node-local peers; or, for a contiguous
//! shared-memory window, one memfd per node holding every local rank's part,
//! created by the node's leader and mapped whole by every local rank at
//! window creation (`api::window::shared`).
//!
//! The owner creates the segment with `memfd_create` + `ftruncate` + `mmap`
//! and keeps the descriptor open while the window lives. A peer opens
//! `/proc/<pid>/fd/<fd>` — allowed for processes of the same user (the
//! `PTRACE_MODE_READ` check, not ptrace-attach rights; verified here as an
//! unprivileged user, 2026-11-22) — checks that the link names the memfd it
//! expects and that it is long enough, maps it and closes its descriptor.
//! Everything peer-provided (pid, fd, name, length) is validated before the
//! mapping exists; the mapping is only ever accessed through [`Memory`]'s
//! bounds-checked copies and atomics.

use std::ffi::CString;
use std::num::NonZeroUsize;
use std::os::fd::AsFd;
use std::ptr::NonNull;

use nix::fcntl::{open, OFlag};
use nix::sys::mman::{mmap, MapFlags, ProtFlags};
use nix::sys::stat::{fstat, Mode};

use super::memory::{Memory, WINDOW_ALIGN};
use crate::error::{Error, Result};

/// The memfd name of window `id` of `rank` (what a peer expects to see).
pub fn segment_name(id: u64, rank: usize) -> String {
    format!("onesided-w{id}-r{rank}")
}

/// The memfd name of the node segment of contiguous shared window `id`
/// (created by the node's leader, holding every local rank's part).
pub fn node_segment_name(id: u64) -> String {
    format!("onesided-w{id}-node")
}

fn os_err(what: String) -> impl FnOnce(nix::Error) -> Error {
    move |e| Error::io(what, std::io::Error::from(e))
}

fn map_len(len: usize) -> Result<NonZeroUsize> {
    len.max(1)
        .checked_next_multiple_of(WINDOW_ALIGN)
        .and_then(NonZeroUsize::new)
        .ok_or_else(|| Error::InvalidArgument(format!("shared segment of {len} bytes")))
}

fn map_shared(fd: impl AsFd, len: NonZeroUsize, what: &str) -> Result<NonNull<u8>> {
    // SAFETY: a fresh mapping chosen by the kernel (no address hint), so it
    // cannot overlap memory Rust owns; the file is at least `len` long
    // (checked or truncated by the callers).
    let p = unsafe {
        mmap(
            None,
            len,
            ProtFlags::PROT_READ | ProtFlags::PROT_WRITE,
            MapFlags::MAP_SHARED,
            fd,
            0,
        )
    }
    .map_err(os_err(format!("mapping {what}")))?;
    Ok(p.cast())
}

/// Creates a zeroed node-shared segment of `len` bytes named `name`.
pub fn allocate(len: usize, name: &str) -> Result<Memory<'static>> {
    let size = map_len(len)?;
    let cname =
        CString::new(name).map_err(|_| Error::InvalidArgument(format!("segment name {name:?}")))?;
    let fd = nix::sys::memfd::memfd_create(&cname, nix::sys::memfd::MemFdCreateFlag::MFD_CLOEXEC)
        .map_err(os_err(format!("memfd_create for {name}")))?;
    // Owner-only (a memfd starts at 0777): a peer opening it through
    // /proc/<pid>/fd passes the same-user ptrace check and then this mode.
    nix::sys::stat::fchmod(std::os::fd::AsRawFd::as_raw_fd(&fd), Mode::S_IRUSR | Mode::S_IWUSR)
        .map_err(os_err(format!("restricting {name} to mode 0600")))?;
    nix::unistd::ftruncate(&fd, size.get() as i64)
        .map_err(os_err(format!("sizing {name} to {size} bytes")))?;
    let p = map_shared(&fd, size, name)?;
    // SAFETY: `p` is the live read-write shared mapping of `size` bytes just
    // made; the returned Memory is its only owner. A fresh memfd reads as
    // zeros, like `Memory::allocate`.
    Ok(unsafe { Memory::from_mapping(p, len, size.get(), Some(fd)) })
}

/// Where a peer finds a segment: this process's pid and the memfd number,
/// packed into one descriptor word (`pid << 32 | fd`).
pub fn locator(mem: &Memory<'_>) -> Option<u64> {
    use std::os::fd::AsRawFd;
    let fd = mem.shared_fd()?.as_raw_fd();
    Some(((std::process::id() as u64) << 32) | fd as u32 as u64)
}

/// Maps the segment a node-local peer published as `locator`, expecting
/// the memfd `name` and at least `len` bytes.
pub fn map_peer(locator: u64, name: &str, len: usize) -> Result<Memory<'static>> {
    let (pid, fd) = ((locator >> 32) as u32, locator as u32);
    if pid == 0 || pid > i32::MAX as u32 || fd > i32::MAX as u32 {
        return Err(Error::Protocol {
            peer: format!("owner of {name}"),
            message: format!("segment locator {locator:#x}: pid {pid} / fd {fd} out of range"),
        });
    }
    let path = format!("/proc/{pid}/fd/{fd}");
    let link = std::fs::read_link(&path).map_err(|e| Error::io(format!("reading {path}"), e))?;
    let want = format!("/memfd:{name}");
    let link = link.to_string_lossy();
    if link != want && link != format!("{want} (deleted)") {
        return Err(Error::Protocol {
            peer: format!("process {pid}"),
            message: format!("{path} is '{link}', not the memfd {name}"),
        });
    }
    let file = open(
        path.as_str(),
        OFlag::O_RDWR | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(os_err(format!("opening {path} ({name})")))?;
    // SAFETY: `open` returned a fresh descriptor that nothing else owns.
    let file = unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(file) };
    let size = map_len(len)?;
    let st = fstat(std::os::fd::AsRawFd::as_raw_fd(&file))
        .map_err(os_err(format!("fstat of {path}")))?;
    if (st.st_size as u64) < size.get() as u64 {
        return Err(Error::Protocol {
            peer: format!("process {pid}"),
            message: format!(
                "{name} has {} bytes, the window needs {}",
                st.st_size,
                size.get()
            ),
        });
    }
    let p = map_shared(&file, size, name)?;
    // SAFETY: `p` is the live read-write shared mapping of `size` bytes just
    // made; the returned Memory is its only owner. (The descriptor may be
    // closed now: the mapping keeps the file alive.)
    Ok(unsafe { Memory::from_mapping(p, len, size.get(), None) })
}

/// Whether the process that published `locator` has exited (no such
/// process, or a zombie): a failed [`map_peer`] is then a departed peer,
/// not a broken segment.
pub fn owner_gone(locator: u64) -> bool {
    let pid = (locator >> 32) as u32;
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the command name's closing parenthesis.
        Ok(stat) => matches!(
            stat.rsplit(')').next().and_then(|r| r.trim_start().chars().next()),
            Some('Z' | 'X')
        ),
        Err(_) => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_departed_owner_is_told_from_a_live_one() {
        let name = segment_name(12, 4);
        let a = allocate(64, &name).unwrap();
        let loc = locator(&a).unwrap();
        assert!(!owner_gone(loc));
        // A child that has exited and been reaped: no such process.
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id() as u64;
        child.wait().unwrap();
        assert!(owner_gone(pid << 32 | (loc & 0xffff_ffff)));
    }

    #[test]
    fn segments_are_owner_only_and_nowhere_in_dev_shm() {
        let name = segment_name(11, 3);
        let a = allocate(64, &name).unwrap();
        let loc = locator(&a).unwrap();
        let path = format!("/proc/self/fd/{}", loc & 0xffff_ffff);
        let meta = std::fs::metadata(&path).unwrap();
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(meta.permissions().mode() & 0o777, 0o600, "{path}");
        // A memfd has no name in any file system: nothing to unlink, nothing
        // left behind by a crash.
        let leftover = std::fs::read_dir("/dev/shm")
            .map(|d| d.flatten().any(|e| e.file_name().to_string_lossy().contains(&name)))
            .unwrap_or(false);
        assert!(!leftover);
    }

    #[test]
    fn own_segment_maps_twice() {
        let name = segment_name(7, 0);
        let a = allocate(100, &name).unwrap();
        assert_eq!(a.len(), 100);
        a.write(96, &[1, 2, 3, 4]).unwrap();
        let loc = locator(&a).unwrap();
        let b = map_peer(loc, &name, 100).unwrap();
        let mut out = [0u8; 4];
        b.read(96, &mut out).unwrap();
        assert_eq!(out, [1, 2, 3, 4]);
        b.write(0, &[9]).unwrap();
        a.read(0, &mut out[..1]).unwrap();
        assert_eq!(out[0], 9);
        assert!(b.read(98, &mut out).is_err(), "bounds kept");
        // Wrong name, too long, bad locator: refused before mapping.
        assert!(map_peer(loc, &segment_name(8, 0), 100).is_err());
        assert!(map_peer(loc, &name, 5000).is_err());
        assert!(map_peer(0, &name, 100).is_err());
        assert!(map_peer(loc | (1 << 63), &name, 100).is_err());
        assert!(map_peer((loc & !0xffff_ffff) | 0x7fff_fff0, &name, 100).is_err());
    }

    #[test]
    fn parts_of_a_node_segment() {
        let whole = std::sync::Arc::new(allocate(101, &node_segment_name(9)).unwrap());
        let a = Memory::part(&whole, 0, 40).unwrap();
        let b = Memory::part(&whole, 40, 60).unwrap();
        let empty = Memory::part(&whole, 101, 0).unwrap();
        assert_eq!(b.addr(), a.addr() + 40, "contiguous");
        assert_eq!((empty.len(), b.whole().map(|(_, off)| off)), (0, Some(40)));
        // Out of the segment (peer-provided offset or length): refused.
        assert!(Memory::part(&whole, 100, 2).is_err());
        assert!(Memory::part(&whole, usize::MAX, 1).is_err());
        b.write(0, &[7; 4]).unwrap();
        drop(whole);
        // The parts keep the mapping alive.
        let mut out = [0u8; 4];
        a.read(40 - 4, &mut out).unwrap();
        assert_eq!(out, [0; 4]);
        b.read(0, &mut out).unwrap();
        assert_eq!(out, [7; 4]);
        assert!(b.read(58, &mut out).is_err(), "bounds of the part");
    }
}
