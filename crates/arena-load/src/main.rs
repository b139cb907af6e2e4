//! arena-load: arguments -> run -> JSON result. See the library for everything else.

use std::io::Write;
use std::process::ExitCode;
use std::sync::atomic::Ordering;

use arena_load::{cli, engine, output, run};
use clap::Parser;

extern "C" fn on_signal(_: libc::c_int) {
    engine::INTERRUPTED.store(true, Ordering::Relaxed); // async-signal-safe: one atomic store
}

/// SIGINT/SIGTERM end the run early and the result is still written; a second one kills
/// (SA_RESETHAND). No SA_RESTART: the event loop's epoll_wait returns EINTR and sees the flag.
fn install_signal_handlers() {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_signal as *const () as libc::sighandler_t;
            action.sa_flags = libc::SA_RESETHAND;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(sig, &action, std::ptr::null_mut());
        }
    }
}

fn main() -> ExitCode {
    let args = match cli::Args::try_parse() {
        Ok(a) => a,
        Err(e) if matches!(e.kind(), clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion) => e.exit(),
        Err(e) => {
            let text = e.to_string();
            eprintln!("arena-load: {}", text.lines().next().unwrap_or("bad arguments"));
            return ExitCode::from(2);
        }
    };
    let cfg = match cli::config(&args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("arena-load: error: {e}");
            return ExitCode::from(2);
        }
    };
    install_signal_handlers();
    let outcome = match run::run(&cfg) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("arena-load: error: {e}");
            return ExitCode::from(1);
        }
    };
    let doc = output::document(&cfg, &args.url, &outcome);
    let json = serde_json::to_vec_pretty(&doc).expect("the result serializes");
    let written = match &args.output {
        Some(path) => {
            let tmp = path.with_extension("partial");
            std::fs::write(&tmp, &json).and_then(|()| std::fs::rename(&tmp, path))
        }
        None => std::io::stdout().write_all(&json).and_then(|()| std::io::stdout().write_all(b"\n")),
    };
    if let Err(e) = written {
        eprintln!("arena-load: error: cannot write the result: {e}");
        return ExitCode::from(1);
    }
    ExitCode::SUCCESS
}
