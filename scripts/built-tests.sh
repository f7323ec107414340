# Sourced by the CI stages that run after scripts/test.sh: the workspace's
# test executables exactly as `cargo test --workspace` (no target
# selection) built them.
#
# A cargo invocation with a target selection (`--test rma`, `--lib`)
# resolves the dev-dependencies' features differently from the whole
# workspace's test build and compiles the library and every selected
# suite again under new hashes (49 s of a CI run for the tiny-sizes
# stage). Asking cargo for the executables of the unselected build
# compiles nothing after scripts/test.sh (and builds what is missing
# when run on its own).
#
#     . scripts/built-tests.sh
#     built_tests_load || exit 1
#     exe=$(built_test test rma)        # tests/rma.rs
#     exe=$(built_test lib onesided)    # the library's unit tests

built_tests_json=

# Builds what is missing of the workspace's tests (nothing after
# scripts/test.sh) and loads the list of their executables.
built_tests_load() {
    built_tests_json=$(cargo test --workspace --no-run --message-format=json 2> /dev/null) || {
        echo "cargo test --workspace --no-run failed (run it to see why)" >&2
        return 1
    }
}

# Prints the executable of the workspace's test target of kind $1 ("test"
# or "lib") named $2; nothing if there is none.
built_test() {
    built_test_in "$built_tests_json" "$1" "$2"
}

# Prints the executable of kind $2 named $3 in cargo's JSON messages $1
# (`cargo ... --no-run --message-format=json` of any profile).
built_test_in() {
    echo "$1" | grep "\"kind\":\[\"$2\"\]" | grep "\"name\":\"$3\"" |
        sed -n 's/.*"executable":"\([^"]*\)".*/\1/p' | tail -1 || true
}
