//! Generates bindings to the system libibverbs and librdmacm with bindgen.
//!
//! The data path of verbs (`ibv_post_send`, `ibv_post_recv`, `ibv_poll_cq`,
//! `ibv_req_notify_cq`, the `ibv_wr_*` family, ...) consists of
//! `static inline` functions that dispatch through the provider's ops table.
//! bindgen's `wrap_static_fns` emits a C file with one exported wrapper per
//! inline function; we compile it with `cc` and link it, as libfabric-sys does.
//!
//! Libraries are found with pkg-config (`libibverbs`, `librdmacm`). When
//! pkg-config cannot answer (no `pkg-config`, no `.pc` files, or a missing
//! `Requires.private` such as `libnl-3.0`), we fall back to a plain
//! `-libverbs -lrdmacm` link as long as the headers are usable.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Stdio;

const INSTALL_HINT: &str =
    "Install them with: apt-get install libibverbs-dev librdmacm-dev pkg-config \
     (or run scripts/setup.sh)";

/// Finds the libraries and emits the link directives; returns the include
/// directories to hand to bindgen and to the C compiler.
fn probe_libraries() -> Vec<PathBuf> {
    let mut cfg = pkg_config::Config::new();
    // Emit the link lines ourselves, only once both probes have succeeded, so
    // that a half-successful probe cannot leave a duplicate or partial link.
    cfg.cargo_metadata(false);
    match (cfg.probe("libibverbs"), cfg.probe("librdmacm")) {
        (Ok(verbs), Ok(cm)) => {
            let mut includes = Vec::new();
            for lib in [&verbs, &cm] {
                for dir in &lib.link_paths {
                    println!("cargo:rustc-link-search=native={}", dir.display());
                }
                for name in &lib.libs {
                    println!("cargo:rustc-link-lib={name}");
                }
                for inc in &lib.include_paths {
                    if !includes.contains(inc) {
                        includes.push(inc.clone());
                    }
                }
            }
            includes
        }
        (verbs, cm) => {
            // Only the first line of each error: the rest is a long hint
            // about PKG_CONFIG_PATH, repeated for every library.
            let why: Vec<String> = [("libibverbs", verbs.err()), ("librdmacm", cm.err())]
                .into_iter()
                .filter_map(|(name, err)| {
                    let err = err?.to_string();
                    Some(format!(
                        "{name}: {}",
                        err.trim().lines().next().unwrap_or("")
                    ))
                })
                .collect();
            println!(
                "cargo:warning=pkg-config could not find libibverbs/librdmacm ({}); \
                 falling back to -libverbs -lrdmacm",
                why.join("; ")
            );
            println!("cargo:rustc-link-lib=ibverbs");
            println!("cargo:rustc-link-lib=rdmacm");
            Vec::new()
        }
    }
}

/// Runs the C preprocessor over `wrapper.h` so that missing headers give a
/// clear message instead of a bindgen/clang error deep in the build log.
fn check_headers(header: &Path, includes: &[PathBuf]) {
    let compiler = cc::Build::new().get_compiler();
    let mut cmd = compiler.to_command();
    cmd.arg("-E").arg("-o").arg("/dev/null");
    for inc in includes {
        cmd.arg(format!("-I{}", inc.display()));
    }
    cmd.arg(header).stdout(Stdio::null()).stderr(Stdio::piped());
    let detail = match cmd.output() {
        Ok(out) if out.status.success() => return,
        Ok(out) => String::from_utf8_lossy(&out.stderr).into_owned(),
        Err(e) => format!("cannot run the C compiler {:?}: {e}", compiler.path()),
    };
    panic!(
        "the RDMA headers <infiniband/verbs.h> and <rdma/rdma_cma.h> are not usable.\n\
         {INSTALL_HINT}\n\
         Preprocessor output:\n{detail}"
    );
}

fn main() {
    let includes = probe_libraries();

    let here = env::current_dir().expect("cwd");
    let header = here.join("wrapper.h");
    check_headers(&header, &includes);

    let out = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let wrappers = out.join("static_wrappers");

    let mut builder = bindgen::Builder::default()
        .header("wrapper.h")
        // Static inlines outside `ibv_.*|rdma_.*` are left out on purpose:
        //  - `verbs_get_ctx` open-codes `container_of` on a private layout;
        //    it is an implementation detail of the inline ops below.
        //  - `__ibv_reg_mr`/`__ibv_reg_mr_iova` exist only to feed
        //    `__builtin_constant_p(access)` from the `ibv_reg_mr` macro; Rust
        //    gets the exported `ibv_reg_mr` (and `ibv_reg_mr_iova2`, which
        //    the macro uses for IBV_ACCESS_OPTIONAL_RANGE flags).
        //  - `__ibv_get_device_list` exists only with RDMA_STATIC_PROVIDERS
        //    (static linking) and calls the varargs `ibv_static_providers`.
        // `___ibv_query_port` is the exception: the exported `ibv_query_port`
        // symbol is the libibverbs 1.1 compat entry point taking a truncated
        // `struct _compat_ibv_port_attr`; C code never calls it because the
        // `ibv_query_port` macro expands to `___ibv_query_port`. We wrap that
        // one, hide the compat symbol, and lib.rs re-exports the wrapper
        // under the C name.
        .allowlist_function("ibv_.*|rdma_.*|___ibv_query_port")
        .blocklist_function("ibv_query_port")
        .allowlist_type("ibv_.*|rdma_.*")
        // RAI_* are the ai_flags of `rdma_getaddrinfo`; nothing else to use them with.
        .allowlist_var("IBV_.*|RDMA_.*|RAI_.*")
        // Constant-style enums: verbs enums repeat values (aliases such as
        // IBV_WC_IP_CSUM_OK/IBV_WC_EX_WITH_* or the QP/WR opcode enums), hold
        // flag bits that are OR-ed together (ibv_access_flags,
        // ibv_send_flags, ...), and values come back from the kernel that a
        // Rust enum could not represent. Every enum is a type alias of its C
        // integer type, and every variant a plain integer constant.
        .default_enum_style(bindgen::EnumVariation::Consts)
        .prepend_enum_name(false)
        .derive_default(true)
        // The function-like macros of verbs.h (`ibv_reg_mr`, `ibv_reg_mr_iova`,
        // `ibv_query_port`, ...) also expand inside the generated wrapper C
        // file, exactly as they would in a C program; that is intended.
        .wrap_static_fns(true)
        .wrap_static_fns_path(&wrappers)
        .parse_callbacks(Box::new(bindgen::CargoCallbacks::new()));
    for inc in &includes {
        builder = builder.clang_arg(format!("-I{}", inc.display()));
    }
    let bindings = builder
        .generate()
        .expect("bindgen failed on the verbs/rdma_cm headers");
    bindings
        .write_to_file(out.join("bindings.rs"))
        .expect("cannot write bindings.rs");

    let mut cc = cc::Build::new();
    cc.file(wrappers.with_extension("c"))
        .include(&here)
        .flag_if_supported("-Wno-unused-parameter")
        .flag_if_supported("-Wno-deprecated-declarations");
    for inc in &includes {
        cc.include(inc);
    }
    // The generated file includes the header by its relative path; make it find ours.
    cc.flag(format!("-include{}", header.display()));
    cc.compile("rdma_static_wrappers");

    println!("cargo:rerun-if-changed=wrapper.h");
    println!("cargo:rerun-if-changed=build.rs");
}
