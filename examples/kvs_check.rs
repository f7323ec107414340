//! Smoke test of the bootstrap layer: every rank puts a key, barrier, reads
//! every other rank's key. Run it as
//! `onesided-run -n 4 target/debug/examples/kvs_check` or
//! `mpiexec.hydra -n 4 target/debug/examples/kvs_check`, or alone.

fn main() -> onesided::Result<()> {
    let boot = onesided::bootstrap::init()?;
    let (rank, size) = (boot.rank(), boot.size());
    boot.put(&format!("kvs-check-{rank}"), &format!("value-of-{rank}"))?;
    boot.barrier()?;
    for peer in 0..size {
        let v = boot.get(&format!("kvs-check-{peer}"))?;
        if v != format!("value-of-{peer}") {
            eprintln!("rank {rank}: wrong value for rank {peer}: {v}");
            std::process::exit(1);
        }
    }
    boot.barrier()?;
    println!("rank {rank} of {size} via {}: ok", boot.name());
    Ok(())
}
