//! The node's side of idempotent producing: InitProducerId hands out producer ids, and every
//! Produce on a leader checks its batches' sequences against the partition's producer state
//! (producer_state.rs), which is rebuilt from the log the first time this node appends in a
//! new leader epoch.

use std::collections::HashMap;
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use ringlog_engine::batch::{BatchIter, RecordBatch};
use ringlog_replication::PartitionId;

use super::producer_state::{
    ProducerBatch, ProducerIdAllocator, ProducerStateTable, SequenceCheck,
};
use super::{Node, NodeError};
use crate::protocol::{
    ErrorCode, init_producer_id_request as ipi_req, init_producer_id_response as ipi_resp,
};

/// How many bytes a rebuild reads from the log at a time.
const REBUILD_CHUNK_BYTES: u32 = 1 << 20;

#[derive(Debug, Default)]
pub(crate) struct Producers {
    tables: HashMap<PartitionId, ProducerStateTable>,
    ids: ProducerIdAllocator,
}

/// What a Produce partition's batches get.
pub(crate) enum SequenceOutcome {
    /// Append; once the base offset is known, record these (batch index, producer fields).
    Append(Vec<(usize, ProducerBatch)>),
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
            return Ok(SequenceOutcome::Append(Vec::new()));
        }
        if fields.len() != batches.len() {
            // One producer writes one partition's batches; a mix of idempotent and plain
            // batches in one partition is no client's doing.
            return Ok(SequenceOutcome::Refused(ErrorCode::InvalidRecord));
        }
        self.ensure_producer_state(partition)?;
        let table = self
            .handlers
            .producers
            .tables
            .get(&partition)
            .expect("built above");
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
                    SequenceCheck::Append => SequenceOutcome::Append(fields),
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
        Ok(SequenceOutcome::Append(fields))
    }

    /// Records the idempotent batches of an append whose first batch landed at `base_offset`.
    pub(super) fn record_producer_batches(
        &mut self,
        partition: PartitionId,
        base_offset: u64,
        recorded: Vec<(usize, ProducerBatch)>,
    ) {
        if recorded.is_empty() {
            return;
        }
        let table = self.handlers.producers.tables.entry(partition).or_default();
        // Batches are appended back to back; an index's offset is the base plus the record
        // counts (last offset deltas + 1) of the batches before it. Producers send one batch
        // per partition, so the common case is index 0 at the base.
        let mut offset = base_offset;
        for (next_index, (index, mut f)) in recorded.into_iter().enumerate() {
            debug_assert_eq!(index, next_index, "checked: every batch is idempotent");
            let span = f.last_offset - f.base_offset;
            f.base_offset = offset;
            f.last_offset = offset + span;
            offset = f.last_offset + 1;
            table.record(f);
        }
    }

    /// Rebuilds a partition's producer state from its log when this node leads an epoch it has
    /// not built the state for (a new leader must remember what the old one appended).
    fn ensure_producer_state(&mut self, partition: PartitionId) -> Result<(), NodeError> {
        let epoch = self.multi.partition(partition).map_or(0, |r| r.epoch());
        let table = self.handlers.producers.tables.entry(partition).or_default();
        if table.built_for_epoch == Some(epoch) {
            return Ok(());
        }
        table.clear();
        let store = self.stores.get_mut(&partition).expect("hosted partition");
        let mut offset = store.log.log_start_offset() as u64;
        let end = store.log.log_end_offset() as u64;
        let mut rebuilt = ProducerStateTable::default();
        while offset < end {
            let bytes = store
                .read(&mut self.io, offset, REBUILD_CHUNK_BYTES)
                .map_err(NodeError::Storage)?;
            if bytes.is_empty() {
                break;
            }
            let before = offset;
            for batch in BatchIter::new(bytes) {
                let Ok(batch) = batch else { break };
                offset = batch.next_offset() as u64;
                if let Some(f) = producer_fields(&batch) {
                    rebuilt.record(f);
                }
            }
            if offset == before {
                break;
            }
        }
        rebuilt.built_for_epoch = Some(epoch);
        tracing::info!(
            partition,
            epoch,
            producers = rebuilt.producer_count(),
            "producer state rebuilt from the log"
        );
        self.handlers.producers.tables.insert(partition, rebuilt);
        self.collect_foreign();
        Ok(())
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
        let wall_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let producer_id = self
            .handlers
            .producers
            .ids
            .next(self.config.node_id, wall_ms);
        ipi_resp::InitProducerIdResponse {
            producer_id,
            producer_epoch: 0,
            ..Default::default()
        }
    }
}
