//! The host-driven simulator (issue 15): every node runs the production host,
//! [`Host<MemoryIo>`](crate::host::Host), over the engine's fault-injecting in-memory disk, and
//! this module plays the runtime around it (net/src/node/mod.rs `deliver()`): it carries each
//! [`Output`](crate::host::Output) over a simulated network, answers replica fetches with the
//! bytes of the file range the host names, writes the snapshots the host asks for and reports them back, and pumps the
//! host's storage completions at random later times (the disk's latency; with
//! `delay_probability` a flush completes over several pumps). Nothing of the host is modelled:
//! held messages, persistence reports, deferred log-start advances, snapshot install and
//! completion routing are the real code.
//!
//! Here: the options, the event queue and loop, starting and crashing nodes, convergence;
//! the runtime's side of each host call in [`runtime`], faults and clients in [`faults`].
//!
//! Faults: crash and restart (`into_io`, `MemoryIo::crash` drops or tears every unsynced
//! write, `Host::open` recovers), a power loss of a majority at once, pauses, one-way and
//! two-way partitions, leader isolation, graceful resignation; the network delays, drops,
//! duplicates and reorders ([`super::network`]). Checks ([`checks`]): one leader per epoch, a
//! granted vote survives a crash, committed batches (read from the `HighWatermark` outputs
//! against the log each node's outputs describe) never change or vanish, log matching, and once
//! the faults stop and the cluster converges, every node's log read back through its host
//! equals the leader's and holds every committed batch. One seed replays one history bit for
//! bit (docs/simulator.md).

mod checks;
mod events;
mod faults;
mod options;
mod reconfig;
mod runtime;
mod steady;

pub use options::{HostSimOptions, host_mutation_from_name, host_mutation_name};
pub use steady::SteadyCluster;

use std::collections::{BTreeMap, BinaryHeap, VecDeque};
use std::hash::{Hash, Hasher};
use std::panic::{AssertUnwindSafe, catch_unwind};

use ringlog_engine::io::memory::FaultConfig;
use ringlog_engine::io::{MemoryConfig, MemoryIo};
use ringlog_engine::log::LogConfig;

use super::SimReport;
use super::network::{Network, NetworkConfig};
use crate::host::{Host, HostConfig, PartitionSpec, write_snapshot_job};
use crate::rng::SplitMix64;
use crate::state_machine::SnapshotPolicyConfig;
use crate::types::{Epoch, NodeId, PartitionId, QuorumConfig};
use crate::voters::VoterSet;

use checks::Checks;
use events::{Event, EventKind, Fnv};

/// Runs one seed to the end (convergence after the faults, or the first violation).
pub fn run_host_seed(options: &HostSimOptions) -> SimReport {
    let mut cluster = Cluster::new(options.clone());
    let outcome = catch_unwind(AssertUnwindSafe(|| cluster.run()));
    if let Err(panic) = outcome {
        let message = panic
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "non-string panic".to_string());
        cluster.collect_violation();
        cluster
            .violation
            .get_or_insert(format!("panic at {} ms: {message}", cluster.now_ms));
    }
    cluster.report()
}

/// KIP-853: the directory id of node `id`'s `generation`-th disk; never zero, so a voter set
/// that records it tells this disk from the next.
fn directory_id_of_disk(id: NodeId, generation: u64) -> [u8; 16] {
    let mut directory_id = [0u8; 16];
    directory_id[0] = 0xd1;
    directory_id[4..8].copy_from_slice(&id.to_le_bytes());
    directory_id[8..16].copy_from_slice(&generation.to_le_bytes());
    directory_id
}

/// Who asked for a fetch the host is answering: the runtime gives each request a correlation id
/// of its own (requesters' ids collide), as the node's answer slots do.
struct FetchOrigin {
    from: NodeId,
    from_incarnation: u64,
    correlation_id: u64,
}

/// One node: a process (its host) and its disk.
struct Node {
    id: NodeId,
    quorum: QuorumConfig,
    /// `None` while the process is down.
    host: Option<Host<MemoryIo>>,
    /// The disk while the process is down.
    disk: Option<MemoryIo>,
    incarnation: u64,
    /// A paused process handles nothing before this time (its events wait).
    paused_until_ms: u64,
    scheduled_tick_ms: Option<u64>,
    pump_scheduled: bool,
    /// Fetch requests being answered, by the correlation id the host was given.
    fetches: BTreeMap<u64, FetchOrigin>,
    next_fetch_id: u64,
    /// How many times its disk was replaced (observers, and in reconfig runs voters that were
    /// added with their disk, `reconfig.rs`).
    wipes: u64,
    /// Vote requests delivered and not yet answered, by (partition, candidate), oldest first:
    /// whether each is a pre-vote. The core answers every request once and in order (a
    /// response held behind a quorum-state write holds every later one too), so the next
    /// VoteResponse to that candidate answers the oldest; a pre-vote's grant binds nobody, is
    /// never persisted, and is not a vote that must be durable. (Counting pre-votes alone took
    /// the next response for a pre-vote's even when it was a Vote refusal released by the
    /// quorum-state write: seed 108429 then reported the pre-vote's grant as a vote.)
    vote_requests_unanswered: BTreeMap<(PartitionId, NodeId), VecDeque<bool>>,
}

struct Cluster {
    options: HostSimOptions,
    now_ms: u64,
    seq: u64,
    queue: BinaryHeap<Event>,
    nodes: BTreeMap<NodeId, Node>,
    /// Voters and observers.
    node_ids: Vec<NodeId>,
    voter_ids: Vec<NodeId>,
    partitions: PartitionId,
    host_config: HostConfig,
    memory_faults: FaultConfig,
    log_config: LogConfig,
    network: Network,
    rng: SplitMix64,
    checks: Checks,
    violation: Option<String>,
    trace: Fnv,
    events: u64,
    faults: BTreeMap<&'static str, u64>,
    faults_active: bool,
    client_counter: u64,
    last_delivery_ms: BTreeMap<(NodeId, NodeId), u64>,
    /// A pump follows an operation's submission after 0..=this many ms.
    disk_latency_max_ms: u64,
    /// A replacement's second half, by partition: the voter to remove once the add commits.
    pending_replace: BTreeMap<PartitionId, NodeId>,
}

impl Cluster {
    fn new(options: HostSimOptions) -> Cluster {
        let mut rng = SplitMix64::new(options.seed ^ 0x4057_C1A5_7E45_EED5);
        // A reconfiguration run starts from 3 voters and 2 spares, and moves between 2 and 5.
        let voter_count = options.voters.unwrap_or(if options.reconfig {
            3
        } else if rng.chance(1, 3) {
            5
        } else {
            3
        });
        let partitions = options
            .partitions
            .unwrap_or_else(|| 1 + rng.below(3) as PartitionId);
        // One voter (Kafka's standalone controller) gets 1–2 read replicas.
        let observer_count = options.observers.unwrap_or_else(|| {
            if options.reconfig {
                2
            } else if voter_count == 1 {
                1 + rng.below(2) as usize
            } else {
                rng.below(3) as usize
            }
        });
        let voter_ids: Vec<NodeId> = (1..=voter_count as NodeId).collect();
        let node_ids: Vec<NodeId> = (1..=(voter_count + observer_count) as NodeId).collect();
        let fetch_max_bytes = [300u32, 2_000, 1 << 20][rng.below(3) as usize];
        // Short enough that leaders move their log start past crashed or partitioned replicas,
        // which then catch up through FetchSnapshot.
        let max_replication_lag_ms = 200 + rng.below(2_000);
        let mut nodes = BTreeMap::new();
        for &id in &node_ids {
            let mut quorum = QuorumConfig::new(id, &voter_ids).expect("valid voters");
            quorum.election_timeout_ms = 150;
            quorum.election_backoff_max_ms = 150;
            quorum.fetch_timeout_ms = 400;
            quorum.fetch_max_wait_ms = 100;
            quorum.fetch_wait_grain_ms = options.long_poll_grain_ms;
            quorum.request_timeout_ms = 200;
            quorum.fetch_max_bytes = fetch_max_bytes;
            quorum.max_replication_lag_ms = max_replication_lag_ms;
            quorum.mutation = options.core_mutation;
            // A quarter of the runs lead empty logs as Kafka topic partitions do: no
            // LeaderChangeMessage until the log holds a record (a voter-change run keeps it,
            // as KIP-853 needs it). Chosen from the seed without a draw, so every other run's
            // history, and the mutation tests' seeds, stay as they were.
            quorum.leader_change_on_empty_log = options.reconfig || options.seed % 4 != 2;
            // Those runs' followers also learn the high-watermark with records or at the end
            // of their long poll, as a topic partition's do.
            quorum.prompt_high_watermark = quorum.leader_change_on_empty_log;
            quorum.directory_id = directory_id_of_disk(id, 0);
            nodes.insert(
                id,
                Node {
                    id,
                    quorum,
                    host: None,
                    disk: None,
                    incarnation: 0,
                    paused_until_ms: 0,
                    scheduled_tick_ms: None,
                    pump_scheduled: false,
                    fetches: BTreeMap::new(),
                    next_fetch_id: 1,
                    wipes: 0,
                    vote_requests_unanswered: BTreeMap::new(),
                },
            );
        }
        let snapshot_policy = SnapshotPolicyConfig {
            min_records: 16 + rng.below(64),
            min_bytes: 1,
            min_cleanable_ratio: 0.5,
            max_interval_ms: 0,
        };
        let mut host_config = HostConfig::new(
            "host-sim".into(),
            voter_ids.clone(),
            snapshot_policy,
            [500u32, 4_000, 1 << 20][rng.below(3) as usize],
        );
        host_config.mutation = options.mutation;
        host_config.check_resting_ticks = true;
        // Completions arrive over several pumps; a crash tears or drops what was not synced.
        let memory_faults = FaultConfig {
            delay_probability: [0.2, 0.5, 0.8][rng.below(3) as usize],
            tear_probability: 0.5,
            tear_every_unsynced_write: true,
            writeback_probability: 0.3,
            ..FaultConfig::default()
        };
        let segment_size_bytes = [4_096u64, 16_384, 1 << 20][rng.below(3) as usize];
        // The tail cache and the lagging voters' budget in proportion to the segments (no draw
        // of their own, so the seeds' other choices stay as they were): with small segments,
        // reads behind the cache come from the files, and what lagging voters keep is spent and
        // dropped, across rolls, truncations, resets and crashes.
        host_config.lagging_tail_budget_bytes = 8 * segment_size_bytes;
        let log_config = LogConfig {
            segment_size_bytes,
            tail_cache_bytes: 2 * segment_size_bytes,
            ..LogConfig::default()
        };
        let network = Network::new(NetworkConfig {
            delay_min_ms: 1,
            delay_max_ms: 1 + rng.below(20),
            drop_per_mille: rng.below(60),
            duplicate_per_mille: rng.below(30),
        });
        // A lone voter leads and serves for longer while its writes are in flight: its disk is
        // slower (the single-voter bug of 5e76608 needed that window).
        let disk_latency_max_ms = if voter_count == 1 {
            [3, 10, 30][rng.below(3) as usize]
        } else {
            1 + rng.below(4)
        };
        // Half the seeds run independent submissions in a shuffled order (the `Io` contract
        // promises no order between them).
        let mut memory_faults = memory_faults;
        memory_faults.reorder_completions = rng.chance(1, 2);
        let bootstrap = VoterSet::from_ids(&voter_ids).expect("valid voters");
        Cluster {
            checks: Checks::new(partitions, bootstrap),
            options,
            now_ms: 0,
            seq: 0,
            queue: BinaryHeap::new(),
            nodes,
            node_ids,
            voter_ids,
            partitions,
            host_config,
            memory_faults,
            log_config,
            network,
            rng,
            violation: None,
            trace: Fnv(0xcbf2_9ce4_8422_2325),
            events: 0,
            faults: BTreeMap::new(),
            faults_active: true,
            client_counter: 0,
            last_delivery_ms: BTreeMap::new(),
            disk_latency_max_ms,
            pending_replace: BTreeMap::new(),
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

    fn collect_violation(&mut self) {
        if self.violation.is_none() {
            self.violation = self.checks.violation.clone();
        }
    }

    fn trace_event(&mut self, tag: u8, node: NodeId, extra: u64) {
        self.now_ms.hash(&mut self.trace);
        tag.hash(&mut self.trace);
        node.hash(&mut self.trace);
        extra.hash(&mut self.trace);
    }

    fn is_alive(&self, node: NodeId) -> bool {
        self.nodes[&node].host.is_some()
    }

    fn run(&mut self) {
        for id in self.node_ids.clone() {
            let disk = self.new_disk(id, 0);
            self.nodes.get_mut(&id).expect("node").disk = Some(disk);
            // A third of the observers join 1–5 s late, when the leaders' log starts may have
            // moved past 0: they begin with FetchSnapshot.
            if !self.voter_ids.contains(&id) && self.rng.chance(1, 3) {
                self.count("late-observer");
                let at = 1_000 + self.rng.below(4_000);
                self.schedule(at, EventKind::Restart { node: id });
                continue;
            }
            self.start_node(id);
        }
        let first_fault = 100 + self.rng.below(400);
        self.schedule(first_fault, EventKind::Fault);
        let first_append = self.rng.below(50);
        self.schedule(first_append, EventKind::ClientAppend);
        if self.options.reconfig {
            self.schedule_voter_change();
        }
        self.schedule(self.options.fault_phase_ms, EventKind::EndFaults);
        let deadline_ms = self.options.fault_phase_ms + self.options.liveness_budget_ms;
        let mut events_this_ms = 0u64;
        while let Some(event) = self.queue.pop() {
            if event.at_ms > deadline_ms {
                break;
            }
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
            if self.options.trace {
                match &event.kind {
                    EventKind::Deliver { .. }
                    | EventKind::Tick { .. }
                    | EventKind::Pump { .. }
                    | EventKind::ClientAppend => {}
                    _ => eprintln!("{} ms: {}", self.now_ms, event.kind.name()),
                }
            }
            self.handle(event.kind);
            if self.options.trace {
                eprintln!("{} ms: {}", self.now_ms, self.describe());
            }
            self.check_leaders();
            self.collect_violation();
            if self.violation.is_some() {
                return;
            }
            if !self.faults_active && self.converged() {
                self.check_final_logs();
                self.collect_violation();
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
        let mut parts = Vec::new();
        for node in self.nodes.values() {
            match &node.host {
                None => parts.push(format!("{}:down", node.id)),
                Some(host) => {
                    for (partition, raft) in host.multi().partitions() {
                        parts.push(format!(
                            "{}/{partition}:{}@{} leader={:?} end={} hw={} in-flight={} durable={} flush-target={} deadline={} voters={:?} committed-voters={:?}",
                            node.id,
                            raft.state().name(),
                            raft.epoch(),
                            raft.leader_id(),
                            raft.log().log_end_offset(),
                            raft.high_watermark(),
                            host.storage_in_flight(),
                            host.store(partition).map_or(0, |s| s.log.durable_end_offset()),
                            host.store(partition).map_or(0, |s| s.flush_target),
                            raft.next_deadline_ms(),
                            raft.voter_set().ids(),
                            raft.committed_voter_set().ids(),
                        ));
                    }
                }
            }
        }
        parts.join(" ")
    }

    /// A node's event while it is paused waits until the pause ends.
    fn deferred_by_pause(&mut self, node: NodeId, kind: EventKind) -> Option<EventKind> {
        let until = self.nodes[&node].paused_until_ms;
        if until > self.now_ms {
            self.schedule(until, kind);
            None
        } else {
            Some(kind)
        }
    }

    fn handle(&mut self, kind: EventKind) {
        let target = match &kind {
            EventKind::Deliver { to, .. } => Some(*to),
            EventKind::Tick { node, .. }
            | EventKind::Pump { node, .. }
            | EventKind::SnapshotWritten { node, .. } => Some(*node),
            _ => None,
        };
        let kind = match target {
            Some(node) => match self.deferred_by_pause(node, kind) {
                Some(kind) => kind,
                None => return,
            },
            None => kind,
        };
        match kind {
            EventKind::Deliver {
                from,
                from_incarnation,
                to,
                to_incarnation,
                partition,
                message,
            } => {
                self.trace_event(1, to, from as u64 | (u64::from(partition) << 32));
                message.hash(&mut self.trace);
                if self.nodes[&to].incarnation != to_incarnation || !self.is_alive(to) {
                    return;
                }
                self.deliver(from, from_incarnation, to, partition, message);
            }
            EventKind::Tick { node, incarnation } => {
                let n = &self.nodes[&node];
                // A tick deferred by a pause comes after its deadline.
                if n.incarnation != incarnation
                    || n.scheduled_tick_ms.is_none_or(|at| at > self.now_ms)
                    || n.host.is_none()
                {
                    return;
                }
                self.trace_event(2, node, 0);
                self.nodes.get_mut(&node).expect("node").scheduled_tick_ms = None;
                self.settle(node);
            }
            EventKind::Pump { node, incarnation } => {
                if self.nodes[&node].incarnation != incarnation || !self.is_alive(node) {
                    return;
                }
                self.trace_event(3, node, 0);
                let now = self.now_ms;
                let n = self.nodes.get_mut(&node).expect("node");
                n.pump_scheduled = false;
                let result = n.host.as_mut().expect("alive").pump(now);
                if self.host_result(node, "pump", result).is_some() {
                    self.settle(node);
                }
            }
            EventKind::SnapshotWritten {
                node,
                incarnation,
                partition,
                dir,
                job,
            } => {
                if self.nodes[&node].incarnation != incarnation || !self.is_alive(node) {
                    return;
                }
                self.trace_event(4, node, job.snapshot_id.offset);
                self.checks.check_snapshot_job(
                    node,
                    partition,
                    job.snapshot_id.offset,
                    &job.entries,
                );
                let now = self.now_ms;
                let host = self
                    .nodes
                    .get_mut(&node)
                    .expect("node")
                    .host
                    .as_mut()
                    .expect("alive");
                let result = write_snapshot_job(host.io_mut(), &dir, &job, now);
                if result.is_ok() {
                    self.count("snapshot-written");
                }
                let host = self.host_mut(node);
                host.on_snapshot_generated(partition, job.snapshot_id, result);
                self.settle(node);
            }
            EventKind::Fault => {
                if self.faults_active {
                    self.inject_fault();
                    let next = self.now_ms + 100 + self.rng.below(500);
                    self.schedule(next, EventKind::Fault);
                }
            }
            EventKind::HealNetwork => {
                self.trace_event(5, 0, 0);
                self.network.heal();
            }
            EventKind::Restart { node } => {
                if !self.is_alive(node) {
                    self.trace_event(6, node, 0);
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
            EventKind::EndFaults => {
                self.trace_event(7, 0, 0);
                self.faults_active = false;
                self.network.heal();
                self.network.config.drop_per_mille = 0;
                self.network.config.duplicate_per_mille = 0;
                for id in self.node_ids.clone() {
                    self.nodes.get_mut(&id).expect("node").paused_until_ms = 0;
                    if !self.is_alive(id) {
                        self.count("restart");
                        self.start_node(id);
                    }
                }
            }
        }
    }

    /// An empty disk for node `id`, the `generation`-th it has had (a wiped observer gets a new
    /// one).
    fn new_disk(&self, id: NodeId, generation: u64) -> MemoryIo {
        MemoryIo::new(MemoryConfig {
            seed: self.options.seed
                ^ (id as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)
                ^ generation.wrapping_mul(0x2545_F491_4F6C_DD1D),
            faults: self.memory_faults.clone(),
            ..MemoryConfig::default()
        })
    }

    /// A node's disk is replaced: its process dies and it comes back empty, with a new
    /// directory id (KIP-853), to catch up in every partition from the leaders (by
    /// FetchSnapshot where their logs moved on). An observer, or a voter whose every voter set
    /// entry names its old disk (`reconfig.rs` `replaceable_voter_disks`): that voter's vote
    /// and copies no longer count until it is removed and added again with the new disk.
    fn wipe_node(&mut self, id: NodeId) {
        assert!(
            !self.checks.ever_voters.contains(&id) || self.replaceable_voter_disks().contains(&id),
            "only observers and voters recorded with their disk are wiped: a voter may not forget what it acknowledged"
        );
        self.crash_node(id);
        let node = self.nodes.get_mut(&id).expect("node");
        node.wipes += 1;
        let generation = node.wipes;
        node.quorum.directory_id = directory_id_of_disk(id, generation);
        let disk = self.new_disk(id, generation);
        self.nodes.get_mut(&id).expect("node").disk = Some(disk);
        self.trace_event(10, id, generation);
        self.checks.on_wipe(id);
    }

    /// Starts `id`'s process on its disk: `Host::open` recovers every partition.
    fn start_node(&mut self, id: NodeId) {
        let now = self.now_ms;
        let specs: Vec<PartitionSpec> = (0..self.partitions)
            .map(|partition| PartitionSpec {
                id: partition,
                dir: format!("/data/partition-{partition}").into(),
                log_config: self.log_config.clone(),
                keeps_snapshots: true,
            })
            .collect();
        let config = self.host_config.clone();
        let node = self.nodes.get_mut(&id).expect("node");
        node.incarnation += 1;
        node.paused_until_ms = 0;
        node.scheduled_tick_ms = None;
        node.pump_scheduled = false;
        node.fetches.clear();
        node.vote_requests_unanswered.clear();
        let seed = self.options.seed
            ^ (id as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)
            ^ node.incarnation.wrapping_mul(0xD1B5_4A32_D192_ED03);
        let disk = node.disk.take().expect("a down node keeps its disk");
        match Host::open(disk, config, &node.quorum, specs, seed, now) {
            Ok(host) => node.host = Some(host),
            Err(error) => {
                self.fail(format!("node {id}: restart failed to recover: {error}"));
                return;
            }
        }
        let host = self
            .nodes
            .get_mut(&id)
            .and_then(|n| n.host.as_mut())
            .expect("started");
        self.checks.on_start(id, host);
        for partition in 0..self.partitions {
            self.check_state(id, partition, "loaded at start");
        }
        self.settle(id);
    }

    /// Power loss: the process dies and the disk keeps only what was synced (unsynced writes
    /// are dropped or torn).
    fn crash_node(&mut self, id: NodeId) {
        let node = self.nodes.get_mut(&id).expect("node");
        let Some(host) = node.host.take() else {
            return;
        };
        let durable_ends: Vec<(PartitionId, u64)> = host
            .multi()
            .partitions()
            .map(|(partition, raft)| (partition, raft.log().durable_end_offset()))
            .collect();
        let mut disk = host.into_io();
        let report = disk.crash();
        node.disk = Some(disk);
        node.incarnation += 1;
        node.fetches.clear();
        node.scheduled_tick_ms = None;
        node.pump_scheduled = false;
        self.trace_event(8, id, report.torn_writes.len() as u64);
        if !report.torn_writes.is_empty() {
            self.count("torn-write");
        }
        self.checks.on_crash(id, &durable_ends);
    }

    /// The partition's leader with the highest epoch among live nodes.
    fn current_leader(&self, partition: PartitionId) -> Option<(NodeId, Epoch)> {
        self.nodes
            .values()
            .filter_map(|n| {
                let raft = n.host.as_ref()?.raft(partition)?;
                raft.is_leader().then_some((n.id, raft.epoch()))
            })
            .max_by_key(|(_, epoch)| *epoch)
    }

    /// KIP-595: at most one leader per epoch, never a node that was never a voter, and
    /// (KIP-853) a leader that removed itself leads only until the removal is committed;
    /// checked after every event.
    fn check_leaders(&mut self) {
        let mut leaders = Vec::new();
        for node in self.nodes.values() {
            let Some(host) = &node.host else { continue };
            for (partition, raft) in host.multi().partitions() {
                if raft.is_leader() {
                    leaders.push((node.id, partition, raft.epoch(), raft.high_watermark()));
                }
            }
        }
        for (node, partition, epoch, high_watermark) in leaders {
            self.checks.on_leader(node, partition, epoch);
            if !self.checks.ever_voters.contains(&node) {
                self.fail(format!(
                    "partition {partition}: observer {node} leads epoch {epoch}"
                ));
            }
            self.check_removed_leader(node, partition, epoch, high_watermark);
        }
    }

    /// After the faults: every partition has one leader, every node follows it in its epoch with
    /// the leader's log end and high-watermark, and no storage operation is in flight.
    fn converged(&self) -> bool {
        if self.nodes.values().any(|n| n.host.is_none()) {
            return false;
        }
        (0..self.partitions).all(|partition| {
            let Some((leader, epoch)) = self.current_leader(partition) else {
                return false;
            };
            let end = self.nodes[&leader]
                .host
                .as_ref()
                .and_then(|h| h.raft(partition))
                .map_or(0, |r| r.log().log_end_offset());
            self.nodes.values().all(|n| {
                let host = n.host.as_ref().expect("all alive");
                // A partition a storage error took offline never converges.
                let Some(raft) = host.raft(partition) else {
                    return false;
                };
                !host.storage_in_flight()
                    && raft.epoch() == epoch
                    && raft.leader_id() == Some(leader)
                    && raft.log().log_end_offset() == end
                    && raft.high_watermark() == end
            })
        })
    }

    /// Reads every node's log back through its host and compares (see [`Checks::final_logs`]).
    fn check_final_logs(&mut self) {
        for partition in 0..self.partitions {
            let Some((leader, _)) = self.current_leader(partition) else {
                continue;
            };
            let mut logs = BTreeMap::new();
            for id in self.node_ids.clone() {
                match checks::read_log(self.host_mut(id), partition) {
                    Ok(log) => {
                        logs.insert(id, log);
                    }
                    Err(error) => {
                        self.fail(format!("node {id}/{partition}: reading the log: {error}"));
                        return;
                    }
                }
            }
            self.checks.final_logs(partition, leader, &logs);
        }
    }

    fn report(&self) -> SimReport {
        SimReport {
            seed: self.options.seed,
            voters: self.voter_ids.len(),
            observers: self.node_ids.len() - self.voter_ids.len(),
            partitions: self.partitions as usize,
            trace_hash: self.trace.finish(),
            events: self.events,
            faults: self.faults.clone(),
            committed_batches: self.checks.committed_batches(),
            client_batches_committed: self.checks.client_batches_committed(),
            elections: self.checks.elections(),
            sim_time_ms: self.now_ms,
            violation: self.violation.clone(),
        }
    }
}
