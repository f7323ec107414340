// A scoped request cannot leave its scope.
use onesided::{Window, World};

fn main() -> onesided::Result<()> {
    let world = World::init()?;
    let win = Window::<u64>::allocate(&world, 8)?;
    let mut buf = vec![0u64; 8];
    let escaped = win.scope(|s| s.rget(0, 0, &mut buf))?;
    escaped.wait()?;
    Ok(())
}
