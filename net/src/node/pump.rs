//! Storage completions and persistence reports (`pump`): drain the ring and route each completion
//! to its log, run the log-start advances that wait for idle I/O, report durable offsets to the
//! core, release the messages held behind flushes, answer produce waiters, and feed the queued
//! `Persisted` reports to the core, until nothing is left to do. What a routed completion queued
//! reaches the kernel before the event loop sleeps.

use std::collections::BTreeMap;
use std::time::Instant;

use ringlog_engine::io::Io;
use ringlog_replication::{PartitionId, Persisted};

use super::storage::{self, PartitionStore, StorageError};
use super::{Node, NodeError};

impl Node {
    /// Drains storage completions, reports durability, releases held messages and feeds the
    /// queued persistence reports to the core until nothing is left to do.
    pub(super) fn pump(&mut self) -> Result<(), NodeError> {
        loop {
            // Routing a completion can queue the next operation (a flush's fdatasync after its
            // writes): the next turn of this loop pushes it to the kernel before the event loop
            // sleeps on the ring's readiness fd.
            let began = Instant::now();
            let routed = self.poll_storage()?;
            self.stall.part(began, "pump: poll_storage");
            let began = Instant::now();
            self.advance_deferred_log_starts()?;
            self.stall.part(began, "pump: advance_deferred_log_starts");
            self.report_durable();
            let began = Instant::now();
            self.release_held()?;
            self.stall.part(began, "pump: release_held");
            // Its stages are timed inside (handlers.rs).
            self.check_produce_waiters()?;
            if !self.parked_releases.is_empty() {
                self.release_parked_fetches()?;
                continue;
            }
            let Some((partition, persisted)) = self.persisted.pop_front() else {
                if routed || self.report_snapshots_written()? {
                    continue;
                }
                return Ok(());
            };
            let now = self.now_ms();
            let work = self.multi.on_persisted(now, partition, persisted)?;
            self.execute(work)?;
        }
    }

    /// Pushes queued operations to the kernel and routes every ready completion to its log;
    /// true if any completion was routed.
    pub(super) fn poll_storage(&mut self) -> Result<bool, NodeError> {
        // Cleared before draining: a completion posted from here on signals the fd again.
        self.io.clear_readiness();
        if self.io.in_flight() > 0 {
            self.io
                .submit_and_wait(0)
                .map_err(|e| StorageError::from(ringlog_engine::log::LogError::from(e)))?;
        }
        // A blocking call takes only its own completions (`io::wait_for_any`), so every other
        // owner's is still in the ring and is routed here.
        let mut ready = Vec::new();
        self.io.drain_completions(&mut ready);
        if ready.is_empty() {
            return Ok(false);
        }
        let mut stores: Vec<&mut PartitionStore> = self.stores.values_mut().collect();
        storage::route_completions(&mut self.io, &mut stores, ready)?;
        Ok(true)
    }

    /// Runs the log start advances that waited for the ring to be idle (`execute`).
    pub(super) fn advance_deferred_log_starts(&mut self) -> Result<(), NodeError> {
        if self.io.in_flight() > 0 {
            return Ok(());
        }
        let due: Vec<(PartitionId, u64)> = self
            .stores
            .iter_mut()
            .filter_map(|(id, store)| store.deferred_log_start_offset.take().map(|o| (*id, o)))
            .collect();
        for (partition, offset) in due {
            let store = &self.stores[&partition];
            // A snapshot install may have moved the log past it meanwhile.
            let end = store.log.log_end_offset() as u64;
            if offset > store.log.log_start_offset() as u64 && offset <= end {
                self.advance_log_start(partition, offset)?;
            }
        }
        Ok(())
    }

    pub(super) fn report_durable(&mut self) {
        for (partition, store) in &mut self.stores {
            let durable = store.log.durable_end_offset() as u64;
            if durable > store.reported_durable_end_offset {
                let generation = self
                    .multi
                    .partition(*partition)
                    .map_or(0, |r| r.log().generation());
                self.persisted.push_back((
                    *partition,
                    Persisted::Log {
                        generation,
                        end_offset: durable,
                    },
                ));
            }
            store.reported_durable_end_offset = durable;
        }
    }

    pub(super) fn release_held(&mut self) -> Result<(), NodeError> {
        let mut fetches = BTreeMap::new();
        while let Some(front) = self.held.front() {
            let ready = front.targets.iter().all(|(p, target, truncations)| {
                let store = &self.stores[p];
                store.truncations != *truncations
                    || store.log.durable_end_offset() as u64 >= *target
            });
            if !ready {
                break;
            }
            let held = self.held.pop_front().expect("front exists");
            self.dispatch(held.partition, held.to, held.message, &mut fetches)?;
        }
        self.send_fetches(fetches)
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
