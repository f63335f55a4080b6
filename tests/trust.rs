//! Issue 17's trust boundary on real `ringlog serve` processes: internal state is written only
//! by the node (a Produce to an internal topic is refused, net/src/node/handlers.rs), and quorum
//! requests are taken only from this cluster's voters and configured observers
//! (net/src/node/admission.rs).
//!
//! One quorum at a time (`quorum::serial`); waits poll a condition up to a deadline.

use std::time::Duration;

use bytes::Bytes;
use ringlog_engine::batch::RecordBatchBuilder;
use ringlog_net::client::{Client, QuorumView, connect_to_leader};
use ringlog_net::protocol::wire::Uuid;
use ringlog_net::protocol::{
    Request, Response, begin_quorum_epoch_request as bqe, end_quorum_epoch_request as eqe,
    fetch_request, fetch_snapshot_request as snap, metadata_request, vote_request as vote,
};

mod quorum;
use quorum::{Quorum, batch_of, eventually, read_partition_values, serial};

const INVALID_TOPIC_EXCEPTION: i16 = 17;
const INCONSISTENT_VOTER_SET: i16 = 94;
const INCONSISTENT_CLUSTER_ID: i16 = 104;
/// The stranger's cluster id (the quorum's is `quorum::format_node`'s).
const OTHER_CLUSTER: &str = "T3RoZXJDbHVzdGVySWRYWA";
const TOPIC: &str = "guarded";

/// DescribeQuorum of `TOPIC`-0 at node `id`.
fn describe(quorum: &Quorum, id: i32) -> Option<QuorumView> {
    Client::connect(&quorum.address(id), Duration::from_millis(500))
        .ok()?
        .describe_quorum_of(TOPIC, 0)
        .ok()
}

/// What a stranger could change: (leader, epoch, high-watermark, each voter's log end offset
/// as the leader records it, the observers it knows).
fn state(view: &QuorumView) -> (i32, i32, i64, Vec<(i32, i64)>, Vec<i32>) {
    let p = &view.partition;
    let mut voters: Vec<(i32, i64)> = p
        .current_voters
        .iter()
        .map(|r| (r.replica_id, r.log_end_offset))
        .collect();
    voters.sort_unstable();
    let observers = p.observers.iter().map(|r| r.replica_id).collect();
    (
        p.leader_id,
        p.leader_epoch,
        p.high_watermark,
        voters,
        observers,
    )
}

/// A replica Fetch (v12) of `TOPIC`-0 from `offset`, answered at once (no long poll).
fn replica_fetch(cluster_id: Option<&str>, replica_id: i32, epoch: i32, offset: i64) -> Request {
    Request::Fetch(fetch_request::FetchRequest {
        cluster_id: cluster_id.map(str::to_string),
        replica_id,
        max_wait_ms: 0,
        min_bytes: 1,
        max_bytes: 1 << 20,
        topics: vec![fetch_request::FetchTopic {
            topic: TOPIC.into(),
            partitions: vec![fetch_request::FetchPartition {
                partition: 0,
                current_leader_epoch: epoch,
                fetch_offset: offset,
                last_fetched_epoch: epoch,
                log_start_offset: -1,
                partition_max_bytes: 1 << 20,
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    })
}

/// A Vote for `candidate` in a later epoch with a log far ahead of anyone's: granted, it would
/// end the current leader's term.
fn vote_request(cluster_id: Option<&str>, candidate: i32, epoch: i32) -> Request {
    Request::Vote(vote::VoteRequest {
        cluster_id: cluster_id.map(str::to_string),
        topics: vec![vote::TopicData {
            topic_name: TOPIC.into(),
            partitions: vec![vote::PartitionData {
                partition_index: 0,
                replica_epoch: epoch + 5,
                replica_id: candidate,
                last_offset_epoch: epoch,
                last_offset: 1_000_000,
                ..Default::default()
            }],
        }],
        ..Default::default()
    })
}

/// BeginQuorumEpoch naming `leader` in a later epoch: taken, the real leader would follow it.
fn begin_quorum_epoch(cluster_id: Option<&str>, leader: i32, epoch: i32) -> Request {
    Request::BeginQuorumEpoch(bqe::BeginQuorumEpochRequest {
        cluster_id: cluster_id.map(str::to_string),
        topics: vec![bqe::TopicData {
            topic_name: TOPIC.into(),
            partitions: vec![bqe::PartitionData {
                partition_index: 0,
                leader_id: leader,
                leader_epoch: epoch + 5,
                ..Default::default()
            }],
        }],
        ..Default::default()
    })
}

fn end_quorum_epoch(cluster_id: Option<&str>, leader: i32, epoch: i32) -> Request {
    Request::EndQuorumEpoch(eqe::EndQuorumEpochRequest {
        cluster_id: cluster_id.map(str::to_string),
        topics: vec![eqe::TopicData {
            topic_name: TOPIC.into(),
            partitions: vec![eqe::PartitionData {
                partition_index: 0,
                leader_id: leader,
                leader_epoch: epoch,
                ..Default::default()
            }],
        }],
        ..Default::default()
    })
}

fn fetch_snapshot(cluster_id: Option<&str>, replica_id: i32, epoch: i32) -> Request {
    Request::FetchSnapshot(snap::FetchSnapshotRequest {
        cluster_id: cluster_id.map(str::to_string),
        replica_id,
        topics: vec![snap::TopicSnapshot {
            name: TOPIC.into(),
            partitions: vec![snap::PartitionSnapshot {
                partition: 0,
                current_leader_epoch: epoch,
                ..Default::default()
            }],
        }],
        ..Default::default()
    })
}

/// (top-level error, first partition's error) of a quorum answer.
fn error_codes(response: &Response) -> (i16, i16) {
    match response {
        Response::Vote(r) => (r.error_code, r.topics[0].partitions[0].error_code),
        Response::BeginQuorumEpoch(r) => (r.error_code, r.topics[0].partitions[0].error_code),
        Response::EndQuorumEpoch(r) => (r.error_code, r.topics[0].partitions[0].error_code),
        Response::Fetch(r) => (r.error_code, r.responses[0].partitions[0].error_code),
        Response::FetchSnapshot(r) => (r.error_code, r.topics[0].partitions[0].error_code),
        other => panic!("not a quorum answer: {other:?}"),
    }
}

/// KIP-595: a request of another cluster (or naming none) is refused with
/// INCONSISTENT_CLUSTER_ID, and a replica id nobody configured with INCONSISTENT_VOTER_SET,
/// before it reaches the replication core. Set-up: the topic's leader alone, both followers
/// killed, a record appended that no majority holds, so that one replica Fetch under a
/// follower's id would commit it. Neither that Fetch, nor a Vote or BeginQuorumEpoch in a
/// later epoch that would depose the leader, changes the leader, the epoch, the high-watermark
/// or what the leader knows of its replicas; the real followers, back, commit the record.
#[test]
fn a_strangers_quorum_requests_change_nothing() {
    let _serial = serial();
    // A long fetch timeout: the leader keeps leading (check quorum) while its followers are down.
    let mut quorum = Quorum::format_with(3, "controller.quorum.fetch.timeout.ms=30000");
    quorum.start_all();
    let quorum::LoneLeader {
        leader,
        epoch,
        followers,
        log_end_offset,
    } = quorum::leave_leader_alone_with_a_record(&mut quorum, TOPIC, "uncommitted");
    let mut client = Client::connect(&quorum.address(leader), Duration::from_secs(2)).unwrap();
    let before = state(&describe(&quorum, leader).unwrap());
    assert!(
        before.2 < log_end_offset,
        "no majority holds the record yet"
    );

    let refused = [
        // A follower's fetch up to the leader's log end: taken, it would commit the record.
        (
            replica_fetch(Some(OTHER_CLUSTER), followers[0], epoch, log_end_offset),
            INCONSISTENT_CLUSTER_ID,
        ),
        (
            replica_fetch(None, followers[0], epoch, log_end_offset),
            INCONSISTENT_CLUSTER_ID,
        ),
        (
            vote_request(Some(OTHER_CLUSTER), followers[0], epoch),
            INCONSISTENT_CLUSTER_ID,
        ),
        (
            vote_request(None, followers[0], epoch),
            INCONSISTENT_CLUSTER_ID,
        ),
        (
            begin_quorum_epoch(Some(OTHER_CLUSTER), followers[0], epoch),
            INCONSISTENT_CLUSTER_ID,
        ),
        (
            end_quorum_epoch(Some(OTHER_CLUSTER), leader, epoch),
            INCONSISTENT_CLUSTER_ID,
        ),
        (
            fetch_snapshot(Some(OTHER_CLUSTER), followers[0], epoch),
            INCONSISTENT_CLUSTER_ID,
        ),
        // This cluster's id, but a replica nobody configured (no observers here).
        (
            replica_fetch(Some(quorum::CLUSTER_ID), 99, epoch, log_end_offset),
            INCONSISTENT_VOTER_SET,
        ),
        (
            fetch_snapshot(Some(quorum::CLUSTER_ID), 99, epoch),
            INCONSISTENT_VOTER_SET,
        ),
        // A voter-only request from a non-voter, refused by the core as before.
        (
            vote_request(Some(quorum::CLUSTER_ID), 99, epoch),
            INCONSISTENT_VOTER_SET,
        ),
    ];
    for (request, code) in refused {
        let answer = client.request(&request, version_of(&request)).unwrap();
        assert_eq!(
            describe(&quorum, leader).map(|view| state(&view)),
            Some(before.clone()),
            "{:?} changed the quorum (answered {answer:?})",
            request.api_key()
        );
        let (top, partition) = error_codes(&answer);
        assert_eq!(
            partition,
            code,
            "{:?} answered {answer:?}",
            request.api_key()
        );
        if code == INCONSISTENT_CLUSTER_ID {
            assert_eq!(top, code, "Kafka's clients read the top-level error");
        }
    }

    // The real followers carry this cluster's id: back, they follow the same leader in the
    // same epoch (their fetch timeout is far away) and their fetches commit the record. (Both
    // come back: one of them may lead `__cluster_metadata-0`, which a restarted node needs to
    // learn the topic again.)
    quorum.start_all();
    eventually(Duration::from_secs(20), "the record committed", || {
        let view = describe(&quorum, leader)?;
        (view.partition.high_watermark >= log_end_offset).then_some(())
    });
    let after = state(&describe(&quorum, leader).unwrap());
    assert_eq!((after.0, after.1), (leader, epoch));
}

/// The version a request is sent at: Vote, BeginQuorumEpoch, EndQuorumEpoch and FetchSnapshot
/// at v0, Fetch at v12 (the first with ClusterId).
fn version_of(request: &Request) -> i16 {
    match request {
        Request::Fetch(_) => 12,
        _ => 0,
    }
}

// ---- internal topics ---------------------------------------------------------------------------

const VICTIM: &str = "victim";

/// One record `key` → `value` (`None`: a tombstone).
fn keyed(key: &[u8], value: Option<&[u8]>) -> Bytes {
    let mut builder = RecordBatchBuilder::new(0);
    builder.append(0, Some(key), value, &[]);
    builder.build().into_bytes()
}

/// `name`'s topic id as node `id` answers Metadata (`None`: unknown there).
fn topic_id_at(quorum: &Quorum, id: i32, name: &str) -> Option<Uuid> {
    let mut client = Client::connect(&quorum.address(id), Duration::from_millis(500)).ok()?;
    let request = Request::Metadata(metadata_request::MetadataRequest {
        topics: Some(vec![metadata_request::MetadataRequestTopic {
            name: Some(name.into()),
            ..Default::default()
        }]),
        ..Default::default()
    });
    let Ok(Response::Metadata(m)) = client.request(&request, 12) else {
        return None;
    };
    let topic = m.topics.first()?;
    (topic.error_code == 0).then_some(topic.topic_id)
}

/// Internal state is written only by the node: a Produce to `__cluster_metadata` with a topic
/// record's key (a tombstone, which every node would apply as the topic's deletion, past
/// DeleteTopics; or a record replacing it) is refused with INVALID_TOPIC_EXCEPTION, as Kafka
/// refuses client appends to its internal topics (`ReplicaManager.appendToLocalLog`), at
/// acks=all, 1 and 0, and so is a Produce to any other internal name. A topic created after
/// them (so every node applied whatever came before it) finds the victim unchanged on every
/// node, still taking records; consumers may still read the metadata log.
#[test]
fn a_produce_to_an_internal_topic_is_refused_and_changes_no_topic() {
    let _serial = serial();
    let quorum = Quorum::start(3);
    quorum.wait_for_leader(Duration::from_secs(20));
    quorum.create_topic(VICTIM, 1, &[]);
    let (victim_leader, _) = quorum.wait_for_leader_of(VICTIM, Duration::from_secs(20));
    let victim_id = eventually(Duration::from_secs(10), "the topic id", || {
        topic_id_at(&quorum, victim_leader, VICTIM)
    });

    let key = format!("ringlog.topic.v2/{VICTIM}");
    let replacement = format!(
        "name={VICTIM}\ttopic_id={}\tpartitions=5\tcleanup.policy=delete",
        "ab".repeat(16)
    );
    let mut client = connect_to_leader(&quorum.address(1), Duration::from_secs(2)).unwrap();
    for (topic, records, acks) in [
        ("__cluster_metadata", keyed(key.as_bytes(), None), -1),
        ("__cluster_metadata", keyed(key.as_bytes(), None), 1),
        (
            "__cluster_metadata",
            keyed(key.as_bytes(), Some(replacement.as_bytes())),
            -1,
        ),
        ("__consumer_offsets", batch_of("offsets"), -1),
    ] {
        let answer = client
            .produce(topic, 0, records, acks, 5000)
            .unwrap()
            .expect("acks 1 and all answer");
        assert_eq!(
            answer.error_code, INVALID_TOPIC_EXCEPTION,
            "a Produce to {topic} at acks={acks}: {:?}",
            answer.error_message
        );
        assert_eq!(answer.base_offset, -1);
    }
    // acks=0 has no answer; what counts is that nothing was appended (checked below).
    let no_answer = client
        .produce(
            "__cluster_metadata",
            0,
            keyed(key.as_bytes(), None),
            0,
            5000,
        )
        .unwrap();
    assert!(no_answer.is_none());

    quorum.create_topic("after", 1, &[]);
    for node in &quorum.nodes {
        eventually(
            Duration::from_secs(20),
            &format!("node {} to apply the later topic", node.id),
            || topic_id_at(&quorum, node.id, "after"),
        );
        assert_eq!(
            topic_id_at(&quorum, node.id, VICTIM),
            Some(victim_id),
            "node {} changed {VICTIM}",
            node.id
        );
    }
    let mut leader =
        Client::connect(&quorum.address(victim_leader), Duration::from_secs(2)).unwrap();
    let (code, _) = quorum::produce_to(&mut leader, VICTIM, 0, batch_of("still here"));
    assert_eq!(code, 0);

    // Kafka lets clients read internal topics: the metadata log holds the victim's record.
    let values = read_partition_values(&mut client, "__cluster_metadata").unwrap();
    assert!(
        values
            .iter()
            .any(|v| v.starts_with(format!("name={VICTIM}\t").as_bytes())),
        "the topic record is readable"
    );
}
