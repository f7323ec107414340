// Exposing borrowed memory is possible, but only in `unsafe` code (the
// caller promises not to leak the window).
use onesided::{Window, WindowInfo, World};

fn main() {
    let world = World::init().unwrap();
    let mut buf = vec![0u64; 8];
    let win = Window::create_borrowed(&world, &mut buf, &WindowInfo::default()).unwrap();
    drop(win);
}
