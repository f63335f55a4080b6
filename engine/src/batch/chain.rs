//! Checks that a sequence of batches forms a log: the fields the CRC does not cover must agree
//! with their neighbours.
//!
//! baseOffset and partitionLeaderEpoch are outside the CRC (so the leader can stamp them), so a
//! batch written at the wrong place, or a flipped bit in either field, passes `RecordBatch::parse`.
//! Reading a log therefore also requires: each batch starts at the previous batch's
//! lastOffset + 1, and leader epochs never decrease along the log (a later leader writes after an
//! earlier one; KIP-595 leaders append only in their own epoch). A caller that knows the current
//! epoch can also bound it from above.

use super::{BatchError, RecordBatch, RecordBatchHeader};

#[derive(Clone, Debug, Default)]
pub struct BatchChainValidator {
    next_offset: Option<i64>,
    last_epoch: Option<i32>,
    max_epoch: Option<i32>,
}

impl BatchChainValidator {
    /// Accepts any first batch.
    pub fn new() -> BatchChainValidator {
        BatchChainValidator::default()
    }

    /// Expects the first batch at `next_offset` (e.g. a snapshot's end offset or a segment's base
    /// offset) with an epoch of at least `min_epoch`.
    pub fn expecting(next_offset: i64, min_epoch: i32) -> BatchChainValidator {
        BatchChainValidator {
            next_offset: Some(next_offset),
            last_epoch: Some(min_epoch),
            max_epoch: None,
        }
    }

    /// Rejects batches whose partitionLeaderEpoch exceeds `current_epoch` (no leader can have
    /// written in an epoch the quorum has not reached).
    pub fn with_max_epoch(mut self, current_epoch: i32) -> BatchChainValidator {
        self.max_epoch = Some(current_epoch);
        self
    }

    /// The offset the next batch must start at, once one batch has been seen or expected.
    pub fn next_offset(&self) -> Option<i64> {
        self.next_offset
    }

    pub fn last_epoch(&self) -> Option<i32> {
        self.last_epoch
    }

    /// Checks `batch` against the batches before it and, if it fits, advances past it. A batch
    /// that does not fit leaves the validator unchanged.
    pub fn check(&mut self, batch: &RecordBatch) -> Result<(), BatchError> {
        self.check_header(batch.header(), batch.position())
    }

    /// [`BatchChainValidator::check`] given the header of a batch already framed and
    /// CRC-checked at `position` (no `RecordBatch` needed).
    pub fn check_header(
        &mut self,
        header: &RecordBatchHeader,
        position: u64,
    ) -> Result<(), BatchError> {
        let base_offset = header.base_offset();
        let last_offset_delta = header.last_offset_delta();
        let next_offset = base_offset
            .checked_add(i64::from(last_offset_delta))
            .and_then(|last| last.checked_add(1))
            .filter(|_| base_offset >= 0 && last_offset_delta >= 0)
            .ok_or(BatchError::InvalidOffsetRange {
                position,
                base_offset,
                last_offset_delta,
            })?;
        if let Some(expected) = self.next_offset
            && base_offset != expected
        {
            return Err(BatchError::OffsetNotContinuous {
                position,
                expected,
                found: base_offset,
            });
        }
        let epoch = header.partition_leader_epoch();
        if let Some(previous) = self.last_epoch
            && epoch < previous
        {
            return Err(BatchError::EpochWentBackwards {
                position,
                previous,
                found: epoch,
            });
        }
        if let Some(current) = self.max_epoch
            && epoch > current
        {
            return Err(BatchError::EpochAboveCurrent {
                position,
                current,
                found: epoch,
            });
        }
        self.next_offset = Some(next_offset);
        self.last_epoch = Some(epoch);
        Ok(())
    }
}
