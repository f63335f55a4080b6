//! KIP-630 on the Raft core: which snapshot the state machine holds, and when the log start
//! offset (LogBeginOffset) may move to it.
//!
//! Leader: to the latest snapshot's end offset once every live replica (one that fetched
//! within `fetch_timeout_ms`) has fetched past it, or once the snapshot is
//! `max_replication_lag_ms` old. Follower or observer: to its own latest snapshot's end offset
//! once the leader's log start (from Fetch responses) has reached it. KIP-630 lets a follower
//! go to the leader's log start whenever its snapshot covers it; stopping at the snapshot
//! itself keeps every log start above 0 on a snapshot, which the epoch check at the log start
//! (`validate_offset_and_epoch`) relies on.

use super::{Out, Raft};
use crate::error::RaftError;
use crate::mutation::Mutation;
use crate::quorum::EpochState;
use crate::types::OffsetAndEpoch;
use crate::work::Work;

impl Raft {
    /// The state machine finished writing the snapshot `snapshot_id` (its end offset,
    /// exclusive, and the epoch of the record before it), which must be committed: at or below
    /// the high-watermark. The log start may advance to it now or later (see the module doc).
    pub fn on_snapshot_written(
        &mut self,
        now_ms: u64,
        snapshot_id: OffsetAndEpoch,
    ) -> Result<Vec<Work>, RaftError> {
        self.advance_clock(now_ms);
        if snapshot_id.offset > self.log.high_watermark() {
            return Err(RaftError::SnapshotPastHighWatermark {
                snapshot_end_offset: snapshot_id.offset,
                high_watermark: self.log.high_watermark(),
            });
        }
        let mut out = self.new_out();
        if self.log.on_snapshot_written(snapshot_id) {
            self.latest_snapshot_written_ms = self.now_ms;
        }
        self.maybe_advance_log_start_offset(&mut out);
        self.maybe_send_fetch(&mut out);
        Ok(out.finish())
    }

    /// The snapshot the log start may move to now, if any.
    fn log_start_target(&self) -> Option<OffsetAndEpoch> {
        let latest = self.log.latest_snapshot_id()?;
        if latest.offset <= self.log.log_start_offset() || latest.offset > self.log.high_watermark()
        {
            return None;
        }
        match &self.state {
            EpochState::Leader(_)
                if self.config.mutated(Mutation::LogStartWithoutSnapshot)
                    && self.log.high_watermark() > latest.offset =>
            {
                // Broken on purpose: the log start goes past the snapshot, to the
                // high-watermark, where no snapshot is.
                Some(OffsetAndEpoch::new(self.log.high_watermark(), latest.epoch))
            }
            EpochState::Leader(leader) => {
                if self.now_ms >= self.log_start_lag_deadline_ms() {
                    return Some(latest);
                }
                let live_since = self.now_ms.saturating_sub(self.config.fetch_timeout_ms);
                let local = self.config.node_id;
                let all_past = leader
                    .voters
                    .iter()
                    .chain(leader.observers.iter())
                    .filter(|(id, p)| {
                        **id != local && p.last_fetch_ms.is_some_and(|t| t >= live_since)
                    })
                    .all(|(_, p)| p.end_offset.is_some_and(|end| end >= latest.offset));
                all_past.then_some(latest)
            }
            _ => (self.leader_log_start_offset >= latest.offset).then_some(latest),
        }
    }

    /// When the leader advances its log start to the latest snapshot regardless of lagging
    /// replicas.
    pub(crate) fn log_start_lag_deadline_ms(&self) -> u64 {
        self.latest_snapshot_written_ms
            .saturating_add(self.config.max_replication_lag_ms)
    }

    /// Whether the leader still waits to advance its log start (for its next deadline).
    pub(crate) fn log_start_advance_pending(&self) -> bool {
        self.log
            .latest_snapshot_id()
            .is_some_and(|s| s.offset > self.log.log_start_offset())
    }

    /// Advances the log start to the latest snapshot when the rules allow it.
    pub(crate) fn maybe_advance_log_start_offset(&mut self, out: &mut Out) {
        let Some(snapshot_id) = self.log_start_target() else {
            return;
        };
        self.log.advance_log_start_offset(snapshot_id);
        self.voters.trim_before(snapshot_id.offset);
        out.push(Work::AdvanceLogStartOffset {
            offset: snapshot_id.offset,
        });
        out.push(Work::DeleteSnapshotsBefore { snapshot_id });
    }
}
