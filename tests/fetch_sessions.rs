//! KIP-227 fetch sessions between real nodes: a follower's replica Fetches to a leader of
//! several partitions are incremental once the leader has named a session (they name only the
//! partitions whose fetch changed), records produced to every partition at acks=all commit and
//! are served, and each leader holds one session per replica at most, none refused. Read from
//! each node's metrics listener (`kafka_server_fetch_session_cache_*`,
//! `ringlog_replica_fetch_requests_total`).

mod quorum;

use std::collections::HashMap;
use std::time::Duration;

use quorum::{Quorum, eventually, produce_and_consume_every_partition, scrape_metrics, serial};

const TOPIC: &str = "sessions";
const PARTITIONS: i32 = 6;

fn fetches(samples: &HashMap<String, f64>, kind: &str) -> f64 {
    samples
        .get(&format!(
            "ringlog_replica_fetch_requests_total{{kind=\"{kind}\"}}"
        ))
        .copied()
        .unwrap_or(0.0)
}

fn gauge(samples: &HashMap<String, f64>, name: &str) -> f64 {
    samples
        .get(&format!("kafka_server_fetch_session_cache_{name}"))
        .copied()
        .unwrap_or(0.0)
}

#[test]
fn replica_fetches_are_incremental_in_one_session_per_replica() {
    let _serial = serial();
    let quorum = Quorum::start(3);
    quorum.wait_for_leader(Duration::from_secs(15));
    quorum.create_topic(TOPIC, PARTITIONS, &[]);
    produce_and_consume_every_partition(&quorum.bootstrap(), TOPIC, PARTITIONS);

    let ids: Vec<i32> = quorum.nodes.iter().map(|n| n.id).collect();
    let scrape_all = || -> Option<Vec<HashMap<String, f64>>> {
        ids.iter()
            .map(|id| scrape_metrics(quorum.node(*id).metrics_port))
            .collect()
    };
    // The long polls go on while the partitions are idle: every round of them after the first
    // Fetch of each follower is an incremental one.
    let before = scrape_all().expect("every node's metrics");
    let incremental_before: f64 = before.iter().map(|s| fetches(s, "incremental")).sum();
    let samples = eventually(
        Duration::from_secs(20),
        "incremental replica Fetches to outnumber full ones",
        || {
            let samples = scrape_all()?;
            let full: f64 = samples.iter().map(|s| fetches(s, "full")).sum();
            let incremental: f64 = samples.iter().map(|s| fetches(s, "incremental")).sum();
            (incremental > 2.0 * full && incremental > incremental_before + 10.0).then_some(samples)
        },
    );
    let mut sessions = 0.0;
    for (id, s) in ids.iter().zip(&samples) {
        let held = gauge(s, "num_incremental_fetch_sessions");
        assert!(
            held <= 2.0,
            "node {id} holds {held} sessions: one per replica at most"
        );
        if held > 0.0 {
            assert!(
                gauge(s, "num_incremental_fetch_partitions_cached") >= 1.0,
                "node {id} holds sessions of no partition"
            );
        }
        assert_eq!(
            fetches(s, "refused"),
            0.0,
            "node {id} refused a Fetch's session (unknown, or its epoch out of order)"
        );
        sessions += held;
    }
    // Seven partitions (`__cluster_metadata-0` too) on three voters: some node leads, and both
    // other voters fetch from it in a session.
    assert!(sessions >= 2.0, "{sessions} sessions held in all");
}

/// An observer of a 1,000-partition topic learns every partition's leader. Its fetches of a
/// partition whose leader it does not know yet go to the voters in turn and ask no long poll,
/// and a voter that does not lead the partition answers NOT_LEADER_OR_FOLLOWER naming the
/// leader. With two wire Fetches in flight, most of those answers come superseded; until
/// 2026-12-07 a superseded answer's errors were dropped, so the observer never learned the
/// leaders of most partitions (41-142 of 1,000 in three `ringlog dev` runs), and its fetches
/// without a long poll kept every voter answering it at once (four nodes at 1.5-2.0 CPU
/// seconds per second with no load).
#[test]
fn an_observer_learns_the_leader_of_every_partition_of_a_wide_topic() {
    const WIDE: i32 = 1000;
    // Kafka's quorum timeouts, as `ringlog dev` runs (the harness's shorter ones, meant for
    // fast failovers of a few partitions, make a thousand of them on two cores churn).
    const CONFIG: &str = "controller.quorum.observers=4\n\
        controller.quorum.election.timeout.ms=1000\n\
        controller.quorum.fetch.timeout.ms=2000\n\
        controller.quorum.request.timeout.ms=2000\n\
        controller.quorum.fetch.max.wait.ms=500";
    let _serial = serial();
    let mut quorum = Quorum::format_with(3, CONFIG);
    quorum.add_node(4, CONFIG);
    quorum.start_all();
    quorum.wait_for_leader(Duration::from_secs(30));
    quorum.create_topic("wide", WIDE, &[]);
    let observer = quorum.node(4).metrics_port;
    let mut unknown = WIDE;
    let mut reported = WIDE;
    eventually(
        Duration::from_secs(60),
        "the observer to know every partition's leader",
        || {
            let samples = scrape_metrics(observer)?;
            unknown = (0..WIDE)
                .filter(|i| {
                    let name = format!(
                        "kafka_server_raft_metrics_current_leader{{partition=\"wide-{i}\"}}"
                    );
                    samples.get(&name).is_none_or(|leader| *leader < 0.0)
                })
                .count() as i32;
            if unknown != reported {
                eprintln!("the observer knows the leader of all but {unknown} partitions");
                reported = unknown;
            }
            (unknown == 0).then_some(())
        },
    );
}
