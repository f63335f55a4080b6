//! The node's side of idempotent producing: InitProducerId hands out producer ids, and every
//! Produce on a leader checks its batches' sequences against the partition's producer state
//! (producer_state.rs). The state is read from the log once per process and then follows the
//! log: every append (as leader or follower), high-watermark move and truncation the node
//! executes updates it (`track_*`, called from `Node::execute`).

use std::collections::HashMap;
use std::path::Path;

use bytes::Bytes;
use ringlog_engine::batch::{BatchIter, RecordBatch};
use ringlog_replication::PartitionId;
use ringlog_replication::host::StorageError;

use super::producer_state::{PartitionProducers, ProducerBatch, SequenceCheck};
use super::producer_state_file;
use super::{Node, NodeError};
use crate::protocol::{
    ErrorCode, init_producer_id_request as ipi_req, init_producer_id_response as ipi_resp,
};

/// How many bytes a rebuild reads from the log at a time.
const REBUILD_CHUNK_BYTES: u32 = 1 << 20;

#[derive(Debug, Default)]
pub(crate) struct Producers {
    /// Partitions whose state was read from the log; a partition missing here is read at its
    /// first idempotent Produce, and its appends are not tracked until then (the read covers
    /// them).
    tables: HashMap<PartitionId, PartitionProducers>,
    /// State read at start-up from partitions recovered before serving (`preopen_partitions`),
    /// by folder, until the partition starts and takes it.
    preopened: HashMap<std::path::PathBuf, PartitionProducers>,
}

/// Reads the producer state of a log from `start` to `end` through `read` (whole batches from an
/// offset), starting from the partition folder's producer-state file where it can be trusted
/// (the table in producer_state_file.rs).
fn rebuild(
    mut read: impl FnMut(u64) -> Result<Bytes, StorageError>,
    dir: &Path,
    start: u64,
    end: u64,
    high_watermark: u64,
) -> Result<PartitionProducers, StorageError> {
    let saved = match producer_state_file::read(dir) {
        Ok(Some(saved)) if (start..=end).contains(&saved.offset) => Some(saved),
        Ok(Some(saved)) => {
            tracing::warn!(
                dir = %dir.display(),
                saved_offset = saved.offset,
                log_start_offset = start,
                log_end_offset = end,
                "producer-state file outside the log: not used, the state is read from the log"
            );
            None
        }
        Ok(None) => None,
        Err(error) => {
            tracing::warn!(%error, "producer-state file not trusted: the state is read from the log");
            None
        }
    };
    let (mut offset, mut rebuilt) = match &saved {
        Some(saved) => (
            saved.offset,
            PartitionProducers::from_saved(saved, high_watermark),
        ),
        None => (start, PartitionProducers::new(high_watermark)),
    };
    let first = offset;
    while offset < end {
        let bytes = read(offset)?;
        if bytes.is_empty() {
            break;
        }
        let before = offset;
        for batch in BatchIter::new(bytes) {
            let Ok(batch) = batch else { break };
            offset = batch.next_offset() as u64;
            // A read from the saved offset may start with the batch holding it, which the
            // file already has if it ends below that offset.
            if let Some(f) = producer_fields(&batch).filter(|f| f.base_offset >= first) {
                rebuilt.appended(f);
            }
        }
        if offset == before {
            break;
        }
    }
    Ok(rebuilt)
}

/// What a Produce partition's batches get.
pub(crate) enum SequenceOutcome {
    /// Append (the producer state records the batches when the append is executed).
    Append,
    /// A retried batch already in the log: answer with its offsets, append nothing.
    Duplicate {
        base_offset: u64,
        last_offset: u64,
    },
    Refused(ErrorCode),
}

/// The producer fields of a batch, if it was written by an idempotent producer.
fn producer_fields(batch: &RecordBatch) -> Option<ProducerBatch> {
    let h = batch.header();
    if h.producer_id() < 0 || batch.is_control() {
        return None;
    }
    let base_offset = batch.base_offset().max(0) as u64;
    Some(ProducerBatch {
        producer_id: h.producer_id(),
        producer_epoch: h.producer_epoch(),
        base_sequence: h.base_sequence(),
        last_sequence: h.base_sequence().wrapping_add(h.last_offset_delta()) & i32::MAX,
        base_offset,
        last_offset: base_offset + h.last_offset_delta().max(0) as u64,
        max_timestamp: h.max_timestamp(),
    })
}

impl Node {
    /// Checks a Produce partition's batches (already validated) against the producer state.
    pub(super) fn check_producer_sequences(
        &mut self,
        partition: PartitionId,
        batches: &[Bytes],
    ) -> Result<SequenceOutcome, NodeError> {
        let mut fields = Vec::new();
        for (index, bytes) in batches.iter().enumerate() {
            let Ok(batch) = RecordBatch::parse(bytes.clone()) else {
                return Ok(SequenceOutcome::Refused(ErrorCode::CorruptMessage));
            };
            if batch.is_transactional() {
                // Transactions are not served (no coordinator): refuse rather than store
                // records whose commit marker would never come.
                return Ok(SequenceOutcome::Refused(ErrorCode::InvalidRecord));
            }
            if let Some(f) = producer_fields(&batch) {
                fields.push((index, f));
            }
        }
        if fields.is_empty() {
            return Ok(SequenceOutcome::Append);
        }
        if fields.len() != batches.len() {
            // One producer writes one partition's batches; a mix of idempotent and plain
            // batches in one partition is no client's doing.
            return Ok(SequenceOutcome::Refused(ErrorCode::InvalidRecord));
        }
        let began = std::time::Instant::now();
        self.ensure_producer_state(partition)?;
        self.stall
            .part(began, "produce: producer state read from the log");
        let table = self
            .handlers
            .producers
            .tables
            .get(&partition)
            .expect("built above")
            .current();
        if let [(_, f)] = fields.as_slice()
            && batches.len() == 1
        {
            return Ok(
                match table.check(
                    f.producer_id,
                    f.producer_epoch,
                    f.base_sequence,
                    f.last_sequence,
                ) {
                    SequenceCheck::Append => SequenceOutcome::Append,
                    SequenceCheck::Duplicate {
                        base_offset,
                        last_offset,
                    } => SequenceOutcome::Duplicate {
                        base_offset,
                        last_offset,
                    },
                    SequenceCheck::OutOfOrder => {
                        SequenceOutcome::Refused(ErrorCode::OutOfOrderSequenceNumber)
                    }
                    SequenceCheck::InvalidProducerEpoch => {
                        SequenceOutcome::Refused(ErrorCode::InvalidProducerEpoch)
                    }
                },
            );
        }
        // Several batches in one partition: each must follow the previous one (checked on a
        // copy, so a refused request leaves the state untouched); a duplicate among several
        // is refused as out of order rather than half-appended.
        let mut scratch = table.clone();
        for (_, f) in &fields {
            match scratch.check(
                f.producer_id,
                f.producer_epoch,
                f.base_sequence,
                f.last_sequence,
            ) {
                SequenceCheck::Append => scratch.record(*f),
                SequenceCheck::InvalidProducerEpoch => {
                    return Ok(SequenceOutcome::Refused(ErrorCode::InvalidProducerEpoch));
                }
                SequenceCheck::Duplicate { .. } | SequenceCheck::OutOfOrder => {
                    return Ok(SequenceOutcome::Refused(
                        ErrorCode::OutOfOrderSequenceNumber,
                    ));
                }
            }
        }
        Ok(SequenceOutcome::Append)
    }

    /// A leader append of `batches` (not yet stamped: their header offsets are the client's)
    /// landed at `base_offset`.
    pub(super) fn track_leader_append(
        &mut self,
        partition: PartitionId,
        base_offset: u64,
        batches: &[Bytes],
    ) {
        let Some(producers) = self.handlers.producers.tables.get_mut(&partition) else {
            return;
        };
        // Batches are appended back to back: each starts after the previous one's records.
        let mut offset = base_offset;
        for bytes in batches {
            let Ok(batch) = RecordBatch::parse(bytes.clone()) else {
                continue;
            };
            let records = batch.header().last_offset_delta().max(0) as u64 + 1;
            if let Some(mut f) = producer_fields(&batch) {
                f.base_offset = offset;
                f.last_offset = offset + records - 1;
                producers.appended(f);
            }
            offset += records;
        }
    }

    /// A follower append of fetched `records` (stamped by the leader).
    pub(super) fn track_follower_append(&mut self, partition: PartitionId, records: &Bytes) {
        let Some(producers) = self.handlers.producers.tables.get_mut(&partition) else {
            return;
        };
        for batch in BatchIter::new(records.clone()) {
            let Ok(batch) = batch else { break };
            if let Some(f) = producer_fields(&batch) {
                producers.appended(f);
            }
        }
    }

    pub(super) fn track_high_watermark(&mut self, partition: PartitionId, high_watermark: u64) {
        if let Some(producers) = self.handlers.producers.tables.get_mut(&partition) {
            producers.high_watermark_advanced(high_watermark);
        }
    }

    /// The log now ends at `end_offset` (a truncation), or was replaced by a snapshot
    /// (`replaced`): the state goes back to the high-watermark's, or is read again.
    pub(super) fn track_truncation(
        &mut self,
        partition: PartitionId,
        end_offset: u64,
        replaced: bool,
    ) {
        let tables = &mut self.handlers.producers.tables;
        let Some(producers) = tables.get_mut(&partition) else {
            return;
        };
        if replaced || !producers.truncated(end_offset) {
            tables.remove(&partition);
        }
    }

    /// Start-up, before the loop serves: reads the producer state of a partition recovered ahead
    /// (`Host::preopen`), so its first idempotent Produce after the partition starts (often on a
    /// leader just elected) does not read the whole log on the loop. Nothing appends to the
    /// partition before it starts, so the state is current then.
    pub(super) fn read_preopened_producer_state(
        &mut self,
        dir: &std::path::Path,
    ) -> Result<(), NodeError> {
        let Some((start, end, high_watermark)) = self.host.preopened_bounds(dir) else {
            return Ok(());
        };
        let host = &mut self.host;
        let rebuilt = rebuild(
            |offset| host.read_preopened(dir, offset, REBUILD_CHUNK_BYTES),
            dir,
            start,
            end,
            high_watermark,
        )
        .map_err(NodeError::Storage)?;
        self.handlers
            .producers
            .preopened
            .insert(dir.to_path_buf(), rebuilt);
        Ok(())
    }

    /// A partition started from a preopened folder takes the producer state read with it.
    pub(super) fn adopt_preopened_producer_state(
        &mut self,
        partition: PartitionId,
        dir: &std::path::Path,
    ) {
        if let Some(table) = self.handlers.producers.preopened.remove(dir) {
            self.handlers.producers.tables.insert(partition, table);
        }
    }

    /// Reads a partition's producer state from its log if it was not read yet in this process
    /// (once: from then on the `track_*` calls keep it current).
    pub(super) fn ensure_producer_state(
        &mut self,
        partition: PartitionId,
    ) -> Result<(), NodeError> {
        if self.handlers.producers.tables.contains_key(&partition) {
            return Ok(());
        }
        let started = std::time::Instant::now();
        let store = self.host.store(partition).expect("hosted partition");
        let start = store.log.log_start_offset() as u64;
        let end = store.log.log_end_offset() as u64;
        let high_watermark = store.high_watermark;
        let dir = store.dir.clone();
        let host = &mut self.host;
        let rebuilt = rebuild(
            |offset| host.read(partition, offset, REBUILD_CHUNK_BYTES),
            &dir,
            start,
            end,
            high_watermark,
        )
        .map_err(NodeError::Storage)?;
        tracing::info!(
            partition,
            producers = rebuilt.current().producer_count(),
            log_end_offset = end,
            took_ms = started.elapsed().as_millis() as u64,
            "producer state read from the log"
        );
        self.handlers.producers.tables.insert(partition, rebuilt);
        Ok(())
    }

    /// Saves `partition`'s committed producer state in its folder (producer_state_file.rs),
    /// durably, before its log start may move: called before a KIP-630 snapshot is recorded
    /// or generated. Internal topics (no client produces to them) and partitions that never
    /// saw an idempotent producer and have no file are skipped.
    ///
    /// A save that fails (reading the log for the state, or writing the file) is logged and
    /// the log start moves anyway: the file left behind is then below the log start and not
    /// trusted at the next read, and the producers whose batches go are unknown, which Kafka's
    /// rule accepts at any sequence (producer_state.rs). Only their duplicate check is lost;
    /// the process and the partition go on.
    pub(super) fn save_producer_state(&mut self, partition: PartitionId) {
        let Some(dir) = self.host.store(partition).map(|s| s.dir.clone()) else {
            return;
        };
        if super::topics::is_internal_topic(&self.table.get(partition).topic) {
            return;
        }
        // The batches about to be removed are read while they are still here.
        if let Err(error) = self.ensure_producer_state(partition) {
            tracing::error!(partition, %error, "reading the producer state to save it failed");
            return;
        }
        let saved = self
            .handlers
            .producers
            .tables
            .get(&partition)
            .expect("built above")
            .saved();
        if saved.batches.is_empty() && !producer_state_file::exists(&dir) {
            return;
        }
        let began = std::time::Instant::now();
        if let Err(error) = producer_state_file::write(&dir, &saved) {
            tracing::error!(partition, %error, "saving the producer state failed");
            return;
        }
        self.stall.part(began, "producer state saved");
        tracing::debug!(
            partition,
            offset = saved.offset,
            batches = saved.batches.len(),
            "producer state saved"
        );
    }

    /// Kafka's `producer.id.expiration.ms`: every partition forgets the producers it has not
    /// seen for that long (producer_state.rs `PartitionProducers::expire`). Runs with the
    /// retention check, once a second.
    pub(super) fn expire_producers(&mut self, now_wall_ms: u64) {
        let expiration_ms =
            i64::try_from(self.config.producer_id_expiration_ms).unwrap_or(i64::MAX);
        let now = i64::try_from(now_wall_ms).unwrap_or(i64::MAX);
        for (partition, table) in &mut self.handlers.producers.tables {
            let expired = table.expire(now, expiration_ms);
            if expired > 0 {
                tracing::info!(
                    partition,
                    expired,
                    "idempotent producers expired (producer.id.expiration.ms)"
                );
            }
        }
    }

    /// InitProducerId for idempotent producers (no transactional id). KIP-360: a producer that
    /// sends its id and epoch back gets the same id with the next epoch.
    pub(super) fn handle_init_producer_id(
        &mut self,
        request: &ipi_req::InitProducerIdRequest,
    ) -> ipi_resp::InitProducerIdResponse {
        let refused = |code: ErrorCode| ipi_resp::InitProducerIdResponse {
            error_code: code.code(),
            producer_id: -1,
            producer_epoch: -1,
            ..Default::default()
        };
        if request
            .transactional_id
            .as_deref()
            .is_some_and(|t| !t.is_empty())
        {
            // No transaction coordinator here.
            return refused(ErrorCode::CoordinatorNotAvailable);
        }
        if request.producer_id >= 0 {
            if request.producer_epoch < 0 || request.producer_epoch == i16::MAX {
                return refused(ErrorCode::InvalidProducerEpoch);
            }
            return ipi_resp::InitProducerIdResponse {
                producer_id: request.producer_id,
                producer_epoch: request.producer_epoch + 1,
                ..Default::default()
            };
        }
        // A block of ids unique across the cluster (producer_ids.rs); none here yet: the
        // client retries COORDINATOR_LOAD_IN_PROGRESS, as with Kafka's brokers.
        let producer_id = match self.claim_producer_id() {
            Ok(id) => id,
            Err(code) => return refused(code),
        };
        ipi_resp::InitProducerIdResponse {
            producer_id,
            producer_epoch: 0,
            ..Default::default()
        }
    }
}
