//! Round trips of the wire ⇄ core mapping (KIP-595 messages through the real codec).
use super::*;
use bytes::Bytes;
use ringlog_replication::OffsetAndEpoch;

use crate::protocol::fetch_request as fetch_req;
use crate::protocol::{
    ApiKey, Request, RequestHeader, Response, decode_request, decode_response, encode_request,
    encode_response,
};

fn round_trip_request(request: Request, version: i16) -> Request {
    let header = RequestHeader {
        api_key: request.api_key().key(),
        api_version: version,
        correlation_id: 7,
        client_id: Some("t".into()),
    };
    let frame = encode_request(&header, &request).unwrap();
    decode_request(frame.slice(4..)).unwrap().1
}

fn round_trip_response(api: ApiKey, version: i16, response: Response) -> Response {
    let frame = encode_response(7, version, &response).unwrap();
    decode_response(api, version, frame.slice(4..)).unwrap().1
}

/// KIP-595 Vote and KIP-996 pre-vote: what the node sends decodes, on the other node, to the
/// same core request (a pre-vote goes as Vote v2, the first version with PreVote), KIP-853's
/// directory ids included (Vote v1+).
#[test]
fn vote_request_survives_the_wire() {
    let table = PartitionTable::metadata_only();
    for (pre_vote, wire_version) in [(false, 1), (true, 2)] {
        let message = core::Message::VoteRequest(core::VoteRequest {
            candidate_epoch: 5,
            candidate_id: 2,
            last_offset_epoch: 4,
            last_offset: 17,
            pre_vote,
            candidate_directory_id: [2; 16],
            voter_directory_id: [6; 16],
        });
        let (request, version) = peer_request("c", table.get(0), &message, 1).unwrap();
        assert_eq!(version, wire_version);
        let Request::Vote(decoded) = round_trip_request(request, version) else {
            panic!()
        };
        let parts = vote_request_parts(&decoded, &table, 1);
        assert_eq!(parts.len(), 1);
        assert_eq!(parts[0].target, Ok((0, 2, message)));
    }
}

/// KIP-853: BeginQuorumEpoch v1 carries the receiver's directory id, EndQuorumEpoch v1 each
/// preferred successor's.
#[test]
fn leader_requests_carry_directory_ids_over_the_wire() {
    let table = PartitionTable::metadata_only();
    let begin = core::Message::BeginQuorumEpochRequest(core::BeginQuorumEpochRequest {
        leader_id: 1,
        leader_epoch: 3,
        voter_directory_id: [4; 16],
    });
    let (request, version) = peer_request("c", table.get(0), &begin, 2).unwrap();
    assert_eq!(version, 1);
    let Request::BeginQuorumEpoch(decoded) = round_trip_request(request, version) else {
        panic!()
    };
    let parts = begin_quorum_epoch_request_parts(&decoded, &table, 2);
    assert_eq!(parts[0].target, Ok((0, 1, begin)));

    let end = core::Message::EndQuorumEpochRequest(core::EndQuorumEpochRequest {
        leader_id: 1,
        leader_epoch: 3,
        preferred_successors: vec![3, 2],
        preferred_successor_directory_ids: vec![[3; 16], [2; 16]],
    });
    let (request, version) = peer_request("c", table.get(0), &end, 2).unwrap();
    assert_eq!(version, 1);
    let Request::EndQuorumEpoch(decoded) = round_trip_request(request, version) else {
        panic!()
    };
    let parts = end_quorum_epoch_request_parts(&decoded, &table);
    assert_eq!(parts[0].target, Ok((0, 1, end)));
}

/// KIP-853: Vote and BeginQuorumEpoch v1 name the replica they are meant for (`VoterId`); a
/// node refuses one meant for another node id with INVALID_VOTER_KEY (Kafka's
/// `isValidVoterKey`), before its core sees it. -1 (v0's default) names nobody and passes.
#[test]
fn a_request_meant_for_another_voter_id_is_refused() {
    let table = PartitionTable::metadata_only();
    let vote = core::Message::VoteRequest(core::VoteRequest {
        candidate_epoch: 5,
        candidate_id: 2,
        last_offset_epoch: 4,
        last_offset: 17,
        pre_vote: false,
        candidate_directory_id: [0; 16],
        voter_directory_id: [0; 16],
    });
    let (request, version) = peer_request("c", table.get(0), &vote, 3).unwrap();
    let Request::Vote(mut decoded) = round_trip_request(request, version) else {
        panic!()
    };
    assert_eq!(decoded.voter_id, 3, "the sender names the receiver");
    assert_eq!(
        vote_request_parts(&decoded, &table, 3)[0].target,
        Ok((0, 2, vote.clone()))
    );
    assert_eq!(
        vote_request_parts(&decoded, &table, 1)[0].target,
        Err(ErrorCode::InvalidVoterKey)
    );
    decoded.voter_id = -1;
    assert!(vote_request_parts(&decoded, &table, 1)[0].target.is_ok());

    let begin = core::Message::BeginQuorumEpochRequest(core::BeginQuorumEpochRequest {
        leader_id: 1,
        leader_epoch: 3,
        voter_directory_id: [0; 16],
    });
    let (request, version) = peer_request("c", table.get(0), &begin, 2).unwrap();
    let Request::BeginQuorumEpoch(decoded) = round_trip_request(request, version) else {
        panic!()
    };
    assert_eq!(
        begin_quorum_epoch_request_parts(&decoded, &table, 2)[0].target,
        Ok((0, 1, begin))
    );
    assert_eq!(
        begin_quorum_epoch_request_parts(&decoded, &table, 3)[0].target,
        Err(ErrorCode::InvalidVoterKey)
    );
}

#[test]
fn unknown_partition_and_negative_epoch_are_errors() {
    let table = PartitionTable::metadata_only();
    let request = vote_req::VoteRequest {
        topics: vec![vote_req::TopicData {
            topic_name: METADATA_TOPIC.into(),
            partitions: vec![
                vote_req::PartitionData {
                    partition_index: 3,
                    ..Default::default()
                },
                vote_req::PartitionData {
                    partition_index: 0,
                    replica_epoch: -4,
                    ..Default::default()
                },
            ],
        }],
        ..Default::default()
    };
    let parts = vote_request_parts(&request, &table, 1);
    assert_eq!(parts[0].target, Err(ErrorCode::UnknownTopicOrPartition));
    assert_eq!(parts[1].target, Err(ErrorCode::InvalidRequest));
}

/// KIP-320/595: DivergingEpoch, CurrentLeader and the records survive a peer fetch round trip.
/// A wire Fetch asks for at most REPLICA_FETCH_RESPONSE_MAX_BYTES in all, shared by its
/// partitions: a follower behind on many partitions of one leader is never sent more than its
/// lane reads (socket.request.max.bytes); and a busy partition among idle ones is not held to
/// an even share (`convert::partition_shares`).
#[test]
fn a_wire_fetch_shares_one_response_budget_among_its_partitions() {
    let mut table = PartitionTable::metadata_only();
    let fetch = core::FetchRequest {
        correlation_id: 1,
        replica_id: 3,
        current_leader_epoch: 1,
        fetch_offset: 0,
        last_fetched_epoch: 0,
        max_bytes: 8 << 20,
        max_wait_ms: 500,
        replica_directory_id: [0; 16],
    };
    let one = fetch_request("c", 3, &[(table.get(0), &fetch, false, -1)]);
    assert_eq!(one.topics[0].partitions[0].partition_max_bytes, 8 << 20);
    let ids: Vec<PartitionId> = (0..100)
        .map(|index| {
            table.add(HostedPartition {
                topic: "t".into(),
                topic_id: Uuid([7; 16]),
                index,
            })
        })
        .collect();
    let asked = |request: &fetch_req::FetchRequest| -> Vec<i64> {
        request
            .topics
            .iter()
            .flat_map(|t| &t.partitions)
            .map(|p| i64::from(p.partition_max_bytes))
            .collect()
    };
    // None idle, or all idle: an even share, the whole within the budget.
    for idle in [false, true] {
        let hosted: Vec<_> = ids
            .iter()
            .map(|id| (table.get(*id), &fetch, idle, -1))
            .collect();
        let many = fetch_request("c", 3, &hosted);
        let shares = asked(&many);
        assert_eq!(shares.len(), 100);
        assert!(shares.iter().all(|s| *s == shares[0]), "{shares:?}");
        assert!(
            shares.iter().sum::<i64>() <= i64::from(REPLICA_FETCH_RESPONSE_MAX_BYTES),
            "{shares:?}"
        );
        assert_eq!(many.max_bytes, REPLICA_FETCH_RESPONSE_MAX_BYTES as i32);
    }
    // One busy partition among 99 idle ones asks for what its core asks (capped by three
    // quarters of the budget), not a hundredth of the budget; the whole stays within it.
    let hosted: Vec<_> = ids
        .iter()
        .enumerate()
        .map(|(i, id)| (table.get(*id), &fetch, i != 42, -1))
        .collect();
    let shares = asked(&fetch_request("c", 3, &hosted));
    assert!(
        shares[42] >= i64::from(REPLICA_FETCH_RESPONSE_MAX_BYTES) * 3 / 4,
        "{shares:?}"
    );
    assert!(
        shares.iter().sum::<i64>() <= i64::from(REPLICA_FETCH_RESPONSE_MAX_BYTES),
        "{shares:?}"
    );
    let mut one_mib = fetch.clone();
    one_mib.max_bytes = 1 << 20;
    let hosted: Vec<_> = ids
        .iter()
        .enumerate()
        .map(|(i, id)| (table.get(*id), &one_mib, i != 42, -1))
        .collect();
    assert_eq!(asked(&fetch_request("c", 3, &hosted))[42], 1 << 20);
}

#[test]
fn fetch_round_trip_keeps_diverging_epoch_and_records() {
    let table = PartitionTable::metadata_only();
    let fetch = core::FetchRequest {
        correlation_id: 9,
        replica_id: 3,
        current_leader_epoch: 4,
        fetch_offset: 10,
        last_fetched_epoch: 3,
        max_bytes: 1000,
        max_wait_ms: 500,
        replica_directory_id: [3; 16],
    };
    let wire = fetch_request("c", 3, &[(table.get(0), &fetch, false, -1)]);
    let Request::Fetch(decoded) = round_trip_request(Request::Fetch(wire), PEER_FETCH_VERSION)
    else {
        panic!()
    };
    let mut ids = 100..;
    let parts = replica_fetch_parts(&decoded, PEER_FETCH_VERSION, &table, || ids.next().unwrap());
    let Ok((0, 3, core::Message::FetchRequest(seen))) = &parts[0].target else {
        panic!()
    };
    assert_eq!(seen.correlation_id, 100);
    assert_eq!(seen.replica_directory_id, [3; 16], "KIP-853, Fetch v17");
    assert_eq!(
        (
            seen.fetch_offset,
            seen.last_fetched_epoch,
            seen.current_leader_epoch
        ),
        (10, 3, 4)
    );

    let answer = core::FetchResponse {
        correlation_id: 100,
        error_code: core::ErrorCode::None,
        current_leader: core::LeaderIdAndEpoch {
            leader_id: Some(1),
            leader_epoch: 4,
        },
        high_watermark: 8,
        log_start_offset: 0,
        diverging_epoch: Some(OffsetAndEpoch::new(7, 3)),
        snapshot_id: None,
        records: Bytes::from_static(b"abc"),
    };
    let response = fetch_response(
        &parts,
        &[PartAnswer::Core(core::Message::FetchResponse(
            answer.clone(),
        ))],
    );
    let Response::Fetch(back) =
        round_trip_response(ApiKey::Fetch, PEER_FETCH_VERSION, Response::Fetch(response))
    else {
        panic!()
    };
    let got = peer_fetch_response_parts(&back, &table, |_| Some(9));
    let expected = core::FetchResponse {
        correlation_id: 9,
        ..answer
    };
    assert_eq!(got, vec![(0, core::Message::FetchResponse(expected))]);
}
