//! SIGHUP, the terminal's hang-up, stops a node (and `ringlog dev`) as SIGTERM does: a leader
//! resigns first. Without a handler the default action ended the process at once, so closing
//! the terminal that ran `ringlog dev` killed all four nodes in the same instant (the
//! foreground process group gets the signal). Under `nohup` (SIGHUP ignored when the process
//! starts) no handler is installed and the signal stays ignored.

use tokio::signal::unix::{Signal, SignalKind, signal};

/// The SIGHUP stream, or `None` when SIGHUP was ignored at start (`nohup`).
pub fn hangup() -> std::io::Result<Option<Signal>> {
    if hangup_ignored() {
        return Ok(None);
    }
    signal(SignalKind::hangup()).map(Some)
}

/// Completes at the next signal of `signal`; never when there is none.
pub async fn next(signal: &mut Option<Signal>) {
    match signal {
        Some(signal) => {
            signal.recv().await;
        }
        None => std::future::pending::<()>().await,
    }
}

fn hangup_ignored() -> bool {
    // SAFETY: a query only (no new action); `current` is written by the kernel.
    unsafe {
        let mut current: libc::sigaction = std::mem::zeroed();
        libc::sigaction(libc::SIGHUP, std::ptr::null(), &mut current) == 0
            && current.sa_sigaction == libc::SIG_IGN
    }
}
