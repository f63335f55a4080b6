//! The pure parts of `perf append`: when each request is due (open-loop rate), which partition
//! each request goes to, and the JSON summary's shape. No sockets, no clock: the caller passes
//! the start instant, so every rule here is unit-tested.

use std::time::Duration;

use serde::Serialize;

/// When client `client` of `clients` sends its `k`-th request at a total rate of `rate`
/// records/s, each request carrying `records_per_request` records.
///
/// Open loop: the due times do not depend on when answers come back, so a slow answer makes
/// the next requests late, and their latency is measured from the due time (not from the
/// moment they could finally leave): queueing shows up in the figures instead of being hidden
/// by a client that politely waited (coordinated omission). Clients are staggered by
/// `interval / clients` so that N clients at the same rate do not send in bursts of N.
///
/// Worked example: rate 1000 records/s, 2 clients, 1 record per request: each client sends
/// 500 requests/s, one every 2 ms; client 0 at 0, 2, 4 ms…, client 1 at 1, 3, 5 ms….
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RateSchedule {
    interval: Duration,
    offset: Duration,
}

impl RateSchedule {
    pub fn new(
        rate_records_per_sec: f64,
        records_per_request: u64,
        clients: usize,
        client: usize,
    ) -> RateSchedule {
        assert!(rate_records_per_sec > 0.0 && rate_records_per_sec.is_finite());
        assert!(records_per_request > 0 && clients > 0 && client < clients);
        let requests_per_sec_per_client =
            rate_records_per_sec / records_per_request as f64 / clients as f64;
        let interval = Duration::from_secs_f64(1.0 / requests_per_sec_per_client);
        RateSchedule {
            interval,
            offset: interval.mul_f64(client as f64 / clients as f64),
        }
    }

    /// The `k`-th request's due time, measured from the run's start.
    pub fn due(&self, k: u64) -> Duration {
        self.offset + self.interval.mul_f64(k as f64)
    }

    /// How many requests were due in `[due(k), end)`: those a client that fell behind never
    /// sent before the run ended (reported, so that an overloaded open-loop run cannot look
    /// good by dropping its backlog).
    pub fn due_before(&self, k: u64, end: Duration) -> u64 {
        let first = self.due(k);
        if first >= end {
            return 0;
        }
        ((end - first).as_secs_f64() / self.interval.as_secs_f64()).ceil() as u64
    }
}

/// The partition of client `client`'s `sequence`-th request: round-robin over `partitions`,
/// each client starting one partition further, so that one client with N requests, or N
/// clients with one request each, cover every partition equally.
pub fn partition_for(client: usize, sequence: u64, partitions: i32) -> i32 {
    assert!(partitions > 0);
    ((client as u64 + sequence) % partitions as u64) as i32
}

/// Latency figures of a run, in milliseconds.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LatencyMs {
    pub p50: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
}

/// What `perf append` was asked to do, echoed in the summary so that a JSON line stands alone.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AppendSettings {
    pub topic: String,
    pub partitions: i32,
    pub clients: usize,
    pub in_flight: usize,
    /// `None`: closed loop (each client sends as fast as its window allows).
    pub rate_records_per_sec: Option<f64>,
    pub record_size_bytes: usize,
    pub batch_records: usize,
    pub acks: String,
    pub duration_secs: u64,
    pub warmup_secs: u64,
}

/// The `--json` summary: one object on one line.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Summary {
    pub command: &'static str,
    pub records: u64,
    pub bytes: u64,
    pub seconds: f64,
    pub records_per_sec: f64,
    /// 10^6 bytes of record batches per second.
    pub mb_per_sec: f64,
    pub requests: u64,
    pub errors: u64,
    /// Open loop only: requests due before the end that a late client never sent.
    pub requests_unsent: u64,
    pub latency_ms: LatencyMs,
    pub settings: serde_json::Value,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedule_spreads_clients_evenly_over_the_interval() {
        // 1000 records/s, 1 record per request, 2 clients: 2 ms apart each, 1 ms between them.
        let first = RateSchedule::new(1000.0, 1, 2, 0);
        let second = RateSchedule::new(1000.0, 1, 2, 1);
        assert_eq!(first.due(0), Duration::ZERO);
        assert_eq!(first.due(1), Duration::from_millis(2));
        assert_eq!(second.due(0), Duration::from_millis(1));
        assert_eq!(second.due(3), Duration::from_millis(7));
    }

    #[test]
    fn schedule_sends_the_total_rate_in_records() {
        // 16 records per request at 3200 records/s over 4 clients: 50 requests/s each.
        let schedule = RateSchedule::new(3200.0, 16, 4, 0);
        assert_eq!(schedule.due(50), Duration::from_secs(1));
        // In one second, 4 clients × 50 requests × 16 records = 3200 records.
        let sent: u64 = (0..4)
            .map(|c| RateSchedule::new(3200.0, 16, 4, c).due_before(0, Duration::from_secs(1)))
            .sum();
        assert_eq!(sent * 16, 3200);
    }

    #[test]
    fn due_before_counts_the_backlog_a_late_client_left() {
        let schedule = RateSchedule::new(100.0, 1, 1, 0); // one request every 10 ms
        assert_eq!(schedule.due_before(0, Duration::from_millis(100)), 10);
        assert_eq!(schedule.due_before(7, Duration::from_millis(100)), 3);
        assert_eq!(schedule.due_before(10, Duration::from_millis(100)), 0);
        assert_eq!(schedule.due_before(12, Duration::from_millis(100)), 0);
    }

    #[test]
    fn partitions_are_covered_round_robin_by_one_client_and_by_many() {
        let mut per_partition = [0u32; 3];
        for sequence in 0..300 {
            per_partition[partition_for(0, sequence, 3) as usize] += 1;
        }
        assert_eq!(per_partition, [100, 100, 100]);
        // Three clients' first requests go to three different partitions.
        let firsts: Vec<i32> = (0..3).map(|c| partition_for(c, 0, 3)).collect();
        assert_eq!(firsts, vec![0, 1, 2]);
        assert!((0..50).all(|s| partition_for(7, s, 1) == 0));
    }

    #[test]
    fn summary_serialises_to_the_documented_shape() {
        let summary = Summary {
            command: "append",
            records: 1000,
            bytes: 1_100_000,
            seconds: 2.0,
            records_per_sec: 500.0,
            mb_per_sec: 0.55,
            requests: 1000,
            errors: 0,
            requests_unsent: 0,
            latency_ms: LatencyMs {
                p50: 0.9,
                p99: 5.0,
                p999: 9.0,
                max: 12.0,
            },
            settings: serde_json::to_value(AppendSettings {
                topic: "perf".into(),
                partitions: 3,
                clients: 1,
                in_flight: 1,
                rate_records_per_sec: None,
                record_size_bytes: 1024,
                batch_records: 1,
                acks: "all".into(),
                duration_secs: 2,
                warmup_secs: 0,
            })
            .unwrap(),
        };
        let value: serde_json::Value =
            serde_json::from_str(&serde_json::to_string(&summary).unwrap()).unwrap();
        let keys: Vec<&str> = value
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        for key in [
            "command",
            "records",
            "records_per_sec",
            "mb_per_sec",
            "errors",
            "requests_unsent",
            "latency_ms",
            "settings",
        ] {
            assert!(keys.contains(&key), "{key} missing from {value}");
        }
        assert_eq!(value["latency_ms"]["p999"], 9.0);
        assert_eq!(value["latency_ms"]["max"], 12.0);
        assert_eq!(value["settings"]["topic"], "perf");
        assert_eq!(value["settings"]["in_flight"], 1);
        assert!(value["settings"]["rate_records_per_sec"].is_null());
    }
}
