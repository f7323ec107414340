//! Requests of the request-based operations (`rput`, `rget`,
//! `raccumulate`, `rget_accumulate`) and request sets (`wait_all`,
//! `wait_any`, `test_all`, `test_any`, as MPI's `MPI_Waitall` family).

use std::marker::PhantomData;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::progress::wait::Waiter;
use crate::transport::{InFlight, Transport};

/// A pending `rput`, `rget`, `raccumulate` or `rget_accumulate`.
///
/// The request *owns* the buffer until the operation completed: [`wait`]
/// gives it back (for `rget`, filled). Owning rather than borrowing keeps the
/// library sound even if a request is leaked with `std::mem::forget`: the
/// buffer is then leaked too, never freed under the NIC. Dropping a request
/// waits for it.
///
/// Completion is *local*: an `rput`'s buffer may be reused, an `rget`'s data
/// has arrived. Remote completion of an `rput` needs a flush (or the end of
/// the epoch), as in MPI.
///
/// Sets of requests: [`Request::wait_all`], [`Request::wait_any`],
/// [`Request::test_all`], [`Request::test_any`].
///
/// [`wait`]: Request::wait
pub struct Request<'w, B> {
    transport: &'w dyn Transport,
    timeout: Option<Duration>,
    inflight: Option<InFlight>,
    what: String,
    _buf: PhantomData<fn() -> B>,
}

/// What the request is for (the operation, its size, target and window)
/// and whether it is still pending; lets `Result<Request<_>>` be
/// `unwrap_err`'d and printed.
impl<B> std::fmt::Debug for Request<'_, B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Request")
            .field("what", &self.what)
            .field("pending", &self.inflight.is_some())
            .finish()
    }
}

impl<'w, B: Send + 'static> Request<'w, B> {
    pub(crate) fn new(
        timeout: Option<Duration>,
        transport: &'w dyn Transport,
        inflight: InFlight,
        what: String,
    ) -> Self {
        Request {
            transport,
            timeout,
            inflight: Some(inflight),
            what,
            _buf: PhantomData,
        }
    }

    /// Whether the operation completed (drives progress once). A completed
    /// request's own outcome, and its buffer, come from [`Request::wait`].
    ///
    /// # Errors
    /// An error of the back-end while driving progress (a failed peer, a
    /// broken connection): the request may still complete later.
    pub fn test(&self) -> Result<bool> {
        self.transport.progress()?;
        Ok(self.done())
    }

    fn done(&self) -> bool {
        self.inflight
            .as_ref()
            .is_none_or(|f| f.completion().pending() == 0)
    }

    /// Waits for completion and returns the buffer.
    ///
    /// # Errors
    /// The operation failed (the peer's error, named), or it did not
    /// complete within `ONESIDED_TIMEOUT`.
    pub fn wait(mut self) -> Result<B> {
        let inflight = self
            .inflight
            .take()
            .ok_or_else(|| Error::InvalidArgument("request already completed".into()))?;
        let what = self.what.clone();
        let waited = self.transport.wait(inflight.completion(), &|| what.clone());
        let buf = inflight.into_inner::<B>().map_err(|_| {
            Error::InvalidArgument(format!(
                "{}: buffer still in use after completion",
                self.what
            ))
        });
        waited?;
        buf
    }

    /// Waits for every request and returns their buffers in order
    /// (MPI_Waitall). Every request is waited for even if one fails.
    ///
    /// # Errors
    /// The first failure, in the order of `requests` (the buffers are then
    /// dropped once their operations completed).
    pub fn wait_all(requests: Vec<Request<'w, B>>) -> Result<Vec<B>> {
        let mut out = Vec::with_capacity(requests.len());
        let mut first = None;
        for r in requests {
            match r.wait() {
                Ok(b) => out.push(b),
                Err(e) => {
                    first.get_or_insert(e);
                }
            }
        }
        first.map_or(Ok(out), Err)
    }

    /// Waits until one of `requests` completed, removes it from the set and
    /// returns its index (in the set as it was) and buffer (MPI_Waitany).
    /// `Ok(None)` for an empty set.
    ///
    /// # Errors
    /// The completed operation's failure (it is removed all the same), an
    /// error of the back-end while driving progress, or none completing
    /// within `ONESIDED_TIMEOUT`.
    pub fn wait_any(requests: &mut Vec<Request<'w, B>>) -> Result<Option<(usize, B)>> {
        let Some(first) = requests.first() else {
            return Ok(None);
        };
        let (transport, timeout) = (first.transport, first.timeout);
        let what = || format!("wait_any over {} requests", requests.len());
        let mut waiter = Waiter::new(timeout, &what);
        let index = loop {
            if let Some(i) = requests.iter().position(Request::done) {
                break i;
            }
            transport.progress()?;
            waiter.step()?;
        };
        let r = requests.remove(index);
        r.wait().map(|b| Some((index, b)))
    }

    /// Whether every request completed (drives progress once; MPI_Testall).
    ///
    /// # Errors
    /// As [`Request::test`].
    pub fn test_all(requests: &[Request<'w, B>]) -> Result<bool> {
        if let Some(r) = requests.first() {
            r.transport.progress()?;
        }
        Ok(requests.iter().all(Request::done))
    }

    /// The index of a completed request, if any (drives progress once;
    /// MPI_Testany). The request stays in the set: take it out and
    /// [`wait`](Request::wait) for its buffer.
    ///
    /// # Errors
    /// As [`Request::test`].
    pub fn test_any(requests: &[Request<'w, B>]) -> Result<Option<usize>> {
        if let Some(r) = requests.first() {
            r.transport.progress()?;
        }
        Ok(requests.iter().position(Request::done))
    }
}

impl<B> Drop for Request<'_, B> {
    fn drop(&mut self) {
        if let Some(f) = self.inflight.take() {
            if let Err(e) = self.transport.wait(f.completion(), &|| self.what.clone()) {
                tracing::warn!("dropped request failed: {e}");
            }
        }
    }
}
