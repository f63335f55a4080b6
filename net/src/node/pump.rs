//! The event loop's wait on storage completions: the ring's readiness fd, which the loop
//! awaits beside its sockets and timers (`Node::run`), then drains through the host
//! (`Node::pump`).

/// The storage backend's readiness fd (owned by the backend; this only names it for tokio).
pub(super) struct ReadinessFd(pub(super) std::os::fd::RawFd);

impl std::os::fd::AsRawFd for ReadinessFd {
    fn as_raw_fd(&self) -> std::os::fd::RawFd {
        self.0
    }
}

/// Resolves when the ring has posted a completion since the backend last cleared its fd
/// (`poll_storage` clears it before draining, so a later completion signals again).
pub(super) async fn storage_signal(
    ready: Option<&tokio::io::unix::AsyncFd<ReadinessFd>>,
) -> std::io::Result<()> {
    match ready {
        Some(fd) => {
            let mut guard = fd.readable().await?;
            guard.clear_ready();
            Ok(())
        }
        None => std::future::pending().await,
    }
}
