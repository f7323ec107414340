//! Start-up on the libfabric shm provider (issue 12 item 9).
//!
//! The shm provider names its `/dev/shm` region after the endpoint's source
//! address, by default `fi_shm://<pid>`, giving `/dev/shm/<pid>:<uid>:<n>`
//! for the n-th endpoint of the process. A region left there by a killed
//! process (SIGKILL and SIGABRT skip the provider's clean-up) whose pid the
//! kernel later gives to a rank made that rank's `fi_enable` fail with
//! "Device or resource busy": `World::init` failed about once in 150 runs
//! under load. `scripts/startup-loop.sh` repeats the start-up to count it.

#[macro_use]
mod common;

use common::{Job, Launcher};
use onesided::{Window, World};

/// This process's user id (the shm provider puts it in region names).
fn uid() -> u32 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self").expect("/proc/self").uid()
}

fn shm_jobs(ranks: &[usize]) -> Vec<Job> {
    ranks
        .iter()
        .map(|&ranks| Job {
            launcher: Launcher::OnesidedRun,
            ranks,
            provider: "shm".into(),
            direct: false,
        })
        .collect()
}

/// Every rank writes its rank into its right neighbour, reads its left
/// neighbour's word back and checks it.
fn ring(world: &World) {
    let (rank, size) = (world.rank(), world.size());
    let right = (rank + 1) % size;
    let mut win = Window::<u64>::allocate(world, 4).expect("allocate");
    win.lock_all().expect("lock_all");
    win.put(right, 1, &[rank as u64 + 100]).expect("put");
    win.flush(right).expect("flush");
    win.unlock_all().expect("unlock_all");
    world.barrier().expect("barrier");
    let mut mine = [0u64; 4];
    win.local_read(0, &mut mine).expect("local_read");
    assert_eq!(mine, [0, ((rank + size - 1) % size) as u64 + 100, 0, 0]);
    win.free().expect("free");
}

// Each rank plants what a killed process with its pid would have left: a
// region under the name its first endpoint would take by default. The
// provider refuses to reuse it (EBUSY) unless every open picks a name of
// its own.
spmd_test!(
    shm_start_up_ignores_a_stale_region_under_its_pid,
    jobs = shm_jobs(&[2, 4]),
    || {
        let stale = format!("/dev/shm/{}:{}:0", std::process::id(), uid());
        std::fs::write(&stale, vec![0u8; 4096]).expect("planting a stale region");
        let world = World::init();
        let _ = std::fs::remove_file(&stale);
        let world = world.unwrap_or_else(|e| panic!("World::init beside {stale}: {e}"));
        assert_eq!(world.provider(), "shm");
        ring(&world);
        world.finalize().expect("finalize");
    }
);

// Names are per process and per open: this job's regions carry the rank's
// pid after an `onesided-` prefix (so a leftover says whose it is), not the
// provider's default name.
spmd_test!(
    shm_region_names_are_unique_per_process,
    jobs = shm_jobs(&[4]),
    || {
        let world = World::init().expect("World::init");
        let prefix = format!("onesided-{}-", std::process::id());
        let mine: Vec<String> = std::fs::read_dir("/dev/shm")
            .expect("/dev/shm")
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with(&prefix))
            .collect();
        assert_eq!(mine.len(), 1, "regions of this process: {mine:?}");
        let default = format!("{}:{}:0", std::process::id(), uid());
        assert!(
            !std::path::Path::new("/dev/shm").join(&default).exists(),
            "a region under the default name {default}"
        );
        ring(&world);
        world.finalize().expect("finalize");
    }
);
