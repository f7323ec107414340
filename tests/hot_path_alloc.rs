//! The blocking fast path allocates nothing: a counting global allocator
//! counts the heap allocations of the calling thread across N blocking
//! put/get/flush/fetch_and_op calls after a warm-up, for two values of N.
//! The count must be 0 for both (a count, not a time). Multi-process, real
//! providers; only Rust heap allocations are seen (libfabric's own `malloc`
//! calls are not).

#[macro_use]
mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

use onesided::{Op, Window, World};

/// Counts allocations made by threads that opted in.
struct Counting;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

thread_local! {
    static COUNTED: Cell<bool> = const { Cell::new(false) };
}

fn counted_here() -> bool {
    COUNTED.try_with(|c| c.get()).unwrap_or(false)
}

// SAFETY: every call is forwarded unchanged to the system allocator; the
// counting touches only an atomic and a const-initialised thread-local
// (no allocation, no destructor).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if counted_here() {
            ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: forwarded with the caller's layout.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if counted_here() {
            ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: forwarded with the caller's layout.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if counted_here() {
            ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: forwarded; ptr was allocated by System with layout.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded; ptr was allocated by System with layout.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Heap allocations of this thread while running `f`.
fn allocations_in(f: impl FnOnce()) -> u64 {
    let before = ALLOCATIONS.load(Ordering::Relaxed);
    COUNTED.with(|c| c.set(true));
    f();
    COUNTED.with(|c| c.set(false));
    ALLOCATIONS.load(Ordering::Relaxed) - before
}

/// One round of the blocking fast path against rank 1: an 8-byte put (the
/// inject path on tcp and sockets), a 1 KiB put (a tracked fi_write), a flush
/// (the ordered read), an 8-byte get, a fetch_and_op; the values are checked.
fn round(win: &Window<'_, u64>, i: u64, big: &mut [u64], fetch_op: bool) {
    win.put(1, 0, &[i]).unwrap();
    big[0] = i;
    win.put(1, 8, big).unwrap();
    win.flush(1).unwrap();
    let mut w = [0u64];
    win.get(1, 0, &mut w).unwrap();
    assert_eq!(w[0], i);
    win.get(1, 8, &mut w).unwrap();
    assert_eq!(w[0], i);
    if fetch_op {
        let old = win.fetch_and_op(1, 4, 1, Op::Sum).unwrap();
        assert_eq!(old, i);
    }
}

fn body() {
    // The provider fast path: with aggregation (on by default for tcp and
    // sockets) the 8-byte put is queued without allocating, but the flush
    // ships it as an active-message request, which allocates (its message
    // and reply callback: a few per batch of up to ~127 operations).
    std::env::set_var("ONESIDED_AGGREGATE", "off");
    // Likewise the fetch_and_op: where the provider's atomics are emulated
    // (tcp, sockets, shm) accumulates take the software path by default,
    // whose request and reply allocate; this test is about the provider's
    // own fast path.
    // libfabric's `net` provider has no atomics at all: there is no
    // provider fetch_and_op to measure, only the puts and gets.
    let no_atomics = common::provider_without_atomics();
    if !no_atomics {
        std::env::set_var("ONESIDED_ACCUMULATE", "hardware");
    }
    let world = World::init().unwrap();
    if no_atomics {
        common::check_no_atomics(&world);
    }
    let mut win = Window::<u64>::allocate(&world, 8 + 128).unwrap();
    win.lock_all().unwrap();
    if world.rank() == 0 {
        let mut big = vec![7u64; 128];
        let mut i = 0u64;
        // Warm-up: first contact, descriptor cache, thread-locals, sets.
        for _ in 0..50 {
            round(&win, i, &mut big, !no_atomics);
            i += 1;
        }
        let mut counts = Vec::new();
        for n in [200u64, 1000] {
            counts.push(allocations_in(|| {
                for _ in 0..n {
                    round(&win, i, &mut big, !no_atomics);
                    i += 1;
                }
            }));
        }
        assert_eq!(
            counts,
            [0, 0],
            "heap allocations on the blocking path for 200 and 1000 rounds (provider {})",
            world.provider()
        );
    }
    win.unlock_all().unwrap();
    world.barrier().unwrap();
    win.free().unwrap();
}

spmd_test!(blocking_operations_allocate_nothing, &[2], body);
