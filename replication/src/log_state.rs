//! What the core knows about its log without holding any record: the extent, the leader-epoch
//! cache (epoch → start offset, Kafka's `leader-epoch-checkpoint`), the durable end offset and
//! the high-watermark. The records themselves live in the host's log.

use crate::error::RaftError;
use crate::types::{Epoch, OffsetAndEpoch, RecoveredSnapshots, RecoveredState};

/// The three outcomes of checking a fetcher's `(FetchOffset, LastFetchedEpoch)` against the
/// leader's log (Kafka's `ReplicatedLog.validateOffsetAndEpoch`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValidatedOffset {
    /// The fetcher's log matches ours up to `offset`: send records from there.
    Valid(OffsetAndEpoch),
    /// The fetcher's log diverges: it must truncate to at most this end offset of this epoch.
    Diverging(OffsetAndEpoch),
    /// The offset is below the log start: the fetcher must load this snapshot (KIP-630).
    Snapshot(OffsetAndEpoch),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogState {
    log_start_offset: u64,
    log_end_offset: u64,
    /// `(epoch, start_offset)`, strictly increasing in both.
    epoch_cache: Vec<OffsetAndEpoch>,
    /// Everything below this offset is fsynced.
    durable_end_offset: u64,
    /// Bumped on every truncation, so a flush issued before a truncation can never be taken as
    /// covering records appended after it (order completions by identity).
    generation: u64,
    high_watermark: u64,
    /// The newest snapshot the state machine finished (KIP-630), whether or not the log
    /// start has moved to it yet.
    latest_snapshot_id: Option<OffsetAndEpoch>,
    /// The snapshot the log starts at: `Some` exactly when the log start has been advanced
    /// (a log start offset above 0 always has a snapshot at it).
    log_start_snapshot_id: Option<OffsetAndEpoch>,
}

impl LogState {
    pub fn new() -> Self {
        Self {
            log_start_offset: 0,
            log_end_offset: 0,
            epoch_cache: Vec::new(),
            durable_end_offset: 0,
            generation: 0,
            high_watermark: 0,
            latest_snapshot_id: None,
            log_start_snapshot_id: None,
        }
    }

    /// Rebuilds the state from what the host recovered; everything recovered is durable.
    pub fn recovered(state: &RecoveredState) -> Result<Self, RaftError> {
        if state.log_start_offset > state.log_end_offset {
            return Err(RaftError::InvalidRecoveredState(
                "log start offset above log end offset",
            ));
        }
        for pair in state.epoch_cache.windows(2) {
            if pair[0].epoch >= pair[1].epoch || pair[0].offset > pair[1].offset {
                return Err(RaftError::InvalidRecoveredState(
                    "epoch cache not increasing",
                ));
            }
        }
        if state
            .epoch_cache
            .last()
            .is_some_and(|last| last.offset > state.log_end_offset)
        {
            return Err(RaftError::InvalidRecoveredState(
                "epoch starts past the log end",
            ));
        }
        Ok(Self {
            log_start_offset: state.log_start_offset,
            log_end_offset: state.log_end_offset,
            epoch_cache: state.epoch_cache.clone(),
            durable_end_offset: state.log_end_offset,
            generation: 0,
            high_watermark: state.log_start_offset,
            latest_snapshot_id: None,
            log_start_snapshot_id: None,
        })
    }

    /// Like [`LogState::recovered`], with the recovered snapshots: the one at the log start
    /// anchors epoch checks there, the latest is what a fetch below the start is told to load,
    /// and committed data reaches at least its end (the high-watermark starts there).
    pub fn recovered_with_snapshots(
        state: &RecoveredState,
        snapshots: RecoveredSnapshots,
    ) -> Result<Self, RaftError> {
        let mut log = Self::recovered(state)?;
        match snapshots.log_start_snapshot_id {
            Some(s) if s.offset != state.log_start_offset => {
                return Err(RaftError::InvalidRecoveredState(
                    "the log start snapshot does not end at the log start offset",
                ));
            }
            None if state.log_start_offset > 0 => {
                return Err(RaftError::InvalidRecoveredState(
                    "a log starting above 0 needs the snapshot at its start",
                ));
            }
            _ => {}
        }
        let latest = snapshots
            .latest_snapshot_id
            .or(snapshots.log_start_snapshot_id);
        if let Some(latest) = latest {
            if latest.offset > state.log_end_offset {
                return Err(RaftError::InvalidRecoveredState(
                    "the latest snapshot ends past the log end",
                ));
            }
            if latest.offset < state.log_start_offset {
                return Err(RaftError::InvalidRecoveredState(
                    "the latest snapshot ends below the log start",
                ));
            }
            log.high_watermark = log.high_watermark.max(latest.offset);
        }
        log.log_start_snapshot_id = snapshots.log_start_snapshot_id;
        log.latest_snapshot_id = latest;
        Ok(log)
    }

    pub fn log_start_offset(&self) -> u64 {
        self.log_start_offset
    }
    pub fn log_end_offset(&self) -> u64 {
        self.log_end_offset
    }
    pub fn durable_end_offset(&self) -> u64 {
        self.durable_end_offset
    }
    pub fn generation(&self) -> u64 {
        self.generation
    }
    pub fn high_watermark(&self) -> u64 {
        self.high_watermark
    }
    pub fn epoch_cache(&self) -> &[OffsetAndEpoch] {
        &self.epoch_cache
    }

    /// The newest snapshot the state machine reported written.
    pub fn latest_snapshot_id(&self) -> Option<OffsetAndEpoch> {
        self.latest_snapshot_id
    }
    /// The snapshot at the log start (`None` while the log starts at 0).
    pub fn log_start_snapshot_id(&self) -> Option<OffsetAndEpoch> {
        self.log_start_snapshot_id
    }

    /// The epoch of the last record in the log; for a log emptied up to its start, the epoch
    /// of the snapshot there (0 for an empty log from 0).
    pub fn last_fetched_epoch(&self) -> Epoch {
        self.epoch_cache
            .last()
            .map_or(self.log_start_snapshot_id.map_or(0, |s| s.epoch), |e| {
                e.epoch
            })
    }

    /// The log's end as `(LEO, last epoch)`, the key a voter compares in a vote.
    pub fn end_offset_and_epoch(&self) -> OffsetAndEpoch {
        OffsetAndEpoch::new(self.log_end_offset, self.last_fetched_epoch())
    }

    /// The end offset of the largest epoch `<= epoch` we hold, with that epoch. For an epoch
    /// below every cached one, the log start with the epoch of the snapshot there (Kafka's
    /// `KafkaMetadataLog.endOffsetForEpoch` override), or epoch 0 from a log starting at 0.
    pub fn end_offset_for_epoch(&self, epoch: Epoch) -> OffsetAndEpoch {
        let index = self.epoch_cache.partition_point(|e| e.epoch <= epoch);
        if index == 0 {
            let start_epoch = match self.log_start_snapshot_id {
                Some(s) if s.epoch <= epoch => s.epoch,
                _ => 0,
            };
            return OffsetAndEpoch::new(self.log_start_offset, start_epoch);
        }
        let found = self.epoch_cache[index - 1];
        let end = self
            .epoch_cache
            .get(index)
            .map_or(self.log_end_offset, |next| next.offset);
        OffsetAndEpoch::new(end, found.epoch)
    }

    /// Checks a fetcher's position against our log. Pure; table-tested below.
    pub fn validate_offset_and_epoch(&self, offset: u64, epoch: Epoch) -> ValidatedOffset {
        if self.log_start_offset == 0 && offset == 0 {
            return ValidatedOffset::Valid(OffsetAndEpoch::new(0, 0));
        }
        // KIP-630: a position below the log start (or at it in another epoch than the
        // snapshot there, or in an epoch older than that snapshot's) cannot be checked
        // against records we no longer hold: the answer is the latest snapshot id (Kafka's
        // `ReplicatedLog.validateOffsetAndEpoch`).
        if let Some(start) = self.log_start_snapshot_id
            && (offset < self.log_start_offset
                || (offset == self.log_start_offset && epoch != start.epoch)
                || epoch < start.epoch)
        {
            return ValidatedOffset::Snapshot(self.latest_snapshot_id.unwrap_or(start));
        }
        let end = self.end_offset_for_epoch(epoch);
        if end.epoch != epoch || end.offset < offset {
            if end.offset < self.log_start_offset
                && let Some(start) = self.log_start_snapshot_id
            {
                // A divergence below the log start: only a snapshot can repair it.
                return ValidatedOffset::Snapshot(self.latest_snapshot_id.unwrap_or(start));
            }
            ValidatedOffset::Diverging(end)
        } else {
            ValidatedOffset::Valid(OffsetAndEpoch::new(offset, epoch))
        }
    }

    /// The state machine finished a snapshot. Returns whether it is newer than the latest one
    /// known (an older or equal one changes nothing).
    pub(crate) fn on_snapshot_written(&mut self, snapshot_id: OffsetAndEpoch) -> bool {
        if self
            .latest_snapshot_id
            .is_some_and(|latest| latest.offset >= snapshot_id.offset)
        {
            return false;
        }
        self.latest_snapshot_id = Some(snapshot_id);
        true
    }

    /// Drops the records below `snapshot_id.offset`: the log now starts at that snapshot.
    /// Only committed records may go, and the start never moves back.
    pub(crate) fn advance_log_start_offset(&mut self, snapshot_id: OffsetAndEpoch) {
        let offset = snapshot_id.offset;
        assert!(
            offset > self.log_start_offset && offset <= self.high_watermark,
            "log start {} may move only forward to committed offsets, not to {offset} (hw {})",
            self.log_start_offset,
            self.high_watermark
        );
        // Kafka's LeaderEpochFileCache.truncateFromStart: the epoch covering the new start
        // keeps an entry starting there, as long as records remain.
        let covering = self
            .epoch_cache
            .iter()
            .rev()
            .find(|e| e.offset <= offset)
            .copied();
        self.epoch_cache.retain(|e| e.offset >= offset);
        if let Some(covering) = covering
            && offset < self.log_end_offset
            && self.epoch_cache.first().is_none_or(|e| e.offset > offset)
        {
            self.epoch_cache
                .insert(0, OffsetAndEpoch::new(offset, covering.epoch));
        }
        self.log_start_offset = offset;
        self.log_start_snapshot_id = Some(snapshot_id);
    }

    /// KIP-630: a fetched snapshot was installed: the log is truncated fully and starts (and
    /// ends) at its end offset; everything below is committed, so the high-watermark is at
    /// least there. The log never had to hold those records: loading a snapshot is how a
    /// replica learns them.
    pub(crate) fn install_snapshot(&mut self, snapshot_id: OffsetAndEpoch) {
        let offset = snapshot_id.offset;
        assert!(
            offset >= self.high_watermark,
            "installing snapshot {snapshot_id:?} below the high-watermark {} would move committed state back",
            self.high_watermark
        );
        self.log_start_offset = offset;
        self.log_end_offset = offset;
        self.durable_end_offset = offset;
        self.high_watermark = offset;
        self.epoch_cache.clear();
        self.generation += 1;
        self.log_start_snapshot_id = Some(snapshot_id);
        if self
            .latest_snapshot_id
            .is_none_or(|latest| latest.offset <= offset)
        {
            self.latest_snapshot_id = Some(snapshot_id);
        }
    }

    /// Records a batch appended at the end. Batches must be contiguous and epochs
    /// non-decreasing.
    pub(crate) fn append(&mut self, base_offset: u64, last_offset: u64, epoch: Epoch) {
        assert_eq!(
            base_offset, self.log_end_offset,
            "append must continue the log"
        );
        assert!(last_offset >= base_offset);
        match self.epoch_cache.last() {
            Some(last) if last.epoch == epoch => {}
            Some(last) => {
                assert!(
                    epoch > last.epoch,
                    "epoch {epoch} appended after {}",
                    last.epoch
                );
                self.epoch_cache
                    .push(OffsetAndEpoch::new(base_offset, epoch));
            }
            None => self
                .epoch_cache
                .push(OffsetAndEpoch::new(base_offset, epoch)),
        }
        self.log_end_offset = last_offset + 1;
    }

    /// Drops everything at and above `offset`. Refuses loudly to cut committed records: a
    /// replica that forgets committed data breaks the quorum's safety.
    pub(crate) fn truncate_to(&mut self, offset: u64, allow_below_high_watermark: bool) {
        assert!(
            allow_below_high_watermark || offset >= self.high_watermark,
            "refusing to truncate to {offset}, below the high-watermark {}",
            self.high_watermark
        );
        assert!(offset <= self.log_end_offset);
        self.log_end_offset = offset;
        self.epoch_cache.retain(|e| e.offset < offset);
        self.durable_end_offset = self.durable_end_offset.min(offset);
        self.high_watermark = self.high_watermark.min(offset);
        self.generation += 1;
    }

    /// A flush of `generation` reached `end_offset`. Returns whether the durable offset moved.
    pub(crate) fn on_flushed(&mut self, generation: u64, end_offset: u64) -> bool {
        if generation != self.generation {
            return false;
        }
        let new = end_offset.min(self.log_end_offset);
        if new > self.durable_end_offset {
            self.durable_end_offset = new;
            true
        } else {
            false
        }
    }

    /// Moves the high-watermark forward (never back). Returns whether it moved.
    pub(crate) fn advance_high_watermark(&mut self, offset: u64) -> bool {
        assert!(
            offset <= self.log_end_offset,
            "high-watermark {offset} past the log end {}",
            self.log_end_offset
        );
        if offset > self.high_watermark {
            self.high_watermark = offset;
            true
        } else {
            false
        }
    }
}

impl Default for LogState {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Log: epoch 1 at [0, 3), epoch 3 at [3, 7), epoch 4 at [7, 10).
    fn sample() -> LogState {
        let mut log = LogState::new();
        log.append(0, 2, 1);
        log.append(3, 6, 3);
        log.append(7, 9, 4);
        log
    }

    #[test]
    fn validate_offset_and_epoch_table() {
        let log = sample();
        let v = |o, e| ValidatedOffset::Valid(OffsetAndEpoch::new(o, e));
        let d = |o, e| ValidatedOffset::Diverging(OffsetAndEpoch::new(o, e));
        let table = [
            ((0, 0), v(0, 0)),   // empty fetcher
            ((3, 1), v(3, 1)),   // exactly at the end of epoch 1
            ((2, 1), v(2, 1)),   // inside epoch 1
            ((4, 1), d(3, 1)),   // past the end of epoch 1
            ((5, 2), d(3, 1)),   // epoch 2 unknown: largest below is 1, ending at 3
            ((10, 4), v(10, 4)), // fully caught up
            ((11, 4), d(10, 4)), // fetcher longer than the leader in the same epoch
            ((12, 5), d(10, 4)), // fetcher has a newer epoch (stale leader)
            ((1, 0), d(0, 0)),   // epoch below every cached epoch
        ];
        for ((offset, epoch), expected) in table {
            assert_eq!(
                log.validate_offset_and_epoch(offset, epoch),
                expected,
                "({offset}, {epoch})"
            );
        }
    }

    #[test]
    fn validation_below_and_at_the_log_start_answers_the_snapshot() {
        // Start moved to 5 (snapshot (5, 3)); a newer snapshot (8, 4) exists.
        let mut log = sample();
        log.advance_high_watermark(9);
        assert!(log.on_snapshot_written(OffsetAndEpoch::new(5, 3)));
        log.advance_log_start_offset(OffsetAndEpoch::new(5, 3));
        assert!(log.on_snapshot_written(OffsetAndEpoch::new(8, 4)));
        assert!(!log.on_snapshot_written(OffsetAndEpoch::new(6, 3)));
        assert_eq!(
            log.epoch_cache(),
            &[OffsetAndEpoch::new(5, 3), OffsetAndEpoch::new(7, 4)]
        );
        let v = |o, e| ValidatedOffset::Valid(OffsetAndEpoch::new(o, e));
        let d = |o, e| ValidatedOffset::Diverging(OffsetAndEpoch::new(o, e));
        let s = ValidatedOffset::Snapshot(OffsetAndEpoch::new(8, 4));
        let table = [
            ((0, 0), s),       // empty fetcher
            ((4, 3), s),       // below the start
            ((5, 1), s),       // at the start in another epoch
            ((6, 1), s),       // epoch older than the snapshot at the start
            ((5, 3), v(5, 3)), // exactly at the start snapshot
            ((7, 3), v(7, 3)), // end of epoch 3
            ((8, 3), d(7, 3)), // past the end of epoch 3
            ((10, 4), v(10, 4)),
        ];
        for ((offset, epoch), expected) in table {
            assert_eq!(
                log.validate_offset_and_epoch(offset, epoch),
                expected,
                "({offset}, {epoch})"
            );
        }
        // A start at an epoch boundary keeps only the later epochs; the last fetched epoch of
        // a log emptied to its start is the snapshot's.
        let mut log = sample();
        log.advance_high_watermark(10);
        log.advance_log_start_offset(OffsetAndEpoch::new(7, 3));
        assert_eq!(log.epoch_cache(), &[OffsetAndEpoch::new(7, 4)]);
        assert_eq!(log.end_offset_for_epoch(3), OffsetAndEpoch::new(7, 3));
        let mut log = sample();
        log.advance_high_watermark(10);
        log.advance_log_start_offset(OffsetAndEpoch::new(10, 4));
        assert_eq!(log.epoch_cache(), &[]);
        assert_eq!(log.end_offset_and_epoch(), OffsetAndEpoch::new(10, 4));
        assert_eq!(log.validate_offset_and_epoch(10, 4), v(10, 4));
    }

    #[test]
    fn truncation_cuts_epochs_and_bumps_generation() {
        let mut log = sample();
        log.on_flushed(0, 10);
        log.truncate_to(5, false);
        assert_eq!(log.log_end_offset(), 5);
        assert_eq!(log.durable_end_offset(), 5);
        assert_eq!(
            log.epoch_cache(),
            &[OffsetAndEpoch::new(0, 1), OffsetAndEpoch::new(3, 3)]
        );
        assert_eq!(log.generation(), 1);
        // A flush from before the truncation no longer counts.
        log.append(5, 8, 5);
        assert!(!log.on_flushed(0, 9));
        assert!(log.on_flushed(1, 9));
        assert_eq!(log.durable_end_offset(), 9);
    }

    #[test]
    #[should_panic(expected = "below the high-watermark")]
    fn truncation_below_high_watermark_is_refused() {
        let mut log = sample();
        log.advance_high_watermark(8);
        log.truncate_to(7, false);
    }

    #[test]
    fn high_watermark_never_moves_back() {
        let mut log = sample();
        assert!(log.advance_high_watermark(5));
        assert!(!log.advance_high_watermark(4));
        assert_eq!(log.high_watermark(), 5);
    }
}
