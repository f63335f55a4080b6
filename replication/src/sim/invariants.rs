//! The safety invariants, checked as the simulation runs. Each check is incremental (it looks
//! at what one event changed), so checking after every event stays cheap.

use std::collections::{BTreeMap, HashMap, HashSet};

use bytes::{Bytes, BytesMut};

use ringlog_engine::batch::RecordBatch;
use ringlog_engine::snapshot::{SnapshotId, validate_snapshot_bytes};

use super::store::{SimStore, StoredBatch};
use crate::records::is_control_batch;
use crate::state_machine::{KeyValueStateMachine, StateMachine};
use crate::types::{ElectionState, Epoch, NodeId, OffsetAndEpoch};

/// A batch's bytes with the leader's stamps (base offset, partition leader epoch) cleared:
/// what the client handed in.
pub fn unstamped(bytes: &[u8]) -> Bytes {
    let mut out = BytesMut::from(bytes);
    out[0..8].fill(0);
    out[12..16].fill(0);
    out.freeze()
}

/// A batch's identity in a log: (base offset, epoch).
type BatchKey = (u64, Epoch);

#[derive(Debug, Default)]
pub struct Checker {
    pub voters: Vec<NodeId>,
    /// KIP-595: at most one leader per epoch.
    leaders_by_epoch: BTreeMap<Epoch, NodeId>,
    /// Log matching: every batch ever appended anywhere, by (base offset, epoch), with its
    /// bytes and the (base offset, epoch) of the batch before it. Two logs holding the same
    /// key must hold the same bytes and the same predecessor, hence the same prefix.
    registry: HashMap<BatchKey, (Bytes, Option<BatchKey>)>,
    /// The committed prefix as first reported by any high-watermark.
    pub committed: Vec<StoredBatch>,
    /// Unstamped client batches ever submitted.
    pub submitted: HashSet<Bytes>,
    /// KIP-630 reference: a key-value state machine fed every committed batch in order, and
    /// the fingerprint of its state at each committed batch boundary (end offset). Snapshots
    /// and every replica's state machine are compared against these.
    reference: KeyValueStateMachine,
    state_at: HashMap<u64, u64>,
    pub violation: Option<String>,
}

/// A fingerprint of a key-value state (FNV-1a over its entries in key order).
pub fn state_fingerprint(state: &KeyValueStateMachine) -> u64 {
    entries_fingerprint(state.entries())
}

/// [`state_fingerprint`] of a key-value map (a snapshot job's entries, say).
pub fn entries_fingerprint(entries: &BTreeMap<Bytes, Bytes>) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |bytes: &[u8]| {
        for part in [&(bytes.len() as u64).to_be_bytes()[..], bytes] {
            for b in part {
                hash ^= u64::from(*b);
                hash = hash.wrapping_mul(0x100_0000_01b3);
            }
        }
    };
    for (key, value) in entries {
        eat(key);
        eat(value);
    }
    hash
}

impl Checker {
    pub fn new(voters: Vec<NodeId>) -> Self {
        let reference = KeyValueStateMachine::new();
        let mut state_at = HashMap::new();
        state_at.insert(0, state_fingerprint(&reference));
        Self {
            voters,
            reference,
            state_at,
            ..Default::default()
        }
    }

    /// Appends a newly committed batch and feeds the reference state machine.
    fn commit(&mut self, batch: StoredBatch) {
        match RecordBatch::parse(batch.bytes.clone()) {
            Ok(parsed) => {
                if let Err(e) = self.reference.apply(&parsed) {
                    self.fail(format!(
                        "committed batch at {} does not apply: {e}",
                        batch.base_offset
                    ));
                }
            }
            Err(e) => self.fail(format!(
                "committed batch at {} does not parse: {e}",
                batch.base_offset
            )),
        }
        self.state_at
            .insert(batch.last_offset + 1, state_fingerprint(&self.reference));
        self.committed.push(batch);
    }

    /// KIP-630: a replica's state machine at `applied_end` (exclusive) must equal the state
    /// from replaying every committed record below it: so all replicas agree at equal offsets.
    pub fn check_state_machine(&mut self, node: NodeId, state: &KeyValueStateMachine) {
        let applied_end = (state.last_applied_offset() + 1) as u64;
        match self.state_at.get(&applied_end) {
            Some(&expected) if expected == state_fingerprint(state) => {}
            Some(_) => self.fail(format!(
                "node {node}: state machine at {applied_end} differs from the committed log replayed to there"
            )),
            None => self.fail(format!(
                "node {node}: state machine applied to {applied_end}, not a committed batch boundary (committed end {})",
                self.committed_end()
            )),
        }
    }

    /// KIP-630: a snapshot with end offset E holds exactly the state after every committed
    /// record below E. Returns the loaded state machine.
    pub fn check_snapshot(
        &mut self,
        node: NodeId,
        snapshot_id: OffsetAndEpoch,
        bytes: &Bytes,
    ) -> Option<KeyValueStateMachine> {
        let id = SnapshotId {
            end_offset: snapshot_id.offset as i64,
            epoch: snapshot_id.epoch as i32,
        };
        let contents = match validate_snapshot_bytes(std::path::Path::new("sim"), id, bytes.clone())
        {
            Ok(c) => c,
            Err(e) => {
                self.fail(format!(
                    "node {node}: snapshot {snapshot_id:?} invalid: {e}"
                ));
                return None;
            }
        };
        let mut state = KeyValueStateMachine::new();
        if let Err(e) = state.load_snapshot(&contents) {
            self.fail(format!(
                "node {node}: snapshot {snapshot_id:?} does not load: {e}"
            ));
            return None;
        }
        if let Some(epoch) = self.committed_epoch_before(snapshot_id.offset)
            && epoch != snapshot_id.epoch
        {
            self.fail(format!(
                "node {node}: snapshot {snapshot_id:?} names epoch {}, the committed record before it has {epoch}",
                snapshot_id.epoch
            ));
        }
        self.check_state_machine(node, &state);
        Some(state)
    }

    /// The (base offset, epoch) of the committed batch ending right below `offset`: the
    /// predecessor of the first batch of a log that starts at a snapshot there.
    pub fn committed_key_before(&self, offset: u64) -> Option<(u64, Epoch)> {
        let index = self
            .committed
            .partition_point(|b| b.last_offset + 1 < offset);
        self.committed
            .get(index)
            .filter(|b| b.last_offset + 1 == offset)
            .map(|b| (b.base_offset, b.epoch))
    }

    /// The epoch of the committed batch ending right below `offset`.
    fn committed_epoch_before(&self, offset: u64) -> Option<Epoch> {
        let index = self
            .committed
            .partition_point(|b| b.last_offset + 1 < offset);
        self.committed
            .get(index)
            .filter(|b| b.last_offset + 1 == offset)
            .map(|b| b.epoch)
    }

    fn fail(&mut self, message: String) {
        if self.violation.is_none() {
            self.violation = Some(message);
        }
    }

    pub fn committed_end(&self) -> u64 {
        self.committed.last().map_or(0, |b| b.last_offset + 1)
    }

    pub fn on_leader(&mut self, node: NodeId, epoch: Epoch) {
        match self.leaders_by_epoch.get(&epoch) {
            Some(&other) if other != node => {
                self.fail(format!("two leaders in epoch {epoch}: {other} and {node}"));
            }
            _ => {
                self.leaders_by_epoch.insert(epoch, node);
            }
        }
    }

    pub fn elections(&self) -> usize {
        self.leaders_by_epoch.len()
    }

    /// Batches were appended to `node`'s log after `previous`.
    pub fn on_append(
        &mut self,
        node: NodeId,
        mut previous: Option<(u64, Epoch)>,
        added: &[StoredBatch],
    ) {
        for batch in added {
            let key = (batch.base_offset, batch.epoch);
            match self.registry.get(&key) {
                Some((bytes, prev)) => {
                    if *bytes != batch.bytes || *prev != previous {
                        self.fail(format!(
                            "node {node}: batch at offset {} epoch {} differs from another replica's (log matching)",
                            batch.base_offset, batch.epoch
                        ));
                    }
                }
                None => {
                    self.registry.insert(key, (batch.bytes.clone(), previous));
                }
            }
            previous = Some(key);
        }
    }

    /// `node` truncated at `offset`, removing `removed`, while its high-watermark was `hw`.
    pub fn on_truncate(&mut self, node: NodeId, hw: u64, offset: u64, removed: &[StoredBatch]) {
        if offset < hw {
            self.fail(format!(
                "node {node} truncated to {offset}, below its high-watermark {hw}"
            ));
        }
        for batch in removed {
            if let Some(committed) = self.committed_batch(batch.base_offset)
                && committed.epoch == batch.epoch
            {
                self.fail(format!(
                    "node {node} truncated committed batch at offset {}",
                    batch.base_offset
                ));
            }
        }
    }

    fn committed_batch(&self, base_offset: u64) -> Option<&StoredBatch> {
        self.committed
            .binary_search_by(|b| b.base_offset.cmp(&base_offset))
            .ok()
            .map(|i| &self.committed[i])
    }

    /// `node`'s high-watermark moved from `old` to `new`. Its log below `new` must be the
    /// committed prefix (recording it when first seen); a leader's new value must be durable
    /// on a majority of voters.
    pub fn on_high_watermark(
        &mut self,
        node: NodeId,
        old: u64,
        new: u64,
        store: &SimStore,
        leader_view: Option<&BTreeMap<NodeId, &SimStore>>,
    ) {
        if new < old {
            self.fail(format!(
                "node {node}: high-watermark moved back from {old} to {new}"
            ));
            return;
        }
        if new > store.end_offset() {
            self.fail(format!(
                "node {node}: high-watermark {new} past its log end {}",
                store.end_offset()
            ));
            return;
        }
        let start = store.batches.partition_point(|b| b.last_offset < old);
        for batch in &store.batches[start..] {
            if batch.last_offset >= new {
                if batch.base_offset < new {
                    self.fail(format!("node {node}: high-watermark {new} inside a batch"));
                }
                break;
            }
            if batch.base_offset < self.committed_end() {
                match self.committed_batch(batch.base_offset) {
                    Some(c) if c.bytes == batch.bytes && c.epoch == batch.epoch => {}
                    _ => {
                        self.fail(format!(
                            "node {node}: committed offset {} holds a different batch than on other replicas",
                            batch.base_offset
                        ));
                        return;
                    }
                }
            } else if batch.base_offset == self.committed_end() {
                if !is_control_batch(&batch.bytes)
                    && !self.submitted.contains(&unstamped(&batch.bytes))
                {
                    self.fail(format!(
                        "node {node}: committed batch at {} was never submitted",
                        batch.base_offset
                    ));
                }
                self.commit(batch.clone());
            } else {
                self.fail(format!(
                    "node {node}: committed prefix has a hole before {}",
                    batch.base_offset
                ));
            }
        }
        if let Some(stores) = leader_view {
            // A leader's high-watermark: a majority of the voters in force in its log (KIP-595:
            // the newest voter set it appended) must hold the batch just below it durably (same
            // offset and epoch, hence the same prefix by log matching).
            let Some(last) = store.batches.iter().rev().find(|b| b.last_offset < new) else {
                return;
            };
            let holders = stores
                .values()
                .filter(|s| {
                    // A replica whose log starts past the batch holds a durable snapshot of it.
                    s.log_start_offset > last.base_offset
                        || s.batch_at(last.base_offset).is_some_and(|i| {
                            i < s.durable_batches && s.batches[i].epoch == last.epoch
                        })
                })
                .count();
            if holders < stores.len() / 2 + 1 {
                self.fail(format!(
                    "node {node}: high-watermark {new} but only {holders} of {} voters fsynced offset {}",
                    stores.len(),
                    last.base_offset
                ));
            }
        }
    }

    /// A quorum-state write of `node` became durable.
    pub fn on_quorum_state_durable(
        &mut self,
        node: NodeId,
        old: ElectionState,
        new: ElectionState,
    ) {
        if new.epoch < old.epoch {
            self.fail(format!(
                "node {node}: persisted epoch moved back from {} to {}",
                old.epoch, new.epoch
            ));
        } else if new.epoch == old.epoch
            && old.voted_for.is_some()
            && new.voted_for != old.voted_for
        {
            self.fail(format!(
                "node {node}: persisted vote in epoch {} changed from {:?} to {:?}",
                new.epoch, old.voted_for, new.voted_for
            ));
        }
    }
}
