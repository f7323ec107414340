//! A bounded cache of registrations of user buffers that forgets a
//! registration as soon as its memory is unmapped, moved or emptied — so a
//! buffer whose address is later reused for other memory never hits a
//! stale registration.
//!
//! A registration (`ibv_reg_mr`) pins the pages that back a virtual range
//! when it is made. If the program then unmaps that range (`free` of a
//! large block, `munmap`, `mremap`, `madvise(MADV_DONTNEED)`, a `MAP_FIXED`
//! mapping over it) and maps new memory at the same address, a cached
//! registration still names the *old* pages: a put from the new buffer
//! would send the old bytes. The cache learns of every such change from a
//! `userfaultfd` of its own — no hook in the allocator, no global state of
//! the program's: each cached range is registered with the descriptor
//! (`UFFDIO_REGISTER`, missing-page mode), and the kernel reports
//! `UFFD_EVENT_UNMAP`, `UFFD_EVENT_REMOVE` and `UFFD_EVENT_REMAP` for it.
//! A monitor thread reads those reports and drops every cached entry they
//! touch.
//!
//! # Invariants
//!
//! * **No stale hit.** The kernel holds the thread that unmaps, moves or
//!   empties a watched range until the monitor has *read* the report. The
//!   monitor reads reports only while holding the cache's lock and
//!   releases it only after dropping the entries they touch; every lookup
//!   takes the same lock. So once `munmap` (or `madvise`, `mremap`)
//!   returns, no lookup can return an entry for the range.
//! * **Nobody waits for a page.** Missing-page mode means a fault on a
//!   watched page that has no page (after `MADV_DONTNEED`, or a shared
//!   mapping's file shrinking) is reported to the monitor and the faulting
//!   thread waits. The monitor answers by unregistering the page's range
//!   (the kernel then retries the fault normally) and forgets the entries
//!   on it. It unregisters every range of a batch of reports *before* it
//!   allocates or frees anything: its own allocations could land on a page
//!   just emptied.
//! * **No fault under the lock.** Lookups and inserts touch no watched
//!   memory while they hold the lock (the registration itself is made
//!   before taking it), so the monitor, which needs the lock, can always
//!   answer a fault.
//! * Closing the descriptor (dropping the cache) unregisters every range.
//!
//! Where `userfaultfd` is unavailable (a kernel without it, or an
//! unprivileged process where `vm.unprivileged_userfaultfd` is 0 and the
//! kernel predates `UFFD_USER_MODE_ONLY`), or a range cannot be watched
//! (another descriptor watches it, or it is a file mapping), nothing is
//! cached: each operation registers and deregisters its buffer, as without
//! a cache. With `UFFD_USER_MODE_ONLY` (the unprivileged case) a system
//! call that writes into a watched page in the instant between that page
//! being emptied by `MADV_DONTNEED` and the monitor unregistering it gets
//! `EFAULT` instead of waiting.

use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;

use linux_raw_sys::general as uapi;
use linux_raw_sys::ioctl as nr;
use nix::poll::{PollFd, PollFlags, PollTimeout};
use nix::sys::eventfd::{EfdFlags, EventFd};

/// Bounds of a cache: entries, and bytes of the buffers they hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Most entries kept (0: no cache).
    pub entries: usize,
    /// Most bytes of buffers kept registered.
    pub bytes: usize,
}

/// Counters of a cache.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct CacheStats {
    /// Lookups that found a registration.
    pub hits: u64,
    /// Registrations inserted.
    pub inserted: u64,
    /// Entries dropped because their memory was unmapped, moved or
    /// emptied (or a page of it faulted in missing).
    pub invalidated: u64,
    /// Entries dropped to stay within [`Limits`].
    pub evicted: u64,
}

struct Entry<V> {
    /// The buffer the value registers: `[addr, addr + len)`.
    addr: usize,
    len: usize,
    /// Its pages, watched by the userfaultfd.
    pages: (usize, usize),
    value: V,
    /// Last use (the cache's clock), for least-recently-used eviction.
    used: u64,
}

struct State<V> {
    entries: Vec<Entry<V>>,
    /// Values the monitor forgot, dropped by the next insert or removal
    /// outside the lock (the monitor neither allocates nor frees: a
    /// `free` can empty heap pages with `MADV_DONTNEED`, which waits for
    /// the monitor to read the report). Its capacity, reserved up front,
    /// holds every entry there can be.
    graveyard: Vec<V>,
    bytes: usize,
    clock: u64,
}

struct Shared<V> {
    uffd: OwnedFd,
    state: Mutex<State<V>>,
    limits: Limits,
    hits: AtomicU64,
    inserted: AtomicU64,
    invalidated: AtomicU64,
    evicted: AtomicU64,
}

/// A bounded cache of values (registrations) keyed by the buffer they
/// cover, invalidated when the buffer's memory changes. See the module
/// documentation.
pub struct RegCache<V: Send + 'static> {
    shared: Arc<Shared<V>>,
    stop: Arc<EventFd>,
    monitor: Option<JoinHandle<()>>,
}

fn page_size() -> usize {
    rustix::param::page_size()
}

fn page_range(addr: usize, len: usize) -> Option<(usize, usize)> {
    let p = page_size();
    let end = addr.checked_add(len)?.checked_add(p - 1)? & !(p - 1);
    Some((addr & !(p - 1), end))
}

fn overlaps(a: (usize, usize), b: (usize, usize)) -> bool {
    a.0 < b.1 && b.0 < a.1
}

/// Opens a userfaultfd with the events the cache needs: privileged first
/// (faults from system calls wait as from user space), then
/// `UFFD_USER_MODE_ONLY` (allowed unprivileged on Linux ≥ 5.11).
fn open_uffd() -> std::result::Result<OwnedFd, String> {
    use rustix::mm::UserfaultfdFlags as F;
    let base = F::CLOEXEC | F::NONBLOCK;
    let user_only = F::from_bits_retain(uapi::UFFD_USER_MODE_ONLY);
    let mut last = String::new();
    for flags in [base, base | user_only] {
        // SAFETY: creating the descriptor touches no memory; what it can
        // do to this process (missing-page waits) is what the module's
        // invariants govern.
        match unsafe { rustix::mm::userfaultfd(flags) } {
            Ok(fd) => {
                let mut api = uapi::uffdio_api {
                    api: u64::from(uapi::UFFD_API),
                    features: u64::from(
                        uapi::UFFD_FEATURE_EVENT_UNMAP
                            | uapi::UFFD_FEATURE_EVENT_REMOVE
                            | uapi::UFFD_FEATURE_EVENT_REMAP
                            | uapi::UFFD_FEATURE_MISSING_SHMEM
                            | uapi::UFFD_FEATURE_MISSING_HUGETLBFS,
                    ),
                    ioctls: 0,
                };
                // SAFETY: UFFDIO_API reads and writes one `uffdio_api`.
                let r = unsafe {
                    rustix::ioctl::ioctl(
                        &fd,
                        rustix::ioctl::Updater::<{ nr::UFFDIO_API as rustix::ioctl::Opcode }, _>::new(&mut api),
                    )
                };
                return match r {
                    Ok(()) => Ok(fd),
                    Err(e) => Err(format!("UFFDIO_API with unmap, remove and remap events: {e}")),
                };
            }
            Err(e) => last = format!("userfaultfd: {e}"),
        }
    }
    Err(last)
}

/// Watches `[start, end)` for unmap, remove, remap and missing pages.
fn watch(uffd: &OwnedFd, (start, end): (usize, usize)) -> rustix::io::Result<()> {
    let mut reg = uapi::uffdio_register {
        range: uapi::uffdio_range {
            start: start as u64,
            len: (end - start) as u64,
        },
        mode: u64::from(uapi::UFFDIO_REGISTER_MODE_MISSING),
        ioctls: 0,
    };
    // SAFETY: UFFDIO_REGISTER reads and writes one `uffdio_register`; it
    // changes no memory, only which faults in the range are reported.
    unsafe {
        rustix::ioctl::ioctl(
            uffd,
            rustix::ioctl::Updater::<{ nr::UFFDIO_REGISTER as rustix::ioctl::Opcode }, _>::new(&mut reg),
        )
    }
}

/// Stops watching `[start, end)`; a thread waiting on a missing page there
/// retries its fault. Touches no memory but the stack (the monitor calls it
/// before anything that could allocate).
fn unwatch(uffd: &OwnedFd, (start, end): (usize, usize)) -> rustix::io::Result<()> {
    if start >= end {
        return Ok(());
    }
    let mut range = uapi::uffdio_range {
        start: start as u64,
        len: (end - start) as u64,
    };
    // SAFETY: UFFDIO_UNREGISTER reads one `uffdio_range`.
    unsafe {
        rustix::ioctl::ioctl(
            uffd,
            rustix::ioctl::Updater::<{ nr::UFFDIO_UNREGISTER as rustix::ioctl::Opcode }, _>::new(&mut range),
        )
    }
}

impl<V: Send + 'static> RegCache<V> {
    /// A cache within `limits` with its monitor thread; `Err` says why
    /// there can be none (`limits.entries` 0, or no userfaultfd).
    ///
    /// # Errors
    /// The reason, for the log.
    pub fn new(limits: Limits) -> std::result::Result<RegCache<V>, String> {
        if limits.entries == 0 || limits.bytes == 0 {
            return Err("disabled (ONESIDED_MR_CACHE=0)".into());
        }
        let uffd = open_uffd()?;
        let stop = Arc::new(EventFd::from_flags(EfdFlags::EFD_CLOEXEC | EfdFlags::EFD_NONBLOCK).map_err(|e| format!("eventfd: {e}"))?);
        let shared = Arc::new(Shared {
            uffd,
            state: Mutex::new(State {
                entries: Vec::with_capacity(limits.entries + 1),
                graveyard: Vec::with_capacity(limits.entries + 1),
                bytes: 0,
                clock: 0,
            }),
            limits,
            hits: AtomicU64::new(0),
            inserted: AtomicU64::new(0),
            invalidated: AtomicU64::new(0),
            evicted: AtomicU64::new(0),
        });
        let (s, st) = (shared.clone(), stop.clone());
        let monitor = std::thread::Builder::new()
            .name("onesided-regmon".into())
            .spawn(move || monitor(&s, &st))
            .map_err(|e| format!("starting the monitor thread: {e}"))?;
        Ok(RegCache {
            shared,
            stop,
            monitor: Some(monitor),
        })
    }

    fn state(&self) -> MutexGuard<'_, State<V>> {
        self.shared.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The cached value covering `[addr, addr + len)`, if any.
    pub fn get(&self, addr: usize, len: usize) -> Option<V>
    where
        V: Clone,
    {
        let end = addr.checked_add(len)?;
        let mut s = self.state();
        s.clock += 1;
        let now = s.clock;
        let e = s.entries.iter_mut().find(|e| e.addr <= addr && end <= e.addr + e.len)?;
        e.used = now;
        self.shared.hits.fetch_add(1, Ordering::Relaxed);
        Some(e.value.clone())
    }

    /// Caches `value`, the registration of `[addr, addr + len)`, evicting
    /// the least recently used entries beyond the limits; whether it was
    /// kept (`false`: the range cannot be watched, or is larger than the
    /// byte limit — the caller then owns the only copy).
    pub fn insert(&self, addr: usize, len: usize, value: V) -> bool {
        let Some(pages) = page_range(addr, len) else {
            return false;
        };
        if len > self.shared.limits.bytes {
            return false;
        }
        let mut evicted = Vec::new();
        {
            let mut s = self.state();
            evicted.append(&mut s.graveyard);
            if let Err(e) = watch(&self.shared.uffd, pages) {
                drop(s);
                tracing::debug!("registration cache: not watching {len} bytes at {addr:#x}: {e}");
                return false;
            }
            s.clock += 1;
            let used = s.clock;
            s.entries.push(Entry {
                addr,
                len,
                pages,
                value,
                used,
            });
            s.bytes += len;
            self.shared.inserted.fetch_add(1, Ordering::Relaxed);
            while s.entries.len() > self.shared.limits.entries || s.bytes > self.shared.limits.bytes {
                let Some(i) = (0..s.entries.len()).min_by_key(|&i| s.entries[i].used) else {
                    break;
                };
                let e = s.entries.swap_remove(i);
                s.bytes -= e.len;
                // Unwatched unless another entry shares a page with it.
                if !s.entries.iter().any(|o| overlaps(o.pages, e.pages)) {
                    let _ = unwatch(&self.shared.uffd, e.pages);
                }
                self.shared.evicted.fetch_add(1, Ordering::Relaxed);
                evicted.push(e.value);
            }
        }
        // Dropped (deregistered) outside the lock.
        drop(evicted);
        true
    }

    /// Drops the entries whose value `matches` (a registration found
    /// broken, or ones to release for room); how many.
    pub fn remove(&self, matches: impl Fn(&V) -> bool) -> usize {
        let mut gone = Vec::new();
        let mut dead = Vec::new();
        {
            let mut s = self.state();
            dead.append(&mut s.graveyard);
            let mut i = 0;
            while i < s.entries.len() {
                if matches(&s.entries[i].value) {
                    let e = s.entries.swap_remove(i);
                    s.bytes -= e.len;
                    if !s.entries.iter().any(|o| overlaps(o.pages, e.pages)) {
                        let _ = unwatch(&self.shared.uffd, e.pages);
                    }
                    gone.push(e.value);
                } else {
                    i += 1;
                }
            }
        }
        drop(dead);
        gone.len()
    }

    /// The cache's counters. Taken under the lock, so they include every
    /// report read so far (an `munmap` that returned is counted).
    pub fn stats(&self) -> CacheStats {
        let _s = self.state();
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        CacheStats {
            hits: l(&self.shared.hits),
            inserted: l(&self.shared.inserted),
            invalidated: l(&self.shared.invalidated),
            evicted: l(&self.shared.evicted),
        }
    }

    /// Entries held now.
    pub fn len(&self) -> usize {
        self.state().entries.len()
    }

    /// Whether no entry is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<V: Send + 'static> Drop for RegCache<V> {
    fn drop(&mut self) {
        let _ = self.stop.write(1);
        if let Some(h) = self.monitor.take() {
            let _ = h.join();
        }
        // The entries drop with the last `Arc<Shared>` (the monitor's is
        // gone), then the descriptor closes, unwatching every range.
    }
}

/// Reports read per batch.
const BATCH: usize = 16;
/// Bytes of one `struct uffd_msg`.
const MSG: usize = 32;

/// What one report asks: the range whose entries go, and the range to
/// unwatch (empty when the kernel already dropped it with the mapping).
fn decode(m: &[u8]) -> Option<((usize, usize), (usize, usize))> {
    let word = |at: usize| -> Option<usize> {
        let b: [u8; 8] = m.get(at..at + 8)?.try_into().ok()?;
        usize::try_from(u64::from_ne_bytes(b)).ok()
    };
    let event = u32::from(*m.first()?);
    match event {
        uapi::UFFD_EVENT_PAGEFAULT => {
            // flags at 8, address at 16.
            let p = page_size();
            let page = word(16)? & !(p - 1);
            Some(((page, page + p), (page, page + p)))
        }
        uapi::UFFD_EVENT_REMOVE => {
            let r = (word(8)?, word(16)?);
            Some((r, r))
        }
        uapi::UFFD_EVENT_UNMAP => Some(((word(8)?, word(16)?), (0, 0))),
        uapi::UFFD_EVENT_REMAP => {
            // from, to, len: the old range is gone; the watch moved to the
            // new one, which no entry covers.
            let (from, to, len) = (word(8)?, word(16)?, word(24)?);
            Some(((from, from.checked_add(len)?), (to, to.checked_add(len)?)))
        }
        _ => None,
    }
}

fn monitor<V: Send + 'static>(shared: &Shared<V>, stop: &EventFd) {
    let mut buf = [0u8; BATCH * MSG];
    let mut ranges = [(0usize, 0usize); BATCH];
    // The monitor never stops before the cache does: a thread unmapping a
    // watched range waits until its report is read.
    let mut complained = false;
    loop {
        let mut fds = [
            PollFd::new(shared.uffd.as_fd(), PollFlags::POLLIN),
            PollFd::new(stop.as_fd(), PollFlags::POLLIN),
        ];
        if let Err(e) = nix::poll::poll(&mut fds, PollTimeout::NONE) {
            if e != nix::errno::Errno::EINTR {
                if !complained {
                    complained = true;
                    tracing::error!("registration cache monitor: poll: {e}");
                }
                // Not expected; do not spin on it.
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            continue;
        }
        if fds[1].revents().is_some_and(|r| !r.is_empty()) {
            return;
        }
        // Reports are read under the lock: see "No stale hit".
        let mut s = shared.state.lock().unwrap_or_else(|p| p.into_inner());
        let mut failed = None;
        loop {
            let n = match rustix::io::read(&shared.uffd, &mut buf) {
                Ok(n) => n,
                Err(rustix::io::Errno::AGAIN) => break,
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            };
            if n == 0 {
                break;
            }
            // First unwatch every range of the batch, touching nothing but
            // the stack ("Nobody waits for a page").
            let mut k = 0;
            for m in buf[..n].chunks_exact(MSG) {
                if let Some((gone, off)) = decode(m) {
                    let _ = unwatch(&shared.uffd, off);
                    ranges[k] = gone;
                    k += 1;
                }
            }
            // Then forget the entries the reports touch, into the
            // graveyard's reserved room (no allocation, no free).
            let st = &mut *s;
            let mut i = 0;
            while i < st.entries.len() {
                let e = &st.entries[i];
                if !ranges[..k].iter().any(|&r| overlaps(r, e.pages)) {
                    i += 1;
                    continue;
                }
                let e = st.entries.swap_remove(i);
                st.bytes -= e.len;
                shared.invalidated.fetch_add(1, Ordering::Relaxed);
                if st.graveyard.len() < st.graveyard.capacity() {
                    st.graveyard.push(e.value);
                } else {
                    // Not reached: entries and graveyard together never
                    // outgrow the room reserved for the entries (inserts
                    // and removals empty the graveyard first). Leaked
                    // (stays registered) rather than freed here.
                    std::mem::forget(e.value);
                }
            }
        }
        drop(s);
        if let Some(e) = failed {
            if !complained {
                complained = true;
                tracing::error!("registration cache monitor: read: {e}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::num::NonZeroUsize;
    use std::ptr::NonNull;

    use nix::sys::mman::{mmap_anonymous, munmap, MapFlags, ProtFlags};

    use super::*;

    fn cache(entries: usize) -> Option<RegCache<u32>> {
        match RegCache::new(Limits {
            entries,
            bytes: 1 << 30,
        }) {
            Ok(c) => Some(c),
            Err(why) => {
                eprintln!("SKIP: no userfaultfd here: {why}");
                None
            }
        }
    }

    fn map(pages: usize) -> NonNull<u8> {
        let len = NonZeroUsize::new(pages * page_size()).unwrap();
        // SAFETY: a fresh private anonymous mapping.
        let p = unsafe {
            mmap_anonymous(None, len, ProtFlags::PROT_READ | ProtFlags::PROT_WRITE, MapFlags::MAP_PRIVATE)
        };
        p.unwrap().cast()
    }

    fn touch(p: NonNull<u8>, pages: usize, v: u8) {
        for i in 0..pages {
            // SAFETY: within the mapping made by `map`.
            unsafe { p.as_ptr().add(i * page_size()).write_volatile(v) };
        }
    }

    #[test]
    fn an_unmapped_buffer_is_forgotten_before_munmap_returns() {
        let Some(c) = cache(8) else { return };
        let p = map(3);
        touch(p, 3, 1);
        let a = p.as_ptr() as usize;
        assert!(c.insert(a + 100, 2 * page_size(), 7));
        assert_eq!(c.get(a + 100, 10), Some(7));
        assert_eq!(c.get(a + 200, page_size()), Some(7), "inside the entry");
        assert_eq!(c.get(a, 10), None, "starts before the entry");
        // SAFETY: the mapping from `map`, unused from here on.
        unsafe { munmap(p.cast(), 3 * page_size()).unwrap() };
        assert_eq!(c.get(a + 100, 10), None);
        assert_eq!(c.stats().invalidated, 1);
        assert!(c.is_empty());
    }

    #[test]
    fn a_mapping_made_over_a_buffer_forgets_it() {
        let Some(c) = cache(8) else { return };
        let p = map(2);
        touch(p, 2, 1);
        let a = p.as_ptr() as usize;
        assert!(c.insert(a, 2 * page_size(), 1));
        let len = NonZeroUsize::new(2 * page_size()).unwrap();
        // SAFETY: replaces our own mapping at the same address.
        let q = unsafe {
            mmap_anonymous(
                NonZeroUsize::new(a),
                len,
                ProtFlags::PROT_READ | ProtFlags::PROT_WRITE,
                MapFlags::MAP_PRIVATE | MapFlags::MAP_FIXED,
            )
        }
        .unwrap();
        assert_eq!(q.as_ptr() as usize, a, "the same address, new memory");
        assert_eq!(c.get(a, 8), None);
        // SAFETY: the new mapping, unused from here on.
        unsafe { munmap(q, 2 * page_size()).unwrap() };
    }

    #[test]
    fn emptied_pages_forget_the_buffer_and_fault_in_normally() {
        let Some(c) = cache(8) else { return };
        let p = map(4);
        touch(p, 4, 9);
        let a = p.as_ptr() as usize;
        assert!(c.insert(a, 4 * page_size(), 3));
        // SAFETY: our own mapping; its contents are not needed.
        unsafe {
            nix::sys::mman::madvise(
                NonNull::new_unchecked(p.as_ptr().add(page_size())).cast(),
                page_size(),
                nix::sys::mman::MmapAdvise::MADV_DONTNEED,
            )
            .unwrap()
        };
        assert_eq!(c.get(a, 8), None);
        // The emptied page reads as zero and takes writes: no wait on the
        // (unwatched) page.
        // SAFETY: within the mapping.
        unsafe {
            assert_eq!(p.as_ptr().add(page_size()).read_volatile(), 0);
            p.as_ptr().add(page_size()).write_volatile(5);
            assert_eq!(p.as_ptr().add(page_size()).read_volatile(), 5);
            munmap(p.cast(), 4 * page_size()).unwrap();
        }
    }

    #[test]
    fn a_missing_page_in_a_watched_range_is_answered() {
        let Some(c) = cache(8) else { return };
        let p = map(2);
        touch(p, 1, 4); // the second page never faulted in
        let a = p.as_ptr() as usize;
        assert!(c.insert(a, 2 * page_size(), 8));
        // A fault on the missing page waits for the monitor, which
        // unwatches it and forgets the entry.
        // SAFETY: within the mapping.
        unsafe { p.as_ptr().add(page_size()).write_volatile(6) };
        assert_eq!(c.get(a, 8), None);
        assert_eq!(c.stats().invalidated, 1);
        // SAFETY: the mapping, unused from here on.
        unsafe { munmap(p.cast(), 2 * page_size()).unwrap() };
    }

    #[test]
    fn a_moved_buffer_is_forgotten() {
        let Some(c) = cache(8) else { return };
        let p = map(2);
        touch(p, 2, 1);
        let a = p.as_ptr() as usize;
        assert!(c.insert(a, 2 * page_size(), 2));
        // Moved (not grown in place) onto a mapping of our own elsewhere.
        let dst = map(2);
        // SAFETY: moves our own mapping over another of ours.
        let q = unsafe {
            nix::sys::mman::mremap(
                p.cast(),
                2 * page_size(),
                2 * page_size(),
                nix::sys::mman::MRemapFlags::MREMAP_MAYMOVE | nix::sys::mman::MRemapFlags::MREMAP_FIXED,
                Some(dst.cast()),
            )
        }
        .unwrap();
        assert_eq!(q.as_ptr() as usize, dst.as_ptr() as usize);
        assert_eq!(c.get(a, 8), None);
        assert_eq!(c.stats().invalidated, 1);
        // The moved pages keep their bytes and take writes (not watched).
        // SAFETY: within the moved mapping.
        unsafe { assert_eq!(q.cast::<u8>().as_ptr().read_volatile(), 1) };
        touch(q.cast(), 2, 3);
        // SAFETY: the moved mapping, unused from here on.
        unsafe { munmap(q, 2 * page_size()).unwrap() };
    }

    #[test]
    fn the_least_recently_used_entry_goes_first() {
        let Some(c) = cache(2) else { return };
        let p = map(3);
        touch(p, 3, 1);
        let a = p.as_ptr() as usize;
        let ps = page_size();
        assert!(c.insert(a, ps, 10));
        assert!(c.insert(a + ps, ps, 11));
        assert_eq!(c.get(a, 1), Some(10)); // 11 is now the oldest
        assert!(c.insert(a + 2 * ps, ps, 12));
        assert_eq!(c.get(a + ps, 1), None);
        assert_eq!((c.get(a, 1), c.get(a + 2 * ps, 1)), (Some(10), Some(12)));
        assert_eq!(c.stats().evicted, 1);
        assert_eq!(c.remove(|v| *v == 10), 1);
        assert_eq!(c.len(), 1);
        // SAFETY: the mapping, unused from here on.
        unsafe { munmap(p.cast(), 3 * ps).unwrap() };
        assert!(c.is_empty());
    }

    #[test]
    fn a_buffer_over_the_byte_limit_is_not_kept() {
        let c = match RegCache::<u32>::new(Limits { entries: 4, bytes: 4096 }) {
            Ok(c) => c,
            Err(why) => {
                eprintln!("SKIP: no userfaultfd here: {why}");
                return;
            }
        };
        let p = map(2);
        touch(p, 2, 1);
        assert!(!c.insert(p.as_ptr() as usize, 4097, 1));
        assert!(c.is_empty());
        // SAFETY: the mapping, unused from here on.
        unsafe { munmap(p.cast(), 2 * page_size()).unwrap() };
    }
}
