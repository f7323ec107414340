//! Generates bindings to the system PMIx client library with bindgen — when
//! there is one.
//!
//! PMIx is optional: a machine without `libpmix-dev` (no `pmix.pc` for
//! pkg-config) still builds, with `cfg(pmix)` unset, and the crate's safe
//! client then answers every call with "PMIx support not built". Set
//! `PMIX_SYS_DISABLE=1` to build the stub even where PMIx is installed (to
//! test that path). A PMIx that is found but does not bind is a build
//! error, not a silent stub.

use std::env;
use std::path::PathBuf;

fn main() {
    println!("cargo:rustc-check-cfg=cfg(pmix)");
    println!("cargo:rerun-if-env-changed=PMIX_SYS_DISABLE");
    println!("cargo:rerun-if-changed=wrapper.h");
    let out = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR"));

    if env::var_os("PMIX_SYS_DISABLE").is_some_and(|v| v == "1") {
        stub("PMIX_SYS_DISABLE=1 was set when pmix-sys was built");
        return;
    }
    let lib = match pkg_config::Config::new()
        .atleast_version("3.0")
        .probe("pmix")
    {
        Ok(lib) => lib,
        Err(e) => {
            let first = e.to_string().lines().next().unwrap_or("").to_string();
            println!(
                "cargo:warning=PMIx not found through pkg-config ({first}); building without PMIx \
                 support (srun --mpi=pmix and Open MPI's mpirun will be refused). \
                 Install libpmix-dev for it."
            );
            stub("libpmix-dev (pmix.pc) was not found when pmix-sys was built");
            return;
        }
    };

    let mut builder = bindgen::Builder::default()
        .header("wrapper.h")
        .allowlist_function("PMIx_(Init|Finalize|Abort|Put|Commit|Fence|Get|Error_string|Value_load|Value_destruct|Info_load|Get_version)")
        .allowlist_type("pmix_(proc|value|info|status|rank|scope|data_type)_t")
        .allowlist_var("PMIX_(SUCCESS|ERR_NOT_FOUND|ERR_TIMEOUT|ERR_UNREACH|GLOBAL|BOOL|STRING|INT|SIZE|UINT16|UINT32|UINT64|INT32|PROC_RANK|MAX_NSLEN|MAX_KEYLEN|COLLECT_DATA|TIMEOUT|OPTIONAL|JOB_SIZE|LOCAL_PEERS|LOCAL_SIZE|HOSTNAME)")
        .derive_default(true)
        .derive_debug(false)
        .layout_tests(false)
        .parse_callbacks(Box::new(bindgen::CargoCallbacks::new()));
    for inc in &lib.include_paths {
        builder = builder.clang_arg(format!("-I{}", inc.display()));
    }
    let bindings = builder
        .generate()
        .expect("bindgen failed on the PMIx headers (pmix.pc was found)");
    bindings
        .write_to_file(out.join("bindings.rs"))
        .expect("cannot write bindings.rs");
    println!("cargo:rustc-cfg=pmix");
    println!(
        "cargo:rustc-env=PMIX_SYS_BUILT=PMIx {} ({})",
        lib.version,
        lib.link_paths
            .first()
            .map(|p| p.display().to_string())
            .unwrap_or_default()
    );
}

fn stub(reason: &str) {
    println!("cargo:rustc-env=PMIX_SYS_BUILT=not built: {reason}");
}
