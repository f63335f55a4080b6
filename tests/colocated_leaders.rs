//! One node leading several partitions: a replica Fetch carries every partition a follower
//! fetches from that leader, and it is answered as a whole, so an idle partition's long poll
//! must never hold a busy partition's records (Kafka answers a Fetch as soon as any partition
//! has something to return).
//!
//! The long poll here is 20 s and the Produce's own timeout 10 s: a produce to a partition
//! whose leader also leads an idle partition commits only if the leader answers the
//! followers' Fetch without waiting for the idle partition. Before the fix every such produce
//! timed out (the busy partition's records waited for the idle partition's 20 s wait).

mod quorum;

use std::collections::BTreeMap;
use std::time::Duration;

use ringlog_net::client::Client;
use ringlog_net::protocol::{Request, Response, metadata_request, produce_request};

use quorum::{Quorum, batch_of, eventually, serial};

const TOPIC: &str = "busy";
/// Three topic partitions plus `__cluster_metadata-0` on three voters: some node leads two.
const PARTITIONS: i32 = 3;

#[test]
fn a_leader_of_two_partitions_commits_without_waiting_for_the_idle_one() {
    let _serial = serial();
    let mut quorum = Quorum::format_with(
        3,
        "controller.quorum.fetch.max.wait.ms=20000\n\
         controller.quorum.fetch.timeout.ms=60000\n\
         controller.quorum.request.timeout.ms=30000",
    );
    quorum.start_all();
    let (metadata_leader, _) = quorum.wait_for_leader(Duration::from_secs(20));
    quorum.create_topic(TOPIC, PARTITIONS, &[]);

    // Who leads what, once every topic partition has a leader.
    let (leaders, brokers) = eventually(Duration::from_secs(30), "topic leaders", || {
        topic_leaders(&quorum)
    });
    let mut led: BTreeMap<i32, usize> = BTreeMap::from([(metadata_leader, 1)]);
    for leader in leaders.values() {
        *led.entry(*leader).or_default() += 1;
    }
    let (&partition, &leader) = leaders
        .iter()
        .find(|(_, leader)| led[leader] >= 2)
        .expect("four partitions on three nodes: one node leads two");
    println!(
        "partition {partition} led by node {leader}, which leads {} partitions",
        led[&leader]
    );

    let mut client = Client::connect(&brokers[&leader], Duration::from_secs(15)).unwrap();
    for i in 0..5 {
        let (answer, _) = quorum::produce_to(
            &mut client,
            TOPIC,
            partition,
            batch_of(&format!("record-{i}")),
        );
        assert_eq!(
            answer,
            0,
            "produce {i} to {TOPIC}-{partition} (leader {leader}) answered error {answer}: \
             its followers' Fetch waited for an idle partition's long poll\n{}",
            quorum.dump_logs()
        );
    }
}

/// KIP-951: a Produce sent to a node that does not lead the partition is refused with
/// NOT_LEADER_OR_FOLLOWER naming that partition's leader and its endpoint, so the client
/// redirects without a metadata round trip. Until 2026-12-02 the answer named the leader of
/// `__cluster_metadata`'s partition of the same index (none for index 1 and up), whatever the
/// topic.
#[test]
fn a_produce_to_a_non_leader_names_the_partition_s_leader() {
    let _serial = serial();
    let mut quorum = Quorum::format(3);
    quorum.start_all();
    quorum.wait_for_leader(Duration::from_secs(20));
    quorum.create_topic(TOPIC, PARTITIONS, &[]);
    let (leaders, brokers) = eventually(Duration::from_secs(30), "topic leaders", || {
        topic_leaders(&quorum)
    });
    for (&partition, &leader) in leaders.iter().filter(|(p, _)| **p >= 1) {
        let other = (1..=3).find(|id| *id != leader).expect("three nodes");
        // `other` may learn the leader a moment after node 1 reported it: until then it
        // rightly names none (-1). A node that names the wrong partition's leader never
        // names this one's, and this wait fails.
        let answer = eventually(
            Duration::from_secs(20),
            "the non-leader to name a leader",
            || {
                let mut client = Client::connect(&brokers[&other], Duration::from_secs(15)).ok()?;
                let Response::Produce(answer) = client.request(&misdirected(partition), 10).ok()?
                else {
                    panic!("not a Produce answer");
                };
                let refused = &answer.responses[0].partition_responses[0];
                assert_eq!(
                    refused.error_code, 6,
                    "NOT_LEADER_OR_FOLLOWER from node {other}"
                );
                (refused.current_leader.leader_id != -1).then_some(answer)
            },
        );
        let refused = &answer.responses[0].partition_responses[0];
        assert_eq!(
            refused.current_leader.leader_id, leader,
            "node {other} named the wrong leader of {TOPIC}-{partition}"
        );
        let endpoint = answer
            .node_endpoints
            .iter()
            .find(|e| e.node_id == leader)
            .unwrap_or_else(|| panic!("no endpoint for leader {leader}: {answer:?}"));
        assert_eq!(
            format!("{}:{}", endpoint.host, endpoint.port),
            brokers[&leader]
        );
    }
}

/// An acks=all Produce of one batch to `partition` of the topic.
fn misdirected(partition: i32) -> Request {
    Request::Produce(produce_request::ProduceRequest {
        acks: -1,
        timeout_ms: 5000,
        topic_data: vec![produce_request::TopicProduceData {
            name: TOPIC.into(),
            partition_data: vec![produce_request::PartitionProduceData {
                index: partition,
                records: Some(batch_of("misdirected")),
            }],
            ..Default::default()
        }],
        ..Default::default()
    })
}

/// The leader of every partition of the topic (all of them known), and every broker's address.
fn topic_leaders(quorum: &Quorum) -> Option<(BTreeMap<i32, i32>, BTreeMap<i32, String>)> {
    let mut client = Client::connect(&quorum.address(1), Duration::from_millis(500)).ok()?;
    let request = Request::Metadata(metadata_request::MetadataRequest {
        topics: Some(vec![metadata_request::MetadataRequestTopic {
            name: Some(TOPIC.into()),
            ..Default::default()
        }]),
        ..Default::default()
    });
    let Ok(Response::Metadata(m)) = client.request(&request, 12) else {
        return None;
    };
    let topic = m.topics.first()?;
    let leaders: BTreeMap<i32, i32> = topic
        .partitions
        .iter()
        .filter(|p| p.error_code == 0 && p.leader_id >= 1)
        .map(|p| (p.partition_index, p.leader_id))
        .collect();
    let brokers = m
        .brokers
        .iter()
        .map(|b| (b.node_id, format!("{}:{}", b.host, b.port)))
        .collect();
    (leaders.len() == PARTITIONS as usize).then_some((leaders, brokers))
}
