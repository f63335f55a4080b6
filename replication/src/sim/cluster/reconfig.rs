//! KIP-595 quorum reassignment in the simulator (profile `reconfig`): the leader of a random
//! partition adds a caught-up non-voter, removes a voter (the leader itself included) or
//! replaces one (an add now, the matching remove once the add is committed), under every other
//! fault class; and the single-change invariants, checked on every append:
//!
//! - consecutive voter sets in a log differ by at most one voter (so any majority of one set
//!   intersects any majority of the next);
//! - a leader appends a voter set only once the previous one in its log is committed (below its
//!   high-watermark): one change in flight.
//!
//! At most one leader per epoch across configurations, and no committed entry lost while the set
//! changes, are the checker's invariants 1, 4 and 5; the leader's high-watermark is checked
//! against a majority of the voter set in force in its own log (invariant 3).

use super::{Cluster, EventKind, ReplicaKey};
use crate::error::RaftError;
use crate::types::{NodeId, OffsetAndEpoch, PartitionId};
use crate::voters::VoterSet;

/// The voter set sizes a reconfiguration run moves between.
const VOTERS_MIN: usize = 2;
const VOTERS_MAX: usize = 5;

impl Cluster {
    /// Every 150–600 ms of the fault phase: one voter change on a random partition's leader.
    pub(super) fn schedule_voter_change(&mut self) {
        let next = self.now_ms + 150 + self.rng.below(450);
        self.schedule(next, EventKind::VoterChange);
    }

    pub(super) fn change_voters(&mut self) {
        let partition = self.rng.below(u64::from(self.partitions)) as PartitionId;
        let Some(leader) = self.current_leader(partition) else {
            self.count("voter-change-without-leader");
            return;
        };
        let replica = (leader, partition);
        let current = self.nodes[&replica]
            .raft
            .as_ref()
            .expect("a leader is alive")
            .voter_set()
            .clone();
        // A replacement's second half: remove the voter the earlier add replaces.
        if let Some(out) = self.pending_replace.get(&partition).copied() {
            if !current.contains(out) || current.len() <= VOTERS_MIN {
                self.pending_replace.remove(&partition);
            } else if self.try_remove(replica, out, "voter-replace") {
                self.pending_replace.remove(&partition);
                return;
            } else {
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
            self.try_add(replica, new, "voter-add");
        } else if can_remove && (action == 1 || !can_add) {
            let out = voters[self.rng.below(voters.len() as u64) as usize];
            self.try_remove(replica, out, "voter-remove");
        } else if can_add {
            // Replace: add one now; remove another once the add is committed. The remove is
            // tried at once too: it must be refused while the add is in flight.
            let new = non_voters[self.rng.below(non_voters.len() as u64) as usize];
            let out = voters[self.rng.below(voters.len() as u64) as usize];
            if self.try_add(replica, new, "voter-replace-add") {
                self.pending_replace.insert(partition, out);
                if self.try_remove(replica, out, "voter-replace") {
                    self.pending_replace.remove(&partition);
                }
            }
        }
    }

    fn try_add(&mut self, replica: ReplicaKey, id: NodeId, counter: &'static str) -> bool {
        let now = self.now_ms;
        let raft = self.nodes.get_mut(&replica).and_then(|n| n.raft.as_mut());
        let result = raft.expect("a leader is alive").add_voter(now, id);
        self.voter_change_done(replica, id, result, counter)
    }

    fn try_remove(&mut self, replica: ReplicaKey, id: NodeId, counter: &'static str) -> bool {
        let now = self.now_ms;
        let raft = self.nodes.get_mut(&replica).and_then(|n| n.raft.as_mut());
        let result = raft.expect("a leader is alive").remove_voter(now, id);
        self.voter_change_done(replica, id, result, counter)
    }

    fn voter_change_done(
        &mut self,
        replica: ReplicaKey,
        id: NodeId,
        result: Result<(crate::raft::AppendResult, Vec<crate::work::Work>), RaftError>,
        counter: &'static str,
    ) -> bool {
        match result {
            Ok((appended, work)) => {
                self.trace_event(14, replica.0, appended.base_offset ^ (id as u64) << 40);
                self.count(counter);
                self.execute(replica, work);
                self.reschedule_tick(replica);
                true
            }
            Err(
                RaftError::VoterChangeInFlight { .. } | RaftError::LeaderEpochNotCommitted { .. },
            ) => {
                self.count("voter-change-in-flight-refused");
                false
            }
            Err(RaftError::VoterNotCaughtUp { .. }) => {
                self.count("voter-not-caught-up-refused");
                false
            }
            Err(e) => {
                self.fail(format!(
                    "node {replica:?}: voter change of {id} failed: {e}"
                ));
                false
            }
        }
    }

    /// The single-change invariants, after `replica` appended voter set records (those from
    /// index `first_new` of its store's records on).
    pub(super) fn check_voter_sets_appended(
        &mut self,
        replica: ReplicaKey,
        first_new: usize,
        as_leader: bool,
    ) {
        let bootstrap = VoterSet::from_ids(&self.voters).expect("valid bootstrap voters");
        let n = &self.nodes[&replica];
        let records = &n.store.voter_records;
        let mut failure = None;
        for index in first_new..records.len() {
            let (offset, voters) = &records[index];
            let previous = index.checked_sub(1).map(|i| &records[i]);
            let previous_set = previous.map_or(&bootstrap, |(_, v)| v);
            let difference = previous_set.id_difference(voters);
            if difference > 1 {
                failure = Some(format!(
                    "node {replica:?}: voter set {:?} at {offset} differs from the previous {:?} by {difference} voters",
                    voters.ids(),
                    previous_set.ids()
                ));
            }
            if as_leader
                && let Some((previous_offset, _)) = previous
                && *previous_offset >= n.high_watermark
            {
                failure = Some(format!(
                    "node {replica:?}: leader appended voter set {:?} at {offset} while the previous one at {previous_offset} is not committed (high-watermark {}): two changes in flight",
                    voters.ids(),
                    n.high_watermark
                ));
            }
            self.ever_voters.extend(voters.iter_ids());
        }
        if let Some(failure) = failure {
            self.checkers[replica.1 as usize]
                .violation
                .get_or_insert(failure);
        }
    }

    /// After a snapshot install: the core learns the voter set the snapshot holds.
    pub(super) fn report_snapshot_voters(
        &mut self,
        replica: ReplicaKey,
        snapshot_id: OffsetAndEpoch,
    ) {
        let now = self.now_ms;
        let n = self.nodes.get_mut(&replica).expect("replica exists");
        let voters = n
            .store
            .voter_records
            .last()
            .filter(|(offset, _)| *offset < snapshot_id.offset)
            .map(|(_, v)| v.clone());
        let Some(raft) = n.raft.as_mut() else { return };
        let work = raft.on_snapshot_installed(now, snapshot_id, voters);
        self.execute(replica, work);
    }
}
