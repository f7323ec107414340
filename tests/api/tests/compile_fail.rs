//! Each file under `tests/ui/` must fail to compile, with the error in the
//! `.stderr` file beside it (`TRYBUILD=overwrite` regenerates those after a
//! deliberate change). The crate is built as an application builds it:
//! without the `unstable` feature.

#[test]
fn misuse_does_not_compile() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
}
