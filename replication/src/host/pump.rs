//! Storage completions and persistence reports (`pump`): drain the ring and route each completion
//! to its log, run the log-start advances that wait for idle I/O, report durable offsets to the
//! core, release the messages held behind flushes, and feed the queued `Persisted` reports and
//! written snapshots to the core, until nothing is left to do. What a routed completion queued
//! reaches the kernel before the runtime sleeps on the ring's readiness fd.

use ringlog_engine::io::Io;
use ringlog_engine::log::LogError;

use super::store::{self, PartitionStore, StorageError};
use super::{Host, HostError};
use crate::types::PartitionId;
use crate::work::Persisted;

impl<I: Io> Host<I> {
    /// Drains storage completions, reports durability, releases held messages and feeds the
    /// queued persistence reports to the core until nothing is left to do. Returns whether
    /// anything happened (the runtime then looks at the output and at what waits on it).
    pub fn pump(&mut self, now_ms: u64) -> Result<bool, HostError> {
        self.now_ms = now_ms;
        // Before anything of this call can answer: the snapshots earlier calls retired
        // (`Work::DeleteSnapshotsBefore`).
        self.delete_deferred_snapshots();
        let mut any = false;
        loop {
            // Routing a completion can queue the next operation (a flush's fdatasync after its
            // writes): the next turn of this loop pushes it to the kernel.
            self.probe.begin();
            let routed = self.poll_storage()?;
            self.probe.end("pump: poll_storage");
            if routed {
                self.write_due_confirmations(now_ms);
            }
            self.probe.begin();
            self.advance_deferred_log_starts()?;
            self.probe.end("pump: advance_deferred_log_starts");
            self.report_durability();
            self.release_held();
            any |= routed;
            let Some((partition, persisted)) = self.persisted.pop_front() else {
                if routed || self.report_snapshots_written(now_ms)? {
                    any = true;
                    continue;
                }
                return Ok(any);
            };
            any = true;
            let work = self.multi.on_persisted(now_ms, partition, persisted)?;
            self.execute(work)?;
        }
    }

    /// Pushes queued operations to the kernel and routes every ready completion to its log;
    /// true if any completion was routed.
    fn poll_storage(&mut self) -> Result<bool, StorageError> {
        // Cleared before draining: a completion posted from here on signals the fd again.
        self.io.clear_readiness();
        if self.io.in_flight() > 0 {
            self.io
                .submit_and_wait(0)
                .map_err(|e| StorageError::from(LogError::from(e)))?;
        }
        // A blocking call takes only its own completions (`io::wait_for_any`), so every other
        // owner's is still in the ring and is routed here.
        let mut ready = Vec::new();
        self.io.drain_completions(&mut ready);
        if ready.is_empty() {
            return Ok(false);
        }
        // Only a store with an operation in flight can own one of these (they were submitted
        // before the drain); with a hundred partitions, offering each completion to every
        // store was ~3 % of a loaded voter's CPU (2026-12-06).
        let mut owners: Vec<(PartitionId, &mut PartitionStore)> = self
            .stores
            .iter_mut()
            .filter(|(_, store)| store.awaits_completions())
            .map(|(id, store)| (*id, store))
            .collect();
        self.confirmations
            .fresh
            .extend(owners.iter().map(|(id, _)| *id));
        self.durability_news
            .extend(owners.iter().map(|(id, _)| *id));
        let failures = store::route_completions(&mut self.io, &mut owners, ready);
        for (partition, error) in failures {
            if error.is_no_space() {
                // The chain waits, whole, for `retry_flushes`.
                tracing::warn!(partition, %error, "out of space: the flush waits for space");
            } else if !self.offline.contains_key(&partition) {
                self.take_offline(partition, &error);
            }
        }
        Ok(true)
    }

    /// Deletes the snapshots older than each partition's retired one (`execute`). A failure
    /// takes the partition offline, as it did when the work list deleted them.
    fn delete_deferred_snapshots(&mut self) {
        for (partition, snapshot_id) in std::mem::take(&mut self.retired_snapshots) {
            if let Err(error) = self.delete_old_snapshots(partition, snapshot_id) {
                self.take_offline(partition, &error);
            }
        }
    }

    /// Runs the log start advances that waited for the ring to be idle (`execute`).
    fn advance_deferred_log_starts(&mut self) -> Result<(), StorageError> {
        if self.io.in_flight() > 0 {
            return Ok(());
        }
        // A log waiting for space keeps its advance until its flush went through (the engine's
        // advance waits for the chain first). Asked only of a log with an advance deferred:
        // this runs whenever the ring is idle, and asking every log was 9 % of a voter's CPU
        // with a thousand partitions electing (2026-12-07).
        let due: Vec<(PartitionId, u64)> = self
            .stores
            .iter_mut()
            .filter(|(_, store)| {
                store.deferred_log_start_offset.is_some() && !store.waiting_for_space()
            })
            .filter_map(|(id, store)| store.deferred_log_start_offset.take().map(|o| (*id, o)))
            .collect();
        for (partition, offset) in due {
            // Its advance waits for the log's chain in flight, whose completion it routes.
            self.durability_news.insert(partition);
            let store = &self.stores[&partition];
            // A snapshot install may have moved the log past it meanwhile.
            let end = store.log.log_end_offset() as u64;
            if offset > store.log.log_start_offset() as u64
                && offset <= end
                && let Err(error) = self.advance_log_start(partition, offset)
            {
                self.take_offline(partition, &error);
            }
        }
        Ok(())
    }

    /// Queues `Persisted::Log` for every log whose durable end moved since the last report, and
    /// `Persisted::QuorumState` for every partition whose quorum-state write completed. Only
    /// the partitions with news are looked at (`durability_news`): walking every store on
    /// every turn of `pump` was ~0.9 % of a loaded voter's samples under 100 partitions
    /// (2026-12-06).
    fn report_durability(&mut self) {
        #[cfg(feature = "sim")]
        let acknowledge_early =
            self.config.mutation == Some(super::HostMutation::AcknowledgeBeforeFlush);
        #[cfg(not(feature = "sim"))]
        let acknowledge_early = false;
        let news = std::mem::take(&mut self.durability_news);
        for &partition in &news {
            let Some(store) = self.stores.get_mut(&partition) else {
                continue;
            };
            let durable = reportable_end(store, acknowledge_early);
            if durable > store.reported_durable_end_offset {
                let generation = self
                    .multi
                    .partition(partition)
                    .map_or(0, |r| r.log().generation());
                self.persisted.push_back((
                    partition,
                    Persisted::Log {
                        generation,
                        end_offset: durable,
                    },
                ));
            }
            store.reported_durable_end_offset = durable;
        }
        // The quorum states after every log's report, as the core has always heard them.
        for &partition in &news {
            if let Some(state) = self
                .stores
                .get_mut(&partition)
                .and_then(|store| store.take_durable_quorum_state())
            {
                self.persisted
                    .push_back((partition, Persisted::QuorumState(state)));
            }
        }
        #[cfg(feature = "sim")]
        for (partition, store) in &self.stores {
            let durable = reportable_end(store, acknowledge_early);
            assert!(
                durable == store.reported_durable_end_offset && !store.has_durable_quorum_state(),
                "partition {partition}: durability news no path named (durable end {durable}, \
                 reported {}, quorum state waiting {})",
                store.reported_durable_end_offset,
                store.has_durable_quorum_state()
            );
        }
    }

    /// Whether storage operations are in flight (the runtime then waits on the readiness fd,
    /// or, for a backend without one, pumps again at once).
    pub fn storage_in_flight(&self) -> bool {
        self.io.in_flight() > 0
    }
}

/// The end a store's report names: its log's durable end (its log end under the simulator's
/// acknowledge-before-flush mutation).
fn reportable_end(store: &PartitionStore, acknowledge_early: bool) -> u64 {
    if acknowledge_early {
        store.log.log_end_offset() as u64
    } else {
        store.log.durable_end_offset() as u64
    }
}
