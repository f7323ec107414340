//! The protocol suites on the in-process back-end (`World::run_threads`):
//! ranks are threads of this test process, memory copies and CPU atomics
//! move the data, messages wait for the target's progress. Every suite
//! runs at 2 and 4 ranks and checks every byte; each protocol is selected
//! through the configuration (`run_threads_with`), never the process's
//! environment (tests run in parallel in one process). Nothing
//! synchronizes by sleeping.

use onesided::config::{AccumulateMode, AggregateMode, Config, LockMode};
use onesided::{Assert, Op, Window, World};

/// The configurations the suites run under: the defaults on this back-end
/// (native atomics: lock word, hardware accumulates) and the software
/// protocols (lock queue, active-message accumulates, aggregation).
#[derive(Debug, Clone, Copy)]
enum Mode {
    Native,
    Software,
}

fn config(mode: Mode) -> Config {
    let mut c = Config::from_env().expect("configuration");
    c.timeout = Some(std::time::Duration::from_secs(60));
    if let Mode::Software = mode {
        c.accumulate = AccumulateMode::Software;
        c.lock = LockMode::Software;
        c.ops.mode = AggregateMode::On;
    }
    c
}

fn run<R: Send>(
    ranks: usize,
    mode: Mode,
    f: impl Fn(&World) -> onesided::Result<R> + Sync,
) -> Vec<R> {
    World::run_threads_with(config(mode), ranks, f)
        .unwrap_or_else(|e| panic!("{ranks} ranks, {mode:?}: {e}"))
}

#[test]
fn smoke_accumulate_into_rank_zero() {
    for mode in [Mode::Native, Mode::Software] {
        for ranks in [1, 2, 4] {
            let got = run(ranks, mode, |world| {
                let mut win = Window::<u64>::allocate(world, 1)?;
                win.fence(Assert::NONE)?;
                win.accumulate(0, 0, &[world.rank() as u64 + 1], Op::Sum)?;
                win.fence(Assert::NONE)?;
                let mut v = [0u64];
                win.local_read(0, &mut v)?;
                win.free()?;
                Ok(v[0])
            });
            let n = ranks as u64;
            assert_eq!(got[0], n * (n + 1) / 2, "{ranks} ranks {mode:?}");
        }
    }
}
