//! Window memory: a byte region that remote processes read and write.
//!
//! Remote peers (through the NIC or the provider's progress code) write into
//! this memory at any time during an epoch, so the library never creates Rust
//! references to it; all local access goes through the bounds-checked copies
//! below. Concurrent local and remote access to the *same* bytes is erroneous
//! in MPI and gives undefined values here, never memory unsafety.

use std::alloc::{self, Layout};
use std::marker::PhantomData;
use std::ptr::NonNull;
use std::sync::atomic::{fence, Ordering};

use crate::error::{Error, Result};

enum Owner {
    /// Allocated (zeroed) by the library with this layout.
    Library(Layout),
    /// Borrowed from the user for `'a`.
    User,
    /// A `Vec<T>` handed over by the user (dynamic-window attach), kept
    /// here untouched so that only raw-pointer copies reach its buffer.
    Vec(Box<dyn std::any::Any + Send + Sync>),
    /// A mapping of `map_len` bytes, unmapped on drop: shared
    /// (`transport::shm`; `fd` is the memfd when this process created the
    /// segment) or the library's own anonymous one (`allocate_huge`, no
    /// `fd`).
    Mapped {
        map_len: usize,
        fd: Option<std::os::fd::OwnedFd>,
    },
    /// A sub-range of a node-shared segment (one rank's part of a
    /// contiguous shared-memory window), keeping the whole mapping alive.
    Part(std::sync::Arc<Memory<'static>>),
}

/// A registered-memory candidate: allocated by the library or borrowed.
pub struct Memory<'a> {
    ptr: NonNull<u8>,
    len: usize,
    owner: Owner,
    _borrow: PhantomData<&'a mut [u8]>,
}

// SAFETY: the region is plain bytes accessed only through raw-pointer copies.
unsafe impl Send for Memory<'_> {}
// SAFETY: as above; concurrent copies race only on values, never on memory.
unsafe impl Sync for Memory<'_> {}

/// Alignment of library-allocated windows: a page, so that registration and
/// any later shared-memory mapping work on whole pages.
pub const WINDOW_ALIGN: usize = 4096;

/// A transparent huge page (x86_64, aarch64 with 4 KiB base pages).
const HUGE_PAGE: usize = 2 << 20;
/// Windows of at least this many bytes are mapped on huge-page boundaries
/// with `MADV_HUGEPAGE`, so that the kernel may back them with transparent
/// huge pages (`/sys/kernel/mm/transparent_hugepage/enabled` set to
/// `madvise` or `always`): an access pattern that touches every row of a
/// large matrix (a halo column) then walks a few huge pages instead of one
/// 4-KiB page per row.
const HUGE_MIN: usize = 4 << 20;

impl Memory<'static> {
    /// Allocates `len` zeroed bytes (at least one page, page-aligned).
    pub fn allocate(len: usize) -> Result<Memory<'static>> {
        Self::allocate_with(len, false)
    }

    /// As [`Memory::allocate`]; with `huge`, a region of 4 MiB or more is
    /// 2-MiB-aligned and advised for transparent huge pages.
    pub fn allocate_with(len: usize, huge: bool) -> Result<Memory<'static>> {
        // A length within a page of usize::MAX has no whole-page size.
        let size = len
            .max(1)
            .checked_next_multiple_of(WINDOW_ALIGN)
            .ok_or_else(|| Error::InvalidArgument(format!("window of {len} bytes: too large")))?;
        if huge && size >= HUGE_MIN {
            if let Some(m) = Self::allocate_huge(len, size) {
                return Ok(m);
            }
        }
        let layout = Layout::from_size_align(size, WINDOW_ALIGN)
            .map_err(|e| Error::InvalidArgument(format!("window of {len} bytes: {e}")))?;
        // SAFETY: layout has non-zero size.
        let p = unsafe { alloc::alloc_zeroed(layout) };
        let ptr = NonNull::new(p)
            .ok_or_else(|| Error::Exhausted(format!("allocating a window of {len} bytes")))?;
        Ok(Memory {
            ptr,
            len,
            owner: Owner::Library(layout),
            _borrow: PhantomData,
        })
    }
}

impl Memory<'static> {
    /// An anonymous private mapping of `size` bytes rounded up to whole
    /// huge pages, starting on a huge-page boundary, advised
    /// `MADV_HUGEPAGE` (zeroed, as every fresh anonymous mapping). `None`
    /// if the mapping fails (the caller falls back to the allocator); a
    /// refused advice is harmless (small pages).
    fn allocate_huge(len: usize, size: usize) -> Option<Memory<'static>> {
        use nix::sys::mman::{madvise, mmap_anonymous, munmap, MapFlags, MmapAdvise, ProtFlags};
        let map_len = size.checked_next_multiple_of(HUGE_PAGE)?;
        let total = std::num::NonZeroUsize::new(map_len.checked_add(HUGE_PAGE)?)?;
        // SAFETY: a new anonymous private mapping at an address the kernel
        // chooses: it aliases nothing.
        let raw = unsafe {
            mmap_anonymous(
                None,
                total,
                ProtFlags::PROT_READ | ProtFlags::PROT_WRITE,
                MapFlags::MAP_PRIVATE,
            )
        }
        .ok()?;
        let base = raw.as_ptr() as usize;
        let head = base.next_multiple_of(HUGE_PAGE) - base;
        let tail = total.get() - head - map_len;
        // SAFETY: in bounds of the mapping made above (head + map_len +
        // tail = total), never null.
        let start = unsafe { raw.cast::<u8>().add(head) };
        // SAFETY: the unused head and tail of our own mapping, page-aligned
        // (mmap returns page-aligned addresses; HUGE_PAGE is a multiple of
        // the page size); nothing refers to them.
        unsafe {
            if head > 0 {
                let _ = munmap(raw, head);
            }
            if tail > 0 {
                let _ = munmap(start.add(map_len).cast(), tail);
            }
        }
        // SAFETY: advice on our own mapping; it changes no contents.
        let _ = unsafe { madvise(start.cast(), map_len, MmapAdvise::MADV_HUGEPAGE) };
        Some(Memory {
            ptr: start,
            len,
            owner: Owner::Mapped { map_len, fd: None },
            _borrow: PhantomData,
        })
    }

    /// Takes ownership of `v`; [`Memory::into_vec`] gives it back.
    pub fn from_vec<T: bytemuck::Pod + Send + Sync>(mut v: Vec<T>) -> Memory<'static> {
        let len = std::mem::size_of_val(v.as_slice());
        let ptr = NonNull::new(v.as_mut_ptr().cast::<u8>()).unwrap_or(NonNull::dangling());
        Memory {
            ptr,
            len,
            owner: Owner::Vec(Box::new(v)),
            _borrow: PhantomData,
        }
    }
}

/// Memory of the caller's own (`onesided::Buffer`, MPI_Alloc_mem): allocated
/// as a window is (zeroed, page-aligned, huge pages for large ones) but
/// never exposed — no window, peer or provider holds it except for the
/// length of an operation that borrows it like any user slice — so it is
/// handed out as ordinary Rust slices.
///
/// Invariant: `mem` is never given to anything else (no `Memory` method
/// that exposes it is called), so the only accesses to its bytes are
/// through the slices below, under Rust's borrow rules.
pub struct Private<T> {
    mem: Memory<'static>,
    len: usize,
    _elem: PhantomData<T>,
}

impl<T: bytemuck::Pod> Private<T> {
    /// `len` zeroed elements; with `huge`, 4 MiB or more are advised for
    /// transparent huge pages (as [`Memory::allocate_with`]).
    ///
    /// # Errors
    /// The size overflows, `T` needs more than page alignment, or the
    /// allocation fails.
    pub fn zeroed(len: usize, huge: bool) -> Result<Private<T>> {
        if std::mem::align_of::<T>() > WINDOW_ALIGN {
            return Err(Error::InvalidArgument(format!(
                "a buffer of an element type aligned to {} bytes (at most {WINDOW_ALIGN})",
                std::mem::align_of::<T>()
            )));
        }
        let bytes = len.checked_mul(std::mem::size_of::<T>()).ok_or_else(|| {
            Error::InvalidArgument(format!("a buffer of {len} elements: too large"))
        })?;
        Ok(Private {
            mem: Memory::allocate_with(bytes, huge)?,
            len,
            _elem: PhantomData,
        })
    }

    /// The elements.
    pub fn as_slice(&self) -> &[T] {
        // SAFETY: `mem` holds at least `len * size_of::<T>()` zeroed-then-
        // written bytes (any bit pattern is a valid `T: Pod`), aligned to a
        // page (≥ align_of::<T>(), checked in `zeroed`), alive as long as
        // `self`; by the invariant nothing but these slices reaches them,
        // and `&self` excludes the mutable one.
        unsafe { std::slice::from_raw_parts(self.mem.ptr.as_ptr().cast::<T>(), self.len) }
    }

    /// The elements, mutably.
    pub fn as_mut_slice(&mut self) -> &mut [T] {
        // SAFETY: as `as_slice`; `&mut self` makes this the only slice.
        unsafe { std::slice::from_raw_parts_mut(self.mem.ptr.as_ptr().cast::<T>(), self.len) }
    }
}

impl<'a> Memory<'a> {
    /// Whether this is a `Vec<T>` given to [`Memory::from_vec`].
    pub fn owns_vec<T: bytemuck::Pod + Send + Sync>(&self) -> bool {
        matches!(&self.owner, Owner::Vec(b) if b.is::<Vec<T>>())
    }

    /// The `Vec<T>` given to [`Memory::from_vec`] (`None` for other memory).
    pub fn into_vec<T: bytemuck::Pod + Send + Sync>(mut self) -> Option<Vec<T>> {
        let owner = std::mem::replace(&mut self.owner, Owner::User);
        match owner {
            Owner::Vec(b) => b.downcast::<Vec<T>>().ok().map(|v| *v),
            other => {
                self.owner = other;
                None
            }
        }
    }

    /// Wraps user memory for the lifetime of the borrow.
    pub fn borrow<T: bytemuck::Pod>(mem: &'a mut [T]) -> Memory<'a> {
        let bytes: &'a mut [u8] = bytemuck::cast_slice_mut(mem);
        let len = bytes.len();
        let ptr = NonNull::new(bytes.as_mut_ptr()).unwrap_or(NonNull::dangling());
        Memory {
            ptr,
            len,
            owner: Owner::User,
            _borrow: PhantomData,
        }
    }

    /// Wraps user memory with no lifetime attached, for
    /// `Window::create_borrowed` (whose caller promises what the borrow
    /// checker cannot see).
    ///
    /// # Safety
    /// `mem` must stay valid, and must not be accessed through Rust
    /// references, until the returned value (and every `Arc` holding it:
    /// the window, its registration, the exposed-memory table) is dropped.
    pub(crate) unsafe fn borrow_unbounded<T: bytemuck::Pod>(mem: &mut [T]) -> Memory<'static> {
        let bytes: &mut [u8] = bytemuck::cast_slice_mut(mem);
        let len = bytes.len();
        let ptr = NonNull::new(bytes.as_mut_ptr()).unwrap_or(NonNull::dangling());
        Memory {
            ptr,
            len,
            owner: Owner::User,
            _borrow: PhantomData,
        }
    }

    /// A second handle on the same bytes that owns nothing (dropping it
    /// frees nothing): what the in-process back-end keeps in its table of
    /// registrations, so that a peer thread reaches registered memory
    /// through the same bounds-checked atomic copies as its owner.
    ///
    /// # Safety
    /// `self`'s bytes must stay valid until the alias is dropped (a
    /// registration is removed, and its alias dropped, before the
    /// registered memory is freed: see `Registration`).
    pub(crate) unsafe fn alias(&self) -> Memory<'static> {
        Memory {
            ptr: self.ptr,
            len: self.len,
            owner: Owner::User,
            _borrow: PhantomData,
        }
    }

    /// Wraps a shared mapping made by `transport::shm`.
    ///
    /// # Safety
    /// `ptr` must be a live `MAP_SHARED` read-write mapping of `map_len`
    /// bytes that nothing else unmaps.
    pub(crate) unsafe fn from_mapping(
        ptr: NonNull<u8>,
        len: usize,
        map_len: usize,
        fd: Option<std::os::fd::OwnedFd>,
    ) -> Memory<'static> {
        Memory {
            ptr,
            len: len.min(map_len),
            owner: Owner::Mapped { map_len, fd },
            _borrow: PhantomData,
        }
    }

    /// The `len` bytes at byte `off` of `whole` as their own region (one
    /// rank's part of a contiguous shared window); the part keeps `whole`
    /// mapped. A zero-length part may sit at `whole.len()`.
    pub(crate) fn part(
        whole: &std::sync::Arc<Memory<'static>>,
        off: usize,
        len: usize,
    ) -> Result<Memory<'static>> {
        whole.check(off, len)?;
        // SAFETY: `off <= whole.len` (checked), so the pointer stays inside
        // the allocation or one past its end; it is never null.
        let p = unsafe { whole.ptr.as_ptr().add(off) };
        Ok(Memory {
            ptr: NonNull::new(p).unwrap_or(NonNull::dangling()),
            len,
            owner: Owner::Part(whole.clone()),
            _borrow: PhantomData,
        })
    }

    /// The whole segment a part belongs to, and the part's byte offset in it.
    pub(crate) fn whole(&self) -> Option<(&std::sync::Arc<Memory<'static>>, usize)> {
        match &self.owner {
            Owner::Part(w) => Some((w, self.addr().wrapping_sub(w.addr()) as usize)),
            _ => None,
        }
    }

    /// The memfd behind a node-shared segment this process created.
    pub(crate) fn shared_fd(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        match &self.owner {
            Owner::Mapped { fd: Some(fd), .. } => {
                use std::os::fd::AsFd;
                Some(fd.as_fd())
            }
            _ => None,
        }
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }
    /// True for a zero-length window.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// Start address (what `FI_MR_VIRT_ADDR` providers use as the base).
    pub fn addr(&self) -> u64 {
        self.ptr.as_ptr() as u64
    }
    pub(crate) fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// Inline, with the message out of line: every load, store and atomic
    /// on a mapped window or control word passes here (callgrind: a call
    /// of ~18 instructions each, three per lock + put + unlock).
    #[inline]
    fn check(&self, offset: usize, n: usize) -> Result<()> {
        match offset.checked_add(n) {
            Some(end) if end <= self.len => Ok(()),
            _ => Err(self.outside(offset, n)),
        }
    }

    #[cold]
    #[inline(never)]
    fn outside(&self, offset: usize, n: usize) -> Error {
        Error::InvalidArgument(format!(
            "local window access at byte {offset}, length {n}, outside {} bytes",
            self.len
        ))
    }

    /// Copies bytes out of the region.
    ///
    /// Peers (through the progress agent, the provider or their own
    /// mapping of a node-shared segment) may write the region at the same
    /// time, so the copy is made of relaxed atomic loads (see
    /// [`atomic_load_bytes`]): a racing write yields old or new bytes,
    /// never undefined behaviour.
    #[inline]
    pub fn read(&self, offset: usize, out: &mut [u8]) -> Result<()> {
        self.check(offset, out.len())?;
        fence(Ordering::Acquire);
        // SAFETY: bounds checked above; `out` is a distinct Rust allocation
        // (it cannot alias the region, which is never exposed as a reference).
        unsafe { atomic_load_bytes(self.ptr.as_ptr().add(offset), out) };
        Ok(())
    }

    /// Copies bytes into the region (relaxed atomic stores, see
    /// [`Memory::read`]).
    #[inline]
    pub fn write(&self, offset: usize, data: &[u8]) -> Result<()> {
        self.check(offset, data.len())?;
        // SAFETY: bounds checked above; `data` cannot alias the region.
        unsafe { atomic_store_bytes(self.ptr.as_ptr().add(offset), data) };
        fence(Ordering::Release);
        Ok(())
    }

    /// Writes `data`, whole blocks of `block` bytes, block `i` at byte
    /// `offset + i × stride` (a strided put: one bounds check and one
    /// fence for all blocks).
    ///
    /// # Errors
    /// A zero block, data that is no whole number of blocks, a stride
    /// shorter than a block, or blocks past the region.
    pub fn write_strided(
        &self,
        offset: usize,
        (block, stride): (usize, usize),
        data: &[u8],
    ) -> Result<()> {
        if !self.check_strided("write", offset, (block, stride), data.len())? {
            return Ok(());
        }
        let base = self.ptr.as_ptr().wrapping_add(offset);
        if block == 8 && base as usize % 8 == 0 && stride % 8 == 0 {
            // Aligned words (a column of f64 or u64): one store per block.
            for (i, w) in data.chunks_exact(8).enumerate() {
                let mut v = [0u8; 8];
                v.copy_from_slice(w);
                // SAFETY: block i ends at offset + i × stride + 8 ≤ offset
                // + span, checked above; 8-aligned (base and stride are);
                // an atomic store, as every access to exposed memory.
                unsafe {
                    (*base.add(i * stride).cast::<std::sync::atomic::AtomicU64>())
                        .store(u64::from_ne_bytes(v), Ordering::Relaxed)
                };
            }
            fence(Ordering::Release);
            return Ok(());
        }
        for (i, b) in data.chunks_exact(block).enumerate() {
            // SAFETY: block i ends at offset + i × stride + block ≤
            // offset + span, checked above; `data` cannot alias the region.
            unsafe { atomic_store_bytes(self.ptr.as_ptr().add(offset + i * stride), b) };
        }
        fence(Ordering::Release);
        Ok(())
    }

    /// Checks a strided access of `len` bytes in `block`-byte blocks
    /// `stride` bytes apart from `offset`: `Ok(false)` if it moves nothing.
    fn check_strided(
        &self,
        what: &str,
        offset: usize,
        (block, stride): (usize, usize),
        len: usize,
    ) -> Result<bool> {
        if block == 0 || len % block != 0 || stride < block {
            return Err(Error::InvalidArgument(format!(
                "strided {what} of {len} bytes in {block}-byte blocks {stride} bytes apart"
            )));
        }
        let count = len / block;
        if count == 0 {
            return Ok(false);
        }
        let span = stride
            .checked_mul(count - 1)
            .and_then(|s| s.checked_add(block));
        self.check(offset, span.unwrap_or(usize::MAX))?;
        Ok(true)
    }

    /// Reads whole blocks of `block` bytes into `out`, block `i` from
    /// byte `offset + i × stride` (the gather of a strided origin in one's
    /// own window: one bounds check and one fence for all blocks; relaxed
    /// atomic loads, as [`Memory::read`]).
    ///
    /// # Errors
    /// As [`Memory::write_strided`].
    pub fn read_strided(
        &self,
        offset: usize,
        (block, stride): (usize, usize),
        out: &mut [u8],
    ) -> Result<()> {
        if !self.check_strided("read", offset, (block, stride), out.len())? {
            return Ok(());
        }
        fence(Ordering::Acquire);
        let base = self.ptr.as_ptr().wrapping_add(offset);
        if block == 8 && base as usize % 8 == 0 && stride % 8 == 0 {
            // Aligned words (a column of f64 or u64): one load per block.
            for (i, w) in out.chunks_exact_mut(8).enumerate() {
                // SAFETY: block i ends at offset + i × stride + 8 ≤ offset
                // + span, checked above; 8-aligned (base and stride are);
                // an atomic load, as every access to exposed memory.
                let v = unsafe {
                    (*base.add(i * stride).cast::<std::sync::atomic::AtomicU64>())
                        .load(Ordering::Relaxed)
                };
                w.copy_from_slice(&v.to_ne_bytes());
            }
            return Ok(());
        }
        for (i, b) in out.chunks_exact_mut(block).enumerate() {
            // SAFETY: block i ends at offset + i × stride + block ≤ offset
            // + span, checked above; `out` cannot alias the region.
            unsafe { atomic_load_bytes(self.ptr.as_ptr().add(offset + i * stride), b) };
        }
        Ok(())
    }

    /// Copies `len` bytes inside the region (a put or get to oneself),
    /// through a bounce buffer so that overlapping ranges copy as `memmove`
    /// does.
    pub fn copy_within(&self, from: usize, to: usize, len: usize) -> Result<()> {
        self.check(from, len)?;
        self.check(to, len)?;
        const CHUNK: usize = 4096;
        let mut buf = [0u8; CHUNK];
        // Forward when the destination is below the source, else backward,
        // chunk by chunk (each chunk is read whole before it is written).
        let chunks = len.div_ceil(CHUNK);
        for k in 0..chunks {
            let k = if to <= from { k } else { chunks - 1 - k };
            let at = k * CHUNK;
            let n = CHUNK.min(len - at);
            self.read(from + at, &mut buf[..n])?;
            self.write(to + at, &buf[..n])?;
        }
        Ok(())
    }

    /// `n` atomic cells of type `A` from byte `offset`: the view of window
    /// memory the owner may load and store while peers access it
    /// (`Window::atomic_slice`).
    ///
    /// # Errors
    /// The range is outside the region or not aligned for `A`.
    #[inline]
    pub(crate) fn cells<A: AtomicCell>(&self, offset: usize, n: usize) -> Result<&[A]> {
        let size = std::mem::size_of::<A>();
        let bytes = n.checked_mul(size).ok_or_else(|| {
            Error::InvalidArgument(format!("{n} atomic cells of {size} bytes overflow"))
        })?;
        self.check(offset, bytes)?;
        if (self.addr() as usize + offset) % std::mem::align_of::<A>() != 0 {
            return Err(Error::InvalidArgument(format!(
                "atomic view at byte {offset} is not aligned to {} bytes",
                std::mem::align_of::<A>()
            )));
        }
        if n == 0 {
            return Ok(&[]);
        }
        // SAFETY: in bounds and aligned for `A` (checked above); `A` is a
        // std atomic integer (`AtomicCell`'s contract), valid for every bit
        // pattern and mutated only atomically, and every other access to
        // this region is an atomic copy or a NIC/provider write (the
        // module's invariant), so no non-atomic access races with it. The
        // cells borrow `self`, so the region outlives them.
        Ok(unsafe { std::slice::from_raw_parts(self.ptr.as_ptr().add(offset).cast::<A>(), n) })
    }

    /// Reads an aligned `u64` with acquire ordering (flags written by peers).
    pub fn load_u64(&self, offset: usize) -> Result<u64> {
        self.check(offset, 8)?;
        if (self.addr() as usize + offset) % 8 != 0 {
            return Err(Error::InvalidArgument(format!(
                "unaligned u64 at byte {offset}"
            )));
        }
        // SAFETY: in bounds and 8-aligned; the word is only ever accessed
        // atomically by us (peers write it through the NIC/provider).
        let a = unsafe { &*(self.ptr.as_ptr().add(offset) as *const std::sync::atomic::AtomicU64) };
        Ok(a.load(Ordering::Acquire))
    }

    /// Stores an aligned `u64` with release ordering.
    pub fn store_u64(&self, offset: usize, v: u64) -> Result<()> {
        self.check(offset, 8)?;
        if (self.addr() as usize + offset) % 8 != 0 {
            return Err(Error::InvalidArgument(format!(
                "unaligned u64 at byte {offset}"
            )));
        }
        // SAFETY: as in load_u64.
        let a = unsafe { &*(self.ptr.as_ptr().add(offset) as *const std::sync::atomic::AtomicU64) };
        a.store(v, Ordering::Release);
        Ok(())
    }
}

impl Drop for Memory<'_> {
    fn drop(&mut self) {
        match self.owner {
            // SAFETY: allocated in `allocate` with this layout, freed once.
            Owner::Library(layout) => unsafe { alloc::dealloc(self.ptr.as_ptr(), layout) },
            Owner::Mapped { map_len, .. } => {
                // SAFETY: `from_mapping`'s contract: a live mapping of
                // `map_len` bytes that only this `Memory` unmaps, once.
                let r = unsafe { nix::sys::mman::munmap(self.ptr.cast(), map_len) };
                if let Err(e) = r {
                    tracing::warn!("unmapping a shared window segment: {e}");
                }
            }
            Owner::User | Owner::Vec(_) | Owner::Part(_) => {}
        }
    }
}

// Memory that peers may write is never accessed through Rust references or
// plain (non-atomic) copies, only through these two functions and through
// the atomics in `cpu_atomic` and `load_u64`/`store_u64`. A plain copy
// racing with a peer's write would be a data race, which is undefined
// behaviour in Rust even when the bytes are "just data". Relaxed atomic
// loads and stores of the widest aligned unit make the race well defined:
// each 8-byte word (or byte at the edges) is old or new, never torn below
// that size, and never UB. Ordering with respect to the peers' writes comes
// from the epoch's synchronization (fences, flushes, locks), as in MPI's
// unified memory model.
//
// Large copies on x86_64 are one `rep movsb` in inline assembly instead of
// a loop of 8-byte atomics (which the compiler may not widen into vector or
// string moves): see [`string_copy`] for why that is the same contract.

/// Copies of at least this many bytes use [`string_copy`] where it exists.
/// Below it the per-word loop is as fast (measured on this project's
/// x86_64 machine: 1 MiB in 44 µs with `rep movsb`, as `memcpy`, against
/// 55 µs with 8-byte atomic stores).
#[cfg(target_arch = "x86_64")]
const STRING_COPY_MIN: usize = 256;

/// Copies `n` bytes from `src` to `dst` with one `rep movsb`.
///
/// Why this keeps the module's contract (no data race in Rust's sense,
/// old-or-new values under a racing peer): an inline-assembly block is
/// opaque to the compiler and must behave like *some* Rust code with the
/// same effect. `rep movsb` on x86_64 moves each byte with an ordinary
/// byte load and byte store; the architecture lets the stores (and loads)
/// inside one string instruction happen in any order among themselves, but
/// keeps them ordered with the instructions before and after it (Intel SDM
/// vol. 3A, "Memory-Ordering Model for String Operations"). That is
/// exactly a loop of relaxed `AtomicU8` loads and stores, which is what the
/// edges of [`atomic_load_bytes`] already do, so a racing peer yields old
/// or new bytes and the acquire/release fences around the copy order it as
/// before. The assembly does not touch the stack, keeps the flags, and
/// relies on the direction flag being clear on entry (guaranteed for
/// inline assembly on x86).
///
/// # Safety
/// `src..src + n` is valid for reads and `dst..dst + n` for writes for the
/// whole call; they do not overlap; neither is accessed through Rust
/// references by anyone during it.
#[cfg(target_arch = "x86_64")]
#[inline]
unsafe fn string_copy(dst: *mut u8, src: *const u8, n: usize) {
    // SAFETY: the caller's contract (valid, disjoint ranges of `n` bytes);
    // the block reads and writes only those ranges and clobbers only the
    // three registers named.
    unsafe {
        std::arch::asm!(
            "rep movsb",
            inout("rcx") n => _,
            inout("rdi") dst => _,
            inout("rsi") src => _,
            options(nostack, preserves_flags)
        );
    }
}

/// Copies `out.len()` bytes from `src` with relaxed atomic loads: bytes up
/// to 8-byte alignment, then 8-byte words, then the remaining bytes.
///
/// # Safety
/// `src..src + out.len()` is valid for reads for the whole call and is not
/// accessed through Rust references by anyone during it.
#[inline]
unsafe fn atomic_load_bytes(src: *const u8, out: &mut [u8]) {
    use std::sync::atomic::{AtomicU64, AtomicU8};
    let n = out.len();
    if n == 8 && src as usize % 8 == 0 {
        // The common case of one aligned 8-byte element: one load.
        // SAFETY: in bounds (caller) and 8-aligned.
        let w = unsafe { (*src.cast::<AtomicU64>()).load(Ordering::Relaxed) };
        out.copy_from_slice(&w.to_ne_bytes());
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if n >= STRING_COPY_MIN {
        // SAFETY: the caller's contract; `out` is a distinct allocation.
        unsafe { string_copy(out.as_mut_ptr(), src, n) };
        return;
    }
    let head = ((src as usize).wrapping_neg() & 7).min(n);
    let mut i = 0;
    while i < head {
        // SAFETY: in bounds (caller); AtomicU8 has the alignment of u8.
        out[i] = unsafe { (*src.add(i).cast::<AtomicU8>()).load(Ordering::Relaxed) };
        i += 1;
    }
    let words = (n - head) / 8;
    // SAFETY: with `words > 0`, `head` (the distance to 8-byte alignment)
    // is below `n`, so the `words` 8-byte words from `src + head` are in
    // bounds (caller) and 8-aligned; a shared slice of atomics may alias
    // memory others write atomically.
    let atoms: &[AtomicU64] = match words {
        0 => &[],
        // SAFETY: see above.
        _ => unsafe { std::slice::from_raw_parts(src.add(head).cast::<AtomicU64>(), words) },
    };
    for (a, o) in atoms.iter().zip(out[head..].chunks_exact_mut(8)) {
        o.copy_from_slice(&a.load(Ordering::Relaxed).to_ne_bytes());
    }
    i += words * 8;
    while i < n {
        // SAFETY: in bounds (caller).
        out[i] = unsafe { (*src.add(i).cast::<AtomicU8>()).load(Ordering::Relaxed) };
        i += 1;
    }
}

/// Copies `data` to `dst` with relaxed atomic stores (as
/// [`atomic_load_bytes`]).
///
/// # Safety
/// `dst..dst + data.len()` is valid for writes for the whole call and is
/// not accessed through Rust references by anyone during it.
#[inline]
unsafe fn atomic_store_bytes(dst: *mut u8, data: &[u8]) {
    use std::sync::atomic::{AtomicU64, AtomicU8};
    let n = data.len();
    if n == 8 && dst as usize % 8 == 0 {
        let mut w = [0u8; 8];
        w.copy_from_slice(data);
        // SAFETY: in bounds (caller) and 8-aligned.
        unsafe { (*dst.cast::<AtomicU64>()).store(u64::from_ne_bytes(w), Ordering::Relaxed) };
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if n >= STRING_COPY_MIN {
        // SAFETY: the caller's contract; `data` is a distinct allocation.
        unsafe { string_copy(dst, data.as_ptr(), n) };
        return;
    }
    let head = ((dst as usize).wrapping_neg() & 7).min(n);
    let mut i = 0;
    while i < head {
        // SAFETY: in bounds (caller).
        unsafe { (*dst.add(i).cast::<AtomicU8>()).store(data[i], Ordering::Relaxed) };
        i += 1;
    }
    let words = (n - head) / 8;
    // SAFETY: as in `atomic_load_bytes`: in bounds, 8-aligned, atomics only.
    let atoms: &[AtomicU64] = match words {
        0 => &[],
        // SAFETY: see above.
        _ => unsafe { std::slice::from_raw_parts(dst.add(head).cast::<AtomicU64>(), words) },
    };
    for (a, d) in atoms.iter().zip(data[head..].chunks_exact(8)) {
        let mut w = [0u8; 8];
        w.copy_from_slice(d);
        a.store(u64::from_ne_bytes(w), Ordering::Relaxed);
    }
    i += words * 8;
    while i < n {
        // SAFETY: in bounds (caller).
        unsafe { (*dst.add(i).cast::<AtomicU8>()).store(data[i], Ordering::Relaxed) };
        i += 1;
    }
}

#[cfg(test)]
mod atomic_copy_tests {
    use super::*;

    /// Strided writes of 8-byte blocks (the aligned-word loop) and of
    /// other blocks or alignments (the byte-exact loop) write exactly their
    /// blocks.
    #[test]
    fn strided_writes_touch_exactly_their_blocks() {
        for (off, block, stride) in [(0, 8, 24), (8, 8, 8), (3, 8, 24), (0, 8, 20), (5, 3, 7), (16, 16, 40)] {
            let m = Memory::allocate(1024).unwrap();
            m.write(0, &[0xEE; 1024]).unwrap();
            let count = 20;
            let data: Vec<u8> = (0..count * block).map(|i| i as u8).collect();
            m.write_strided(off, (block, stride), &data).unwrap();
            let mut all = vec![0u8; 1024];
            m.read(0, &mut all).unwrap();
            for (i, &b) in all.iter().enumerate() {
                let inside = i >= off && (i - off) % stride < block && (i - off) / stride < count;
                let want = if inside {
                    data[(i - off) / stride * block + (i - off) % stride]
                } else {
                    0xEE
                };
                assert_eq!(b, want, "byte {i} of ({off}, {block}, {stride})");
            }
            // Past the end: refused, nothing written.
            assert!(m.write_strided(1024 - 8, (8, 16), &[1; 16]).is_err());
        }
    }

    #[test]
    fn copies_every_alignment_and_length() {
        let m = Memory::allocate(64).unwrap();
        for off in 0..9 {
            for len in 0..40 {
                let data: Vec<u8> = (0..len).map(|i| (i * 7 + off + 1) as u8).collect();
                m.write(off, &data).unwrap();
                let mut back = vec![0u8; len];
                m.read(off, &mut back).unwrap();
                assert_eq!(back, data, "offset {off} length {len}");
            }
        }
    }

    #[test]
    fn large_copies_touch_exactly_their_bytes() {
        // Lengths around the string-copy threshold and a large one, at
        // every alignment: the bytes copied are right and the neighbours
        // on both sides are untouched.
        let m = Memory::allocate(8192).unwrap();
        for len in [255usize, 256, 257, 263, 1000, 4097] {
            for off in 1..10 {
                m.write(0, &[0xAA; 8192]).unwrap();
                let data: Vec<u8> = (0..len).map(|i| (i * 13 + off) as u8 | 1).collect();
                m.write(off, &data).unwrap();
                let mut all = vec![0u8; 8192];
                m.read(0, &mut all).unwrap();
                assert!(all[..off].iter().all(|&b| b == 0xAA), "before, len {len} off {off}");
                assert_eq!(&all[off..off + len], &data[..], "len {len} off {off}");
                assert!(all[off + len..].iter().all(|&b| b == 0xAA), "after, len {len} off {off}");
                let mut back = vec![0u8; len];
                m.read(off, &mut back).unwrap();
                assert_eq!(back, data, "read back, len {len} off {off}");
            }
        }
    }

    #[test]
    fn copy_within_overlaps_like_memmove() {
        let m = Memory::allocate(20_000).unwrap();
        let data: Vec<u8> = (0..20_000).map(|i| (i % 251) as u8).collect();
        for (from, to, len) in [(0, 100, 9000), (100, 0, 9000), (5, 6, 10_000), (6, 5, 10_000)] {
            m.write(0, &data).unwrap();
            let mut expect = data.clone();
            expect.copy_within(from..from + len, to);
            m.copy_within(from, to, len).unwrap();
            let mut back = vec![0u8; 20_000];
            m.read(0, &mut back).unwrap();
            assert!(back == expect, "from {from} to {to} len {len}");
        }
    }
}

/// The std atomic integer types, the only cells [`Memory::cells`] hands out.
///
/// # Safety
/// An implementor has the size and alignment of its integer, every bit
/// pattern is a valid value, and it is mutated only by atomic operations.
pub unsafe trait AtomicCell: Sync + Send + std::fmt::Debug {}

macro_rules! atomic_cell {
    ($($a:ty),*) => {$(
        // SAFETY: a std atomic integer: `#[repr(C, align(size))]` over its
        // integer, every bit pattern valid, mutated only atomically.
        unsafe impl AtomicCell for $a {}
    )*};
}
atomic_cell!(
    std::sync::atomic::AtomicI8,
    std::sync::atomic::AtomicI16,
    std::sync::atomic::AtomicI32,
    std::sync::atomic::AtomicI64,
    std::sync::atomic::AtomicU8,
    std::sync::atomic::AtomicU16,
    std::sync::atomic::AtomicU32,
    std::sync::atomic::AtomicU64
);

#[cfg(test)]
mod huge_tests {
    use super::*;

    /// A large region is 2-MiB-aligned, zeroed and writable end to end; a
    /// small one and `huge = false` stay on the allocator.
    #[test]
    fn large_windows_are_huge_page_aligned() {
        let len = HUGE_MIN + 12345;
        let m = Memory::allocate_with(len, true).unwrap();
        assert_eq!(m.len(), len);
        assert_eq!(m.addr() % HUGE_PAGE as u64, 0, "2-MiB aligned");
        assert!(matches!(m.owner, Owner::Mapped { fd: None, map_len } if map_len % HUGE_PAGE == 0 && map_len >= len));
        let mut b = vec![1u8; 64];
        m.read(len - 64, &mut b).unwrap();
        assert!(b.iter().all(|&x| x == 0), "zeroed");
        m.write(0, &[7u8; 64]).unwrap();
        m.write(len - 64, &[9u8; 64]).unwrap();
        m.read(len - 64, &mut b).unwrap();
        assert!(b.iter().all(|&x| x == 9));
        if std::env::var_os("ONESIDED_SHOW_SMAPS").is_some() {
            let smaps = std::fs::read_to_string("/proc/self/smaps_rollup").unwrap_or_default();
            eprintln!("{smaps}");
        }
        let small = Memory::allocate_with(len, false).unwrap();
        assert!(matches!(small.owner, Owner::Library(_)));
        let tiny = Memory::allocate_with(4096, true).unwrap();
        assert!(matches!(tiny.owner, Owner::Library(_)));
    }

    #[test]
    fn strided_reads_gather_what_strided_writes_scatter() {
        let m = Memory::allocate(4096).unwrap();
        let data: Vec<u8> = (0..96u8).collect();
        // Words (the aligned fast path) and 3-byte blocks (the general one).
        for (block, stride, at) in [(8usize, 40usize, 16usize), (3, 7, 5)] {
            let n = data.len() / block * block;
            m.write_strided(at, (block, stride), &data[..n]).unwrap();
            let mut out = vec![0u8; n];
            m.read_strided(at, (block, stride), &mut out).unwrap();
            assert_eq!(out, data[..n], "block {block} stride {stride}");
            let mut one = vec![0u8; block];
            m.read(at + stride, &mut one).unwrap();
            assert_eq!(one, data[block..2 * block]);
        }
        let mut out = vec![0u8; 16];
        assert!(m.read_strided(4096 - 8, (8, 8), &mut out).is_err(), "past the end");
        assert!(m.read_strided(0, (8, 4), &mut out).is_err(), "stride < block");
        assert!(m.read_strided(0, (0, 8), &mut out).is_err(), "zero block");
        assert!(m.read_strided(0, (8, 8), &mut []).is_ok());
    }

    #[test]
    fn private_buffers_are_zeroed_slices_on_huge_pages() {
        let n = HUGE_MIN / 8 + 3;
        let mut b = Private::<u64>::zeroed(n, true).unwrap();
        assert_eq!(b.as_slice().len(), n);
        assert_eq!(b.as_slice().as_ptr() as usize % HUGE_PAGE, 0);
        assert!(b.as_slice().iter().all(|&x| x == 0), "zeroed");
        b.as_mut_slice()[n - 1] = 7;
        assert_eq!(b.as_slice()[n - 1], 7);
        let small = Private::<u16>::zeroed(5, true).unwrap();
        assert_eq!(small.as_slice(), &[0; 5]);
        assert_eq!(small.as_slice().as_ptr() as usize % WINDOW_ALIGN, 0);
        assert!(Private::<u8>::zeroed(0, true).unwrap().as_slice().is_empty());
        assert!(matches!(
            Private::<u64>::zeroed(usize::MAX / 4, true),
            Err(Error::InvalidArgument(_))
        ));
        #[derive(Clone, Copy, bytemuck::Zeroable, bytemuck::Pod)]
        #[repr(C, align(8192))]
        struct Wide([u8; 4096], [u8; 4096]);
        assert!(matches!(
            Private::<Wide>::zeroed(1, false),
            Err(Error::InvalidArgument(_))
        ));
    }
}
