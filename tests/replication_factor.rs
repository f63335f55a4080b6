//! Replication factors (issue 21) against three real `ringlog serve` voters: a topic's
//! partitions run only on their replicas (placement.rs), a node that is not a replica sends
//! clients to the leader (remote_leaders.rs), and a factor above the node count is refused
//! with INVALID_REPLICATION_FACTOR as Kafka refuses it. Before, CreateTopics refused every
//! factor but the number of voters ("every partition is replicated on the 3 voters"), which
//! failed most of librdkafka's own test suite.

use std::time::Duration;

mod quorum;
use quorum::{
    Quorum, batch_of, consumer_fetch_request, eventually, produce_to, run_client_script, serial,
};
use ringlog_net::client::Client;
use ringlog_net::protocol::{Request, Response, create_topics_request, metadata_request};

const NOT_LEADER_OR_FOLLOWER: i16 = 6;
const INVALID_REPLICATION_FACTOR: i16 = 38;
const NOT_CONTROLLER: i16 = 41;

/// CreateTopics `name` with `replication_factor` at whichever node is the controller: the
/// first answer that is not NOT_CONTROLLER, with the factor the node reports.
fn create_topic(
    quorum: &Quorum,
    name: &str,
    partitions: i32,
    replication_factor: i16,
) -> (i16, i16) {
    create_topic_as(quorum, name, partitions, replication_factor, &[])
}

/// [`create_topic`] with the client's own assignment (partition index, replicas).
fn create_topic_as(
    quorum: &Quorum,
    name: &str,
    partitions: i32,
    replication_factor: i16,
    assignments: &[(i32, Vec<i32>)],
) -> (i16, i16) {
    let request = Request::CreateTopics(create_topics_request::CreateTopicsRequest {
        topics: vec![create_topics_request::CreatableTopic {
            name: name.into(),
            num_partitions: partitions,
            replication_factor,
            assignments: assignments
                .iter()
                .map(|(partition_index, broker_ids)| {
                    create_topics_request::CreatableReplicaAssignment {
                        partition_index: *partition_index,
                        broker_ids: broker_ids.clone(),
                    }
                })
                .collect(),
            ..Default::default()
        }],
        timeout_ms: 5000,
        validate_only: false,
    });
    eventually(
        Duration::from_secs(30),
        &format!("CreateTopics {name}"),
        || {
            (1..=3).find_map(|id| {
                let mut client =
                    Client::connect(&quorum.address(id), Duration::from_secs(2)).ok()?;
                let Ok(Response::CreateTopics(r)) = client.request(&request, 7) else {
                    return None;
                };
                let topic = &r.topics[0];
                (topic.error_code != NOT_CONTROLLER)
                    .then_some((topic.error_code, topic.replication_factor))
            })
        },
    )
}

/// Partition 0 of `topic` as node `id` answers Metadata: (error, leader, replicas, ISR).
fn metadata_of(quorum: &Quorum, id: i32, topic: &str) -> Option<(i16, i32, Vec<i32>, Vec<i32>)> {
    let mut client = Client::connect(&quorum.address(id), Duration::from_millis(500)).ok()?;
    let request = Request::Metadata(metadata_request::MetadataRequest {
        topics: Some(vec![metadata_request::MetadataRequestTopic {
            name: Some(topic.into()),
            ..Default::default()
        }]),
        ..Default::default()
    });
    let Ok(Response::Metadata(m)) = client.request(&request, 12) else {
        return None;
    };
    let p = m.topics.first()?.partitions.first()?;
    Some((
        p.error_code,
        p.leader_id,
        p.replica_nodes.clone(),
        p.isr_nodes.clone(),
    ))
}

/// A topic of replication factor 1 runs on one node only: the others hold no folder of it,
/// answer a Produce or a consumer Fetch NOT_LEADER_OR_FOLLOWER (not UNKNOWN_TOPIC_OR_PARTITION:
/// the client refreshes its metadata), and name the one replica as leader in Metadata once
/// they asked it (a refresh or two later). Factor 4 on three nodes is refused, factor -1 takes
/// `default.replication.factor` (3 here).
#[test]
fn a_replication_factor_places_partitions_and_non_replicas_point_at_the_leader() {
    let _serial = serial();
    let quorum = Quorum::start(3);
    quorum.wait_for_leader(Duration::from_secs(30));

    assert_eq!(
        create_topic(&quorum, "too-many", 1, 4),
        (INVALID_REPLICATION_FACTOR, -1)
    );
    assert_eq!(create_topic(&quorum, "default-rf", 1, -1), (0, 3));
    assert_eq!(create_topic(&quorum, "single", 1, 1), (0, 1));

    // Every node names the same single replica, leading, with itself as the ISR.
    let (replica, view) = eventually(
        Duration::from_secs(30),
        "single's leader everywhere",
        || {
            let views: Vec<_> = (1..=3)
                .map(|id| metadata_of(&quorum, id, "single"))
                .collect::<Option<_>>()?;
            let first: &(i16, i32, Vec<i32>, Vec<i32>) = &views[0];
            let agreed = views.iter().all(|v| v == first);
            (agreed && first.0 == 0 && first.1 > 0).then(|| (first.1, first.clone()))
        },
    );
    assert_eq!(view, (0, replica, vec![replica], vec![replica]));
    for id in 1..=3 {
        let folder = quorum.data_dir(id).join("single-0");
        assert_eq!(
            folder.exists(),
            id == replica,
            "node {id}: {}",
            folder.display()
        );
    }

    // At a node that is not the replica: NOT_LEADER_OR_FOLLOWER for Produce and Fetch.
    let other = (1..=3).find(|id| *id != replica).unwrap();
    let mut client = Client::connect(&quorum.address(other), Duration::from_secs(2)).unwrap();
    let (code, _) = produce_to(&mut client, "single", 0, batch_of("elsewhere"));
    assert_eq!(code, NOT_LEADER_OR_FOLLOWER);
    let Response::Fetch(fetch) = client
        .request(&consumer_fetch_request("single", 0, 0), 12)
        .unwrap()
    else {
        panic!("not a Fetch response");
    };
    assert_eq!(
        fetch.responses[0].partitions[0].error_code,
        NOT_LEADER_OR_FOLLOWER
    );
    // At the replica, acks=all is its own fsync.
    let mut leader = Client::connect(&quorum.address(replica), Duration::from_secs(2)).unwrap();
    assert_eq!(produce_to(&mut leader, "single", 0, batch_of("here")).0, 0);

    // A client's own assignment (librdkafka's 0081_admin sends one): kept as given; one with a
    // node that is no voter is INVALID_REPLICA_ASSIGNMENT (39).
    assert_eq!(
        create_topic_as(&quorum, "assigned", -1, -1, &[(1, vec![3]), (0, vec![2])]),
        (0, 1)
    );
    assert_eq!(
        create_topic_as(&quorum, "assigned-badly", -1, -1, &[(0, vec![7])]),
        (39, -1)
    );
    let folder = |id: i32, index: i32| {
        quorum
            .data_dir(id)
            .join(format!("assigned-{index}"))
            .exists()
    };
    eventually(Duration::from_secs(30), "assigned's folders", || {
        (folder(2, 0) && folder(3, 1)).then_some(())
    });
    for id in 1..=3 {
        assert_eq!(
            (folder(id, 0), folder(id, 1)),
            (id == 2, id == 3),
            "node {id}"
        );
    }

    // A node that is not a replica answers its first Metadata of a topic with the leader: the
    // request waits for the lookup it started (remote_leaders.rs) instead of answering
    // LEADER_NOT_AVAILABLE, which admin clients act on (librdkafka's DeleteRecords fails such a
    // partition). Node 1 was never asked about `asked-once` before.
    assert_eq!(
        create_topic_as(&quorum, "asked-once", -1, -1, &[(0, vec![2])]),
        (0, 1)
    );
    eventually(
        Duration::from_secs(30),
        "asked-once led by its replica",
        || metadata_of(&quorum, 2, "asked-once").filter(|m| m.0 == 0 && m.1 == 2),
    );
    assert_eq!(
        metadata_of(&quorum, 1, "asked-once"),
        Some((0, 2, vec![2], vec![2]))
    );

    // The default factor places every partition on all three voters.
    let (_, _, replicas, _) = eventually(Duration::from_secs(30), "default-rf's metadata", || {
        metadata_of(&quorum, 1, "default-rf")
    });
    let mut replicas = replicas;
    replicas.sort();
    assert_eq!(replicas, vec![1, 2, 3]);
}

/// confluent-kafka end to end (tests/clients/replication_factor.py): topics created with
/// replication_factor=1 and 2, factor 4 refused with INVALID_REPLICATION_FACTOR, Metadata
/// from every node with RF replicas and an ISR of RF, producing through a node that is not
/// the replica, and every acknowledged record still there after the only replica is killed
/// (-9) and restarted.
#[test]
fn confluent_kafka_uses_replication_factor_one_across_its_replicas_restart() {
    let _serial = serial();
    let mut quorum = Quorum::start(3);
    quorum.wait_for_leader(Duration::from_secs(30));
    let bootstrap = quorum.bootstrap();
    run_client_script(
        &mut quorum,
        &bootstrap,
        "replication_factor.py",
        "confluent",
        Duration::from_secs(300),
        |quorum, line| {
            let id: i32 = line.strip_prefix("restart ")?.trim().parse().ok()?;
            quorum.kill(id);
            quorum.start_node(id);
            Some("restarted\n".into())
        },
    );
}

/// Every partition of `topic` as node 1 answers Metadata, once all have a leader: (leader,
/// replicas).
fn leaders_and_replicas(quorum: &Quorum, topic: &str) -> Option<Vec<(i32, Vec<i32>)>> {
    leaders_and_replicas_at(quorum, 1, topic)
}

/// [`leaders_and_replicas`] as node `id` answers them.
fn leaders_and_replicas_at(quorum: &Quorum, id: i32, topic: &str) -> Option<Vec<(i32, Vec<i32>)>> {
    let mut client = Client::connect(&quorum.address(id), Duration::from_millis(500)).ok()?;
    let request = Request::Metadata(metadata_request::MetadataRequest {
        topics: Some(vec![metadata_request::MetadataRequestTopic {
            name: Some(topic.into()),
            ..Default::default()
        }]),
        ..Default::default()
    });
    let Ok(Response::Metadata(m)) = client.request(&request, 12) else {
        return None;
    };
    let partitions = &m.topics.first()?.partitions;
    (!partitions.is_empty()
        && partitions
            .iter()
            .all(|p| p.error_code == 0 && p.leader_id >= 1))
    .then(|| {
        partitions
            .iter()
            .map(|p| (p.leader_id, p.replica_nodes.clone()))
            .collect()
    })
}

/// A new topic's partitions are led by their first replicas, as Kafka's controller makes the
/// first replica of a new partition its leader: the first replica stands for election at once
/// (`Raft::stand_first`) instead of after a random election timeout, so the placement's spread
/// of first replicas is the spread of leaders, and the topic has its leaders in milliseconds
/// rather than after 1-2 s (what librdkafka's auto-create tests 0017 and 0041 waited on).
/// Before, whichever replica's timer fired first led: all six matching had a chance of 1 in 729.
#[test]
fn a_new_topic_s_partitions_are_led_by_their_first_replicas() {
    let _serial = serial();
    let quorum = Quorum::start(3);
    quorum.wait_for_leader(Duration::from_secs(30));
    for (topic, factor) in [("first-three", 3), ("first-two", 2)] {
        assert_eq!(create_topic(&quorum, topic, 6, factor), (0, factor));
        let partitions = eventually(
            Duration::from_secs(30),
            &format!("leaders of every partition of {topic}"),
            || leaders_and_replicas(&quorum, topic),
        );
        for (index, (leader, replicas)) in partitions.iter().enumerate() {
            assert_eq!(replicas.len(), factor as usize, "{topic}-{index}");
            assert_eq!(
                *leader,
                replicas[0],
                "{topic}-{index} (replicas {replicas:?}) is led by {leader}, not its first replica\n{}",
                quorum.dump_logs()
            );
        }
        if factor == 3 {
            // Six partitions on every one of three nodes: each node leads two (such a topic
            // lists its replicas from a different node for each partition, as Kafka's
            // assignment does, so the first replicas, and leaders, go round the nodes).
            let mut led = std::collections::BTreeMap::new();
            for (leader, _) in &partitions {
                *led.entry(*leader).or_insert(0) += 1;
            }
            assert_eq!(
                led.values().copied().collect::<Vec<_>>(),
                vec![2, 2, 2],
                "{topic}: partitions led per node {led:?}"
            );
        }
    }
}

/// Preferred leaders kept (leader_balance.rs, Kafka's `auto.leader.rebalance.enable`): after
/// a kill -9 the partitions node 1 led are led by the other two, and once node 1 is back and
/// has fetched their logs, their leaders hand them back to it. Before, they stayed with
/// whoever won the elections during its absence.
#[test]
fn a_restarted_node_leads_its_preferred_partitions_again() {
    let _serial = serial();
    let mut quorum = Quorum::format_with(3, "leader.imbalance.check.interval.seconds=1\n");
    quorum.start_all();
    quorum.wait_for_leader(Duration::from_secs(30));
    assert_eq!(create_topic(&quorum, "kept", 6, 3), (0, 3));
    let first_replicas_lead = |at: i32| {
        move |quorum: &Quorum| {
            leaders_and_replicas_at(quorum, at, "kept")
                .filter(|partitions| partitions.iter().all(|(leader, r)| *leader == r[0]))
        }
    };
    let partitions = eventually(
        Duration::from_secs(30),
        "every partition of kept led by its first replica",
        || first_replicas_lead(1)(&quorum),
    );
    let preferred_by_1 = partitions.iter().filter(|(_, r)| r[0] == 1).count();
    assert_eq!(preferred_by_1, 2, "{partitions:?}");
    quorum.kill(1);
    eventually(
        Duration::from_secs(30),
        "node 1's partitions led by the others",
        || {
            leaders_and_replicas_at(&quorum, 2, "kept")
                .filter(|partitions| partitions.iter().all(|(leader, _)| *leader != 1))
        },
    );
    quorum.start_node(1);
    eventually(
        Duration::from_secs(60),
        "node 1 leading its preferred partitions again",
        || first_replicas_lead(2)(&quorum),
    );
    let handed = (2..=3)
        .map(|id| quorum::text_of(&quorum.node(id).log))
        .filter(|log| log.contains("leadership handed to the preferred leader"))
        .count();
    assert!(handed >= 1, "{}", quorum.dump_logs());
}
