//! The cluster-wide checks run by the event loop: which node leads a partition, the
//! invariants over the replicas' states after every event (epochs, one leader per epoch, a
//! non-voter never stands), liveness (every partition converged on one leader's log) and the
//! final logs against the committed log.

use super::Cluster;
use crate::quorum::EpochState;
use crate::types::{NodeId, PartitionId};

impl Cluster {
    /// The leader of `partition` in the highest epoch, if any.
    pub(super) fn current_leader(&self, partition: PartitionId) -> Option<NodeId> {
        self.nodes
            .values()
            .filter(|n| n.partition == partition)
            .filter_map(|n| {
                n.raft
                    .as_ref()
                    .filter(|r| r.is_leader())
                    .map(|r| (r.epoch(), n.id))
            })
            .max()
            .map(|(_, id)| id)
    }

    /// Invariants over the replicas' states, after every event.
    pub(super) fn check_states(&mut self) {
        let mut leaders = Vec::new();
        let mut failure = None;
        for n in self.nodes.values_mut() {
            let Some(raft) = &n.raft else { continue };
            let epoch = raft.epoch();
            if epoch < n.epoch_floor {
                failure.get_or_insert(format!(
                    "node {}/{}: epoch moved back from {} to {epoch}",
                    n.id, n.partition, n.epoch_floor
                ));
            }
            n.epoch_floor = epoch;
            if matches!(raft.state(), EpochState::Leader(_)) {
                leaders.push((n.partition, n.id, epoch));
            }
            // Non-voters (by the voter set in force in their own log) never stand; a leader that
            // removed itself leads only until the removal is committed. (They may vote,
            // KIP-853: their log may not hold their addition yet.)
            let voter = raft.voter_set().contains(n.id);
            let removal_pending = raft
                .voter_history()
                .latest_offset()
                .is_some_and(|offset| offset >= raft.high_watermark());
            let leading_removed = matches!(raft.state(), EpochState::Leader(_)) && !removal_pending;
            if !voter
                && (leading_removed
                    || matches!(
                        raft.state(),
                        EpochState::Prospective(_) | EpochState::Candidate(_)
                    ))
            {
                failure.get_or_insert(format!(
                    "observer {}/{} is {}",
                    n.id,
                    n.partition,
                    raft.state().name()
                ));
            }
        }
        if let Some(failure) = failure {
            self.fail(failure);
        }
        for (partition, id, epoch) in leaders {
            self.checkers[partition as usize].on_leader(id, epoch);
        }
        self.check_snapshot_offsets();
    }

    /// Liveness: in every partition a leader, every replica alive with the leader's log and
    /// high-watermark.
    pub(super) fn converged(&self) -> bool {
        (0..self.partitions).all(|partition| {
            let Some(leader) = self.current_leader(partition) else {
                return false;
            };
            let leader = &self.nodes[&(leader, partition)];
            let end = leader.store.end_offset();
            let epoch = leader.raft.as_ref().map_or(0, |l| l.epoch());
            self.nodes
                .values()
                .filter(|n| n.partition == partition)
                .all(|n| {
                    n.raft
                        .as_ref()
                        .is_some_and(|r| r.high_watermark() == end && r.epoch() == epoch)
                        && n.store.end_offset() == end
                })
        })
    }

    pub(super) fn check_final_logs(&mut self) {
        let mut failure = None;
        for n in self.nodes.values() {
            let committed = &self.checkers[n.partition as usize].committed;
            let start = committed.partition_point(|b| b.base_offset < n.store.log_start_offset);
            if n.store.batches[..] != committed[start..] {
                failure.get_or_insert(format!(
                    "node {}/{}: final log differs from the committed log",
                    n.id, n.partition
                ));
            }
        }
        if let Some(failure) = failure {
            self.fail(failure);
        }
    }
}
