//! Ranks as threads: a whole job inside one process, on the in-process
//! back-end (`transport::loopback`) and the thread bootstrap
//! (`bootstrap::threads`).

use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::Arc;

use super::world::{World, WorldBuilder};
use crate::bootstrap::threads::ThreadJob;
use crate::bootstrap::Bootstrap;
use crate::config::{Backend, Config};
use crate::error::{Error, Result};
use crate::transport::loopback::{Fabric, LoopbackTransport};
use crate::transport::SharedTransport;

impl World {
    /// Runs a job of `ranks` ranks as threads of this process and returns
    /// what each rank's `f` returned, by rank: one-sided communication to
    /// try on a laptop, and to test code built on this crate, with no
    /// launcher, network or provider.
    ///
    /// Each thread gets its own [`World`] (rank `0..ranks`) on the
    /// in-process back-end: puts and gets are memory copies, atomics are
    /// the CPU's, messages are served by the target rank's progress — the
    /// same epochs, locks and protocols as on a network, in one process.
    /// `World::run_threads(n, f)` is
    /// `World::builder().run_threads(n, f)`; settings come from the
    /// environment (`ONESIDED_*`) and the builder as for
    /// [`WorldBuilder::init`], except that the back-end is always the
    /// in-process one and the intra-node direct path is off unless
    /// [`WorldBuilder::direct_path`] turns it on (on, windows of
    /// `allocate` are reached by loads and stores, not through the
    /// back-end).
    ///
    /// Each rank's `World` is finalized (collectively) after its `f`
    /// returns; `f` must free (or drop) its windows before returning. When
    /// a rank's `f` fails or panics, the others are told: their waits on
    /// it end with [`ErrorKind::PeerUnreachable`](crate::ErrorKind) instead
    /// of at `ONESIDED_TIMEOUT`. [`World::abort`] ends the process, so
    /// every rank of the job with it.
    ///
    /// ```
    /// use onesided::{Assert, Op, Window, World};
    /// let sums = World::run_threads(4, |world| {
    ///     let mut win = Window::<u64>::allocate(world, 1)?;
    ///     win.fence(Assert::NONE)?;
    ///     win.accumulate(0, 0, &[world.rank() as u64 + 1], Op::Sum)?;
    ///     win.fence(Assert::NONE)?;
    ///     let mut v = [0u64];
    ///     win.local_read(0, &mut v)?;
    ///     win.free()?;
    ///     Ok(v[0])
    /// })?;
    /// assert_eq!(sums[0], 1 + 2 + 3 + 4);
    /// # Ok::<(), onesided::Error>(())
    /// ```
    ///
    /// # Errors
    /// `ranks` is 0; a malformed `ONESIDED_*` variable; a thread that
    /// could not be started; otherwise the error of the rank that failed
    /// first.
    ///
    /// # Panics
    /// When a rank's `f` panics, with that panic (after every rank ended).
    pub fn run_threads<R, F>(ranks: usize, f: F) -> Result<Vec<R>>
    where
        R: Send,
        F: Fn(&World) -> Result<R> + Sync,
    {
        World::builder().run_threads(ranks, f)
    }

    /// [`World::run_threads`] with a configuration built by the caller
    /// (tests that choose protocols: `ONESIDED_ACCUMULATE`, `_LOCK`,
    /// `_AGGREGATE` without touching the process's environment). Not a
    /// stable API.
    #[doc(hidden)]
    #[cfg(feature = "unstable")]
    pub fn run_threads_with<R, F>(config: Config, ranks: usize, f: F) -> Result<Vec<R>>
    where
        R: Send,
        F: Fn(&World) -> Result<R> + Sync,
    {
        run(config, ranks, f)
    }
}

impl WorldBuilder {
    /// Runs a job of `ranks` threads with these settings: see
    /// [`World::run_threads`].
    ///
    /// # Errors
    /// As [`World::run_threads`].
    pub fn run_threads<R, F>(self, ranks: usize, f: F) -> Result<Vec<R>>
    where
        R: Send,
        F: Fn(&World) -> Result<R> + Sync,
    {
        let direct = self.direct_path_setting();
        let mut config = self.config()?;
        config.shm = direct.unwrap_or(false);
        run(config, ranks, f)
    }
}

fn run<R, F>(mut config: Config, ranks: usize, f: F) -> Result<Vec<R>>
where
    R: Send,
    F: Fn(&World) -> Result<R> + Sync,
{
    if ranks == 0 {
        return Err(Error::InvalidArgument(
            "run_threads: a job needs at least one rank".into(),
        ));
    }
    config.backend = Backend::Loopback;
    // The ranks' progress agents share the process's CPUs: pinning them
    // all to the one core chosen for a process's agent would serialize
    // them.
    config.progress_cpu = crate::topology::ProgressCpu::None;
    let job = ThreadJob::new(ranks, config.timeout);
    let fabric = Fabric::new(ranks);
    let outcomes = std::thread::scope(|s| {
        let mut handles = Vec::with_capacity(ranks);
        for rank in 0..ranks {
            let (config, job, fabric, f) = (config.clone(), &job, &fabric, &f);
            let spawned = std::thread::Builder::new()
                .name(format!("onesided-r{rank}"))
                .spawn_scoped(s, move || rank_main(config, rank, job, fabric, f));
            match spawned {
                Ok(h) => handles.push(h),
                Err(e) => {
                    let e = Error::io(format!("run_threads: starting the thread of rank {rank}"), e);
                    job.fail(rank, e.to_string());
                    fabric.fail(rank, e.to_string());
                    handles.push(s.spawn(move || Err(e)));
                }
            }
        }
        handles.into_iter().map(|h| h.join()).collect::<Vec<_>>()
    });
    let mut results = Vec::with_capacity(ranks);
    let mut panicked = None;
    for o in outcomes {
        match o {
            Ok(r) => results.push(r),
            Err(p) => {
                panicked.get_or_insert(p);
                results.push(Err(Error::InvalidArgument("the rank panicked".into())));
            }
        }
    }
    if let Some(p) = panicked {
        resume_unwind(p);
    }
    // The error of the rank that failed first (the others' are mostly
    // consequences: a peer that left).
    let first = job.first_failure();
    if let Some(r) = first.filter(|&r| results.get(r).is_some_and(|x| x.is_err())) {
        if let Some(Err(e)) = results.into_iter().nth(r) {
            return Err(e);
        }
        return Err(Error::InvalidArgument("run_threads: lost an error".into()));
    }
    results.into_iter().collect()
}

/// One rank's thread: its World, `f`, the collective end.
fn rank_main<R, F>(
    config: Config,
    rank: usize,
    job: &Arc<ThreadJob>,
    fabric: &Arc<Fabric>,
    f: &F,
) -> Result<R>
where
    F: Fn(&World) -> Result<R>,
{
    let fail = |why: String| {
        job.fail(rank, why.clone());
        fabric.fail(rank, why);
    };
    let boot: Arc<dyn Bootstrap> = match job.member(rank) {
        Ok(b) => Arc::new(b),
        Err(e) => {
            fail(e.to_string());
            return Err(e);
        }
    };
    let open = |c: &Config| -> Result<SharedTransport> {
        Ok(Arc::new(LoopbackTransport::open(fabric, rank, c)?))
    };
    let world = match World::start_with(config, boot, open) {
        Ok(w) => w,
        Err(e) => {
            fail(e.to_string());
            return Err(e);
        }
    };
    match catch_unwind(AssertUnwindSafe(|| f(&world))) {
        Ok(Ok(v)) => match world.finalize() {
            Ok(()) => Ok(v),
            Err(e) => {
                fail(e.to_string());
                Err(e)
            }
        },
        Ok(Err(e)) => {
            fail(e.to_string());
            world.discard();
            Err(e)
        }
        Err(p) => {
            fail("it panicked".into());
            world.discard();
            resume_unwind(p)
        }
    }
}
