//! Several partitions on one node over the same voter set: messages are routed by partition,
//! and sends to one peer can be batched into one request.

use std::collections::BTreeMap;

use ringlog_replication::{
    ElectionState, Message, MultiRaft, PartitionMessage, Persisted, QuorumConfig, RaftError,
    RecoveredState, VoteResponse, Work,
};

#[test]
fn partitions_elect_independently_and_sends_batch_by_peer() {
    let config = QuorumConfig::new(1, &[1, 2, 3]).unwrap();
    let partitions: BTreeMap<u32, RecoveredState> = [
        (0, RecoveredState::default()),
        (1, RecoveredState::default()),
    ]
    .into();
    let mut node = MultiRaft::new(&config, &partitions, 5, 0).unwrap();
    node.set_check_resting_ticks(true);
    // Both groups time out and ask for pre-votes (KIP-996), in epoch 0.
    let (work, _) = node.tick(10_000).unwrap();
    let pre_votes = work
        .iter()
        .filter(|w| {
            matches!(
                &w.work,
                Work::Send {
                    message: Message::VoteRequest(r),
                    ..
                } if r.pre_vote && r.candidate_epoch == 0
            )
        })
        .count();
    assert_eq!(pre_votes, 4, "two partitions x two peers: {work:?}");
    // Node 2 grants both pre-votes: both groups stand in epoch 1.
    let mut work = Vec::new();
    for partition in [0, 1] {
        let pre_vote_grant = Message::VoteResponse(VoteResponse {
            error_code: ringlog_replication::ErrorCode::None,
            current_leader: ringlog_replication::LeaderIdAndEpoch {
                leader_id: None,
                leader_epoch: 0,
            },
            vote_granted: true,
        });
        work.extend(
            node.step(
                10_000,
                2,
                PartitionMessage {
                    partition,
                    message: pre_vote_grant,
                },
            )
            .unwrap(),
        );
    }
    let votes: Vec<_> = work
        .iter()
        .filter(|w| matches!(w.work, Work::SendAfterPersist { .. }))
        .collect();
    assert_eq!(votes.len(), 4, "two partitions x two peers: {work:?}");
    for item in &work {
        if let Work::WriteQuorumState(state) = item.work {
            node.on_persisted(10_000, item.partition, Persisted::QuorumState(state))
                .unwrap();
        }
    }
    // Partition 1 wins; partition 0 stays a candidate.
    let grant = Message::VoteResponse(VoteResponse {
        error_code: ringlog_replication::ErrorCode::None,
        current_leader: ringlog_replication::LeaderIdAndEpoch {
            leader_id: None,
            leader_epoch: 1,
        },
        vote_granted: true,
    });
    let work = node
        .step(
            10_001,
            2,
            PartitionMessage {
                partition: 1,
                message: grant,
            },
        )
        .unwrap();
    assert!(work.iter().all(|w| w.partition == 1));
    assert!(node.partition(1).unwrap().is_leader());
    assert!(!node.partition(0).unwrap().is_leader());
    assert_eq!(
        node.partition(1).unwrap().election_state(),
        ElectionState {
            epoch: 1,
            leader_id: Some(1),
            voted_for: Some(1)
        }
    );
    // Unknown partitions are typed errors.
    let bogus = PartitionMessage {
        partition: 9,
        message: Message::VoteResponse(VoteResponse {
            error_code: ringlog_replication::ErrorCode::None,
            current_leader: ringlog_replication::LeaderIdAndEpoch {
                leader_id: None,
                leader_epoch: 1,
            },
            vote_granted: true,
        }),
    };
    assert_eq!(
        node.step(10_002, 2, bogus).unwrap_err(),
        RaftError::UnknownPartition(9)
    );
    // Immediate sends group by peer.
    let (mut work, _) = node.tick(30_000).unwrap();
    work.retain(|w| matches!(w.work, Work::Send { .. } | Work::SendAfterPersist { .. }));
    let (by_peer, _rest) = MultiRaft::batch_sends_by_peer(work);
    for (peer, messages) in by_peer {
        assert!(peer == 2 || peer == 3);
        assert!(
            messages
                .windows(2)
                .all(|w| w[0].partition <= w[1].partition)
        );
    }
}

/// `take_touched` names exactly the groups reached since the last call: a host's observer looks
/// at those alone, so a group left out would show a stale state in the metrics.
#[test]
fn touched_groups_are_those_reached_since_the_last_look() {
    let config = QuorumConfig::new(1, &[1, 2, 3]).unwrap();
    let partitions: BTreeMap<u32, RecoveredState> = (0..4)
        .map(|partition| (partition, RecoveredState::default()))
        .collect();
    let mut node = MultiRaft::new(&config, &partitions, 5, 0).unwrap();
    node.set_check_resting_ticks(true);
    // Every group is new: all are named once.
    assert_eq!(
        node.take_touched().into_iter().collect::<Vec<_>>(),
        vec![0, 1, 2, 3]
    );
    assert!(node.take_touched().is_empty(), "nothing reached them since");
    // A tick reaches the groups due (all of them, never ticked), and each rests after it.
    let (_, next_ms) = node.tick(1).unwrap();
    assert_eq!(node.take_touched().len(), 4);
    // Before any deadline, a tick reaches none of the resting groups.
    node.tick(next_ms - 1).unwrap();
    assert!(
        node.take_touched().is_empty(),
        "resting groups were not reached"
    );
    // A step reaches its group alone, even one the core refuses.
    let message = |partition| PartitionMessage {
        partition,
        message: Message::VoteResponse(VoteResponse {
            error_code: ringlog_replication::ErrorCode::None,
            current_leader: ringlog_replication::LeaderIdAndEpoch {
                leader_id: None,
                leader_epoch: 0,
            },
            vote_granted: false,
        }),
    };
    node.step(2, 2, message(2)).unwrap();
    assert_eq!(node.take_touched().into_iter().collect::<Vec<_>>(), vec![2]);
    assert!(matches!(
        node.step(2, 2, message(9)),
        Err(RaftError::UnknownPartition(9))
    ));
    assert!(node.take_touched().is_empty(), "no group 9 to name");
    // A removed group is forgotten, touched or not.
    node.step(3, 2, message(1)).unwrap();
    node.remove_partition(1);
    assert!(node.take_touched().is_empty());
}
