//! Reading a partition's batches for the runtime (a consumer's or a replica's fetch, a
//! preopened partition's log), the batches a crash's recovery left to check behind the start,
//! and DeleteRecords' offset below which clients read nothing.

use std::collections::BTreeMap;

use bytes::Bytes;

use ringlog_engine::io::Io;
use ringlog_engine::log::UnverifiedBatches;

use super::{FileRange, Host, PartitionStore, Records, StorageError};
use crate::types::PartitionId;

impl<I: Io> Host<I> {
    /// Whole batches from `offset`, at most `max_bytes` (at least one batch), materialised.
    pub fn read(
        &mut self,
        partition: PartitionId,
        offset: u64,
        max_bytes: u32,
    ) -> Result<Bytes, StorageError> {
        let store = hosted(&mut self.stores, partition)?;
        store.read(&mut self.io, offset, max_bytes)
    }

    /// Whole batches from `offset` below `end_offset`, as memory or a file range to send.
    pub fn read_region(
        &mut self,
        partition: PartitionId,
        offset: u64,
        max_bytes: u32,
        end_offset: u64,
    ) -> Result<Records, StorageError> {
        let store = hosted(&mut self.stores, partition)?;
        store.read_region(&mut self.io, offset, max_bytes, end_offset)
    }

    /// The bytes of `records` in one buffer (a copy of slices, a read of a file range): for
    /// the simulator and tests, which hand a response's records to a core as one message.
    pub fn records_bytes(&mut self, records: &Records) -> Result<Bytes, StorageError> {
        match records {
            Records::Memory(bytes) => Ok(bytes.clone()),
            Records::Chunks(chunks) => Ok(Bytes::from(chunks.concat())),
            Records::File(range) => self.read_file_range(range),
        }
    }

    /// The bytes of a file range, read into memory (for a runtime that cannot send the file
    /// itself, e.g. over the memory backend): from its reader, or through the backend where it
    /// has none.
    pub fn read_file_range(&mut self, range: &FileRange) -> Result<Bytes, StorageError> {
        let bytes = range
            .read(&mut self.io)
            .map_err(|e| StorageError::Log(e.into()))?;
        Ok(Bytes::from(bytes))
    }

    /// Whole batches of a preopened partition from `offset` (see [`Host::read`]).
    pub fn read_preopened(
        &mut self,
        dir: &std::path::Path,
        offset: u64,
        max_bytes: u32,
    ) -> Result<Bytes, StorageError> {
        let (store, _) = self.preopened.get_mut(dir).expect("preopened partition");
        store.read(&mut self.io, offset, max_bytes)
    }

    /// The batches a started partition's recovery took unread from its batch lists after a
    /// crash (`LogConfig::defer_listed_check_after_crash`), with the partition's truncation
    /// count now, for the runtime to read and check behind the start
    /// (`PartitionLog::verify_listed`); each partition's once.
    pub fn take_unverified(&mut self, partition: PartitionId) -> (Vec<UnverifiedBatches>, u64) {
        self.stores
            .get_mut(&partition)
            .map_or((Vec::new(), 0), |store| {
                (std::mem::take(&mut store.unverified), store.truncations)
            })
    }

    /// Whether a partition's log still holds the batches [`Host::take_unverified`] gave when
    /// its truncation count was `truncations`: the same segment, not cut since (a cut, and the
    /// records written after it, may have replaced them), and not removed by a log start move.
    pub fn still_holds(
        &self,
        partition: PartitionId,
        batches: &UnverifiedBatches,
        truncations: u64,
    ) -> bool {
        self.stores.get(&partition).is_some_and(|store| {
            store.truncations == truncations
                && store
                    .log
                    .segment_base_offsets()
                    .contains(&batches.base_offset())
                && store.log.log_end_offset() >= batches.end_offset()
        })
    }

    /// DeleteRecords inside a batch: clients read `partition` from `offset` on, durably
    /// ([`PartitionStore::record_delete_records_offset`](super::PartitionStore::record_delete_records_offset)). The log start itself moves with
    /// an empty snapshot at the batch's first offset ([`Host::record_empty_snapshot`]).
    pub fn record_delete_records_offset(
        &mut self,
        partition: PartitionId,
        offset: u64,
    ) -> Result<(), StorageError> {
        let store = hosted(&mut self.stores, partition)?;
        store.record_delete_records_offset(&mut self.io, offset)
    }
}

/// The store of a hosted partition (a field borrow, so the caller keeps `self.io`).
fn hosted(
    stores: &mut BTreeMap<PartitionId, PartitionStore>,
    partition: PartitionId,
) -> Result<&mut PartitionStore, StorageError> {
    stores
        .get_mut(&partition)
        .ok_or(StorageError::NotHosted(partition))
}
