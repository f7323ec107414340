//! Compile-fail tests of onesided's public API (see `tests/ui/`): what an
//! application must not be able to write in safe code.
