//! `onesided-run -n N [--provider P] [--timeout SECS] PROGRAM [ARGS...]`:
//! starts N local ranks of PROGRAM. See `onesided::bootstrap::launcher`.

use clap::Parser;
use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::sync::Arc;

use onesided::launcher::{run_until, Options};
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::flag;

fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_env("ONESIDED_LOG"))
        .with_writer(std::io::stderr)
        .init();
    let opts = Options::parse();
    // Ending the launcher ends the job: the handlers only record the
    // signal, which the launcher's watch loop acts on (`run_until`).
    // A second signal ends the launcher at once (the ranks that joined
    // the job then end through their lifeline).
    let signal = Arc::new(AtomicUsize::new(0));
    let again = Arc::new(AtomicBool::new(false));
    for sig in [SIGINT, SIGTERM, SIGHUP] {
        let watched = flag::register_conditional_default(sig, Arc::clone(&again))
            .and_then(|_| flag::register(sig, Arc::clone(&again)))
            .and_then(|_| flag::register_usize(sig, Arc::clone(&signal), sig as usize));
        if let Err(e) = watched {
            eprintln!("onesided-run: cannot watch signal {sig}: {e}");
        }
    }
    let code = match run_until(&opts, &signal) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("onesided-run: {e}");
            1
        }
    };
    std::process::exit(code);
}
