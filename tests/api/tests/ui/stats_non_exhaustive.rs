// Stat types are #[non_exhaustive]: read them, do not construct them.
fn main() {
    let _ = onesided::stats::TransportStats {
        ops_in_flight: 0,
        ..Default::default()
    };
}
