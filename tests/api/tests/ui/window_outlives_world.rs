// A window borrows its World: it cannot outlive it.
use onesided::{Window, World};

fn main() {
    let win;
    {
        let world = World::init().unwrap();
        win = Window::<u64>::allocate(&world, 8).unwrap();
    }
    drop(win);
}
