//! A replica whose log was repaired at start: the host found records below the durable mark
//! that no longer read back (a flipped bit, a bad sector), set the damaged segment and every
//! later one aside, and opened the log without them (replication/src/host/store.rs,
//! `open_repairing`). The log may now hold less than this replica acknowledged, so a record
//! committed with its acknowledgement may live on fewer replicas than a majority.
//!
//! Raft's election safety rests on every voter's log holding what it acknowledged. A repairing
//! replica therefore, until it has caught up:
//!
//! | what | rule |
//! | --- | --- |
//! | a Vote or pre-vote | never granted (its log cannot say whether the candidate is up to date) |
//! | its own election timer | restarts instead of standing: it waits for a leader's BeginQuorumEpoch, or keeps fetching from the one it follows |
//! | fetching | as any follower: records, snapshots, truncation |
//!
//! Why that is enough: a leader needs a majority's grants; a record committed on a majority M
//! that included this replica is still on every other member of M, and any majority of grants
//! that excludes this replica meets M at one of them, which grants only to a candidate whose log
//! holds the record (KIP-595's up-to-date check). A lone voter cannot be repaired (no peer holds
//! the records): the host refuses the damage instead.
//!
//! **Caught up** means durable up to a high-watermark its leader reported after that leader had
//! committed a record of its own epoch (a new leader's high-watermark is only known then, and
//! from then on it covers every record committed in any earlier epoch). The host then removes
//! its `repair-pending` marker; a restart before that keeps the caution, which is safe.

use super::Raft;
use crate::quorum::EpochState;

impl Raft {
    /// Whether the log was repaired at start and has not caught up with a leader yet.
    pub fn repair_pending(&self) -> bool {
        self.repair_pending
    }

    /// Instead of standing: the timer that expired starts again.
    pub(crate) fn postpone_standing(&mut self) {
        let next = self.now_ms + self.random_election_timeout_ms();
        match &mut self.state {
            EpochState::Unattached(u) => u.election_deadline_ms = Some(next),
            EpochState::Voted(v) => v.election_deadline_ms = next,
            EpochState::Follower(f) => f.fetch_timeout_deadline_ms = next,
            EpochState::Candidate(c) => c.backoff_until_ms = Some(next),
            EpochState::Resigned(r) => r.election_deadline_ms = next,
            EpochState::Prospective(p) => p.election_deadline_ms = next,
            EpochState::Leader(_) => {}
        }
    }

    /// A successful Fetch response from the leader of our epoch: its high-watermark becomes
    /// the repair's target once that leader has committed in its own epoch (module doc).
    pub(crate) fn note_repair_progress(&mut self, leader_high_watermark: u64) {
        if !self.repair_pending {
            return;
        }
        if self.repair_target.is_none() {
            let epoch = self.epoch();
            let epoch_start = self
                .log
                .epoch_cache()
                .iter()
                .find(|e| e.epoch == epoch)
                .map(|e| e.offset);
            if epoch_start.is_some_and(|start| leader_high_watermark > start) {
                self.repair_target = Some(leader_high_watermark);
            }
        }
        self.maybe_finish_repair();
    }

    /// Ends the repair once the log is durable up to its target.
    pub(crate) fn maybe_finish_repair(&mut self) {
        if let Some(target) = self.repair_target
            && self.repair_pending
            && self.log.durable_end_offset() >= target
        {
            tracing::info!(
                node = self.config.node_id,
                durable_end_offset = self.log.durable_end_offset(),
                target,
                "repaired log caught up with the leader: votes and elections again"
            );
            self.repair_pending = false;
            self.repair_target = None;
        }
    }
}
