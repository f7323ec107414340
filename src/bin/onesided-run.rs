//! `onesided-run -n N [--provider P] [--timeout SECS] PROGRAM [ARGS...]`:
//! starts N local ranks of PROGRAM. See `onesided::bootstrap::launcher`.

use clap::Parser;
use onesided::launcher::{run, Options};

fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_env("ONESIDED_LOG"))
        .with_writer(std::io::stderr)
        .init();
    let opts = Options::parse();
    let code = match run(&opts) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("onesided-run: {e}");
            1
        }
    };
    std::process::exit(code);
}
