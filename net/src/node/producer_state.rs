//! Idempotent producing (KIP-98's producer state, without transactions): per partition, per
//! producer id, the producer epoch and the last five batches appended (sequence range and
//! offsets), checked before every append on the leader.
//!
//! | incoming batch (same producer id)            | answer                                    |
//! | -------------------------------------------- | ----------------------------------------- |
//! | producer epoch older than the remembered one | INVALID_PRODUCER_EPOCH                    |
//! | newer epoch, base sequence 0                 | appended; the entry restarts at this epoch |
//! | newer epoch, base sequence ≠ 0               | OUT_OF_ORDER_SEQUENCE_NUMBER              |
//! | same sequence range as a remembered batch    | not appended; NONE with that batch's base offset (Kafka's answer to a retried batch) |
//! | base sequence = last sequence + 1            | appended                                  |
//! | anything else (a gap, or an old range)       | OUT_OF_ORDER_SEQUENCE_NUMBER              |
//! | unknown producer id, any base sequence       | appended (a new producer, or one whose batches were all removed) |
//!
//! The last row is Kafka's since KIP-360 (`ProducerAppendInfo.checkSequence`: "if there is no
//! current producer epoch (possibly because all producer records have been deleted due to
//! retention or the DeleteRecords API) accept writes with any sequence number"); Kafka's
//! brokers no longer answer UNKNOWN_PRODUCER_ID to a Produce, and neither does this node.
//! Before, an unknown producer's batch at a sequence other than 0 was refused as out of order,
//! so a producer whose batches retention removed got OUT_OF_ORDER_SEQUENCE_NUMBER forever.
//!
//! The state lives in memory ([`PartitionProducers`]), and every KIP-630 snapshot carries its
//! committed part at the snapshot's end offset ([`PartitionProducers::state_at`],
//! producer_state_file.rs, docs/snapshots.md), so producers whose batches retention,
//! DeleteRecords or a snapshot removed stay known across restarts and on a replica that
//! installs the snapshot, until they have not been seen for `producer.id.expiration.ms`
//! ([`PartitionProducers::expire`]).
//! It is read from the snapshot's state and the log's batch headers after it once per process
//! (when the partition is opened, or at its first idempotent Produce)
//! and from then on kept up to date as batches are appended, as leader or as follower, so a
//! follower that becomes leader already knows what the old leader appended: a producer retrying
//! such a batch gets the duplicate answer, never a second copy. It used to be rebuilt by reading
//! the whole log at the first Produce of every new leader epoch, on the event loop: on a 1 GiB
//! log that held the loop for seconds, past the followers' fetch timeout, right after an
//! election (docs/node.md, "Event-loop stalls").
//!
//! A truncation (KIP-320's diverging epoch, always at or above the high-watermark) goes back to
//! the state at the high-watermark and replays the producer fields of the batches kept above it,
//! which are held in memory until the high-watermark passes them (a few dozen bytes a batch).

use std::collections::{HashMap, VecDeque};

pub use super::producer_state_file::ProducerBatch;
use super::producer_state_file::SavedProducerState;

/// How many batches per producer are remembered for duplicate detection (Kafka's
/// `ProducerStateEntry.NUM_BATCHES_TO_RETAIN`, and the client's max in-flight requests).
pub const BATCHES_REMEMBERED: usize = 5;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct ProducerEntry {
    producer_epoch: i16,
    batches: VecDeque<ProducerBatch>,
}

/// What to do with an incoming batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SequenceCheck {
    /// Append it.
    Append,
    /// Already appended: answer with the remembered batch's offsets.
    Duplicate {
        base_offset: u64,
        last_offset: u64,
    },
    OutOfOrder,
    InvalidProducerEpoch,
}

/// The producer state of one partition.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProducerStateTable {
    producers: HashMap<i64, ProducerEntry>,
}

/// One partition's producer state, kept up to date as its log changes (see the module doc).
#[derive(Clone, Debug, Default)]
pub struct PartitionProducers {
    /// Every batch in the log: what a leader checks a Produce against.
    current: ProducerStateTable,
    /// The batches below the high-watermark, which no truncation can remove.
    committed: ProducerStateTable,
    /// The producer fields of the batches at or above the high-watermark, in log order.
    uncommitted: VecDeque<ProducerBatch>,
    high_watermark: u64,
}

impl PartitionProducers {
    /// An empty state for a log whose high-watermark is `high_watermark`.
    pub fn new(high_watermark: u64) -> PartitionProducers {
        PartitionProducers {
            high_watermark,
            ..Default::default()
        }
    }

    pub fn current(&self) -> &ProducerStateTable {
        &self.current
    }

    /// A batch was appended to the log (batches come in log order).
    pub fn appended(&mut self, batch: ProducerBatch) {
        debug_assert!(
            self.uncommitted
                .back()
                .is_none_or(|last| last.last_offset < batch.base_offset),
            "producer batches are appended in log order"
        );
        self.current.record(batch);
        if batch.last_offset < self.high_watermark {
            self.committed.record(batch);
        } else {
            self.uncommitted.push_back(batch);
        }
    }

    /// The high-watermark moved up to `high_watermark`.
    pub fn high_watermark_advanced(&mut self, high_watermark: u64) {
        self.high_watermark = self.high_watermark.max(high_watermark);
        while let Some(batch) = self.uncommitted.front() {
            if batch.last_offset >= self.high_watermark {
                break;
            }
            self.committed.record(*batch);
            self.uncommitted.pop_front();
        }
    }

    /// The log was truncated to end at `end_offset`. Returns false when that is below the
    /// high-watermark this state knows (never for a Raft truncation): the state must then be
    /// read from the log again.
    #[must_use]
    pub fn truncated(&mut self, end_offset: u64) -> bool {
        if end_offset < self.high_watermark {
            return false;
        }
        // Truncations cut between batches: a batch either stays whole or goes.
        self.uncommitted.retain(|b| b.last_offset < end_offset);
        self.current = self.committed.clone();
        for batch in &self.uncommitted {
            self.current.record(*batch);
        }
        true
    }

    /// The committed state, to be saved (producer_state_file.rs): every remembered batch
    /// below the high-watermark, in log order.
    pub fn saved(&self) -> SavedProducerState {
        let mut batches: Vec<ProducerBatch> = self
            .committed
            .producers
            .values()
            .flat_map(|entry| entry.batches.iter().copied())
            .collect();
        batches.sort_by_key(|b| b.base_offset);
        SavedProducerState {
            offset: self.high_watermark,
            batches,
        }
    }

    /// The state a KIP-630 snapshot ending at `end_offset` carries (docs/snapshots.md): every
    /// remembered batch below `end_offset`, replayed in log order under the five-batch and
    /// epoch rules, standing at `end_offset`.
    ///
    /// When the state has moved past `end_offset` (a retention or DeleteRecords cut below the
    /// high-watermark), a producer's older batches may already have left its window, or its
    /// older epoch may be forgotten: the state is then a part of the one after every batch
    /// below `end_offset`, but only in what the batches from `end_offset` on replace anyway.
    /// A replica that takes it and applies the log from `end_offset` (every snapshot is
    /// followed by that log, committed, up to at least this node's high-watermark) ends with
    /// exactly this state: a producer's last five batches of its last epoch are the same
    /// whether the older ones were dropped before or while replaying. Tested by
    /// `a_snapshot_state_plus_the_log_after_it_is_the_state_after_the_log`.
    pub fn state_at(&self, end_offset: u64) -> SavedProducerState {
        let mut below: Vec<ProducerBatch> = self
            .committed
            .producers
            .values()
            .flat_map(|entry| entry.batches.iter().copied())
            .chain(self.uncommitted.iter().copied())
            .filter(|b| b.last_offset < end_offset)
            .collect();
        below.sort_by_key(|b| b.base_offset);
        let mut at = PartitionProducers::new(end_offset);
        for batch in below {
            at.appended(batch);
        }
        at.saved()
    }

    /// The state a saved file holds, in a log whose high-watermark is `high_watermark`; the
    /// log's batches from `saved.offset` on are to be [`PartitionProducers::appended`] next.
    pub fn from_saved(saved: &SavedProducerState, high_watermark: u64) -> PartitionProducers {
        let mut producers = PartitionProducers::new(high_watermark);
        for batch in &saved.batches {
            producers.appended(*batch);
        }
        producers
    }

    /// Kafka's `producer.id.expiration.ms`: forgets the producers whose newest batch's
    /// MaxTimestamp is `expiration_ms` or more before `now_ms` (`ProducerStateManager.
    /// removeExpiredProducers`). A producer with a batch above the high-watermark is kept (a
    /// truncation could bring back its older state). An expired producer is unknown, and its
    /// next batch is taken at any sequence. Returns how many were forgotten.
    pub fn expire(&mut self, now_ms: i64, expiration_ms: i64) -> usize {
        let expired_at_ms = now_ms.saturating_sub(expiration_ms);
        let keep: std::collections::HashSet<i64> =
            self.uncommitted.iter().map(|b| b.producer_id).collect();
        self.committed.expire(expired_at_ms, &keep);
        self.current.expire(expired_at_ms, &keep)
    }

    /// How many batches wait for the high-watermark (for tests and logs).
    #[cfg(test)]
    pub fn uncommitted_batches(&self) -> usize {
        self.uncommitted.len()
    }
}

/// The sequence after `sequence` (sequences wrap from i32::MAX to 0, as Kafka's do).
fn next_sequence(sequence: i32) -> i32 {
    if sequence == i32::MAX {
        0
    } else {
        sequence + 1
    }
}

impl ProducerStateTable {
    /// Checks a batch (offsets not yet known: only its producer fields are read).
    pub fn check(
        &self,
        producer_id: i64,
        producer_epoch: i16,
        base_sequence: i32,
        last_sequence: i32,
    ) -> SequenceCheck {
        let Some(entry) = self.producers.get(&producer_id) else {
            // Kafka (KIP-360): an unknown producer is taken at any sequence (module doc).
            return SequenceCheck::Append;
        };
        if producer_epoch < entry.producer_epoch {
            return SequenceCheck::InvalidProducerEpoch;
        }
        if producer_epoch > entry.producer_epoch {
            return if base_sequence == 0 {
                SequenceCheck::Append
            } else {
                SequenceCheck::OutOfOrder
            };
        }
        if let Some(dup) = entry
            .batches
            .iter()
            .find(|b| b.base_sequence == base_sequence && b.last_sequence == last_sequence)
        {
            return SequenceCheck::Duplicate {
                base_offset: dup.base_offset,
                last_offset: dup.last_offset,
            };
        }
        match entry.batches.back() {
            Some(last) if next_sequence(last.last_sequence) == base_sequence => {
                SequenceCheck::Append
            }
            None if base_sequence == 0 => SequenceCheck::Append,
            _ => SequenceCheck::OutOfOrder,
        }
    }

    /// Records an appended batch (or one found in the log while rebuilding).
    pub fn record(&mut self, batch: ProducerBatch) {
        let entry = self.producers.entry(batch.producer_id).or_default();
        if batch.producer_epoch != entry.producer_epoch {
            entry.batches.clear();
            entry.producer_epoch = batch.producer_epoch;
        }
        entry.batches.push_back(batch);
        while entry.batches.len() > BATCHES_REMEMBERED {
            entry.batches.pop_front();
        }
    }

    pub fn producer_count(&self) -> usize {
        self.producers.len()
    }

    /// Forgets the producers last seen (their newest batch's MaxTimestamp) at or before
    /// `expired_at_ms`, except those in `keep`; returns how many.
    fn expire(&mut self, expired_at_ms: i64, keep: &std::collections::HashSet<i64>) -> usize {
        let before = self.producers.len();
        self.producers.retain(|producer_id, entry| {
            keep.contains(producer_id)
                || entry
                    .batches
                    .back()
                    .is_some_and(|last| last.max_timestamp > expired_at_ms)
        });
        before - self.producers.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(epoch: i16, base: i32, last: i32, offset: u64) -> ProducerBatch {
        ProducerBatch {
            producer_id: 7,
            producer_epoch: epoch,
            base_sequence: base,
            last_sequence: last,
            base_offset: offset,
            last_offset: offset + (last - base) as u64,
            max_timestamp: 1_000 + offset as i64,
        }
    }

    #[test]
    fn kip_98_sequence_table() {
        let mut t = ProducerStateTable::default();
        // Unknown: any sequence (Kafka since KIP-360: its batches may all have been removed).
        assert_eq!(t.check(7, 0, 3, 4), SequenceCheck::Append);
        assert_eq!(t.check(7, 0, 0, 4), SequenceCheck::Append);
        t.record(batch(0, 0, 4, 10));
        // The next in line is appended; a retry of the same range is a duplicate.
        assert_eq!(t.check(7, 0, 5, 9), SequenceCheck::Append);
        assert_eq!(
            t.check(7, 0, 0, 4),
            SequenceCheck::Duplicate {
                base_offset: 10,
                last_offset: 14
            }
        );
        // A gap is out of order.
        assert_eq!(t.check(7, 0, 6, 9), SequenceCheck::OutOfOrder);
        // An older producer epoch is fenced; a newer one restarts at sequence 0.
        t.record(batch(1, 0, 0, 20));
        assert_eq!(t.check(7, 0, 1, 1), SequenceCheck::InvalidProducerEpoch);
        assert_eq!(t.check(7, 2, 3, 3), SequenceCheck::OutOfOrder);
        assert_eq!(t.check(7, 2, 0, 0), SequenceCheck::Append);
    }

    #[test]
    fn only_the_last_five_batches_are_remembered() {
        let mut t = ProducerStateTable::default();
        for i in 0..7 {
            t.record(batch(0, i, i, 100 + i as u64));
        }
        assert!(matches!(
            t.check(7, 0, 6, 6),
            SequenceCheck::Duplicate { .. }
        ));
        assert!(matches!(
            t.check(7, 0, 2, 2),
            SequenceCheck::Duplicate { .. }
        ));
        // Batch 1 is out of the window: it can no longer be told from a reordering.
        assert_eq!(t.check(7, 0, 1, 1), SequenceCheck::OutOfOrder);
        assert_eq!(t.check(7, 0, 7, 7), SequenceCheck::Append);
    }

    #[test]
    fn sequences_wrap_at_i32_max() {
        let mut t = ProducerStateTable::default();
        t.record(batch(0, i32::MAX - 1, i32::MAX, 0));
        assert_eq!(t.check(7, 0, 0, 3), SequenceCheck::Append);
    }

    /// A follower that becomes leader answers a retry of a batch the old leader appended as a
    /// duplicate without reading its log: the state followed every append.
    #[test]
    fn appends_keep_the_state_current_without_a_rebuild() {
        let mut p = PartitionProducers::new(0);
        p.appended(batch(0, 0, 4, 0));
        p.appended(batch(0, 5, 9, 5));
        p.high_watermark_advanced(5);
        assert_eq!(p.uncommitted_batches(), 1);
        assert_eq!(
            p.current().check(7, 0, 5, 9),
            SequenceCheck::Duplicate {
                base_offset: 5,
                last_offset: 9
            }
        );
        assert_eq!(p.current().check(7, 0, 10, 10), SequenceCheck::Append);
        p.high_watermark_advanced(10);
        assert_eq!(p.uncommitted_batches(), 0);
    }

    /// KIP-320: a truncation removes uncommitted batches; the state goes back to the
    /// high-watermark's and replays what stays above it.
    #[test]
    fn a_truncation_forgets_the_removed_batches_only() {
        let mut p = PartitionProducers::new(0);
        p.appended(batch(0, 0, 0, 0));
        p.high_watermark_advanced(1);
        p.appended(batch(0, 1, 1, 1));
        p.appended(batch(0, 2, 2, 2));
        assert!(p.truncated(2));
        // Batch 2 is gone: its retry is appended again; batch 1 stays a duplicate.
        assert_eq!(p.current().check(7, 0, 2, 2), SequenceCheck::Append);
        assert!(matches!(
            p.current().check(7, 0, 1, 1),
            SequenceCheck::Duplicate { base_offset: 1, .. }
        ));
        assert!(p.truncated(1));
        assert_eq!(p.current().check(7, 0, 1, 1), SequenceCheck::Append);
        // Below the high-watermark: not a Raft truncation, the state must be read again.
        assert!(!p.truncated(0));
    }

    /// The saved state holds what the log held: read back, a producer's retry of a batch
    /// removed from the log is still a duplicate and its next batch follows on.
    #[test]
    fn the_saved_committed_state_reads_back_without_the_log() {
        let mut p = PartitionProducers::new(0);
        p.appended(batch(0, 0, 4, 0));
        p.appended(batch(0, 5, 9, 5));
        let mut other = batch(0, 0, 0, 10);
        other.producer_id = 8;
        p.appended(other);
        p.high_watermark_advanced(10);
        let saved = p.saved();
        // Only what is below the high-watermark.
        assert_eq!(saved.offset, 10);
        assert_eq!(saved.batches.len(), 2);
        let back = PartitionProducers::from_saved(&saved, 10);
        assert_eq!(
            back.current().check(7, 0, 5, 9),
            SequenceCheck::Duplicate {
                base_offset: 5,
                last_offset: 9
            }
        );
        assert_eq!(back.current().check(7, 0, 10, 10), SequenceCheck::Append);
        assert_eq!(
            back.current().check(7, 0, 12, 12),
            SequenceCheck::OutOfOrder
        );
        assert_eq!(back.current().producer_count(), 1);
    }

    /// KIP-630 snapshots carry the producer state at their end offset (`state_at`): for every
    /// cut at or below the high-watermark (a retention or DeleteRecords cut is usually below
    /// it), the snapshot's state plus the log's batches from the cut on is the state after the
    /// whole log, in every answer a leader gives: duplicates, next in line, epochs.
    #[test]
    fn a_snapshot_state_plus_the_log_after_it_is_the_state_after_the_log() {
        // Three producers, bumps of epoch, batches of 1–3 records, interleaved.
        let mut log = Vec::new();
        let mut next_sequence = [0i32; 3];
        let mut epochs = [0i16; 3];
        let mut offset = 0u64;
        for step in 0..60u64 {
            let producer = (step * 7 % 3) as usize;
            if step % 17 == 16 {
                epochs[producer] += 1;
                next_sequence[producer] = 0;
            }
            let records = 1 + (step % 3) as i32;
            let base = next_sequence[producer];
            log.push(ProducerBatch {
                producer_id: 7 + producer as i64,
                producer_epoch: epochs[producer],
                base_sequence: base,
                last_sequence: base + records - 1,
                base_offset: offset,
                last_offset: offset + records as u64 - 1,
                max_timestamp: 1_000 + step as i64,
            });
            next_sequence[producer] += records;
            offset += records as u64 + 1; // a control record between batches, say
        }
        // Cuts and high-watermarks fall between batches, never inside one.
        let inside_a_batch = |at: u64| {
            log.iter()
                .any(|b: &ProducerBatch| b.base_offset < at && at <= b.last_offset)
        };
        for high_watermark in (0..=offset).step_by(13) {
            if inside_a_batch(high_watermark) {
                continue;
            }
            let mut whole = PartitionProducers::new(0);
            for batch in &log {
                whole.appended(*batch);
            }
            whole.high_watermark_advanced(high_watermark);
            for end_offset in (0..=high_watermark).filter(|&at| !inside_a_batch(at)) {
                let snapshot = whole.state_at(end_offset);
                assert_eq!(snapshot.offset, end_offset);
                assert!(snapshot.batches.iter().all(|b| b.last_offset < end_offset));
                let mut replica = PartitionProducers::from_saved(&snapshot, end_offset);
                for batch in log.iter().filter(|b| b.base_offset >= end_offset) {
                    replica.appended(*batch);
                }
                assert_eq!(
                    replica.current(),
                    whole.current(),
                    "cut at {end_offset}, high-watermark {high_watermark}"
                );
            }
        }
        // At the end offset itself, nothing of a later batch: a producer first seen above the
        // cut is unknown in the snapshot.
        let mut p = PartitionProducers::new(0);
        p.appended(batch(0, 0, 0, 0));
        let mut later = batch(0, 0, 0, 5);
        later.producer_id = 8;
        p.appended(later);
        p.high_watermark_advanced(6);
        let snapshot = PartitionProducers::from_saved(&p.state_at(5), 5);
        assert_eq!(snapshot.current().producer_count(), 1);
        assert!(matches!(
            snapshot.current().check(7, 0, 0, 0),
            SequenceCheck::Duplicate { base_offset: 0, .. }
        ));
    }

    /// Kafka's `producer.id.expiration.ms`: a producer not seen for that long is forgotten
    /// (then taken at any sequence), in the state checked and the state saved; one with a batch
    /// above the high-watermark is kept.
    #[test]
    fn producers_not_seen_for_the_expiration_time_are_forgotten() {
        let mut p = PartitionProducers::new(0);
        p.appended(batch(0, 0, 0, 0)); // seen at 1000
        let mut other = batch(0, 0, 0, 1);
        other.producer_id = 8;
        other.max_timestamp = 5_000;
        p.appended(other);
        let mut pending = batch(0, 0, 0, 2);
        pending.producer_id = 9;
        pending.max_timestamp = 0;
        p.high_watermark_advanced(2);
        p.appended(pending);
        assert_eq!(p.expire(3_000, 1_000), 1);
        assert_eq!(p.current().producer_count(), 2);
        assert_eq!(p.current().check(7, 0, 9, 9), SequenceCheck::Append);
        assert_eq!(p.current().check(8, 0, 9, 9), SequenceCheck::OutOfOrder);
        assert!(p.saved().batches.iter().all(|b| b.producer_id == 8));
        // Producer 9's batch is above the high-watermark: kept however old.
        assert_eq!(p.current().check(9, 0, 5, 5), SequenceCheck::OutOfOrder);
        assert_eq!(p.expire(6_000, 1_000), 1);
        assert_eq!(p.current().producer_count(), 1);
    }
}
