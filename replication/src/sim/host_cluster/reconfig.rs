//! KIP-595 quorum reassignment (shipped as KIP-853) through the production host: in a reconfig
//! run, every 150–600 ms of the fault phase the leader of a random partition adds a caught-up
//! non-voter (`Host::add_voter`), removes a voter, itself included (`Host::remove_voter`), or
//! replaces one (an add now, the matching remove once the add is committed; the remove is also
//! tried at once, and must be refused while the add is in flight), keeping 2–5 voters, under
//! every other fault class.
//!
//! The checks ([`super::checks`]): consecutive voter sets in any log differ by one voter at
//! most; a leader appends a voter set only once the previous one in its log is committed; a
//! leader's high-watermark is durable on a majority of the voter set in force in its own log;
//! only a node that was ever a voter leads, and one that removed itself leads only until the
//! removal is committed; nodes that were ever voters are never wiped.

use std::collections::BTreeMap;

use super::{Cluster, EventKind};
use crate::error::RaftError;
use crate::host::HostError;
use crate::raft::AppendResult;
use crate::types::{Epoch, NodeId, PartitionId};
use crate::voters::VoterInfo;

/// The voter set sizes a reconfiguration run moves between.
const VOTERS_MIN: usize = 2;
const VOTERS_MAX: usize = 5;

impl Cluster {
    pub(super) fn schedule_voter_change(&mut self) {
        let next = self.now_ms + 150 + self.rng.below(450);
        self.schedule(next, EventKind::VoterChange);
    }

    /// One voter change on a random partition's leader (if it is up and not paused).
    pub(super) fn change_voters(&mut self) {
        let partition = self.rng.below(u64::from(self.partitions)) as PartitionId;
        let Some((leader, _)) = self.current_leader(partition) else {
            self.count("voter-change-without-leader");
            return;
        };
        if self.nodes[&leader].paused_until_ms > self.now_ms {
            return;
        }
        let Some(current) = self
            .host_mut(leader)
            .raft(partition)
            .map(|raft| raft.voter_set().clone())
        else {
            return;
        };
        // A replacement's second half: remove the voter the earlier add replaces.
        if let Some(out) = self.pending_replace.get(&partition).copied() {
            if !current.contains(out) || current.len() <= VOTERS_MIN {
                self.pending_replace.remove(&partition);
            } else {
                if self.try_remove(leader, partition, out, "voter-replace") {
                    self.pending_replace.remove(&partition);
                }
                return;
            }
        }
        let non_voters: Vec<NodeId> = self
            .node_ids
            .iter()
            .copied()
            .filter(|id| !current.contains(*id))
            .collect();
        let voters = current.ids();
        let action = self.rng.below(3);
        let can_add = current.len() < VOTERS_MAX && !non_voters.is_empty();
        let can_remove = current.len() > VOTERS_MIN;
        if (action == 0 || !can_remove) && can_add {
            let new = non_voters[self.rng.below(non_voters.len() as u64) as usize];
            self.try_add(leader, partition, new, "voter-add");
        } else if can_remove && (action == 1 || !can_add) {
            let out = voters[self.rng.below(voters.len() as u64) as usize];
            self.try_remove(leader, partition, out, "voter-remove");
        } else if can_add {
            let new = non_voters[self.rng.below(non_voters.len() as u64) as usize];
            let out = voters[self.rng.below(voters.len() as u64) as usize];
            if self.try_add(leader, partition, new, "voter-replace-add") {
                self.pending_replace.insert(partition, out);
                if self.try_remove(leader, partition, out, "voter-replace") {
                    self.pending_replace.remove(&partition);
                }
            }
        }
    }

    fn try_add(
        &mut self,
        leader: NodeId,
        partition: PartitionId,
        id: NodeId,
        counter: &'static str,
    ) -> bool {
        let now = self.now_ms;
        let result = self
            .host_mut(leader)
            .add_voter(now, partition, id, VoterInfo::default());
        self.voter_change_done(leader, partition, id, result, counter)
    }

    fn try_remove(
        &mut self,
        leader: NodeId,
        partition: PartitionId,
        id: NodeId,
        counter: &'static str,
    ) -> bool {
        let now = self.now_ms;
        let result = self.host_mut(leader).remove_voter(now, partition, id);
        self.voter_change_done(leader, partition, id, result, counter)
    }

    /// The host's answer to a voter change: appended (the runtime's loop turn follows), or
    /// refused as KIP-853 refuses (a change in flight, the leader's epoch not committed yet, the
    /// new voter not caught up). Any other refusal is a violation.
    fn voter_change_done(
        &mut self,
        leader: NodeId,
        partition: PartitionId,
        id: NodeId,
        result: Result<AppendResult, HostError>,
        counter: &'static str,
    ) -> bool {
        match result {
            Ok(appended) => {
                self.trace_event(14, leader, appended.base_offset ^ (id as u64) << 40);
                self.count(counter);
                self.settle(leader);
                true
            }
            Err(HostError::Raft(
                RaftError::VoterChangeInFlight { .. } | RaftError::LeaderEpochNotCommitted { .. },
            )) => {
                self.count("voter-change-in-flight-refused");
                false
            }
            Err(HostError::Raft(RaftError::VoterNotCaughtUp { .. })) => {
                self.count("voter-not-caught-up-refused");
                false
            }
            Err(error) => {
                self.fail(format!(
                    "node {leader}/{partition}: voter change of {id} failed: {error}"
                ));
                false
            }
        }
    }

    /// KIP-853: a leader that removed itself keeps leading (without counting itself) only
    /// until that removal is committed; then it resigns.
    pub(super) fn check_removed_leader(
        &mut self,
        node: NodeId,
        partition: PartitionId,
        epoch: Epoch,
        high_watermark: u64,
    ) {
        if let Some(removed_at) = self.checks.removal_of(node, partition)
            && removed_at < high_watermark
        {
            self.fail(format!(
                "partition {partition}: node {node} still leads epoch {epoch} although the voter set without it at {removed_at} is committed (high-watermark {high_watermark})"
            ));
        }
    }

    /// A leader's high-watermark moved: it must be durable on a majority of the voter set in
    /// force in its log.
    pub(super) fn check_commit_durable(
        &mut self,
        node: NodeId,
        partition: PartitionId,
        high_watermark: u64,
    ) {
        let is_leader = self.nodes[&node]
            .host
            .as_ref()
            .and_then(|h| h.raft(partition))
            .is_some_and(|raft| raft.is_leader());
        if !is_leader {
            return;
        }
        let live_durable_ends: BTreeMap<NodeId, u64> = self
            .nodes
            .values()
            .filter_map(|n| {
                let raft = n.host.as_ref()?.raft(partition)?;
                Some((n.id, raft.log().durable_end_offset()))
            })
            .collect();
        self.checks
            .on_leader_high_watermark(node, partition, high_watermark, &live_durable_ends);
    }
}
