//! A simulated per-node disk: the log as a list of batches with a durable prefix, and the
//! quorum-state file, and (KIP-630) the frozen snapshots, the log start offset and the
//! `.part` of a snapshot being fetched. A crash keeps the durable part only; everything written
//! since the last completed flush is gone, and so is a `.part` (recovery removes it: a
//! restarted replica fetches the snapshot again, it never loads a `.part`).

use std::collections::BTreeMap;

use bytes::Bytes;

use crate::records::{batch_headers, voter_sets_in};
use crate::types::{ElectionState, OffsetAndEpoch, RecoveredSnapshots, RecoveredState};
use crate::voters::{VoterSet, VoterSetEntry};

/// A snapshot being fetched: its id, its size, the bytes so far.
#[derive(Clone, Debug, Default)]
pub struct SnapshotPart {
    pub snapshot_id: OffsetAndEpoch,
    pub size_bytes: u64,
    pub bytes: Vec<u8>,
}

/// One batch as stored: offsets and epoch (from its stamped header) and its bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredBatch {
    pub base_offset: u64,
    pub last_offset: u64,
    pub epoch: u32,
    pub bytes: Bytes,
}

#[derive(Clone, Debug, Default)]
pub struct SimStore {
    pub batches: Vec<StoredBatch>,
    /// The first `durable_batches` batches survive a crash.
    pub durable_batches: usize,
    /// The quorum-state file as last completely written.
    pub quorum_state: ElectionState,
    /// KIP-630: the log's first offset (durable as soon as set: the sim writes it with the
    /// segment deletion). Batches start here.
    pub log_start_offset: u64,
    /// Frozen snapshots by end offset: `(id, file bytes)`. Durable.
    pub snapshots: BTreeMap<u64, (OffsetAndEpoch, Bytes)>,
    /// A snapshot being fetched (lost on a crash).
    pub part: Option<SnapshotPart>,
    /// KIP-853: the voter set records in the log, by offset, read from the batches as they
    /// are appended (what a host's recovery scan finds); after a snapshot install, first the
    /// voter set the snapshot holds (at its end offset − 1). Records below the log start stay:
    /// the newest of them is what the snapshot there holds.
    pub voter_records: Vec<(u64, VoterSet)>,
}

impl SimStore {
    pub fn end_offset(&self) -> u64 {
        self.batches
            .last()
            .map_or(self.log_start_offset, |b| b.last_offset + 1)
    }

    pub fn durable_end_offset(&self) -> u64 {
        if self.durable_batches == 0 {
            self.log_start_offset
        } else {
            self.batches[self.durable_batches - 1].last_offset + 1
        }
    }

    /// Index of the batch starting exactly at `offset`.
    pub fn batch_at(&self, offset: u64) -> Option<usize> {
        self.batches
            .binary_search_by(|b| b.base_offset.cmp(&offset))
            .ok()
    }

    /// Appends already-stamped batches; returns an error text if they do not continue the log.
    pub fn append(&mut self, records: &Bytes) -> Result<Vec<StoredBatch>, String> {
        let headers =
            batch_headers(records).map_err(|e| format!("unparsable batches appended: {e}"))?;
        let mut position = 0;
        let mut added = Vec::new();
        for header in headers {
            if header.base_offset != self.end_offset() {
                return Err(format!(
                    "append at {} does not continue the log end {}",
                    header.base_offset,
                    self.end_offset()
                ));
            }
            let batch = StoredBatch {
                base_offset: header.base_offset,
                last_offset: header.last_offset,
                epoch: header.partition_leader_epoch,
                bytes: records.slice(position..position + header.size_bytes),
            };
            position += header.size_bytes;
            self.batches.push(batch.clone());
            added.push(batch);
        }
        let voter_sets =
            voter_sets_in(records).map_err(|e| format!("unreadable voter set record: {e}"))?;
        self.voter_records.extend(voter_sets);
        Ok(added)
    }

    /// The newest voter set in this log (or the snapshot it starts from), if any.
    pub fn latest_voters(&self) -> Option<&(u64, VoterSet)> {
        self.voter_records.last()
    }

    /// What a restarting host hands `Raft::recover`: the voter set of the snapshot at the log
    /// start (read from its bytes) and every record in the log.
    pub fn recovered_voter_entries(&self) -> Vec<VoterSetEntry> {
        let mut entries = Vec::new();
        if self.log_start_offset > 0
            && let Some((_, bytes)) = self.snapshots.get(&self.log_start_offset)
            && let Some((_, voters)) = voter_sets_in(bytes).ok().and_then(|mut v| v.pop())
        {
            entries.push(VoterSetEntry {
                offset: self.log_start_offset - 1,
                voters,
            });
        }
        for (offset, voters) in &self.voter_records {
            if *offset >= self.log_start_offset {
                entries.push(VoterSetEntry {
                    offset: *offset,
                    voters: voters.clone(),
                });
            }
        }
        entries
    }

    /// Drops every batch at and above `offset` (durably). Returns the removed batches.
    pub fn truncate(&mut self, offset: u64) -> Result<Vec<StoredBatch>, String> {
        let keep = self.batches.partition_point(|b| b.base_offset < offset);
        if keep > 0 && self.batches[keep - 1].last_offset >= offset {
            return Err(format!("truncation to {offset} splits a batch"));
        }
        let removed = self.batches.split_off(keep);
        self.durable_batches = self.durable_batches.min(keep);
        self.voter_records.retain(|(o, _)| *o < offset);
        Ok(removed)
    }

    /// A flush reached `limit_offset`: every batch below it is durable now.
    pub fn flushed(&mut self, limit_offset: u64) {
        let durable = self
            .batches
            .partition_point(|b| b.last_offset < limit_offset);
        self.durable_batches = self.durable_batches.max(durable);
    }

    /// A crash: the unsynced tail and any `.part` are lost.
    pub fn crash(&mut self) {
        self.batches.truncate(self.durable_batches);
        let end = self.end_offset();
        self.voter_records.retain(|(o, _)| *o < end);
        self.part = None;
    }

    /// The newest frozen snapshot.
    pub fn latest_snapshot(&self) -> Option<&(OffsetAndEpoch, Bytes)> {
        self.snapshots.values().next_back()
    }

    /// KIP-630: the log now starts at `offset` (a snapshot's end, a batch boundary): the
    /// batches below it go.
    pub fn advance_log_start(&mut self, offset: u64) -> Result<(), String> {
        let drop = self.batches.partition_point(|b| b.base_offset < offset);
        if drop > 0 && self.batches[drop - 1].last_offset >= offset {
            return Err(format!("log start {offset} splits a batch"));
        }
        self.batches.drain(..drop);
        self.durable_batches = self.durable_batches.saturating_sub(drop);
        self.log_start_offset = self.log_start_offset.max(offset);
        Ok(())
    }

    /// Truncates the log fully: it starts and ends at `offset` (an installed snapshot's end).
    pub fn reset_to(&mut self, offset: u64) {
        self.batches.clear();
        self.durable_batches = 0;
        self.log_start_offset = offset;
        self.voter_records.clear();
        // The snapshot now at the start holds the voter set in force there.
        if let Some((_, bytes)) = self.snapshots.get(&offset)
            && let Some((_, voters)) = voter_sets_in(bytes).ok().and_then(|mut v| v.pop())
        {
            self.voter_records.push((offset.saturating_sub(1), voters));
        }
    }

    /// Recovery's first step: a log that ends before its newest snapshot is truncated fully
    /// to start there (a follower's snapshot may pass its fsynced log end).
    pub fn recover_log_behind_snapshot(&mut self) {
        if let Some((id, _)) = self.latest_snapshot()
            && id.offset > self.end_offset()
        {
            let offset = id.offset;
            self.reset_to(offset);
        }
    }

    /// The snapshots a restarting node hands the core.
    pub fn recovered_snapshots(&self) -> RecoveredSnapshots {
        RecoveredSnapshots {
            log_start_snapshot_id: (self.log_start_offset > 0)
                .then(|| self.snapshots.get(&self.log_start_offset).map(|s| s.0))
                .flatten(),
            latest_snapshot_id: self.latest_snapshot().map(|s| s.0),
        }
    }

    /// What a restarting node recovers.
    pub fn recovered(&self) -> RecoveredState {
        assert_eq!(
            self.durable_batches,
            self.batches.len(),
            "recovering with an unsynced tail"
        );
        let mut epoch_cache: Vec<OffsetAndEpoch> = Vec::new();
        for batch in &self.batches {
            if epoch_cache.last().is_none_or(|e| e.epoch != batch.epoch) {
                epoch_cache.push(OffsetAndEpoch::new(batch.base_offset, batch.epoch));
            }
        }
        RecoveredState {
            election: self.quorum_state,
            log_start_offset: self.log_start_offset,
            log_end_offset: self.end_offset(),
            epoch_cache,
        }
    }
}
