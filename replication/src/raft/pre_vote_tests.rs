//! KIP-996 pre-vote: a voter that lost touch with a healthy leader goes back to following it
//! without raising the epoch; only a majority that lost the leader too lets it stand.

use super::*;

/// Follower 2 of leader 1 (epoch 1) that fetched successfully once, at time 20.
fn follower_2_that_fetched() -> Raft {
    let mut raft = follower_2();
    raft.step(20, 1, fetch_response(1, 0, Bytes::new()))
        .unwrap();
    raft
}

fn pre_vote_answer(work: &[Work], to: NodeId) -> (bool, LeaderIdAndEpoch) {
    let answers: Vec<_> = work
        .iter()
        .filter_map(|w| match w {
            Work::Send {
                to: t,
                message: Message::VoteResponse(r),
            }
            | Work::SendAfterPersist {
                to: t,
                message: Message::VoteResponse(r),
            } if *t == to => Some((r.vote_granted, r.current_leader)),
            _ => None,
        })
        .collect();
    assert_eq!(answers.len(), 1, "{work:?}");
    answers[0]
}

#[test]
fn a_follower_whose_fetch_timeout_fires_goes_back_to_a_leader_that_refuses_its_pre_vote() {
    // The kip320 test's failure: a healthy leader 1, follower 2 misses its fetch timeout (its
    // own process stalled), the third voter is down.
    let mut follower = follower_2_that_fetched();
    let (work, _) = follower.tick(20 + 2_000).unwrap();
    assert!(matches!(follower.state(), EpochState::Prospective(_)));
    assert_eq!(
        follower.epoch(),
        1,
        "a timeout alone never raises the epoch"
    );
    assert!(
        !work.iter().any(|w| matches!(w, Work::WriteQuorumState(_))),
        "a pre-vote writes nothing: {work:?}"
    );
    let pre_vote = work
        .iter()
        .find_map(|w| match w {
            Work::Send {
                to: 1,
                message: m @ Message::VoteRequest(VoteRequest { pre_vote: true, .. }),
            } => Some(m.clone()),
            _ => None,
        })
        .expect("a pre-vote to the leader");

    // The leader refuses, names itself, and stays leader of its epoch.
    let mut leader = leader_1();
    let work = leader.step(5_100, 2, pre_vote).unwrap();
    assert!(leader.is_leader());
    assert_eq!(leader.epoch(), 1);
    let (granted, named) = pre_vote_answer(&work, 2);
    assert!(!granted);
    assert_eq!(named.leader_id, Some(1));

    // The refusal sends the follower back to leader 1 in epoch 1, and it fetches again.
    let work = follower
        .step(20 + 2_001, 1, vote_response(false, 1, Some(1)))
        .unwrap();
    assert!(matches!(
        follower.state(),
        EpochState::Follower(FollowerState {
            leader_id: 1,
            epoch: 1,
            ..
        })
    ));
    assert!(
        work.iter().any(|w| matches!(
            w,
            Work::Send {
                to: 1,
                message: Message::FetchRequest(_)
            }
        )),
        "{work:?}"
    );
}

#[test]
fn a_follower_refuses_pre_votes_while_it_hears_from_its_leader() {
    // Follower 2 fetched from leader 1: node 3's pre-vote is refused, naming leader 1.
    let mut follower = follower_2_that_fetched();
    let work = follower
        .step(30, 3, pre_vote_request(3, 1, 1, 100))
        .unwrap();
    let (granted, named) = pre_vote_answer(&work, 3);
    assert!(!granted);
    assert_eq!((named.leader_id, named.leader_epoch), (Some(1), 1));
    assert!(
        matches!(follower.state(), EpochState::Follower(_)),
        "nothing changes"
    );

    // One that never fetched since it started following grants it (else two followers of a
    // dead leader would refuse each other forever), and names no leader.
    let mut fresh_follower = follower_2();
    let work = fresh_follower
        .step(30, 3, pre_vote_request(3, 1, 0, 0))
        .unwrap();
    let (granted, named) = pre_vote_answer(&work, 3);
    assert!(granted);
    assert_eq!(named.leader_id, None);
    assert!(
        !work.iter().any(|w| matches!(w, Work::WriteQuorumState(_))),
        "a granted pre-vote binds nothing: {work:?}"
    );
    assert!(matches!(fresh_follower.state(), EpochState::Follower(_)));
}

#[test]
fn end_quorum_epoch_lets_the_followers_grant_the_successors_pre_votes() {
    let mut follower = follower_2_that_fetched();
    follower
        .step(
            40,
            1,
            Message::EndQuorumEpochRequest(EndQuorumEpochRequest {
                leader_id: 1,
                leader_epoch: 1,
                preferred_successors: vec![3, 2],
                preferred_successor_directory_ids: Vec::new(),
            }),
        )
        .unwrap();
    let work = follower.step(41, 3, pre_vote_request(3, 1, 0, 0)).unwrap();
    let (granted, _) = pre_vote_answer(&work, 3);
    assert!(granted, "the leader said it is leaving: {work:?}");
}

#[test]
fn a_pre_vote_refused_by_a_majority_never_raises_the_epoch() {
    let mut raft = fresh(1);
    let (_, deadline) = raft.tick(0).unwrap();
    raft.tick(deadline).unwrap();
    assert!(matches!(raft.state(), EpochState::Prospective(_)));
    raft.step(deadline, 2, vote_response(false, 0, None))
        .unwrap();
    raft.step(deadline, 3, vote_response(false, 0, None))
        .unwrap();
    // Lost round: after a backoff a new round asks again, still in epoch 0.
    let (work, next) = raft.tick(deadline).unwrap();
    assert!(work.is_empty(), "{work:?}");
    assert!(
        next <= deadline + 1_000,
        "a lost round ends within the backoff: {next}"
    );
    let (work, _) = raft.tick(next).unwrap();
    assert_eq!(raft.epoch(), 0);
    assert!(matches!(raft.state(), EpochState::Prospective(_)));
    let pre_votes = work
        .iter()
        .filter(|w| {
            matches!(
                w,
                Work::Send {
                    message: Message::VoteRequest(VoteRequest {
                        pre_vote: true,
                        candidate_epoch: 0,
                        ..
                    }),
                    ..
                }
            )
        })
        .count();
    assert_eq!(pre_votes, 2, "{work:?}");
}

#[test]
fn a_pre_vote_from_a_newer_epoch_moves_us_there_but_binds_nothing() {
    // As Kafka does: a voter asking in a newer epoch shows ours is over.
    let mut raft = fresh(1);
    let work = raft.step(10, 2, pre_vote_request(2, 4, 0, 0)).unwrap();
    assert_eq!(raft.epoch(), 4);
    assert!(matches!(raft.state(), EpochState::Unattached(_)));
    let written: Vec<_> = work
        .iter()
        .filter_map(|w| match w {
            Work::WriteQuorumState(state) => Some(*state),
            _ => None,
        })
        .collect();
    assert_eq!(
        written,
        vec![ElectionState {
            epoch: 4,
            leader_id: None,
            voted_for: None
        }],
        "the new epoch is durable, but no vote"
    );
}

/// The voter an observer's next fetch goes to (in `work`, else ticking at most 10 s of its
/// time) and the fetch's correlation id; `now` ends at the time the fetch went out.
fn next_fetch(observer: &mut Raft, now: &mut u64, work: Vec<Work>) -> (NodeId, u64) {
    let fetch_in = |work: &[Work]| {
        work.iter().find_map(|w| match w {
            Work::Send {
                to,
                message: Message::FetchRequest(f),
            }
            | Work::SendAfterPersist {
                to,
                message: Message::FetchRequest(f),
            } => Some((*to, f.correlation_id)),
            _ => None,
        })
    };
    let deadline = *now + 10_000;
    if let Some(found) = fetch_in(&work) {
        return found;
    }
    loop {
        let (work, next) = observer.tick(*now).unwrap();
        if let Some(found) = fetch_in(&work) {
            // Answers arrive at the time the fetch went out (`now` stays there).
            return found;
        }
        assert!(next > *now, "time stands still at {now}");
        *now = next;
        assert!(*now < deadline, "the observer never fetched again");
    }
}

fn not_leader_naming(correlation_id: u64, leader_id: NodeId, leader_epoch: Epoch) -> Message {
    let Message::FetchResponse(mut response) = fetch_response(correlation_id, 0, Bytes::new())
    else {
        unreachable!()
    };
    response.error_code = ErrorCode::NotLeaderOrFollower;
    response.current_leader = LeaderIdAndEpoch {
        leader_id: Some(leader_id),
        leader_epoch,
    };
    Message::FetchResponse(response)
}

#[test]
fn an_observer_fetches_from_the_leader_a_voter_names_and_goes_back_to_it_after_a_timeout() {
    // Found with pre-vote's new timings (simulator seeds 337 and 503, mixed profile): an
    // observer walked round-robin past the leader a voter had just named.
    let config = QuorumConfig::new(9, &[1, 2, 3]).unwrap();
    let mut observer = Raft::new(config, &RecoveredState::default(), 1, 0).unwrap();
    let mut now = 0;
    // It knows no leader: it asks a voter, which does not answer (it was busy), then the next
    // voter, which names the first one leader of epoch 1: that is where the next fetch goes.
    let (leader, _) = next_fetch(&mut observer, &mut now, Vec::new());
    let (asked, correlation_id) = next_fetch(&mut observer, &mut now, Vec::new());
    assert_ne!(
        asked, leader,
        "an unanswered fetch moves on to the next voter"
    );
    let work = observer
        .step(now, asked, not_leader_naming(correlation_id, leader, 1))
        .unwrap();
    let (to, _) = next_fetch(&mut observer, &mut now, work);
    assert_eq!(to, leader, "a newly learned leader is asked next");
    // The leader never answers (its fetch parked past the observer's fetch timeout): the
    // observer asks another voter, which names the same leader: the next fetch goes back to it.
    let (asked, correlation_id) = loop {
        let (to, correlation_id) = next_fetch(&mut observer, &mut now, Vec::new());
        if to != leader {
            break (to, correlation_id);
        }
    };
    let work = observer
        .step(now, asked, not_leader_naming(correlation_id, leader, 1))
        .unwrap();
    let (to, _) = next_fetch(&mut observer, &mut now, work);
    assert_eq!(
        to, leader,
        "a voter confirming our leader sends us back to it"
    );
}

#[test]
fn an_observer_that_no_longer_hears_its_leader_grants_pre_votes() {
    // Simulator, profile reconfig, seeds 105, 157 and 272: a leader removed itself and stopped
    // leading; a replica whose log still named it an observer kept following it and refused
    // every pre-vote naming it, while the newer voter set needed that replica's vote. No one
    // was elected. KIP-996's refusal protects a leader that is still heard, not a dead one.
    let config = QuorumConfig::new(9, &[1, 2, 3]).unwrap();
    let mut observer = Raft::new(config, &RecoveredState::default(), 1, 0).unwrap();
    let mut now = 0;
    // It learns leader 1 of epoch 1 from a voter and fetches from it successfully.
    // (The answer that names the leader only makes it a follower; the next one counts.)
    let (asked, correlation_id) = next_fetch(&mut observer, &mut now, Vec::new());
    let work = observer
        .step(now, asked, not_leader_naming(correlation_id, 1, 1))
        .unwrap();
    let (to, correlation_id) = next_fetch(&mut observer, &mut now, work);
    assert_eq!(to, 1);
    observer
        .step(now, 1, fetch_response(correlation_id, 0, Bytes::new()))
        .unwrap();
    assert!(matches!(
        observer.state(),
        EpochState::Follower(FollowerState { leader_id: 1, .. })
    ));
    // While it hears leader 1 it refuses, naming it.
    let work = observer
        .step(now, 3, pre_vote_request(3, 1, 1, 100))
        .unwrap();
    let (granted, named) = pre_vote_answer(&work, 3);
    assert!(!granted);
    assert_eq!(named.leader_id, Some(1));
    // Leader 1 never answers again: once the observer's fetch timeout fires it grants.
    now += 2_000 + 1;
    observer.tick(now).unwrap();
    assert!(
        matches!(observer.state(), EpochState::Follower(_)),
        "an observer keeps its leader"
    );
    let work = observer
        .step(now, 3, pre_vote_request(3, 1, 1, 100))
        .unwrap();
    let (granted, named) = pre_vote_answer(&work, 3);
    assert!(granted, "{work:?}");
    assert_eq!(named.leader_id, None);
}
