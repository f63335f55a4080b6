//! The group coordinator: every group this node coordinates, the deadlines that move them
//! (sessions, join phases, pending syncs), and the requests other than JoinGroup (`join.rs`):
//! SyncGroup, Heartbeat, LeaveGroup, the group checks of OffsetCommit and OffsetDelete,
//! DescribeGroups, ListGroups, DeleteGroups. Error outcomes follow Kafka's
//! `GroupCoordinator.scala` (the classic protocol), case by case.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use bytes::Bytes;

use super::group::{Group, GroupState, Member};
use super::join::{
    maybe_complete_join, maybe_prepare_rebalance, on_join_deadline, prepare_rebalance,
};
use super::metadata::{GroupMetadata, MemberMetadata};
use super::{
    GroupConfig, JoinResult, LeavingMember, Outbox, Reply, ReplyToken, SyncRequest, SyncResult,
};
use crate::protocol::ErrorCode;

mod metadata_records;

/// The groups this node coordinates (those of the `__consumer_offsets` partitions it leads).
pub struct Coordinator {
    pub(super) config: GroupConfig,
    pub(super) groups: BTreeMap<String, Group>,
    /// (deadline, group): each group once, at its earliest deadline, so `tick` touches only
    /// the groups that are due.
    deadlines: BTreeSet<(u64, String)>,
    scheduled: HashMap<String, u64>,
    /// State of the member-id generator (splitmix64): ids never repeat on one coordinator,
    /// and the node seeds it at random so they do not repeat across coordinators either.
    member_id_state: u64,
    /// The latest `now_ms` any request or tick brought (the time a group that empties in that
    /// call became empty).
    clock_ms: u64,
    /// KIP-211: when each group dropped from memory became empty (its `__consumer_offsets`
    /// partition, the coordinator's `now_ms`), so its offsets expire
    /// `offsets.retention.minutes` after that. Only this coordinator knows it: after a
    /// failover the new one counts from the commit timestamps in the log.
    emptied_at_ms: HashMap<String, Emptied>,
    /// Groups changed since the node last asked (`take_dirty`): their metadata record may
    /// need writing.
    dirty: BTreeSet<String>,
}

/// A group dropped from memory when it became empty.
#[derive(Clone, Debug)]
struct Emptied {
    partition: i32,
    at_ms: u64,
    protocol_type: Option<String>,
    generation_id: i32,
}

/// DescribeGroups' view of a group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupDescription {
    pub state: GroupState,
    pub protocol_type: String,
    /// The selected protocol while Stable, else empty (as Kafka answers).
    pub protocol_name: String,
    pub members: Vec<MemberDescription>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberDescription {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    /// Subscription and assignment: only while the group is Stable.
    pub metadata: Bytes,
    pub assignment: Bytes,
}

/// ListGroups' view of a group held in memory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListedGroup {
    pub group_id: String,
    pub partition: i32,
    pub protocol_type: String,
    pub state: GroupState,
}

impl Coordinator {
    pub fn new(config: GroupConfig, member_id_seed: u64) -> Coordinator {
        Coordinator {
            config,
            groups: BTreeMap::new(),
            deadlines: BTreeSet::new(),
            scheduled: HashMap::new(),
            member_id_state: member_id_seed,
            clock_ms: 0,
            emptied_at_ms: HashMap::new(),
            dirty: BTreeSet::new(),
        }
    }

    pub fn config(&self) -> &GroupConfig {
        &self.config
    }

    /// Kafka's form: the client id, a dash, a UUID.
    pub(super) fn new_member_id(&mut self, client_id: &str) -> String {
        let mut next = || {
            self.member_id_state = self.member_id_state.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = self.member_id_state;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        };
        let (a, b) = (next(), next());
        format!(
            "{client_id}-{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
            a >> 32,
            (a >> 16) & 0xffff,
            a & 0xffff,
            b >> 48,
            b & 0xffff_ffff_ffff
        )
    }

    /// After any change to a group: a group left Empty with nobody to come is dropped (its
    /// offsets keep it visible), and its place in the deadline index is brought up to date.
    pub(super) fn after_change(&mut self, group_id: &str) {
        let drop = self.groups.get(group_id).is_some_and(|g| {
            g.state == GroupState::Empty && g.members.is_empty() && g.pending_members.is_empty()
        });
        if drop && let Some(group) = self.groups.remove(group_id) {
            let emptied = Emptied {
                partition: group.partition,
                at_ms: self.clock_ms,
                protocol_type: group.protocol_type,
                generation_id: group.generation_id,
            };
            self.emptied_at_ms.insert(group_id.to_string(), emptied);
        }
        self.dirty.insert(group_id.to_string());
        let next = self.groups.get(group_id).and_then(Group::next_deadline_ms);
        if let Some(old) = self.scheduled.remove(group_id) {
            self.deadlines.remove(&(old, group_id.to_string()));
        }
        if let Some(next) = next {
            self.scheduled.insert(group_id.to_string(), next);
            self.deadlines.insert((next, group_id.to_string()));
        }
    }

    /// When `tick` has something to do next (`u64::MAX`: nothing).
    pub fn next_deadline_ms(&self) -> u64 {
        self.deadlines.first().map_or(u64::MAX, |(d, _)| *d)
    }

    /// Runs every deadline that passed: sessions that ended, member ids never used, members
    /// that did not sync, join phases that ran out.
    ///
    /// Each group that is due is handled once per call: a deadline that handling makes due
    /// again at `now_ms` (timeouts of 0) waits for the next call, so a tick always ends.
    pub fn tick(&mut self, now_ms: u64, out: &mut Outbox) {
        self.observe_clock(now_ms);
        let due: Vec<(u64, String)> = self
            .deadlines
            .iter()
            .take_while(|(deadline, _)| *deadline <= now_ms)
            .cloned()
            .collect();
        for (deadline, group_id) in due {
            self.deadlines.remove(&(deadline, group_id.clone()));
            self.scheduled.remove(&group_id);
            if let Some(group) = self.groups.get_mut(&group_id) {
                expire(group, now_ms, out);
            }
            self.after_change(&group_id);
        }
    }

    // ---- SyncGroup ------------------------------------------------------------------------

    pub fn sync(&mut self, now_ms: u64, token: ReplyToken, request: SyncRequest, out: &mut Outbox) {
        self.observe_clock(now_ms);
        let result = self.sync_inner(now_ms, token, &request, out);
        if let Err(error) = result {
            out.push((token, Reply::Sync(SyncResult::error(error))));
        }
        self.after_change(&request.group_id);
    }

    fn sync_inner(
        &mut self,
        now_ms: u64,
        token: ReplyToken,
        request: &SyncRequest,
        out: &mut Outbox,
    ) -> Result<(), ErrorCode> {
        let group = self
            .groups
            .get_mut(&request.group_id)
            .ok_or(ErrorCode::UnknownMemberId)?;
        let member_id = request.member_id.as_str();
        if group.is_static_member_fenced(member_id, request.group_instance_id.as_deref()) {
            return Err(ErrorCode::FencedInstanceId);
        }
        if !group.members.contains_key(member_id) {
            return Err(ErrorCode::UnknownMemberId);
        }
        if request.generation_id != group.generation_id {
            return Err(ErrorCode::IllegalGeneration);
        }
        let mismatch = |asked: &Option<String>, ours: &Option<String>| {
            asked.as_ref().is_some_and(|a| ours.as_ref() != Some(a))
        };
        if mismatch(&request.protocol_type, &group.protocol_type)
            || mismatch(&request.protocol_name, &group.protocol_name)
        {
            return Err(ErrorCode::InconsistentGroupProtocol);
        }
        match group.state {
            GroupState::Empty | GroupState::Dead => Err(ErrorCode::UnknownMemberId),
            GroupState::PreparingRebalance => Err(ErrorCode::RebalanceInProgress),
            GroupState::CompletingRebalance => {
                let member = group.members.get_mut(member_id).expect("checked");
                if let Some(old) = member.awaiting_sync.replace(token) {
                    // Its client gave up on the earlier one; answered so later answers flow.
                    out.push((
                        old,
                        Reply::Sync(SyncResult::error(ErrorCode::RebalanceInProgress)),
                    ));
                }
                member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms;
                remove_pending_sync(group, member_id);
                if group.is_leader(member_id) {
                    let mut assignment: HashMap<&str, &Bytes> = HashMap::new();
                    for (id, bytes) in &request.assignments {
                        assignment.insert(id.as_str(), bytes);
                    }
                    let (protocol_type, protocol_name) =
                        (group.protocol_type.clone(), group.protocol_name.clone());
                    // Members the leader left out get an empty assignment; ids it named that
                    // are not members are ignored.
                    for member in group.members.values_mut() {
                        member.assignment = assignment
                            .get(member.member_id.as_str())
                            .map(|b| Bytes::copy_from_slice(b))
                            .unwrap_or_default();
                        if let Some(token) = member.awaiting_sync.take() {
                            let result = SyncResult {
                                error: ErrorCode::None,
                                protocol_type: protocol_type.clone(),
                                protocol_name: protocol_name.clone(),
                                assignment: member.assignment.clone(),
                            };
                            out.push((token, Reply::Sync(result)));
                        }
                    }
                    group.transition_to(GroupState::Stable);
                }
                Ok(())
            }
            GroupState::Stable => {
                remove_pending_sync(group, member_id);
                let member = group.members.get_mut(member_id).expect("checked");
                member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms;
                let result = SyncResult {
                    error: ErrorCode::None,
                    protocol_type: group.protocol_type.clone(),
                    protocol_name: group.protocol_name.clone(),
                    assignment: member.assignment.clone(),
                };
                out.push((token, Reply::Sync(result)));
                Ok(())
            }
        }
    }

    // ---- Heartbeat ------------------------------------------------------------------------

    /// Heartbeat: the member's session starts again; REBALANCE_IN_PROGRESS tells it to rejoin.
    pub fn heartbeat(
        &mut self,
        now_ms: u64,
        group_id: &str,
        member_id: &str,
        generation_id: i32,
        group_instance_id: Option<&str>,
    ) -> ErrorCode {
        self.observe_clock(now_ms);
        let result = (|| {
            let group = self
                .groups
                .get_mut(group_id)
                .ok_or(ErrorCode::UnknownMemberId)?;
            match group.state {
                GroupState::Dead => return Err(ErrorCode::CoordinatorNotAvailable),
                GroupState::Empty => return Err(ErrorCode::UnknownMemberId),
                _ => {}
            }
            if group.is_static_member_fenced(member_id, group_instance_id) {
                return Err(ErrorCode::FencedInstanceId);
            }
            let state = group.state;
            let current_generation = group.generation_id;
            let member = group
                .members
                .get_mut(member_id)
                .ok_or(ErrorCode::UnknownMemberId)?;
            if generation_id != current_generation {
                return Err(ErrorCode::IllegalGeneration);
            }
            member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms;
            if state == GroupState::PreparingRebalance {
                return Err(ErrorCode::RebalanceInProgress);
            }
            Ok(())
        })();
        self.after_change(group_id);
        result.err().unwrap_or(ErrorCode::None)
    }

    // ---- LeaveGroup -----------------------------------------------------------------------

    /// LeaveGroup: one error per leaving member, or a group-level error.
    pub fn leave(
        &mut self,
        now_ms: u64,
        group_id: &str,
        leaving: &[LeavingMember],
        out: &mut Outbox,
    ) -> Result<Vec<ErrorCode>, ErrorCode> {
        self.observe_clock(now_ms);
        let Some(group) = self.groups.get_mut(group_id) else {
            return Ok(vec![ErrorCode::UnknownMemberId; leaving.len()]);
        };
        if group.state == GroupState::Dead {
            return Err(ErrorCode::CoordinatorNotAvailable);
        }
        let mut errors = Vec::with_capacity(leaving.len());
        for member in leaving {
            let instance = member.group_instance_id.as_deref();
            let error = if member.member_id.is_empty() && instance.is_some() {
                // KIP-345: a static member leaves by its instance id (an admin removing it).
                match instance.and_then(|i| group.static_members.get(i)).cloned() {
                    Some(member_id) => {
                        remove_member_and_update_group(group, &member_id, now_ms, out);
                        ErrorCode::None
                    }
                    None => ErrorCode::UnknownMemberId,
                }
            } else if group.is_static_member_fenced(&member.member_id, instance) {
                ErrorCode::FencedInstanceId
            } else if group.pending_members.remove(&member.member_id).is_some() {
                maybe_complete_join(group, now_ms, out);
                ErrorCode::None
            } else if group.members.contains_key(&member.member_id) {
                remove_member_and_update_group(group, &member.member_id, now_ms, out);
                ErrorCode::None
            } else {
                ErrorCode::UnknownMemberId
            };
            errors.push(error);
        }
        self.after_change(group_id);
        Ok(errors)
    }

    // ---- committed offsets ----------------------------------------------------------------

    /// May this OffsetCommit be stored? `generation_id` < 0 is a commit outside group
    /// management (an admin, a consumer without a group protocol), allowed while the group has
    /// no members. A member's commit refreshes its session.
    pub fn validate_offset_commit(
        &mut self,
        now_ms: u64,
        group_id: &str,
        member_id: &str,
        generation_id: i32,
        group_instance_id: Option<&str>,
    ) -> Result<(), ErrorCode> {
        self.observe_clock(now_ms);
        let Some(group) = self.groups.get_mut(group_id) else {
            // Not in memory: no members. A member of a generation this coordinator never
            // made (e.g. one of the coordinator before a failover) rejoins first.
            return if generation_id < 0 {
                Ok(())
            } else {
                Err(ErrorCode::IllegalGeneration)
            };
        };
        if group.state == GroupState::Dead {
            return Err(ErrorCode::CoordinatorNotAvailable);
        }
        if group.is_static_member_fenced(member_id, group_instance_id) {
            return Err(ErrorCode::FencedInstanceId);
        }
        if generation_id < 0 && group.state == GroupState::Empty {
            return Ok(());
        }
        if group.state == GroupState::CompletingRebalance {
            // It has the new generation but not its assignment yet.
            return Err(ErrorCode::RebalanceInProgress);
        }
        let current_generation = group.generation_id;
        let member = group
            .members
            .get_mut(member_id)
            .ok_or(ErrorCode::UnknownMemberId)?;
        if generation_id != current_generation {
            return Err(ErrorCode::IllegalGeneration);
        }
        member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms;
        self.after_change(group_id);
        Ok(())
    }

    /// OffsetDelete: which of `topics` may lose their offsets (Kafka: a group with members
    /// keeps the offsets of the topics it subscribes to; a non-consumer group with members
    /// keeps all, NON_EMPTY_GROUP).
    pub fn offsets_deletable(
        &self,
        group_id: &str,
        topics: &[&str],
    ) -> Result<Vec<bool>, ErrorCode> {
        let Some(group) = self.groups.get(group_id) else {
            return Ok(vec![true; topics.len()]);
        };
        match group.state {
            GroupState::Dead => Err(ErrorCode::CoordinatorNotAvailable),
            GroupState::Empty => Ok(vec![true; topics.len()]),
            _ if group.protocol_type.as_deref() == Some("consumer") => Ok(topics
                .iter()
                .map(|topic| {
                    group
                        .subscribed_topics
                        .as_ref()
                        .is_some_and(|subscribed| !subscribed.contains(*topic))
                })
                .collect()),
            _ => Err(ErrorCode::NonEmptyGroup),
        }
    }

    // ---- admin ------------------------------------------------------------------------------

    /// DeleteGroups: a group with members cannot go (NON_EMPTY_GROUP). True when the group
    /// was held in memory (and is now gone); the caller deletes its offsets.
    pub fn delete_group(&mut self, group_id: &str) -> Result<bool, ErrorCode> {
        let Some(group) = self.groups.get(group_id) else {
            // Its metadata record is deleted with its offsets: nothing may write it again.
            self.emptied_at_ms.remove(group_id);
            return Ok(false);
        };
        if !group.members.is_empty() || !group.pending_members.is_empty() {
            return Err(ErrorCode::NonEmptyGroup);
        }
        self.groups.remove(group_id);
        self.emptied_at_ms.remove(group_id);
        self.after_change(group_id);
        Ok(true)
    }

    pub fn describe(&self, group_id: &str) -> Option<GroupDescription> {
        let group = self.groups.get(group_id)?;
        let stable = group.state == GroupState::Stable;
        let protocol = group.protocol_name.clone().unwrap_or_default();
        Some(GroupDescription {
            state: group.state,
            protocol_type: group.protocol_type.clone().unwrap_or_default(),
            protocol_name: if stable {
                protocol.clone()
            } else {
                String::new()
            },
            members: group
                .members
                .values()
                .map(|m| MemberDescription {
                    member_id: m.member_id.clone(),
                    group_instance_id: m.group_instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    metadata: if stable {
                        m.metadata(&protocol)
                    } else {
                        Bytes::new()
                    },
                    assignment: if stable {
                        m.assignment.clone()
                    } else {
                        Bytes::new()
                    },
                })
                .collect(),
        })
    }

    /// The groups held in memory, in group id order.
    pub fn list(&self) -> impl Iterator<Item = ListedGroup> + '_ {
        self.groups.values().map(|g| ListedGroup {
            group_id: g.group_id.clone(),
            partition: g.partition,
            protocol_type: g.protocol_type.clone().unwrap_or_default(),
            state: g.state,
        })
    }

    pub fn contains(&self, group_id: &str) -> bool {
        self.groups.contains_key(group_id)
    }

    /// The topics a Stable consumer group's members subscribe to (`None`: not Stable, not
    /// the consumer protocol, or a subscription that does not read).
    pub fn stable_subscription(&self, group_id: &str) -> Option<&BTreeSet<String>> {
        let group = self.groups.get(group_id)?;
        if group.state != GroupState::Stable {
            return None;
        }
        group.subscribed_topics.as_ref()
    }

    /// Keeps the time of the latest call (the coordinator's clock never goes back).
    pub(super) fn observe_clock(&mut self, now_ms: u64) {
        self.clock_ms = self.clock_ms.max(now_ms);
    }

    /// When `group_id`, not in memory now, became empty on this coordinator (its `now_ms`);
    /// `None` for a group in memory or one this coordinator never saw with members.
    pub fn emptied_at_ms(&self, group_id: &str) -> Option<u64> {
        if self.groups.contains_key(group_id) {
            return None;
        }
        self.emptied_at_ms.get(group_id).map(|e| e.at_ms)
    }

    /// The groups changed since the last call.
    pub fn take_dirty(&mut self) -> Vec<String> {
        std::mem::take(&mut self.dirty).into_iter().collect()
    }

    /// Forgets when the groups of `partition` that `keep` refuses became empty (their offsets
    /// are gone: nothing is left to expire).
    pub fn retain_emptied(&mut self, partition: i32, mut keep: impl FnMut(&str) -> bool) {
        self.emptied_at_ms
            .retain(|group_id, e| e.partition != partition || keep(group_id));
    }

    /// This node no longer coordinates `partition` (it lost the leadership of that
    /// `__consumer_offsets` partition): its groups leave memory and every request they hold is
    /// answered `error` (NOT_COORDINATOR: the members find the new coordinator and rejoin).
    pub fn unload_partition(&mut self, partition: i32, error: ErrorCode, out: &mut Outbox) {
        let ids: Vec<String> = self
            .groups
            .values()
            .filter(|g| g.partition == partition)
            .map(|g| g.group_id.clone())
            .collect();
        self.emptied_at_ms.retain(|_, e| e.partition != partition);
        for id in ids {
            let group = self.groups.remove(&id).expect("listed");
            for member in group.members.into_values() {
                if let Some(token) = member.awaiting_join {
                    out.push((
                        token,
                        Reply::Join(JoinResult::error(error, &member.member_id)),
                    ));
                }
                if let Some(token) = member.awaiting_sync {
                    out.push((token, Reply::Sync(SyncResult::error(error))));
                }
            }
            self.after_change(&id);
        }
    }

    /// Every partition at once (shutdown).
    pub fn unload_all(&mut self, error: ErrorCode, out: &mut Outbox) {
        let partitions: BTreeSet<i32> = self.groups.values().map(|g| g.partition).collect();
        for partition in partitions {
            self.unload_partition(partition, error, out);
        }
    }
}

/// A member is gone (left, session ended, did not sync). What it waited on is answered, and
/// the group rebalances without it (or completes the join phase it was holding up).
pub(super) fn remove_member_and_update_group(
    group: &mut Group,
    member_id: &str,
    now_ms: u64,
    out: &mut Outbox,
) {
    let Some(member) = group.remove_member(member_id) else {
        return;
    };
    if let Some(token) = member.awaiting_join {
        out.push((
            token,
            Reply::Join(JoinResult::error(ErrorCode::UnknownMemberId, member_id)),
        ));
    }
    if let Some(token) = member.awaiting_sync {
        out.push((
            token,
            Reply::Sync(SyncResult::error(ErrorCode::UnknownMemberId)),
        ));
    }
    match group.state {
        GroupState::Stable | GroupState::CompletingRebalance => {
            maybe_prepare_rebalance(group, now_ms, out)
        }
        GroupState::PreparingRebalance => maybe_complete_join(group, now_ms, out),
        GroupState::Empty | GroupState::Dead => {}
    }
}

fn remove_pending_sync(group: &mut Group, member_id: &str) {
    group.pending_sync.remove(member_id);
    if group.pending_sync.is_empty() {
        group.pending_sync_deadline_ms = None;
    }
}

/// Everything of `group` that is due at `now_ms`.
fn expire(group: &mut Group, now_ms: u64, out: &mut Outbox) {
    // Member ids handed out with MEMBER_ID_REQUIRED and never used.
    let unused: Vec<String> = group
        .pending_members
        .iter()
        .filter(|(_, deadline)| **deadline <= now_ms)
        .map(|(id, _)| id.clone())
        .collect();
    for id in &unused {
        group.pending_members.remove(id);
    }
    if !unused.is_empty() {
        maybe_complete_join(group, now_ms, out);
    }
    // Sessions. A member waiting on its JoinGroup or SyncGroup cannot heartbeat and keeps its
    // session (the join and sync deadlines bound that wait), unless it is new.
    let due: Vec<String> = group
        .members
        .values()
        .filter(|m| m.heartbeat_deadline_ms <= now_ms)
        .map(|m| m.member_id.clone())
        .collect();
    for id in due {
        let Some(member) = group.members.get_mut(&id) else {
            continue;
        };
        if !member.is_new && (member.awaiting_join.is_some() || member.awaiting_sync.is_some()) {
            member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms;
            continue;
        }
        remove_member_and_update_group(group, &id, now_ms, out);
    }
    // Members that got the new generation but never asked for their assignment.
    if group.pending_sync_deadline_ms.is_some_and(|d| d <= now_ms) {
        group.pending_sync_deadline_ms = None;
        if matches!(
            group.state,
            GroupState::CompletingRebalance | GroupState::Stable
        ) && !group.pending_sync.is_empty()
        {
            let missing: Vec<String> = group.pending_sync.iter().cloned().collect();
            for id in missing {
                if let Some(member) = group.remove_member(&id)
                    && let Some(token) = member.awaiting_join
                {
                    out.push((
                        token,
                        Reply::Join(JoinResult::error(ErrorCode::UnknownMemberId, &id)),
                    ));
                }
            }
            prepare_rebalance(group, now_ms, out);
        }
    }
    if group.join_deadline_ms.is_some_and(|d| d <= now_ms) {
        on_join_deadline(group, now_ms, out);
    }
}
