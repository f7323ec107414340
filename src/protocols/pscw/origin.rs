//! The sending side of PSCW notifications: `post` tells each origin of its
//! group, with one one-way active message of kind `PSCW` ([`encode`]d
//! window id), that the exposure epoch is open; to oneself the post box is
//! told directly. Depends on [`Origin`], a narrow context, not on the
//! public `Window`; the epoch checks stay in `api::window::pscw`.

use super::target::{encode, PostBox};
use crate::error::{Error, Result};
use crate::transport::am::{kind, ActiveMessages};
use crate::transport::Transport;

/// What the notification sender needs of a window.
pub struct Origin<'c> {
    /// The back-end notifications travel on.
    pub transport: &'c dyn Transport,
    /// The active-message layer.
    pub am: &'c ActiveMessages,
    /// This process's post box (notifications to oneself).
    pub posts: &'c PostBox,
    /// This process's rank.
    pub me: usize,
    /// The window's id.
    pub window: u64,
}

impl Origin<'_> {
    /// Notifies every rank of `origins` that this process posted.
    ///
    /// # Errors
    /// A notification that could not be sent or delivered, naming the rank;
    /// the exposure epoch stays open (an origin that was not told cannot
    /// complete, so the caller must know).
    pub fn notify(&self, origins: &[usize]) -> Result<()> {
        let note = encode(self.window);
        for &o in origins {
            let sent = if o == self.me {
                self.posts
                    .arrive(self.window, self.me)
                    .map_err(Error::InvalidArgument)
            } else {
                self.am.send(self.transport, o, kind::PSCW, &note)
            };
            sent.map_err(|e| {
                Error::InvalidArgument(format!(
                    "window {}: post: notifying rank {o} failed ({e}); the exposure epoch is open",
                    self.window
                ))
            })?;
        }
        Ok(())
    }
}
