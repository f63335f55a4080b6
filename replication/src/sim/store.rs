//! A simulated per-node disk: the log as a list of batches with a durable prefix, and the
//! quorum-state file. A crash keeps the durable part only; everything written since the last
//! completed flush is gone.

use bytes::Bytes;

use crate::records::batch_headers;
use crate::types::{ElectionState, OffsetAndEpoch, RecoveredState};

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
}

impl SimStore {
    pub fn end_offset(&self) -> u64 {
        self.batches.last().map_or(0, |b| b.last_offset + 1)
    }

    pub fn durable_end_offset(&self) -> u64 {
        if self.durable_batches == 0 {
            0
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
        Ok(added)
    }

    /// Drops every batch at and above `offset` (durably). Returns the removed batches.
    pub fn truncate(&mut self, offset: u64) -> Result<Vec<StoredBatch>, String> {
        let keep = self.batches.partition_point(|b| b.base_offset < offset);
        if keep > 0 && self.batches[keep - 1].last_offset >= offset {
            return Err(format!("truncation to {offset} splits a batch"));
        }
        let removed = self.batches.split_off(keep);
        self.durable_batches = self.durable_batches.min(keep);
        Ok(removed)
    }

    /// A flush reached `limit_offset`: every batch below it is durable now.
    pub fn flushed(&mut self, limit_offset: u64) {
        let durable = self
            .batches
            .partition_point(|b| b.last_offset < limit_offset);
        self.durable_batches = self.durable_batches.max(durable);
    }

    /// A crash: the unsynced tail is lost.
    pub fn crash(&mut self) {
        self.batches.truncate(self.durable_batches);
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
            log_start_offset: 0,
            log_end_offset: self.end_offset(),
            epoch_cache,
        }
    }
}
