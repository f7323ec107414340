//! Post notifications of post/start/complete/wait, received as active
//! messages (kind `PSCW`) and kept until an access epoch consumes them.
//!
//! A target's `post(G)` sends each origin in `G` one one-way message whose
//! payload is the window id (8 bytes, little-endian). The origin counts
//! them per (window, target): an entry exists only for a target that posted
//! and whose post was not consumed yet, and only for windows alive here
//! (a window opens its box at creation and closes it at free, which drops
//! its entries). A later epoch's target may post before the current access
//! epoch even started toward it; the count keeps that post for the epoch
//! that will consume it (a target posts again only after its `wait`
//! returned, which needs this origin's `complete`, so a count never grows
//! beyond what the program's epochs consume).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use crate::transport::am::Handler;

/// Received, unconsumed post notifications of one process.
#[derive(Debug, Default)]
pub struct PostBox {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    open: HashSet<u64>,
    posts: HashMap<(u64, usize), u32>,
    /// Complete notifications received as messages, per window.
    completes: HashMap<u64, u64>,
}

/// The payload of a post notification.
pub fn encode(window: u64) -> [u8; 8] {
    window.to_le_bytes()
}

impl PostBox {
    /// Window `id` exists here: accept its notifications.
    pub fn open(&self, id: u64) {
        if let Ok(mut i) = self.inner.lock() {
            i.open.insert(id);
        }
    }

    /// Window `id` was freed: refuse its notifications, drop its entries.
    pub fn close(&self, id: u64) {
        if let Ok(mut i) = self.inner.lock() {
            i.open.remove(&id);
            i.posts.retain(|k, _| k.0 != id);
            i.completes.remove(&id);
        }
    }

    /// Records a post of `target` for window `id` (after validation).
    pub fn arrive(&self, id: u64, target: usize) -> Result<(), String> {
        let mut i = self
            .inner
            .lock()
            .map_err(|_| "post box poisoned".to_string())?;
        if !i.open.contains(&id) {
            return Err(format!(
                "post notification for window {id}, which does not exist here"
            ));
        }
        let n = i.posts.entry((id, target)).or_insert(0);
        *n = n.saturating_add(1);
        Ok(())
    }

    /// Consumes one post of `target` for window `id`; false if none arrived.
    pub fn take(&self, id: u64, target: usize) -> bool {
        let Ok(mut i) = self.inner.lock() else {
            return false;
        };
        match i.posts.get_mut(&(id, target)) {
            Some(n) if *n > 1 => {
                *n -= 1;
                true
            }
            Some(_) => {
                i.posts.remove(&(id, target));
                true
            }
            None => false,
        }
    }

    /// Records a complete notification for window `id` (after validation).
    pub fn complete_arrive(&self, id: u64) -> Result<(), String> {
        let mut i = self
            .inner
            .lock()
            .map_err(|_| "post box poisoned".to_string())?;
        if !i.open.contains(&id) {
            return Err(format!(
                "complete notification for window {id}, which does not exist here"
            ));
        }
        let n = i.completes.entry(id).or_insert(0);
        *n = n.saturating_add(1);
        Ok(())
    }

    /// Complete notifications received as messages for window `id` so far.
    pub fn completed(&self, id: u64) -> u64 {
        self.inner
            .lock()
            .map(|i| i.completes.get(&id).copied().unwrap_or(0))
            .unwrap_or(0)
    }

    /// Entries held (for tests: bounded by windows × targets that posted).
    pub fn entries(&self) -> usize {
        self.inner.lock().map(|i| i.posts.len()).unwrap_or(0)
    }
}

impl Handler for PostBox {
    fn handle(
        &self,
        from: usize,
        payload: &[u8],
        reply: Option<&mut [u8]>,
    ) -> std::result::Result<usize, String> {
        let id = decode("post", payload, reply.is_some())?;
        self.arrive(id, from)?;
        Ok(0)
    }
}

/// The window id of a one-way notification of kind `what`.
fn decode(what: &str, payload: &[u8], request: bool) -> Result<u64, String> {
    if request {
        return Err(format!("a {what} notification is one-way, not a request"));
    }
    let id: [u8; 8] = payload
        .try_into()
        .map_err(|_| format!("{what} notification of {} bytes, not 8", payload.len()))?;
    match u64::from_le_bytes(id) {
        0 => Err(format!("{what} notification for window 0")),
        id => Ok(id),
    }
}

/// The handler of `PSCW_COMPLETE` messages: counts them in the post box.
#[derive(Debug)]
pub struct CompleteNotes(pub Arc<PostBox>);

impl Handler for CompleteNotes {
    fn handle(
        &self,
        _from: usize,
        payload: &[u8],
        reply: Option<&mut [u8]>,
    ) -> std::result::Result<usize, String> {
        let id = decode("complete", payload, reply.is_some())?;
        self.0.complete_arrive(id)?;
        Ok(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_per_window_and_target() {
        let b = PostBox::default();
        assert!(b.handle(1, &encode(7), None).is_err(), "unknown window");
        b.open(7);
        b.handle(1, &encode(7), None).unwrap();
        b.handle(1, &encode(7), None).unwrap();
        b.handle(2, &encode(7), None).unwrap();
        assert!(b.handle(1, &[1, 2, 3], None).is_err(), "short payload");
        assert!(b.handle(1, &encode(0), None).is_err(), "window 0");
        let mut space = [0u8; 8];
        assert!(
            b.handle(1, &encode(7), Some(&mut space)).is_err(),
            "request"
        );
        assert_eq!(b.entries(), 2);
        assert!(b.take(7, 1) && b.take(7, 1) && !b.take(7, 1));
        assert!(!b.take(8, 2));
        b.close(7);
        assert_eq!(b.entries(), 0, "free drops the window's entries");
        assert!(!b.take(7, 2));
    }

    #[test]
    fn counts_complete_notifications_per_window() {
        let b = Arc::new(PostBox::default());
        let notes = CompleteNotes(b.clone());
        assert!(notes.handle(1, &encode(7), None).is_err(), "unknown window");
        b.open(7);
        b.open(8);
        notes.handle(1, &encode(7), None).unwrap();
        notes.handle(2, &encode(7), None).unwrap();
        notes.handle(1, &encode(8), None).unwrap();
        assert!(notes.handle(1, &[1, 2, 3], None).is_err(), "short payload");
        assert!(notes.handle(1, &encode(0), None).is_err(), "window 0");
        let mut space = [0u8; 8];
        assert!(notes.handle(1, &encode(7), Some(&mut space)).is_err(), "request");
        assert_eq!((b.completed(7), b.completed(8), b.completed(9)), (2, 1, 0));
        b.close(7);
        assert_eq!(b.completed(7), 0, "free drops the window's count");
        assert_eq!(b.completed(8), 1);
    }
}
