// Errors are made by the library: a struct variant may gain fields, so an
// application cannot build one (it matches with `..` and reads `kind()`).
fn main() {
    let _ = onesided::Error::Timeout {
        what: String::from("waiting"),
        seconds: 1,
    };
}
