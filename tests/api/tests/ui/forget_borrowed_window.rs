// A window over borrowed memory, leaked with mem::forget, would let peers
// write `buf` after it is freed: `create` takes only memory the window can
// own (Vec, Box, &'static mut), so this does not compile.
use onesided::{Window, World};

fn main() {
    let world = World::init().unwrap();
    let mut buf = vec![0u64; 8];
    let win = Window::create(&world, &mut buf[..]).unwrap();
    std::mem::forget(win);
    drop(buf);
}
