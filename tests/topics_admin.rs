//! Topic administration end to end: kafka-python's and confluent-kafka's admin clients against
//! a three-voter quorum of real `ringlog serve` processes (tests/clients/admin_topics.py).
//! CreateTopics takes `cleanup.policy`, `retention.bytes`, `retention.ms`, `segment.bytes` and
//! refuses any other config by name (INVALID_CONFIG); DeleteTopics commits a tombstone, every
//! node stops the partitions and removes their folders, Metadata stops listing the topic on
//! every node, and a restart of all nodes does not bring it back; the same name created again
//! is a new topic id with none of the old records.

use std::path::Path;
use std::time::Duration;

use ringlog_net::client::Client;
use ringlog_net::protocol::{Request, Response, metadata_request};

mod quorum;
use quorum::{Quorum, eventually, run_client_script, serial};

/// The topic names each node's own Metadata (every topic) lists.
fn listed_topics(quorum: &Quorum, id: i32) -> Option<Vec<String>> {
    let mut client = Client::connect(&quorum.address(id), Duration::from_millis(500)).ok()?;
    let request = Request::Metadata(metadata_request::MetadataRequest {
        topics: None,
        allow_auto_topic_creation: false,
        ..Default::default()
    });
    let Ok(Response::Metadata(r)) = client.request(&request, 12) else {
        return None;
    };
    Some(r.topics.into_iter().filter_map(|t| t.name).collect())
}

/// The partition folders of `topic` in a node's data folder, including ones being deleted.
fn topic_dirs(data: &Path, topic: &str) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(data) else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(&format!("{topic}-")))
        .collect();
    names.sort();
    names
}

/// Runs a client script with (bootstrap, prefix) against the quorum.
fn run_script(
    quorum: &mut Quorum,
    script: &str,
    prefix: &str,
    timeout: Duration,
    on_line: impl FnMut(&mut Quorum, &str) -> Option<String>,
) {
    let bootstrap = quorum.bootstrap();
    run_client_script(quorum, &bootstrap, script, prefix, timeout, on_line);
}

/// Each of `ids`: Metadata does not list `topics`, and no folder of theirs is left.
fn assert_gone(quorum: &Quorum, ids: &[i32], topics: &[&str]) {
    for &id in ids {
        eventually(
            Duration::from_secs(20),
            &format!("node {id} to forget {topics:?}"),
            || {
                let listed = listed_topics(quorum, id)?;
                let data = quorum.data_dir(id);
                let left: Vec<String> = topics.iter().flat_map(|t| topic_dirs(&data, t)).collect();
                (topics.iter().all(|t| !listed.iter().any(|l| l == t)) && left.is_empty())
                    .then_some(())
            },
        );
    }
}

/// KIP-style admin through real clients: configs validated by name, DeleteTopics removes the
/// topic on every node for good (across a restart of all nodes), a recreation is a new topic.
#[test]
fn admin_clients_create_with_configs_and_delete_topics_for_good() {
    let _serial = serial();
    let mut quorum = Quorum::start(3);
    quorum.wait_for_leader(Duration::from_secs(20));
    let (kp, ck) = ("adm-kp", "adm-ck");
    let mut restarted = false;
    let mut away = None;
    run_script(
        &mut quorum,
        "admin_topics.py",
        "adm",
        Duration::from_secs(240),
        |quorum, line| match line {
            "CREATED" => {
                // Every node runs the partitions, each folder naming its topic id.
                for node in &quorum.nodes {
                    let data = quorum.data_dir(node.id);
                    eventually(
                        Duration::from_secs(20),
                        &format!("node {} to host {kp} and {ck}", node.id),
                        || {
                            let dirs = [topic_dirs(&data, kp), topic_dirs(&data, ck)].concat();
                            (dirs == ["adm-kp-0", "adm-ck-0", "adm-ck-1"]).then_some(())
                        },
                    );
                    for dir in ["adm-kp-0", "adm-ck-0", "adm-ck-1"] {
                        let text =
                            std::fs::read_to_string(data.join(dir).join("partition.metadata"))
                                .expect("partition.metadata");
                        assert!(text.contains("topic_id: "), "{dir}: {text}");
                    }
                }
                // One follower of the metadata partition misses the deletion (down while it
                // is committed) and must drop the topics when it comes back.
                let (leader, _) = quorum.wait_for_leader(Duration::from_secs(20));
                let follower = if leader == 3 { 2 } else { 3 };
                quorum.kill(follower);
                away = Some(follower);
                Some("checked\n".into())
            }
            "DELETED" => {
                let away = away.expect("a node was stopped at CREATED");
                let up: Vec<i32> = [1, 2, 3].into_iter().filter(|id| *id != away).collect();
                assert_gone(quorum, &up, &[kp, ck]);
                // The node that was away still has the folders; back, it drops them.
                assert_eq!(topic_dirs(&quorum.data_dir(away), ck).len(), 2);
                quorum.start_all();
                assert_gone(quorum, &[1, 2, 3], &[kp, ck]);
                // A restart of every node must not bring the topics back.
                quorum.kill_all();
                quorum.start_all();
                quorum.wait_for_leader(Duration::from_secs(30));
                assert_gone(quorum, &[1, 2, 3], &[kp, ck]);
                restarted = true;
                Some("restarted\n".into())
            }
            _ => None,
        },
    );
    assert!(restarted, "the script never reached the deletion");
    // The recreated topic runs on every node again, under its new id.
    for node in &quorum.nodes {
        let id = node.id;
        eventually(Duration::from_secs(20), "the recreated topic", || {
            listed_topics(&quorum, id)?
                .iter()
                .any(|t| t == kp)
                .then_some(())
        });
    }
}

/// Segment base offsets of a partition folder, ascending, and whether it holds a snapshot.
fn segments_and_snapshot(dir: &Path) -> (Vec<u64>, bool) {
    let mut bases: Vec<u64> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .filter_map(|e| {
                    let name = e.file_name().to_string_lossy().into_owned();
                    name.strip_suffix(".log")?.parse().ok()
                })
                .collect()
        })
        .unwrap_or_default();
    bases.sort_unstable();
    let snapshot = std::fs::read_dir(dir.join("checkpoints"))
        .map(|entries| {
            entries
                .flatten()
                .any(|e| e.file_name().to_string_lossy().ends_with(".checkpoint"))
        })
        .unwrap_or(false);
    (bases, snapshot)
}

/// Retention by size through KIP-630's machinery: the earliest offset moves past 0 at a
/// segment boundary, consumers asking below it are told OFFSET_OUT_OF_RANGE or reset per their
/// policy, every replica's first segments are gone, and a replica that was down the whole
/// time catches up from the leader's snapshot (its log then starts there too).
#[test]
fn retention_bytes_moves_the_log_start_on_every_replica() {
    let _serial = serial();
    let mut quorum = Quorum::start(3);
    let (leader, _) = quorum.wait_for_leader(Duration::from_secs(20));
    let away = if leader == 3 { 2 } else { 3 };
    quorum.kill(away);
    let topic = "ret";
    let mut trimmed_at = None;
    run_script(
        &mut quorum,
        "admin_retention.py",
        topic,
        Duration::from_secs(180),
        |quorum, line| {
            let earliest: u64 = line.strip_prefix("TRIMMED ")?.trim().parse().ok()?;
            trimmed_at = Some(earliest);
            // The replica that missed everything comes back: the leader's log starts above
            // 0, so it installs the leader's (empty) snapshot and fetches the rest.
            quorum.start_all();
            for node in &quorum.nodes {
                let dir = quorum.data_dir(node.id).join(format!("{topic}-0"));
                eventually(
                    Duration::from_secs(30),
                    &format!("node {} to start its log at a snapshot", node.id),
                    || {
                        let (bases, snapshot) = segments_and_snapshot(&dir);
                        (snapshot && bases.first().is_some_and(|b| *b > 0)).then_some(())
                    },
                );
            }
            let log = std::fs::read_to_string(&quorum.node(away).log).unwrap_or_default();
            assert!(
                log.contains("snapshot installed"),
                "node {away} caught up without FetchSnapshot"
            );
            Some("checked\n".into())
        },
    );
    assert!(
        trimmed_at.is_some_and(|e| e > 0),
        "the script never trimmed"
    );
}

/// Retention by age: a segment whose last append is older than `retention.ms` goes once the
/// next one is not the active segment's place, on every replica, and the active one stays
/// (the rule reads the age only of the segments it decides about, retention.rs).
#[test]
fn retention_ms_removes_old_segments_and_keeps_the_active_one() {
    let _serial = serial();
    let quorum = Quorum::start(3);
    quorum.wait_for_leader(Duration::from_secs(20));
    let topic = "aged";
    quorum.create_topic(
        topic,
        1,
        &[
            ("segment.bytes", "65536"),
            ("retention.ms", "1000"),
            ("retention.bytes", "-1"),
        ],
    );
    let (leader, _) = quorum.wait_for_leader_of(topic, Duration::from_secs(20));
    let mut client = Client::connect(&quorum.address(leader), Duration::from_secs(5)).unwrap();
    let value = "a".repeat(8000);
    let mut last = 0;
    for _ in 0..40 {
        let (code, offset) = quorum::produce_to(&mut client, topic, 0, quorum::batch_of(&value));
        assert_eq!(code, 0, "produce to {topic}");
        last = offset;
    }
    for node in &quorum.nodes {
        let dir = quorum.data_dir(node.id).join(format!("{topic}-0"));
        let bases = eventually(
            Duration::from_secs(30),
            &format!("node {}'s old segments to go", node.id),
            || {
                let (bases, snapshot) = segments_and_snapshot(&dir);
                (snapshot && bases.len() == 1 && bases[0] > 0).then_some(bases)
            },
        );
        assert!(
            bases[0] <= last as u64,
            "node {}: the active segment, holding offset {last}, stays ({bases:?})",
            node.id
        );
    }
}
