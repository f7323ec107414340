use super::*;
use LockType::{Exclusive as X, Shared as S};

#[test]
fn shared_together_exclusive_alone() {
    let mut q = LockQueue::new(4);
    assert_eq!(q.acquire(1, S), Acquire::Granted);
    assert_eq!(q.acquire(2, S), Acquire::Granted);
    let t = match q.acquire(3, X) {
        Acquire::Queued(t) => t,
        a => panic!("{a:?}"),
    };
    assert_eq!(q.poll(3, t), Ok(false));
    q.release(1, S).unwrap();
    assert_eq!(q.poll(3, t), Ok(false));
    q.release(2, S).unwrap();
    assert_eq!(q.holders(), (0, Some(3)));
    assert_eq!(q.poll(3, t), Ok(true));
    assert!(q.poll(3, t).is_err(), "picked up twice");
    q.release(3, X).unwrap();
    assert_eq!(q.holders(), (0, None));
}

#[test]
fn a_waiting_writer_stops_later_readers() {
    let mut q = LockQueue::new(8);
    assert_eq!(q.acquire(0, S), Acquire::Granted);
    let Acquire::Queued(w) = q.acquire(1, X) else {
        panic!()
    };
    // A reader arriving after the writer waits, although only readers hold.
    let Acquire::Queued(r) = q.acquire(2, S) else {
        panic!("reader overtook a waiting writer")
    };
    let Acquire::Queued(r2) = q.acquire(3, S) else {
        panic!()
    };
    q.release(0, S).unwrap();
    assert_eq!(q.poll(2, r), Ok(false));
    assert_eq!(q.poll(1, w), Ok(true));
    q.release(1, X).unwrap();
    // Both readers behind the writer are granted together.
    assert_eq!(q.holders(), (2, None));
    assert_eq!(q.poll(3, r2), Ok(true));
    assert_eq!(q.poll(2, r), Ok(true));
    assert_eq!(q.queued(), 0);
}

#[test]
fn full_ring_is_busy_and_bad_requests_refused() {
    let mut q = LockQueue::new(1);
    assert_eq!(q.acquire(0, X), Acquire::Granted);
    assert!(matches!(q.acquire(1, X), Acquire::Queued(_)));
    assert_eq!(q.acquire(2, S), Acquire::Busy);
    assert!(q.release(5, X).is_err(), "not the holder");
    assert!(q.release(0, S).is_err(), "no shared holder");
    assert!(q.poll(2, 1).is_err(), "ticket of another rank");
    assert!(q.poll(1, 99).is_err(), "unknown ticket");
}

#[test]
fn cancel_of_a_granted_request_releases() {
    let mut q = LockQueue::new(4);
    assert_eq!(q.acquire(0, X), Acquire::Granted);
    let Acquire::Queued(t) = q.acquire(1, X) else {
        panic!()
    };
    let Acquire::Queued(u) = q.acquire(2, X) else {
        panic!()
    };
    q.release(0, X).unwrap();
    assert_eq!(q.holders(), (0, Some(1)));
    q.cancel(1, t).unwrap();
    assert_eq!(q.holders(), (0, Some(2)));
    assert_eq!(q.poll(2, u), Ok(true));
}

/// Model-based property test: random acquire / release / poll / cancel
/// requests from ranks 0..4 against a FIFO model of the lock (grant order,
/// exclusivity, shared readers, ring capacity). Replayable: proptest
/// persists failing cases under `proptest-regressions/` and the RNG is
/// fixed by `PROPTEST_RNG_SEED` in CI (see docs/architecture.md).
mod model {
    use super::*;
    use proptest::prelude::*;

    #[derive(Debug, Clone)]
    enum Step {
        Acquire(usize, bool),
        /// Release the i-th lock an origin holds (mod the count).
        Release(usize),
        /// Release a lock the rank does not hold.
        BadRelease(usize, bool),
        /// Poll the i-th request in the ring (mod the count).
        Poll(usize),
        /// Poll with a ticket nobody has.
        BadPoll(usize, u64),
        /// Cancel the i-th request in the ring.
        Cancel(usize),
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            4 => (0..4usize, any::<bool>()).prop_map(|(r, x)| Step::Acquire(r, x)),
            4 => any::<usize>().prop_map(Step::Release),
            1 => (0..4usize, any::<bool>()).prop_map(|(r, x)| Step::BadRelease(r, x)),
            3 => any::<usize>().prop_map(Step::Poll),
            1 => (0..4usize, 1000..2000u64).prop_map(|(r, t)| Step::BadPoll(r, t)),
            1 => any::<usize>().prop_map(Step::Cancel),
        ]
    }

    fn kind(x: bool) -> LockType {
        if x {
            X
        } else {
            S
        }
    }

    /// The model: who holds the lock (granted, whether or not picked up)
    /// and the FIFO of requests (rank, kind, ticket, granted).
    #[derive(Default)]
    struct Model {
        /// Locks origins know they hold (granted at once or picked up).
        held: Vec<(usize, LockType)>,
        /// The ring, oldest first.
        ring: Vec<(usize, LockType, u64, bool)>,
        next_ticket: u64,
        cap: usize,
        /// Tickets in the order they were granted.
        grants: Vec<u64>,
    }

    impl Model {
        fn holders(&self) -> (u32, Option<usize>) {
            let all = self.held.iter().copied().chain(
                self.ring
                    .iter()
                    .filter(|w| w.3)
                    .map(|&(r, k, _, _)| (r, k)),
            );
            let (mut shared, mut excl) = (0, None);
            for (r, k) in all {
                match k {
                    S => shared += 1,
                    X => {
                        assert!(excl.is_none(), "two exclusive holders");
                        excl = Some(r);
                    }
                }
            }
            assert!(excl.is_none() || shared == 0, "readers with a writer");
            (shared, excl)
        }

        fn compatible(&self, k: LockType) -> bool {
            let (s, x) = self.holders();
            match k {
                S => x.is_none(),
                X => x.is_none() && s == 0,
            }
        }

        /// FIFO: grant waiting requests from the oldest while compatible;
        /// one writer at most, and nobody overtakes a waiting request.
        fn promote(&mut self) {
            for i in 0..self.ring.len() {
                if self.ring[i].3 {
                    continue;
                }
                let k = self.ring[i].1;
                if !self.compatible(k) {
                    return;
                }
                self.ring[i].3 = true;
                self.grants.push(self.ring[i].2);
                if k == X {
                    return;
                }
            }
        }
    }

    fn run(cap: usize, steps: Vec<Step>) -> std::result::Result<(), TestCaseError> {
        let mut q = LockQueue::new(cap);
        let mut m = Model {
            next_ticket: 1,
            cap,
            ..Model::default()
        };
        for s in steps {
            match s {
                Step::Acquire(r, x) => {
                    let k = kind(x);
                    let waiting = m.ring.iter().any(|w| !w.3);
                    let want = if !waiting && m.compatible(k) {
                        m.held.push((r, k));
                        Acquire::Granted
                    } else if m.ring.len() >= m.cap {
                        Acquire::Busy
                    } else {
                        let t = m.next_ticket;
                        m.next_ticket += 1;
                        m.ring.push((r, k, t, false));
                        Acquire::Queued(t)
                    };
                    prop_assert_eq!(q.acquire(r, k), want);
                }
                Step::Release(i) => {
                    if m.held.is_empty() {
                        continue;
                    }
                    let (r, k) = m.held.remove(i % m.held.len());
                    prop_assert_eq!(q.release(r, k), Ok(()));
                    m.promote();
                }
                Step::BadRelease(r, x) => {
                    let k = kind(x);
                    let (s, ex) = m.holders();
                    let bad = match k {
                        S => s == 0,
                        X => ex != Some(r),
                    };
                    if bad {
                        prop_assert!(q.release(r, k).is_err());
                    }
                }
                Step::Poll(i) => {
                    if m.ring.is_empty() {
                        continue;
                    }
                    let i = i % m.ring.len();
                    let (r, k, t, granted) = m.ring[i];
                    prop_assert_eq!(q.poll(r, t), Ok(granted));
                    if granted {
                        m.ring.remove(i);
                        m.held.push((r, k));
                        // Picked up once only.
                        prop_assert!(q.poll(r, t).is_err());
                    }
                }
                Step::BadPoll(r, t) => {
                    prop_assert!(q.poll(r, t).is_err());
                    // Another rank's ticket is refused too.
                    if let Some(&(owner, _, t, _)) = m.ring.first() {
                        prop_assert!(q.poll(owner + 1, t).is_err());
                    }
                }
                Step::Cancel(i) => {
                    if m.ring.is_empty() {
                        continue;
                    }
                    let (r, _, t, _) = m.ring.remove(i % m.ring.len());
                    prop_assert_eq!(q.cancel(r, t), Ok(()));
                    m.promote();
                }
            }
            prop_assert_eq!(q.holders(), m.holders());
            prop_assert_eq!(q.queued(), m.ring.len());
            // In the ring, every granted request precedes every waiting one.
            let first_waiting = q.waiting.iter().position(|w| !w.granted);
            if let Some(f) = first_waiting {
                prop_assert!(q.waiting.iter().skip(f).all(|w| !w.granted));
            }
        }
        // Grants happen in ticket (arrival) order.
        prop_assert!(m.grants.windows(2).all(|w| w[0] < w[1]), "{:?}", m.grants);
        // Liveness: once every holder releases and origins poll, every
        // queued request is granted.
        for _ in 0..=m.ring.len() + 1 {
            while let Some((r, k)) = m.held.pop() {
                prop_assert_eq!(q.release(r, k), Ok(()));
                m.promote();
            }
            let ring = std::mem::take(&mut m.ring);
            for (r, k, t, granted) in ring {
                prop_assert_eq!(q.poll(r, t), Ok(granted));
                if granted {
                    m.held.push((r, k));
                } else {
                    m.ring.push((r, k, t, granted));
                }
            }
        }
        prop_assert!(m.ring.is_empty(), "starved: {:?}", m.ring);
        prop_assert_eq!(q.queued(), 0);
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]
        #[test]
        fn lock_queue_matches_fifo_model(
            cap in 1..6usize,
            steps in proptest::collection::vec(step(), 0..80),
        ) {
            run(cap, steps)?;
        }
    }
}
