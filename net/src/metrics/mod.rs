//! KRaft's metrics as a Prometheus text endpoint.
//!
//! [`MetricsRegistry`] holds gauges, counters and windowed statistics; [`RaftMetrics`] creates
//! the `raft-metrics` group with Kafka's metric names, which the node feeds. [`MetricsServer`]
//! answers `GET /metrics` (HTTP/1.0, one request per connection) on `metrics.listener` with the
//! registry in Prometheus' text format, named the way Kafka's JMX exporter names them: group
//! `kafka.server:type=raft-metrics`, metric `current-epoch` →
//! `kafka_server_raft_metrics_current_epoch{partition="__cluster_metadata-0"}`.
//!
//! Windowed statistics follow Kafka's defaults (`metrics.sample.window.ms` = 30 s,
//! `metrics.num.samples` = 2): an average, maximum or rate covers the last one to two windows.

mod http;
mod registry;

pub use http::{HttpError, HttpRequest, MetricsServer, fuzz_metrics_request, parse_request};
pub use registry::{Counter, Gauge, MetricsRegistry, Rate, StateGauge, WindowedStat};

/// The `raft-metrics` group of one partition, with Kafka's names.
pub struct RaftMetrics {
    /// leader, candidate, voted, follower, unattached, observer, resigned.
    pub current_state: StateGauge,
    pub current_leader: Gauge,
    pub current_vote: Gauge,
    pub current_epoch: Gauge,
    pub high_watermark: Gauge,
    pub log_end_offset: Gauge,
    pub log_end_epoch: Gauge,
    /// Milliseconds from append to commit: `commit-latency-avg`, `commit-latency-max`.
    pub commit_latency_ms: WindowedStat,
    /// Milliseconds from becoming candidate to a known leader.
    pub election_latency_ms: WindowedStat,
    /// `append-records-rate`: records appended by this node as leader, per second.
    pub append_records: Rate,
    /// `fetch-records-rate`: records fetched from the leader, per second.
    pub fetch_records: Rate,
    /// `poll-idle-ratio-avg`: share of the event loop's time spent waiting.
    pub poll_idle_ratio: WindowedStat,
    /// Snapshots on disk, the newest one's size, and how many were written and fetched.
    pub snapshot_count: Gauge,
    pub latest_snapshot_size_bytes: Gauge,
    pub snapshots_generated: Counter,
    pub snapshots_fetched: Counter,
}

impl RaftMetrics {
    pub const STATES: &'static [&'static str] = &[
        "leader",
        "candidate",
        "voted",
        "follower",
        "unattached",
        "observer",
        "resigned",
    ];

    /// Unregisters the group of `partition` (the partition left the node).
    pub fn unregister(registry: &MetricsRegistry, partition: &str) {
        registry.unregister(&[("partition", partition)]);
    }

    /// Registers the group for `partition` (e.g. `__cluster_metadata-0`). `poll_idle_ratio` is
    /// the node's event loop's, which every partition's group shows.
    pub fn new(
        registry: &MetricsRegistry,
        partition: &str,
        poll_idle_ratio: &WindowedStat,
    ) -> RaftMetrics {
        const GROUP: &str = "kafka_server_raft_metrics";
        let labels = [("partition", partition)];
        let name = |metric: &str| format!("{GROUP}_{}", metric.replace('-', "_"));
        RaftMetrics {
            current_state: registry.state_gauge(
                &name("current-state"),
                "The node's quorum state (1 for the current one)",
                &labels,
                Self::STATES,
            ),
            current_leader: registry.gauge(
                &name("current-leader"),
                "Id of the known leader, -1 if none",
                &labels,
            ),
            current_vote: registry.gauge(
                &name("current-vote"),
                "Id of the voter this node voted for in the current epoch, -1 if none",
                &labels,
            ),
            current_epoch: registry.gauge(&name("current-epoch"), "The current epoch", &labels),
            high_watermark: registry.gauge(
                &name("high-watermark"),
                "The high watermark, -1 if unknown",
                &labels,
            ),
            log_end_offset: registry.gauge(&name("log-end-offset"), "The log end offset", &labels),
            log_end_epoch: registry.gauge(
                &name("log-end-epoch"),
                "The epoch of the last record in the log",
                &labels,
            ),
            commit_latency_ms: registry.windowed(
                &name("commit-latency"),
                "Milliseconds from append to commit",
                &labels,
            ),
            election_latency_ms: registry.windowed(
                &name("election-latency"),
                "Milliseconds an election took",
                &labels,
            ),
            append_records: registry.rate(
                &name("append-records-rate"),
                "Records appended per second",
                &labels,
            ),
            fetch_records: registry.rate(
                &name("fetch-records-rate"),
                "Records fetched from the leader per second",
                &labels,
            ),
            poll_idle_ratio: registry.windowed_shared(
                &name("poll-idle-ratio"),
                "Share of time the event loop waited",
                &labels,
                poll_idle_ratio,
            ),
            snapshot_count: registry.gauge(&name("snapshot-count"), "Snapshots on disk", &labels),
            latest_snapshot_size_bytes: registry.gauge(
                &name("latest-snapshot-size-bytes"),
                "Size of the newest snapshot",
                &labels,
            ),
            snapshots_generated: registry.counter(
                &name("snapshots-generated-total"),
                "Snapshots this node wrote",
                &labels,
            ),
            snapshots_fetched: registry.counter(
                &name("snapshots-fetched-total"),
                "Snapshots this node fetched from the leader",
                &labels,
            ),
        }
    }
}
