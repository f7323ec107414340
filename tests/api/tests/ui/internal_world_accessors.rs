// The World's internal accessors (the raw transport, its capability flags,
// the active-message layer) exist only with the `unstable` feature.
fn main() -> onesided::Result<()> {
    let world = onesided::World::init()?;
    let _ = world.bench_transport();
    let _ = world.transport_caps();
    let _ = world.active_messages();
    Ok(())
}
