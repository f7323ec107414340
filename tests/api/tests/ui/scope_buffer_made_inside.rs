// A buffer made inside the scope cannot be handed to it: the scope may
// fill it after the closure returned.
use onesided::{Window, World};

fn main() -> onesided::Result<()> {
    let world = World::init()?;
    let win = Window::<u64>::allocate(&world, 8)?;
    win.scope(|s| {
        let mut local = vec![0u64; 8];
        s.rget(0, 0, &mut local)?;
        Ok(())
    })?;
    Ok(())
}
