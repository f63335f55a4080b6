//! The node's metrics: KRaft's `raft-metrics` group per partition, fed from the event loop and
//! served as Prometheus text on `metrics.listener` (`crate::metrics`).
//!
//! The loop calls [`Observer::observe`] once per iteration, after the core and the storage
//! have done their work, and [`Observer::poll_wait`] around its wait. Everything is derived
//! from state the loop already holds (the core's quorum state and log ends, the engine's
//! snapshot folder), so feeding the metrics never changes what the node does.
//!
//! How each metric is measured:
//!
//! | metric | source |
//! | --- | --- |
//! | current-state, current-leader, current-epoch, current-vote | the core's quorum state (`observer` for a non-voter that follows or waits) |
//! | high-watermark, log-end-offset, log-end-epoch | the core's log view |
//! | commit-latency-avg/max | leader only: the loop time from a log end offset first seen to the high-watermark passing it |
//! | election-latency-avg/max | from entering Candidate to a known leader of a later or equal epoch |
//! | append-records-rate | records the log end moved by while leader |
//! | fetch-records-rate | records the log end moved by while following |
//! | poll-idle-ratio-avg | per loop iteration: time waiting / (waiting + working); the node's one loop, so one window that every partition's group shows |
//! | snapshot-count, latest-snapshot-size-bytes | the partition's `checkpoints/` folder, listed at most once a second and only when the core's latest or log-start snapshot changed (the node adds and deletes snapshot files only then), and each folder once every [`SNAPSHOT_REFRESH_ROUNDS`] seconds whatever changed |
//! | snapshots-generated-total, snapshots-fetched-total | the host's per-partition counts of snapshots written (state machine, retention and DeleteRecords cuts) and installed from a leader, since start ([`Observer::observe_snapshot_totals`]) |
//!
//! | ringlog_event_loop_turns_total, ringlog_event_loop_turns_held_over_total{over_ms}, ringlog_event_loop_turns_cpu_over_total{over_ms}, ringlog_event_loop_longest_turn_ms | node-wide, since the start ([`StallWatch`]): every turn of the loop, those that held its thread (wall clock) or used its CPU past 5, 20, 100 and 500 ms, and the longest |
//!
//! Beside the metrics, [`StallWatch`] logs a warning when one turn of the loop held the thread
//! for longer than a quarter of the fetch timeout, naming the slowest step of that turn, and
//! when the loop woke that much later than its timer asked (the thread was held by another task
//! on it, or the process was not scheduled). Every timer of the quorum (fetch timeout, check
//! quorum, election timeout) is measured on this one thread, so a stall of that size is what
//! makes a healthy leader look dead to its followers, or a leader resign. Turns past 5 ms are
//! logged at debug level (`RUST_LOG=ringlog_net::node::observe=debug`) with the same fields,
//! among them the thread's voluntary context switches in the turn (it blocked in a system call)
//! and involuntary ones (another thread or process took the CPU).

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use ringlog_replication::{EpochState, MultiRaft, NodeId, OffsetAndEpoch, PartitionId};

use crate::metrics::{Counter, Gauge, MetricsRegistry, RaftMetrics, WindowedStat};

/// How often the snapshot folders whose snapshots changed are listed.
const SNAPSHOT_SCAN_INTERVAL: Duration = Duration::from_secs(1);
/// Every folder is listed again once in this many scan rounds (spread over the rounds, so a
/// round lists at most 1/this of the folders besides the changed ones): a file added or
/// removed by hand shows within a minute. Until 2026-12-06 every partition's folder was
/// listed every second on the loop thread: with 1,000 partitions a turn of ~5 ms each second.
const SNAPSHOT_REFRESH_ROUNDS: u64 = 60;
/// Appended offsets remembered per partition for commit latency; older ones are dropped (a
/// stalled quorum must not grow memory).
const MAX_COMMIT_SAMPLES: usize = 4096;

struct PartitionObserver {
    metrics: RaftMetrics,
    /// The metric label, `<topic>-<index>`.
    label: String,
    checkpoints: PathBuf,
    /// The core's (latest, log-start) snapshot ids when `checkpoints` was last listed (`None`
    /// inside: no group then); `None`: never listed.
    snapshots_listed_at: Option<Option<SnapshotSignature>>,
    last_log_end_offset: Option<u64>,
    was_leader: bool,
    /// Loop time at which an election started, until a leader is known.
    candidate_since: Option<Instant>,
    /// (offset after the append, when it was first seen) waiting for the high-watermark.
    appended: VecDeque<(u64, Instant)>,
    /// What the last turn saw: a partition whose view did not move is skipped (with a hundred
    /// partitions, setting every gauge of every partition on every turn was 4-6 % of a loaded
    /// node's CPU, 2026-12-04).
    last_seen: Option<Seen>,
}

/// The core's latest snapshot and the one at its log start: the node writes or installs a
/// snapshot file only as the first changes, and deletes older ones only as the second does.
type SnapshotSignature = (Option<OffsetAndEpoch>, Option<OffsetAndEpoch>);

/// A partition's view as the metrics show it; everything `observe` records follows from a
/// change of it.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Seen {
    state: &'static str,
    leader: Option<NodeId>,
    epoch: u32,
    voted_for: Option<NodeId>,
    high_watermark: u64,
    end: (u64, u32),
}

pub(crate) struct Observer {
    registry: MetricsRegistry,
    /// Partitions taken offline by a storage error (Kafka's OfflinePartitionsCount for this
    /// node's replicas; its offline log directories, per partition).
    offline_partitions: Gauge,
    /// Partitions whose flush waits for disk space (ENOSPC, EDQUOT).
    partitions_waiting_for_space: Gauge,
    tail_cache_bytes: Gauge,
    partitions: BTreeMap<PartitionId, PartitionObserver>,
    /// Partitions added since the last `observe`: looked at then whether or not their group
    /// was reached meanwhile.
    unseen: BTreeSet<PartitionId>,
    last_snapshot_scan: Option<Instant>,
    /// Scan rounds so far: which folders the round lists whatever changed.
    snapshot_scan_rounds: u64,
    busy_since: Instant,
    /// The event loop's `poll-idle-ratio`, one window that every partition's group shows:
    /// recorded once per wake-up, where a window per partition cost 100 clock reads and lock
    /// round trips per turn, 1.35 % of all CPU samples with 100 partitions (docs/benchmarks.md).
    poll_idle_ratio: WindowedStat,
}

impl Observer {
    /// `partitions`: each hosted partition with its metric label (`__cluster_metadata-0`) and
    /// its folder.
    pub(crate) fn new(
        partitions: impl IntoIterator<Item = (PartitionId, String, PathBuf)>,
    ) -> Observer {
        let registry = MetricsRegistry::new();
        let offline_partitions = registry.gauge(
            "ringlog_offline_partitions",
            "Partitions of this node taken offline by a storage error (EIO).",
            &[],
        );
        let partitions_waiting_for_space = registry.gauge(
            "ringlog_partitions_waiting_for_space",
            "Partitions of this node whose writes wait for disk space (ENOSPC, EDQUOT).",
            &[],
        );
        let tail_cache_bytes = registry.gauge(
            "ringlog_tail_cache_bytes",
            "Bytes of appended batches this node keeps in memory for its followers' reads: each leader's tail cache, and what lagging voters have not fetched yet (replica.lag.cache.max.bytes).",
            &[],
        );
        let mut observer = Observer {
            tail_cache_bytes,
            registry,
            offline_partitions,
            partitions_waiting_for_space,
            partitions: BTreeMap::new(),
            unseen: BTreeSet::new(),
            last_snapshot_scan: None,
            snapshot_scan_rounds: 0,
            busy_since: Instant::now(),
            poll_idle_ratio: WindowedStat::default(),
        };
        for (id, label, dir) in partitions {
            observer.add_partition(id, label, &dir);
        }
        observer
    }

    /// A partition joined the node (at start, or a topic created at runtime): its metric group
    /// is registered under `label` (`<topic>-<index>`).
    pub(crate) fn add_partition(&mut self, id: PartitionId, label: String, dir: &std::path::Path) {
        let partition = PartitionObserver {
            metrics: RaftMetrics::new(&self.registry, &label, &self.poll_idle_ratio),
            label,
            checkpoints: dir.join("checkpoints"),
            snapshots_listed_at: None,
            last_log_end_offset: None,
            last_seen: None,
            was_leader: false,
            candidate_since: None,
            appended: VecDeque::new(),
        };
        let previous = self.partitions.insert(id, partition);
        debug_assert!(previous.is_none(), "partition {id} observed twice");
        self.unseen.insert(id);
    }

    /// A partition left the node (its topic was deleted): its metrics leave the scrape.
    pub(crate) fn remove_partition(&mut self, id: PartitionId) {
        if let Some(partition) = self.partitions.remove(&id) {
            RaftMetrics::unregister(&self.registry, &partition.label);
        }
        self.unseen.remove(&id);
    }

    pub(crate) fn registry(&self) -> MetricsRegistry {
        self.registry.clone()
    }

    /// The node's storage faults (storage_faults.rs).
    pub(crate) fn observe_storage_faults(&mut self, offline: usize, waiting_for_space: usize) {
        self.offline_partitions.set(offline as f64);
        self.partitions_waiting_for_space
            .set(waiting_for_space as f64);
    }

    /// The bytes of batches the node's logs keep in memory (`Host::tail_cache_bytes`).
    pub(crate) fn observe_tail_cache(&mut self, bytes: u64) {
        self.tail_cache_bytes.set(bytes as f64);
    }

    /// The loop is about to wait; returns the instant the wait began.
    pub(crate) fn poll_wait_begins(&self) -> Instant {
        Instant::now()
    }

    /// The loop woke up after waiting since `wait_began`.
    pub(crate) fn poll_wait_ends(&mut self, wait_began: Instant) {
        let now = Instant::now();
        let idle = now.saturating_duration_since(wait_began).as_secs_f64();
        let busy = wait_began
            .saturating_duration_since(self.busy_since)
            .as_secs_f64();
        if idle + busy > 0.0 {
            self.poll_idle_ratio.record_at(idle / (idle + busy), now);
        }
        self.busy_since = now;
    }

    /// Reads the core's state into the gauges and derives the latencies and rates.
    /// `snapshots-generated-total` and `snapshots-fetched-total` follow each partition's own
    /// counts (`PartitionSnapshots::generated_total`, `fetched_total`), given as
    /// (partition, generated, fetched).
    pub(crate) fn observe_snapshot_totals(
        &mut self,
        totals: impl Iterator<Item = (PartitionId, u64, u64)>,
    ) {
        for (id, generated, fetched) in totals {
            let Some(p) = self.partitions.get(&id) else {
                continue;
            };
            let m = &p.metrics;
            m.snapshots_generated
                .increment(generated.saturating_sub(m.snapshots_generated.get()));
            m.snapshots_fetched
                .increment(fetched.saturating_sub(m.snapshots_fetched.get()));
        }
    }

    /// `touched`: the groups reached since the last call ([`MultiRaft::take_touched`]); any
    /// other shows what it showed then. A hundred partitions walked on every turn cost ~2.5 %
    /// of a loaded voter's CPU (2026-12-06).
    pub(crate) fn observe(&mut self, multi: &MultiRaft, touched: &BTreeSet<PartitionId>) {
        let now = Instant::now();
        let unseen = std::mem::take(&mut self.unseen);
        for id in touched.union(&unseen).copied() {
            let Some(p) = self.partitions.get_mut(&id) else {
                continue;
            };
            let Some(raft) = multi.partition(id) else {
                // Observed once its group starts.
                self.unseen.insert(id);
                continue;
            };
            let m = &p.metrics;
            // A voter of the set in force (KIP-853: a node added since the start is one, a
            // removed one is not), whatever `controller.quorum.voters` says.
            let is_voter = raft.voter_set().contains(multi.node_id());
            let state = match raft.state() {
                EpochState::Leader(_) => "leader",
                EpochState::Prospective(_) => "prospective",
                EpochState::Candidate(_) => "candidate",
                EpochState::Voted(_) => "voted",
                EpochState::Resigned(_) => "resigned",
                EpochState::Follower(_) if !is_voter => "observer",
                EpochState::Unattached(_) if !is_voter => "observer",
                EpochState::Follower(_) => "follower",
                EpochState::Unattached(_) => "unattached",
            };
            let leader = raft.leader_id();
            let high_watermark = raft.high_watermark();
            let end = raft.log().end_offset_and_epoch();
            let seen = Seen {
                state,
                leader,
                epoch: raft.epoch(),
                voted_for: raft.election_state().voted_for,
                high_watermark,
                end: (end.offset, end.epoch),
            };
            if p.last_seen == Some(seen) {
                continue;
            }
            p.last_seen = Some(seen);
            m.current_state.set(state);
            m.current_leader.set(leader.map_or(-1.0, f64::from));
            m.current_epoch.set(f64::from(raft.epoch()));
            m.current_vote
                .set(raft.election_state().voted_for.map_or(-1.0, f64::from));
            m.high_watermark.set(high_watermark as f64);
            m.log_end_offset.set(end.offset as f64);
            m.log_end_epoch.set(f64::from(end.epoch));

            // Elections: from the first moment as candidate to a known leader.
            match (state, leader) {
                ("candidate", _) => {
                    p.candidate_since.get_or_insert(now);
                }
                (_, Some(_)) => {
                    if let Some(since) = p.candidate_since.take() {
                        m.election_latency_ms
                            .record(now.saturating_duration_since(since).as_secs_f64() * 1e3);
                    }
                }
                _ => {}
            }

            // Record rates and commit latency from the log end's movement.
            let is_leader = state == "leader";
            if is_leader != p.was_leader {
                // A new term: offsets appended in another role say nothing about commits here.
                p.appended.clear();
                p.was_leader = is_leader;
            }
            if let Some(previous) = p.last_log_end_offset
                && end.offset > previous
            {
                let records = (end.offset - previous) as f64;
                if is_leader {
                    m.append_records.record(records);
                    if p.appended.len() == MAX_COMMIT_SAMPLES {
                        p.appended.pop_front();
                    }
                    p.appended.push_back((end.offset, now));
                } else {
                    m.fetch_records.record(records);
                }
            }
            p.last_log_end_offset = Some(end.offset);
            while let Some(&(offset, seen)) = p.appended.front() {
                if high_watermark < offset {
                    break;
                }
                m.commit_latency_ms
                    .record(now.saturating_duration_since(seen).as_secs_f64() * 1e3);
                p.appended.pop_front();
            }
        }
        let scan_due = self
            .last_snapshot_scan
            .is_none_or(|last| now.saturating_duration_since(last) >= SNAPSHOT_SCAN_INTERVAL);
        if scan_due {
            self.last_snapshot_scan = Some(now);
            self.list_snapshot_folders(|id| {
                multi.partition(id).map(|raft| {
                    let log = raft.log();
                    (log.latest_snapshot_id(), log.log_start_snapshot_id())
                })
            });
        }
    }

    /// One scan round: lists the `checkpoints/` folder of each partition whose snapshots
    /// changed since its last listing (`signature`: the core's view; `None` for a group not
    /// started yet) and of every [`SNAPSHOT_REFRESH_ROUNDS`]th other one, in turn. Returns how
    /// many folders it listed.
    fn list_snapshot_folders(
        &mut self,
        signature: impl Fn(PartitionId) -> Option<SnapshotSignature>,
    ) -> usize {
        let round = self.snapshot_scan_rounds;
        self.snapshot_scan_rounds += 1;
        let mut listed = 0;
        for (&id, p) in &mut self.partitions {
            let now_seen = signature(id);
            let refresh = (u64::from(id) + round).is_multiple_of(SNAPSHOT_REFRESH_ROUNDS);
            if p.snapshots_listed_at == Some(now_seen) && !refresh {
                continue;
            }
            p.snapshots_listed_at = Some(now_seen);
            let (count, latest_size_bytes) = scan_snapshots(&p.checkpoints);
            p.metrics.snapshot_count.set(count as f64);
            p.metrics
                .latest_snapshot_size_bytes
                .set(latest_size_bytes as f64);
            listed += 1;
        }
        listed
    }
}

/// What a turn of the loop is counted against in the metrics (`ringlog_event_loop_turns_*`):
/// issue 16 asks that no turn hold the thread for more than a few milliseconds.
const TURN_THRESHOLDS_MS: [u64; 4] = [5, 20, 100, 500];

/// The loop's turns as the metrics endpoint shows them: how many, how many held the thread (or
/// used its CPU) past each of [`TURN_THRESHOLDS_MS`], and the longest since the start.
struct TurnMetrics {
    turns: Counter,
    held_over: [Counter; TURN_THRESHOLDS_MS.len()],
    cpu_over: [Counter; TURN_THRESHOLDS_MS.len()],
    longest_ms: Gauge,
}

impl TurnMetrics {
    fn new(registry: &MetricsRegistry) -> TurnMetrics {
        let over = |name: &str, help: &str| {
            TURN_THRESHOLDS_MS
                .map(|ms| registry.counter(name, help, &[("over_ms", &ms.to_string())]))
        };
        TurnMetrics {
            turns: registry.counter(
                "ringlog_event_loop_turns_total",
                "Turns of the event loop since the node started",
                &[],
            ),
            held_over: over(
                "ringlog_event_loop_turns_held_over_total",
                "Turns of the event loop that held its thread longer than over_ms (wall clock: a stopped process counts)",
            ),
            cpu_over: over(
                "ringlog_event_loop_turns_cpu_over_total",
                "Turns of the event loop that used more than over_ms of its thread's CPU time",
            ),
            longest_ms: registry.gauge(
                "ringlog_event_loop_longest_turn_ms",
                "The longest turn of the event loop since the node started, in milliseconds",
                &[],
            ),
        }
    }
}

/// Times the steps of one event-loop turn (see the module doc).
pub(crate) struct StallWatch {
    metrics: TurnMetrics,
    warn_after: Duration,
    turn_began: Instant,
    /// The slowest step of the current turn: (time, what, detail).
    slowest: Option<(Duration, &'static str, &'static str)>,
    /// The slowest part inside the steps of the current turn (a work item, or one of `pump`'s
    /// stages): what to look at when a step held the thread.
    /// Shared with the host's probe ([`StallWatch::probe`]), which times its work items.
    slowest_part: std::rc::Rc<std::cell::Cell<Option<(Duration, &'static str)>>>,
    steps: usize,
    /// The loop thread's usage when the turn began: a turn that held the thread for long with
    /// little CPU was blocked (a synchronous fsync: voluntary switches), not scheduled (another
    /// process ran: involuntary ones) or stopped (SIGSTOP), not computing.
    turn_usage_began: ThreadUsage,
}

/// What this thread has used so far: its CPU time, and how often it gave the CPU up waiting
/// (voluntary context switches: a blocking system call) or had it taken (involuntary: another
/// thread or process ran). One `getrusage` call.
#[derive(Clone, Copy, Default)]
struct ThreadUsage {
    cpu: Duration,
    voluntary_switches: i64,
    involuntary_switches: i64,
}

impl ThreadUsage {
    fn now() -> ThreadUsage {
        // SAFETY: an all-zero `rusage` is a valid value (integers and timevals).
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: getrusage writes one rusage into the valid, exclusively borrowed `usage`.
        if unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut usage) } != 0 {
            return ThreadUsage::default();
        }
        let time = |t: libc::timeval| {
            Duration::new(
                t.tv_sec.max(0) as u64,
                (t.tv_usec.clamp(0, 999_999) * 1000) as u32,
            )
        };
        ThreadUsage {
            cpu: time(usage.ru_utime) + time(usage.ru_stime),
            voluntary_switches: usage.ru_nvcsw,
            involuntary_switches: usage.ru_nivcsw,
        }
    }

    fn since(self, earlier: ThreadUsage) -> ThreadUsage {
        ThreadUsage {
            cpu: self.cpu.saturating_sub(earlier.cpu),
            voluntary_switches: self.voluntary_switches - earlier.voluntary_switches,
            involuntary_switches: self.involuntary_switches - earlier.involuntary_switches,
        }
    }
}

impl StallWatch {
    /// Warns past a quarter of `fetch_timeout_ms` (at least 1 ms); counts turns in `registry`.
    pub(crate) fn new(fetch_timeout_ms: u64, registry: &MetricsRegistry) -> StallWatch {
        StallWatch {
            metrics: TurnMetrics::new(registry),
            warn_after: Duration::from_millis((fetch_timeout_ms / 4).max(1)),
            turn_began: Instant::now(),
            slowest: None,
            slowest_part: Default::default(),
            steps: 0,
            turn_usage_began: ThreadUsage::now(),
        }
    }

    /// A turn begins (the loop woke up).
    pub(crate) fn begin_turn(&mut self) {
        self.turn_began = Instant::now();
        self.slowest = None;
        self.slowest_part.set(None);
        self.steps = 0;
        self.turn_usage_began = ThreadUsage::now();
    }

    /// A step that began at `began` ended now: `what` it was (`"tick"`, `"request"`, ...) and a
    /// detail (the API's name, or "").
    pub(crate) fn step(&mut self, began: Instant, what: &'static str, detail: &'static str) {
        let took = began.elapsed();
        self.steps += 1;
        if self.slowest.is_none_or(|(slowest, _, _)| took > slowest) {
            self.slowest = Some((took, what, detail));
        }
    }

    /// A part of a step (a work item, a stage of `pump`) that began at `began` ended now.
    pub(crate) fn part(&mut self, began: Instant, name: &'static str) {
        record_part(&self.slowest_part, began.elapsed(), name);
    }

    /// The host's timing hooks: each work item and `pump` stage it runs is a part of the
    /// current step.
    pub(crate) fn probe(&self) -> PartProbe {
        PartProbe {
            began: Instant::now(),
            slowest_part: self.slowest_part.clone(),
        }
    }

    /// The turn ends (the loop is about to wait): counts it, logs it at debug level past the
    /// smallest of [`TURN_THRESHOLDS_MS`], and warns if it held the thread past `warn_after`.
    pub(crate) fn end_turn(&mut self) {
        let held = self.turn_began.elapsed();
        self.metrics.turns.increment(1);
        let held_ms = held.as_secs_f64() * 1e3;
        if held_ms > self.metrics.longest_ms.get() {
            self.metrics.longest_ms.set(held_ms);
        }
        if held < Duration::from_millis(TURN_THRESHOLDS_MS[0]) {
            return;
        }
        let usage = ThreadUsage::now().since(self.turn_usage_began);
        let cpu = usage.cpu;
        for (index, ms) in TURN_THRESHOLDS_MS.into_iter().enumerate() {
            let limit = Duration::from_millis(ms);
            if held > limit {
                self.metrics.held_over[index].increment(1);
            }
            if cpu > limit {
                self.metrics.cpu_over[index].increment(1);
            }
        }
        let (slowest, what, detail) = self.slowest.unwrap_or((Duration::ZERO, "nothing", ""));
        let (part_took, part) = self
            .slowest_part
            .get()
            .unwrap_or((Duration::ZERO, "nothing"));
        // The same fields at two levels (tracing's level is fixed per call site).
        macro_rules! turn_event {
            ($level:ident, $($message:tt)+) => {
                tracing::$level!(
                    held_ms = held.as_millis() as u64,
                    cpu_ms = cpu.as_millis() as u64,
                    voluntary_switches = usage.voluntary_switches,
                    involuntary_switches = usage.involuntary_switches,
                    slowest_step = what,
                    slowest_detail = detail,
                    slowest_ms = slowest.as_millis() as u64,
                    slowest_part = part,
                    slowest_part_ms = part_took.as_millis() as u64,
                    steps = self.steps,
                    $($message)+
                )
            };
        }
        if held < self.warn_after {
            turn_event!(debug, "event loop turn past {} ms", TURN_THRESHOLDS_MS[0]);
        } else {
            turn_event!(
                warn,
                "event loop stalled: one turn held the thread past a quarter of the fetch timeout"
            );
        }
    }

    /// The loop's timer was due at `due` and it woke now.
    pub(crate) fn woke_after_timer(&self, due: Instant) {
        let late = Instant::now().saturating_duration_since(due);
        if late >= self.warn_after {
            tracing::warn!(
                late_ms = late.as_millis() as u64,
                "event loop woke late: another task held the thread, or the process was not scheduled"
            );
        }
    }
}

/// Complete snapshots in a `checkpoints/` folder and the size of the newest. The names sort by
/// end offset (20-digit, zero-padded), so the greatest name is the newest snapshot.
fn scan_snapshots(folder: &std::path::Path) -> (usize, u64) {
    let Ok(entries) = std::fs::read_dir(folder) else {
        return (0, 0);
    };
    let mut count = 0;
    let mut newest: Option<(String, u64)> = None;
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.ends_with(".checkpoint") {
            continue;
        }
        count += 1;
        let size = entry.metadata().map_or(0, |m| m.len());
        if newest.as_ref().is_none_or(|(n, _)| name > *n) {
            newest = Some((name, size));
        }
    }
    (count, newest.map_or(0, |(_, size)| size))
}

fn record_part(
    slowest: &std::cell::Cell<Option<(Duration, &'static str)>>,
    took: Duration,
    name: &'static str,
) {
    if slowest.get().is_none_or(|(longest, _)| took > longest) {
        slowest.set(Some((took, name)));
    }
}

/// [`StallWatch::probe`]: times the host's parts with the runtime's clock.
pub(crate) struct PartProbe {
    began: Instant,
    slowest_part: std::rc::Rc<std::cell::Cell<Option<(Duration, &'static str)>>>,
}

impl ringlog_replication::host::Probe for PartProbe {
    fn begin(&mut self) {
        self.began = Instant::now();
    }

    fn end(&mut self, name: &'static str) {
        record_part(&self.slowest_part, self.began.elapsed(), name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A turn that holds the thread past 5 ms without computing (here a sleep, as a blocking
    /// system call would) is counted as held past 5 ms and not as CPU; a short one only as a
    /// turn; the longest is kept.
    #[test]
    fn turns_are_counted_by_how_long_they_held_the_thread_and_used_its_cpu() {
        let registry = MetricsRegistry::new();
        let mut watch = StallWatch::new(60_000, &registry);
        watch.begin_turn();
        watch.end_turn();
        watch.begin_turn();
        std::thread::sleep(Duration::from_millis(8));
        watch.end_turn();
        let text = registry.render();
        let value = |sample: &str| -> f64 {
            text.lines()
                .find_map(|line| line.strip_prefix(sample)?.strip_prefix(' '))
                .unwrap_or_else(|| panic!("{sample} in {text}"))
                .parse()
                .unwrap()
        };
        assert_eq!(value("ringlog_event_loop_turns_total"), 2.0);
        assert_eq!(
            value("ringlog_event_loop_turns_held_over_total{over_ms=\"5\"}"),
            1.0
        );
        assert_eq!(
            value("ringlog_event_loop_turns_cpu_over_total{over_ms=\"5\"}"),
            0.0
        );
        assert!(value("ringlog_event_loop_longest_turn_ms") >= 8.0);
    }

    /// A scan round lists only the folders whose snapshots changed in the core's view, and
    /// every folder once in [`SNAPSHOT_REFRESH_ROUNDS`] rounds; a listing shows what the folder
    /// holds.
    #[test]
    fn a_scan_round_lists_the_folders_whose_snapshots_changed_and_a_share_of_the_others() {
        let dir = tempfile::tempdir().unwrap();
        let folders: Vec<PathBuf> = (0..3).map(|i| dir.path().join(format!("t-{i}"))).collect();
        let mut observer = Observer::new(
            folders
                .iter()
                .enumerate()
                .map(|(i, folder)| (i as PartitionId, format!("t-{i}"), folder.clone())),
        );
        let signatures = std::cell::RefCell::new(vec![(None, None); 3]);
        let signature = |id: PartitionId| Some(signatures.borrow()[id as usize]);
        let count = |observer: &Observer, id: PartitionId| {
            observer.partitions[&id].metrics.snapshot_count.get()
        };

        assert_eq!(observer.list_snapshot_folders(signature), 3, "never listed");
        assert_eq!(
            observer.list_snapshot_folders(signature),
            0,
            "nothing changed"
        );
        let checkpoints = folders[1].join("checkpoints");
        std::fs::create_dir_all(&checkpoints).unwrap();
        std::fs::write(
            checkpoints.join(format!("{:020}-{:020}.checkpoint", 100, 1)),
            [0u8; 10],
        )
        .unwrap();
        assert_eq!(observer.list_snapshot_folders(signature), 0);
        assert_eq!(count(&observer, 1), 0.0, "not listed since");

        signatures.borrow_mut()[1].0 = Some(OffsetAndEpoch {
            offset: 100,
            epoch: 1,
        });
        assert_eq!(observer.list_snapshot_folders(signature), 1);
        assert_eq!(count(&observer, 1), 1.0);

        // A file removed behind the core's back shows at the partition's refresh round.
        std::fs::remove_dir_all(&checkpoints).unwrap();
        let mut listed = 0;
        for _ in 0..SNAPSHOT_REFRESH_ROUNDS {
            listed += observer.list_snapshot_folders(signature);
        }
        assert_eq!(
            listed, 3,
            "each folder once in {SNAPSHOT_REFRESH_ROUNDS} rounds"
        );
        assert_eq!(count(&observer, 1), 0.0);
    }

    #[test]
    fn the_snapshot_scan_counts_complete_checkpoints_and_sizes_the_newest() {
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().join("checkpoints");
        assert_eq!(scan_snapshots(&folder), (0, 0), "no folder yet");
        std::fs::create_dir(&folder).unwrap();
        let name = |end: u64, epoch: u64| format!("{end:020}-{epoch:020}.checkpoint");
        std::fs::write(folder.join(name(100, 1)), vec![0u8; 10]).unwrap();
        std::fs::write(folder.join(name(2000, 2)), vec![0u8; 30]).unwrap();
        // Being written or waiting for deletion: not a snapshot.
        std::fs::write(folder.join(name(3000, 2) + ".part"), vec![0u8; 50]).unwrap();
        std::fs::write(folder.join(name(50, 1) + ".deleted"), vec![0u8; 5]).unwrap();
        assert_eq!(scan_snapshots(&folder), (2, 30));
    }
}
