//! The node's half of storage completions (`pump`): the host drains the ring, reports
//! durability to the core and releases what waited on it (`Host::pump`); the node then
//! delivers the host's output, answers produce waiters and releases parked replica fetches,
//! until nothing is left to do. What a routed completion queued reaches the kernel before the
//! event loop sleeps on the ring's readiness fd.

use std::time::Instant;

use super::{Node, NodeError};

impl Node {
    /// Drains storage completions through the host and acts on everything that follows from
    /// them, until nothing is left to do.
    pub(super) fn pump(&mut self) -> Result<(), NodeError> {
        let mut first = true;
        loop {
            let now = self.now_ms();
            let began = Instant::now();
            let progressed = self.host.pump(now)?;
            self.stall.part(began, "pump: host");
            // One more round after anything happened: what the waiters' check did (retention's
            // snapshot, a topic's partitions started) is reported to the core in it.
            if !first && !progressed && !self.host.has_output() && self.parked_releases.is_empty() {
                return Ok(());
            }
            first = false;
            self.deliver()?;
            // Its stages are timed inside.
            self.check_waiters()?;
            if !self.parked_releases.is_empty() {
                self.release_parked_fetches()?;
            }
        }
    }

    /// Answers what waits on the host's progress: the committed metadata records are applied
    /// first (a topic may have been created), then the groups, DeleteRecords, voter changes
    /// and producer id blocks move on, the produce waiters whose records are durable or
    /// committed are answered (handlers/produce.rs), and the parked consumer fetches whose
    /// partitions gained committed records (handlers/consumer_fetch.rs). Each stage is timed
    /// for the stall watch.
    pub(super) fn check_waiters(&mut self) -> Result<(), NodeError> {
        let began = Instant::now();
        self.apply_metadata_records()?;
        self.stall.part(began, "pump: apply_metadata_records");
        let began = Instant::now();
        self.groups_pump()?;
        self.stall.part(began, "pump: groups");
        self.answer_delete_records()?;
        self.answer_voter_changes()?;
        self.answer_producer_id_blocks()?;
        self.handlers
            .produces
            .check_waiters(&cx!(self), &mut self.stall)?;
        let began = Instant::now();
        let lookup = super::metadata::PartitionLookup {
            topics: &self.handlers.topics,
            offline: &self.offline,
        };
        let woken = self.handlers.fetches.wake(&mut cx!(self), lookup);
        self.stall.part(began, "pump: wake_parked_fetches");
        woken
    }
}

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
