//! The join phase of the classic protocol: JoinGroup (new members, known members, static
//! members replacing their old id), the rebalance it starts, and its completion, which hands
//! every waiting member the new generation. Kafka's `GroupCoordinator.handleJoinGroup`,
//! `prepareRebalance` and `onCompleteJoin`, with the same outcomes.

use bytes::Bytes;

use super::coordinator::Coordinator;
use super::group::{Group, GroupState, InitialDelay, Member, subscription_topics};
use super::{
    JoinRequest, JoinResult, JoinedMember, NEW_MEMBER_JOIN_TIMEOUT_MS, Outbox, Reply, ReplyToken,
    SyncResult,
};
use crate::protocol::ErrorCode;

impl Coordinator {
    /// JoinGroup. The answer (now or at the end of the join phase) goes to `token` through
    /// `out`. `partition` is the `__consumer_offsets` partition of the group, which the node
    /// checked it leads.
    pub fn join(
        &mut self,
        now_ms: u64,
        partition: i32,
        token: ReplyToken,
        request: JoinRequest,
        out: &mut Outbox,
    ) {
        self.observe_clock(now_ms);
        let fail = |out: &mut Outbox, error| {
            out.push((
                token,
                Reply::Join(JoinResult::error(error, &request.member_id)),
            ))
        };
        if request.group_id.is_empty() {
            return fail(out, ErrorCode::InvalidGroupId);
        }
        if request.session_timeout_ms < self.config.min_session_timeout_ms
            || request.session_timeout_ms > self.config.max_session_timeout_ms
        {
            return fail(out, ErrorCode::InvalidSessionTimeout);
        }
        if request.protocol_type.is_empty() || request.protocols.is_empty() {
            return fail(out, ErrorCode::InconsistentGroupProtocol);
        }
        let group_id = request.group_id.clone();
        let known_member = !request.member_id.is_empty();
        if !self.groups.contains_key(&group_id) {
            if known_member {
                // Its group is gone (every member left, or the coordinator moved): start over.
                return fail(out, ErrorCode::UnknownMemberId);
            }
            self.groups.insert(
                group_id.clone(),
                Group::new(
                    group_id.clone(),
                    partition,
                    self.config.initial_rebalance_delay_ms,
                ),
            );
        }
        if known_member {
            self.current_member_join(now_ms, token, request, out);
        } else {
            self.new_member_join(now_ms, token, request, out);
        }
        if let Some(group) = self.groups.get_mut(&group_id)
            && group.state == GroupState::PreparingRebalance
        {
            maybe_complete_join(group, now_ms, out);
        }
        self.after_change(&group_id);
    }

    fn new_member_join(
        &mut self,
        now_ms: u64,
        token: ReplyToken,
        request: JoinRequest,
        out: &mut Outbox,
    ) {
        let new_member_id = self.new_member_id(&request.client_id);
        let group = self.groups.get_mut(&request.group_id).expect("created");
        if !group.supports_protocols(&request.protocol_type, &request.protocols) {
            let result = JoinResult::error(ErrorCode::InconsistentGroupProtocol, "");
            return out.push((token, Reply::Join(result)));
        }
        if let Some(instance) = request.group_instance_id.clone() {
            match group.static_members.get(&instance).cloned() {
                Some(old_member_id) => update_static_member_and_rebalance(
                    group,
                    now_ms,
                    token,
                    &instance,
                    &old_member_id,
                    &new_member_id,
                    request,
                    out,
                ),
                None => add_member_and_rebalance(group, now_ms, token, new_member_id, request, out),
            }
        } else if request.require_known_member_id {
            // KIP-394: the id first, so a client whose JoinGroup times out does not leave a
            // member behind at every retry; it is a member once it joins with the id.
            group
                .pending_members
                .insert(new_member_id.clone(), now_ms + request.session_timeout_ms);
            let result = JoinResult::error(ErrorCode::MemberIdRequired, &new_member_id);
            out.push((token, Reply::Join(result)));
        } else {
            add_member_and_rebalance(group, now_ms, token, new_member_id, request, out);
        }
    }

    fn current_member_join(
        &mut self,
        now_ms: u64,
        token: ReplyToken,
        request: JoinRequest,
        out: &mut Outbox,
    ) {
        let group = self.groups.get_mut(&request.group_id).expect("present");
        let member_id = request.member_id.clone();
        let fail = |out: &mut Outbox, error| {
            out.push((token, Reply::Join(JoinResult::error(error, &member_id))))
        };
        if !group.supports_protocols(&request.protocol_type, &request.protocols) {
            return fail(out, ErrorCode::InconsistentGroupProtocol);
        }
        if request.group_instance_id.is_none() && group.pending_members.remove(&member_id).is_some()
        {
            // KIP-394: the member comes back with the id it was given.
            return add_member_and_rebalance(group, now_ms, token, member_id, request, out);
        }
        let instance = request.group_instance_id.as_deref();
        if group.is_static_member_fenced(&member_id, instance) {
            return fail(out, ErrorCode::FencedInstanceId);
        }
        let instance_unknown = instance.is_some_and(|i| !group.static_members.contains_key(i));
        if !group.members.contains_key(&member_id) || instance_unknown {
            return fail(out, ErrorCode::UnknownMemberId);
        }
        let matches = group.members[&member_id].matches(&request.protocols);
        match group.state {
            GroupState::PreparingRebalance => {
                update_member_and_rebalance(group, now_ms, token, request, out)
            }
            GroupState::CompletingRebalance if matches => {
                // The same metadata again (its first answer was lost): the current generation.
                let result = current_generation(group, &member_id, group.is_leader(&member_id));
                out.push((token, Reply::Join(result)));
            }
            GroupState::Stable if matches && !group.is_leader(&member_id) => {
                // A follower with nothing new: the current generation, then SyncGroup.
                let result = current_generation(group, &member_id, false);
                out.push((token, Reply::Join(result)));
            }
            // Changed metadata, or the leader asking for a new assignment: a rebalance.
            GroupState::CompletingRebalance | GroupState::Stable => {
                update_member_and_rebalance(group, now_ms, token, request, out)
            }
            GroupState::Empty | GroupState::Dead => fail(out, ErrorCode::UnknownMemberId),
        }
    }
}

/// The current generation's JoinGroup answer for `member_id` (with the members if `leader`).
fn current_generation(group: &Group, member_id: &str, leader: bool) -> JoinResult {
    JoinResult {
        error: ErrorCode::None,
        generation_id: group.generation_id,
        protocol_type: group.protocol_type.clone(),
        protocol_name: group.protocol_name.clone(),
        leader: group.leader.clone().unwrap_or_default(),
        member_id: member_id.to_string(),
        members: if leader {
            member_list(group)
        } else {
            Vec::new()
        },
    }
}

/// Every member with its metadata for the selected protocol (the leader's JoinGroup answer).
fn member_list(group: &Group) -> Vec<JoinedMember> {
    let protocol = group.protocol_name.as_deref().unwrap_or_default();
    group
        .members
        .values()
        .map(|m| JoinedMember {
            member_id: m.member_id.clone(),
            group_instance_id: m.group_instance_id.clone(),
            metadata: m.metadata(protocol),
        })
        .collect()
}

fn add_member_and_rebalance(
    group: &mut Group,
    now_ms: u64,
    token: ReplyToken,
    member_id: String,
    request: JoinRequest,
    out: &mut Outbox,
) {
    let member = Member {
        member_id,
        group_instance_id: request.group_instance_id,
        client_id: request.client_id,
        client_host: request.client_host,
        rebalance_timeout_ms: request.rebalance_timeout_ms,
        session_timeout_ms: request.session_timeout_ms,
        protocol_type: request.protocol_type,
        protocols: request.protocols,
        assignment: Bytes::new(),
        awaiting_join: Some(token),
        awaiting_sync: None,
        is_new: true,
        // A new member cannot heartbeat before its JoinGroup is answered, and a client that
        // gave up on the request would leave it behind: it gets the new-member timeout.
        heartbeat_deadline_ms: now_ms + NEW_MEMBER_JOIN_TIMEOUT_MS,
    };
    if let Some(delay) = group.initial_delay.as_mut() {
        delay.new_member_added = true;
    }
    group.add_member(member);
    maybe_prepare_rebalance(group, now_ms, out);
}

fn update_member_and_rebalance(
    group: &mut Group,
    now_ms: u64,
    token: ReplyToken,
    request: JoinRequest,
    out: &mut Outbox,
) {
    let member = group
        .members
        .get_mut(&request.member_id)
        .expect("checked by the caller");
    update_member(member, token, request, out);
    maybe_prepare_rebalance(group, now_ms, out);
}

/// A member's new JoinGroup replaces its protocols and timeouts. A JoinGroup it sent before
/// (its client gave up on it) is answered now: the server answers a connection's requests in
/// order, so an unanswered one would hold back every later answer on that connection.
fn update_member(member: &mut Member, token: ReplyToken, request: JoinRequest, out: &mut Outbox) {
    member.protocols = request.protocols;
    member.rebalance_timeout_ms = request.rebalance_timeout_ms;
    member.session_timeout_ms = request.session_timeout_ms;
    member.client_id = request.client_id;
    member.client_host = request.client_host;
    if let Some(old) = member.awaiting_join.replace(token) {
        let result = JoinResult::error(ErrorCode::RebalanceInProgress, &member.member_id);
        out.push((old, Reply::Join(result)));
    }
}

/// KIP-345: a static member rejoins with no member id (its process restarted): it takes a new
/// id and keeps its place. In a Stable group whose protocol choice does not change this is no
/// rebalance: it gets the current generation (with the old leader's id, so a restarted leader
/// does not assign) and its old assignment at SyncGroup.
#[allow(clippy::too_many_arguments)]
fn update_static_member_and_rebalance(
    group: &mut Group,
    now_ms: u64,
    token: ReplyToken,
    instance_id: &str,
    old_member_id: &str,
    new_member_id: &str,
    request: JoinRequest,
    out: &mut Outbox,
) {
    let current_leader = group.leader.clone().unwrap_or_default();
    let (old_join, old_sync) =
        group.replace_static_member(instance_id, old_member_id, new_member_id);
    if let Some(old) = old_join {
        let result = JoinResult::error(ErrorCode::FencedInstanceId, old_member_id);
        out.push((old, Reply::Join(result)));
    }
    if let Some(old) = old_sync {
        out.push((
            old,
            Reply::Sync(SyncResult::error(ErrorCode::FencedInstanceId)),
        ));
    }
    let member = group.members.get_mut(new_member_id).expect("replaced");
    member.heartbeat_deadline_ms = now_ms + request.session_timeout_ms;
    update_member(member, token, request, out);
    match group.state {
        GroupState::Stable => {
            if group.select_protocol() == group.protocol_name {
                let member = group.members.get_mut(new_member_id).expect("replaced");
                let token = member.awaiting_join.take().expect("set just now");
                let mut result = current_generation(group, new_member_id, false);
                result.leader = current_leader;
                out.push((token, Reply::Join(result)));
            } else {
                maybe_prepare_rebalance(group, now_ms, out);
            }
        }
        // The leader may already have assigned to the old id: assign again.
        GroupState::CompletingRebalance => prepare_rebalance(group, now_ms, out),
        GroupState::PreparingRebalance => {}
        // A group with a static member has members, so it is never Empty; should it be, the
        // member starts a rebalance like any newcomer.
        GroupState::Empty | GroupState::Dead => maybe_prepare_rebalance(group, now_ms, out),
    }
}

pub(super) fn maybe_prepare_rebalance(group: &mut Group, now_ms: u64, out: &mut Outbox) {
    if matches!(
        group.state,
        GroupState::Stable | GroupState::CompletingRebalance | GroupState::Empty
    ) {
        prepare_rebalance(group, now_ms, out);
    }
}

/// Starts a join phase. SyncGroups waiting in CompletingRebalance are answered
/// REBALANCE_IN_PROGRESS (their assignment is void) and the members rejoin.
pub(super) fn prepare_rebalance(group: &mut Group, now_ms: u64, out: &mut Outbox) {
    if group.state == GroupState::CompletingRebalance {
        for member in group.members.values_mut() {
            member.assignment = Bytes::new();
            if let Some(token) = member.awaiting_sync.take() {
                let result = SyncResult::error(ErrorCode::RebalanceInProgress);
                out.push((token, Reply::Sync(result)));
            }
        }
    }
    group.pending_sync.clear();
    group.pending_sync_deadline_ms = None;
    let rebalance_timeout_ms = group.rebalance_timeout_ms();
    if group.state == GroupState::Empty {
        // Kafka's InitialDelayedJoin: wait for the other members of a starting group, so
        // they are assigned in one rebalance rather than one rebalance each.
        group.initial_delay = Some(InitialDelay {
            remaining_ms: rebalance_timeout_ms.saturating_sub(group.initial_delay_ms),
            new_member_added: false,
        });
        group.join_deadline_ms = Some(now_ms + group.initial_delay_ms);
    } else {
        group.initial_delay = None;
        group.join_deadline_ms = Some(now_ms + rebalance_timeout_ms);
    }
    group.transition_to(GroupState::PreparingRebalance);
    // Kafka's tryCompleteElseWatch: a phase that everyone already joined (the last member
    // left, or a one-member group's member rejoined) completes at once.
    maybe_complete_join(group, now_ms, out);
}

/// Completes the join phase early once everyone is in (never during the initial delay).
pub(super) fn maybe_complete_join(group: &mut Group, now_ms: u64, out: &mut Outbox) {
    if group.state == GroupState::PreparingRebalance
        && group.initial_delay.is_none()
        && group.all_members_joined()
    {
        complete_join(group, now_ms, out);
    }
}

/// The join deadline passed.
pub(super) fn on_join_deadline(group: &mut Group, now_ms: u64, out: &mut Outbox) {
    group.join_deadline_ms = None;
    if group.state != GroupState::PreparingRebalance {
        return;
    }
    if let Some(delay) = group.initial_delay
        && delay.new_member_added
        && delay.remaining_ms > 0
        && group.initial_delay_ms > 0
    {
        // New members keep arriving: wait once more, within the rebalance timeout.
        let wait_ms = group.initial_delay_ms.min(delay.remaining_ms);
        group.initial_delay = Some(InitialDelay {
            remaining_ms: delay.remaining_ms - wait_ms,
            new_member_added: false,
        });
        group.join_deadline_ms = Some(now_ms + wait_ms);
        return;
    }
    group.initial_delay = None;
    complete_join(group, now_ms, out);
}

/// Kafka's `onCompleteJoin`: dynamic members that did not rejoin are dropped (static ones
/// keep their place until their session ends), the next generation starts, and every
/// waiting JoinGroup is answered (the leader's with every member's subscription).
fn complete_join(group: &mut Group, now_ms: u64, out: &mut Outbox) {
    let not_rejoined: Vec<String> = group
        .members
        .values()
        .filter(|m| m.awaiting_join.is_none() && m.group_instance_id.is_none())
        .map(|m| m.member_id.clone())
        .collect();
    for member_id in not_rejoined {
        if let Some(member) = group.remove_member(&member_id)
            && let Some(token) = member.awaiting_sync
        {
            out.push((
                token,
                Reply::Sync(SyncResult::error(ErrorCode::UnknownMemberId)),
            ));
        }
    }
    if !maybe_elect_new_joined_leader(group) && !group.members.is_empty() {
        // Only static members that did not rejoin are left: wait for them, or for their
        // sessions to end. Never sooner than the earliest session: nothing can change before
        // (a rebalance timeout of 0 would otherwise make this phase due again at once, forever).
        let earliest_session = group
            .members
            .values()
            .map(|m| m.heartbeat_deadline_ms)
            .min()
            .unwrap_or(now_ms);
        let wait_until = (now_ms + group.rebalance_timeout_ms()).max(earliest_session);
        group.join_deadline_ms = Some(wait_until.max(now_ms + 1));
        return;
    }
    group.generation_id += 1;
    group.join_deadline_ms = None;
    group.initial_delay = None;
    if group.members.is_empty() {
        group.protocol_name = None;
        group.subscribed_topics = None;
        group.transition_to(GroupState::Empty);
        return;
    }
    group.protocol_name = group.select_protocol();
    group.subscribed_topics = subscribed_topics(group);
    group.transition_to(GroupState::CompletingRebalance);
    let members = member_list(group);
    let leader = group.leader.clone().unwrap_or_default();
    let (protocol_type, protocol_name) = (group.protocol_type.clone(), group.protocol_name.clone());
    for member in group.members.values_mut() {
        if let Some(token) = member.awaiting_join.take() {
            let result = JoinResult {
                error: ErrorCode::None,
                generation_id: group.generation_id,
                protocol_type: protocol_type.clone(),
                protocol_name: protocol_name.clone(),
                leader: leader.clone(),
                member_id: member.member_id.clone(),
                members: if member.member_id == leader {
                    members.clone()
                } else {
                    Vec::new()
                },
            };
            out.push((token, Reply::Join(result)));
        }
        member.is_new = false;
        member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms;
    }
    // Every member must now send SyncGroup within the rebalance timeout, or it is dropped.
    group.pending_sync = group.members.keys().cloned().collect();
    group.pending_sync_deadline_ms = Some(now_ms + group.rebalance_timeout_ms());
}

/// Kafka's `maybeElectNewJoinedLeader`: a leader that did not rejoin hands over to a member
/// that did. False when no member rejoined.
fn maybe_elect_new_joined_leader(group: &mut Group) -> bool {
    let Some(leader) = group.leader.clone() else {
        return false;
    };
    if group
        .members
        .get(&leader)
        .is_some_and(|m| m.awaiting_join.is_some())
    {
        return true;
    }
    match group.members.values().find(|m| m.awaiting_join.is_some()) {
        Some(member) => {
            group.leader = Some(member.member_id.clone());
            true
        }
        None => false,
    }
}

/// The topics a consumer group's members subscribe to; `None` for another protocol type or a
/// subscription that does not parse (then every topic counts as subscribed).
pub(super) fn subscribed_topics(group: &Group) -> Option<std::collections::BTreeSet<String>> {
    if group.protocol_type.as_deref() != Some("consumer") {
        return None;
    }
    let protocol = group.protocol_name.as_deref()?;
    let mut topics = std::collections::BTreeSet::new();
    for member in group.members.values() {
        topics.extend(subscription_topics(&member.metadata(protocol))?);
    }
    Some(topics)
}
