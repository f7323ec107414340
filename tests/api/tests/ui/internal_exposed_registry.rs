// The registry of exposed window memory is internal: an application cannot
// register memory behind the library's back.
fn main() {
    let _ = onesided::transport::exposed::ExposedTable::default();
}
