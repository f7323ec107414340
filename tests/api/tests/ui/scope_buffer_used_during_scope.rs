// A slice handed to a scope's rget stays borrowed until the scope ends:
// touching it inside the scope does not compile.
use onesided::{Window, World};

fn main() -> onesided::Result<()> {
    let world = World::init()?;
    let win = Window::<u64>::allocate(&world, 8)?;
    let mut buf = vec![0u64; 8];
    win.scope(|s| {
        s.rget(0, 0, &mut buf[..4])?;
        buf[0] = 1;
        Ok(())
    })?;
    Ok(())
}
