//! KIP-630 in the simulator: the simulated host's side of snapshots, executed in memory.
//!
//! - Taking: a random live node snapshots its key-value state machine (end offset = what it
//!   applied, at most its high-watermark) into the engine's snapshot encoding; the write is a
//!   disk operation, lost if the node crashes first (a crash while writing a snapshot). Once
//!   durable, the core hears `on_snapshot_written`.
//! - Serving FetchSnapshot (several partitions per request, bytes shared by `fair_share`): see
//!   [`super::fetcher`].
//! - Fetching: chunks go to a `.part` (lost on a crash: a restarted replica starts over and
//!   never loads a `.part`); the install validates it, loads it and resets the log.
//! - Invariants after every event: see `check_snapshot_offsets` and the checker.

use bytes::{Bytes, BytesMut};
use ringlog_engine::batch::RecordBatch;
use ringlog_engine::snapshot::{SnapshotEncoder, SnapshotId, SnapshotRecordSink};

use super::{Cluster, OpKind, ReplicaKey};
use crate::message::Message;
use crate::records::{batch_headers, stamp_batch, voters_batch};
use crate::sim::SnapshotMutation;
use crate::sim::store::SnapshotPart;
use crate::state_machine::{KeyValueStateMachine, StateMachine};
use crate::types::{Epoch, NodeId, OffsetAndEpoch};
use crate::voters::VoterSet;

/// A record sink that drops the first record (the `SnapshotOneRecordOff` mutation).
struct SkipFirstRecord<'a> {
    inner: &'a mut SnapshotEncoder,
    skipped: bool,
}

impl SnapshotRecordSink for SkipFirstRecord<'_> {
    fn append_record(&mut self, key: Option<&[u8]>, value: Option<&[u8]>) {
        if self.skipped {
            self.inner.append_record(key, value);
        } else {
            self.skipped = true;
        }
    }
}

/// The snapshot `bytes` with a VotersRecord control batch inserted after its header batch; the
/// batches after it move one offset up (base offsets sit outside the CRC).
fn with_voters_batch(bytes: &Bytes, voters: &VoterSet, epoch: Epoch) -> Bytes {
    let headers = batch_headers(bytes).expect("the encoder's own batches");
    let mut out = BytesMut::with_capacity(bytes.len() + 128);
    let mut position = 0;
    for (index, header) in headers.iter().enumerate() {
        let batch = &bytes[position..position + header.size_bytes];
        position += header.size_bytes;
        if index == 0 {
            out.extend_from_slice(batch);
            let voters_batch = voters_batch(voters, 0);
            out.extend_from_slice(&stamp_batch(&voters_batch, header.last_offset + 1, epoch));
        } else {
            out.extend_from_slice(&stamp_batch(batch, header.base_offset + 1, epoch));
        }
    }
    out.freeze()
}

impl Cluster {
    /// At start: the state machine loads the newest snapshot (if any); committed batches past it
    /// are applied as the high-watermark reaches them.
    pub(super) fn load_state_machine_at_start(&mut self, replica: ReplicaKey) {
        let latest = self.nodes[&replica].store.latest_snapshot().cloned();
        let state = match latest {
            Some((snapshot_id, bytes)) => {
                self.checkers[replica.1 as usize].check_snapshot(replica.0, snapshot_id, &bytes)
            }
            None => Some(KeyValueStateMachine::new()),
        };
        if let Some(state) = state {
            self.nodes
                .get_mut(&replica)
                .expect("replica exists")
                .state_machine = state;
        }
    }

    /// Feeds the state machine every stored batch below the high-watermark it has not applied.
    pub(super) fn apply_committed(&mut self, replica: ReplicaKey) {
        let id = replica.0;
        let n = self.nodes.get_mut(&replica).expect("replica exists");
        let high_watermark = n.high_watermark;
        let mut next = (n.state_machine.last_applied_offset() + 1) as u64;
        let mut failure = None;
        while next < high_watermark {
            let Some(index) = n.store.batch_at(next) else {
                failure = Some(format!(
                    "node {replica:?}: no stored batch at {next} to apply (log start {}, hw {high_watermark})",
                    n.store.log_start_offset
                ));
                break;
            };
            let batch = &n.store.batches[index];
            let applied = RecordBatch::parse(batch.bytes.clone())
                .map_err(|e| e.to_string())
                .and_then(|b| n.state_machine.apply(&b).map_err(|e| e.to_string()));
            if let Err(e) = applied {
                failure = Some(format!("node {replica:?}: applying batch at {next}: {e}"));
                break;
            }
            next = batch.last_offset + 1;
        }
        if let Some(failure) = failure {
            self.fail(failure);
            return;
        }
        let state = self.nodes[&replica].state_machine.clone();
        self.checkers[replica.1 as usize].check_state_machine(id, &state);
    }

    /// A random live node snapshots every partition's state machine that applied past its
    /// newest snapshot (so the leaders' log starts of several partitions tend to move together,
    /// and a replica left behind needs several partitions' snapshots at once).
    pub(super) fn take_snapshot(&mut self) {
        let alive: Vec<NodeId> = self
            .node_ids
            .iter()
            .copied()
            .filter(|&id| self.is_alive(id))
            .collect();
        if alive.is_empty() {
            return;
        }
        let id = alive[self.rng.below(alive.len() as u64) as usize];
        for partition in 0..self.partitions {
            self.take_replica_snapshot((id, partition));
        }
    }

    fn take_replica_snapshot(&mut self, replica: ReplicaKey) {
        let id = replica.0;
        if self.options.snapshot_mutation == Some(SnapshotMutation::LeaderLoadsSnapshot)
            && self.leader_reloads_snapshot(replica)
        {
            return;
        }
        let n = &self.nodes[&replica];
        let end_offset = (n.state_machine.last_applied_offset() + 1) as u64;
        let latest_end = n.store.latest_snapshot().map_or(0, |s| s.0.offset);
        if end_offset <= latest_end {
            return;
        }
        // The epoch of the record before the end: the stored batch ending there.
        let Some(epoch) = n
            .store
            .batches
            .iter()
            .rev()
            .find(|b| b.last_offset + 1 == end_offset)
            .map(|b| b.epoch)
        else {
            return;
        };
        let snapshot_id = OffsetAndEpoch::new(end_offset, epoch);
        let mut encoder = SnapshotEncoder::new(
            SnapshotId {
                end_offset: end_offset as i64,
                epoch: epoch as i32,
            },
            &n.state_machine.snapshot_format(),
            self.now_ms as i64,
        );
        if self.options.snapshot_mutation == Some(SnapshotMutation::SnapshotOneRecordOff) {
            // Broken on purpose: the snapshot lacks one of the state's records.
            n.state_machine.snapshot_records(&mut SkipFirstRecord {
                inner: &mut encoder,
                skipped: false,
            });
        } else {
            n.state_machine.snapshot_records(&mut encoder);
        }
        let mut bytes = encoder.finish();
        // KIP-853: a snapshot holds the voter set in force at its end (Kafka puts the Voters
        // record in the header's batch; here it is a control batch right after it). A log that
        // never changed its voters writes none (kraft.version 0): the bootstrap set applies.
        if let Some(raft) = &n.raft
            && !raft.voter_history().entries().is_empty()
        {
            let voters = raft.voter_set_at(end_offset - 1).clone();
            bytes = with_voters_batch(&bytes, &voters, epoch);
        }
        self.trace_event(11, id, end_offset | (u64::from(replica.1) << 48));
        self.count("snapshot-taken");
        // What was written must be the committed state at its end offset.
        self.checkers[replica.1 as usize].check_snapshot(id, snapshot_id, &bytes);
        self.push_op(replica, OpKind::SnapshotWrite { snapshot_id, bytes });
    }

    /// The `LeaderLoadsSnapshot` mutation: a leader holding a snapshot loads it again, as if
    /// it had fetched it. Returns whether it did.
    fn leader_reloads_snapshot(&mut self, replica: ReplicaKey) -> bool {
        let n = self.nodes.get_mut(&replica).expect("replica exists");
        if !n.raft.as_ref().is_some_and(|r| r.is_leader()) {
            return false;
        }
        let Some((snapshot_id, bytes)) = n.store.latest_snapshot().cloned() else {
            return false;
        };
        n.store.part = Some(SnapshotPart {
            snapshot_id,
            size_bytes: bytes.len() as u64,
            bytes: bytes.to_vec(),
        });
        self.install_snapshot(replica, snapshot_id);
        true
    }

    /// The snapshot write became durable: keep it and tell the core.
    pub(super) fn complete_snapshot_write(
        &mut self,
        replica: ReplicaKey,
        snapshot_id: OffsetAndEpoch,
        bytes: Bytes,
        held: Vec<(NodeId, Message)>,
    ) {
        let now = self.now_ms;
        let n = self.nodes.get_mut(&replica).expect("replica exists");
        n.store
            .snapshots
            .insert(snapshot_id.offset, (snapshot_id, bytes));
        n.state_machine.on_snapshot_taken();
        let result = n
            .raft
            .as_mut()
            .expect("alive while ops are pending")
            .on_snapshot_written(now, snapshot_id);
        for (to, message) in held {
            self.send(replica, to, message);
        }
        match result {
            Ok(work) => self.execute(replica, work),
            Err(e) => self.fail(format!("node {replica:?}: on_snapshot_written failed: {e}")),
        }
        self.reschedule_tick(replica);
    }

    /// Follower: a chunk of the snapshot being fetched goes into its `.part`.
    pub(super) fn write_snapshot_chunk(
        &mut self,
        replica: ReplicaKey,
        snapshot_id: OffsetAndEpoch,
        size_bytes: u64,
        position: u64,
        bytes: Bytes,
    ) {
        let n = self.nodes.get_mut(&replica).expect("replica exists");
        if position == 0 {
            n.store.part = Some(SnapshotPart {
                snapshot_id,
                size_bytes,
                bytes: Vec::new(),
            });
        }
        let fits = n.store.part.as_ref().is_some_and(|p| {
            p.snapshot_id == snapshot_id
                && p.size_bytes == size_bytes
                && p.bytes.len() as u64 == position
                && position + bytes.len() as u64 <= size_bytes
        });
        if !fits {
            self.fail(format!(
                "node {replica:?}: snapshot chunk {snapshot_id:?} at {position} does not continue the .part"
            ));
            return;
        }
        n.store
            .part
            .as_mut()
            .expect("checked")
            .bytes
            .extend_from_slice(&bytes);
        self.count("snapshot-chunk");
    }

    /// Follower: every byte arrived: freeze, validate, load, reset the log.
    pub(super) fn install_snapshot(&mut self, replica: ReplicaKey, snapshot_id: OffsetAndEpoch) {
        let (id, p) = (replica.0, replica.1 as usize);
        let n = self.nodes.get_mut(&replica).expect("replica exists");
        if n.raft.as_ref().is_some_and(|r| r.is_leader()) {
            self.fail(format!(
                "node {replica:?}: a leader loads snapshot {snapshot_id:?}"
            ));
            return;
        }
        let part = n.store.part.take();
        let Some(part) =
            part.filter(|p| p.snapshot_id == snapshot_id && p.bytes.len() as u64 == p.size_bytes)
        else {
            self.fail(format!(
                "node {replica:?}: installing {snapshot_id:?} without a complete .part"
            ));
            return;
        };
        let bytes = Bytes::from(part.bytes);
        let Some(state) = self.checkers[p].check_snapshot(id, snapshot_id, &bytes) else {
            return;
        };
        self.trace_event(12, id, snapshot_id.offset);
        self.count("snapshot-install");
        let n = self.nodes.get_mut(&replica).expect("replica exists");
        n.store
            .snapshots
            .insert(snapshot_id.offset, (snapshot_id, bytes));
        let removed = n.store.batches.clone();
        let old_high_watermark = n.high_watermark;
        n.store.reset_to(snapshot_id.offset);
        for op in &mut n.pending {
            if let OpKind::Flush { limit_offset, .. } = &mut op.kind {
                *limit_offset = (*limit_offset).min(snapshot_id.offset);
            }
        }
        n.state_machine = state;
        // Only uncommitted records past the snapshot may be dropped with the log.
        let removed_past: Vec<_> = removed
            .into_iter()
            .filter(|b| b.base_offset >= snapshot_id.offset)
            .collect();
        self.checkers[p].on_truncate(id, old_high_watermark, snapshot_id.offset, &removed_past);
    }

    /// The core moved the log start: segments below it go; a snapshot must be there.
    pub(super) fn advance_log_start(&mut self, replica: ReplicaKey, offset: u64) {
        let n = self.nodes.get_mut(&replica).expect("replica exists");
        if !n.store.snapshots.contains_key(&offset) {
            self.fail(format!(
                "node {replica:?}: log start advanced to {offset} without a snapshot there"
            ));
            return;
        }
        if let Err(e) = n.store.advance_log_start(offset) {
            self.fail(format!("node {replica:?}: {e}"));
        }
        self.count("log-start-advance");
    }

    /// KIP-630 invariants on every live node: the core and the disk agree on the log start,
    /// `log_start_offset ≤ latest snapshot end ≤ high_watermark ≤ log_end_offset`, and a log
    /// start above 0 has a snapshot at it; the state machine never passes the high-watermark.
    pub(super) fn check_snapshot_offsets(&mut self) {
        let mut failure = None;
        for n in self.nodes.values() {
            let Some(raft) = &n.raft else { continue };
            let log = raft.log();
            let start = n.store.log_start_offset;
            let hw = raft.high_watermark();
            let end = log.log_end_offset();
            if log.log_start_offset() != start {
                failure = Some(format!(
                    "node {}/{}: core log start {} but the disk's is {start}",
                    n.id,
                    n.partition,
                    log.log_start_offset()
                ));
            } else if start > 0 && !n.store.snapshots.contains_key(&start) {
                failure = Some(format!(
                    "node {}/{}: log starts at {start} without a snapshot there",
                    n.id, n.partition
                ));
            } else if let Some((latest, _)) = n.store.latest_snapshot()
                && !(start <= latest.offset && latest.offset <= hw && hw <= end)
            {
                failure = Some(format!(
                    "node {}/{}: log start {start}, latest snapshot {}, hw {hw}, log end {end} out of order",
                    n.id, n.partition, latest.offset
                ));
            } else if n.state_machine.last_applied_offset() + 1 > hw as i64 {
                failure = Some(format!(
                    "node {}/{}: state machine applied to {} past the high-watermark {hw}",
                    n.id,
                    n.partition,
                    n.state_machine.last_applied_offset() + 1
                ));
            }
            if failure.is_some() {
                break;
            }
        }
        if let Some(failure) = failure {
            self.fail(failure);
        }
    }
}
