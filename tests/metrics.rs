//! The node's Prometheus endpoint (`metrics.listener`) scraped from a real three-voter quorum:
//! KRaft's raft-metrics names, with values that follow what the quorum actually did.

mod quorum;

use std::collections::HashMap;
use std::time::Duration;

use ringlog_net::client::Client;
use ringlog_net::protocol::{Request, Response, create_topics_request, delete_topics_request};

use quorum::{Quorum, eventually, scrape_metrics as scrape, serial};

const GROUP: &str = "kafka_server_raft_metrics_";

/// The topic the test produces to (clients cannot write `__cluster_metadata`).
const TOPIC: &str = "metered";

/// The value of a `raft-metrics` sample of partition `TOPIC`-0.
fn metric(samples: &HashMap<String, f64>, name: &str, extra_label: &str) -> Option<f64> {
    metric_of(samples, &format!("{TOPIC}-0"), name, extra_label)
}

/// The value of a `raft-metrics` sample of `partition` (e.g. `__cluster_metadata-0`).
fn metric_of(
    samples: &HashMap<String, f64>,
    partition: &str,
    name: &str,
    extra_label: &str,
) -> Option<f64> {
    let partition = format!("partition=\"{partition}\"");
    let labels = if extra_label.is_empty() {
        partition
    } else {
        format!("{partition},{extra_label}")
    };
    samples.get(&format!("{GROUP}{name}{{{labels}}}")).copied()
}

#[test]
fn a_quorum_reports_kraft_metrics_that_follow_its_state() {
    let _serial = serial();
    let quorum = Quorum::start(3);
    quorum.wait_for_leader(Duration::from_secs(15));
    quorum.create_topic(TOPIC, 1, &[]);
    let (leader, epoch) = quorum.wait_for_leader_of(TOPIC, Duration::from_secs(15));
    const RECORDS: usize = 40;
    quorum.produce(TOPIC, leader, RECORDS, "metric");

    // The leader: its state, its own id, the epoch, and a log that moved by at least the
    // produced records (a new topic's leader appends no LeaderChange into its empty log).
    let leader_port = quorum.node(leader).metrics_port;
    let samples = eventually(
        Duration::from_secs(10),
        "the leader's metrics to show the produced records committed",
        || {
            let samples = scrape(leader_port)?;
            (metric(&samples, "high_watermark", "")? >= RECORDS as f64).then_some(samples)
        },
    );
    assert_eq!(
        metric(&samples, "current_state", "state=\"leader\""),
        Some(1.0)
    );
    assert_eq!(
        metric(&samples, "current_state", "state=\"follower\""),
        Some(0.0)
    );
    assert_eq!(metric(&samples, "current_leader", ""), Some(leader as f64));
    assert_eq!(metric(&samples, "current_epoch", ""), Some(epoch as f64));
    let log_end_offset = metric(&samples, "log_end_offset", "").unwrap();
    let high_watermark = metric(&samples, "high_watermark", "").unwrap();
    assert!(log_end_offset >= high_watermark && high_watermark >= RECORDS as f64);
    assert!(metric(&samples, "append_records_rate", "").unwrap() > 0.0);
    // Every acks=all produce waited for a commit: the latency was measured, and is real time.
    let commit_max = metric(&samples, "commit_latency_max", "").unwrap();
    let commit_avg = metric(&samples, "commit_latency_avg", "").unwrap();
    assert!(
        commit_max >= commit_avg && commit_avg > 0.0,
        "{commit_avg} {commit_max}"
    );
    let idle = metric(&samples, "poll_idle_ratio_avg", "").unwrap();
    assert!((0.0..=1.0).contains(&idle), "poll-idle-ratio {idle}");
    // The node-wide event-loop turns: counted, each threshold's count at most the one below it
    // (a turn past 20 ms is also past 5 ms), and the longest turn measured.
    let turns = samples["ringlog_event_loop_turns_total"];
    assert!(turns > 0.0, "the loop turned {turns} times");
    for family in ["held", "cpu"] {
        let over = |ms: u32| {
            samples[&format!("ringlog_event_loop_turns_{family}_over_total{{over_ms=\"{ms}\"}}")]
        };
        assert!(over(5) <= turns && over(20) <= over(5) && over(100) <= over(20));
        assert!(over(500) <= over(100));
    }
    assert!(samples["ringlog_event_loop_longest_turn_ms"] > 0.0);
    assert_eq!(metric(&samples, "snapshot_count", ""), Some(0.0));

    // A follower: its state, the same leader and epoch, and fetched records.
    let follower = quorum.nodes.iter().find(|n| n.id != leader).unwrap();
    let samples = eventually(
        Duration::from_secs(10),
        "a follower's metrics to show the replicated records",
        || {
            let samples = scrape(follower.metrics_port)?;
            (metric(&samples, "high_watermark", "")? >= RECORDS as f64).then_some(samples)
        },
    );
    assert_eq!(
        metric(&samples, "current_state", "state=\"follower\""),
        Some(1.0)
    );
    assert_eq!(metric(&samples, "current_leader", ""), Some(leader as f64));
    assert_eq!(metric(&samples, "current_epoch", ""), Some(epoch as f64));
    assert!(metric(&samples, "fetch_records_rate", "").unwrap() > 0.0);
    assert_eq!(metric(&samples, "append_records_rate", ""), Some(0.0));

    // Some voter ran the election that made the leader: the one that won it measured it.
    let winner = scrape(leader_port).unwrap();
    assert!(
        metric(&winner, "election_latency_max", "").unwrap() > 0.0,
        "the leader went through Candidate and timed its election"
    );

    // A DeleteRecords cut writes a snapshot at the new log start, which the leader's metrics
    // show, with its size (the folder is listed again when the core's snapshots change).
    let mut client =
        Client::connect(&quorum.address(leader), Duration::from_secs(5)).expect("the leader");
    let (code, low_watermark) = quorum::delete_records(&mut client, TOPIC, 20, 20_000);
    assert_eq!(
        (code, low_watermark),
        (0, 20),
        "DeleteRecords at the leader"
    );
    eventually(
        Duration::from_secs(10),
        "the leader's metrics to show the cut's snapshot",
        || {
            let samples = scrape(leader_port)?;
            let count = metric(&samples, "snapshot_count", "")?;
            let size = metric(&samples, "latest_snapshot_size_bytes", "")?;
            (count == 1.0 && size > 0.0).then_some(())
        },
    );
}

/// Sends `request` at API version `version` to each node in turn until one answers with an
/// error code `done` accepts; 41 (NOT_CONTROLLER) moves on to the next node.
fn admin_at_controller(
    quorum: &Quorum,
    what: &str,
    request: &Request,
    version: i16,
    code_of: impl Fn(&Response) -> Option<i16>,
) {
    eventually(Duration::from_secs(20), what, || {
        quorum.nodes.iter().find_map(|node| {
            let mut client =
                Client::connect(&quorum.address(node.id), Duration::from_secs(2)).ok()?;
            let response = client.request(request, version).ok()?;
            let code = code_of(&response)?;
            assert!(code == 0 || code == 41, "{what}: error {code}");
            (code == 0).then_some(())
        })
    });
}

/// Partitions created and deleted at runtime join and leave every node's scrape: a topic's
/// partition reports its raft-metrics group once created, and the group is gone once the
/// topic is deleted (no frozen last values of a partition the node no longer has).
#[test]
fn partitions_added_and_removed_at_runtime_join_and_leave_the_scrape() {
    let _serial = serial();
    let quorum = Quorum::start(3);
    quorum.wait_for_leader(Duration::from_secs(15));
    let state_of = |samples: &HashMap<String, f64>| {
        samples
            .keys()
            .any(|k| k.starts_with(&format!("{GROUP}current_state{{partition=\"metered-0\"")))
    };
    for node in &quorum.nodes {
        assert!(!state_of(&scrape(node.metrics_port).unwrap()));
    }

    let create = Request::CreateTopics(create_topics_request::CreateTopicsRequest {
        topics: vec![create_topics_request::CreatableTopic {
            name: "metered".into(),
            num_partitions: 1,
            replication_factor: 3,
            ..Default::default()
        }],
        timeout_ms: 5000,
        validate_only: false,
    });
    admin_at_controller(&quorum, "CreateTopics metered", &create, 7, |r| match r {
        Response::CreateTopics(r) => Some(r.topics[0].error_code),
        _ => None,
    });
    for node in &quorum.nodes {
        eventually(
            Duration::from_secs(20),
            "metered-0 elects a leader in every scrape",
            || {
                let samples = scrape(node.metrics_port)?;
                let leader =
                    samples.get(&format!("{GROUP}current_leader{{partition=\"metered-0\"}}"))?;
                (*leader >= 1.0).then_some(())
            },
        );
    }

    let delete = Request::DeleteTopics(delete_topics_request::DeleteTopicsRequest {
        topic_names: vec!["metered".into()],
        timeout_ms: 5000,
        ..Default::default()
    });
    admin_at_controller(&quorum, "DeleteTopics metered", &delete, 5, |r| match r {
        Response::DeleteTopics(r) => Some(r.responses[0].error_code),
        _ => None,
    });
    for node in &quorum.nodes {
        eventually(
            Duration::from_secs(20),
            "metered-0 leaves every scrape",
            || {
                let samples = scrape(node.metrics_port)?;
                (!state_of(&samples)).then_some(())
            },
        );
        let samples = scrape(node.metrics_port).unwrap();
        assert!(
            metric_of(&samples, "__cluster_metadata-0", "current_epoch", "").is_some(),
            "__cluster_metadata-0 stays in the scrape"
        );
    }
}

/// A leader keeps in memory what a stopped follower has not fetched (past its 4 MiB tail cache,
/// within `replica.lag.cache.max.bytes`), so the follower catches up from memory, not from the
/// disk; once the follower, started again, has fetched it, the leader lets it go.
#[test]
fn a_leader_keeps_what_a_stopped_follower_lacks_until_it_has_fetched_it() {
    const MIB: f64 = (1 << 20) as f64;
    let _serial = serial();
    let mut quorum = Quorum::start(3);
    quorum.wait_for_leader(Duration::from_secs(15));
    quorum.create_topic("lagging", 1, &[]);
    let (leader, _) = quorum.wait_for_leader_of("lagging", Duration::from_secs(15));
    let follower = (1..=3).find(|&id| id != leader).unwrap();
    quorum.kill(follower);
    let leader_address = quorum.address(leader);
    let leader_port = quorum.node(leader).metrics_port;
    let end = |port: u16| metric_of(&scrape(port)?, "lagging-0", "log_end_offset", "");
    // At least 16 Ki records of 1 KiB (16 MiB) while the follower is down, however fast this
    // machine appends.
    let mut leader_end = 0.0;
    for _ in 0..60 {
        if leader_end >= 16_384.0 {
            break;
        }
        quorum::run_ringlog(&[
            "perf",
            "append",
            "--bootstrap",
            &leader_address,
            "--topic",
            "lagging",
            "--clients",
            "2",
            "--batch-records",
            "32",
            "--duration-secs",
            "1",
        ])
        .expect("perf append with one voter down");
        leader_end = end(leader_port).expect("the leader's log end");
    }
    assert!(leader_end >= 16_384.0, "{leader_end} records in a minute");
    let kept = eventually(
        Duration::from_secs(10),
        "the leader to keep what the follower lacks",
        || {
            scrape(leader_port)?
                .get("ringlog_tail_cache_bytes")
                .copied()
        },
    );
    assert!(
        kept >= 8.0 * MIB,
        "{kept} bytes kept for {leader_end} records"
    );
    quorum.start_node(follower);
    let follower_port = quorum.node(follower).metrics_port;
    eventually(Duration::from_secs(30), "the follower to catch up", || {
        (end(follower_port)? >= leader_end).then_some(())
    });
    eventually(
        Duration::from_secs(10),
        "the leader to let go of what the follower fetched",
        || {
            let kept = *scrape(leader_port)?.get("ringlog_tail_cache_bytes")?;
            (kept <= 5.0 * MIB).then_some(())
        },
    );
}
