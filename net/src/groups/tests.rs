//! The classic group protocol as stories: each test drives the coordinator with requests and
//! `tick`s at chosen times and checks the exact answers it emits (Kafka's
//! `GroupCoordinatorTest` cases, in our vocabulary).
//!
//! Long because each story spells out its requests and expected answers in full; they share
//! the fixtures at the top and split by API below.

use bytes::Bytes;

use super::group::{GroupState, TRANSITIONS, subscription_topics, transition_allowed};
use super::*;
use crate::protocol::ErrorCode;

const SESSION_MS: u64 = 10_000;
const REBALANCE_MS: u64 = 30_000;

fn config(initial_delay_ms: u64) -> GroupConfig {
    GroupConfig {
        initial_rebalance_delay_ms: initial_delay_ms,
        ..GroupConfig::default()
    }
}

fn request(member_id: &str, protocols: &[(&str, &str)]) -> JoinRequest {
    JoinRequest {
        group_id: "g".into(),
        member_id: member_id.into(),
        group_instance_id: None,
        client_id: "client".into(),
        client_host: "/127.0.0.1".into(),
        session_timeout_ms: SESSION_MS,
        rebalance_timeout_ms: REBALANCE_MS,
        protocol_type: "consumer".into(),
        protocols: protocols
            .iter()
            .map(|(n, m)| (n.to_string(), Bytes::copy_from_slice(m.as_bytes())))
            .collect(),
        require_known_member_id: false,
    }
}

fn range() -> Vec<(&'static str, &'static str)> {
    vec![("range", "sub")]
}

/// Joins and expects exactly one answer for `token` (pushed now), returning it.
fn join_now(c: &mut Coordinator, now: u64, token: u64, r: JoinRequest) -> JoinResult {
    let mut out = Outbox::new();
    c.join(now, 0, ReplyToken(token), r, &mut out);
    match out.as_slice() {
        [(t, Reply::Join(result))] if *t == ReplyToken(token) => result.clone(),
        other => panic!("expected one JoinGroup answer, got {other:?}"),
    }
}

fn joins(out: &Outbox) -> Vec<(u64, JoinResult)> {
    out.iter()
        .filter_map(|(t, r)| match r {
            Reply::Join(j) => Some((t.0, j.clone())),
            Reply::Sync(_) => None,
        })
        .collect()
}

/// The one JoinGroup answer in `out`, which must be for `token`.
fn only_join(out: &Outbox, token: u64) -> JoinResult {
    match joins(out).as_slice() {
        [(t, result)] if *t == token => result.clone(),
        other => panic!("expected one JoinGroup answer for {token}, got {other:?}"),
    }
}

fn syncs(out: &Outbox) -> Vec<(u64, SyncResult)> {
    out.iter()
        .filter_map(|(t, r)| match r {
            Reply::Sync(s) => Some((t.0, s.clone())),
            Reply::Join(_) => None,
        })
        .collect()
}

fn sync_request(member_id: &str, generation_id: i32, assignments: &[(&str, &str)]) -> SyncRequest {
    SyncRequest {
        group_id: "g".into(),
        member_id: member_id.into(),
        generation_id,
        assignments: assignments
            .iter()
            .map(|(m, a)| (m.to_string(), Bytes::copy_from_slice(a.as_bytes())))
            .collect(),
        ..SyncRequest::default()
    }
}

fn state(c: &Coordinator) -> Option<GroupState> {
    c.describe("g").map(|d| d.state)
}

/// A one-member group, Stable in generation 1 (initial delay 0): returns its member id.
fn stable_single(c: &mut Coordinator) -> String {
    let mut out = Outbox::new();
    c.join(0, 0, ReplyToken(1), request("", &range()), &mut out);
    assert!(
        out.is_empty(),
        "the first join phase waits for the initial delay"
    );
    c.tick(0, &mut out);
    let (_, joined) = joins(&out).pop().expect("answered at the delay's end");
    out.clear();
    c.sync(
        0,
        ReplyToken(2),
        sync_request(&joined.member_id, 1, &[(&joined.member_id, "A")]),
        &mut out,
    );
    assert_eq!(state(c), Some(GroupState::Stable));
    joined.member_id
}

#[test]
fn the_transition_table_is_kafkas_and_every_pair_is_decided() {
    // Every state appears once as a target; Dead only as a target.
    for s in GroupState::ALL {
        assert_eq!(
            TRANSITIONS.iter().filter(|(t, _)| *t == s).count(),
            1,
            "{s:?}"
        );
    }
    let allowed: Vec<(GroupState, GroupState)> = GroupState::ALL
        .into_iter()
        .flat_map(|from| GroupState::ALL.into_iter().map(move |to| (from, to)))
        .filter(|(from, to)| transition_allowed(*from, *to))
        .collect();
    use GroupState::*;
    assert_eq!(
        allowed,
        vec![
            (Empty, PreparingRebalance),
            (Empty, Dead),
            (PreparingRebalance, Empty),
            (PreparingRebalance, CompletingRebalance),
            (PreparingRebalance, Dead),
            (CompletingRebalance, PreparingRebalance),
            (CompletingRebalance, Stable),
            (CompletingRebalance, Dead),
            (Stable, PreparingRebalance),
            (Stable, Dead),
            (Dead, Dead),
        ]
    );
    for s in GroupState::ALL {
        assert_eq!(GroupState::parse(&s.name().to_lowercase()), Some(s));
    }
}

/// KIP-394: a new member first gets its id with MEMBER_ID_REQUIRED; it is a member only once
/// it joins with that id. Then the initial delay holds the first join phase, and the only
/// member leads generation 1 with its own subscription.
#[test]
fn a_new_member_gets_its_id_first_then_leads_the_first_generation() {
    let mut c = Coordinator::new(config(100), 7);
    let mut first = request("", &range());
    first.require_known_member_id = true;
    let answer = join_now(&mut c, 0, 1, first);
    assert_eq!(answer.error, ErrorCode::MemberIdRequired);
    assert!(
        answer.member_id.starts_with("client-"),
        "{}",
        answer.member_id
    );
    assert_eq!(state(&c), Some(GroupState::Empty), "a pending member only");

    let mut out = Outbox::new();
    c.join(
        5,
        0,
        ReplyToken(2),
        request(&answer.member_id, &range()),
        &mut out,
    );
    assert!(out.is_empty());
    assert_eq!(state(&c), Some(GroupState::PreparingRebalance));
    assert_eq!(
        c.next_deadline_ms(),
        105,
        "group.initial.rebalance.delay.ms"
    );
    c.tick(104, &mut out);
    assert!(out.is_empty());
    c.tick(105, &mut out);
    let joined = only_join(&out, 2);
    assert_eq!(joined.error, ErrorCode::None);
    assert_eq!(joined.generation_id, 1);
    assert_eq!(joined.leader, answer.member_id);
    assert_eq!(joined.protocol_name.as_deref(), Some("range"));
    assert_eq!(joined.members.len(), 1);
    assert_eq!(joined.members[0].metadata, Bytes::from_static(b"sub"));
    assert_eq!(state(&c), Some(GroupState::CompletingRebalance));
}

/// Kafka's InitialDelayedJoin: a member arriving during the delay extends it once more (within
/// the rebalance timeout), and both are assigned in one generation.
#[test]
fn members_joining_during_the_initial_delay_share_one_rebalance() {
    let mut c = Coordinator::new(config(3_000), 1);
    let mut out = Outbox::new();
    c.join(0, 0, ReplyToken(1), request("", &range()), &mut out);
    c.join(1_000, 0, ReplyToken(2), request("", &range()), &mut out);
    c.tick(3_000, &mut out);
    assert!(out.is_empty(), "a new member arrived: the delay runs again");
    c.tick(6_000, &mut out);
    let answers = joins(&out);
    assert_eq!(answers.len(), 2);
    let leader = answers
        .iter()
        .find(|(_, j)| j.leader == j.member_id)
        .unwrap();
    let follower = answers
        .iter()
        .find(|(_, j)| j.leader != j.member_id)
        .unwrap();
    assert_eq!(
        leader.1.members.len(),
        2,
        "the leader sees every subscription"
    );
    assert!(follower.1.members.is_empty());
    assert_eq!(leader.1.generation_id, 1);
    assert_eq!(follower.1.generation_id, 1);

    // The follower's SyncGroup waits for the leader's, which hands out both assignments.
    out.clear();
    let (l, f) = (leader.1.member_id.clone(), follower.1.member_id.clone());
    c.sync(6_010, ReplyToken(3), sync_request(&f, 1, &[]), &mut out);
    assert!(out.is_empty());
    c.sync(
        6_020,
        ReplyToken(4),
        sync_request(&l, 1, &[(&l, "L"), (&f, "F")]),
        &mut out,
    );
    let mut answers = syncs(&out);
    answers.sort_by_key(|(t, _)| *t);
    assert_eq!(answers[0].1.assignment, Bytes::from_static(b"F"));
    assert_eq!(answers[1].1.assignment, Bytes::from_static(b"L"));
    assert!(answers.iter().all(|(_, s)| s.error == ErrorCode::None));
    assert_eq!(state(&c), Some(GroupState::Stable));
    assert_eq!(c.heartbeat(6_030, "g", &f, 1, None), ErrorCode::None);
    assert_eq!(
        c.heartbeat(6_030, "g", &f, 0, None),
        ErrorCode::IllegalGeneration
    );
    assert_eq!(
        c.heartbeat(6_030, "g", "nobody", 1, None),
        ErrorCode::UnknownMemberId
    );
}

/// A member joining a Stable group starts a rebalance: the others learn it from their
/// heartbeat (REBALANCE_IN_PROGRESS) and rejoin; the phase completes when all did.
#[test]
fn a_new_member_rebalances_a_stable_group_and_heartbeats_say_so() {
    let mut c = Coordinator::new(config(0), 1);
    let a = stable_single(&mut c);
    let mut out = Outbox::new();
    c.join(100, 0, ReplyToken(10), request("", &range()), &mut out);
    assert!(out.is_empty());
    assert_eq!(state(&c), Some(GroupState::PreparingRebalance));
    assert_eq!(
        c.heartbeat(200, "g", &a, 1, None),
        ErrorCode::RebalanceInProgress
    );
    c.join(300, 0, ReplyToken(11), request(&a, &range()), &mut out);
    let answers = joins(&out);
    assert_eq!(
        answers.len(),
        2,
        "complete once everyone rejoined, before the deadline"
    );
    assert!(answers.iter().all(|(_, j)| j.generation_id == 2));
    assert!(
        answers
            .iter()
            .any(|(t, j)| *t == 11 && j.leader == a && j.members.len() == 2)
    );
}

/// A member that stops heartbeating is removed at its session timeout, and the group
/// rebalances without it; the last one leaving empties the group (dropped from memory).
#[test]
fn a_silent_member_is_expired_and_the_last_leave_empties_the_group() {
    let mut c = Coordinator::new(config(0), 1);
    let mut out = Outbox::new();
    c.join(0, 0, ReplyToken(1), request("", &range()), &mut out);
    c.join(0, 0, ReplyToken(2), request("", &range()), &mut out);
    c.tick(0, &mut out);
    let answers = joins(&out);
    let leader = answers[0].1.leader.clone();
    let follower = answers
        .iter()
        .map(|(_, j)| j.member_id.clone())
        .find(|m| *m != leader)
        .unwrap();
    out.clear();
    c.sync(0, ReplyToken(3), sync_request(&leader, 1, &[]), &mut out);
    c.sync(0, ReplyToken(4), sync_request(&follower, 1, &[]), &mut out);
    // The follower heartbeats; the leader goes silent.
    for t in (3_000..=9_000).step_by(3_000) {
        assert_eq!(c.heartbeat(t, "g", &follower, 1, None), ErrorCode::None);
    }
    c.tick(SESSION_MS - 1, &mut out);
    assert_eq!(state(&c), Some(GroupState::Stable));
    c.tick(SESSION_MS, &mut out);
    assert_eq!(
        state(&c),
        Some(GroupState::PreparingRebalance),
        "the leader's session ended"
    );
    assert_eq!(
        c.heartbeat(SESSION_MS + 1, "g", &leader, 1, None),
        ErrorCode::UnknownMemberId
    );
    out.clear();
    c.join(
        SESSION_MS + 2,
        0,
        ReplyToken(5),
        request(&follower, &range()),
        &mut out,
    );
    let joined = only_join(&out, 5);
    assert_eq!(
        (joined.generation_id, joined.leader.as_str()),
        (2, follower.as_str())
    );

    out.clear();
    let left = c.leave(
        SESSION_MS + 3,
        "g",
        &[LeavingMember {
            member_id: follower,
            group_instance_id: None,
        }],
        &mut out,
    );
    assert_eq!(left, Ok(vec![ErrorCode::None]));
    assert_eq!(
        state(&c),
        None,
        "Empty and memberless: only its offsets keep it"
    );
    assert_eq!(c.next_deadline_ms(), u64::MAX);
}

/// The join deadline (rebalance timeout): a member that never rejoins is dropped and the
/// others get the next generation without it.
#[test]
fn a_member_that_does_not_rejoin_is_dropped_at_the_rebalance_timeout() {
    let mut c = Coordinator::new(config(0), 1);
    let a = stable_single(&mut c);
    let mut out = Outbox::new();
    // A second member joins; A keeps heartbeating (its session stays alive) but never rejoins.
    c.join(10, 0, ReplyToken(20), request("", &range()), &mut out);
    for t in (20..10 + REBALANCE_MS).step_by(3_000) {
        c.tick(t, &mut out);
        assert_eq!(
            c.heartbeat(t, "g", &a, 1, None),
            ErrorCode::RebalanceInProgress
        );
    }
    c.tick(10 + REBALANCE_MS - 1, &mut out);
    assert!(out.is_empty());
    c.tick(10 + REBALANCE_MS, &mut out);
    let joined = only_join(&out, 20);
    assert_eq!(joined.generation_id, 2);
    assert_eq!(joined.leader, joined.member_id, "the newcomer leads now");
    assert_eq!(
        c.heartbeat(10 + REBALANCE_MS, "g", &a, 1, None),
        ErrorCode::UnknownMemberId
    );
}

/// After a join phase every member must send SyncGroup within the rebalance timeout; one that
/// never does is dropped and the group rebalances (Kafka's pending sync).
#[test]
fn a_member_that_never_syncs_is_dropped() {
    let mut c = Coordinator::new(config(0), 1);
    let mut out = Outbox::new();
    c.join(0, 0, ReplyToken(1), request("", &range()), &mut out);
    c.join(0, 0, ReplyToken(2), request("", &range()), &mut out);
    c.tick(0, &mut out);
    let answers = joins(&out);
    let leader = answers[0].1.leader.clone();
    out.clear();
    let follower = answers
        .iter()
        .map(|(_, j)| j.member_id.clone())
        .find(|m| *m != leader)
        .unwrap();
    c.sync(1, ReplyToken(3), sync_request(&leader, 1, &[]), &mut out);
    assert_eq!(state(&c), Some(GroupState::Stable));
    // Both heartbeat; the follower never sends SyncGroup.
    for t in (1_000..REBALANCE_MS).step_by(3_000) {
        c.tick(t, &mut out);
        assert_eq!(c.heartbeat(t, "g", &leader, 1, None), ErrorCode::None);
        assert_eq!(c.heartbeat(t, "g", &follower, 1, None), ErrorCode::None);
    }
    assert_eq!(state(&c), Some(GroupState::Stable));
    c.tick(REBALANCE_MS, &mut out);
    assert_eq!(state(&c), Some(GroupState::PreparingRebalance));
    assert_eq!(
        c.describe("g").unwrap().members.len(),
        1,
        "the follower is gone"
    );
}

/// KIP-345: a static member that restarts (no member id, same instance id) within its
/// session takes a new member id without a rebalance and gets its old assignment; its old id
/// is fenced.
#[test]
fn a_restarted_static_member_keeps_its_assignment_without_a_rebalance() {
    let mut c = Coordinator::new(config(0), 1);
    let mut out = Outbox::new();
    let mut r = request("", &range());
    r.group_instance_id = Some("instance-1".into());
    c.join(0, 0, ReplyToken(1), r.clone(), &mut out);
    c.tick(0, &mut out);
    let old = joins(&out)[0].1.member_id.clone();
    out.clear();
    c.sync(
        0,
        ReplyToken(2),
        sync_request(&old, 1, &[(&old, "mine")]),
        &mut out,
    );

    out.clear();
    c.join(1_000, 0, ReplyToken(3), r, &mut out);
    let joined = only_join(&out, 3);
    assert_eq!(joined.error, ErrorCode::None);
    assert_ne!(joined.member_id, old);
    assert_eq!(joined.generation_id, 1, "no rebalance");
    assert_eq!(
        joined.leader, old,
        "the old leader id: the restarted leader does not assign"
    );
    assert_eq!(state(&c), Some(GroupState::Stable));
    out.clear();
    c.sync(
        1_001,
        ReplyToken(4),
        sync_request(&joined.member_id, 1, &[]),
        &mut out,
    );
    assert_eq!(syncs(&out)[0].1.assignment, Bytes::from_static(b"mine"));
    assert_eq!(
        c.heartbeat(1_002, "g", &old, 1, Some("instance-1")),
        ErrorCode::FencedInstanceId
    );
    assert_eq!(
        c.validate_offset_commit(1_003, "g", &old, 1, Some("instance-1")),
        Err(ErrorCode::FencedInstanceId)
    );
    // A static member leaves by instance id (the admin's removal).
    let left = c.leave(
        1_004,
        "g",
        &[LeavingMember {
            member_id: String::new(),
            group_instance_id: Some("instance-1".into()),
        }],
        &mut out,
    );
    assert_eq!(left, Ok(vec![ErrorCode::None]));
    assert_eq!(state(&c), None);
}

/// OffsetCommit's group checks (Kafka's doCommitOffsets), case by case.
#[test]
fn offset_commits_are_checked_against_the_generation() {
    let mut c = Coordinator::new(config(0), 1);
    assert_eq!(
        c.validate_offset_commit(0, "g", "", -1, None),
        Ok(()),
        "a simple consumer"
    );
    assert_eq!(
        c.validate_offset_commit(0, "g", "m", 3, None),
        Err(ErrorCode::IllegalGeneration),
        "a generation this coordinator never made"
    );
    let mut out = Outbox::new();
    c.join(0, 0, ReplyToken(1), request("", &range()), &mut out);
    c.tick(0, &mut out);
    let m = joins(&out)[0].1.member_id.clone();
    assert_eq!(
        c.validate_offset_commit(1, "g", &m, 1, None),
        Err(ErrorCode::RebalanceInProgress),
        "joined but not synced"
    );
    c.sync(2, ReplyToken(2), sync_request(&m, 1, &[]), &mut out);
    assert_eq!(c.validate_offset_commit(3, "g", &m, 1, None), Ok(()));
    assert_eq!(
        c.validate_offset_commit(3, "g", &m, 2, None),
        Err(ErrorCode::IllegalGeneration)
    );
    assert_eq!(
        c.validate_offset_commit(3, "g", "x", 1, None),
        Err(ErrorCode::UnknownMemberId)
    );
    assert_eq!(
        c.validate_offset_commit(3, "g", "", -1, None),
        Err(ErrorCode::UnknownMemberId),
        "an admin commit while the group has members"
    );
    // A commit keeps the session alive, like a heartbeat.
    c.tick(SESSION_MS + 2, &mut out);
    assert_eq!(state(&c), Some(GroupState::Stable));
}

/// LeaveGroup of a stranger, DeleteGroups of a group with members, and OffsetDelete's rule:
/// a consumer group with members keeps the offsets of the topics it subscribes to (all of
/// them when its subscription cannot be read).
#[test]
fn leaving_deleting_and_offset_deletion_follow_kafkas_answers() {
    let mut c = Coordinator::new(config(0), 1);
    let mut out = Outbox::new();
    let stranger = LeavingMember {
        member_id: "m".into(),
        group_instance_id: None,
    };
    assert_eq!(
        c.leave(0, "g", std::slice::from_ref(&stranger), &mut out),
        Ok(vec![ErrorCode::UnknownMemberId])
    );
    assert_eq!(
        c.offsets_deletable("g", &["orders"]),
        Ok(vec![true]),
        "no members"
    );
    assert_eq!(
        c.delete_group("g"),
        Ok(false),
        "not in memory: the caller looks at offsets"
    );

    let _unreadable = stable_single(&mut c);
    assert_eq!(c.delete_group("g"), Err(ErrorCode::NonEmptyGroup));
    assert_eq!(c.offsets_deletable("g", &["orders"]), Ok(vec![false]));

    let mut subscription = vec![0, 1, 0, 0, 0, 1, 0, 6];
    subscription.extend_from_slice(b"orders");
    let mut c = Coordinator::new(config(0), 1);
    let mut r = request("", &[]);
    r.protocols = vec![("range".into(), Bytes::from(subscription))];
    c.join(0, 0, ReplyToken(1), r, &mut out);
    c.tick(0, &mut out);
    assert_eq!(
        c.offsets_deletable("g", &["orders", "other"]),
        Ok(vec![false, true])
    );
}

/// The coordinator moves away (this node lost the `__consumer_offsets` partition): every
/// request it holds is answered NOT_COORDINATOR and its groups leave memory.
#[test]
fn unloading_a_partition_answers_every_waiting_request() {
    let mut c = Coordinator::new(config(5_000), 1);
    let mut out = Outbox::new();
    c.join(0, 0, ReplyToken(1), request("", &range()), &mut out);
    assert!(out.is_empty());
    c.unload_partition(1, ErrorCode::NotCoordinator, &mut out);
    assert!(out.is_empty(), "another partition's groups stay");
    c.unload_partition(0, ErrorCode::NotCoordinator, &mut out);
    let answer = only_join(&out, 1);
    assert_eq!(answer.error, ErrorCode::NotCoordinator);
    assert_eq!(state(&c), None);
    assert_eq!(c.next_deadline_ms(), u64::MAX);
}

/// Kafka's selectProtocol: the protocols every member supports, each member voting for its
/// first choice among them.
#[test]
fn the_protocol_is_the_most_preferred_common_one() {
    let mut c = Coordinator::new(config(0), 1);
    let mut out = Outbox::new();
    c.join(
        0,
        0,
        ReplyToken(1),
        request("", &[("sticky", "1"), ("range", "1")]),
        &mut out,
    );
    c.join(
        0,
        0,
        ReplyToken(2),
        request("", &[("range", "2"), ("sticky", "2")]),
        &mut out,
    );
    c.join(
        0,
        0,
        ReplyToken(3),
        request("", &[("range", "3"), ("roundrobin", "3")]),
        &mut out,
    );
    c.tick(0, &mut out);
    assert!(
        joins(&out)
            .iter()
            .all(|(_, j)| j.protocol_name.as_deref() == Some("range"))
    );
    // A member with no protocol in common is refused.
    let mut fresh = Coordinator::new(config(0), 1);
    let mut out = Outbox::new();
    fresh.join(0, 0, ReplyToken(1), request("", &[("range", "")]), &mut out);
    let refused = join_now(&mut fresh, 0, 2, request("", &[("roundrobin", "")]));
    assert_eq!(refused.error, ErrorCode::InconsistentGroupProtocol);
}

#[test]
fn join_requests_are_validated_first() {
    let mut c = Coordinator::new(config(0), 1);
    let mut r = request("", &range());
    r.session_timeout_ms = 10;
    assert_eq!(
        join_now(&mut c, 0, 1, r).error,
        ErrorCode::InvalidSessionTimeout
    );
    let mut r = request("", &range());
    r.group_id.clear();
    assert_eq!(join_now(&mut c, 0, 2, r).error, ErrorCode::InvalidGroupId);
    assert_eq!(
        join_now(&mut c, 0, 3, request("", &[])).error,
        ErrorCode::InconsistentGroupProtocol
    );
    assert_eq!(
        join_now(&mut c, 0, 4, request("ghost", &range())).error,
        ErrorCode::UnknownMemberId
    );
    assert_eq!(state(&c), None, "failed joins leave no group behind");
}

#[test]
fn a_subscription_is_read_within_its_bytes() {
    let mut sub = vec![0, 1, 0, 0, 0, 2];
    for topic in ["orders", "payments"] {
        sub.extend_from_slice(&(topic.len() as i16).to_be_bytes());
        sub.extend_from_slice(topic.as_bytes());
    }
    sub.extend_from_slice(&[0, 0, 0, 0]); // user data, then later versions' fields
    assert_eq!(
        subscription_topics(&sub),
        Some(vec!["orders".to_string(), "payments".to_string()])
    );
    assert_eq!(
        subscription_topics(&[0, 1, 0x7f, 0xff, 0xff, 0xff]),
        None,
        "a lying count"
    );
    assert_eq!(subscription_topics(&sub[..9]), None, "cut short");
}

/// KIP-394: a member id handed out with MEMBER_ID_REQUIRED and never used holds a join phase
/// up only until its session timeout; then the phase completes without it.
#[test]
fn an_unused_member_id_stops_holding_the_join_phase_at_its_session_timeout() {
    let mut c = Coordinator::new(config(0), 1);
    let a = stable_single(&mut c);
    let mut fresh = request("", &range());
    fresh.require_known_member_id = true;
    let pending = join_now(&mut c, 10, 5, fresh);
    assert_eq!(pending.error, ErrorCode::MemberIdRequired);
    // A rejoins (it leads: a rebalance); the phase waits for the pending member.
    let mut out = Outbox::new();
    c.join(20, 0, ReplyToken(6), request(&a, &range()), &mut out);
    assert!(out.is_empty(), "waits for the member id it handed out");
    c.tick(10 + SESSION_MS - 1, &mut out);
    assert!(out.is_empty());
    c.tick(10 + SESSION_MS, &mut out);
    let joined = only_join(&out, 6);
    assert_eq!((joined.generation_id, joined.members.len()), (2, 1));
}

/// A member's second JoinGroup while the first still waits (its client gave up on it) gets the
/// first one answered at once: a connection's answers leave in order, so it must not hang.
#[test]
fn a_repeated_join_answers_the_abandoned_one() {
    let mut c = Coordinator::new(config(0), 1);
    let mut out = Outbox::new();
    c.join(0, 0, ReplyToken(1), request("", &range()), &mut out);
    c.join(0, 0, ReplyToken(2), request("", &range()), &mut out);
    c.tick(0, &mut out);
    let answers = joins(&out);
    let leader = answers[0].1.leader.clone();
    let follower = answers
        .iter()
        .map(|(_, j)| j.member_id.clone())
        .find(|m| *m != leader)
        .unwrap();
    c.sync(1, ReplyToken(3), sync_request(&leader, 1, &[]), &mut out);
    c.sync(1, ReplyToken(4), sync_request(&follower, 1, &[]), &mut out);
    assert_eq!(state(&c), Some(GroupState::Stable));
    out.clear();
    // The leader asks for a new assignment; the other member has not rejoined yet.
    c.join(10, 0, ReplyToken(8), request(&leader, &range()), &mut out);
    assert!(out.is_empty(), "the join phase waits for the other member");
    c.join(20, 0, ReplyToken(9), request(&leader, &range()), &mut out);
    let answers = joins(&out);
    assert_eq!(answers.len(), 1, "{answers:?}");
    assert_eq!(
        (answers[0].0, answers[0].1.error),
        (8, ErrorCode::RebalanceInProgress)
    );
}

/// Hostile timeouts: static members with a rebalance timeout of 0 that stop answering. A
/// rebalance then waits for their sessions (never a deadline that is due again at once while
/// nothing can change), every tick ends, and the group settles once the sessions are over.
#[test]
fn zero_rebalance_timeouts_never_make_a_tick_spin() {
    let mut c = Coordinator::new(config(0), 1);
    let mut out = Outbox::new();
    for (token, instance) in [(1, "a"), (2, "b")] {
        let mut r = request("", &range());
        r.group_instance_id = Some(instance.into());
        r.rebalance_timeout_ms = 0;
        c.join(0, 0, ReplyToken(token), r, &mut out);
    }
    c.tick(0, &mut out);
    let answers = joins(&out);
    let leader = answers[0].1.leader.clone();
    for (token, member) in answers.iter().map(|(t, j)| (*t, j.member_id.clone())) {
        c.sync(
            1,
            ReplyToken(token + 10),
            sync_request(&member, 1, &[]),
            &mut out,
        );
    }
    assert_eq!(state(&c), Some(GroupState::Stable), "led by {leader}");
    // A dynamic member comes and goes: a rebalance that neither static member joins.
    out.clear();
    let mut newcomer = request("", &range());
    newcomer.rebalance_timeout_ms = 0;
    c.join(2, 0, ReplyToken(3), newcomer, &mut out);
    let dynamic = c
        .describe("g")
        .unwrap()
        .members
        .into_iter()
        .find(|m| m.group_instance_id.is_none())
        .unwrap()
        .member_id;
    let leaving = LeavingMember {
        member_id: dynamic,
        group_instance_id: None,
    };
    assert_eq!(
        c.leave(2, "g", &[leaving], &mut out),
        Ok(vec![ErrorCode::None])
    );
    assert_eq!(state(&c), Some(GroupState::PreparingRebalance));
    // The node's loop: tick, then sleep until the next deadline (time stands still when a
    // deadline is due at once): a few zero-timeout steps, never a spin.
    let (mut now, mut ticks) = (2, 0);
    while now < 3 * SESSION_MS {
        c.tick(now, &mut out);
        ticks += 1;
        assert!(ticks < 100, "the coordinator spins at {now}");
        now = c.next_deadline_ms().clamp(now, 3 * SESSION_MS);
    }
    assert_eq!(state(&c), None, "both sessions ended: the group emptied");
}

/// Group metadata records: a Stable group's record (generation, protocol, leader, members
/// with their assignment) restores the group at another coordinator, which accepts the
/// member's heartbeat and commit of that generation and describes it the same way; when the
/// member leaves, the record of the emptied group says when, and restoring that is remembered
/// for offset expiry. A member that never comes back to the new coordinator is expired at its
/// session timeout, as any member.
#[test]
fn a_group_metadata_record_restores_the_group_at_a_new_coordinator() {
    let mut old = Coordinator::new(config(0), 1);
    let member_id = stable_single(&mut old);
    assert_eq!(old.take_dirty(), ["g"]);
    let (partition, record) = old.group_metadata("g", 0, 1_000_000).expect("Stable");
    assert_eq!(partition, 0);
    assert_eq!(record.generation_id, 1);
    assert_eq!(record.leader.as_deref(), Some(member_id.as_str()));
    assert_eq!(record.members.len(), 1);
    assert_eq!(record.members[0].assignment, Bytes::from_static(b"A"));

    let mut new = Coordinator::new(config(0), 2);
    new.restore_group(0, "g", &record, 100, 1_000_100);
    assert_eq!(state(&new), Some(GroupState::Stable));
    assert_eq!(new.describe("g"), old.describe("g"));
    assert_eq!(
        new.heartbeat(200, "g", &member_id, 1, None),
        ErrorCode::None
    );
    assert_eq!(
        new.validate_offset_commit(300, "g", &member_id, 1, None),
        Ok(())
    );
    let mut out = Outbox::new();
    new.leave(
        400,
        "g",
        &[LeavingMember {
            member_id: member_id.clone(),
            group_instance_id: None,
        }],
        &mut out,
    )
    .unwrap();
    assert_eq!(state(&new), None, "an empty group leaves memory");
    let (_, emptied) = new.group_metadata("g", 400, 2_000_000).expect("emptied");
    assert!(emptied.members.is_empty());
    assert_eq!(emptied.current_state_timestamp_ms, 2_000_000);
    assert_eq!(emptied.protocol_type, "consumer");

    // A third coordinator learns when it emptied (5 s before its wall clock).
    let mut third = Coordinator::new(config(0), 3);
    third.restore_group(0, "g", &emptied, 50_000, 2_005_000);
    assert_eq!(third.emptied_at_ms("g"), Some(45_000));

    // Restored members that never return are expired with their session.
    let mut fourth = Coordinator::new(config(0), 4);
    fourth.restore_group(0, "g", &record, 1_000, 1_001_000);
    let mut out = Outbox::new();
    fourth.tick(1_000 + SESSION_MS, &mut out);
    assert_eq!(
        state(&fourth),
        None,
        "the silent member expired and the group emptied"
    );
}
