// Memory given to a window belongs to the window until `into_vec` gives it
// back: the program keeps no reference through which it could read or
// write bytes that peers write at the same time (a data race), so touching
// the Vec after `create` does not compile.
use onesided::{Window, World};

fn main() {
    let world = World::init().unwrap();
    let mut buf = vec![0u64; 8];
    let win = Window::create(&world, buf).unwrap();
    buf[0] = 1;
    let _back = win.into_vec().unwrap();
}
