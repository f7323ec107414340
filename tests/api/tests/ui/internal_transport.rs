// The transport (registrations, raw puts to any address and key) is not
// reachable from safe application code.
use onesided::transport::Transport;

fn main() {}
