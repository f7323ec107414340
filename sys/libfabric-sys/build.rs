//! Generates bindings to the system libfabric with bindgen.
//!
//! Most of the libfabric API (`fi_write`, `fi_read`, `fi_atomic`, `fi_cq_read`,
//! `fi_mr_reg`, ...) consists of `static inline` functions that dispatch through
//! the ops tables of a fid. bindgen's `wrap_static_fns` emits a C file with one
//! exported wrapper per inline function; we compile it with `cc` and link it.

use std::env;
use std::path::PathBuf;

use bindgen::callbacks::{IntKind, ParseCallbacks};

/// `FI_*` flag macros are `1ULL << n`: make every one `u64` except the error
/// codes (`FI_E*`, plain `int`s compared against negative return values).
#[derive(Debug)]
struct MacroTypes;

impl ParseCallbacks for MacroTypes {
    fn int_macro(&self, name: &str, _value: i64) -> Option<IntKind> {
        if !name.starts_with("FI_") {
            return None;
        }
        let is_errno = name.starts_with("FI_E")
            && name.len() > 4
            && name[4..]
                .chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
            && !name.starts_with("FI_EP_")
            && !name.starts_with("FI_EVENT")
            && !name.starts_with("FI_ENDPOINT");
        if is_errno || name == "FI_SUCCESS" {
            Some(IntKind::I32)
        } else {
            Some(IntKind::U64)
        }
    }
}

fn main() {
    let lib = pkg_config::Config::new()
        .atleast_version("1.10")
        .probe("libfabric")
        .unwrap_or_else(|e| {
            panic!(
                "libfabric not found through pkg-config ({e}).\n\
                 Install it with: apt-get install libfabric-dev pkg-config \
                 (or run scripts/setup.sh)"
            )
        });

    let out = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let wrappers = out.join("static_wrappers");

    let mut builder = bindgen::Builder::default()
        .header("wrapper.h")
        .allowlist_function("fi_.*")
        .allowlist_type("fi_.*|fid.*")
        .allowlist_var("FI_.*")
        .default_enum_style(bindgen::EnumVariation::Consts)
        .prepend_enum_name(false)
        .derive_default(true)
        .wrap_static_fns(true)
        .wrap_static_fns_path(&wrappers)
        .parse_callbacks(Box::new(MacroTypes))
        .parse_callbacks(Box::new(bindgen::CargoCallbacks::new()));
    for inc in &lib.include_paths {
        builder = builder.clang_arg(format!("-I{}", inc.display()));
    }
    let bindings = builder
        .generate()
        .expect("bindgen failed on the libfabric headers");
    bindings
        .write_to_file(out.join("bindings.rs"))
        .expect("cannot write bindings.rs");

    let mut cc = cc::Build::new();
    cc.file(wrappers.with_extension("c"))
        .include(env::current_dir().expect("cwd"))
        .flag_if_supported("-Wno-unused-parameter")
        .flag_if_supported("-Wno-deprecated-declarations");
    for inc in &lib.include_paths {
        cc.include(inc);
    }
    // The generated file includes the header by its path; make it find ours.
    cc.flag(format!(
        "-include{}",
        env::current_dir().expect("cwd").join("wrapper.h").display()
    ));
    cc.compile("libfabric_static_wrappers");
    println!("cargo:rerun-if-changed=wrapper.h");
}
