// `WindowMemory` is sealed: the conversion into the library's memory cannot
// be called (nor the trait implemented) outside the crate.
#[allow(unused_imports)]
use onesided::WindowMemory;

fn main() {
    let v = vec![0u64; 8];
    let _m = v.into_memory();
}
