//! The KIP-595/KIP-853 checks of voter changes, from the logs the hosts' outputs describe:
//!
//! - consecutive voter sets in any log differ by one voter at most (so every majority of one
//!   intersects every majority of the next);
//! - a leader appends a voter set only once the previous one in its log is committed (below
//!   its high-watermark): one change in flight;
//! - a leader's new high-watermark is durable on a majority of the voter set in force in its
//!   own log (a set is in force once appended, not once committed).

use std::collections::BTreeMap;

use super::{Batch, BatchKey, Checks, LogCopy};
use crate::records::{is_control_batch, voter_sets_in};
use crate::types::{NodeId, PartitionId};
use crate::voters::VoterSet;

impl Checks {
    /// The voter set in force in `node`'s log: its last VotersRecord, else the last committed
    /// one below its log start (a snapshot holds it), else the configured voters.
    pub fn voter_set_in_force(&self, node: NodeId, partition: PartitionId) -> VoterSet {
        if let Some((_, voters)) = self
            .voter_sets
            .get(&(node, partition))
            .and_then(|sets| sets.last())
        {
            return voters.clone();
        }
        let start = self.logs.get(&(node, partition)).map_or(0, |log| log.start);
        self.voters_below(partition, start)
    }

    /// Where `node`'s log removed `node` from the voter set in force: the offset of that set,
    /// if the set in force (in its log copy) does not hold it.
    pub fn removal_of(&self, node: NodeId, partition: PartitionId) -> Option<u64> {
        let (offset, voters) = self.voter_sets.get(&(node, partition))?.last()?;
        (!voters.contains(node)).then_some(*offset)
    }

    /// The voter set in force just below `offset` from the committed voter sets alone.
    fn voters_below(&self, partition: PartitionId, offset: u64) -> VoterSet {
        self.partitions[partition as usize]
            .committed_voters
            .range(..offset)
            .next_back()
            .map(|(_, voters)| voters.clone())
            .unwrap_or_else(|| self.bootstrap.clone().expect("bootstrap voters"))
    }

    /// `batch` was added to `node`'s log (at a leader when `as_leader`): the voter sets it
    /// holds are checked against the one before and recorded.
    pub(super) fn note_voter_sets(
        &mut self,
        node: NodeId,
        partition: PartitionId,
        batch: &Batch,
        as_leader: bool,
    ) {
        if !is_control_batch(&batch.bytes) {
            return;
        }
        let found = match voter_sets_in(&batch.bytes) {
            Ok(found) => found,
            Err(error) => {
                self.fail(format!(
                    "partition {partition}: node {node}: control batch at {} does not parse: {error}",
                    batch.base_offset
                ));
                return;
            }
        };
        let high_watermark = self
            .high_watermarks
            .get(&(node, partition))
            .copied()
            .unwrap_or(0);
        for (offset, voters) in found {
            let previous = self
                .voter_sets
                .get(&(node, partition))
                .and_then(|sets| sets.last())
                .cloned();
            let previous_set = match &previous {
                Some((_, set)) => set.clone(),
                None => {
                    let start = self.logs.get(&(node, partition)).map_or(0, |log| log.start);
                    self.voters_below(partition, start)
                }
            };
            let difference = previous_set.id_difference(&voters);
            if difference > 1 {
                self.fail(format!(
                    "partition {partition}: node {node}: voter set {:?} at {offset} differs from the previous {:?} by {difference} voters",
                    voters.ids(),
                    previous_set.ids()
                ));
            }
            if as_leader
                && let Some((previous_offset, _)) = previous
                && previous_offset >= high_watermark
            {
                self.fail(format!(
                    "partition {partition}: leader {node} appended voter set {:?} at {offset} while the previous one at {previous_offset} is not committed (high-watermark {high_watermark}): two changes in flight",
                    voters.ids()
                ));
            }
            self.ever_voters.extend(voters.iter_ids());
            self.voter_sets
                .entry((node, partition))
                .or_default()
                .push((offset, voters));
        }
    }

    /// The leader `leader` moved its high-watermark to `high_watermark`: the batch ending just
    /// below it must be durable on a majority of the voter set in force in the leader's log.
    /// `live_durable_ends`: each live node's durable end offset as its host reported it to its
    /// core (`Persisted::Log`); a node that is down counts with the claim noted at its crash.
    pub fn on_leader_high_watermark(
        &mut self,
        leader: NodeId,
        partition: PartitionId,
        high_watermark: u64,
        live_durable_ends: &BTreeMap<NodeId, u64>,
    ) {
        let Some(log) = self.logs.get(&(leader, partition)) else {
            return;
        };
        let index = log
            .batches
            .partition_point(|b| b.last_offset + 1 < high_watermark);
        let Some(batch) = log
            .batches
            .get(index)
            .filter(|b| b.last_offset + 1 == high_watermark)
        else {
            return;
        };
        let key = batch.key();
        let voters = self.voter_set_in_force(leader, partition);
        let holders: Vec<NodeId> = voters
            .iter_ids()
            .filter(|&voter| {
                self.holds_durably(voter, partition, key, high_watermark, live_durable_ends)
            })
            .collect();
        if holders.len() < voters.majority() {
            self.fail(format!(
                "partition {partition}: leader {leader} moved its high-watermark to {high_watermark}, but the batch at {} (epoch {}) is durable only on {holders:?}, not on a majority of the voter set in force {:?}",
                key.0,
                key.1,
                voters.ids()
            ));
        }
    }

    /// Whether `node` holds the batch `key` durably, its durable end at or past `end`.
    fn holds_durably(
        &self,
        node: NodeId,
        partition: PartitionId,
        key: BatchKey,
        end: u64,
        live_durable_ends: &BTreeMap<NodeId, u64>,
    ) -> bool {
        let holds = |batches: &[Batch], start: u64| {
            // A log that starts past the batch holds it in the snapshot it starts from.
            let index = batches.partition_point(|b| b.base_offset < key.0);
            start > key.0 || batches.get(index).is_some_and(|b| b.key() == key)
        };
        match live_durable_ends.get(&node) {
            Some(&durable_end) => {
                durable_end >= end
                    && self
                        .logs
                        .get(&(node, partition))
                        .is_some_and(|log: &LogCopy| holds(&log.batches, log.start))
            }
            None => {
                self.durable_claims
                    .get(&(node, partition))
                    .is_some_and(|(durable_end, claimed)| {
                        let start = claimed.first().map_or(u64::MAX, |b| b.base_offset);
                        *durable_end >= end && holds(claimed, start)
                    })
            }
        }
    }
}
