//! Borrowed request-based transfers (`Window::scope`): an `rget` into part
//! of a buffer the caller keeps, an `rput` from a borrowed slice, inside a
//! scope that waits for every one of them on exit — beside the owning
//! `rput`/`rget`, whose requests own their buffers.
//!
//! Soundness does not rest on the wait: the back-end reads into a buffer
//! the request owns, and the data is copied into the caller's slice by
//! [`ScopedRequest::wait`] or at the end of the scope, on the caller's
//! thread. So a request that is leaked (`std::mem::forget`) still has its
//! slice filled when the scope ends, and a panic inside the scope leaves
//! the slices untouched. The borrows are what the compiler checks: a slice
//! handed to the scope stays borrowed until the scope ends, a buffer made
//! inside the scope cannot be handed to it, and no request leaves it
//! (`tests/api/tests/ui/scope_*.rs`).

use std::cell::RefCell;
use std::marker::PhantomData;

use super::Window;
use crate::api::element::Element;
use crate::api::request::Request;
use crate::error::Result;

/// One transfer of a scope: its owning request and, for an `rget`, the
/// caller's slice the data goes to.
struct Pending<'scope, 'env, T: Element> {
    request: Request<'env, Vec<T>>,
    dest: Option<&'scope mut [T]>,
}

impl<T: Element> Pending<'_, '_, T> {
    fn finish(self) -> Result<()> {
        let data = self.request.wait()?;
        if let Some(dest) = self.dest {
            dest.copy_from_slice(&data);
        }
        Ok(())
    }
}

/// The transfers started inside one [`Window::scope`] call.
pub struct Scope<'scope, 'env: 'scope, T: Element> {
    win: &'env Window<'env, T>,
    pending: RefCell<Vec<Option<Pending<'scope, 'env, T>>>>,
    // Invariant in both lifetimes, as `std::thread::Scope`: a slice given
    // to the scope must outlive the whole scope.
    _scope: PhantomData<&'scope mut &'scope ()>,
    _env: PhantomData<&'env mut &'env ()>,
}

/// A transfer started in a [`Scope`]; [`wait`](ScopedRequest::wait) for it,
/// or the scope waits for it on exit.
#[must_use = "the scope waits for it on exit; wait() to have the data earlier"]
pub struct ScopedRequest<'scope, 'env, T: Element> {
    scope: &'scope Scope<'scope, 'env, T>,
    index: usize,
}

impl<'env, T: Element> Window<'env, T> {
    /// Runs `f` with a [`Scope`] in which `rget` reads into borrowed slices
    /// (parts of a buffer the caller keeps) and `rput` writes from
    /// borrowed slices; every transfer started in the scope has completed
    /// locally, and every `rget`'s data is in its slice, when `scope`
    /// returns. As the owning forms: local completion only, in an epoch
    /// that allows the operation.
    ///
    /// ```no_run
    /// # fn f(win: &onesided::Window<'_, f64>) -> onesided::Result<()> {
    /// let mut halo = vec![0.0f64; 200];
    /// let (left, right) = halo.split_at_mut(100);
    /// win.scope(|s| {
    ///     s.rget(0, 0, left)?;
    ///     let r = s.rget(1, 0, right)?;
    ///     r.wait()?; // `right` is filled here; `left` when the scope ends
    ///     Ok(())
    /// })?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// The error `f` returns, else the first transfer that failed (every
    /// transfer is waited for either way).
    pub fn scope<F, R>(&'env self, f: F) -> Result<R>
    where
        F: for<'scope> FnOnce(&'scope Scope<'scope, 'env, T>) -> Result<R>,
    {
        let scope = Scope {
            win: self,
            pending: RefCell::new(Vec::new()),
            _scope: PhantomData,
            _env: PhantomData,
        };
        let result = f(&scope);
        let mut first = None;
        for p in scope.pending.take().into_iter().flatten() {
            if let Err(e) = p.finish() {
                first.get_or_insert(e);
            }
        }
        match (result, first) {
            (Err(e), _) | (Ok(_), Some(e)) => Err(e),
            (Ok(r), None) => Ok(r),
        }
    }
}

impl<'scope, 'env, T: Element> Scope<'scope, 'env, T> {
    /// Starts reading `buf.len()` elements of `rank`'s window at `disp`
    /// into `buf`, which stays borrowed until the scope ends.
    ///
    /// # Errors
    /// As [`Window::rget`].
    pub fn rget(
        &'scope self,
        rank: usize,
        disp: usize,
        buf: &'scope mut [T],
    ) -> Result<ScopedRequest<'scope, 'env, T>> {
        let request = self.win.rget(rank, disp, vec![T::zeroed(); buf.len()])?;
        Ok(self.add(Pending {
            request,
            dest: Some(buf),
        }))
    }

    /// Starts writing `data` to `rank`'s window at `disp` (copied when the
    /// call returns, so `data` is free at once).
    ///
    /// # Errors
    /// As [`Window::rput`].
    pub fn rput(
        &'scope self,
        rank: usize,
        disp: usize,
        data: &[T],
    ) -> Result<ScopedRequest<'scope, 'env, T>> {
        let request = self.win.rput(rank, disp, data.to_vec())?;
        Ok(self.add(Pending {
            request,
            dest: None,
        }))
    }

    fn add(&'scope self, p: Pending<'scope, 'env, T>) -> ScopedRequest<'scope, 'env, T> {
        let mut pending = self.pending.borrow_mut();
        pending.push(Some(p));
        ScopedRequest {
            scope: self,
            index: pending.len() - 1,
        }
    }
}

impl<T: Element> ScopedRequest<'_, '_, T> {
    /// Waits for the transfer; an `rget`'s slice is filled when this
    /// returns `Ok`.
    ///
    /// # Errors
    /// As [`Request::wait`].
    pub fn wait(self) -> Result<()> {
        let p = self
            .scope
            .pending
            .borrow_mut()
            .get_mut(self.index)
            .and_then(Option::take);
        p.map_or(Ok(()), Pending::finish)
    }

    /// Whether the transfer completed (drives progress once); its slice is
    /// filled by [`wait`](ScopedRequest::wait) or the end of the scope.
    ///
    /// # Errors
    /// As [`Request::test`].
    pub fn test(&self) -> Result<bool> {
        match self.scope.pending.borrow().get(self.index) {
            Some(Some(p)) => p.request.test(),
            _ => Ok(true),
        }
    }
}
