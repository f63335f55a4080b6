//! The admission table (admission.rs) case by case, and the node's own quorum requests admitted
//! by a peer after a trip through the codec.
use bytes::Bytes;
use ringlog_replication as core;

use super::*;
use crate::node::convert::{PEER_FETCH_VERSION, PartitionTable, fetch_request, peer_request};
use crate::node::fetch_snapshot;
use crate::protocol::{
    RequestHeader, decode_request, encode_response, fetch_request as fetch_req,
    fetch_snapshot_request as snap_req, vote_request as vote_req,
};

const CLUSTER: &str = "MkU3OEVBNTcwNTJENDM2Qg";

/// Voters 1, 2, 3; observer 4.
fn config() -> NodeConfig {
    NodeConfig::parse(
        "test",
        "node.id=1\ncontroller.quorum.voters=1@127.0.0.1:9093,2@127.0.0.1:9094,3@127.0.0.1:9095\n\
         controller.quorum.observers=4\nlisteners=127.0.0.1:9093\nmetadata.log.dir=/tmp/x\n",
    )
    .unwrap()
}

/// Every partition on every voter (the placement of topics created before replication
/// factors).
fn all_voters(_: TopicRef<'_>, _: i32) -> Option<Vec<i32>> {
    Some(vec![1, 2, 3])
}

fn through_the_wire(request: Request, version: i16) -> Request {
    let header = RequestHeader {
        api_key: request.api_key().key(),
        api_version: version,
        correlation_id: 7,
        client_id: Some("t".into()),
    };
    let frame = crate::protocol::encode_request(&header, &request).unwrap();
    decode_request(frame.slice(4..)).unwrap().1
}

fn vote(cluster_id: Option<&str>) -> Request {
    Request::Vote(vote_req::VoteRequest {
        cluster_id: cluster_id.map(str::to_string),
        topics: vec![vote_req::TopicData {
            topic_name: "__cluster_metadata".into(),
            partitions: vec![vote_req::PartitionData {
                partition_index: 0,
                replica_epoch: 9,
                replica_id: 2,
                ..Default::default()
            }],
        }],
        ..Default::default()
    })
}

fn replica_fetch(cluster_id: Option<&str>, replica_id: i32) -> fetch_req::FetchRequest {
    fetch_req::FetchRequest {
        cluster_id: cluster_id.map(str::to_string),
        replica_id,
        topics: vec![fetch_req::FetchTopic {
            topic: "__cluster_metadata".into(),
            partitions: vec![fetch_req::FetchPartition {
                partition: 0,
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    }
}

fn fetch_snapshot(cluster_id: Option<&str>, replica_id: i32) -> Request {
    Request::FetchSnapshot(snap_req::FetchSnapshotRequest {
        cluster_id: cluster_id.map(str::to_string),
        replica_id,
        topics: vec![snap_req::TopicSnapshot {
            name: "__cluster_metadata".into(),
            partitions: vec![snap_req::PartitionSnapshot {
                partition: 0,
                ..Default::default()
            }],
        }],
        ..Default::default()
    })
}

/// KIP-595: a quorum request of another cluster, or one that names none, is refused with
/// INCONSISTENT_CLUSTER_ID; ours passes.
#[test]
fn a_foreign_or_missing_cluster_id_is_refused() {
    let config = config();
    for claimed in [Some("another-cluster"), None] {
        for request in [
            vote(claimed),
            Request::Fetch(replica_fetch(claimed, 2)),
            fetch_snapshot(claimed, 2),
        ] {
            let refusal = admit(&request, 12, CLUSTER, &config, &all_voters).unwrap_err();
            assert_eq!(
                refusal,
                Refusal::ClusterId {
                    claimed: claimed.map(str::to_string)
                }
            );
            assert_eq!(refusal.error_code(), ErrorCode::InconsistentClusterId);
        }
    }
    assert_eq!(
        admit(&vote(Some(CLUSTER)), 0, CLUSTER, &config, &all_voters),
        Ok(())
    );
}

/// A replica Fetch or FetchSnapshot from an id that is neither a voter nor a configured
/// observer is refused with INCONSISTENT_VOTER_SET; voters and the observer pass, at the
/// versions that carry the replica id at the top level and in ReplicaState (v15+).
#[test]
fn only_voters_and_configured_observers_replicate() {
    let config = config();
    for replica_id in [2, 4] {
        let request = Request::Fetch(replica_fetch(Some(CLUSTER), replica_id));
        assert_eq!(admit(&request, 12, CLUSTER, &config, &all_voters), Ok(()));
        let snapshot = fetch_snapshot(Some(CLUSTER), replica_id);
        assert_eq!(admit(&snapshot, 0, CLUSTER, &config, &all_voters), Ok(()));
    }
    let stranger = Request::Fetch(replica_fetch(Some(CLUSTER), 99));
    let refusal = admit(&stranger, 12, CLUSTER, &config, &all_voters).unwrap_err();
    assert_eq!(refusal, Refusal::UnknownReplica { replica_id: 99 });
    assert_eq!(refusal.error_code(), ErrorCode::InconsistentVoterSet);
    let mut v15 = replica_fetch(Some(CLUSTER), -1);
    v15.replica_state.replica_id = 99;
    assert_eq!(
        admit(&Request::Fetch(v15), 15, CLUSTER, &config, &all_voters),
        Err(Refusal::UnknownReplica { replica_id: 99 })
    );
    assert_eq!(
        admit(
            &fetch_snapshot(Some(CLUSTER), 99),
            0,
            CLUSTER,
            &config,
            &all_voters
        ),
        Err(Refusal::UnknownReplica { replica_id: 99 })
    );
}

/// Votes and leader announcements come only from configured voters: an observer (4) or a
/// stranger (99) asking for a vote is refused before the core, which would otherwise move to
/// the request's epoch.
#[test]
fn only_voters_ask_for_votes() {
    let config = config();
    assert_eq!(
        admit(&vote(Some(CLUSTER)), 2, CLUSTER, &config, &all_voters),
        Ok(())
    );
    for replica_id in [4, 99] {
        let Request::Vote(mut request) = vote(Some(CLUSTER)) else {
            unreachable!("vote() builds a Vote")
        };
        request.topics[0].partitions[0].replica_id = replica_id;
        let refusal = admit(&Request::Vote(request), 2, CLUSTER, &config, &all_voters).unwrap_err();
        assert_eq!(refusal, Refusal::NotAVoter { replica_id });
        assert_eq!(refusal.error_code(), ErrorCode::InconsistentVoterSet);
    }
}

/// Consumers (ReplicaId -1) are not quorum traffic: no cluster id needed, any topic readable.
#[test]
fn consumers_are_not_checked() {
    let config = config();
    let consumer = Request::Fetch(replica_fetch(None, -1));
    assert_eq!(admit(&consumer, 12, CLUSTER, &config, &all_voters), Ok(()));
    assert_eq!(
        admit(&fetch_snapshot(None, -1), 0, CLUSTER, &config, &all_voters),
        Ok(())
    );
}

/// What the node itself sends its peers (convert.rs, fetch_snapshot.rs) carries the cluster id
/// through the codec at the versions it sends, so a peer admits it.
#[test]
fn the_nodes_own_requests_are_admitted_by_a_peer() {
    let config = config();
    let table = PartitionTable::metadata_only();
    let hosted = table.get(0);
    let messages = [
        core::Message::VoteRequest(core::VoteRequest {
            candidate_epoch: 3,
            candidate_id: 2,
            last_offset_epoch: 2,
            last_offset: 10,
            pre_vote: false,
            candidate_directory_id: [0; 16],
            voter_directory_id: [0; 16],
        }),
        core::Message::VoteRequest(core::VoteRequest {
            candidate_epoch: 3,
            candidate_id: 2,
            last_offset_epoch: 2,
            last_offset: 10,
            pre_vote: true,
            candidate_directory_id: [0; 16],
            voter_directory_id: [0; 16],
        }),
        core::Message::BeginQuorumEpochRequest(core::BeginQuorumEpochRequest {
            leader_id: 2,
            leader_epoch: 3,
            voter_directory_id: [0; 16],
        }),
        core::Message::EndQuorumEpochRequest(core::EndQuorumEpochRequest {
            leader_id: 2,
            leader_epoch: 3,
            preferred_successors: vec![3],
            preferred_successor_directory_ids: Vec::new(),
        }),
    ];
    for message in &messages {
        let (request, version) = peer_request(CLUSTER, hosted, message, 1).unwrap();
        let received = through_the_wire(request, version);
        assert_eq!(
            admit(&received, version, CLUSTER, &config, &all_voters),
            Ok(())
        );
    }
    let fetch = core::FetchRequest {
        correlation_id: 1,
        replica_id: 4,
        current_leader_epoch: 3,
        fetch_offset: 10,
        last_fetched_epoch: 2,
        max_bytes: 1 << 20,
        max_wait_ms: 500,
        replica_directory_id: [0; 16],
    };
    let request = Request::Fetch(fetch_request(CLUSTER, 4, &[(hosted, &fetch, false, -1)]));
    let received = through_the_wire(request, PEER_FETCH_VERSION);
    assert_eq!(
        admit(&received, PEER_FETCH_VERSION, CLUSTER, &config, &all_voters),
        Ok(())
    );
    let snapshot = core::FetchSnapshotRequest {
        correlation_id: 1,
        replica_id: 4,
        current_leader_epoch: 3,
        snapshot_id: core::OffsetAndEpoch::new(10, 2),
        position: 0,
        max_bytes: 1 << 20,
        replica_directory_id: [4; 16],
    };
    let request =
        Request::FetchSnapshot(fetch_snapshot::request(CLUSTER, 4, &[(hosted, &snapshot)]));
    let version = fetch_snapshot::PEER_FETCH_SNAPSHOT_VERSION;
    let received = through_the_wire(request, version);
    assert_eq!(
        admit(&received, version, CLUSTER, &config, &all_voters),
        Ok(())
    );
}

/// A refusal's answer names the error at the top level and in every partition, and encodes at
/// the versions peers use.
#[test]
fn a_refused_request_is_answered_with_its_error_everywhere() {
    let code = ErrorCode::InconsistentClusterId;
    let Some(Response::Vote(answer)) = refused_response(&vote(None), code) else {
        panic!("a Vote answer")
    };
    assert_eq!(answer.error_code, code.code());
    assert_eq!(answer.topics[0].partitions[0].error_code, code.code());
    assert!(!answer.topics[0].partitions[0].vote_granted);
    encode_response(1, 0, &Response::Vote(answer)).unwrap();

    let request = Request::Fetch(replica_fetch(None, 2));
    let Some(Response::Fetch(answer)) = refused_response(&request, code) else {
        panic!("a Fetch answer")
    };
    assert_eq!(answer.error_code, code.code());
    let partition = &answer.responses[0].partitions[0];
    assert_eq!(partition.error_code, code.code());
    assert_eq!(crate::client::fetched_records(partition), Bytes::new());
    encode_response(1, PEER_FETCH_VERSION, &Response::Fetch(answer)).unwrap();

    let Some(Response::FetchSnapshot(answer)) =
        refused_response(&fetch_snapshot(None, 2), ErrorCode::InconsistentVoterSet)
    else {
        panic!("a FetchSnapshot answer")
    };
    assert_eq!(answer.topics[0].partitions[0].error_code, 94);
    assert!(refused_response(&Request::ApiVersions(Default::default()), code).is_none());
}

/// Every API the node answers is in ApiVersions on the listeners that serve it: the client
/// listener lists Fetch and FetchSnapshot (consumers and the full-state read use both) and no
/// quorum API; the controller listener lists all. Ringlog's own clients refuse to send a
/// version a peer does not list (`crate::client::Exchange`), so a missing row is an outage:
/// FetchSnapshot was missing until 2026-12-02 and no follower could fetch a snapshot.
#[test]
fn api_versions_lists_every_served_api_on_the_listeners_that_serve_it() {
    use crate::server::ListenerRole;
    let listed = |role| -> Vec<i16> {
        crate::node::handlers::served_api_versions(role)
            .iter()
            .map(|v| v.api_key)
            .collect()
    };
    let client = listed(ListenerRole::Client);
    let controller = listed(ListenerRole::Controller);
    for api in [
        ApiKey::Fetch,
        ApiKey::FetchSnapshot,
        ApiKey::Produce,
        ApiKey::Metadata,
    ] {
        assert!(
            client.contains(&api.key()),
            "{api:?} on the client listener"
        );
        assert!(
            controller.contains(&api.key()),
            "{api:?} on the controller listener"
        );
    }
    for api in [
        ApiKey::Vote,
        ApiKey::BeginQuorumEpoch,
        ApiKey::AllocateProducerIds,
    ] {
        assert!(
            !client.contains(&api.key()),
            "{api:?} not on the client listener"
        );
        assert!(
            controller.contains(&api.key()),
            "{api:?} on the controller listener"
        );
    }
}

/// A stranger picks the version: the refusal encodes at every version the codec speaks for
/// each refused API (a failed encoding would close the connection, never end the node).
#[test]
fn a_refusal_encodes_at_every_version() {
    let requests = [
        vote(None),
        Request::BeginQuorumEpoch(Default::default()),
        Request::EndQuorumEpoch(Default::default()),
        Request::Fetch(replica_fetch(None, 2)),
        fetch_snapshot(None, 2),
    ];
    let versions = crate::protocol::supported_api_versions();
    for request in requests {
        let api = request.api_key();
        let range = versions
            .iter()
            .find(|v| v.api_key == api.key())
            .expect("a supported API");
        let response = refused_response(&request, ErrorCode::InconsistentClusterId).unwrap();
        for version in range.min_version..=range.max_version {
            encode_response(1, version, &response)
                .unwrap_or_else(|e| panic!("{api:?} v{version}: {e}"));
        }
    }
}

/// A peer that keeps asking is warned about once per interval; the rest is counted.
#[test]
fn refusals_are_warned_about_at_most_once_per_interval() {
    let mut log = RefusalLog::default();
    let refusal = Refusal::UnknownReplica { replica_id: 99 };
    log.note(0, ApiKey::Fetch, &refusal);
    assert_eq!(log.last_warning_ms, Some(0));
    for now_ms in 1..5 {
        log.note(now_ms, ApiKey::Fetch, &refusal);
    }
    assert_eq!((log.last_warning_ms, log.quiet_since_warning), (Some(0), 4));
    log.note(RefusalLog::WARN_EVERY_MS, ApiKey::Fetch, &refusal);
    assert_eq!(
        (log.last_warning_ms, log.quiet_since_warning),
        (Some(RefusalLog::WARN_EVERY_MS), 0)
    );
}

/// A voter replicates only the partitions placed on it: a replica Fetch or FetchSnapshot for
/// a partition whose replicas are 1 and 3 is refused from voter 2 (INCONSISTENT_VOTER_SET, as
/// from a stranger) and admitted from 1, 3 and the observer 4, by name and by topic id.
#[test]
fn replica_fetches_are_admitted_only_from_the_partitions_replicas() {
    let config = config();
    let placed = |topic: TopicRef<'_>, index: i32| match (topic, index) {
        (TopicRef::Name("__cluster_metadata"), 0) => Some(vec![1, 2, 3]),
        (TopicRef::Name("orders"), 0) => Some(vec![1, 3]),
        (TopicRef::Id(id), 0) if id == Uuid([5; 16]) => Some(vec![1, 3]),
        _ => None,
    };
    let fetch_of = |replica_id: i32| {
        let mut fetch = replica_fetch(Some(CLUSTER), replica_id);
        fetch.topics[0].topic = "orders".into();
        fetch.topics[0].topic_id = Uuid([5; 16]);
        fetch
    };
    let snapshot_of = |replica_id: i32| {
        let Request::FetchSnapshot(mut snapshot) = fetch_snapshot(Some(CLUSTER), replica_id) else {
            unreachable!()
        };
        snapshot.topics[0].name = "orders".into();
        Request::FetchSnapshot(snapshot)
    };
    for version in [12, 13] {
        for replica_id in [1, 3, 4] {
            let request = Request::Fetch(fetch_of(replica_id));
            assert_eq!(admit(&request, version, CLUSTER, &config, &placed), Ok(()));
        }
        let refusal = admit(
            &Request::Fetch(fetch_of(2)),
            version,
            CLUSTER,
            &config,
            &placed,
        )
        .unwrap_err();
        assert!(
            matches!(
                refusal,
                Refusal::NotAReplica {
                    replica_id: 2,
                    partition: 0,
                    ..
                }
            ),
            "{refusal:?}"
        );
        assert_eq!(refusal.error_code(), ErrorCode::InconsistentVoterSet);
    }
    assert_eq!(admit(&snapshot_of(3), 0, CLUSTER, &config, &placed), Ok(()));
    assert!(matches!(
        admit(&snapshot_of(2), 0, CLUSTER, &config, &placed),
        Err(Refusal::NotAReplica { replica_id: 2, .. })
    ));
    // The metadata partition stays on every voter.
    let metadata = Request::Fetch(replica_fetch(Some(CLUSTER), 2));
    assert_eq!(admit(&metadata, 12, CLUSTER, &config, &placed), Ok(()));
}

/// KIP-853: a voter added to the metadata quorum since the start (node 7, in neither
/// `controller.quorum.voters` nor `controller.quorum.observers`) replicates and stands for
/// election once the voter set in force names it; before, it is a stranger.
#[test]
fn a_voter_added_since_the_start_is_admitted() {
    let config = config();
    let fetch = Request::Fetch(replica_fetch(Some(CLUSTER), 7));
    let mut vote_from_7 = vote(Some(CLUSTER));
    if let Request::Vote(r) = &mut vote_from_7 {
        for topic in &mut r.topics {
            for partition in &mut topic.partitions {
                partition.replica_id = 7;
            }
        }
    }
    for request in [&fetch, &vote_from_7] {
        assert!(admit_with_voters(request, 12, CLUSTER, &config, &[1, 2, 3], &all_voters).is_err());
        let with_7 = |_: TopicRef<'_>, _: i32| Some(vec![1, 2, 3, 7]);
        assert_eq!(
            admit_with_voters(request, 12, CLUSTER, &config, &[1, 2, 7], &with_7),
            Ok(())
        );
    }
}

/// What a client listener refuses (`controller.listener.names`): the quorum's own APIs and a
/// replica's Fetch or FetchSnapshot; a consumer's Fetch and FetchSnapshot (ReplicaId -1) and
/// every client API pass.
#[test]
fn quorum_requests_are_the_quorum_apis_and_replica_reads() {
    let fetch = |replica_id: i32| {
        Request::Fetch(fetch_req::FetchRequest {
            replica_id,
            ..Default::default()
        })
    };
    let fetch_snapshot = |replica_id: i32| {
        Request::FetchSnapshot(snap_req::FetchSnapshotRequest {
            replica_id,
            ..Default::default()
        })
    };
    assert!(is_quorum_request(&Request::Vote(Default::default()), 0));
    assert!(is_quorum_request(
        &Request::BeginQuorumEpoch(Default::default()),
        0
    ));
    assert!(is_quorum_request(
        &Request::EndQuorumEpoch(Default::default()),
        0
    ));
    assert!(is_quorum_request(
        &Request::AddRaftVoter(Default::default()),
        0
    ));
    assert!(is_quorum_request(&fetch(2), 12));
    assert!(!is_quorum_request(&fetch(-1), 12));
    assert!(is_quorum_request(&fetch_snapshot(2), 0));
    assert!(!is_quorum_request(&fetch_snapshot(-1), 0));
    assert!(!is_quorum_request(&Request::Produce(Default::default()), 9));
    assert!(!is_quorum_request(
        &Request::DescribeQuorum(Default::default()),
        0
    ));
    assert!(!is_quorum_request(
        &Request::Metadata(Default::default()),
        12
    ));
}
