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

use ringlog_net::node::client::Client;
use ringlog_net::protocol::{Request, Response, metadata_request};

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
