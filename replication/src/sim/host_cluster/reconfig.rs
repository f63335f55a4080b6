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
//! removal is committed; nodes that were ever voters are never wiped, except (KIP-853) a voter
//! recorded with its disk, whose disk may be replaced (`replaceable_voter_disks`): the replaced
//! voter is then removed first, and added again with its new disk once it caught up.

use std::collections::BTreeMap;

use super::{Cluster, EventKind};
use crate::error::RaftError;
use crate::host::HostError;
use crate::raft::AppendResult;
use crate::types::{Epoch, NodeId, PartitionId};
use crate::voters::{NO_DIRECTORY_ID, VoterInfo, VoterSet};

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
        // KIP-853: a voter whose disk was replaced counts for nothing until it is removed and
        // added again with its new disk (the add is a later random one, once it caught up).
        if let Some(replaced) = self.replaced_voter_in(&current)
            && current.len() > VOTERS_MIN
        {
            self.try_remove(leader, partition, replaced, "voter-replaced-disk-remove");
            return;
        }
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
        // KIP-853: the voter is added with its disk (AddRaftVoter's VoterDirectoryId), so a
        // replaced disk is told apart.
        let info = VoterInfo {
            directory_id: self.nodes[&id].quorum.directory_id,
            endpoints: Vec::new(),
        };
        let result = self.host_mut(leader).add_voter(now, partition, id, info);
        self.voter_change_done(leader, partition, id, result, counter)
    }

    /// A voter of `voters` whose recorded disk is not its disk any more (replaced).
    fn replaced_voter_in(&self, voters: &VoterSet) -> Option<NodeId> {
        voters.voters().iter().find_map(|(id, info)| {
            let disk = self.nodes.get(id)?.quorum.directory_id;
            (info.directory_id != NO_DIRECTORY_ID && info.directory_id != disk).then_some(*id)
        })
    }

    /// KIP-853: the voters whose disk may be replaced now, keeping every quorum able to commit
    /// and elect once the other faults heal: while every node is up (so every log's sets are
    /// seen), a node outside the bootstrap set (whose entries carry no directory id: a new disk
    /// would pass as the voter, Kafka's kraft.version 0), while no voter set in any log names a
    /// replaced disk, and every such set that
    /// names it has at least three voters (two of three stay valid until it is removed). And
    /// every partition's leaders have committed all it holds durably: a leader keeps counting
    /// what the old disk acknowledged (KIP-853 ignores the new disk's fetches, not the old
    /// one's progress), so a commit that still needed that copy would rest on a copy that is
    /// gone, a fault beyond what Raft tolerates (an acknowledged entry forgotten; seed 206 of
    /// the reconfig range, until this rule).
    pub(super) fn replaceable_voter_disks(&self) -> Vec<NodeId> {
        // Every set in force must be known, and a down node's is on its disk, out of sight:
        // with nodes 1-3 down (a power loss), node 4's disk was replaced while node 2's log
        // held {1, 4}, an uncommitted removal of itself, so the set lost one of two voters for
        // good (seed 180850 of `--reconfig --partitions 2 --observers 1`).
        if self.nodes.values().any(|n| n.host.is_none()) {
            return Vec::new();
        }
        let sets: Vec<VoterSet> = self
            .nodes
            .values()
            .filter_map(|n| n.host.as_ref())
            .flat_map(|host| {
                (0..self.partitions).filter_map(|p| host.raft(p).map(|r| r.voter_set().clone()))
            })
            .collect();
        if sets.iter().any(|set| self.replaced_voter_in(set).is_some()) {
            return Vec::new();
        }
        self.checks
            .ever_voters
            .iter()
            .copied()
            .filter(|id| !self.voter_ids.contains(id))
            .filter(|&id| self.acknowledged_all_committed(id))
            .filter(|&id| {
                sets.iter().all(|set| {
                    set.directory_id_of(id)
                        .is_none_or(|recorded| recorded != NO_DIRECTORY_ID && set.len() >= 3)
                })
            })
            .collect()
    }

    /// The durable log ends of node `id` summed over its partitions (0 while it is down).
    pub(super) fn durable_ends_total(&self, id: NodeId) -> u64 {
        self.nodes
            .get(&id)
            .and_then(|n| n.host.as_ref())
            .map_or(0, |host| {
                (0..self.partitions)
                    .filter_map(|p| host.raft(p).map(|r| r.log().durable_end_offset()))
                    .sum()
            })
    }

    /// Node `id` is up and, in every partition, every node that leads it has committed all
    /// `id` holds durably.
    fn acknowledged_all_committed(&self, id: NodeId) -> bool {
        let Some(host) = self.nodes.get(&id).and_then(|n| n.host.as_ref()) else {
            return false;
        };
        (0..self.partitions).all(|partition| {
            let Some(durable_end) = host.raft(partition).map(|r| r.log().durable_end_offset())
            else {
                return false;
            };
            self.nodes
                .values()
                .filter_map(|n| n.host.as_ref()?.raft(partition))
                .filter(|raft| raft.is_leader())
                .all(|leader| leader.high_watermark() >= durable_end)
        })
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
