//! Executing one work list of the core, front to back, by `Work`'s rules (work.rs).

use crate::error::ErrorCode;
use crate::multi::PartitionWork;
use crate::types::PartitionId;
use crate::work::Work;
use ringlog_engine::io::Io;

use super::store::{PartitionStore, Records, StorageError};
use super::{Held, HeldTarget, Host, Output};

impl<I: Io> Host<I> {
    /// Executes one work list front to back (see `Work`'s rules). A storage error stays in
    /// its partition: a flush out of space waits for it (`Host::retry_flushes`), any other
    /// error takes the partition offline and skips the rest of its work; the other
    /// partitions' work goes on.
    pub(super) fn execute(&mut self, work: Vec<PartitionWork>) -> Result<(), StorageError> {
        for PartitionWork { partition, work } in work {
            if self.offline.contains_key(&partition) || !self.stores.contains_key(&partition) {
                continue;
            }
            let epoch = self.multi.partition(partition).map_or(0, |r| r.epoch());
            let span = tracing::debug_span!("work", partition, epoch);
            let _guard = span.enter();
            self.probe.begin();
            let name = work.name();
            let waits_for_space = matches!(work, Work::Flush { .. } | Work::WriteQuorumState(_));
            match self.execute_one(partition, work) {
                Ok(()) => {}
                // The records stay appended in memory, not durable: nothing is acknowledged
                // for them until a retried flush makes them durable.
                // A quorum-state write waits likewise: what it guards (a vote) stays held.
                Err(error) if waits_for_space && error.is_no_space() => {
                    tracing::warn!(partition, %error, "out of space: the write waits for space");
                }
                Err(error) => self.take_offline(partition, &error),
            }
            // A new role always comes with work for its partition (a quorum-state write at
            // least): the log's tail cache follows it here, and so does what it keeps for
            // lagging voters (a voter's fetch comes with work too: its answer).
            let raft = self.multi.partition(partition);
            let leads = raft.is_some_and(|r| r.is_leader());
            let lagging_from = raft.and_then(|r| r.lagging_voters_end_offset());
            if let Some(store) = self.stores.get_mut(&partition) {
                store.set_leading(leads);
                store.keep_for_lagging_voters(&self.lagging_tail, lagging_from);
            }
            // A flush it started carries a waiting confirmation record; a blocking wait of the
            // engine's (a truncation's, a roll's) may have completed one whose record waits.
            self.confirmations.fresh.push(partition);
            self.durability_news.insert(partition);
            self.probe.end(name);
        }
        // KIP-853: a fetched snapshot installed by this list brings its voter set; the core
        // hears of it after the list (no re-entrancy) and before any other input.
        for (partition, snapshot_id, voters) in std::mem::take(&mut self.installed_snapshots) {
            match self
                .multi
                .on_snapshot_installed(self.now_ms, partition, snapshot_id, voters)
            {
                Ok(work) => self.execute(work)?,
                // The partition was removed meanwhile: nothing to tell.
                Err(error) => tracing::warn!(partition, %error, "snapshot installed"),
            }
        }
        self.finish_repairs();
        Ok(())
    }

    /// Removes the `repair-pending` marker of every partition whose core has caught up with a
    /// leader since its log was repaired (store.rs, `open_repairing`).
    fn finish_repairs(&mut self) {
        let done: Vec<PartitionId> = self
            .repairing
            .iter()
            .copied()
            .filter(|id| {
                self.multi
                    .partition(*id)
                    .is_some_and(|raft| !raft.repair_pending())
            })
            .collect();
        for partition in done {
            self.repairing.remove(&partition);
            let store = self.stores.get_mut(&partition).expect("listed above");
            match store.finish_repair(&mut self.io) {
                Ok(()) => tracing::info!(partition, "repaired: caught up with the leader"),
                Err(error) => self.take_offline(partition, &error),
            }
        }
    }

    fn execute_one(&mut self, partition: PartitionId, work: Work) -> Result<(), StorageError> {
        match work {
            Work::Send { to, message } => self.output.push(Output::Send {
                partition,
                to,
                message,
            }),
            Work::SendAfterPersist { to, message } => {
                if self
                    .stores
                    .values()
                    .any(PartitionStore::persistence_outstanding)
                {
                    let targets = self
                        .stores
                        .iter()
                        .map(|(p, s)| HeldTarget {
                            partition: *p,
                            flush_target: s.flush_target,
                            truncations: s.truncations,
                            quorum_state_ticket: s.quorum_state_issued(),
                        })
                        .collect();
                    self.held.push_back(Held {
                        targets,
                        partition,
                        to,
                        message,
                    });
                } else if self.held.is_empty() {
                    self.output.push(Output::Send {
                        partition,
                        to,
                        message,
                    });
                } else {
                    // Keep the order of held messages.
                    self.held.push_back(Held {
                        targets: Vec::new(),
                        partition,
                        to,
                        message,
                    });
                }
            }
            Work::SendFetchResponse {
                to: _,
                mut response,
                fetch_offset,
                max_bytes,
            } => {
                let mut records_out = None;
                if response.error_code == ErrorCode::None
                    && response.diverging_epoch.is_none()
                    && response.snapshot_id.is_none()
                {
                    let store = self.stores.get_mut(&partition).expect("hosted partition");
                    match store.read_region(&mut self.io, fetch_offset, max_bytes, u64::MAX) {
                        Ok(Records::Memory(bytes)) => response.records = bytes,
                        // Zero copy: the runtime sends the slices with one writev, the range
                        // with sendfile. The core never looks at the records of a response it
                        // sent.
                        Ok(records @ (Records::Chunks(_) | Records::File(_))) => {
                            records_out = Some(records)
                        }
                        // A read error is treated as corruption of that range: the fetcher
                        // gets no records (and retries), the host keeps serving the rest.
                        Err(error) => {
                            tracing::error!(%error, fetch_offset, "log read failed");
                            response.error_code = ErrorCode::UnknownServerError;
                        }
                    }
                }
                self.output.push(Output::FetchResponse {
                    partition,
                    response,
                    records: records_out,
                });
            }
            Work::AppendAsLeader {
                base_offset,
                leader_epoch,
                batches,
            } => {
                let store = self.stores.get_mut(&partition).expect("hosted partition");
                let got = store.append_as_leader(&batches, leader_epoch)?;
                assert_eq!(
                    got, base_offset,
                    "the engine and the core disagree on the log end"
                );
                self.output.push(Output::LeaderAppended {
                    partition,
                    base_offset,
                    batches,
                });
            }
            Work::AppendAsFollower { records } => {
                let store = self.stores.get_mut(&partition).expect("hosted partition");
                store.log.append_as_follower(records.clone())?;
                self.output
                    .push(Output::FollowerAppended { partition, records });
            }
            Work::Truncate { offset } => {
                let store = self.stores.get_mut(&partition).expect("hosted partition");
                let floor = store.high_watermark as i64;
                let end = store.log.truncate_to(&mut self.io, offset as i64, floor)? as u64;
                if end != offset {
                    tracing::warn!(offset, end, "truncation ended below the asked offset");
                }
                store.truncations += 1;
                store.flush_target = store.flush_target.min(end);
                store.reported_durable_end_offset = store.reported_durable_end_offset.min(end);
                tracing::info!(offset = end, "log truncated (diverging epoch)");
                self.output.push(Output::Truncated {
                    partition,
                    offset: end,
                    snapshot: false,
                });
            }
            Work::Flush { end_offset, .. } => {
                let store = self.stores.get_mut(&partition).expect("hosted partition");
                store.flush_target = store.flush_target.max(end_offset);
                store.log.flush(&mut self.io)?;
            }
            // Through the ring: `pump` reports it (`Persisted::QuorumState`) once the folder's
            // fsync completes, and releases the messages held behind it. Written synchronously
            // this stalled every partition 1.5 to 7 s under write load (docs/benchmarks.md).
            Work::WriteQuorumState(state) => {
                let store = self.stores.get_mut(&partition).expect("hosted partition");
                // KIP-595 `currentVoters`: the voter set in force, which a VotersRecord may
                // have changed since the start (KIP-853).
                if let Some(raft) = self.multi.partition(partition) {
                    store.set_voters(&raft.voter_set().ids());
                }
                store.write_quorum_state(&mut self.io, state)?;
            }
            Work::HighWatermarkChanged { high_watermark } => {
                let store = self.stores.get_mut(&partition).expect("hosted partition");
                assert!(
                    high_watermark >= store.high_watermark,
                    "the high-watermark moved back from {} to {high_watermark}",
                    store.high_watermark
                );
                store.high_watermark = high_watermark;
                self.apply_committed(partition)?;
                self.output.push(Output::HighWatermark {
                    partition,
                    high_watermark,
                });
            }
            // The engine's advance first waits for the log's flush in flight (write +
            // fdatasync, then the confirmation record's): on the loop that was a stall of one
            // or two fsyncs after every snapshot, 2.8 s and 4.8 s measured under load, past the
            // fetch timeout. The core already moved its log start (it never reads below it), so
            // the files can wait until the ring is idle (`pump`).
            Work::AdvanceLogStartOffset { offset } => {
                let store = self.stores.get_mut(&partition).expect("hosted partition");
                let deferred = store.deferred_log_start_offset.get_or_insert(offset);
                *deferred = (*deferred).max(offset);
            }
            // At the start of the next pump, not here: an answer of this same call may name a
            // range of an older snapshot (a follower's download going on while the log start
            // passes it). A runtime sends that range after the call, through the reader the
            // range holds, which outlives the file's name; a runtime without readers (the
            // memory backend's, in the simulator) reads it by its path, which must still be
            // there. Kafka, too, renames a deleted snapshot and removes it later.
            Work::DeleteSnapshotsBefore { snapshot_id } => {
                let retired = self
                    .retired_snapshots
                    .entry(partition)
                    .or_insert(snapshot_id);
                *retired = (*retired).max(snapshot_id);
            }
            Work::SendFetchSnapshotResponse {
                to,
                mut response,
                max_bytes,
            } => {
                let region = self.fill_fetch_snapshot_response(partition, &mut response, max_bytes);
                self.output.push(Output::FetchSnapshotResponse {
                    partition,
                    to,
                    response,
                    region,
                });
            }
            Work::WriteSnapshotChunk {
                snapshot_id,
                size_bytes,
                position,
                bytes,
            } => self.write_snapshot_chunk(partition, snapshot_id, size_bytes, position, bytes)?,
            Work::InstallSnapshot { snapshot_id } => {
                let voters = self.install_snapshot(partition, snapshot_id)?;
                self.installed_snapshots
                    .push((partition, snapshot_id, voters));
                // The log now starts at the snapshot: what it held before is gone.
                self.output.push(Output::Truncated {
                    partition,
                    offset: snapshot_id.offset,
                    snapshot: true,
                });
            }
        }
        Ok(())
    }

    /// Releases the held messages whose flushes completed (or were cut by a truncation) and
    /// whose quorum-state writes are durable.
    pub(super) fn release_held(&mut self) {
        #[cfg(feature = "sim")]
        let skip_quorum_state =
            self.config.mutation == Some(super::HostMutation::SendBeforeQuorumState);
        #[cfg(not(feature = "sim"))]
        let skip_quorum_state = false;
        // In order, except that a message of a partition waiting for disk space does not hold
        // back the others' (its own later messages stay behind it), and another partition's
        // flush waiting for space is not waited for: partitions are independent Raft groups.
        let mut passed: Vec<crate::types::PartitionId> = Vec::new();
        let mut index = 0;
        while let Some(held) = self.held.get(index) {
            if passed.contains(&held.partition) {
                index += 1;
                continue;
            }
            let ready = held.targets.iter().all(|t| {
                let Some(store) = self.stores.get(&t.partition) else {
                    return true;
                };
                let flushed = store.truncations != t.truncations
                    || store.log.durable_end_offset() as u64 >= t.flush_target
                    || (t.partition != held.partition && store.waiting_for_space());
                flushed
                    && (skip_quorum_state || store.quorum_state_durable() >= t.quorum_state_ticket)
            });
            if !ready {
                if self
                    .stores
                    .get(&held.partition)
                    .is_some_and(PartitionStore::waiting_for_space)
                {
                    passed.push(held.partition);
                    index += 1;
                    continue;
                }
                break;
            }
            let held = self.held.remove(index).expect("indexed above");
            self.output.push(Output::Send {
                partition: held.partition,
                to: held.to,
                message: held.message,
            });
        }
    }
}
