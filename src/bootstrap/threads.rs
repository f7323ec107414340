//! In-process bootstrap: the ranks of a job are threads of one process
//! (`World::run_threads`, the loopback back-end), meeting through a
//! key-value store and a barrier they share.
//!
//! Keys and values follow the same rules as the launched mechanisms (so a
//! program tested here does not break under a launcher). A value is
//! visible to the other threads as soon as it is put (PMI promises
//! visibility only after the next barrier; earlier is allowed). The
//! barrier waits at most `ONESIDED_TIMEOUT`, and fails at once when a rank
//! of the job failed ([`ThreadJob::fail`]): a thread never waits for a
//! rank that will not come.

use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::stats::{BootstrapStats, Counters};
use super::{wire, Bootstrap, MAX_KEY_LEN, MAX_VALUE_LEN};
use crate::error::{Error, Result};

const VIA: &str = "threads";

/// What the threads of one job share.
pub struct ThreadJob {
    size: usize,
    timeout: Option<Duration>,
    state: Mutex<State>,
    arrived: Condvar,
}

#[derive(Default)]
struct State {
    kvs: HashMap<String, String>,
    /// Threads waiting in the current barrier.
    waiting: usize,
    /// Barriers completed.
    generation: u64,
    /// The first rank that failed, and why.
    failed: Option<(usize, String)>,
}

impl ThreadJob {
    /// A job of `size` threads; barriers wait at most `timeout`.
    pub fn new(size: usize, timeout: Option<Duration>) -> Arc<ThreadJob> {
        Arc::new(ThreadJob {
            size,
            timeout,
            state: Mutex::new(State::default()),
            arrived: Condvar::new(),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Every update is a single assignment or insert: consistent even
        // after a panic elsewhere.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records that `rank` failed (the first failure wins) and wakes the
    /// threads waiting in a barrier, which then fail.
    pub fn fail(&self, rank: usize, why: String) {
        self.lock().failed.get_or_insert((rank, why));
        self.arrived.notify_all();
    }

    /// The rank that failed first, if any.
    pub fn first_failure(&self) -> Option<usize> {
        self.lock().failed.as_ref().map(|(r, _)| *r)
    }

    /// The bootstrap of thread `rank`.
    ///
    /// # Errors
    /// `rank` is not in `0..size`.
    pub fn member(self: &Arc<Self>, rank: usize) -> Result<Threads> {
        if rank >= self.size {
            return Err(Error::InvalidArgument(format!(
                "thread bootstrap: rank {rank} is not in the job of {}",
                self.size
            )));
        }
        Ok(Threads {
            job: self.clone(),
            rank,
            counters: Counters::default(),
        })
    }
}

/// One thread's view of a [`ThreadJob`].
pub struct Threads {
    job: Arc<ThreadJob>,
    rank: usize,
    counters: Counters,
}

impl Bootstrap for Threads {
    fn rank(&self) -> usize {
        self.rank
    }
    fn size(&self) -> usize {
        self.job.size
    }
    fn put(&self, key: &str, value: &str) -> Result<()> {
        let bad = |m| Error::InvalidArgument(format!("bootstrap put: {m}"));
        wire::validate_key(key, MAX_KEY_LEN).map_err(bad)?;
        wire::validate_value(value, MAX_VALUE_LEN).map_err(bad)?;
        self.job
            .lock()
            .kvs
            .insert(key.to_string(), value.to_string());
        self.counters.put(key, value);
        Ok(())
    }
    fn barrier(&self) -> Result<()> {
        self.counters.fence();
        let job = &self.job;
        let start = Instant::now();
        let mut s = job.lock();
        let generation = s.generation;
        s.waiting += 1;
        if s.waiting == job.size {
            s.waiting = 0;
            s.generation += 1;
            job.arrived.notify_all();
            return Ok(());
        }
        loop {
            if s.generation != generation {
                return Ok(());
            }
            if let Some((rank, why)) = &s.failed {
                if *rank != self.rank {
                    return Err(Error::bootstrap(
                        VIA,
                        format!("barrier: rank {rank} of the job failed: {why}"),
                    ));
                }
            }
            let wait = match job.timeout {
                None => Duration::from_secs(1),
                Some(limit) => match limit.checked_sub(start.elapsed()) {
                    Some(left) if !left.is_zero() => left,
                    _ => {
                        s.waiting -= 1;
                        return Err(Error::timeout(format!(
                                "thread bootstrap barrier: {} of {} ranks arrived",
                                s.waiting + 1,
                                job.size
                            ), limit.as_secs()));
                    }
                },
            };
            s = job
                .arrived
                .wait_timeout(s, wait)
                .map(|(g, _)| g)
                .unwrap_or_else(|e| e.into_inner().0);
        }
    }
    fn get(&self, key: &str) -> Result<String> {
        let r = self
            .job
            .lock()
            .kvs
            .get(key)
            .cloned()
            .ok_or_else(|| Error::bootstrap(VIA, format!("key '{key}' not found")));
        self.counters.get(r.as_ref().ok().map(|v| v.len()));
        r
    }
    fn name(&self) -> &'static str {
        VIA
    }
    fn stats(&self) -> BootstrapStats {
        self.counters.snapshot()
    }
    fn local_ranks(&self) -> Result<Option<Vec<usize>>> {
        // Every thread runs on this node.
        Ok(Some((0..self.job.size).collect()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_and_barrier_across_threads() {
        let job = ThreadJob::new(3, Some(Duration::from_secs(10)));
        std::thread::scope(|s| {
            for r in 0..3 {
                let b = job.member(r).unwrap();
                s.spawn(move || {
                    b.put(&format!("k-{r}"), &format!("v{r}")).unwrap();
                    b.barrier().unwrap();
                    for p in 0..3 {
                        assert_eq!(b.get(&format!("k-{p}")).unwrap(), format!("v{p}"));
                    }
                    b.barrier().unwrap();
                });
            }
        });
        let b = job.member(0).unwrap();
        assert!(b.get("missing").is_err());
        assert!(b.put("a b", "v").is_err());
        assert!(job.member(3).is_err());
        assert_eq!(b.local_ranks().unwrap(), Some(vec![0, 1, 2]));
    }

    #[test]
    fn a_failed_rank_ends_the_barrier_of_the_others() {
        let job = ThreadJob::new(2, None);
        let b = job.member(0).unwrap();
        std::thread::scope(|s| {
            s.spawn(|| job.fail(1, "it returned an error".into()));
            let e = b.barrier().unwrap_err();
            assert!(e.to_string().contains("rank 1"), "{e}");
        });
    }

    #[test]
    fn a_barrier_times_out_naming_how_many_arrived() {
        let job = ThreadJob::new(2, Some(Duration::from_millis(50)));
        let e = job.member(1).unwrap().barrier().unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::Timeout, "{e}");
        assert!(e.to_string().contains("1 of 2"), "{e}");
    }
}
