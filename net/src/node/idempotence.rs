//! The node's side of idempotent producing: InitProducerId hands out producer ids, and every
//! Produce on a leader checks its batches' sequences against the partition's producer state
//! (producer_state.rs). The state is read from the log once per process and then follows the
//! log: every append (as leader or follower), high-watermark move and truncation the node
//! executes updates it ([`Producers`]' `track_*`, called from `Node::deliver`).

use std::collections::HashMap;
use std::path::Path;

use bytes::Bytes;
use ringlog_engine::batch::{BatchIter, RecordBatch};
use ringlog_replication::host::StorageError;
use ringlog_replication::{OffsetAndEpoch, PartitionId};

use ringlog_engine::io::AnyIo;
use ringlog_replication::host::Host;

use super::NodeError;
use super::convert::PartitionTable;
use super::observe::StallWatch;
use super::producer_state::{PartitionProducers, ProducerBatch, SequenceCheck};
use super::producer_state_file::{self, SavedProducerState};
use crate::protocol::{
    ErrorCode, init_producer_id_request as ipi_req, init_producer_id_response as ipi_resp,
};

/// How many bytes a rebuild reads from the log at a time.
const REBUILD_CHUNK_BYTES: u32 = 1 << 20;

/// How many committed records between two saves of a partition's producer-state file: at most
/// this many are read again at a restart to rebuild the producer state (docs/node.md, "Event-loop
/// stalls"). A save is a write and a rename of a few KiB, no fsync, off the commit path.
const SAVE_EVERY_RECORDS: u64 = 10_000;

#[derive(Debug, Default)]
pub(crate) struct Producers {
    /// Partitions whose state was read from the log; a partition missing here is read at its
    /// first idempotent Produce, and its appends are not tracked until then (the read covers
    /// them).
    tables: HashMap<PartitionId, PartitionProducers>,
    /// State read at start-up from partitions recovered before serving (`preopen_partitions`),
    /// by folder, until the partition starts and takes it.
    preopened: HashMap<std::path::PathBuf, PartitionProducers>,
    /// The offset each partition's producer-state file was last saved at in this process.
    saved_at: HashMap<PartitionId, u64>,
}

/// Reads the producer state of a log from `start` to `end` through `read` (whole batches from an
/// offset), starting from the newest saved state that stands inside the log (the table in
/// producer_state_file.rs): the partition folder's producer-state file, or the state carried
/// by the snapshot the log starts at (`snapshot_state`, docs/snapshots.md), whichever stands
/// at the higher offset.
fn rebuild(
    mut read: impl FnMut(u64) -> Result<Bytes, StorageError>,
    dir: &Path,
    snapshot_state: Option<SavedProducerState>,
    start: u64,
    end: u64,
    high_watermark: u64,
) -> Result<PartitionProducers, StorageError> {
    let file = match producer_state_file::read(dir) {
        Ok(Some(saved)) if (start..=end).contains(&saved.offset) => Some(saved),
        // Left by a node from before the snapshots carried the state (2026-12-03), and passed
        // by the log start since: it can never stand inside the log again. Removed, so it is
        // neither read nor warned about at every start.
        Ok(Some(saved)) if saved.offset < start => {
            match producer_state_file::remove(dir) {
                Ok(()) => tracing::info!(
                    dir = %dir.display(),
                    saved_offset = saved.offset,
                    log_start_offset = start,
                    "producer-state file below the log start removed"
                ),
                Err(error) => tracing::warn!(%error, "producer-state file below the log start"),
            }
            None
        }
        Ok(Some(saved)) => {
            tracing::warn!(
                dir = %dir.display(),
                saved_offset = saved.offset,
                log_start_offset = start,
                log_end_offset = end,
                "producer-state file outside the log: not used"
            );
            None
        }
        Ok(None) => None,
        Err(error) => {
            tracing::warn!(%error, "producer-state file not trusted");
            None
        }
    };
    let snapshot_state = snapshot_state.filter(|s| (start..=end).contains(&s.offset));
    let saved = [file, snapshot_state]
        .into_iter()
        .flatten()
        .max_by_key(|s| s.offset);
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

/// The producer state a partition's snapshot carries (its `ProducerState` record, kept by the
/// host as `PartitionSnapshots::producer_state`), decoded. One that does not decode, or that
/// stands elsewhere than its snapshot's end offset, is not trusted (warned): the state is then
/// read as if the snapshot carried none.
fn snapshot_producer_state(
    dir: &Path,
    carried: Option<&(OffsetAndEpoch, Bytes)>,
) -> Option<SavedProducerState> {
    let (snapshot_id, bytes) = carried?;
    match producer_state_file::decode(bytes) {
        Ok(state) if state.offset == snapshot_id.offset => Some(state),
        Ok(state) => {
            tracing::warn!(dir = %dir.display(), ?snapshot_id, state_offset = state.offset, "a snapshot's producer state stands elsewhere: not used");
            None
        }
        Err(reason) => {
            tracing::warn!(dir = %dir.display(), ?snapshot_id, reason, "a snapshot's producer state not trusted");
            None
        }
    }
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

impl Producers {
    /// Checks a Produce partition's batches (already validated) against the producer state
    /// (read from the log first if this process has not read it yet, timed for the stall
    /// watch).
    pub(super) fn check_sequences(
        &mut self,
        host: &mut Host<AnyIo>,
        stall: &mut StallWatch,
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
        self.ensure(host, partition)?;
        stall.part(began, "produce: producer state read from the log");
        let table = self.tables.get(&partition).expect("built above").current();
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
        let Some(producers) = self.tables.get_mut(&partition) else {
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

    /// A follower append of fetched `records` (stamped by the leader, and validated by the
    /// log's append before the host reported it).
    pub(super) fn track_follower_append(&mut self, partition: PartitionId, records: &Bytes) {
        let Some(producers) = self.tables.get_mut(&partition) else {
            return;
        };
        for batch in BatchIter::new(records.clone()).already_validated() {
            let Ok(batch) = batch else { break };
            if let Some(f) = producer_fields(&batch) {
                producers.appended(f);
            }
        }
    }

    /// The high-watermark moved: the state below it is committed. Every
    /// [`SAVE_EVERY_RECORDS`] committed records, the state at the committed and locally durable
    /// offset is saved to the partition folder's producer-state file, so a restart reads the log
    /// only from there (`rebuild`). A committed offset is never truncated away; unsynced, the
    /// file may be lost or torn by a crash, and is then not trusted (checksum) or older.
    pub(super) fn track_high_watermark(
        &mut self,
        host: &Host<AnyIo>,
        partition: PartitionId,
        high_watermark: u64,
    ) {
        let Some(producers) = self.tables.get_mut(&partition) else {
            return;
        };
        producers.high_watermark_advanced(high_watermark);
        let Some(store) = host.store(partition) else {
            return;
        };
        let offset = high_watermark.min(store.log.durable_end_offset().max(0) as u64);
        let saved = self.saved_at.get(&partition).copied().unwrap_or(0);
        if offset < saved + SAVE_EVERY_RECORDS {
            return;
        }
        let state = producers.state_at(offset);
        match producer_state_file::write_unsynced(&store.dir, &state) {
            Ok(()) => {
                self.saved_at.insert(partition, offset);
            }
            Err(error) => tracing::warn!(partition, %error, "producer state not saved"),
        }
    }

    /// The log now ends at `end_offset` (a truncation), or was replaced by a snapshot fetched
    /// from the leader (`replaced`): the state goes back to the high-watermark's, or is the
    /// one the snapshot carries (its appends tracked from here on, so this replica answers a
    /// retry of a batch the snapshot replaced as the leader would), or is read again.
    pub(super) fn track_truncation(
        &mut self,
        host: &Host<AnyIo>,
        partition: PartitionId,
        end_offset: u64,
        replaced: bool,
    ) {
        if replaced && let Some(store) = host.store(partition) {
            let carried = store
                .snapshots
                .producer_state
                .as_ref()
                .filter(|(snapshot_id, _)| snapshot_id.offset == end_offset);
            if let Some(state) = snapshot_producer_state(&store.dir, carried) {
                let high_watermark = store.high_watermark.max(state.offset);
                tracing::info!(
                    partition,
                    offset = state.offset,
                    batches = state.batches.len(),
                    "producer state taken from the installed snapshot"
                );
                self.tables.insert(
                    partition,
                    PartitionProducers::from_saved(&state, high_watermark),
                );
                return;
            }
        }
        let tables = &mut self.tables;
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
    pub(super) fn read_preopened(
        &mut self,
        host: &mut Host<AnyIo>,
        dir: &std::path::Path,
    ) -> Result<(), NodeError> {
        let Some((start, end, high_watermark)) = host.preopened_bounds(dir) else {
            return Ok(());
        };
        let snapshot_state = snapshot_producer_state(
            dir,
            host.preopened_store(dir)
                .and_then(|store| store.snapshots.producer_state.as_ref()),
        );
        let rebuilt = rebuild(
            |offset| host.read_preopened(dir, offset, REBUILD_CHUNK_BYTES),
            dir,
            snapshot_state,
            start,
            end,
            high_watermark,
        )
        .map_err(NodeError::Storage)?;
        self.preopened.insert(dir.to_path_buf(), rebuilt);
        Ok(())
    }

    /// A partition started from a preopened folder takes the producer state read with it.
    pub(super) fn adopt_preopened(&mut self, partition: PartitionId, dir: &std::path::Path) {
        if let Some(table) = self.preopened.remove(dir) {
            self.tables.insert(partition, table);
        }
    }

    /// Reads a partition's producer state from its log if it was not read yet in this process
    /// (once: from then on the `track_*` calls keep it current).
    pub(super) fn ensure(
        &mut self,
        host: &mut Host<AnyIo>,
        partition: PartitionId,
    ) -> Result<(), NodeError> {
        if self.tables.contains_key(&partition) {
            return Ok(());
        }
        let started = std::time::Instant::now();
        let store = host.store(partition).expect("hosted partition");
        let start = store.log.log_start_offset() as u64;
        let end = store.log.log_end_offset() as u64;
        let high_watermark = store.high_watermark;
        let dir = store.dir.clone();
        let snapshot_state = snapshot_producer_state(&dir, store.snapshots.producer_state.as_ref());
        let rebuilt = rebuild(
            |offset| host.read(partition, offset, REBUILD_CHUNK_BYTES),
            &dir,
            snapshot_state,
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
        self.tables.insert(partition, rebuilt);
        Ok(())
    }

    /// The producer state a KIP-630 snapshot of `partition` ending at `end_offset` carries
    /// (docs/snapshots.md): `PartitionProducers::state_at`, encoded as the producer-state
    /// file's bytes, for the host to write as the snapshot's `ProducerState` record. Read from
    /// the log first if this process has not read it yet (the batches the snapshot replaces
    /// are still there). Internal topics (no client produces to them) carry none, so the
    /// metadata partition's snapshots keep Kafka's layout. `None` too when the state cannot be
    /// read (logged): the snapshot then goes without it, as snapshots written before it existed,
    /// and a replica that installs it reads the state from the log after it.
    pub(super) fn state_record(
        &mut self,
        host: &mut Host<AnyIo>,
        table: &PartitionTable,
        partition: PartitionId,
        end_offset: u64,
    ) -> Option<Bytes> {
        if super::topics::is_internal_topic(&table.get(partition).topic) {
            return None;
        }
        if let Err(error) = self.ensure(host, partition) {
            tracing::error!(partition, %error, "reading the producer state for a snapshot failed");
            return None;
        }
        let state = self
            .tables
            .get(&partition)
            .expect("built above")
            .state_at(end_offset);
        Some(Bytes::from(producer_state_file::encode(&state)))
    }

    /// Kafka's `producer.id.expiration.ms`: every partition forgets the producers it has not
    /// seen for that long (producer_state.rs `PartitionProducers::expire`). Runs with the
    /// retention check, once a second.
    pub(super) fn expire(&mut self, producer_id_expiration_ms: u64, now_wall_ms: u64) {
        let expiration_ms = i64::try_from(producer_id_expiration_ms).unwrap_or(i64::MAX);
        let now = i64::try_from(now_wall_ms).unwrap_or(i64::MAX);
        for (partition, table) in &mut self.tables {
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
}

/// InitProducerId for idempotent producers (no transactional id). KIP-360: a producer that
/// sends its id and epoch back gets the same id with the next epoch. A new id comes from
/// `claim_producer_id` (the node's producer id block, producer_ids.rs), called only when one is
/// needed.
pub(super) fn handle_init_producer_id(
    request: &ipi_req::InitProducerIdRequest,
    claim_producer_id: impl FnOnce() -> Result<i64, ErrorCode>,
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
    let producer_id = match claim_producer_id() {
        Ok(id) => id,
        Err(code) => return refused(code),
    };
    ipi_resp::InitProducerIdResponse {
        producer_id,
        producer_epoch: 0,
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ringlog_engine::batch::RecordBatchBuilder;

    /// Producer 7's batches of five records: sequences 0–4 at offsets 10–14, 5–9 at 15–19.
    fn log() -> Vec<Bytes> {
        [(0, 10), (5, 15)]
            .into_iter()
            .map(|(sequence, base_offset)| {
                let mut builder =
                    RecordBatchBuilder::new(base_offset).with_producer(7, 0, sequence);
                for _ in 0..5 {
                    builder.append(1_000, None, Some(b"v"), &[]);
                }
                builder.build().into_bytes()
            })
            .collect()
    }

    /// The log read from `offset`: every batch that ends at or after it.
    fn read_from(log: &[Bytes], offset: u64) -> Result<Bytes, StorageError> {
        let mut bytes = Vec::new();
        for batch in log {
            let parsed = RecordBatch::parse(batch.clone()).unwrap();
            if parsed.last_offset() as u64 >= offset {
                bytes.extend_from_slice(batch);
            }
        }
        Ok(Bytes::from(bytes))
    }

    fn saved(offset: u64, batches: &[Bytes]) -> SavedProducerState {
        SavedProducerState {
            offset,
            batches: batches
                .iter()
                .map(|b| producer_fields(&RecordBatch::parse(b.clone()).unwrap()).unwrap())
                .collect(),
        }
    }

    /// Where a partition's producer state is read from (producer_state_file.rs): the newer of
    /// the file and the state its log-start snapshot carries, each only when it stands inside
    /// the log, then the log after it; with neither, the log from its start. Whatever the
    /// source, both batches are known (the log below the log start is gone: only a saved
    /// state can tell the first one).
    #[test]
    fn the_state_is_read_from_the_newest_saved_state_inside_the_log() {
        let log = log();
        let both = |state: &PartitionProducers| {
            assert_eq!(
                state.current().check(7, 0, 0, 4),
                SequenceCheck::Duplicate {
                    base_offset: 10,
                    last_offset: 14
                }
            );
            assert_eq!(
                state.current().check(7, 0, 5, 9),
                SequenceCheck::Duplicate {
                    base_offset: 15,
                    last_offset: 19
                }
            );
        };
        let dir = tempfile::tempdir().unwrap();
        // Neither: the whole log from its start.
        let state = rebuild(|o| read_from(&log, o), dir.path(), None, 10, 20, 20).unwrap();
        both(&state);
        // A follower that installed a snapshot at 15: the first batch only in the snapshot.
        let (_, after) = log.split_at(1);
        let snapshot = saved(15, &log[..1]);
        let state = rebuild(
            |o| read_from(after, o),
            dir.path(),
            Some(snapshot.clone()),
            15,
            20,
            20,
        )
        .unwrap();
        both(&state);
        // The file stands higher (20, both batches; no log read needed): it wins.
        producer_state_file::write(dir.path(), &saved(20, &log)).unwrap();
        let state = rebuild(
            |_| Ok(Bytes::new()),
            dir.path(),
            Some(snapshot.clone()),
            15,
            20,
            20,
        )
        .unwrap();
        both(&state);
        // A file below the log start (written before the install) is not used, and removed;
        // the snapshot's state is.
        producer_state_file::write(dir.path(), &saved(12, &[])).unwrap();
        let state = rebuild(
            |o| read_from(after, o),
            dir.path(),
            Some(snapshot),
            15,
            20,
            20,
        )
        .unwrap();
        both(&state);
        assert!(
            producer_state_file::read(dir.path()).unwrap().is_none(),
            "a file below the log start is removed"
        );
        // Without a saved state the first batch is gone with the log below 15: the producer
        // is known from its second batch only.
        let state = rebuild(|o| read_from(after, o), dir.path(), None, 15, 20, 20).unwrap();
        assert_eq!(state.current().check(7, 0, 0, 4), SequenceCheck::OutOfOrder);
    }

    /// The periodic save (`track_high_watermark`): the committed state at an offset, written
    /// without fsync, is what a restart rebuilds from, reading only the log after it.
    #[test]
    fn a_saved_committed_state_plus_the_log_after_it_is_the_whole_state() {
        let log = log();
        let mut tracked = PartitionProducers::new(0);
        for batch in &log {
            tracked.appended(producer_fields(&RecordBatch::parse(batch.clone()).unwrap()).unwrap());
        }
        tracked.high_watermark_advanced(20);
        let dir = tempfile::tempdir().unwrap();
        producer_state_file::write_unsynced(dir.path(), &tracked.state_at(15)).unwrap();
        let mut reads = Vec::new();
        let state = rebuild(
            |o| {
                reads.push(o);
                read_from(&log, o)
            },
            dir.path(),
            None,
            10,
            20,
            20,
        )
        .unwrap();
        assert_eq!(
            reads.first(),
            Some(&15),
            "the log is read from the saved offset"
        );
        for (base, last) in [(0, 4), (5, 9)] {
            assert!(matches!(
                state.current().check(7, 0, base, last),
                SequenceCheck::Duplicate { .. }
            ));
        }
    }
}
