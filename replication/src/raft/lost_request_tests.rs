//! A Vote, BeginQuorumEpoch or EndQuorumEpoch the host could not deliver (its peer's
//! connection was refused or reset) comes back as an answer with BROKER_NOT_AVAILABLE and no
//! leader (net/src/node/quorum_rpc/peer_answers.rs, `peer_failed`). The core asks again after the retry
//! backoff, as Kafka's request manager retries a failed request, rather than a request timeout
//! later: after a restart of the whole quorum the first requests meet peers not yet listening.

use super::*;

fn not_delivered() -> LeaderIdAndEpoch {
    LeaderIdAndEpoch {
        leader_id: None,
        leader_epoch: 0,
    }
}

#[test]
fn a_lost_end_quorum_epoch_is_sent_again_after_the_retry_backoff() {
    let mut raft = resigned_1();
    let request_timeout_resend = 1 + raft.config.request_timeout_ms;
    assert!(raft.next_deadline_ms() > 1 + raft.config.retry_backoff_ms);
    // Node 3 took it; node 2's was lost with its connection.
    let taken = Message::EndQuorumEpochResponse(EndQuorumEpochResponse {
        error_code: ErrorCode::None,
        current_leader: LeaderIdAndEpoch {
            leader_id: None,
            leader_epoch: 4,
        },
    });
    assert!(raft.step(2, 3, taken).unwrap().is_empty());
    let lost = Message::EndQuorumEpochResponse(EndQuorumEpochResponse {
        error_code: ErrorCode::BrokerNotAvailable,
        current_leader: not_delivered(),
    });
    assert!(raft.step(3, 2, lost).unwrap().is_empty());
    assert!(matches!(raft.state(), EpochState::Resigned(_)));
    let retry_at = 3 + raft.config.retry_backoff_ms;
    assert!(retry_at < request_timeout_resend);
    assert_eq!(raft.next_deadline_ms(), retry_at);
    let (work, _) = raft.tick(retry_at).unwrap();
    let to_2: Vec<Work> = end_quorum_epoch_to(1, 4, &[2, 3])
        .1
        .into_iter()
        .filter(|w| matches!(w, Work::Send { to: 2, .. }))
        .collect();
    assert_eq!(work, to_2, "only to the voter that lacks it");
    // Answered again by an error: again after the backoff, no sooner.
    let lost = Message::EndQuorumEpochResponse(EndQuorumEpochResponse {
        error_code: ErrorCode::BrokerNotAvailable,
        current_leader: not_delivered(),
    });
    assert!(raft.step(retry_at, 2, lost).unwrap().is_empty());
    assert!(raft.tick(retry_at + 1).unwrap().0.is_empty());
}

#[test]
fn a_lost_begin_quorum_epoch_is_sent_again_after_the_retry_backoff() {
    let mut raft = leader_1();
    let EpochState::Leader(leader) = raft.state() else {
        unreachable!("leader_1 leads")
    };
    let epoch = leader.epoch;
    let resend_at = leader.begin_quorum_resend_ms;
    let now = 5_001;
    assert!(now + raft.config.retry_backoff_ms < resend_at);
    let lost = Message::BeginQuorumEpochResponse(BeginQuorumEpochResponse {
        error_code: ErrorCode::BrokerNotAvailable,
        current_leader: not_delivered(),
    });
    assert!(raft.step(now, 3, lost).unwrap().is_empty());
    let retry_at = now + raft.config.retry_backoff_ms;
    assert_eq!(raft.next_deadline_ms(), retry_at);
    let (work, _) = raft.tick(retry_at).unwrap();
    let begin = Message::BeginQuorumEpochRequest(BeginQuorumEpochRequest {
        leader_id: 1,
        leader_epoch: epoch,
        voter_directory_id: [0; 16],
    });
    assert!(
        work.contains(&Work::Send {
            to: 3,
            message: begin
        }),
        "{work:?}"
    );
    // A replaced disk (INVALID_VOTER_KEY) is no reason to ask sooner.
    let mut raft = leader_1();
    let refused = Message::BeginQuorumEpochResponse(BeginQuorumEpochResponse {
        error_code: ErrorCode::InvalidVoterKey,
        current_leader: LeaderIdAndEpoch {
            leader_id: Some(1),
            leader_epoch: epoch,
        },
    });
    assert!(raft.step(now, 3, refused).unwrap().is_empty());
    assert_eq!(
        raft.next_deadline_ms(),
        resend_at.min(raft.next_deadline_ms())
    );
    assert!(raft.next_deadline_ms() > retry_at);
}

#[test]
fn a_lost_vote_is_asked_again_after_the_retry_backoff() {
    let mut raft = fresh(1);
    raft.stand_first(0).unwrap();
    let lost = Message::VoteResponse(VoteResponse {
        error_code: ErrorCode::BrokerNotAvailable,
        current_leader: not_delivered(),
        vote_granted: false,
    });
    assert!(raft.step(1, 2, lost).unwrap().is_empty());
    assert!(matches!(raft.state(), EpochState::Prospective(_)));
    assert_eq!(raft.next_deadline_ms(), 1 + raft.config.retry_backoff_ms);
}
