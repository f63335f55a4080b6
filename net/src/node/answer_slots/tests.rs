//! The answer slots' bookkeeping, request by request.

use super::*;
use crate::protocol::wire::Uuid;

const REPLICA: NodeId = 2;

impl AnswerSlots {
    fn any_carried(&self) -> bool {
        self.asks.keys().any(|id| self.is_carried(*id))
    }
}

fn ask(fetch_offset: u64) -> core::FetchRequest {
    core::FetchRequest {
        correlation_id: 0,
        replica_id: REPLICA,
        current_leader_epoch: 1,
        fetch_offset,
        last_fetched_epoch: 1,
        max_bytes: 1 << 20,
        max_wait_ms: 500,
        replica_directory_id: [0; 16],
    }
}

/// A replica Fetch of (partition, fetch offset) parts, each given the next core
/// correlation id as the node does.
fn register(
    slots: &mut AnswerSlots,
    parts: &[(PartitionId, u64)],
) -> (u64, Vec<u64>, Vec<u64>, Vec<u64>) {
    register_in(slots, parts, 500, None)
}

/// [`register`] of a Fetch in fetch session 7 of the replica: the full one that opens it, or
/// an incremental one naming only `parts`.
fn register_in_session(
    slots: &mut AnswerSlots,
    parts: &[(PartitionId, u64)],
    incremental: bool,
) -> (u64, Vec<u64>, Vec<u64>, Vec<u64>) {
    let session = FetchCarrier {
        replica: REPLICA,
        session_id: 7,
        incremental,
    };
    register_in(slots, parts, 500, Some(session))
}

/// [`register`] of a Fetch whose MaxWaitMs is `max_wait_ms` (every part has the request's).
fn register_waiting(
    slots: &mut AnswerSlots,
    parts: &[(PartitionId, u64)],
    max_wait_ms: u64,
) -> (u64, Vec<u64>, Vec<u64>, Vec<u64>) {
    register_in(slots, parts, max_wait_ms, None)
}

fn register_in(
    slots: &mut AnswerSlots,
    parts: &[(PartitionId, u64)],
    max_wait_ms: u64,
    session: Option<FetchCarrier>,
) -> (u64, Vec<u64>, Vec<u64>, Vec<u64>) {
    let (responder, _reply) = Responder::for_test(1);
    let parts = parts
        .iter()
        .map(|&(partition, offset)| {
            let mut fetch = ask(offset);
            fetch.max_wait_ms = max_wait_ms;
            fetch.correlation_id = slots.next_fetch_correlation_id();
            InboundPart {
                topic: "t".into(),
                topic_id: Uuid::ZERO,
                index: partition as i32,
                target: Ok((partition, REPLICA, core::Message::FetchRequest(fetch))),
            }
        })
        .collect();
    let (id, steps, superseded, carried_from) =
        slots.register(responder, ApiKey::Fetch, parts, 0, session);
    let stepped = steps
        .iter()
        .map(|(_, _, _, m)| match m {
            core::Message::FetchRequest(f) => f.correlation_id,
            _ => unreachable!(),
        })
        .collect();
    slots.stepped(id);
    (id, stepped, superseded, carried_from)
}

fn answer(correlation_id: u64, records: &'static [u8]) -> core::FetchResponse {
    let mut response = core::FetchResponse::unreachable(correlation_id);
    response.error_code = core::ErrorCode::None;
    response.records = bytes::Bytes::from_static(records);
    response
}

/// The first part of `done` is the core's answer to fetch `correlation_id`.
fn assert_first_answers(
    done: &(PendingRequest, Vec<PartAnswer>, HashMap<u64, RecordsSource>),
    correlation_id: u64,
) {
    match &done.1[0] {
        PartAnswer::Core(core::Message::FetchResponse(r)) => {
            assert_eq!(r.correlation_id, correlation_id)
        }
        _ => panic!("the parked fetch's answer"),
    }
}

fn answered_partitions(
    done: &(PendingRequest, Vec<PartAnswer>, HashMap<u64, RecordsSource>),
) -> Vec<i32> {
    done.0.parts.iter().map(|p| p.index).collect()
}

#[test]
fn parked_parts_are_left_out_and_carried_to_the_replica_s_next_fetch() {
    let mut slots = AnswerSlots::default();
    // Fetch 1: partitions 1 (busy) and 2 (idle); both stepped into the core.
    let (r1, stepped, _, _) = register(&mut slots, &[(1, 10), (2, 20)]);
    assert_eq!(stepped, vec![1, 2]);
    // The core answers partition 1 at once and parks 2: the Fetch leaves with 1 only.
    assert_eq!(slots.answer_fetch(answer(1, b"x"), None), Some(r1));
    let done = slots
        .take_complete(r1)
        .expect("complete without the parked part");
    assert_eq!(answered_partitions(&done), vec![1]);

    // Fetch 2 asks 1 anew and 2 unchanged: only 1 is stepped; 2 is carried.
    let (r2, stepped, superseded, carried_from) = register(&mut slots, &[(1, 11), (2, 20)]);
    assert_eq!(stepped, vec![3], "the unchanged ask is not stepped again");
    assert_eq!(
        superseded,
        vec![1],
        "1's answered fetch: nothing left to answer"
    );
    assert!(carried_from.is_empty(), "fetch 1 has left");
    assert!(slots.take_complete(r2).is_none(), "nothing answered yet");
    // The parked fetch of 2 (core id 2) is answered: it fills fetch 2's slot, and the
    // Fetch leaves with 2, leaving 1 (now parked) out.
    assert_eq!(slots.answer_fetch(answer(2, b"y"), None), Some(r2));
    let done = slots.take_complete(r2).expect("complete");
    assert_eq!(answered_partitions(&done), vec![2]);
    assert_first_answers(&done, 2);

    // 1's parked fetch (core id 3) is answered while no Fetch carries it: held.
    assert_eq!(slots.answer_fetch(answer(3, b"z"), None), None);
    // Fetch 3 asks 1 unchanged: not stepped, answered from what was held.
    let (r3, stepped, _, _) = register(&mut slots, &[(1, 11), (2, 21)]);
    assert_eq!(stepped, vec![6], "only 2's new ask");
    let done = slots.take_complete(r3).expect("the held answer is ready");
    assert_eq!(
        answered_partitions(&done),
        vec![1],
        "2's new fetch left out (parked)"
    );

    // Fetch 4 asks 2 differently from its parked fetch (core id 6): stepped, and the
    // parked one is superseded (the core drops it).
    let (_r4, stepped, superseded, _) = register(&mut slots, &[(1, 12), (2, 22)]);
    assert_eq!(stepped, vec![7, 8]);
    assert_eq!(superseded, vec![3, 6]);
    // The superseded fetch's late answer goes nowhere.
    assert_eq!(slots.answer_fetch(answer(6, b""), None), None);
    assert!(slots.held.is_empty() && !slots.any_carried());
}

#[test]
fn an_earlier_fetch_whose_parts_are_carried_away_leaves_empty() {
    let mut slots = AnswerSlots::default();
    let (r1, _, _, _) = register(&mut slots, &[(1, 10), (2, 20)]);
    assert!(slots.take_complete(r1).is_none(), "both parked");
    // The replica's next Fetch asks the same: both carried to it, the first leaves empty.
    let (r2, stepped, _, carried_from) = register(&mut slots, &[(1, 10), (2, 20)]);
    assert!(stepped.is_empty());
    assert_eq!(carried_from, vec![r1, r1]);
    let done = slots.take_complete(r1).expect("nothing left to wait for");
    assert!(answered_partitions(&done).is_empty());
    assert_eq!(slots.answer_fetch(answer(2, b"y"), None), Some(r2));
    let done = slots.take_complete(r2).expect("complete");
    assert_eq!(answered_partitions(&done), vec![2]);
}

#[test]
fn a_parked_fetch_is_carried_whatever_the_next_fetch_s_wait() {
    let mut slots = AnswerSlots::default();
    let (r1, _, _, _) = register(&mut slots, &[(1, 10), (2, 20)]);
    assert!(slots.take_complete(r1).is_none(), "both parked");
    // The replica's next Fetch adds partition 3's first fetch to a new leader, which does
    // not long-poll: the whole Fetch says MaxWaitMs 0. 1 and 2 ask what they asked.
    let (r2, stepped, superseded, carried_from) =
        register_waiting(&mut slots, &[(1, 10), (2, 20), (3, 0)], 0);
    assert_eq!(stepped, vec![5], "only 3 is stepped");
    assert!(
        superseded.is_empty(),
        "the parked fetches are not answered REQUEST_TIMED_OUT"
    );
    assert_eq!(carried_from, vec![r1, r1]);
    assert_eq!(slots.answer_fetch(answer(5, b""), None), Some(r2));
    let done = slots.take_complete(r2).expect("3's answer");
    assert_eq!(answered_partitions(&done), vec![3]);
    assert!(slots.is_carried(1) && slots.is_carried(2), "still parked");
}

#[test]
fn a_forgotten_partition_leaves_nothing_carried_or_held() {
    let mut slots = AnswerSlots::default();
    let (r1, _, _, _) = register(&mut slots, &[(1, 10), (2, 20)]);
    slots.answer_fetch(answer(1, b"x"), None);
    slots.take_complete(r1).expect("complete");
    assert!(slots.is_carried(2));
    slots.answer_fetch(answer(2, b""), None);
    assert!(slots.held.contains_key(&2));
    slots.forget_partition(2, ErrorCode::NotLeaderOrFollower);
    assert!(slots.held.is_empty() && !slots.any_carried() && slots.asks.is_empty());
}

#[test]
fn an_incremental_fetch_carries_the_session_s_parked_fetches_it_does_not_name() {
    let mut slots = AnswerSlots::default();
    // The full Fetch that opens the session: 1 and 2 parked.
    let (r1, stepped, _, _) = register_in_session(&mut slots, &[(1, 10), (2, 20)], false);
    assert_eq!(stepped, vec![1, 2]);
    assert!(slots.take_complete(r1).is_none(), "both parked");
    // An incremental Fetch naming nothing (nothing changed): it carries the session now, and
    // the one before it leaves empty, its parked parts carried by the session.
    let (r2, stepped, superseded, carried_from) = register_in_session(&mut slots, &[], true);
    assert!(stepped.is_empty() && superseded.is_empty());
    assert_eq!(carried_from, vec![r1]);
    let done = slots.take_complete(r1).expect("released");
    assert!(answered_partitions(&done).is_empty());
    assert!(
        slots.take_complete(r2).is_none(),
        "a carrier with no part of its own waits for an answer"
    );
    // 2's parked fetch is answered: it joins the carrier, which leaves with it.
    assert_eq!(slots.answer_fetch(answer(2, b"y"), None), Some(r2));
    let done = slots.take_complete(r2).expect("complete");
    assert_eq!(answered_partitions(&done), vec![2]);
    assert_first_answers(&done, 2);
    // 1's answer comes while no Fetch of the session waits: held, and the session's next
    // Fetch, which names 2's new ask only, takes it.
    assert_eq!(slots.answer_fetch(answer(1, b"x"), None), None);
    let (r3, stepped, superseded, _) = register_in_session(&mut slots, &[(2, 21)], true);
    assert_eq!(stepped, vec![3], "only the named part is stepped");
    assert_eq!(superseded, vec![2], "2's answered fetch");
    let done = slots.take_complete(r3).expect("the held answer is ready");
    assert_eq!(
        answered_partitions(&done),
        vec![1],
        "2's new fetch is parked, left out"
    );
    assert!(slots.is_carried(3));
}

#[test]
fn a_forgotten_or_stale_session_part_is_not_answered() {
    let mut slots = AnswerSlots::default();
    let (r1, _, _, _) = register_in_session(&mut slots, &[(1, 10), (2, 20)], false);
    let (r2, _, _, _) = register_in_session(&mut slots, &[], true);
    slots.take_complete(r1).expect("released");
    // The replica forgets 2 (it fetches it elsewhere now): its answer goes nowhere.
    slots.forget_session_parts(REPLICA, &[2]);
    assert_eq!(slots.answer_fetch(answer(2, b"y"), None), None);
    assert!(slots.held.is_empty());
    // A full Fetch opens a new session without 1: 1's carried fetch belongs to no Fetch of
    // the replica any more, and its answer is dropped rather than held for good.
    let (r3, _, _, carried_from) = register_in(
        &mut slots,
        &[(3, 30)],
        500,
        Some(FetchCarrier {
            replica: REPLICA,
            session_id: 8,
            incremental: false,
        }),
    );
    assert_eq!(carried_from, vec![r2]);
    assert!(slots.take_complete(r2).is_some());
    assert_eq!(slots.answer_fetch(answer(1, b"x"), None), None);
    assert!(slots.held.is_empty() && !slots.any_carried());
    assert!(slots.take_complete(r3).is_none(), "3 is parked");
}

#[test]
fn an_empty_carrier_leaves_when_it_expires() {
    let mut slots = AnswerSlots::default();
    let (r1, _, _, _) = register_in_session(&mut slots, &[], false);
    assert!(slots.take_complete(r1).is_none());
    assert_eq!(slots.expire(3_000, 2_500), vec![r1]);
    let done = slots.take_complete(r1).expect("expired");
    assert!(answered_partitions(&done).is_empty());
}
