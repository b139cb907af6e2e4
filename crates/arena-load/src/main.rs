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

/// Sleep until ``at`` (seconds since the epoch): in steps of at most 20 ms, so that a signal
/// meanwhile is seen (the run then begins and ends at once, interrupted, with its result written).
fn wait_until(at: f64) {
    loop {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64());
        let left = at - now;
        if left <= 0.0 || engine::INTERRUPTED.load(Ordering::Relaxed) {
            return;
        }
        std::thread::sleep(std::time::Duration::from_secs_f64(left.min(0.02)));
    }
}

/// Exit statuses: 0 a valid run, 1 a run whose result says it is invalid (written all the same),
/// 2 bad arguments, 3 the run could not be made or its result not written, 130 interrupted (the
/// partial result is written).
const EXIT_INVALID: u8 = 1;
const EXIT_USAGE: u8 = 2;
const EXIT_FAILED: u8 = 3;
const EXIT_INTERRUPTED: u8 = 130;

/// Load generators open many sockets: raise the soft limit on open files to the hard one.
fn raise_open_files_limit() {
    unsafe {
        let mut lim: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 && lim.rlim_cur < lim.rlim_max {
            lim.rlim_cur = lim.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
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
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let cfg = match cli::config(&args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("arena-load: error: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    install_signal_handlers();
    raise_open_files_limit();
    if let Some(at) = args.start_at {
        wait_until(at);
    }
    let outcome = match run::run(&cfg) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("arena-load: error: {e}");
            return ExitCode::from(EXIT_FAILED);
        }
    };
    let doc = output::document(&cfg, &args.url, &outcome);
    let json = serde_json::to_vec_pretty(&doc).expect("the result serializes");
    let written = match &args.output {
        Some(path) => output::write_result(path, &json),
        None => std::io::stdout().write_all(&json).and_then(|()| std::io::stdout().write_all(b"\n")),
    };
    if let Err(e) = written {
        eprintln!("arena-load: error: cannot write the result: {e}");
        return ExitCode::from(EXIT_FAILED);
    }
    if outcome.interrupted {
        return ExitCode::from(EXIT_INTERRUPTED);
    }
    if !doc.validity.valid {
        eprintln!("arena-load: invalid run: {}", doc.validity.reasons.join("; "));
        return ExitCode::from(EXIT_INVALID);
    }
    ExitCode::SUCCESS
}
