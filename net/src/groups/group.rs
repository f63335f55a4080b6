//! One group's membership: its members, its state (Kafka's five), its generation and the
//! protocol (assignor) its members agreed on. The rules that move it are in `join.rs` and
//! `coordinator.rs`; this file holds the data and the transition table.

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;

use super::ReplyToken;

/// Kafka's classic group states (`GroupState` in Kafka's `GroupMetadata.scala`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum GroupState {
    /// No members; the group exists for its committed offsets (or was just created).
    Empty,
    /// A rebalance started: members must (re)send JoinGroup before the join deadline.
    PreparingRebalance,
    /// Every member's JoinGroup was answered; waiting for the leader's assignment (SyncGroup).
    CompletingRebalance,
    /// The leader's assignment was handed out; members heartbeat.
    Stable,
    /// Gone (deleted, or its coordinator moved away). Never kept in the coordinator's map.
    Dead,
}

impl GroupState {
    pub const ALL: [GroupState; 5] = [
        GroupState::Empty,
        GroupState::PreparingRebalance,
        GroupState::CompletingRebalance,
        GroupState::Stable,
        GroupState::Dead,
    ];

    /// The name DescribeGroups and ListGroups answer (Kafka's spelling).
    pub fn name(self) -> &'static str {
        match self {
            GroupState::Empty => "Empty",
            GroupState::PreparingRebalance => "PreparingRebalance",
            GroupState::CompletingRebalance => "CompletingRebalance",
            GroupState::Stable => "Stable",
            GroupState::Dead => "Dead",
        }
    }

    /// ListGroups v4+ filters by state name, case-insensitively (as Kafka does).
    pub fn parse(name: &str) -> Option<GroupState> {
        GroupState::ALL
            .into_iter()
            .find(|s| s.name().eq_ignore_ascii_case(name))
    }
}

/// Kafka's `validPreviousStates`: the only transitions a group may make, as a table. The
/// coordinator never keeps a Dead group, so Dead is a target only.
pub const TRANSITIONS: &[(GroupState, &[GroupState])] = &[
    (GroupState::Empty, &[GroupState::PreparingRebalance]),
    (
        GroupState::PreparingRebalance,
        &[
            GroupState::Stable,
            GroupState::CompletingRebalance,
            GroupState::Empty,
        ],
    ),
    (
        GroupState::CompletingRebalance,
        &[GroupState::PreparingRebalance],
    ),
    (GroupState::Stable, &[GroupState::CompletingRebalance]),
    (
        GroupState::Dead,
        &[
            GroupState::Stable,
            GroupState::PreparingRebalance,
            GroupState::CompletingRebalance,
            GroupState::Empty,
            GroupState::Dead,
        ],
    ),
];

/// Whether `from → to` is a row of [`TRANSITIONS`].
pub fn transition_allowed(from: GroupState, to: GroupState) -> bool {
    TRANSITIONS
        .iter()
        .any(|(target, sources)| *target == to && sources.contains(&from))
}

/// One member, as its JoinGroup described it.
#[derive(Clone, Debug)]
pub struct Member {
    pub member_id: String,
    /// KIP-345: a static member keeps its assignment across restarts within its session.
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub rebalance_timeout_ms: u64,
    pub session_timeout_ms: u64,
    pub protocol_type: String,
    /// (name, metadata) in the member's order of preference. The metadata is copied out of
    /// the request frame, so a member never keeps a whole frame alive.
    pub protocols: Vec<(String, Bytes)>,
    /// The leader's assignment for this member (empty until a SyncGroup of the leader).
    pub assignment: Bytes,
    /// The JoinGroup this member waits on (answered when the join phase completes).
    pub awaiting_join: Option<ReplyToken>,
    /// The SyncGroup this member waits on (answered when the leader's assignment arrives).
    pub awaiting_sync: Option<ReplyToken>,
    /// Joined but not yet through a completed join phase: expires after
    /// [`super::NEW_MEMBER_JOIN_TIMEOUT_MS`] even while it waits (Kafka's `isNew`).
    pub is_new: bool,
    /// The session ends here unless a heartbeat (or a commit, join or sync) comes first.
    pub heartbeat_deadline_ms: u64,
}

impl Member {
    /// Same protocols, same metadata, same order (Kafka's `MemberMetadata.matches`).
    pub fn matches(&self, protocols: &[(String, Bytes)]) -> bool {
        self.protocols.len() == protocols.len()
            && self
                .protocols
                .iter()
                .zip(protocols)
                .all(|((a, am), (b, bm))| a == b && am == bm)
    }

    /// This member's metadata for `protocol` (empty if it does not support it).
    pub fn metadata(&self, protocol: &str) -> Bytes {
        self.protocols
            .iter()
            .find(|(name, _)| name == protocol)
            .map(|(_, m)| m.clone())
            .unwrap_or_default()
    }
}

/// The initial rebalance delay of a group that was Empty (Kafka's `InitialDelayedJoin`): the
/// join phase waits `group.initial.rebalance.delay.ms` for more members, again while new
/// ones keep arriving, for at most the rebalance timeout in all.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InitialDelay {
    pub remaining_ms: u64,
    pub new_member_added: bool,
}

/// One group the coordinator holds in memory (its committed offsets live in the
/// `__consumer_offsets` state, not here).
#[derive(Clone, Debug)]
pub struct Group {
    pub group_id: String,
    /// The `__consumer_offsets` partition whose leader coordinates this group.
    pub partition: i32,
    pub state: GroupState,
    pub generation_id: i32,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub leader: Option<String>,
    /// By member id: deterministic order for the leader's member list and for tests.
    pub members: BTreeMap<String, Member>,
    /// KIP-345: instance id → the member id currently holding it.
    pub static_members: BTreeMap<String, String>,
    /// KIP-394: member ids handed out with MEMBER_ID_REQUIRED, each until its deadline.
    pub pending_members: BTreeMap<String, u64>,
    /// Members answered in the last join phase that have not sent SyncGroup yet.
    pub pending_sync: BTreeSet<String>,
    pub pending_sync_deadline_ms: Option<u64>,
    /// PreparingRebalance: the join phase ends here (or earlier once everyone rejoined).
    pub join_deadline_ms: Option<u64>,
    pub initial_delay: Option<InitialDelay>,
    /// The topics the members subscribe to (consumer protocol), `None` when unknown.
    pub subscribed_topics: Option<BTreeSet<String>>,
    /// `group.initial.rebalance.delay.ms` (the coordinator's setting, kept per group so the
    /// join rules need only the group).
    pub initial_delay_ms: u64,
}

impl Group {
    pub fn new(group_id: String, partition: i32, initial_delay_ms: u64) -> Group {
        Group {
            group_id,
            partition,
            state: GroupState::Empty,
            generation_id: 0,
            protocol_type: None,
            protocol_name: None,
            leader: None,
            members: BTreeMap::new(),
            static_members: BTreeMap::new(),
            pending_members: BTreeMap::new(),
            pending_sync: BTreeSet::new(),
            pending_sync_deadline_ms: None,
            join_deadline_ms: None,
            initial_delay: None,
            subscribed_topics: None,
            initial_delay_ms,
        }
    }

    /// Moves to `to`; an illegal transition is a coordinator bug (it would hand out an
    /// assignment of a generation that never completed its join phase).
    pub fn transition_to(&mut self, to: GroupState) {
        assert!(
            transition_allowed(self.state, to),
            "group {}: illegal transition {:?} -> {to:?}",
            self.group_id,
            self.state
        );
        self.state = to;
    }

    pub fn is_leader(&self, member_id: &str) -> bool {
        self.leader.as_deref() == Some(member_id)
    }

    /// KIP-345 fencing: the instance id is held by another member id.
    pub fn is_static_member_fenced(&self, member_id: &str, instance_id: Option<&str>) -> bool {
        instance_id
            .and_then(|i| self.static_members.get(i))
            .is_some_and(|holder| holder != member_id)
    }

    /// Kafka's `supportsProtocols`: an Empty group takes any non-empty protocol list; any
    /// other group needs the same protocol type and a protocol every member supports.
    pub fn supports_protocols(&self, protocol_type: &str, protocols: &[(String, Bytes)]) -> bool {
        if self.state == GroupState::Empty || self.members.is_empty() {
            return !protocol_type.is_empty() && !protocols.is_empty();
        }
        self.protocol_type.as_deref() == Some(protocol_type)
            && protocols.iter().any(|(name, _)| {
                self.members
                    .values()
                    .all(|m| m.protocols.iter().any(|(n, _)| n == name))
            })
    }

    /// The largest rebalance timeout of the members (the group's).
    pub fn rebalance_timeout_ms(&self) -> u64 {
        self.members
            .values()
            .map(|m| m.rebalance_timeout_ms)
            .max()
            .unwrap_or(0)
    }

    /// Every member sent its JoinGroup and no handed-out member id is still to come.
    pub fn all_members_joined(&self) -> bool {
        self.pending_members.is_empty() && self.members.values().all(|m| m.awaiting_join.is_some())
    }

    /// Kafka's `selectProtocol`: among the protocols every member supports, each member
    /// votes for the first of its own list; the most votes win. Ties go to the protocol the
    /// leader (else the first member) prefers, so the choice is deterministic.
    pub fn select_protocol(&self) -> Option<String> {
        let candidates: Vec<&str> = self
            .members
            .values()
            .next()?
            .protocols
            .iter()
            .map(|(n, _)| n.as_str())
            .filter(|name| {
                self.members
                    .values()
                    .all(|m| m.protocols.iter().any(|(n, _)| n == name))
            })
            .collect();
        let mut votes: BTreeMap<&str, usize> = BTreeMap::new();
        for member in self.members.values() {
            if let Some((name, _)) = member
                .protocols
                .iter()
                .find(|(n, _)| candidates.contains(&n.as_str()))
            {
                *votes.entry(name.as_str()).or_default() += 1;
            }
        }
        let most = votes.values().copied().max()?;
        let preference = self
            .leader
            .as_ref()
            .and_then(|l| self.members.get(l))
            .or_else(|| self.members.values().next())?;
        preference
            .protocols
            .iter()
            .map(|(n, _)| n.as_str())
            .find(|n| votes.get(n) == Some(&most))
            .map(str::to_string)
    }

    /// Adds a member; the first one fixes the protocol type and leads.
    pub fn add_member(&mut self, member: Member) {
        if self.members.is_empty() {
            self.protocol_type = Some(member.protocol_type.clone());
        }
        if self.leader.is_none() {
            self.leader = Some(member.member_id.clone());
        }
        if let Some(instance) = &member.group_instance_id {
            self.static_members
                .insert(instance.clone(), member.member_id.clone());
        }
        self.members.insert(member.member_id.clone(), member);
    }

    /// Removes a member from every index; a leader that leaves hands over to the first
    /// remaining member. The caller answers what the member was waiting on.
    pub fn remove_member(&mut self, member_id: &str) -> Option<Member> {
        let member = self.members.remove(member_id)?;
        if let Some(instance) = &member.group_instance_id
            && self.static_members.get(instance).map(String::as_str) == Some(member_id)
        {
            self.static_members.remove(instance);
        }
        self.pending_sync.remove(member_id);
        if self.pending_sync.is_empty() {
            self.pending_sync_deadline_ms = None;
        }
        if self.is_leader(member_id) {
            self.leader = self.members.keys().next().cloned();
        }
        Some(member)
    }

    /// KIP-345: a static member rejoined with a new member id; the old id is gone (its
    /// waiting requests are returned to be answered FENCED_INSTANCE_ID) and the new one keeps
    /// the member's assignment, leadership and place in the pending syncs.
    pub fn replace_static_member(
        &mut self,
        instance_id: &str,
        old_member_id: &str,
        new_member_id: &str,
    ) -> (Option<ReplyToken>, Option<ReplyToken>) {
        let mut member = self
            .members
            .remove(old_member_id)
            .expect("a static member's id is a member");
        let waiting = (member.awaiting_join.take(), member.awaiting_sync.take());
        member.member_id = new_member_id.to_string();
        self.members.insert(new_member_id.to_string(), member);
        self.static_members
            .insert(instance_id.to_string(), new_member_id.to_string());
        if self.is_leader(old_member_id) {
            self.leader = Some(new_member_id.to_string());
        }
        if self.pending_sync.remove(old_member_id) {
            self.pending_sync.insert(new_member_id.to_string());
        }
        waiting
    }

    /// The earliest deadline of this group: a session, a handed-out member id, the pending
    /// syncs, or the join phase.
    pub fn next_deadline_ms(&self) -> Option<u64> {
        let sessions = self.members.values().map(|m| m.heartbeat_deadline_ms);
        let pending = self.pending_members.values().copied();
        sessions
            .chain(pending)
            .chain(self.pending_sync_deadline_ms)
            .chain(self.join_deadline_ms)
            .min()
    }
}

/// The topics of a consumer protocol subscription (Kafka's `ConsumerProtocolSubscription`,
/// any version: `version int16, topics [string], ...`; only the topics are read). `None` when
/// the bytes do not hold one: the caller then treats every topic as subscribed.
pub fn subscription_topics(metadata: &[u8]) -> Option<Vec<String>> {
    let mut rest = metadata;
    let mut take = |n: usize| -> Option<&[u8]> {
        if rest.len() < n {
            return None;
        }
        let (head, tail) = rest.split_at(n);
        rest = tail;
        Some(head)
    };
    let _version = i16::from_be_bytes(take(2)?.try_into().ok()?);
    let count = i32::from_be_bytes(take(4)?.try_into().ok()?);
    // Each topic takes at least its two length bytes: a count that cannot fit is refused
    // before anything is allocated.
    let count = usize::try_from(count).ok()?;
    if count > metadata.len() / 2 {
        return None;
    }
    let mut topics = Vec::with_capacity(count);
    for _ in 0..count {
        let len = i16::from_be_bytes(take(2)?.try_into().ok()?);
        let len = usize::try_from(len).ok()?;
        topics.push(std::str::from_utf8(take(len)?).ok()?.to_string());
    }
    Some(topics)
}
