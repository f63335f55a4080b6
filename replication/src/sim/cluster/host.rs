//! The simulated host's disk and executor: each replica's persistence queue (operations complete
//! in issue order after a random latency; a crash drops what is pending) and the execution of
//! the core's `Work` against the simulated store, as `docs/raft.md`'s contract says.

use std::collections::BTreeMap;

use bytes::{Bytes, BytesMut};

use super::{Cluster, EventKind, OpKind, PendingOp, ReplicaKey};
use crate::message::Message;
use crate::records::stamp_batch;
use crate::sim::store::SimStore;
use crate::types::NodeId;
use crate::work::{Persisted, Work};

impl Cluster {
    pub(super) fn push_op(&mut self, replica: ReplicaKey, kind: OpKind) {
        let now = self.now_ms;
        let latency = self.rng.below(self.disk_latency_max_ms + 1);
        let n = self.nodes.get_mut(&replica).expect("replica exists");
        let op_id = n.next_op_id;
        n.next_op_id += 1;
        n.pending.push_back(PendingOp {
            id: op_id,
            kind,
            held: Vec::new(),
        });
        // The disk completes operations in order.
        let at = n.last_completion_ms.max(now + latency);
        n.last_completion_ms = at;
        let incarnation = n.incarnation;
        self.schedule(
            at,
            EventKind::PersistDone {
                replica,
                incarnation,
                op_id,
            },
        );
    }

    pub(super) fn complete_persistence(
        &mut self,
        replica: ReplicaKey,
        incarnation: u64,
        op_id: u64,
    ) {
        let id = replica.0;
        let n = self.nodes.get_mut(&replica).expect("replica exists");
        if n.incarnation != incarnation || n.pending.front().is_none_or(|op| op.id != op_id) {
            return;
        }
        let op = n.pending.pop_front().expect("checked");
        let persisted = match op.kind {
            OpKind::SnapshotWrite { snapshot_id, bytes } => {
                self.complete_snapshot_write(replica, snapshot_id, bytes, op.held);
                return;
            }
            OpKind::QuorumState(state) => {
                let old = n.store.quorum_state;
                n.store.quorum_state = state;
                self.checkers[replica.1 as usize].on_quorum_state_durable(id, old, state);
                Persisted::QuorumState(state)
            }
            OpKind::Flush {
                generation,
                end_offset,
                limit_offset,
            } => {
                n.store.flushed(limit_offset);
                Persisted::Log {
                    generation,
                    end_offset,
                }
            }
        };
        let n = self.nodes.get_mut(&replica).expect("replica exists");
        let result = n
            .raft
            .as_mut()
            .expect("alive while ops are pending")
            .on_persisted(self.now_ms, persisted);
        for (to, message) in op.held {
            self.send(replica, to, message);
        }
        match result {
            Ok(work) => self.execute(replica, work),
            Err(e) => self.fail(format!("node {replica:?}: on_persisted failed: {e}")),
        }
        self.reschedule_tick(replica);
    }

    pub(super) fn execute(&mut self, replica: ReplicaKey, work: Vec<Work>) {
        let (id, partition) = replica;
        let p = partition as usize;
        let mut installed = None;
        for item in work {
            match item {
                Work::Send { to, message } => self.send(replica, to, message),
                Work::SendAfterPersist { to, message } => {
                    let n = self.nodes.get_mut(&replica).expect("replica exists");
                    match n.pending.back_mut() {
                        Some(op) => op.held.push((to, message)),
                        None => self.send(replica, to, message),
                    }
                }
                Work::SendFetchResponse {
                    to,
                    mut response,
                    fetch_offset,
                    max_bytes,
                } => {
                    let store = &self.nodes[&replica].store;
                    if max_bytes > 0 && fetch_offset < store.end_offset() {
                        let Some(start) = store.batch_at(fetch_offset) else {
                            self.fail(format!(
                                "node {replica:?}: fetch from {fetch_offset}, not a batch start"
                            ));
                            return;
                        };
                        let mut records = BytesMut::new();
                        for batch in &store.batches[start..] {
                            if !records.is_empty()
                                && records.len() + batch.bytes.len() > max_bytes as usize
                            {
                                break;
                            }
                            records.extend_from_slice(&batch.bytes);
                        }
                        response.records = records.freeze();
                    }
                    self.send(replica, to, Message::FetchResponse(response));
                }
                Work::AppendAsLeader {
                    base_offset,
                    leader_epoch,
                    batches,
                } => {
                    let mut records = BytesMut::new();
                    let mut offset = base_offset;
                    for batch in &batches {
                        let header = crate::records::proposal_headers(batch)
                            .expect("the core checked it")[0];
                        records.extend_from_slice(&stamp_batch(batch, offset, leader_epoch));
                        offset += u64::from(header.records_count);
                    }
                    self.append(replica, records.freeze(), true);
                }
                Work::AppendAsFollower { records } => self.append(replica, records, false),
                Work::Truncate { offset } => {
                    let n = self.nodes.get_mut(&replica).expect("replica exists");
                    match n.store.truncate(offset) {
                        Ok(removed) => {
                            for op in &mut n.pending {
                                if let OpKind::Flush { limit_offset, .. } = &mut op.kind {
                                    *limit_offset = (*limit_offset).min(offset);
                                }
                            }
                            let hw = n.high_watermark;
                            n.high_watermark = hw.min(offset);
                            self.checkers[p].on_truncate(id, hw, offset, &removed);
                        }
                        Err(e) => {
                            let around: Vec<(u64, u64, u32)> = n
                                .store
                                .batches
                                .iter()
                                .filter(|b| {
                                    b.last_offset + 20 >= offset && b.base_offset <= offset + 20
                                })
                                .map(|b| (b.base_offset, b.last_offset, b.epoch))
                                .collect();
                            let mut dump = String::new();
                            for m in self.nodes.values().filter(|m| m.partition == partition) {
                                if let Some(r) = &m.raft {
                                    dump.push_str(&format!(
                                        "\n   node {} {}@{} core end {} cache {:?} store end {} durable {}",
                                        m.id, r.state().name(), r.epoch(), r.log().log_end_offset(), r.log().epoch_cache(), m.store.end_offset(), m.store.durable_end_offset()
                                    ));
                                }
                            }
                            self.fail(format!(
                                "node {replica:?}: {e}; batches near it {around:?}{dump}"
                            ));
                        }
                    }
                }
                Work::Flush {
                    generation,
                    end_offset,
                } => {
                    self.push_op(
                        replica,
                        OpKind::Flush {
                            generation,
                            end_offset,
                            limit_offset: end_offset,
                        },
                    );
                }
                Work::WriteQuorumState(state) => self.push_op(replica, OpKind::QuorumState(state)),
                Work::HighWatermarkChanged { high_watermark } => {
                    let n = &self.nodes[&replica];
                    let old = n.high_watermark;
                    let is_leader = n.raft.as_ref().is_some_and(|r| r.is_leader());
                    // The voters in force in the leader's own log, as its disk holds them (not
                    // the core's view: a core that uses the wrong set must be caught).
                    let in_force: Vec<NodeId> = match n.store.latest_voters() {
                        Some((_, voters)) => voters.ids(),
                        None => self.voters.clone(),
                    };
                    let voter_stores: BTreeMap<NodeId, &SimStore> = in_force
                        .iter()
                        .map(|v| (*v, &self.nodes[&(*v, partition)].store))
                        .collect();
                    let view = is_leader.then_some(&voter_stores);
                    self.checkers[p].on_high_watermark(id, old, high_watermark, &n.store, view);
                    self.nodes
                        .get_mut(&replica)
                        .expect("replica exists")
                        .high_watermark = high_watermark;
                    self.apply_committed(replica);
                }
                Work::AdvanceLogStartOffset { offset } => self.advance_log_start(replica, offset),
                Work::DeleteSnapshotsBefore { snapshot_id } => {
                    let n = self.nodes.get_mut(&replica).expect("replica exists");
                    n.store
                        .snapshots
                        .retain(|&end, _| end >= snapshot_id.offset);
                }
                Work::SendFetchSnapshotResponse {
                    to,
                    response,
                    max_bytes,
                } => self.answer_fetch_snapshot(replica, to, response, max_bytes),
                Work::WriteSnapshotChunk {
                    snapshot_id,
                    size_bytes,
                    position,
                    bytes,
                } => self.write_snapshot_chunk(replica, snapshot_id, size_bytes, position, bytes),
                Work::InstallSnapshot { snapshot_id } => {
                    self.install_snapshot(replica, snapshot_id);
                    installed = Some(snapshot_id);
                }
            }
        }
        if let Some(snapshot_id) = installed {
            // KIP-853: the core learns the installed snapshot's voter set (read from its bytes)
            // once this work list is done, before any other input.
            self.report_snapshot_voters(replica, snapshot_id);
        }
    }

    pub(super) fn append(&mut self, replica: ReplicaKey, records: Bytes, as_leader: bool) {
        let p = replica.1 as usize;
        let n = self.nodes.get_mut(&replica).expect("replica exists");
        let voter_records_before = n.store.voter_records.len();
        let previous = match n.store.batches.last() {
            Some(b) => Some((b.base_offset, b.epoch)),
            // A log starting at a snapshot continues the committed batch ending there.
            None if n.store.log_start_offset > 0 => {
                self.checkers[p].committed_key_before(n.store.log_start_offset)
            }
            None => None,
        };
        match n.store.append(&records) {
            Ok(added) => self.checkers[p].on_append(replica.0, previous, &added),
            Err(e) => self.fail(format!("node {replica:?}: {e}")),
        }
        if self.nodes[&replica].store.voter_records.len() > voter_records_before {
            self.check_voter_sets_appended(replica, voter_records_before, as_leader);
        }
    }
}
