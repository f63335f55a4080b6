//! Issue 17, "peers are who they say they are": a separate controller listener
//! (`controller.listener.names`) on real `ringlog serve` processes. The quorum talks on the
//! controller listeners and commits; clients use the client listeners, which Metadata names; a
//! quorum request on a client listener closes the connection (Kafka's answer to an API a
//! listener does not expose) and changes nothing, while the same request on the controller
//! listener is taken.
//!
//! One quorum at a time (`quorum::serial`); waits poll a condition up to a deadline.

use std::time::Duration;

use ringlog_net::client::{Client, QuorumView};
use ringlog_net::protocol::{
    ApiKey, Request, Response, api_versions_request, fetch_request, metadata_request,
    vote_request as vote,
};

mod quorum;
use quorum::{Quorum, eventually, read_partition_values, serial};

const TOPIC: &str = "separated";

/// DescribeQuorum of `TOPIC`-0 at `address`.
fn describe(address: &str) -> Option<QuorumView> {
    Client::connect(address, Duration::from_millis(500))
        .ok()?
        .describe_quorum_of(TOPIC, 0)
        .ok()
}

/// (leader, epoch, high-watermark, each voter's log end offset as the leader records it).
fn state(view: &QuorumView) -> (i32, i32, i64, Vec<(i32, i64)>) {
    let p = &view.partition;
    let mut voters: Vec<(i32, i64)> = p
        .current_voters
        .iter()
        .map(|r| (r.replica_id, r.log_end_offset))
        .collect();
    voters.sort_unstable();
    (p.leader_id, p.leader_epoch, p.high_watermark, voters)
}

/// A replica Fetch (v12) of `TOPIC`-0 from `offset` under `replica_id`, with this cluster's
/// id: from a configured voter, so taken where the quorum is served.
fn replica_fetch(replica_id: i32, epoch: i32, offset: i64) -> Request {
    Request::Fetch(fetch_request::FetchRequest {
        cluster_id: Some(quorum::CLUSTER_ID.into()),
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

/// A Vote from a configured voter in a later epoch: taken, it would end the leader's term.
fn vote_request(candidate: i32, epoch: i32) -> Request {
    Request::Vote(vote::VoteRequest {
        cluster_id: Some(quorum::CLUSTER_ID.into()),
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

/// The API keys ApiVersions lists at `address`.
fn api_keys(address: &str) -> Vec<i16> {
    let mut client = Client::connect(address, Duration::from_secs(2)).unwrap();
    let request = Request::ApiVersions(api_versions_request::ApiVersionsRequest::default());
    let Response::ApiVersions(answer) = client.request(&request, 3).unwrap() else {
        panic!("not an ApiVersions answer");
    };
    answer.api_keys.iter().map(|v| v.api_key).collect()
}

/// The (id, port) of every broker Metadata lists at `address`.
fn metadata_brokers(address: &str) -> Vec<(i32, i32)> {
    let mut client = Client::connect(address, Duration::from_secs(2)).unwrap();
    let request = Request::Metadata(metadata_request::MetadataRequest {
        topics: Some(Vec::new()),
        ..Default::default()
    });
    let Response::Metadata(answer) = client.request(&request, 12).unwrap() else {
        panic!("not a Metadata answer");
    };
    let mut brokers: Vec<(i32, i32)> = answer.brokers.iter().map(|b| (b.node_id, b.port)).collect();
    brokers.sort_unstable();
    brokers
}

/// Three voters whose quorum traffic runs on their controller listeners elect leaders, commit
/// acks=all records and serve them on the client listeners; Metadata names the client
/// listeners, never the controller ones.
#[test]
fn a_quorum_with_separate_controller_listeners_commits() {
    let _serial = serial();
    let mut quorum = Quorum::format_with_controller_listeners(3, "");
    quorum.start_all();
    quorum.wait_for_leader(Duration::from_secs(20));
    quorum.create_topic(TOPIC, 1, &[]);
    let (leader, _) = quorum.wait_for_leader_of(TOPIC, Duration::from_secs(20));
    quorum.produce(TOPIC, leader, 20, "separated");
    for node in &quorum.nodes {
        let mut client = Client::connect(&quorum.address(node.id), Duration::from_secs(2)).unwrap();
        eventually(
            Duration::from_secs(10),
            "every replica serves the records",
            || {
                let values = read_partition_values(&mut client, TOPIC).ok()?;
                (values.len() == 20).then_some(())
            },
        );
    }
    let client_ports: Vec<(i32, i32)> = quorum
        .nodes
        .iter()
        .map(|n| (n.id, i32::from(n.port)))
        .collect();
    for node in &quorum.nodes {
        assert_eq!(
            metadata_brokers(&quorum.address(node.id)),
            client_ports,
            "node {} lists the client listeners",
            node.id
        );
    }
    // Each listener lists what it serves.
    let on_client = api_keys(&quorum.address(1));
    let on_controller = api_keys(&quorum.controller_address(1));
    for api in [
        ApiKey::Vote,
        ApiKey::BeginQuorumEpoch,
        ApiKey::EndQuorumEpoch,
        ApiKey::AddRaftVoter,
    ] {
        assert!(
            !on_client.contains(&api.key()),
            "{api:?} on the client listener"
        );
        assert!(
            on_controller.contains(&api.key()),
            "{api:?} on the controller listener"
        );
    }
    // Fetch and FetchSnapshot are served on both: a consumer's (ReplicaId -1, the full-state
    // read) on the client listener, a replica's only on the controller listener.
    for api in [
        ApiKey::Produce,
        ApiKey::Fetch,
        ApiKey::FetchSnapshot,
        ApiKey::Metadata,
    ] {
        assert!(
            on_client.contains(&api.key()),
            "{api:?} on the client listener"
        );
    }
}

/// A quorum request with this cluster's id from a configured voter's id, sent to a client
/// listener, closes the connection and changes nothing; the same replica Fetch on the
/// controller listener is taken (it commits a record no majority held). Set-up as in
/// tests/trust.rs: the topic's leader alone, a record appended that no majority holds.
#[test]
fn quorum_requests_on_the_client_listener_are_refused_and_change_nothing() {
    let _serial = serial();
    // A long fetch timeout: the leader keeps leading (check quorum) while its followers are down.
    let mut quorum =
        Quorum::format_with_controller_listeners(3, "controller.quorum.fetch.timeout.ms=30000");
    quorum.start_all();
    let quorum::LoneLeader {
        leader,
        epoch,
        followers,
        log_end_offset,
    } = quorum::leave_leader_alone_with_a_record(&mut quorum, TOPIC, "uncommitted");
    let leader_client = quorum.address(leader);
    let before = state(&describe(&leader_client).unwrap());
    assert!(
        before.2 < log_end_offset,
        "no majority holds the record yet"
    );

    for request in [
        replica_fetch(followers[0], epoch, log_end_offset),
        vote_request(followers[0], epoch),
    ] {
        let mut stranger = Client::connect(&leader_client, Duration::from_secs(2)).unwrap();
        let version = if matches!(request, Request::Fetch(_)) {
            12
        } else {
            0
        };
        let answer = stranger.request(&request, version);
        assert!(
            answer.is_err(),
            "{:?} on the client listener was answered: {answer:?}",
            request.api_key()
        );
        assert_eq!(
            describe(&leader_client).map(|view| state(&view)),
            Some(before.clone()),
            "{:?} on the client listener changed the quorum",
            request.api_key()
        );
    }
    // The client listener still serves clients.
    assert!(describe(&leader_client).is_some());

    // The same Fetch where the quorum is served: it counts toward the high-watermark.
    let mut peer =
        Client::connect(&quorum.controller_address(leader), Duration::from_secs(2)).unwrap();
    let Response::Fetch(fetched) = peer
        .request(&replica_fetch(followers[0], epoch, log_end_offset), 12)
        .unwrap()
    else {
        panic!("not a Fetch answer");
    };
    assert_eq!(fetched.responses[0].partitions[0].error_code, 0);
    eventually(
        Duration::from_secs(10),
        "the record committed by the Fetch on the controller listener",
        || {
            let view = describe(&leader_client)?;
            (view.partition.high_watermark >= log_end_offset).then_some(())
        },
    );
}
