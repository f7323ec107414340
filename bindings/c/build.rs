//! Gives the shared library a SONAME (`libonesided_c.so.0`): programs
//! linked against it record the ABI version, not the file name.

fn main() {
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libonesided_c.so.0");
    }
    println!("cargo:rerun-if-changed=build.rs");
}
