//! Operations in the middle of being posted inside `lock_all`, so that a
//! *retreat* (`lock.rs`: completing and giving back `lock_all`'s shared
//! locks before waiting for another one) never releases a lock an
//! operation of another thread is about to use.
//!
//! The lock-free operation path reads the window's permit and then posts;
//! a retreat revokes the permit and then waits for operations that read the
//! old one. Two registrations, both a Dekker pattern (register, then read
//! the permit again; revoke, then read the registrations):
//!
//! * **The epoch's owner** (the thread that called `lock_all`, usually the
//!   only one): a counter only it writes, with plain stores and a compiler
//!   fence — no atomic read-modify-write on the hot path. The other side
//!   of the pattern is an asymmetric fence: a retreat by *another* thread
//!   first calls `membarrier(2)` (private expedited, else global), which
//!   makes every running thread pass a full memory barrier, then reads the
//!   counter (the scheme of liburcu's and Folly's asymmetric fences). Where
//!   the kernel offers neither (probed once per process), the owner
//!   registers as every other thread does. The private expedited
//!   command's one-time registration can take seconds (an RCU grace
//!   period): it runs in the background, and only a retreat that needs the
//!   fence waits for it, never `lock_all` ([`HeavyFence`]). Should
//!   `membarrier` (or that registration, with no global command to fall
//!   back on) fail after a successful probe, the owner's count cannot be
//!   trusted: that retreat is refused with an error (the locks stay held
//!   for `unlock_all`) and from then on owners register as every other
//!   thread does.
//! * **Every other thread**, and the mutex path: a shared counter,
//!   incremented (`SeqCst`) before the permit is read again and decremented
//!   after the operation is posted.
//!
//! Invariant: while a retreat is between revoking the permit and releasing
//! the locks, every operation that will still post to a held target is
//! counted in one of the two counters, and the retreat waits for both to be
//! zero.

use std::sync::atomic::{compiler_fence, AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Once, OnceLock};

use rustix::thread::MembarrierCommand;

use crate::error::{Error, Result};
use crate::stats::thread_token;

/// Registrations of one window (see the module doc).
#[derive(Debug, Default)]
pub(super) struct Registrations {
    /// Token of the thread that opened the `lock_all` epoch (0: none).
    owner: AtomicU64,
    /// The owner's operations being posted; written by the owner only.
    owner_posting: AtomicUsize,
    /// Everyone else's.
    others: AtomicUsize,
}

/// An operation registered while it is posted; unregisters when dropped.
pub(in crate::api) enum Issuing<'w> {
    /// Not inside a guarded permit: nothing to undo.
    Free,
    /// Counted in the shared counter.
    Counted(&'w AtomicUsize),
    /// Counted in the owner's own counter.
    Owner(&'w AtomicUsize),
}

impl Drop for Issuing<'_> {
    fn drop(&mut self) {
        match self {
            Issuing::Free => {}
            Issuing::Counted(count) => {
                count.fetch_sub(1, Ordering::SeqCst);
            }
            Issuing::Owner(count) => {
                // Only the owner writes it: a plain decrement, published
                // with Release for the retreat's Acquire read.
                let n = count.load(Ordering::Relaxed);
                count.store(n.saturating_sub(1), Ordering::Release);
            }
        }
    }
}

/// The `membarrier(2)` heavy fence of this process (see the module doc).
///
/// The kernel is asked what it offers once (`MEMBARRIER_CMD_QUERY`, no
/// waiting). The private expedited command (IPIs to the CPUs running this
/// process's threads, microseconds) needs a one-time registration, and in
/// a process with several threads the kernel makes that registration wait
/// for an RCU grace period (`synchronize_rcu`): milliseconds, but 4.8 and
/// 5.6 s measured at load 8 on a 2-core guest. So the registration runs on
/// a thread of its own, started by the first `lock_all`, and only a retreat
/// by another thread — the one user of the fence — ever waits for it (it
/// runs the registration itself if that thread could not be started).
/// Until then `lock_all` goes on at once.
struct HeavyFence {
    /// What the kernel offers: (private expedited with its registration,
    /// global); probed on first use.
    offer: OnceLock<(bool, bool)>,
    query: fn() -> (bool, bool),
    /// Whether the registration for the private expedited command worked.
    registered: OnceLock<bool>,
    register: Box<dyn Fn() -> bool + Send + Sync>,
    /// The registration was handed to a thread of its own (or tried to).
    started: Once,
    /// Set when `membarrier(2)` failed after the probe (or the registration
    /// failed and the global command is not offered): owners count as the
    /// other threads do from then on.
    failed: AtomicBool,
}

impl HeavyFence {
    fn offer(&self) -> (bool, bool) {
        *self.offer.get_or_init(self.query)
    }

    /// Whether `lock_all`'s owner may count with plain stores: the kernel
    /// offers a heavy fence and it has not failed. Never waits for the
    /// registration (starts it in the background).
    fn available(&'static self) -> bool {
        let (private, global) = self.offer();
        if private {
            self.started.call_once(|| {
                let spawned = std::thread::Builder::new()
                    .name("onesided-membar".into())
                    .spawn(move || {
                        self.registered.get_or_init(|| (self.register)());
                    });
                // Else the first retreat that needs the fence registers.
                drop(spawned);
            });
        }
        (private || global) && !self.failed.load(Ordering::Relaxed)
    }

    /// The command to use, waiting for (or doing) the registration.
    fn command(&self) -> Option<MembarrierCommand> {
        let (private, global) = self.offer();
        if private && *self.registered.get_or_init(|| (self.register)()) {
            return Some(MembarrierCommand::PrivateExpedited);
        }
        global.then_some(MembarrierCommand::Global)
    }

    /// Every running thread of the process passes a full memory barrier;
    /// the error of `membarrier(2)` otherwise.
    fn fence(&self) -> std::result::Result<(), rustix::io::Errno> {
        let done = match self.command() {
            Some(c) => rustix::thread::membarrier(c),
            None => Err(rustix::io::Errno::NOSYS),
        };
        done.inspect_err(|_| self.failed.store(true, Ordering::Relaxed))
    }
}

fn kernel_offer() -> (bool, bool) {
    use rustix::thread::{membarrier_query, MembarrierCommand as C};
    let q = membarrier_query();
    (
        q.contains_command(C::PrivateExpedited) && q.contains_command(C::RegisterPrivateExpedited),
        q.contains_command(C::Global),
    )
}

fn kernel_register() -> bool {
    rustix::thread::membarrier(MembarrierCommand::RegisterPrivateExpedited).is_ok()
}

fn heavy_fence_state() -> &'static HeavyFence {
    static FENCE: OnceLock<HeavyFence> = OnceLock::new();
    FENCE.get_or_init(|| HeavyFence {
        offer: OnceLock::new(),
        query: kernel_offer,
        registered: OnceLock::new(),
        register: Box::new(kernel_register),
        started: Once::new(),
        failed: AtomicBool::new(false),
    })
}

fn heavy_fence_available() -> bool {
    heavy_fence_state().available()
}

fn heavy_fence() -> std::result::Result<(), rustix::io::Errno> {
    heavy_fence_state().fence()
}

impl Registrations {
    /// The calling thread opens a `lock_all` epoch.
    pub(super) fn set_owner(&self) {
        let me = if heavy_fence_available() {
            thread_token()
        } else {
            0
        };
        self.owner.store(me, Ordering::Relaxed);
    }

    /// Registers an operation about to post under a guarded permit, then
    /// reads the permit again with `still_allowed`; `None` if it no longer
    /// allows the operation (take the mutex path).
    #[inline]
    pub(super) fn register(&self, still_allowed: impl Fn() -> bool) -> Option<Issuing<'_>> {
        let owner = self.owner.load(Ordering::Relaxed);
        let guard = if owner != 0 && owner == thread_token() {
            let n = self.owner_posting.load(Ordering::Relaxed);
            self.owner_posting.store(n + 1, Ordering::Relaxed);
            // The light side of the asymmetric fence: the retreat's
            // membarrier orders this store before our read of the permit.
            compiler_fence(Ordering::SeqCst);
            Issuing::Owner(&self.owner_posting)
        } else {
            self.others.fetch_add(1, Ordering::SeqCst);
            Issuing::Counted(&self.others)
        };
        still_allowed().then_some(guard)
    }

    /// Registers an operation of the mutex path (under the window's mutex).
    pub(super) fn register_locked(&self) -> Issuing<'_> {
        self.others.fetch_add(1, Ordering::SeqCst);
        Issuing::Counted(&self.others)
    }

    /// After the permit was revoked (`SeqCst` store): whether operations
    /// that read the old permit may still be posting. `fenced` says whether
    /// this retreat already ran the heavy fence; it runs it on first need.
    ///
    /// # Errors
    ///
    /// `membarrier(2)` failed (after the probe said it works): the owner's
    /// operations cannot be ordered, the retreat must not release.
    pub(super) fn posting(&self, fenced: &mut bool) -> Result<bool> {
        if self.others.load(Ordering::SeqCst) != 0 {
            return Ok(true);
        }
        let owner = self.owner.load(Ordering::Relaxed);
        if owner == 0 || owner == thread_token() {
            // The owner itself retreats: none of its operations is posting.
            return Ok(false);
        }
        if !*fenced {
            heavy_fence().map_err(|e| Error::Io {
                context: "membarrier(2), ordering the lock_all owner thread's operations \
                          before another thread's retreat (the locks stay held; later \
                          epochs count the owner's operations instead)"
                    .into(),
                source: std::io::Error::from_raw_os_error(e.raw_os_error()),
            })?;
            *fenced = true;
        }
        Ok(self.owner_posting.load(Ordering::Acquire) != 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leak(query: fn() -> (bool, bool), register: Box<dyn Fn() -> bool + Send + Sync>) -> &'static HeavyFence {
        Box::leak(Box::new(HeavyFence {
            offer: OnceLock::new(),
            query,
            registered: OnceLock::new(),
            register,
            started: Once::new(),
            failed: AtomicBool::new(false),
        }))
    }

    /// `lock_all` (`available`) does not wait for the registration, which
    /// waits for an RCU grace period in the kernel (seconds on a loaded
    /// machine: rank 0 of sync_modes' software-lock `lock_all` test missed
    /// its peers' 3-s barrier timeout in `set_owner`); the fence does.
    #[test]
    fn lock_all_does_not_wait_for_the_registration() {
        let (go, wait) = std::sync::mpsc::channel::<()>();
        let wait = std::sync::Mutex::new(wait);
        let f = leak(
            || (true, false),
            Box::new(move || wait.lock().unwrap().recv().is_ok()),
        );
        // The registration blocks until `go`: answered all the same.
        assert!(f.available());
        assert!(f.available());
        assert!(f.registered.get().is_none(), "still registering");
        go.send(()).unwrap();
        assert!(matches!(f.command(), Some(MembarrierCommand::PrivateExpedited)));
        assert!(f.available());
    }

    /// A failed registration without the global command to fall back on:
    /// the fence fails (the retreat is refused) and owners count from then.
    #[test]
    fn a_failed_registration_fails_the_fence() {
        let f = leak(|| (true, false), Box::new(|| false));
        assert!(f.available());
        assert!(f.command().is_none());
        assert!(f.fence().is_err());
        assert!(!f.available());
        let none = leak(|| (false, false), Box::new(|| panic!("not offered")));
        assert!(!none.available());
        assert!(none.command().is_none());
    }

    #[test]
    fn registrations_count_until_dropped() {
        let r = Registrations::default();
        let mut fenced = false;
        assert!(!r.posting(&mut fenced).unwrap(), "nothing registered");
        // Another thread's epoch: this thread counts in the shared counter.
        r.owner.store(u64::MAX, Ordering::Relaxed);
        let g = r.register(|| true).expect("allowed");
        assert!(matches!(g, Issuing::Counted(_)));
        assert!(r.posting(&mut fenced).unwrap());
        drop(g);
        assert!(r.register(|| false).is_none(), "revoked: mutex path");
        assert_eq!(r.others.load(Ordering::SeqCst), 0, "a refused registration is undone");
        // This thread's epoch: its own counter, visible to a retreat by
        // another thread (after the heavy fence).
        r.set_owner();
        let g = r.register(|| true).expect("allowed");
        if heavy_fence_available() {
            assert!(matches!(g, Issuing::Owner(_)));
            assert_eq!(r.owner_posting.load(Ordering::Relaxed), 1);
            std::thread::scope(|s| {
                s.spawn(|| {
                    let mut fenced = false;
                    assert!(r.posting(&mut fenced).unwrap(), "the owner is posting");
                    assert!(fenced, "after the heavy fence");
                });
            });
        }
        drop(g);
        assert_eq!(r.owner_posting.load(Ordering::Relaxed), 0);
        let mut fenced = false;
        assert!(!r.posting(&mut fenced).unwrap());
    }
}
