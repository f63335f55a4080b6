//! KIP-630 state machine checks against a reference: a key-value state machine fed every
//! committed batch in offset order, with the fingerprint of its state at each committed batch
//! end. The host's own state machine (the one its snapshots are generated from) must equal the
//! reference at the offset it applied to, after every apply, load and install, and never pass
//! its high-watermark; every snapshot job it hands the writer must hold exactly the reference
//! state at its end offset.

use bytes::Bytes;
use ringlog_engine::batch::RecordBatch;

use super::{Batch, Checks};
use crate::sim::invariants::{entries_fingerprint, state_fingerprint};
use crate::state_machine::{KeyValueStateMachine, StateMachine};
use crate::types::{NodeId, PartitionId};

/// The reference of one partition.
pub(super) struct Reference {
    state: KeyValueStateMachine,
    /// The reference state's fingerprint at each committed batch end.
    state_at: std::collections::HashMap<u64, u64>,
}

impl Default for Reference {
    fn default() -> Reference {
        let state = KeyValueStateMachine::new();
        let state_at = [(0, state_fingerprint(&state))].into_iter().collect();
        Reference { state, state_at }
    }
}

impl Checks {
    /// A batch was first committed: the reference applies it (committed batches arrive in
    /// offset order, each continuing the last).
    pub(super) fn feed_reference(&mut self, partition: PartitionId, batch: &Batch) {
        let reference = &mut self.partitions[partition as usize].reference;
        let expected = (reference.state.last_applied_offset() + 1) as u64;
        let applied = if batch.base_offset != expected {
            Err(format!(
                "committed batch at {} does not continue the committed log at {expected}",
                batch.base_offset
            ))
        } else {
            RecordBatch::parse(batch.bytes.clone())
                .map_err(|e| e.to_string())
                .and_then(|parsed| reference.state.apply(&parsed).map_err(|e| e.to_string()))
        };
        match applied {
            Ok(()) => {
                let fingerprint = state_fingerprint(&reference.state);
                reference
                    .state_at
                    .insert(batch.last_offset + 1, fingerprint);
            }
            Err(error) => self.fail(format!("partition {partition}: reference: {error}")),
        }
    }

    /// `node`'s state machine (`what`: after an apply, a load at start, an install) applied
    /// to `state`: it must equal the reference there and not pass `high_watermark`.
    pub fn check_state_machine(
        &mut self,
        node: NodeId,
        partition: PartitionId,
        state: &KeyValueStateMachine,
        high_watermark: u64,
        what: &str,
    ) {
        let applied_end = (state.last_applied_offset() + 1) as u64;
        if applied_end > high_watermark.max(self.snapshot_floor(node, partition)) {
            self.fail(format!(
                "partition {partition}: node {node}'s state machine applied to {applied_end}, past its high-watermark {high_watermark} ({what})"
            ));
            return;
        }
        self.compare(node, partition, applied_end, state_fingerprint(state), what);
    }

    /// KIP-630: a snapshot of end offset `end` holds exactly the committed state below `end`.
    pub fn check_snapshot_job(
        &mut self,
        node: NodeId,
        partition: PartitionId,
        end: u64,
        entries: &std::collections::BTreeMap<Bytes, Bytes>,
    ) {
        self.compare(
            node,
            partition,
            end,
            entries_fingerprint(entries),
            "a snapshot it generates",
        );
    }

    /// A log that starts at a snapshot may hold a state machine loaded to there before its
    /// high-watermark is known again (after a restart or an install).
    fn snapshot_floor(&self, node: NodeId, partition: PartitionId) -> u64 {
        self.logs.get(&(node, partition)).map_or(0, |log| log.start)
    }

    fn compare(
        &mut self,
        node: NodeId,
        partition: PartitionId,
        end: u64,
        fingerprint: u64,
        what: &str,
    ) {
        let reference = &self.partitions[partition as usize].reference;
        match reference.state_at.get(&end) {
            Some(&expected) if expected == fingerprint => {}
            Some(_) => self.fail(format!(
                "partition {partition}: node {node}: state at {end} ({what}) differs from the committed log replayed to there"
            )),
            None => self.fail(format!(
                "partition {partition}: node {node}: state at {end} ({what}) is not at a committed batch end (committed end {})",
                (reference.state.last_applied_offset() + 1)
            )),
        }
    }
}
