//! Generalized active-target synchronization: post/start/complete/wait/test.
//!
//! A window has two independent PSCW epochs, and a process may have both
//! open at once (it is an origin of some ranks and a target of others):
//!
//! ```text
//!   access (origin side)                     exposure (target side)
//!   ┌────────┐ start(G, a) ┌───────────┐     ┌────────┐ post(G, a) ┌───────────┐
//!   │ closed │ ──────────▶ │ open(G)   │     │ closed │ ─────────▶ │ open(G)   │
//!   └────────┘ ◀────────── └───────────┘     └────────┘ ◀───────── └───────────┘
//!               complete     ops to G only               wait, or test() = true
//! ```
//!
//! * `start(G)` while an access epoch is open, `complete` without `start`,
//!   an operation to a rank outside `G`, `post(G)` while an exposure epoch
//!   is open, and `wait`/`test` without `post` are refused.
//! * Groups are non-empty or empty lists of distinct ranks (the caller
//!   checks ranks against the job size); they are kept sorted.
//! * Counting: every `post(G)` adds |G| to `exposed`, the cumulative number
//!   of origins this process exposed its window to. Each origin adds 1 to
//!   our COMPLETE_WORD when it completes an access epoch that includes us,
//!   and (unless NOCHECK) only after it received our post for that epoch;
//!   so the word never exceeds `exposed`, and reaching it means every
//!   origin of every post so far has completed (docs/semantics.md).
//! * Post notifications are counted per (window, target) in the process's
//!   [`crate::protocols::pscw::target::PostBox`] as they arrive (a later epoch's target may
//!   post early); an access epoch consumes one per target of its group, and
//!   records here which targets it has consumed (`ready`).
//!
//! Combination with fence/lock/lock_all is in [`super::state::SyncState`]:
//! PSCW epochs are refused inside `lock_all` or with per-target locks held
//! or in a fence epoch with operations issued, and those are refused while
//! a PSCW epoch is open.

use smallvec::SmallVec;

use crate::error::{Error, Result};

/// A PSCW group: world ranks, sorted, distinct. Inline up to 8 ranks, so
/// the usual neighbour groups cost no allocation per epoch (PSCW is a
/// per-iteration synchronization in halo codes).
pub type Group = SmallVec<[usize; 8]>;

/// The origin side of one PSCW access epoch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Access {
    /// Targets, sorted, distinct.
    pub group: Group,
    /// `Assert::NOCHECK`: the matching posts have completed already, no
    /// notification is awaited.
    pub nocheck: bool,
    /// Targets whose post notification this epoch has consumed (sorted).
    pub ready: Group,
}

impl Access {
    /// Whether `rank` belongs to the access group.
    pub fn contains(&self, rank: usize) -> bool {
        self.group.binary_search(&rank).is_ok()
    }

    /// The targets operations may go to without waiting for a post
    /// notification (sorted): every one under NOCHECK, else those whose
    /// post was consumed.
    pub fn ready_targets(&self) -> &[usize] {
        if self.nocheck {
            &self.group
        } else {
            &self.ready
        }
    }

    /// Whether operations to `rank` may be posted without waiting for a
    /// post notification.
    pub fn is_ready(&self, rank: usize) -> bool {
        self.nocheck || self.ready.binary_search(&rank).is_ok()
    }
}

/// The target side of one PSCW exposure epoch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exposure {
    /// Origins, sorted, distinct.
    pub group: Group,
    /// `exposed` after this post: `wait` returns when the complete counter
    /// reaches it.
    pub until: u64,
}

/// Both PSCW epochs of a window.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pscw {
    /// Open access epoch.
    pub access: Option<Access>,
    /// Open exposure epoch.
    pub exposure: Option<Exposure>,
    /// Cumulative number of origins of every `post` on this window.
    pub exposed: u64,
}

fn refuse(window: u64, op: &'static str, state: String) -> Error {
    Error::Epoch { window, op, state }
}

/// Sorts `g` in place; duplicates are an error.
pub fn normalize(window: u64, op: &'static str, mut g: Group) -> Result<Group> {
    g.sort_unstable();
    if let Some(w) = g.windows(2).find(|w| w[0] == w[1]) {
        return Err(Error::InvalidArgument(format!(
            "window {window}: {op}: rank {} appears twice in the group",
            w[0]
        )));
    }
    Ok(g)
}

impl Pscw {
    /// Whether either PSCW epoch is open.
    pub fn is_open(&self) -> bool {
        self.access.is_some() || self.exposure.is_some()
    }

    /// Describes the open epochs for error messages.
    pub fn describe(&self) -> String {
        match (&self.access, &self.exposure) {
            (Some(a), Some(e)) => format!(
                "inside a start epoch (group {:?}) and a post epoch (group {:?})",
                a.group, e.group
            ),
            (Some(a), None) => format!(
                "inside a start epoch (group {:?}; call complete first)",
                a.group
            ),
            (None, Some(e)) => {
                format!("inside a post epoch (group {:?}; call wait first)", e.group)
            }
            (None, None) => "outside PSCW epochs".into(),
        }
    }

    /// `start(group)`: opens the access epoch.
    pub fn start(&mut self, window: u64, group: Group, nocheck: bool) -> Result<()> {
        if let Some(a) = &self.access {
            return Err(refuse(
                window,
                "start",
                format!(
                    "inside a start epoch already open (group {:?}; call complete first)",
                    a.group
                ),
            ));
        }
        self.access = Some(Access {
            group,
            nocheck,
            ready: Group::new(),
        });
        Ok(())
    }

    /// An operation `op` to `rank` is about to be issued in the access
    /// epoch: `Ok(true)` if it may go now, `Ok(false)` if the post
    /// notification of `rank` must be awaited first.
    pub fn issue(&self, window: u64, op: &'static str, rank: usize) -> Result<bool> {
        match &self.access {
            Some(a) if a.contains(rank) => Ok(a.is_ready(rank)),
            Some(a) => Err(refuse(
                window,
                op,
                format!(
                    "to rank {rank}: it is outside the access group {:?} of start",
                    a.group
                ),
            )),
            None => Err(refuse(window, op, "outside an epoch".into())),
        }
    }

    /// Whether operations to `target` may go in the open access epoch
    /// (NOCHECK, or its post was consumed).
    pub fn ready(&self, target: usize) -> bool {
        self.access.as_ref().is_some_and(|a| a.is_ready(target))
    }

    /// The access epoch consumed a post notification of `target`.
    pub fn mark_ready(&mut self, target: usize) {
        if let Some(a) = self.access.as_mut() {
            if let Err(i) = a.ready.binary_search(&target) {
                a.ready.insert(i, target);
            }
        }
    }

    /// Whether `complete` may proceed: the open access epoch.
    pub fn check_complete(&self, window: u64) -> Result<&Access> {
        self.access.as_ref().ok_or_else(|| {
            refuse(
                window,
                "complete",
                "without a matching start (no access epoch is open)".into(),
            )
        })
    }

    /// `complete` finished: closes the access epoch.
    pub fn end_complete(&mut self) {
        self.access = None;
    }

    /// `post(group)`: opens the exposure epoch; returns the counter value
    /// `wait` waits for.
    pub fn post(&mut self, window: u64, group: Group) -> Result<u64> {
        if let Some(e) = &self.exposure {
            return Err(refuse(
                window,
                "post",
                format!(
                    "inside a post epoch already open (group {:?}; call wait first)",
                    e.group
                ),
            ));
        }
        let until = self.exposed + group.len() as u64;
        self.exposed = until;
        self.exposure = Some(Exposure { group, until });
        Ok(until)
    }

    /// Whether `wait`/`test` may proceed: the counter value to reach.
    pub fn check_wait(&self, window: u64, op: &'static str) -> Result<u64> {
        self.exposure.as_ref().map(|e| e.until).ok_or_else(|| {
            refuse(
                window,
                op,
                "without a matching post (no exposure epoch is open)".into(),
            )
        })
    }

    /// The counter reached the target of the exposure epoch: close it.
    pub fn end_wait(&mut self) {
        self.exposure = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn g(r: &[usize]) -> Group {
        Group::from_slice(r)
    }

    #[test]
    fn access_epoch() {
        let mut p = Pscw::default();
        assert!(p.check_complete(1).is_err(), "complete without start");
        assert!(p.issue(1, "put", 0).is_err(), "op without start");
        p.start(1, g(&[1, 3]), false).unwrap();
        assert!(p.start(1, g(&[2]), false).is_err(), "start twice");
        let e = p.issue(1, "put", 2).unwrap_err().to_string();
        assert!(e.contains("rank 2") && e.contains("access group"), "{e}");
        assert!(!p.issue(1, "put", 1).unwrap(), "post of 1 not yet seen");
        assert!(!p.ready(1));
        p.mark_ready(1);
        assert!(p.ready(1) && !p.ready(3));
        assert!(p.issue(1, "put", 1).unwrap());
        p.check_complete(1).unwrap();
        p.end_complete();
        assert!(!p.ready(1), "no epoch");
        p.start(1, g(&[1]), false).unwrap();
        assert!(!p.ready(1), "each epoch consumes its own post");
        p.end_complete();
        p.start(1, g(&[4]), true).unwrap();
        assert!(p.issue(1, "get", 4).unwrap(), "NOCHECK awaits no post");
    }

    #[test]
    fn exposure_epoch() {
        let mut p = Pscw::default();
        assert!(p.check_wait(1, "wait").is_err(), "wait without post");
        assert_eq!(p.post(1, g(&[0, 2])).unwrap(), 2);
        assert!(p.post(1, g(&[1])).is_err(), "post twice");
        assert_eq!(p.check_wait(1, "test").unwrap(), 2);
        p.end_wait();
        assert_eq!(p.post(1, g(&[1, 2, 3])).unwrap(), 5, "cumulative");
        assert!(p.is_open());
        p.end_wait();
        assert!(!p.is_open());
    }

    #[test]
    fn groups() {
        assert_eq!(normalize(1, "post", g(&[3, 0, 2])).unwrap(), g(&[0, 2, 3]));
        let e = normalize(1, "start", g(&[1, 2, 1])).unwrap_err().to_string();
        assert!(e.contains("rank 1") && e.contains("twice"), "{e}");
    }
}
