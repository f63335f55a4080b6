//! The event loop: nodes running the real core, the network, the disks, faults and clients.
//! KIP-630 snapshots (taking, serving, fetching, installing) are in [`snapshots`].

mod snapshots;

use std::cmp::Ordering;
use std::collections::{BTreeMap, BinaryHeap, VecDeque};
use std::hash::{Hash, Hasher};
use std::panic::{AssertUnwindSafe, catch_unwind};

use bytes::{Bytes, BytesMut};

use super::invariants::Checker;
use super::network::{Fate, Network, NetworkConfig};
use super::store::SimStore;
use super::{Profile, SimOptions, SimReport};
use crate::message::Message;
use crate::quorum::EpochState;
use crate::raft::Raft;
use crate::records::{KeyValue, build_batch, stamp_batch};
use crate::rng::SplitMix64;
use crate::state_machine::KeyValueStateMachine;
use crate::types::{ElectionState, Epoch, NodeId, OffsetAndEpoch, QuorumConfig};
use crate::work::{Persisted, Work};

/// FNV-1a, so trace hashes do not depend on std's hasher.
struct Fnv(u64);

impl Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 ^= u64::from(*b);
            self.0 = self.0.wrapping_mul(0x100_0000_01b3);
        }
    }
}

#[derive(Debug)]
enum EventKind {
    /// `to_incarnation`: the recipient's incarnation when the message was sent. A restarted
    /// process has new connections, so nothing sent to its previous life reaches it.
    Deliver {
        from: NodeId,
        to: NodeId,
        to_incarnation: u64,
        message: Message,
    },
    PersistDone {
        node: NodeId,
        incarnation: u64,
        op_id: u64,
    },
    Tick {
        node: NodeId,
        incarnation: u64,
    },
    Fault,
    HealNetwork,
    Restart {
        node: NodeId,
    },
    ClientAppend,
    EndFaults,
    /// A random live node snapshots its state machine (KIP-630).
    TakeSnapshot,
}

struct Event {
    at_ms: u64,
    seq: u64,
    kind: EventKind,
}

impl PartialEq for Event {
    fn eq(&self, other: &Self) -> bool {
        (self.at_ms, self.seq) == (other.at_ms, other.seq)
    }
}
impl Eq for Event {}
impl PartialOrd for Event {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Event {
    // Reversed: BinaryHeap pops the earliest (time, sequence) first.
    fn cmp(&self, other: &Self) -> Ordering {
        (other.at_ms, other.seq).cmp(&(self.at_ms, self.seq))
    }
}

enum OpKind {
    QuorumState(ElectionState),
    Flush {
        generation: u64,
        end_offset: u64,
        limit_offset: u64,
    },
    /// Writing a snapshot (`.part`, fsync, rename): lost if the node crashes first.
    SnapshotWrite {
        snapshot_id: OffsetAndEpoch,
        bytes: Bytes,
    },
}

struct PendingOp {
    id: u64,
    kind: OpKind,
    /// Messages that may leave only once this (and every earlier) operation completed.
    held: Vec<(NodeId, Message)>,
}

struct SimNode {
    id: NodeId,
    config: QuorumConfig,
    raft: Option<Raft>,
    store: SimStore,
    incarnation: u64,
    pending: VecDeque<PendingOp>,
    next_op_id: u64,
    last_completion_ms: u64,
    /// The high-watermark this incarnation reported (HighWatermarkChanged).
    high_watermark: u64,
    /// The largest epoch this incarnation has been in.
    epoch_floor: Epoch,
    scheduled_tick_ms: Option<u64>,
    /// The replica's key-value state machine, fed committed batches (KIP-630).
    state_machine: KeyValueStateMachine,
}

struct Cluster {
    options: SimOptions,
    now_ms: u64,
    seq: u64,
    queue: BinaryHeap<Event>,
    nodes: BTreeMap<NodeId, SimNode>,
    voters: Vec<NodeId>,
    network: Network,
    rng: SplitMix64,
    checker: Checker,
    trace: Fnv,
    events: u64,
    faults: BTreeMap<&'static str, u64>,
    faults_active: bool,
    client_counter: u64,
    /// Last scheduled delivery time per directed link, to count reorders.
    last_delivery_ms: BTreeMap<(NodeId, NodeId), u64>,
    disk_latency_max_ms: u64,
    /// The leader's `replica.fetch.snapshot.response.max.bytes`.
    snapshot_response_max_bytes: u64,
}

/// Runs one seed to the end (convergence after the faults, or the first violation).
pub fn run_seed(options: &SimOptions) -> SimReport {
    let mut cluster = Cluster::new(options.clone());
    let outcome = catch_unwind(AssertUnwindSafe(|| cluster.run()));
    if let Err(panic) = outcome {
        let message = panic
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "non-string panic".to_string());
        cluster
            .checker
            .violation
            .get_or_insert(format!("panic at {} ms: {message}", cluster.now_ms));
    }
    cluster.report()
}

impl Cluster {
    fn new(options: SimOptions) -> Self {
        let mut rng = SplitMix64::new(options.seed ^ 0x5EED_CAFE_F00D_D00D);
        let (voter_count, observer_count) = match options.profile {
            Profile::Three => (3, 0),
            Profile::Mixed => (1 + rng.below(5) as i32, rng.below(3) as i32),
        };
        let voters: Vec<NodeId> = (1..=voter_count).collect();
        let observers: Vec<NodeId> = (101..101 + observer_count).collect();
        let fetch_max_bytes = [200u32, 1_000, 1 << 20][rng.below(3) as usize];
        // Short enough that a leader moves its log start past crashed or partitioned replicas,
        // which then catch up through FetchSnapshot.
        let max_replication_lag_ms = 200 + rng.below(2_000);
        let snapshot_response_max_bytes = [300u64, 2_000, 10 << 20][rng.below(3) as usize];
        let mut nodes = BTreeMap::new();
        for &id in voters.iter().chain(&observers) {
            let mut config = QuorumConfig::new(id, &voters).expect("valid voters");
            config.election_timeout_ms = 150;
            config.election_backoff_max_ms = 150;
            config.fetch_timeout_ms = 400;
            config.fetch_max_wait_ms = 100;
            config.request_timeout_ms = 200;
            config.fetch_max_bytes = fetch_max_bytes;
            config.max_replication_lag_ms = max_replication_lag_ms;
            config.mutation = options.mutation;
            nodes.insert(
                id,
                SimNode {
                    id,
                    config,
                    raft: None,
                    store: SimStore::default(),
                    incarnation: 0,
                    pending: VecDeque::new(),
                    next_op_id: 0,
                    last_completion_ms: 0,
                    high_watermark: 0,
                    epoch_floor: 0,
                    scheduled_tick_ms: None,
                    state_machine: KeyValueStateMachine::new(),
                },
            );
        }
        let delay_max_ms = 1 + rng.below(30);
        let faulty_network = NetworkConfig {
            delay_min_ms: 1,
            delay_max_ms,
            drop_per_mille: rng.below(100),
            duplicate_per_mille: rng.below(50),
        };
        Self {
            checker: Checker::new(voters.clone()),
            network: Network::new(faulty_network),
            options,
            now_ms: 0,
            seq: 0,
            queue: BinaryHeap::new(),
            nodes,
            voters,
            rng,
            trace: Fnv(0xcbf2_9ce4_8422_2325),
            events: 0,
            faults: BTreeMap::new(),
            faults_active: true,
            client_counter: 0,
            last_delivery_ms: BTreeMap::new(),
            disk_latency_max_ms: 3,
            snapshot_response_max_bytes,
        }
    }

    fn schedule(&mut self, at_ms: u64, kind: EventKind) {
        self.seq += 1;
        self.queue.push(Event {
            at_ms,
            seq: self.seq,
            kind,
        });
    }

    fn count(&mut self, fault: &'static str) {
        *self.faults.entry(fault).or_default() += 1;
    }

    fn run(&mut self) {
        let ids: Vec<NodeId> = self.nodes.keys().copied().collect();
        for id in ids {
            if !self.voters.contains(&id) && self.rng.chance(1, 3) {
                // A replica added later: it must catch up, through FetchSnapshot once the
                // leader's log start has moved.
                let join_at = 1_000 + self.rng.below(4_000);
                self.count("late-observer");
                self.schedule(join_at, EventKind::Restart { node: id });
                continue;
            }
            self.start_node(id);
        }
        let first_snapshot = 100 + self.rng.below(500);
        self.schedule(first_snapshot, EventKind::TakeSnapshot);
        let first_fault = 100 + self.rng.below(400);
        self.schedule(first_fault, EventKind::Fault);
        let first_append = self.rng.below(50);
        self.schedule(first_append, EventKind::ClientAppend);
        self.schedule(self.options.fault_phase_ms, EventKind::EndFaults);
        let deadline_ms = self.options.fault_phase_ms + self.options.liveness_budget_ms;
        while let Some(event) = self.queue.pop() {
            if event.at_ms > deadline_ms {
                break;
            }
            self.now_ms = event.at_ms;
            self.events += 1;
            self.handle(event.kind);
            self.check_states();
            if self.checker.violation.is_some() {
                return;
            }
            if !self.faults_active && self.converged() {
                self.check_final_logs();
                return;
            }
        }
        self.checker.violation.get_or_insert(format!(
            "liveness: no converged leader {} ms after the faults stopped ({})",
            self.options.liveness_budget_ms,
            self.describe()
        ));
    }

    fn describe(&self) -> String {
        self.nodes
            .values()
            .map(|n| match &n.raft {
                Some(r) => format!(
                    "{}:{}@{} end={} hw={} next_tick={:?}/{}",
                    n.id,
                    r.state().name(),
                    r.epoch(),
                    n.store.end_offset(),
                    r.high_watermark(),
                    n.scheduled_tick_ms,
                    r.next_deadline_ms(),
                ),
                None => format!("{}:down", n.id),
            })
            .collect::<Vec<_>>()
            .join(" ")
    }

    fn trace_event(&mut self, tag: u8, node: NodeId, extra: u64) {
        self.now_ms.hash(&mut self.trace);
        tag.hash(&mut self.trace);
        node.hash(&mut self.trace);
        extra.hash(&mut self.trace);
    }

    fn handle(&mut self, kind: EventKind) {
        match kind {
            EventKind::Deliver {
                from,
                to,
                to_incarnation,
                message,
            } => {
                self.trace_event(1, to, from as u64);
                message.hash(&mut self.trace);
                let node = self.nodes.get_mut(&to).expect("node exists");
                if node.incarnation != to_incarnation {
                    return;
                }
                let Some(raft) = node.raft.as_mut() else {
                    return;
                };
                match raft.step(self.now_ms, from, message) {
                    Ok(work) => self.execute(to, work),
                    Err(e) => {
                        self.checker
                            .violation
                            .get_or_insert(format!("node {to}: step failed: {e}"));
                    }
                }
                self.reschedule_tick(to);
            }
            EventKind::PersistDone {
                node,
                incarnation,
                op_id,
            } => {
                self.trace_event(2, node, op_id);
                self.complete_persistence(node, incarnation, op_id);
            }
            EventKind::Tick { node, incarnation } => {
                let n = &self.nodes[&node];
                if n.incarnation != incarnation
                    || n.scheduled_tick_ms != Some(self.now_ms)
                    || n.raft.is_none()
                {
                    return;
                }
                self.trace_event(3, node, 0);
                let n = self.nodes.get_mut(&node).expect("node exists");
                n.scheduled_tick_ms = None;
                let result = n.raft.as_mut().expect("alive").tick(self.now_ms);
                match result {
                    Ok((work, _)) => self.execute(node, work),
                    Err(e) => {
                        self.checker
                            .violation
                            .get_or_insert(format!("node {node}: tick failed: {e}"));
                    }
                }
                self.reschedule_tick(node);
            }
            EventKind::Fault => {
                if self.faults_active {
                    self.inject_fault();
                    let next = self.now_ms + 100 + self.rng.below(500);
                    self.schedule(next, EventKind::Fault);
                }
            }
            EventKind::HealNetwork => {
                self.trace_event(4, 0, 0);
                self.network.heal();
            }
            EventKind::Restart { node } => {
                if self.nodes[&node].raft.is_none() {
                    self.trace_event(5, node, 0);
                    self.count("restart");
                    self.start_node(node);
                }
            }
            EventKind::ClientAppend => {
                if self.faults_active {
                    self.client_append();
                    let next = self.now_ms + 5 + self.rng.below(40);
                    self.schedule(next, EventKind::ClientAppend);
                }
            }
            EventKind::TakeSnapshot => {
                self.take_snapshot();
                let next = self.now_ms + 100 + self.rng.below(600);
                self.schedule(next, EventKind::TakeSnapshot);
            }
            EventKind::EndFaults => {
                self.trace_event(6, 0, 0);
                self.faults_active = false;
                self.network.heal();
                self.network.config.drop_per_mille = 0;
                self.network.config.duplicate_per_mille = 0;
                let down: Vec<NodeId> = self
                    .nodes
                    .values()
                    .filter(|n| n.raft.is_none())
                    .map(|n| n.id)
                    .collect();
                for node in down {
                    self.count("restart");
                    self.start_node(node);
                }
            }
        }
    }

    fn start_node(&mut self, id: NodeId) {
        let now = self.now_ms;
        let seed = self.options.seed;
        let n = self.nodes.get_mut(&id).expect("node exists");
        n.incarnation += 1;
        n.store.recover_log_behind_snapshot();
        let recovered = n.store.recovered();
        let snapshots = n.store.recovered_snapshots();
        let node_seed = seed
            ^ (id as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)
            ^ n.incarnation.wrapping_mul(0xD1B5_4A32_D192_ED03);
        let raft =
            Raft::new_with_snapshots(n.config.clone(), &recovered, snapshots, node_seed, now)
                .expect("recovered state is valid");
        self.load_state_machine_at_start(id);
        let n = self.nodes.get_mut(&id).expect("node exists");
        n.epoch_floor = raft.epoch();
        n.high_watermark = raft.high_watermark();
        n.raft = Some(raft);
        n.scheduled_tick_ms = None;
        self.reschedule_tick(id);
    }

    fn crash_node(&mut self, id: NodeId) {
        let n = self.nodes.get_mut(&id).expect("node exists");
        n.raft = None;
        n.pending.clear();
        n.store.crash();
        n.scheduled_tick_ms = None;
        n.incarnation += 1;
    }

    fn reschedule_tick(&mut self, id: NodeId) {
        let n = self.nodes.get_mut(&id).expect("node exists");
        let Some(raft) = &n.raft else { return };
        let deadline = raft.next_deadline_ms();
        if deadline == u64::MAX || n.scheduled_tick_ms == Some(deadline) {
            return;
        }
        n.scheduled_tick_ms = Some(deadline);
        let incarnation = n.incarnation;
        self.schedule(
            deadline,
            EventKind::Tick {
                node: id,
                incarnation,
            },
        );
    }

    fn send(&mut self, from: NodeId, to: NodeId, message: Message) {
        match self.network.fate(&mut self.rng, from, to) {
            Fate::Blocked => self.count("partitioned-message"),
            Fate::Dropped => self.count("drop"),
            Fate::Deliver(delays) => {
                if delays.len() > 1 {
                    self.count("duplicate");
                }
                for delay in delays {
                    let at = self.now_ms + delay;
                    let last = self.last_delivery_ms.entry((from, to)).or_default();
                    if at < *last {
                        *self.faults.entry("reorder").or_default() += 1;
                    } else {
                        *last = at;
                    }
                    let to_incarnation = self.nodes[&to].incarnation;
                    self.schedule(
                        at,
                        EventKind::Deliver {
                            from,
                            to,
                            to_incarnation,
                            message: message.clone(),
                        },
                    );
                }
            }
        }
    }

    fn push_op(&mut self, id: NodeId, kind: OpKind) {
        let now = self.now_ms;
        let latency = self.rng.below(self.disk_latency_max_ms + 1);
        let n = self.nodes.get_mut(&id).expect("node exists");
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
                node: id,
                incarnation,
                op_id,
            },
        );
    }

    fn complete_persistence(&mut self, id: NodeId, incarnation: u64, op_id: u64) {
        let n = self.nodes.get_mut(&id).expect("node exists");
        if n.incarnation != incarnation || n.pending.front().is_none_or(|op| op.id != op_id) {
            return;
        }
        let op = n.pending.pop_front().expect("checked");
        let persisted = match op.kind {
            OpKind::SnapshotWrite { snapshot_id, bytes } => {
                self.complete_snapshot_write(id, snapshot_id, bytes, op.held);
                return;
            }
            OpKind::QuorumState(state) => {
                let old = n.store.quorum_state;
                n.store.quorum_state = state;
                self.checker.on_quorum_state_durable(id, old, state);
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
        let n = self.nodes.get_mut(&id).expect("node exists");
        let result = n
            .raft
            .as_mut()
            .expect("alive while ops are pending")
            .on_persisted(self.now_ms, persisted);
        for (to, message) in op.held {
            self.send(id, to, message);
        }
        match result {
            Ok(work) => self.execute(id, work),
            Err(e) => {
                self.checker
                    .violation
                    .get_or_insert(format!("node {id}: on_persisted failed: {e}"));
            }
        }
        self.reschedule_tick(id);
    }

    fn execute(&mut self, id: NodeId, work: Vec<Work>) {
        for item in work {
            match item {
                Work::Send { to, message } => self.send(id, to, message),
                Work::SendAfterPersist { to, message } => {
                    let n = self.nodes.get_mut(&id).expect("node exists");
                    match n.pending.back_mut() {
                        Some(op) => op.held.push((to, message)),
                        None => self.send(id, to, message),
                    }
                }
                Work::SendFetchResponse {
                    to,
                    mut response,
                    fetch_offset,
                    max_bytes,
                } => {
                    let store = &self.nodes[&id].store;
                    if max_bytes > 0 && fetch_offset < store.end_offset() {
                        let Some(start) = store.batch_at(fetch_offset) else {
                            self.checker.violation.get_or_insert(format!(
                                "node {id}: fetch from {fetch_offset}, not a batch start"
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
                    self.send(id, to, Message::FetchResponse(response));
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
                    self.append(id, records.freeze());
                }
                Work::AppendAsFollower { records } => self.append(id, records),
                Work::Truncate { offset } => {
                    let n = self.nodes.get_mut(&id).expect("node exists");
                    match n.store.truncate(offset) {
                        Ok(removed) => {
                            for op in &mut n.pending {
                                if let OpKind::Flush { limit_offset, .. } = &mut op.kind {
                                    *limit_offset = (*limit_offset).min(offset);
                                }
                            }
                            let hw = n.high_watermark;
                            n.high_watermark = hw.min(offset);
                            self.checker.on_truncate(id, hw, offset, &removed);
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
                            for m in self.nodes.values() {
                                if let Some(r) = &m.raft {
                                    dump.push_str(&format!(
                                        "\n   node {} {}@{} core end {} cache {:?} store end {} durable {}",
                                        m.id, r.state().name(), r.epoch(), r.log().log_end_offset(), r.log().epoch_cache(), m.store.end_offset(), m.store.durable_end_offset()
                                    ));
                                }
                            }
                            self.checker.violation.get_or_insert(format!(
                                "node {id}: {e}; batches near it {around:?}{dump}"
                            ));
                        }
                    }
                }
                Work::Flush {
                    generation,
                    end_offset,
                } => {
                    self.push_op(
                        id,
                        OpKind::Flush {
                            generation,
                            end_offset,
                            limit_offset: end_offset,
                        },
                    );
                }
                Work::WriteQuorumState(state) => self.push_op(id, OpKind::QuorumState(state)),
                Work::HighWatermarkChanged { high_watermark } => {
                    let n = &self.nodes[&id];
                    let old = n.high_watermark;
                    let is_leader = n.raft.as_ref().is_some_and(|r| r.is_leader());
                    let voter_stores: BTreeMap<NodeId, &SimStore> = self
                        .voters
                        .iter()
                        .map(|v| (*v, &self.nodes[v].store))
                        .collect();
                    let view = is_leader.then_some(&voter_stores);
                    self.checker
                        .on_high_watermark(id, old, high_watermark, &n.store, view);
                    self.nodes.get_mut(&id).expect("node exists").high_watermark = high_watermark;
                    self.apply_committed(id);
                }
                Work::AdvanceLogStartOffset { offset } => self.advance_log_start(id, offset),
                Work::DeleteSnapshotsBefore { snapshot_id } => {
                    let n = self.nodes.get_mut(&id).expect("node exists");
                    n.store
                        .snapshots
                        .retain(|&end, _| end >= snapshot_id.offset);
                }
                Work::SendFetchSnapshotResponse {
                    to,
                    response,
                    max_bytes,
                } => self.serve_fetch_snapshot(id, to, response, max_bytes),
                Work::WriteSnapshotChunk {
                    snapshot_id,
                    size_bytes,
                    position,
                    bytes,
                } => self.write_snapshot_chunk(id, snapshot_id, size_bytes, position, bytes),
                Work::InstallSnapshot { snapshot_id } => self.install_snapshot(id, snapshot_id),
            }
        }
    }

    fn append(&mut self, id: NodeId, records: Bytes) {
        let n = self.nodes.get_mut(&id).expect("node exists");
        let previous = match n.store.batches.last() {
            Some(b) => Some((b.base_offset, b.epoch)),
            // A log starting at a snapshot continues the committed batch ending there.
            None if n.store.log_start_offset > 0 => {
                self.checker.committed_key_before(n.store.log_start_offset)
            }
            None => None,
        };
        match n.store.append(&records) {
            Ok(added) => self.checker.on_append(id, previous, &added),
            Err(e) => {
                self.checker
                    .violation
                    .get_or_insert(format!("node {id}: {e}"));
            }
        }
    }

    fn current_leader(&self) -> Option<NodeId> {
        self.nodes
            .values()
            .filter_map(|n| {
                n.raft
                    .as_ref()
                    .filter(|r| r.is_leader())
                    .map(|r| (r.epoch(), n.id))
            })
            .max()
            .map(|(_, id)| id)
    }

    fn inject_fault(&mut self) {
        let ids: Vec<NodeId> = self.nodes.keys().copied().collect();
        let heal_at = self.now_ms + 200 + self.rng.below(1_300);
        match self.rng.below(7) {
            6 => {
                let observers: Vec<NodeId> = ids
                    .iter()
                    .copied()
                    .filter(|id| !self.voters.contains(id))
                    .collect();
                if !observers.is_empty() {
                    // An observer's disk is replaced: it rejoins empty. (A voter may not forget
                    // what it acknowledged, so only observers are wiped.)
                    let victim = observers[self.rng.below(observers.len() as u64) as usize];
                    self.trace_event(10, victim, 0);
                    self.count("wipe");
                    if self.nodes[&victim].raft.is_some() {
                        self.crash_node(victim);
                    }
                    let n = self.nodes.get_mut(&victim).expect("node exists");
                    n.store = SimStore::default();
                    let restart_at = self.now_ms + 50 + self.rng.below(1_500);
                    self.schedule(restart_at, EventKind::Restart { node: victim });
                }
            }
            0 => {
                let from = ids[self.rng.below(ids.len() as u64) as usize];
                let to = ids[self.rng.below(ids.len() as u64) as usize];
                if from != to {
                    self.count("one-way-partition");
                    self.network.block(from, to);
                    self.schedule(heal_at, EventKind::HealNetwork);
                }
            }
            1 => {
                let side: Vec<bool> = ids.iter().map(|_| self.rng.chance(1, 2)).collect();
                self.count("two-way-partition");
                for (i, a) in ids.iter().enumerate() {
                    for (j, b) in ids.iter().enumerate() {
                        if side[i] != side[j] {
                            self.network.block(*a, *b);
                        }
                    }
                }
                self.schedule(heal_at, EventKind::HealNetwork);
            }
            2 => {
                if let Some(leader) = self.current_leader() {
                    self.count("leader-isolation");
                    for &other in &ids {
                        if other != leader {
                            self.network.block(leader, other);
                            self.network.block(other, leader);
                        }
                    }
                    self.schedule(heal_at, EventKind::HealNetwork);
                }
            }
            3 | 4 => {
                let alive: Vec<NodeId> = self
                    .nodes
                    .values()
                    .filter(|n| n.raft.is_some())
                    .map(|n| n.id)
                    .collect();
                if !alive.is_empty() {
                    let victim = alive[self.rng.below(alive.len() as u64) as usize];
                    self.trace_event(7, victim, 0);
                    self.count("crash");
                    self.crash_node(victim);
                    let restart_at = self.now_ms + 50 + self.rng.below(1_500);
                    self.schedule(restart_at, EventKind::Restart { node: victim });
                }
            }
            _ => {
                if let Some(leader) = self.current_leader() {
                    self.trace_event(8, leader, 0);
                    self.count("resign");
                    let raft = self
                        .nodes
                        .get_mut(&leader)
                        .and_then(|n| n.raft.as_mut())
                        .expect("alive leader");
                    match raft.resign(self.now_ms) {
                        Ok(work) => self.execute(leader, work),
                        Err(e) => {
                            self.checker
                                .violation
                                .get_or_insert(format!("node {leader}: resign failed: {e}"));
                        }
                    }
                    self.reschedule_tick(leader);
                }
            }
        }
    }

    fn client_append(&mut self) {
        let ids: Vec<NodeId> = self.nodes.keys().copied().collect();
        let target = match self.current_leader() {
            Some(leader) if self.rng.chance(9, 10) => leader,
            _ => ids[self.rng.below(ids.len() as u64) as usize],
        };
        let batch_count = 1 + self.rng.below(3);
        let mut batches = Vec::new();
        for _ in 0..batch_count {
            self.client_counter += 1;
            let records = 1 + self.rng.below(4) as usize;
            let values: Vec<Vec<u8>> = (0..records)
                .map(|r| {
                    format!(
                        "seed{}-batch{}-record{r}",
                        self.options.seed, self.client_counter
                    )
                    .into_bytes()
                })
                .collect();
            // Keys from a small set, some tombstones: the key-value state machine (and its
            // snapshots) then has overwrites and deletes to get right.
            let keys: Vec<Vec<u8>> = (0..records)
                .map(|_| format!("key{}", self.rng.below(12)).into_bytes())
                .collect();
            let tombstones: Vec<bool> = (0..records).map(|_| self.rng.chance(1, 6)).collect();
            let pairs: Vec<KeyValue<'_>> = values
                .iter()
                .zip(&keys)
                .zip(&tombstones)
                .map(|((v, k), &t)| (Some(k.as_slice()), (!t).then_some(v.as_slice())))
                .collect();
            batches.push(build_batch(&pairs, false, self.now_ms as i64));
        }
        let now = self.now_ms;
        let Some(raft) = self.nodes.get_mut(&target).and_then(|n| n.raft.as_mut()) else {
            return;
        };
        match raft.append(now, batches.clone()) {
            Ok((result, work)) => {
                self.trace_event(9, target, result.base_offset);
                for batch in batches {
                    self.checker.submitted.insert(batch);
                }
                self.execute(target, work);
                self.reschedule_tick(target);
            }
            Err(_) => self.count("append-to-non-leader"),
        }
    }

    /// Invariants over the nodes' states, after every event.
    fn check_states(&mut self) {
        let mut leaders = Vec::new();
        for n in self.nodes.values_mut() {
            let Some(raft) = &n.raft else { continue };
            let epoch = raft.epoch();
            if epoch < n.epoch_floor {
                self.checker.violation.get_or_insert(format!(
                    "node {}: epoch moved back from {} to {epoch}",
                    n.id, n.epoch_floor
                ));
            }
            n.epoch_floor = epoch;
            if matches!(raft.state(), EpochState::Leader(_)) {
                leaders.push((n.id, epoch));
            }
            if !n.config.is_local_voter()
                && matches!(
                    raft.state(),
                    EpochState::Leader(_) | EpochState::Candidate(_) | EpochState::Voted(_)
                )
            {
                self.checker.violation.get_or_insert(format!(
                    "observer {} is {}",
                    n.id,
                    raft.state().name()
                ));
            }
        }
        for (id, epoch) in leaders {
            self.checker.on_leader(id, epoch);
        }
        self.check_snapshot_offsets();
    }

    /// Liveness: a leader, every replica alive with the leader's log and high-watermark.
    fn converged(&self) -> bool {
        let Some(leader) = self.current_leader() else {
            return false;
        };
        let end = self.nodes[&leader].store.end_offset();
        self.nodes.values().all(|n| {
            n.raft.as_ref().is_some_and(|r| {
                r.high_watermark() == end
                    && r.epoch() == self.nodes[&leader].raft.as_ref().map_or(0, |l| l.epoch())
            }) && n.store.end_offset() == end
        })
    }

    fn check_final_logs(&mut self) {
        let committed = self.checker.committed.clone();
        for n in self.nodes.values() {
            let start = committed.partition_point(|b| b.base_offset < n.store.log_start_offset);
            if n.store.batches[..] != committed[start..] {
                self.checker.violation.get_or_insert(format!(
                    "node {}: final log differs from the committed log",
                    n.id
                ));
            }
        }
    }

    fn report(&self) -> SimReport {
        let client_batches_committed = self
            .checker
            .committed
            .iter()
            .filter(|b| !crate::records::is_control_batch(&b.bytes))
            .count();
        SimReport {
            seed: self.options.seed,
            voters: self.voters.len(),
            observers: self.nodes.len() - self.voters.len(),
            trace_hash: self.trace.finish(),
            events: self.events,
            faults: self.faults.clone(),
            committed_batches: self.checker.committed.len(),
            client_batches_committed,
            elections: self.checker.elections(),
            sim_time_ms: self.now_ms,
            violation: self.checker.violation.clone(),
        }
    }
}

/// A fault-free cluster for measuring the core's commit throughput (benches/consensus.rs):
/// zero network delay, instant disks, every invariant still checked.
pub struct SteadyCluster {
    cluster: Cluster,
    next_batch: u64,
}

impl SteadyCluster {
    /// Starts `voters` voters and runs until one leads with everyone caught up.
    pub fn new(voters: usize, seed: u64) -> Self {
        let mut options = SimOptions::new(seed, Profile::Three);
        options.fault_phase_ms = 0;
        let mut cluster = Cluster::new(options);
        assert!(
            (1..=3).contains(&voters),
            "the steady cluster has 1 to 3 voters"
        );
        let keep: Vec<NodeId> = (1..=voters as NodeId).collect();
        cluster.nodes.retain(|id, _| keep.contains(id));
        for n in cluster.nodes.values_mut() {
            n.config = QuorumConfig {
                voters: keep.clone(),
                ..n.config.clone()
            };
        }
        cluster.voters = keep.clone();
        cluster.checker = Checker::new(keep);
        cluster.network.config = NetworkConfig {
            delay_min_ms: 0,
            delay_max_ms: 0,
            drop_per_mille: 0,
            duplicate_per_mille: 0,
        };
        cluster.disk_latency_max_ms = 0;
        cluster.faults_active = false;
        let ids: Vec<NodeId> = cluster.nodes.keys().copied().collect();
        for id in ids {
            cluster.start_node(id);
        }
        let mut steady = Self {
            cluster,
            next_batch: 0,
        };
        steady.run_until(|c| c.converged());
        steady
    }

    fn run_until(&mut self, done: impl Fn(&Cluster) -> bool) {
        let c = &mut self.cluster;
        while !done(c) {
            let event = c
                .queue
                .pop()
                .expect("a live cluster always has a next event");
            c.now_ms = event.at_ms;
            c.events += 1;
            c.handle(event.kind);
            c.check_states();
            assert!(c.checker.violation.is_none(), "{:?}", c.checker.violation);
        }
    }

    /// Appends `batches` batches of `records_per_batch` records to the leader in one call and
    /// runs until the leader's high-watermark covers them. Returns the committed end offset.
    pub fn commit(&mut self, batches: usize, records_per_batch: usize) -> u64 {
        let leader = self
            .cluster
            .current_leader()
            .expect("a steady cluster has a leader");
        let mut proposals = Vec::with_capacity(batches);
        for _ in 0..batches {
            self.next_batch += 1;
            let value = self.next_batch.to_be_bytes();
            let pairs: Vec<KeyValue<'_>> = (0..records_per_batch)
                .map(|_| (None, Some(&value[..])))
                .collect();
            proposals.push(build_batch(&pairs, false, 0));
        }
        let now = self.cluster.now_ms;
        let raft = self
            .cluster
            .nodes
            .get_mut(&leader)
            .and_then(|n| n.raft.as_mut())
            .expect("alive leader");
        let (result, work) = raft
            .append(now, proposals.clone())
            .expect("leader accepts appends");
        for batch in proposals {
            self.cluster.checker.submitted.insert(batch);
        }
        self.cluster.execute(leader, work);
        self.cluster.reschedule_tick(leader);
        let target = result.last_offset + 1;
        self.run_until(|c| {
            c.nodes[&leader]
                .raft
                .as_ref()
                .is_some_and(|r| r.high_watermark() >= target)
        });
        target
    }

    /// Events processed so far.
    pub fn events(&self) -> u64 {
        self.cluster.events
    }
}
