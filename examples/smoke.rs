use onesided::{Assert, Window, World};
fn main() -> onesided::Result<()> {
    let world = World::init()?;
    let mut win = Window::<u64>::allocate(&world, 16)?;
    assert!(win.put(0, 0, &[1]).is_err());
    win.lock_all()?;
    win.put(0, 3, &[7, 8])?;
    let mut out = [0u64; 2];
    win.get(0, 3, &mut out)?;
    assert_eq!(out, [7, 8]);
    println!("{}", win.put(0, 15, &[1, 2]).unwrap_err());
    println!("{}", win.put(3, 0, &[1]).unwrap_err());
    println!("{}", win.fence(Assert::NONE).unwrap_err());
    win.unlock_all()?;
    win.free()?;
    println!("ok provider={} stats={:?}", world.provider(), world.stats());
    Ok(())
}
