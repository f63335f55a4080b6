//! Handler tests: each calls one input and asserts the exact work list it produced.
//! Long because it is one table of the core's handlers, one short test per rule; the other
//! test files of the core cover one topic each (election, repair, snapshots, voters).

use bytes::Bytes;

use super::*;
use crate::error::ErrorCode;
use crate::message::*;
use crate::records::{batch_headers, build_batch, leader_change_batch, stamp_batch};
use crate::types::OffsetAndEpoch;

fn config(node_id: NodeId) -> QuorumConfig {
    QuorumConfig::new(node_id, &[1, 2, 3]).unwrap()
}

fn fresh(node_id: NodeId) -> Raft {
    Raft::new(config(node_id), &RecoveredState::default(), 42, 0).unwrap()
}

fn vote_request(
    candidate_id: NodeId,
    epoch: Epoch,
    last_offset_epoch: Epoch,
    last_offset: u64,
) -> Message {
    Message::VoteRequest(VoteRequest {
        candidate_epoch: epoch,
        candidate_id,
        last_offset_epoch,
        last_offset,
        pre_vote: false,
        candidate_directory_id: [0; 16],
        voter_directory_id: [0; 16],
    })
}

fn pre_vote_request(
    candidate_id: NodeId,
    epoch: Epoch,
    last_offset_epoch: Epoch,
    last_offset: u64,
) -> Message {
    let Message::VoteRequest(request) =
        vote_request(candidate_id, epoch, last_offset_epoch, last_offset)
    else {
        unreachable!()
    };
    Message::VoteRequest(VoteRequest {
        pre_vote: true,
        ..request
    })
}

pub(super) fn vote_response(granted: bool, epoch: Epoch, leader_id: Option<NodeId>) -> Message {
    Message::VoteResponse(VoteResponse {
        error_code: ErrorCode::None,
        current_leader: LeaderIdAndEpoch {
            leader_id,
            leader_epoch: epoch,
        },
        vote_granted: granted,
    })
}

fn client_batch(records: usize) -> Bytes {
    let values: Vec<crate::records::KeyValue<'_>> =
        (0..records).map(|_| (None, Some(&b"v"[..]))).collect();
    build_batch(&values, false, 0)
}

/// Node 1's election timeout makes it Prospective (KIP-996); node 2's pre-vote makes it a
/// Candidate, and node 2's vote makes it leader of epoch 1.
fn leader_1() -> Raft {
    leader_1_of(config(1))
}

/// [`leader_1`] with its own `config` (node 1 of voters 1, 2, 3).
fn leader_1_of(config: QuorumConfig) -> Raft {
    let mut raft = Raft::new(config, &RecoveredState::default(), 42, 0).unwrap();
    let (work, _) = raft.tick(5_000).unwrap();
    persist_quorum_state(&mut raft, 5_000, &work);
    assert!(matches!(raft.state(), EpochState::Prospective(_)));
    let work = raft.step(5_000, 2, vote_response(true, 0, None)).unwrap();
    persist_quorum_state(&mut raft, 5_000, &work);
    assert!(matches!(raft.state(), EpochState::Candidate(_)));
    let work = raft.step(5_000, 2, vote_response(true, 1, None)).unwrap();
    persist_quorum_state(&mut raft, 5_000, &work);
    assert!(raft.is_leader());
    raft
}

/// Reports every quorum-state write in `work` as durable (the host finished them).
pub(super) fn persist_quorum_state(raft: &mut Raft, now_ms: u64, work: &[Work]) {
    for item in work {
        if let Work::WriteQuorumState(state) = item {
            raft.on_persisted(now_ms, Persisted::QuorumState(*state))
                .unwrap();
        }
    }
}

pub(super) fn fetch(
    replica_id: NodeId,
    epoch: Epoch,
    fetch_offset: u64,
    last_fetched_epoch: Epoch,
) -> FetchRequest {
    FetchRequest {
        correlation_id: 9,
        replica_id,
        current_leader_epoch: epoch,
        fetch_offset,
        last_fetched_epoch,
        max_bytes: 1024,
        max_wait_ms: 500,
        replica_directory_id: [0; 16],
    }
}

#[test]
fn vote_in_newer_epoch_writes_quorum_state_before_the_response() {
    // KIP-595: the vote is durable before the response leaves.
    let mut raft = fresh(1);
    let work = raft.step(10, 2, vote_request(2, 3, 0, 0)).unwrap();
    assert_eq!(
        work,
        vec![
            Work::WriteQuorumState(ElectionState {
                epoch: 3,
                leader_id: None,
                voted_for: Some(2)
            }),
            Work::SendAfterPersist {
                to: 2,
                message: vote_response(true, 3, None)
            },
        ]
    );
}

#[test]
fn a_voter_grants_at_most_one_vote_per_epoch() {
    let mut raft = fresh(1);
    raft.step(10, 2, vote_request(2, 3, 0, 0)).unwrap();
    // Until the vote is durable, even a refusal waits behind the write.
    let work = raft.step(11, 3, vote_request(3, 3, 0, 0)).unwrap();
    assert_eq!(
        work,
        vec![Work::SendAfterPersist {
            to: 3,
            message: vote_response(false, 3, None)
        }]
    );
    let voted = ElectionState {
        epoch: 3,
        leader_id: None,
        voted_for: Some(2),
    };
    raft.on_persisted(11, Persisted::QuorumState(voted))
        .unwrap();
    let work = raft.step(11, 3, vote_request(3, 3, 0, 0)).unwrap();
    assert_eq!(
        work,
        vec![Work::Send {
            to: 3,
            message: vote_response(false, 3, None)
        }]
    );
    // Asking again for the same candidate is idempotent.
    let work = raft.step(12, 2, vote_request(2, 3, 0, 0)).unwrap();
    assert_eq!(
        work,
        vec![Work::Send {
            to: 2,
            message: vote_response(true, 3, None)
        }]
    );
}

#[test]
fn a_vote_is_refused_to_a_less_up_to_date_log_and_to_an_old_epoch() {
    let mut raft = leader_1(); // log: LeaderChange at offset 0 in epoch 1
    let work = raft.step(6_000, 2, vote_request(2, 2, 0, 5)).unwrap();
    persist_quorum_state(&mut raft, 6_000, &work);
    assert_eq!(
        work,
        vec![
            Work::WriteQuorumState(ElectionState {
                epoch: 2,
                leader_id: None,
                voted_for: None
            }),
            Work::SendAfterPersist {
                to: 2,
                message: vote_response(false, 2, None)
            },
        ],
        "last epoch 0 < 1 loses whatever its length"
    );
    let work = raft.step(6_001, 3, vote_request(3, 1, 1, 1)).unwrap();
    let Work::Send {
        message: Message::VoteResponse(r),
        ..
    } = &work[0]
    else {
        panic!("{work:?}")
    };
    assert_eq!(
        (r.error_code, r.vote_granted),
        (ErrorCode::FencedLeaderEpoch, false)
    );
}

#[test]
fn election_timeout_asks_for_pre_votes_then_a_candidate_persists_its_own_vote_first() {
    let mut raft = fresh(1);
    let (idle, deadline) = raft.tick(0).unwrap();
    assert!(idle.is_empty());
    assert!(
        (1000..2000).contains(&deadline),
        "election timeout in [t, 2t): {deadline}"
    );
    // KIP-996: the timeout makes a Prospective in the same epoch; nothing is written.
    let (work, _) = raft.tick(deadline).unwrap();
    let pre_vote = pre_vote_request(1, 0, 0, 0);
    assert_eq!(
        work,
        vec![
            Work::Send {
                to: 2,
                message: pre_vote.clone()
            },
            Work::Send {
                to: 3,
                message: pre_vote
            },
        ]
    );
    assert_eq!(raft.epoch(), 0);
    // One pre-vote plus our own is a majority: stand in epoch 1, vote durable first.
    let work = raft
        .step(deadline, 3, vote_response(true, 0, None))
        .unwrap();
    let request = vote_request(1, 1, 0, 0);
    assert_eq!(
        work,
        vec![
            Work::WriteQuorumState(ElectionState {
                epoch: 1,
                leader_id: None,
                voted_for: Some(1)
            }),
            Work::SendAfterPersist {
                to: 2,
                message: request.clone()
            },
            Work::SendAfterPersist {
                to: 3,
                message: request
            },
        ]
    );
}

/// A brand-new partition's designated first leader asks for pre-votes at once, not after its
/// election timeout; a voter that has been through an election, one with records, or an
/// observer, does nothing.
#[test]
fn stand_first_asks_at_once_only_on_a_fresh_voter() {
    let mut raft = fresh(1);
    let work = raft.stand_first(5).unwrap();
    let pre_vote = pre_vote_request(1, 0, 0, 0);
    assert_eq!(
        work,
        vec![
            Work::Send {
                to: 2,
                message: pre_vote.clone()
            },
            Work::Send {
                to: 3,
                message: pre_vote
            },
        ]
    );

    // Voted in epoch 1: its timer is the ordinary one.
    let mut voted = fresh(2);
    let work = voted.step(5, 1, vote_request(1, 1, 0, 0)).unwrap();
    persist_quorum_state(&mut voted, 5, &work);
    assert!(!asks_for_votes(&voted.stand_first(6).unwrap()));

    // Holding records (epoch 0, no vote, a log end past 0): nothing either.
    let recovered = RecoveredState {
        log_end_offset: 3,
        epoch_cache: vec![OffsetAndEpoch::new(0, 0)],
        ..RecoveredState::default()
    };
    let mut with_records = Raft::new(config(1), &recovered, 42, 0).unwrap();
    assert!(!asks_for_votes(&with_records.stand_first(5).unwrap()));

    // An observer never stands.
    let mut observer = Raft::new(
        QuorumConfig::new(4, &[1, 2, 3]).unwrap(),
        &RecoveredState::default(),
        42,
        0,
    )
    .unwrap();
    assert!(!asks_for_votes(&observer.stand_first(5).unwrap()));
}

pub(super) fn asks_for_votes(work: &[Work]) -> bool {
    work.iter().any(|w| {
        matches!(
            w,
            Work::Send {
                message: Message::VoteRequest(_),
                ..
            } | Work::SendAfterPersist {
                message: Message::VoteRequest(_),
                ..
            }
        )
    })
}

/// A voter that answers a pre-vote with an error (one that does not host the partition yet)
/// is asked again after `retry_backoff_ms`, not after the whole request timeout; voters that
/// answered are not asked again.
#[test]
fn a_vote_answered_with_an_error_is_asked_again_after_the_retry_backoff() {
    let mut raft = fresh(1);
    raft.stand_first(0).unwrap();
    let refused = Message::VoteResponse(VoteResponse {
        error_code: ErrorCode::UnknownServerError,
        current_leader: LeaderIdAndEpoch {
            leader_id: None,
            leader_epoch: 0,
        },
        vote_granted: false,
    });
    assert!(raft.step(1, 2, refused).unwrap().is_empty());
    let retry_at = 1 + raft.config.retry_backoff_ms;
    assert_eq!(raft.next_deadline_ms(), retry_at);
    let (work, _) = raft.tick(retry_at).unwrap();
    let pre_vote = pre_vote_request(1, 0, 0, 0);
    assert_eq!(
        work,
        vec![
            Work::Send {
                to: 2,
                message: pre_vote.clone()
            },
            Work::Send {
                to: 3,
                message: pre_vote
            },
        ]
    );
}

#[test]
fn a_majority_of_votes_makes_a_leader_that_appends_leader_change_and_begins_the_epoch() {
    let mut raft = fresh(1);
    raft.tick(5_000).unwrap();
    // The pre-vote grant makes a Candidate; its Vote requests leave once its vote is durable.
    let work = raft.step(5_000, 2, vote_response(true, 0, None)).unwrap();
    persist_quorum_state(&mut raft, 5_000, &work);
    let work = raft.step(5_001, 3, vote_response(true, 1, None)).unwrap();
    let begin = Message::BeginQuorumEpochRequest(BeginQuorumEpochRequest {
        leader_id: 1,
        leader_epoch: 1,
        voter_directory_id: [0; 16],
    });
    assert_eq!(
        work,
        vec![
            Work::AppendAsLeader {
                base_offset: 0,
                leader_epoch: 1,
                batches: vec![leader_change_batch(1, &[1, 2, 3], &[1, 3])]
            },
            Work::Flush {
                generation: 0,
                end_offset: 1
            },
            Work::WriteQuorumState(ElectionState {
                epoch: 1,
                leader_id: Some(1),
                voted_for: Some(1)
            }),
            Work::SendAfterPersist {
                to: 2,
                message: begin.clone()
            },
            Work::SendAfterPersist {
                to: 3,
                message: begin
            },
        ]
    );
}

#[test]
fn begin_quorum_epoch_makes_a_follower_that_fetches_after_the_quorum_state_write() {
    let mut raft = fresh(2);
    let begin = Message::BeginQuorumEpochRequest(BeginQuorumEpochRequest {
        leader_id: 1,
        leader_epoch: 4,
        voter_directory_id: [0; 16],
    });
    let work = raft.step(10, 1, begin).unwrap();
    let leader = LeaderIdAndEpoch {
        leader_id: Some(1),
        leader_epoch: 4,
    };
    let mut expected_fetch = fetch(2, 4, 0, 0);
    expected_fetch.correlation_id = 1;
    expected_fetch.max_bytes = 1 << 20;
    // This leader has not answered us yet: no long poll (`Raft::answered_by`).
    expected_fetch.max_wait_ms = 0;
    assert_eq!(
        work,
        vec![
            Work::WriteQuorumState(ElectionState {
                epoch: 4,
                leader_id: Some(1),
                voted_for: None
            }),
            Work::SendAfterPersist {
                to: 1,
                message: Message::BeginQuorumEpochResponse(BeginQuorumEpochResponse {
                    error_code: ErrorCode::None,
                    current_leader: leader
                })
            },
            Work::SendAfterPersist {
                to: 1,
                message: Message::FetchRequest(expected_fetch)
            },
        ]
    );
}

#[test]
fn leader_validates_fetch_epochs() {
    let mut raft = leader_1();
    for (epoch, error) in [
        (0, ErrorCode::FencedLeaderEpoch),
        (2, ErrorCode::UnknownLeaderEpoch),
    ] {
        let work = raft
            .step(5_100, 2, Message::FetchRequest(fetch(2, epoch, 0, 0)))
            .unwrap();
        let [
            Work::SendFetchResponse {
                to: 2, response, ..
            },
        ] = work.as_slice()
        else {
            panic!("{work:?}")
        };
        assert_eq!(response.error_code, error);
        assert_eq!(
            response.current_leader,
            LeaderIdAndEpoch {
                leader_id: Some(1),
                leader_epoch: 1
            }
        );
    }
    // A follower answers NOT_LEADER_OR_FOLLOWER naming the leader, once its epoch is durable
    // (before, the answer waits behind the quorum-state write).
    let mut follower = fresh(2);
    let work = follower
        .step(
            10,
            1,
            Message::BeginQuorumEpochRequest(BeginQuorumEpochRequest {
                leader_id: 1,
                leader_epoch: 1,
                voter_directory_id: [0; 16],
            }),
        )
        .unwrap();
    let written = work
        .iter()
        .find_map(|w| match w {
            Work::WriteQuorumState(state) => Some(*state),
            _ => None,
        })
        .expect("the follower writes its new epoch");
    let work = follower
        .step(11, 3, Message::FetchRequest(fetch(3, 1, 0, 0)))
        .unwrap();
    assert!(
        matches!(work.as_slice(), [Work::SendAfterPersist { to: 3, .. }]),
        "{work:?}"
    );
    follower
        .on_persisted(11, Persisted::QuorumState(written))
        .unwrap();
    let work = follower
        .step(11, 3, Message::FetchRequest(fetch(3, 1, 0, 0)))
        .unwrap();
    let [Work::SendFetchResponse { response, .. }] = work.as_slice() else {
        panic!("{work:?}")
    };
    assert_eq!(response.error_code, ErrorCode::NotLeaderOrFollower);
    assert_eq!(response.current_leader.leader_id, Some(1));
}

#[test]
fn leader_answers_diverging_epoch_and_records() {
    let mut raft = leader_1();
    raft.on_persisted(
        5_000,
        Persisted::Log {
            generation: 0,
            end_offset: 1,
        },
    )
    .unwrap();
    // A follower claiming offset 3 in epoch 0 diverges: the leader's epoch 0 ends at 0.
    let work = raft
        .step(5_100, 2, Message::FetchRequest(fetch(2, 1, 3, 0)))
        .unwrap();
    let [
        Work::SendFetchResponse {
            response,
            max_bytes: 0,
            ..
        },
    ] = work.as_slice()
    else {
        panic!("{work:?}")
    };
    assert_eq!(response.diverging_epoch, Some(OffsetAndEpoch::new(0, 0)));
    // From offset 0 it gets records, and its fetch offset counts for the high-watermark only
    // once it covers the leader's own epoch: offset 0 does not.
    let work = raft
        .step(5_101, 2, Message::FetchRequest(fetch(2, 1, 0, 0)))
        .unwrap();
    let [
        Work::SendFetchResponse {
            to: 2,
            fetch_offset: 0,
            max_bytes: 1024,
            response,
        },
    ] = work.as_slice()
    else {
        panic!("{work:?}")
    };
    assert_eq!(
        (
            response.error_code,
            response.high_watermark,
            response.diverging_epoch
        ),
        (ErrorCode::None, 0, None)
    );
    // Fetching from 1 (it has the LeaderChange record, durably): the majority {1, 2} holds
    // offset 0 of epoch 1, the high-watermark moves to 1, and the fetch is parked (long-poll).
    // The fetch parks, and is answered at once because the high-watermark moved.
    let work = raft
        .step(5_102, 2, Message::FetchRequest(fetch(2, 1, 1, 1)))
        .unwrap();
    let [
        Work::HighWatermarkChanged { high_watermark: 1 },
        Work::SendFetchResponse {
            to: 2,
            fetch_offset: 1,
            response,
            ..
        },
    ] = work.as_slice()
    else {
        panic!("{work:?}")
    };
    assert_eq!(response.high_watermark, 1);
}

/// Leader 1 (of `config`) with its LeaderChange record durable, taken by node 3 while nothing
/// was committed (told high-watermark 0), and node 2's first fetch, from 0, answered.
fn leader_1_with_node_3_told_0(config: QuorumConfig) -> Raft {
    let mut raft = leader_1_of(config);
    raft.on_persisted(
        5_000,
        Persisted::Log {
            generation: 0,
            end_offset: 1,
        },
    )
    .unwrap();
    let work = raft
        .step(5_100, 3, Message::FetchRequest(fetch(3, 1, 0, 0)))
        .unwrap();
    let [Work::SendFetchResponse { response, .. }] = work.as_slice() else {
        panic!("{work:?}")
    };
    assert_eq!(response.high_watermark, 0);
    raft.step(5_101, 2, Message::FetchRequest(fetch(2, 1, 0, 0)))
        .unwrap();
    raft
}

/// A follower whose fetch reaches the log end just after a commit it has not been told of
/// (its peer's fetch moved the high-watermark) is answered at once with the new
/// high-watermark, not parked for the long poll; its next fetch, told, is parked.
#[test]
fn a_fetch_at_the_log_end_is_answered_at_once_while_its_replica_lacks_the_high_watermark() {
    let mut raft = leader_1_with_node_3_told_0(config(1));
    // Node 2 fetches from 1 as well: the majority {1, 2} commits offset 0.
    let work = raft
        .step(5_102, 2, Message::FetchRequest(fetch(2, 1, 1, 1)))
        .unwrap();
    assert!(work.contains(&Work::HighWatermarkChanged { high_watermark: 1 }));
    // Node 3, at the log end, has nothing to fetch but was told 0: answered at once.
    let work = raft
        .step(5_103, 3, Message::FetchRequest(fetch(3, 1, 1, 1)))
        .unwrap();
    assert_eq!(only_fetch_response_to(&work, 3).high_watermark, 1);
    // Told now: the next fetch at the log end waits (long poll).
    let work = raft
        .step(5_104, 3, Message::FetchRequest(fetch(3, 1, 1, 1)))
        .unwrap();
    assert!(work.is_empty(), "{work:?}");
}

/// A topic partition (`prompt_high_watermark` off): a commit answers no parked fetch, and a
/// fetch at the log end that was not told of it parks; the next records carry the new
/// high-watermark to both, and a long poll that ends with nothing new carries it too.
#[test]
fn without_prompt_high_watermark_the_commit_reaches_followers_with_the_next_records() {
    let mut config = config(1);
    config.prompt_high_watermark = false;
    let mut raft = leader_1_with_node_3_told_0(config);
    // Node 2's fetch at the log end commits offset 0, and stays parked.
    let work = raft
        .step(5_102, 2, Message::FetchRequest(fetch(2, 1, 1, 1)))
        .unwrap();
    assert_eq!(
        work,
        [Work::HighWatermarkChanged { high_watermark: 1 }],
        "no news-only answer"
    );
    // Node 3, told 0, parks too.
    let work = raft
        .step(5_103, 3, Message::FetchRequest(fetch(3, 1, 1, 1)))
        .unwrap();
    assert!(work.is_empty(), "{work:?}");
    // The next record goes to both at once, with the high-watermark they were not told.
    let (_, work) = raft.append(5_104, vec![client_batch(1)]).unwrap();
    let answers: Vec<(NodeId, u64)> = work
        .iter()
        .filter_map(|w| match w {
            Work::SendFetchResponse { to, response, .. } => Some((*to, response.high_watermark)),
            _ => None,
        })
        .collect();
    assert_eq!(answers, [(2, 1), (3, 1)]);
    // Node 2 takes offset 1; its fetch at the log end commits it (the leader's copy is
    // durable) and parks: node 2 hears of the commit when its long poll ends.
    raft.on_persisted(
        5_105,
        Persisted::Log {
            generation: 0,
            end_offset: 2,
        },
    )
    .unwrap();
    raft.step(5_106, 2, Message::FetchRequest(fetch(2, 1, 1, 1)))
        .unwrap();
    let work = raft
        .step(5_107, 2, Message::FetchRequest(fetch(2, 1, 2, 1)))
        .unwrap();
    assert_eq!(work, [Work::HighWatermarkChanged { high_watermark: 2 }]);
    assert_eq!(raft.next_deadline_ms(), 5_607);
    let (work, _) = raft.tick(5_607).unwrap();
    assert_eq!(only_fetch_response_to(&work, 2).high_watermark, 2);
}

/// The one fetch response `work` holds, which must go to `to`.
fn only_fetch_response_to(work: &[Work], to: NodeId) -> &FetchResponse {
    match work {
        [
            Work::SendFetchResponse {
                to: sent_to,
                response,
                ..
            },
        ] if *sent_to == to => response,
        _ => panic!("expected one fetch response to {to}: {work:?}"),
    }
}

/// Leader 1 (of `config`) with its LeaderChange durable and the high-watermark at 1 after node
/// 2's first fetch, at 5,100.
fn leader_1_at_high_watermark_1(config: QuorumConfig) -> Raft {
    let mut raft = leader_1_of(config);
    raft.on_persisted(
        5_000,
        Persisted::Log {
            generation: 0,
            end_offset: 1,
        },
    )
    .unwrap();
    raft.step(5_100, 2, Message::FetchRequest(fetch(2, 1, 1, 1)))
        .unwrap(); // moves the HW to 1
    raft
}

/// [`leader_1_at_high_watermark_1`] with node 2's second fetch (at the log end) parked: the
/// long poll.
fn leader_1_with_a_parked_fetch_from_2() -> Raft {
    let mut raft = leader_1_at_high_watermark_1(config(1));
    let work = raft
        .step(5_100, 2, Message::FetchRequest(fetch(2, 1, 1, 1)))
        .unwrap();
    assert!(work.is_empty(), "parked, nothing new: {work:?}");
    raft
}

#[test]
fn parked_fetch_is_answered_when_data_arrives_or_the_wait_ends() {
    let mut raft = leader_1_with_a_parked_fetch_from_2();
    let work = raft
        .step(5_100, 3, Message::FetchRequest(fetch(3, 1, 1, 1)))
        .unwrap();
    assert!(work.is_empty(), "both parked, nothing new: {work:?}");
    let batch = client_batch(3);
    let (result, work) = raft.append(5_200, vec![batch.clone()]).unwrap();
    assert_eq!(
        result,
        AppendResult {
            base_offset: 1,
            last_offset: 3,
            leader_epoch: 1
        }
    );
    assert_eq!(work.len(), 4, "{work:?}");
    assert_eq!(
        work[0],
        Work::AppendAsLeader {
            base_offset: 1,
            leader_epoch: 1,
            batches: vec![batch]
        }
    );
    assert_eq!(
        work[1],
        Work::Flush {
            generation: 0,
            end_offset: 4
        }
    );
    assert!(matches!(
        work[2],
        Work::SendFetchResponse {
            to: 2,
            fetch_offset: 1,
            ..
        }
    ));
    assert!(matches!(
        work[3],
        Work::SendFetchResponse {
            to: 3,
            fetch_offset: 1,
            ..
        }
    ));
    // Parked again, then the long-poll wait expires.
    raft.step(5_300, 2, Message::FetchRequest(fetch(2, 1, 4, 1)))
        .unwrap();
    assert_eq!(raft.next_deadline_ms(), 5_800);
    let (work, _) = raft.tick(5_800).unwrap();
    let [
        Work::SendFetchResponse {
            to: 2,
            fetch_offset: 4,
            response,
            ..
        },
    ] = work.as_slice()
    else {
        panic!("{work:?}")
    };
    assert_eq!(
        response.high_watermark, 1,
        "the leader's own copy of 1..4 is not flushed yet"
    );
}

#[test]
fn a_long_poll_ends_on_the_grain_within_its_wait() {
    let mut config = config(1);
    config.fetch_wait_grain_ms = 100;
    let mut raft = leader_1_at_high_watermark_1(config);
    // Parked at 5,234 for 500 ms: answered at 5,700, the last multiple of 100 within the
    // wait, as is node 3's parked at 5,299.
    let work = raft
        .step(5_234, 2, Message::FetchRequest(fetch(2, 1, 1, 1)))
        .unwrap();
    assert!(work.is_empty(), "parked: {work:?}");
    raft.step(5_299, 3, Message::FetchRequest(fetch(3, 1, 1, 1)))
        .unwrap();
    assert_eq!(raft.next_deadline_ms(), 5_700);
    let (work, _) = raft.tick(5_699).unwrap();
    assert!(work.is_empty(), "{work:?}");
    let (work, _) = raft.tick(5_700).unwrap();
    let answered: Vec<NodeId> = work
        .iter()
        .filter_map(|w| match w {
            Work::SendFetchResponse { to, .. } => Some(*to),
            _ => None,
        })
        .collect();
    assert_eq!(answered, vec![2, 3], "both in one tick: {work:?}");
}

#[test]
fn high_watermark_needs_a_majority_of_durable_copies() {
    let mut raft = leader_1();
    raft.append(5_001, vec![client_batch(2)]).unwrap(); // offsets 1..=2
    raft.step(5_010, 2, Message::FetchRequest(fetch(2, 1, 3, 1)))
        .unwrap();
    assert_eq!(
        raft.high_watermark(),
        0,
        "the leader itself has not flushed: only one durable copy"
    );
    let work = raft
        .on_persisted(
            5_020,
            Persisted::Log {
                generation: 0,
                end_offset: 3,
            },
        )
        .unwrap();
    // Node 2's parked fetch learns the new high-watermark at once.
    let [
        Work::HighWatermarkChanged { high_watermark: 3 },
        Work::SendFetchResponse {
            to: 2, response, ..
        },
    ] = work.as_slice()
    else {
        panic!("{work:?}")
    };
    assert_eq!(response.high_watermark, 3);
    let d = raft.describe_quorum();
    assert_eq!(
        (d.leader_id, d.leader_epoch, d.high_watermark),
        (Some(1), 1, 3)
    );
    assert_eq!(
        d.current_voters
            .iter()
            .find(|r| r.replica_id == 2)
            .unwrap()
            .log_end_offset,
        Some(3)
    );
    assert_eq!(
        d.current_voters
            .iter()
            .find(|r| r.replica_id == 3)
            .unwrap()
            .log_end_offset,
        None
    );
    // The host keeps in memory what the slowest other voter still fetches: node 3, not heard
    // from in this epoch, may need everything; once it fetches at 3, nothing below it.
    assert_eq!(raft.lagging_voters_end_offset(), Some(0));
    raft.step(5_030, 3, Message::FetchRequest(fetch(3, 1, 3, 1)))
        .unwrap();
    assert_eq!(raft.lagging_voters_end_offset(), Some(3));
    assert_eq!(follower_2().lagging_voters_end_offset(), None);
}

/// Node 2 follows 1 in epoch 1 and has a fetch in flight (correlation id 1).
fn follower_2() -> Raft {
    let mut raft = fresh(2);
    let work = raft
        .step(
            10,
            1,
            Message::BeginQuorumEpochRequest(BeginQuorumEpochRequest {
                leader_id: 1,
                leader_epoch: 1,
                voter_directory_id: [0; 16],
            }),
        )
        .unwrap();
    persist_quorum_state(&mut raft, 10, &work);
    raft
}

fn fetch_response(correlation_id: u64, high_watermark: u64, records: Bytes) -> Message {
    Message::FetchResponse(FetchResponse {
        correlation_id,
        error_code: ErrorCode::None,
        current_leader: LeaderIdAndEpoch {
            leader_id: Some(1),
            leader_epoch: 1,
        },
        high_watermark,
        log_start_offset: 0,
        diverging_epoch: None,
        snapshot_id: None,
        records,
    })
}

#[test]
fn follower_appends_flushes_and_fetches_again_only_after_the_flush() {
    let mut raft = follower_2();
    let records = stamp_batch(&client_batch(2), 0, 1);
    let work = raft
        .step(20, 1, fetch_response(1, 0, records.clone()))
        .unwrap();
    assert_eq!(
        work,
        vec![
            Work::AppendAsFollower { records },
            Work::Flush {
                generation: 0,
                end_offset: 2
            }
        ]
    );
    let work = raft
        .on_persisted(
            21,
            Persisted::Log {
                generation: 0,
                end_offset: 2,
            },
        )
        .unwrap();
    let [
        Work::Send {
            to: 1,
            message: Message::FetchRequest(f),
        },
    ] = work.as_slice()
    else {
        panic!("{work:?}")
    };
    assert_eq!(
        (f.fetch_offset, f.last_fetched_epoch, f.correlation_id),
        (2, 1, 2)
    );
    // The leader has answered once: from now on the fetch long-polls.
    assert_eq!(f.max_wait_ms, 500);
    // The leader's high-watermark arrives with the next response.
    let work = raft
        .step(22, 1, fetch_response(2, 2, Bytes::new()))
        .unwrap();
    assert_eq!(work[0], Work::HighWatermarkChanged { high_watermark: 2 });
    assert!(matches!(
        work[1],
        Work::Send {
            message: Message::FetchRequest(_),
            ..
        }
    ));
    // A duplicate of an old response is ignored.
    assert!(
        raft.step(23, 1, fetch_response(2, 5, Bytes::new()))
            .unwrap()
            .is_empty()
    );
}

/// The host reports the log durable up to `end_offset` (generation 0).
fn flushed(raft: &mut Raft, now_ms: u64, end_offset: u64) -> Vec<Work> {
    raft.on_persisted(
        now_ms,
        Persisted::Log {
            generation: 0,
            end_offset,
        },
    )
    .unwrap()
}

fn sent_fetch(work: &[Work]) -> Option<&FetchRequest> {
    work.iter().find_map(|w| match w {
        Work::Send {
            to: 1,
            message: Message::FetchRequest(f),
        } => Some(f),
        _ => None,
    })
}

/// A follower behind the high-watermark fetches again while its flush is in flight (the
/// records are committed without it, so the leader counting the fetch offset cannot move the
/// high-watermark), until `FETCH_AHEAD_RESPONSES` responses wait wholly for the disk; at the
/// head it waits for its flush as before.
#[test]
fn a_follower_behind_the_high_watermark_fetches_ahead_of_its_flush() {
    let mut raft = follower_2();
    let ahead = super::fetch::FETCH_AHEAD_RESPONSES as u64;
    // Two records per response, the leader's high-watermark far above: committed without us.
    for i in 0..ahead {
        let records = stamp_batch(&client_batch(2), 2 * i, 1);
        let work = raft
            .step(20 + i, 1, fetch_response(1 + i, 100, records))
            .unwrap();
        assert!(work.contains(&Work::Flush {
            generation: 0,
            end_offset: 2 * i + 2
        }));
        match sent_fetch(&work) {
            Some(f) if i + 1 < ahead => assert_eq!(f.fetch_offset, 2 * i + 2),
            None if i + 1 == ahead => {}
            other => panic!("response {i}: {other:?}"),
        }
    }
    assert!(
        raft.next_deadline_ms() > 20 + ahead,
        "no fetch is due before a flush"
    );
    // The first response is durable: one fewer waits, so the next fetch leaves.
    let work = flushed(&mut raft, 30, 2);
    assert_eq!(sent_fetch(&work).map(|f| f.fetch_offset), Some(2 * ahead));
    // Records reaching past the high-watermark: the next fetch waits for their flush.
    let end = 2 * ahead + 4;
    let records = stamp_batch(&client_batch(4), 2 * ahead, 1);
    let work = raft
        .step(31, 1, fetch_response(1 + ahead, end - 1, records))
        .unwrap();
    assert!(sent_fetch(&work).is_none(), "{work:?}");
    let work = flushed(&mut raft, 32, end - 4);
    assert!(sent_fetch(&work).is_none(), "{work:?}");
    let work = flushed(&mut raft, 33, end);
    assert_eq!(sent_fetch(&work).map(|f| f.fetch_offset), Some(end));
}

/// A follower whose own flush is slow does not stand against a leader that answered it: the
/// fetch timeout measures the leader, so it runs only while a fetch is out (or could be).
#[test]
fn a_follower_waiting_for_its_own_flush_does_not_stand_for_election() {
    let mut raft = follower_2();
    let records = stamp_batch(&client_batch(2), 0, 1);
    raft.step(20, 1, fetch_response(1, 0, records)).unwrap();
    // The flush takes longer than the whole fetch timeout (2 000 ms).
    let (work, next_deadline_ms) = raft.tick(20 + 2_500).unwrap();
    assert!(
        matches!(raft.state(), EpochState::Follower(_)),
        "stood for election while its own flush was outstanding: {work:?}"
    );
    assert!(work.is_empty(), "{work:?}");
    assert_eq!(
        next_deadline_ms,
        u64::MAX,
        "no timer while the flush is out"
    );
    let work = raft
        .on_persisted(
            3_000,
            Persisted::Log {
                generation: 0,
                end_offset: 2,
            },
        )
        .unwrap();
    assert!(matches!(
        work.as_slice(),
        [Work::Send {
            message: Message::FetchRequest(_),
            ..
        }]
    ));
    // The fetch that just left gets a full timeout; without an answer the follower stands.
    let (_, next_deadline_ms) = raft.tick(3_000 + 1_999).unwrap();
    assert!(matches!(raft.state(), EpochState::Follower(_)));
    assert!(next_deadline_ms <= 3_000 + 2_000);
    raft.tick(3_000 + 2_000).unwrap();
    assert!(matches!(raft.state(), EpochState::Prospective(_)));
}

#[test]
fn follower_truncates_at_a_diverging_epoch() {
    let mut raft = follower_2();
    let mut records = stamp_batch(&client_batch(3), 0, 1).to_vec();
    records.extend_from_slice(&stamp_batch(&client_batch(2), 3, 1));
    raft.step(20, 1, fetch_response(1, 0, Bytes::from(records)))
        .unwrap();
    raft.on_persisted(
        21,
        Persisted::Log {
            generation: 0,
            end_offset: 5,
        },
    )
    .unwrap();
    let Message::FetchResponse(mut diverging) = fetch_response(2, 0, Bytes::new()) else {
        unreachable!()
    };
    diverging.diverging_epoch = Some(OffsetAndEpoch::new(3, 1));
    let work = raft.step(30, 1, Message::FetchResponse(diverging)).unwrap();
    assert_eq!(work[0], Work::Truncate { offset: 3 });
    let Work::Send {
        message: Message::FetchRequest(f),
        ..
    } = &work[1]
    else {
        panic!("{work:?}")
    };
    assert_eq!((f.fetch_offset, f.last_fetched_epoch), (3, 1));
    assert_eq!(raft.log().generation(), 1);
}

#[test]
#[should_panic(expected = "below the high-watermark")]
fn follower_refuses_to_truncate_below_its_high_watermark() {
    let mut raft = follower_2();
    raft.step(
        20,
        1,
        fetch_response(1, 3, stamp_batch(&client_batch(3), 0, 1)),
    )
    .unwrap();
    raft.on_persisted(
        21,
        Persisted::Log {
            generation: 0,
            end_offset: 3,
        },
    )
    .unwrap();
    assert_eq!(raft.high_watermark(), 3);
    let Message::FetchResponse(mut diverging) = fetch_response(2, 3, Bytes::new()) else {
        unreachable!()
    };
    diverging.diverging_epoch = Some(OffsetAndEpoch::new(1, 1));
    let _ = raft.step(30, 1, Message::FetchResponse(diverging));
}

#[test]
fn follower_without_leader_contact_stands_and_leader_without_quorum_resigns() {
    let mut follower = follower_2();
    let (work, _) = follower.tick(10 + 2_000).unwrap();
    assert!(matches!(follower.state(), EpochState::Prospective(_)));
    assert!(
        work.iter().all(|w| matches!(
            w,
            Work::Send {
                message: Message::VoteRequest(VoteRequest { pre_vote: true, .. }),
                ..
            }
        )),
        "{work:?}"
    );
    // Node 3 lost the leader too: its pre-vote makes a candidate of epoch 2.
    let work = follower
        .step(10 + 2_000, 3, vote_response(true, 1, None))
        .unwrap();
    assert!(matches!(
        work[0],
        Work::WriteQuorumState(ElectionState {
            epoch: 2,
            voted_for: Some(2),
            ..
        })
    ));
    assert!(matches!(follower.state(), EpochState::Candidate(_)));

    // Check quorum fires at 1.5 × the fetch timeout (Kafka's CHECK_QUORUM_TIMEOUT_FACTOR),
    // so the followers, who watch the leader directly, decide first.
    let mut leader = leader_1();
    let (_, next_deadline_ms) = leader.tick(5_000 + 2_000).unwrap();
    assert!(
        leader.is_leader(),
        "resigned at the followers' fetch timeout"
    );
    assert!(next_deadline_ms <= 5_000 + 3_000);
    let (work, _) = leader.tick(5_000 + 3_000).unwrap();
    assert!(matches!(leader.state(), EpochState::Resigned(_)));
    let ends: Vec<_> = work
        .iter()
        .filter(|w| {
            matches!(
                w,
                Work::Send {
                    message: Message::EndQuorumEpochRequest(_),
                    ..
                }
            )
        })
        .collect();
    assert_eq!(ends.len(), 2, "{work:?}");
}

/// The EndQuorumEpoch of `leader` resigning `epoch` with these preferred successors, and its
/// sends to each of them in that order.
fn end_quorum_epoch_to(
    leader: NodeId,
    epoch: Epoch,
    successors: &[NodeId],
) -> (EndQuorumEpochRequest, Vec<Work>) {
    let end = EndQuorumEpochRequest {
        leader_id: leader,
        leader_epoch: epoch,
        preferred_successors: successors.to_vec(),
        preferred_successor_directory_ids: vec![[0; 16]; successors.len()],
    };
    let sends = successors
        .iter()
        .map(|&to| Work::Send {
            to,
            message: Message::EndQuorumEpochRequest(end.clone()),
        })
        .collect();
    (end, sends)
}

/// Node `id`, a follower of node 1 in epoch 1, told by `end` that its leader resigned: it
/// must stand (almost) at once, as the first preferred successor.
fn successor_told_of_resignation(id: NodeId, end: EndQuorumEpochRequest) -> Raft {
    let mut follower = fresh(id);
    let work = follower
        .step(
            10,
            1,
            Message::BeginQuorumEpochRequest(BeginQuorumEpochRequest {
                leader_id: 1,
                leader_epoch: 1,
                voter_directory_id: [0; 16],
            }),
        )
        .unwrap();
    persist_quorum_state(&mut follower, 10, &work);
    follower
        .step(20, 1, Message::EndQuorumEpochRequest(end))
        .unwrap();
    assert!(
        follower.next_deadline_ms() <= 20 + 101,
        "{}",
        follower.next_deadline_ms()
    );
    follower
}

#[test]
fn resignation_names_the_most_caught_up_successor_first_and_it_stands_early() {
    let mut leader = leader_1();
    leader
        .step(5_010, 3, Message::FetchRequest(fetch(3, 1, 1, 1)))
        .unwrap();
    let work = leader.resign(5_020).unwrap();
    let (end, sends) = end_quorum_epoch_to(1, 1, &[3, 2]);
    assert_eq!(work, sends);
    // The first successor's fetch timeout drops to (almost) now.
    let mut follower = successor_told_of_resignation(3, end);
    // Nothing to resign for a follower.
    assert_eq!(follower.resign(21), Err(RaftError::NothingToResign));
}

#[test]
fn a_leadership_transfer_names_its_successor_first_once_it_has_the_whole_log() {
    let mut leader = leader_1();
    leader
        .step(5_010, 3, Message::FetchRequest(fetch(3, 1, 1, 1)))
        .unwrap();
    let refused = |successor, reason| RaftError::TransferRefused { successor, reason };
    // Node 2 has never fetched: it may be down.
    assert_eq!(
        leader.transfer_leadership(5_020, 2),
        Err(refused(2, "no fetch within the fetch timeout"))
    );
    assert_eq!(
        leader.transfer_leadership(5_020, 1),
        Err(refused(1, "it is the leader"))
    );
    assert_eq!(
        leader.transfer_leadership(5_020, 7),
        Err(refused(7, "not a voter"))
    );
    assert!(leader.is_leader(), "a refused transfer changes nothing");
    leader
        .step(5_030, 2, Message::FetchRequest(fetch(2, 1, 1, 1)))
        .unwrap();
    // Node 3 has the whole log but has not fetched for longer than the fetch timeout (2 s
    // here): it may be paused or cut off.
    assert_eq!(
        leader.transfer_leadership(5_010 + 2_001, 3),
        Err(refused(3, "no fetch within the fetch timeout"))
    );
    leader
        .step(7_020, 2, Message::FetchRequest(fetch(2, 1, 1, 1)))
        .unwrap();
    leader
        .step(7_030, 3, Message::FetchRequest(fetch(3, 1, 1, 1)))
        .unwrap();
    // Both caught up: the one named goes first, although node 3 is first by id order.
    let work = leader.transfer_leadership(7_040, 2).unwrap();
    let (end, sends) = end_quorum_epoch_to(1, 1, &[2, 3]);
    assert_eq!(work, sends);
    assert!(matches!(leader.state(), EpochState::Resigned(_)));
    // The successor stands (almost) at once.
    let mut follower = successor_told_of_resignation(2, end);
    // Only a leader transfers.
    assert_eq!(
        follower.transfer_leadership(21, 3),
        Err(RaftError::NotLeader {
            leader_id: Some(1),
            epoch: 1
        })
    );
}

/// A live successor that lacks part of the log gets one election timeout to catch up, with
/// client appends refused meanwhile so that the log end stays put (under a steady load a
/// follower is otherwise never at the very end); the leader resigns as soon as its fetch
/// reaches the end, or goes on leading when the time is up.
#[test]
fn a_transfer_to_a_voter_behind_holds_appends_until_it_has_caught_up() {
    let mut leader = leader_1();
    leader
        .step(5_010, 2, Message::FetchRequest(fetch(2, 1, 1, 1)))
        .unwrap();
    leader
        .step(5_010, 3, Message::FetchRequest(fetch(3, 1, 1, 1)))
        .unwrap();
    leader.append(5_020, vec![client_batch(1)]).unwrap(); // offset 1
    let work = leader.transfer_leadership(5_030, 2).unwrap();
    assert_eq!(work, vec![], "nothing sent while node 2 is behind");
    assert!(leader.is_leader());
    let not_leader = Err(RaftError::NotLeader {
        leader_id: Some(1),
        epoch: 1,
    });
    assert_eq!(leader.append(5_031, vec![client_batch(1)]), not_leader);
    // Node 3 reaching the end changes nothing; node 2 reaching it makes the leader resign.
    leader
        .step(5_040, 3, Message::FetchRequest(fetch(3, 1, 2, 1)))
        .unwrap();
    assert!(leader.is_leader());
    let work = leader
        .step(5_050, 2, Message::FetchRequest(fetch(2, 1, 2, 1)))
        .unwrap();
    let (_, sends) = end_quorum_epoch_to(1, 1, &[2, 3]);
    for send in &sends {
        assert!(work.contains(send), "{send:?} not in {work:?}");
    }
    assert!(matches!(leader.state(), EpochState::Resigned(_)));

    // A successor that does not catch up within an election timeout: appends resume.
    let mut leader = leader_1();
    leader
        .step(5_010, 2, Message::FetchRequest(fetch(2, 1, 1, 1)))
        .unwrap();
    leader.append(5_020, vec![client_batch(1)]).unwrap();
    leader.transfer_leadership(5_030, 2).unwrap();
    assert_eq!(leader.append(5_031, vec![client_batch(1)]), not_leader);
    assert!(leader.next_deadline_ms() <= 5_030 + leader.config().election_timeout_ms);
    let timeout = leader.config().election_timeout_ms;
    leader
        .step(
            5_030 + timeout / 2,
            2,
            Message::FetchRequest(fetch(2, 1, 1, 1)),
        )
        .unwrap();
    leader.tick(5_030 + timeout).unwrap();
    assert!(leader.is_leader());
    leader
        .append(5_031 + timeout, vec![client_batch(1)])
        .unwrap();
}

/// A resigned leader never leads its epoch again. Node 2 hears of the resignation before the
/// answer to the Fetch it sent earlier, and then a pre-vote refusal from a voter that has not
/// heard yet: neither sends it back to the old leader nor pushes its election a fetch timeout
/// away (tests/node.rs's SIGTERM handover waited the full 3 s in CI on 2026-12-02 for this).
#[test]
fn a_leader_the_host_cannot_reach_is_stood_against_soon_and_no_longer_defended() {
    let mut raft = follower_2();
    // Fetch 1 answered: node 2 has heard from its leader, so it refuses node 3's pre-vote.
    raft.step(20, 1, fetch_response(1, 0, Bytes::new()))
        .unwrap();
    let refused = raft.step(21, 3, pre_vote_request(3, 1, 0, 0)).unwrap();
    assert!(
        refused.iter().any(|w| matches!(
            w,
            Work::Send { message: Message::VoteResponse(r), .. } if !r.vote_granted
        )),
        "{refused:?}"
    );
    let full_timeout = raft.next_deadline_ms();
    // Fetch 2 fails in the host: the leader's connection was refused (a killed process).
    raft.step(30, 1, Message::FetchResponse(FetchResponse::unreachable(2)))
        .unwrap();
    let soon = raft.next_deadline_ms();
    let backoff_max = config(2).election_backoff_max_ms;
    assert!(
        soon <= 30 + backoff_max / 4 && soon < full_timeout,
        "{soon} vs {full_timeout}"
    );
    // Node 3, whose fetches fail too, stands first: granted.
    let granted = raft.step(31, 3, pre_vote_request(3, 1, 0, 0)).unwrap();
    assert!(
        granted.iter().any(|w| matches!(
            w,
            Work::Send { message: Message::VoteResponse(r), .. } if r.vote_granted
        )),
        "{granted:?}"
    );
    raft.tick(soon).unwrap();
    assert!(
        matches!(raft.state(), EpochState::Prospective(_)),
        "{:?}",
        raft.state()
    );
}

#[test]
fn a_late_answer_from_a_resigned_leader_does_not_hold_the_election_back() {
    let mut raft = follower_2();
    let end = EndQuorumEpochRequest {
        leader_id: 1,
        leader_epoch: 1,
        preferred_successors: vec![2, 3],
        preferred_successor_directory_ids: Vec::new(),
    };
    raft.step(20, 1, Message::EndQuorumEpochRequest(end))
        .unwrap();
    let deadline = raft.next_deadline_ms();
    assert!(deadline <= 20 + 101, "{deadline}");
    // The answer to fetch 1, sent before the resignation, still carries the leader's records.
    let records = stamp_batch(&client_batch(2), 0, 1);
    let work = raft
        .step(21, 1, fetch_response(1, 0, records.clone()))
        .unwrap();
    assert!(
        work.contains(&Work::AppendAsFollower { records }),
        "{work:?}"
    );
    // Our own flush pauses the timer; once it is done, the resignation's deadline stands.
    raft.on_persisted(
        22,
        Persisted::Log {
            generation: 0,
            end_offset: 2,
        },
    )
    .unwrap();
    assert!(
        raft.next_deadline_ms() <= deadline,
        "the late answer reset the fetch timeout: {}",
        raft.next_deadline_ms()
    );
    raft.tick(deadline).unwrap();
    assert!(
        matches!(raft.state(), EpochState::Prospective(_)),
        "{:?}",
        raft.state()
    );
    // Node 3 has not heard of the resignation and refuses, naming the old leader.
    raft.step(deadline + 1, 3, vote_response(false, 1, Some(1)))
        .unwrap();
    assert!(
        matches!(raft.state(), EpochState::Prospective(_)),
        "went back to the resigned leader: {:?}",
        raft.state()
    );
    // Once node 3 hears, its grant makes a candidate of epoch 2.
    raft.step(deadline + 2, 3, vote_response(true, 1, None))
        .unwrap();
    assert!(
        matches!(raft.state(), EpochState::Candidate(_)),
        "{:?}",
        raft.state()
    );
}

#[test]
fn observers_never_stand_but_may_vote() {
    let config = QuorumConfig::new(9, &[1, 2, 3]).unwrap();
    let mut observer = Raft::new(config, &RecoveredState::default(), 1, 0).unwrap();
    // It asks a voter for the leader instead of standing.
    let (work, _) = observer.tick(100_000).unwrap();
    assert!(
        !work.is_empty()
            && work.iter().all(|w| matches!(
                w,
                Work::Send {
                    message: Message::FetchRequest(_),
                    ..
                }
            )),
        "{work:?}"
    );
    assert!(matches!(observer.state(), EpochState::Unattached(_)));
    assert_eq!(observer.epoch(), 0);
    // KIP-853: a replica whose log does not name it a voter still votes (the log may not hold
    // its addition yet); the candidate counts the grant only if its own voter set has it.
    let work = observer.step(100_001, 2, vote_request(2, 1, 0, 0)).unwrap();
    assert_eq!(
        work[0],
        Work::WriteQuorumState(ElectionState {
            epoch: 1,
            leader_id: None,
            voted_for: Some(2)
        })
    );
    assert_eq!(
        work[1],
        Work::SendAfterPersist {
            to: 2,
            message: vote_response(true, 1, None)
        }
    );
    // Its election timer never makes it stand.
    let (work, _) = observer.tick(200_000).unwrap();
    assert!(
        work.iter().all(|w| !matches!(
            w,
            Work::Send {
                message: Message::VoteRequest(_),
                ..
            } | Work::SendAfterPersist {
                message: Message::VoteRequest(_),
                ..
            }
        )),
        "{work:?}"
    );
    assert_eq!(observer.epoch(), 1);
}

/// Node 1 restarted after leading epoch 4 (log end 1): it comes back Resigned, and its first
/// tick (at 1 ms) sends EndQuorumEpoch to the other voters.
fn resigned_1() -> Raft {
    let recovered = RecoveredState {
        election: ElectionState {
            epoch: 4,
            leader_id: Some(1),
            voted_for: Some(1),
        },
        log_end_offset: 1,
        epoch_cache: vec![OffsetAndEpoch::new(0, 4)],
        ..Default::default()
    };
    let mut raft = Raft::new(config(1), &recovered, 1, 0).unwrap();
    assert!(matches!(raft.state(), EpochState::Resigned(_)));
    assert_eq!(raft.log().end_offset_and_epoch(), OffsetAndEpoch::new(1, 4));
    let (work, _) = raft.tick(1).unwrap();
    assert_eq!(work, end_quorum_epoch_to(1, 4, &[2, 3]).1);
    raft
}

#[test]
fn restart_keeps_the_vote_and_a_former_leader_comes_back_resigned() {
    let recovered = RecoveredState {
        election: ElectionState {
            epoch: 4,
            leader_id: None,
            voted_for: Some(3),
        },
        ..Default::default()
    };
    let mut raft = Raft::new(config(1), &recovered, 1, 0).unwrap();
    let work = raft.step(1, 2, vote_request(2, 4, 0, 0)).unwrap();
    assert_eq!(
        work,
        vec![Work::Send {
            to: 2,
            message: vote_response(false, 4, None)
        }]
    );
    // Its first tick tells the other voters it no longer leads epoch 4...
    let mut raft = resigned_1();
    // ...and a voter that has followed a newer leader meanwhile names it: the restarted node
    // follows it at once, not after an election timeout.
    raft.step(
        5,
        2,
        Message::EndQuorumEpochResponse(EndQuorumEpochResponse {
            error_code: ErrorCode::FencedLeaderEpoch,
            current_leader: LeaderIdAndEpoch {
                leader_id: Some(3),
                leader_epoch: 5,
            },
        }),
    )
    .unwrap();
    assert!(
        matches!(raft.state(), EpochState::Follower(f) if f.leader_id == 3 && f.epoch == 5),
        "{:?}",
        raft.state()
    );
}

#[test]
fn append_on_a_follower_is_a_typed_error_and_malformed_batches_are_refused() {
    let mut follower = follower_2();
    assert_eq!(
        follower.append(30, vec![client_batch(1)]).unwrap_err(),
        RaftError::NotLeader {
            leader_id: Some(1),
            epoch: 1
        }
    );
    let mut leader = leader_1();
    assert!(matches!(
        leader.append(5_001, vec![Bytes::from_static(b"short")]),
        Err(RaftError::MalformedBatch { .. })
    ));
    assert_eq!(leader.log().log_end_offset(), 1, "nothing appended");
    let lc = leader_change_batch(1, &[1], &[1]);
    assert_eq!(batch_headers(&lc).unwrap()[0].records_count, 1);
}

#[path = "snapshot_tests.rs"]
mod snapshot_tests;

#[path = "snapshot_fetch_tests.rs"]
mod snapshot_fetch_tests;

#[path = "pre_vote_tests.rs"]
mod pre_vote_tests;

#[path = "single_voter_tests.rs"]
mod single_voter_tests;

#[path = "lost_request_tests.rs"]
mod lost_request_tests;
