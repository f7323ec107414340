//! An atomic view borrows its window: the window cannot be freed (or its
//! memory given back) while a view of it exists.
use onesided::{Window, World};
use std::sync::atomic::Ordering;

fn main() {
    let world = World::init().unwrap();
    let win = Window::<u64>::allocate(&world, 4).unwrap();
    let cell = win.atomic(0).unwrap();
    let memory = win.into_vec().unwrap();
    cell.fetch_add(1, Ordering::Relaxed);
    drop(memory);
}
