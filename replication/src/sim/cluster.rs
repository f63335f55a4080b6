//! The event loop: nodes running the real core (one `Raft` per partition, 1–4 partitions per
//! cluster on the same nodes), the network, the disks, faults and clients. KIP-630 snapshots
//! (taking, serving, fetching, installing) are in [`snapshots`]; the FetchSnapshot sessions that
//! put several partitions into one request and share one response's bytes are in [`fetcher`];
//! faults and the client workload are in [`workload`]; the simulated disk queue and the
//! executor of the core's `Work` are in [`host`]; the fault-free bench cluster in [`steady`];
//! the cluster-wide state checks, liveness and the final-log check in [`checks`].

mod checks;
mod fetcher;
mod host;
mod reconfig;
mod snapshots;
mod steady;
mod workload;

pub use steady::SteadyCluster;

use std::cmp::Ordering;
use std::collections::{BTreeMap, BinaryHeap, VecDeque};
use std::hash::{Hash, Hasher};
use std::panic::{AssertUnwindSafe, catch_unwind};

use bytes::Bytes;

use super::invariants::Checker;
use super::network::{Fate, Network, NetworkConfig};
use super::store::SimStore;
use super::{Profile, SimOptions, SimReport};
use crate::message::Message;
use crate::raft::Raft;
use crate::rng::SplitMix64;
use crate::state_machine::KeyValueStateMachine;
use crate::types::{ElectionState, Epoch, NodeId, OffsetAndEpoch, PartitionId, QuorumConfig};

use fetcher::SnapshotFetcher;

/// One partition's replica on one node.
type ReplicaKey = (NodeId, PartitionId);

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
        partition: PartitionId,
        to_incarnation: u64,
        message: Message,
    },
    /// One wire FetchSnapshot request or response: every partition's part travels (or is
    /// lost) together, as one Kafka message does (see [`fetcher`]).
    DeliverSnapshotBundle {
        from: NodeId,
        to: NodeId,
        to_incarnation: u64,
        bundle_id: u64,
        parts: Vec<(PartitionId, Message)>,
    },
    /// The follower's FetchSnapshot session to `leader` gives up waiting for `bundle_id`.
    FetcherTimeout {
        node: NodeId,
        leader: NodeId,
        bundle_id: u64,
    },
    PersistDone {
        replica: ReplicaKey,
        incarnation: u64,
        op_id: u64,
    },
    Tick {
        replica: ReplicaKey,
        incarnation: u64,
    },
    Fault,
    HealNetwork,
    Restart {
        node: NodeId,
    },
    ClientAppend,
    EndFaults,
    /// A random live replica snapshots its state machine (KIP-630).
    TakeSnapshot,
    /// A partition's leader adds, removes or replaces a voter (profile `reconfig`).
    VoterChange,
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

/// One partition's replica on a node: its core, its partition directory (log, quorum-state,
/// snapshots) and its state machine. All replicas of a node crash and restart together.
struct SimNode {
    id: NodeId,
    partition: PartitionId,
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
    /// Every replica, by (node, partition).
    nodes: BTreeMap<ReplicaKey, SimNode>,
    node_ids: Vec<NodeId>,
    partitions: PartitionId,
    voters: Vec<NodeId>,
    network: Network,
    rng: SplitMix64,
    /// One checker per partition (each partition is its own replicated log).
    checkers: Vec<Checker>,
    /// The first violation outside a partition's checker (host checks, panics).
    violation: Option<String>,
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
    /// FetchSnapshot sessions by (follower, leader).
    fetchers: BTreeMap<(NodeId, NodeId), SnapshotFetcher>,
    next_bundle_id: u64,
    /// While a FetchSnapshot bundle is being answered: the cores' answers, to be filled and
    /// shared in one response.
    serving: Option<Vec<fetcher::CoreAnswer>>,
    /// Every node that was ever in a voter set record or the bootstrap set: never wiped (a
    /// voter may not forget what it acknowledged).
    ever_voters: std::collections::BTreeSet<NodeId>,
    /// Per partition, the voter a replacement will remove once its add is committed.
    pending_replace: BTreeMap<PartitionId, NodeId>,
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
        cluster.collect_violations();
        cluster
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
            // Three bootstrap voters and two spare nodes to add (observers until then).
            Profile::Reconfig => (3, 2),
            Profile::Mixed => (1 + rng.below(5) as i32, rng.below(3) as i32),
            Profile::Single => (1, 1 + rng.below(2) as i32),
        };
        let voters: Vec<NodeId> = (1..=voter_count).collect();
        let observers: Vec<NodeId> = (101..101 + observer_count).collect();
        let fetch_max_bytes = [200u32, 1_000, 1 << 20][rng.below(3) as usize];
        // Short enough that a leader moves its log start past crashed or partitioned replicas,
        // which then catch up through FetchSnapshot.
        let max_replication_lag_ms = 200 + rng.below(2_000);
        let snapshot_response_max_bytes = [300u64, 2_000, 10 << 20][rng.below(3) as usize];
        let partitions = options
            .partitions
            .unwrap_or_else(|| 1 + rng.below(4) as PartitionId);
        let mut nodes = BTreeMap::new();
        let node_ids: Vec<NodeId> = voters.iter().chain(&observers).copied().collect();
        for &id in &node_ids {
            let mut config = QuorumConfig::new(id, &voters).expect("valid voters");
            config.election_timeout_ms = 150;
            config.election_backoff_max_ms = 150;
            config.fetch_timeout_ms = 400;
            config.fetch_max_wait_ms = 100;
            config.request_timeout_ms = 200;
            config.fetch_max_bytes = fetch_max_bytes;
            config.max_replication_lag_ms = max_replication_lag_ms;
            config.mutation = options.mutation;
            for partition in 0..partitions {
                nodes.insert(
                    (id, partition),
                    SimNode {
                        id,
                        partition,
                        config: config.clone(),
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
        }
        let delay_max_ms = 1 + rng.below(30);
        let faulty_network = NetworkConfig {
            delay_min_ms: 1,
            delay_max_ms,
            drop_per_mille: rng.below(100),
            duplicate_per_mille: rng.below(50),
        };
        // A lone voter's slow fsync is a long window in which it leads and serves what is not
        // yet durable; single-voter seeds draw it up to 30 ms (drawn last, so the other
        // profiles' seeds replay as before).
        let disk_latency_max_ms = match options.profile {
            Profile::Single => [3, 10, 30][rng.below(3) as usize],
            Profile::Three | Profile::Mixed | Profile::Reconfig => 3,
        };
        Self {
            checkers: (0..partitions)
                .map(|_| Checker::new(voters.clone()))
                .collect(),
            violation: None,
            network: Network::new(faulty_network),
            options,
            now_ms: 0,
            seq: 0,
            queue: BinaryHeap::new(),
            nodes,
            node_ids,
            partitions,
            rng,
            trace: Fnv(0xcbf2_9ce4_8422_2325),
            events: 0,
            faults: BTreeMap::new(),
            faults_active: true,
            client_counter: 0,
            last_delivery_ms: BTreeMap::new(),
            disk_latency_max_ms,
            snapshot_response_max_bytes,
            fetchers: BTreeMap::new(),
            next_bundle_id: 0,
            serving: None,
            ever_voters: voters.iter().copied().collect(),
            pending_replace: BTreeMap::new(),
            voters,
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

    fn fail(&mut self, message: String) {
        self.violation.get_or_insert(message);
    }

    /// Moves the first partition checker's violation (if any) into `violation`.
    fn collect_violations(&mut self) {
        if self.violation.is_some() {
            return;
        }
        if let Some((partition, v)) = self
            .checkers
            .iter()
            .enumerate()
            .find_map(|(p, c)| c.violation.as_ref().map(|v| (p, v)))
        {
            self.violation = Some(format!("partition {partition}: {v}"));
        }
    }

    fn is_alive(&self, node: NodeId) -> bool {
        self.nodes[&(node, 0)].raft.is_some()
    }

    fn incarnation(&self, node: NodeId) -> u64 {
        self.nodes[&(node, 0)].incarnation
    }

    fn run(&mut self) {
        for id in self.node_ids.clone() {
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
        if self.options.profile == Profile::Reconfig {
            self.schedule_voter_change();
        }
        let deadline_ms = self.options.fault_phase_ms + self.options.liveness_budget_ms;
        let mut events_this_ms = 0u64;
        while let Some(event) = self.queue.pop() {
            if event.at_ms > deadline_ms {
                break;
            }
            // A core that keeps reporting a deadline in the past would spin here forever.
            if event.at_ms < self.now_ms {
                self.fail(format!(
                    "time moved back from {} to {} ms (a deadline in the past)",
                    self.now_ms, event.at_ms
                ));
                return;
            }
            events_this_ms = if event.at_ms == self.now_ms {
                events_this_ms + 1
            } else {
                0
            };
            if events_this_ms > 100_000 {
                self.fail(format!("livelock: 100,000 events at {} ms", self.now_ms));
                return;
            }
            self.now_ms = event.at_ms;
            self.events += 1;
            self.handle(event.kind);
            self.flush_fetchers();
            self.check_states();
            self.collect_violations();
            if self.violation.is_some() {
                return;
            }
            if !self.faults_active && self.converged() {
                self.check_final_logs();
                self.collect_violations();
                return;
            }
        }
        self.violation.get_or_insert(format!(
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
                    "{}/{}:{}@{} voters={:?} leader={:?} end={} hw={} next_tick={:?}/{}",
                    n.id,
                    n.partition,
                    r.state().name(),
                    r.epoch(),
                    r.voter_set().ids(),
                    r.leader_id(),
                    n.store.end_offset(),
                    r.high_watermark(),
                    n.scheduled_tick_ms,
                    r.next_deadline_ms(),
                ),
                None => format!("{}/{}:down", n.id, n.partition),
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

    /// Steps one replica's core with a message from `from`.
    fn step(&mut self, replica: ReplicaKey, from: NodeId, message: Message) {
        let now = self.now_ms;
        let node = self.nodes.get_mut(&replica).expect("replica exists");
        let Some(raft) = node.raft.as_mut() else {
            return;
        };
        match raft.step(now, from, message) {
            Ok(work) => self.execute(replica, work),
            Err(e) => self.fail(format!("node {replica:?}: step failed: {e}")),
        }
        self.reschedule_tick(replica);
    }

    fn handle(&mut self, kind: EventKind) {
        match kind {
            EventKind::Deliver {
                from,
                to,
                partition,
                to_incarnation,
                message,
            } => {
                self.trace_event(1, to, from as u64 | (u64::from(partition) << 32));
                message.hash(&mut self.trace);
                if self.incarnation(to) != to_incarnation {
                    return;
                }
                self.step((to, partition), from, message);
            }
            EventKind::DeliverSnapshotBundle {
                from,
                to,
                to_incarnation,
                bundle_id,
                parts,
            } => {
                self.trace_event(13, to, from as u64 | (bundle_id << 32));
                parts.hash(&mut self.trace);
                if self.incarnation(to) != to_incarnation {
                    return;
                }
                self.deliver_snapshot_bundle(from, to, bundle_id, parts);
            }
            EventKind::FetcherTimeout {
                node,
                leader,
                bundle_id,
            } => self.fetcher_timeout(node, leader, bundle_id),
            EventKind::PersistDone {
                replica,
                incarnation,
                op_id,
            } => {
                self.trace_event(2, replica.0, op_id | (u64::from(replica.1) << 48));
                self.complete_persistence(replica, incarnation, op_id);
            }
            EventKind::Tick {
                replica,
                incarnation,
            } => {
                let n = &self.nodes[&replica];
                if n.incarnation != incarnation
                    || n.scheduled_tick_ms != Some(self.now_ms)
                    || n.raft.is_none()
                {
                    return;
                }
                self.trace_event(3, replica.0, u64::from(replica.1));
                let n = self.nodes.get_mut(&replica).expect("replica exists");
                n.scheduled_tick_ms = None;
                let result = n.raft.as_mut().expect("alive").tick(self.now_ms);
                match result {
                    Ok((work, _)) => self.execute(replica, work),
                    Err(e) => self.fail(format!("node {replica:?}: tick failed: {e}")),
                }
                self.reschedule_tick(replica);
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
                if !self.is_alive(node) {
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
            EventKind::VoterChange => {
                if self.faults_active {
                    self.change_voters();
                    self.schedule_voter_change();
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
                    .node_ids
                    .iter()
                    .copied()
                    .filter(|&id| !self.is_alive(id))
                    .collect();
                for node in down {
                    self.count("restart");
                    self.start_node(node);
                }
            }
        }
    }

    /// Starts every partition's replica of `id` from its durable state.
    fn start_node(&mut self, id: NodeId) {
        for partition in 0..self.partitions {
            self.start_replica((id, partition));
        }
    }

    fn start_replica(&mut self, replica: ReplicaKey) {
        let now = self.now_ms;
        let seed = self.options.seed;
        let n = self.nodes.get_mut(&replica).expect("replica exists");
        n.incarnation += 1;
        n.store.recover_log_behind_snapshot();
        let recovered = n.store.recovered();
        let snapshots = n.store.recovered_snapshots();
        let node_seed = seed
            ^ (replica.0 as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)
            ^ n.incarnation.wrapping_mul(0xD1B5_4A32_D192_ED03)
            ^ u64::from(replica.1).wrapping_mul(0xA076_1D64_78BD_642F);
        let voter_entries = n.store.recovered_voter_entries();
        let raft = Raft::recover(
            n.config.clone(),
            &recovered,
            snapshots,
            voter_entries,
            node_seed,
            now,
        )
        .expect("recovered state is valid");
        self.load_state_machine_at_start(replica);
        let n = self.nodes.get_mut(&replica).expect("replica exists");
        n.epoch_floor = raft.epoch();
        n.high_watermark = raft.high_watermark();
        n.raft = Some(raft);
        n.scheduled_tick_ms = None;
        self.reschedule_tick(replica);
    }

    /// Every replica of `id` loses its process, its unsynced writes and its `.part`.
    fn crash_node(&mut self, id: NodeId) {
        for partition in 0..self.partitions {
            let n = self
                .nodes
                .get_mut(&(id, partition))
                .expect("replica exists");
            n.raft = None;
            n.pending.clear();
            n.store.crash();
            n.scheduled_tick_ms = None;
            n.incarnation += 1;
        }
        // Its FetchSnapshot sessions die with the process.
        self.fetchers.retain(|(follower, _), _| *follower != id);
    }

    fn reschedule_tick(&mut self, replica: ReplicaKey) {
        let n = self.nodes.get_mut(&replica).expect("replica exists");
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
                replica,
                incarnation,
            },
        );
    }

    /// The network's fate for one message from `from` to `to`: the delivery times (none if
    /// lost), with the fault counters updated.
    fn delivery_times(&mut self, from: NodeId, to: NodeId) -> Vec<u64> {
        match self.network.fate(&mut self.rng, from, to) {
            Fate::Blocked => {
                self.count("partitioned-message");
                Vec::new()
            }
            Fate::Dropped => {
                self.count("drop");
                Vec::new()
            }
            Fate::Deliver(delays) => {
                if delays.len() > 1 {
                    self.count("duplicate");
                }
                let mut times = Vec::with_capacity(delays.len());
                for delay in delays {
                    let at = self.now_ms + delay;
                    let last = self.last_delivery_ms.entry((from, to)).or_default();
                    if at < *last {
                        *self.faults.entry("reorder").or_default() += 1;
                    } else {
                        *last = at;
                    }
                    times.push(at);
                }
                times
            }
        }
    }

    /// Sends one partition's message. A FetchSnapshot request goes through the follower's
    /// session with that leader, which bundles the partitions (see [`fetcher`]).
    fn send(&mut self, from: ReplicaKey, to: NodeId, message: Message) {
        if let Message::FetchSnapshotRequest(request) = message {
            self.queue_fetch_snapshot(from, to, request);
            return;
        }
        let to_incarnation = self.incarnation(to);
        for at in self.delivery_times(from.0, to) {
            self.schedule(
                at,
                EventKind::Deliver {
                    from: from.0,
                    to,
                    partition: from.1,
                    to_incarnation,
                    message: message.clone(),
                },
            );
        }
    }

    fn report(&self) -> SimReport {
        let client_batches_committed = self
            .checkers
            .iter()
            .flat_map(|c| &c.committed)
            .filter(|b| !crate::records::is_control_batch(&b.bytes))
            .count();
        SimReport {
            seed: self.options.seed,
            voters: self.voters.len(),
            observers: self.node_ids.len() - self.voters.len(),
            partitions: self.partitions as usize,
            trace_hash: self.trace.finish(),
            events: self.events,
            faults: self.faults.clone(),
            committed_batches: self.checkers.iter().map(|c| c.committed.len()).sum(),
            client_batches_committed,
            elections: self.checkers.iter().map(|c| c.elections()).sum(),
            sim_time_ms: self.now_ms,
            violation: self.violation.clone(),
        }
    }
}
