//! KIP-320, "Inadequate Replica Fencing" (KAFKA-6880): a zombie follower whose view of the
//! leader epoch is stale keeps fetching. The leader must fence it (FENCED_LEADER_EPOCH, or
//! UNKNOWN_LEADER_EPOCH for an epoch from its future) and must never count the offset it claims
//! toward the high-watermark: a replica that is not on the leader's epoch cannot be part of
//! the majority that makes a record committed.
//!
//! Pure core: one leader (node 1 of voters 1, 2, 3) driven by hand; storage completions are
//! reported at once.

use std::collections::BTreeMap;

use bytes::Bytes;
use ringlog_engine::batch::RecordBatchBuilder;
use ringlog_replication::{
    ElectionState, ErrorCode, FetchRequest, FetchResponse, LeaderIdAndEpoch, Message, MultiRaft,
    PartitionMessage, PartitionWork, Persisted, QuorumConfig, RecoveredState, VoteResponse, Work,
};

/// What the leader did in reply to one input, after its storage work completed.
#[derive(Default)]
struct Outcome {
    fetch_responses: Vec<(i32, FetchResponse)>,
    high_watermarks: Vec<u64>,
}

/// Executes storage work in memory (everything is durable at once) and collects the rest.
fn drive(node: &mut MultiRaft, now_ms: u64, mut work: Vec<PartitionWork>, out: &mut Outcome) {
    while !work.is_empty() {
        let mut next = Vec::new();
        for item in work {
            match item.work {
                Work::WriteQuorumState(state) => next.extend(
                    node.on_persisted(now_ms, item.partition, Persisted::QuorumState(state))
                        .unwrap(),
                ),
                Work::Flush {
                    generation,
                    end_offset,
                } => next.extend(
                    node.on_persisted(
                        now_ms,
                        item.partition,
                        Persisted::Log {
                            generation,
                            end_offset,
                        },
                    )
                    .unwrap(),
                ),
                Work::SendFetchResponse { to, response, .. } => {
                    out.fetch_responses.push((to, response))
                }
                Work::Send {
                    to,
                    message: Message::FetchResponse(response),
                } => out.fetch_responses.push((to, response)),
                Work::HighWatermarkChanged { high_watermark } => {
                    out.high_watermarks.push(high_watermark)
                }
                _ => {}
            }
        }
        work = next;
    }
}

/// Node 1 recovered in epoch 1, elected leader of epoch 2 with node 2's pre-vote and vote, holding its
/// LeaderChangeMessage (offset 0) and three records (offsets 1..4), all durable locally.
fn leader_of_epoch_2() -> MultiRaft {
    let config = QuorumConfig::new(1, &[1, 2, 3]).unwrap();
    let recovered = RecoveredState {
        election: ElectionState {
            epoch: 1,
            leader_id: None,
            voted_for: None,
        },
        ..RecoveredState::default()
    };
    let partitions: BTreeMap<u32, RecoveredState> = [(0, recovered)].into();
    let mut node = MultiRaft::new(&config, &partitions, 7, 0).unwrap();
    node.set_check_resting_ticks(true);
    let mut out = Outcome::default();
    let (work, _) = node.tick(10_000).unwrap();
    drive(&mut node, 10_000, work, &mut out);
    // KIP-996: node 2 grants the pre-vote (in epoch 1), then the real vote for epoch 2.
    let pre_vote_grant = Message::VoteResponse(VoteResponse {
        error_code: ErrorCode::None,
        current_leader: LeaderIdAndEpoch {
            leader_id: None,
            leader_epoch: 1,
        },
        vote_granted: true,
    });
    let work = node
        .step(
            10_000,
            2,
            PartitionMessage {
                partition: 0,
                message: pre_vote_grant,
            },
        )
        .unwrap();
    drive(&mut node, 10_000, work, &mut out);
    assert_eq!(node.partition(0).unwrap().epoch(), 2, "stood for epoch 2");
    let grant = Message::VoteResponse(VoteResponse {
        error_code: ErrorCode::None,
        current_leader: LeaderIdAndEpoch {
            leader_id: None,
            leader_epoch: 2,
        },
        vote_granted: true,
    });
    let work = node
        .step(
            10_001,
            2,
            PartitionMessage {
                partition: 0,
                message: grant,
            },
        )
        .unwrap();
    drive(&mut node, 10_001, work, &mut out);
    assert!(node.partition(0).unwrap().is_leader());
    let mut builder = RecordBatchBuilder::new(0);
    for value in [b"a", b"b", b"c"] {
        builder.append(1, None, Some(value), &[]);
    }
    let batch: Bytes = builder.build().into_bytes();
    let (_, work) = node.append(10_002, 0, vec![batch]).unwrap();
    drive(&mut node, 10_002, work, &mut out);
    assert_eq!(node.partition(0).unwrap().log().log_end_offset(), 4);
    assert_eq!(node.partition(0).unwrap().high_watermark(), 0);
    node
}

fn fetch(
    node: &mut MultiRaft,
    now_ms: u64,
    from: i32,
    current_leader_epoch: u32,
    fetch_offset: u64,
    last_fetched_epoch: u32,
) -> Outcome {
    let request = Message::FetchRequest(FetchRequest {
        correlation_id: now_ms,
        replica_id: from,
        current_leader_epoch,
        fetch_offset,
        last_fetched_epoch,
        max_bytes: 1 << 20,
        max_wait_ms: 0,
        replica_directory_id: [0; 16],
    });
    let work = node
        .step(
            now_ms,
            from,
            PartitionMessage {
                partition: 0,
                message: request,
            },
        )
        .unwrap();
    let mut out = Outcome::default();
    drive(node, now_ms, work, &mut out);
    out
}

#[test]
fn a_zombie_with_a_stale_epoch_is_fenced_and_never_counted_toward_the_high_watermark() {
    let mut node = leader_of_epoch_2();

    // The zombie (node 3) still believes in epoch 1 and claims the whole log.
    let zombie = fetch(&mut node, 10_010, 3, 1, 4, 2);
    assert_eq!(zombie.fetch_responses.len(), 1);
    let (to, response) = &zombie.fetch_responses[0];
    assert_eq!(*to, 3);
    assert_eq!(response.error_code, ErrorCode::FencedLeaderEpoch);
    assert_eq!(
        response.current_leader,
        LeaderIdAndEpoch {
            leader_id: Some(1),
            leader_epoch: 2
        },
        "the fenced replica learns the leader it must follow"
    );
    assert!(
        response.records.is_empty(),
        "a fenced fetch gets no records"
    );
    assert!(zombie.high_watermarks.is_empty());
    assert_eq!(node.partition(0).unwrap().high_watermark(), 0);

    // A zombie from an epoch the leader never saw is not trusted either.
    let future = fetch(&mut node, 10_011, 3, 9, 4, 2);
    assert_eq!(
        future.fetch_responses[0].1.error_code,
        ErrorCode::UnknownLeaderEpoch
    );
    assert_eq!(node.partition(0).unwrap().high_watermark(), 0);

    // Node 2, on the right epoch, has only the LeaderChangeMessage: the majority {1, 2} holds
    // offset 0 only. Had the zombie's claim counted, {1, 3} would have committed offset 4.
    let honest = fetch(&mut node, 10_012, 2, 2, 1, 2);
    assert_eq!(honest.fetch_responses[0].1.error_code, ErrorCode::None);
    assert_eq!(node.partition(0).unwrap().high_watermark(), 1);
    assert_eq!(honest.high_watermarks, vec![1]);

    // The zombie again, still stale: nothing moves.
    let again = fetch(&mut node, 10_013, 3, 1, 4, 2);
    assert_eq!(
        again.fetch_responses[0].1.error_code,
        ErrorCode::FencedLeaderEpoch
    );
    assert_eq!(node.partition(0).unwrap().high_watermark(), 1);

    // Once node 2 really holds the log, the records commit (the check above could fail).
    let caught_up = fetch(&mut node, 10_014, 2, 2, 4, 2);
    assert_eq!(caught_up.fetch_responses[0].1.error_code, ErrorCode::None);
    assert_eq!(node.partition(0).unwrap().high_watermark(), 4);
}
