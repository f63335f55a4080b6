//! The node's side of consumer groups (docs/groups.md): which node coordinates a group, the
//! membership requests handed to the pure coordinator (`crate::groups`), and its answers sent
//! back to the waiting connections. Committed offsets are in `group_offsets.rs`.
//!
//! The coordinator of a group is the leader of its `__consumer_offsets` partition (Kafka's
//! placement, `offsets::partition_for`), and only once that leader's key-value state holds
//! every committed record: its state machine has applied the LeaderChange record that opened
//! its epoch, so every record an earlier leader committed is in it. Every replica applies the
//! partition's committed records as its high-watermark moves (the same state machine as any
//! `cleanup.policy=snapshot` topic, with KIP-630 snapshots), so a new leader has nothing to
//! rebuild: it becomes coordinator as soon as it commits its first record. Before that a group
//! request is COORDINATOR_LOAD_IN_PROGRESS; on any other node NOT_COORDINATOR. When the node
//! loses a partition (or its epoch changes) the groups of that partition leave memory and
//! every request they hold is answered NOT_COORDINATOR: the members find the new coordinator
//! and rejoin, their committed offsets waiting for them there.

use std::collections::{BTreeMap, HashMap};

use bytes::Bytes;
use ringlog_engine::io::AnyIo;
use ringlog_replication::PartitionId;
use ringlog_replication::host::Host;
use ringlog_replication::state_machine::StateMachine;

use super::context::Cx;
use super::topics::Topics;
use super::transport::Responder;
use super::{NodeError, PeerPending};
use crate::groups::offsets::{self, OFFSETS_TOPIC};
use crate::groups::{
    Coordinator, GroupConfig, GroupState, JoinRequest, JoinResult, LeavingMember, Outbox, Reply,
    ReplyToken, SyncRequest, SyncResult,
};
use crate::protocol::{
    ErrorCode, Request, RequestHeader, Response, create_topics_request as ct_req,
    describe_groups_request as dg_req, describe_groups_response as dg_resp, encode_response,
    find_coordinator_request as fc_req, find_coordinator_response as fc_resp,
    heartbeat_request as hb_req, heartbeat_response as hb_resp, join_group_request as jg_req,
    join_group_response as jg_resp, leave_group_request as lg_req, leave_group_response as lg_resp,
    list_groups_request as ls_req, list_groups_response as ls_resp, metadata_response as md_resp,
    sync_group_request as sg_req, sync_group_response as sg_resp,
};

/// How often a node that is not the controller asks it for `__consumer_offsets`.
const OFFSETS_TOPIC_ASK_INTERVAL_MS: u64 = 1_000;

mod group_metadata;
mod group_offsets;
mod membership;
mod offset_expiry;

use membership::{join_response, sync_response};

/// The node's group state: the coordinator and the answer slots of the requests it holds.
pub(super) struct GroupsState {
    pub(super) coordinator: Coordinator,
    /// Requests the coordinator holds (JoinGroup, SyncGroup), by the token it was given.
    waiting: HashMap<ReplyToken, WaitingReply>,
    next_token: u64,
    /// The `__consumer_offsets` partitions this node coordinates: index → (partition, epoch).
    loaded: BTreeMap<i32, (PartitionId, u32)>,
    /// The `__consumer_offsets` partitions this node hosts, for the table of that shape
    /// (`PartitionTable::shape`): `pump`, called after every storage step, looks only at them.
    hosted_offsets: ((usize, usize), Vec<PartitionId>),
    /// OffsetCommit, OffsetDelete and DeleteGroups waiting for their records (group_offsets.rs).
    writes: Vec<group_offsets::PendingWrite>,
    /// When this node last asked the controller for `__consumer_offsets`.
    offsets_topic_asked_ms: Option<u64>,
    /// Set when this node, leading the metadata log, should propose `__consumer_offsets`
    /// itself: the topic image's business, done by the node after the call
    /// ([`GroupsState::take_offsets_topic_wanted`]).
    offsets_topic_wanted: bool,
    /// The group metadata this node last appended, per group (group_metadata.rs): not
    /// appended again while the same.
    pub(super) metadata_written: HashMap<String, crate::groups::metadata::GroupMetadata>,
    /// SyncGroup answers waiting for their generation's metadata record (group_metadata.rs).
    held_syncs: Vec<group_metadata::HeldSyncs>,
    /// When the coordinator next looks for expired offsets (offset_expiry.rs).
    pub(super) next_expiry_check_ms: u64,
    /// Tombstones of expired offsets appended and not yet committed, per partition (leader
    /// epoch, last offset): the partition is not looked at again until they are.
    pub(super) expiring: BTreeMap<PartitionId, (u32, u64)>,
}

struct WaitingReply {
    responder: Responder,
    correlation_id: i32,
    version: i16,
}

impl Default for GroupsState {
    fn default() -> Self {
        GroupsState::new(GroupConfig::default(), 0)
    }
}

impl GroupsState {
    /// `member_id_seed` should be random: member ids must not repeat across coordinators.
    pub(super) fn new(config: GroupConfig, member_id_seed: u64) -> GroupsState {
        GroupsState {
            coordinator: Coordinator::new(config, member_id_seed),
            waiting: HashMap::new(),
            next_token: 1,
            loaded: BTreeMap::new(),
            hosted_offsets: Default::default(),
            writes: Vec::new(),
            offsets_topic_asked_ms: None,
            offsets_topic_wanted: false,
            metadata_written: HashMap::new(),
            held_syncs: Vec::new(),
            next_expiry_check_ms: 0,
            expiring: BTreeMap::new(),
        }
    }

    /// The loop wakes for the coordinator's next deadline and the writes' timeouts.
    pub(super) fn next_deadline_ms(&self) -> u64 {
        self.writes
            .iter()
            .map(|w| w.deadline_ms)
            .chain(self.held_syncs.iter().map(|s| s.deadline_ms))
            .min()
            .unwrap_or(u64::MAX)
            .min(self.coordinator.next_deadline_ms())
            .min(if self.loaded.is_empty() {
                u64::MAX
            } else {
                self.next_expiry_check_ms
            })
    }

    /// The `__consumer_offsets` partitions this node coordinates: index → (partition, epoch).
    pub(super) fn loaded(&self) -> &BTreeMap<i32, (PartitionId, u32)> {
        &self.loaded
    }

    pub(super) fn is_loaded(&self, index: i32) -> bool {
        self.loaded.contains_key(&index)
    }
}

/// Whether the API is one of the group APIs this file and `group_offsets.rs` answer.
pub(super) fn is_group_request(request: &Request) -> bool {
    matches!(
        request,
        Request::FindCoordinator(_)
            | Request::JoinGroup(_)
            | Request::SyncGroup(_)
            | Request::Heartbeat(_)
            | Request::LeaveGroup(_)
            | Request::OffsetCommit(_)
            | Request::OffsetFetch(_)
            | Request::OffsetDelete(_)
            | Request::ListGroups(_)
            | Request::DescribeGroups(_)
            | Request::DeleteGroups(_)
    )
}

/// What the group APIs read of the node's other state, lent beside the [`Cx`] for one call:
/// the topic image (where `__consumer_offsets` is, which topics exist) and the node's
/// `message.max.bytes` in force (`BrokerConfigs::message_max_bytes`, broker_configs.rs), which
/// bounds the batches of offset records.
#[derive(Clone, Copy)]
pub(super) struct GroupsEnv<'a> {
    pub(super) topics: &'a Topics,
    pub(super) message_max_bytes: u32,
}

impl GroupsState {
    /// Answers a group request. `brokers` are the brokers a client may be sent to
    /// (`metadata::metadata_brokers`), read by FindCoordinator only (empty for the
    /// other requests). After the call the node proposes `__consumer_offsets` if
    /// [`GroupsState::take_offsets_topic_wanted`] says so.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn handle_request(
        &mut self,
        cx: &mut Cx,
        env: GroupsEnv,
        brokers: Vec<md_resp::MetadataResponseBroker>,
        responder: Responder,
        header: RequestHeader,
        request: Request,
    ) -> Result<(), NodeError> {
        let result = self.answer_group_request(cx, env, brokers, responder, header, request);
        let _ = self.persist_group_metadata(cx, env);
        result
    }

    fn answer_group_request(
        &mut self,
        cx: &mut Cx,
        env: GroupsEnv,
        brokers: Vec<md_resp::MetadataResponseBroker>,
        responder: Responder,
        header: RequestHeader,
        request: Request,
    ) -> Result<(), NodeError> {
        let version = header.api_version;
        let response = match request {
            Request::FindCoordinator(r) => Response::FindCoordinator(
                self.handle_find_coordinator(cx, env, &brokers, &r, version),
            ),
            Request::Heartbeat(r) => Response::Heartbeat(self.handle_heartbeat(cx, env, &r)),
            Request::LeaveGroup(r) => {
                Response::LeaveGroup(self.handle_leave_group(cx, env, &r, version))
            }
            Request::ListGroups(r) => Response::ListGroups(self.handle_list_groups(cx, &r)),
            Request::DescribeGroups(r) => Response::DescribeGroups(self.handle_describe_groups(
                cx,
                env,
                &r,
                &responder.requester(),
            )),
            Request::OffsetFetch(r) => {
                Response::OffsetFetch(self.handle_offset_fetch(cx, env, &r, version))
            }
            Request::JoinGroup(r) => return self.handle_join_group(cx, env, responder, &header, r),
            Request::SyncGroup(r) => return self.handle_sync_group(cx, env, responder, &header, r),
            Request::OffsetCommit(r) => {
                return self.handle_offset_commit(cx, env, responder, &header, r);
            }
            Request::OffsetDelete(r) => {
                return self.handle_offset_delete(cx, env, responder, &header, r);
            }
            Request::DeleteGroups(r) => {
                return self.handle_delete_groups(cx, env, responder, &header, r);
            }
            other => unreachable!("{:?} is not a group request", other.api_key()),
        };
        let frame = encode_response(header.correlation_id, version, &response)?;
        responder.send(Some(frame));
        Ok(())
    }

    // ---- where a group lives ------------------------------------------------------------

    /// The `__consumer_offsets` partition (index and id) of `group_id`, if this node
    /// coordinates it; else the error a client is told (asking for the topic if it is missing).
    pub(super) fn group_coordinator(
        &mut self,
        cx: &mut Cx,
        env: GroupsEnv,
        group_id: &str,
    ) -> Result<(i32, PartitionId), ErrorCode> {
        if group_id.is_empty() || group_id.len() > offsets::STRING_BYTES_MAX {
            return Err(ErrorCode::InvalidGroupId);
        }
        let Some(partitions) = offsets_topic_partitions(env.topics) else {
            self.request_offsets_topic(cx, env);
            return Err(ErrorCode::CoordinatorNotAvailable);
        };
        let index = offsets::partition_for(group_id, partitions);
        let Some(&(partition, _)) = self.loaded.get(&index) else {
            let leading = cx
                .table
                .find(OFFSETS_TOPIC, index)
                .and_then(|p| cx.host.raft(p))
                .is_some_and(|r| r.is_leader());
            return Err(if leading {
                ErrorCode::CoordinatorLoadInProgress
            } else {
                ErrorCode::NotCoordinator
            });
        };
        Ok((index, partition))
    }

    /// `__consumer_offsets` is created when a client first needs a coordinator: proposed by
    /// this node if it is the controller (by the node after the call, see
    /// [`GroupsState::take_offsets_topic_wanted`]), else asked of it with a CreateTopics (which
    /// the controller answers with its own `offsets.topic.*` settings, whatever the request
    /// says).
    fn request_offsets_topic(&mut self, cx: &mut Cx, env: GroupsEnv) {
        if env.topics.proposed.contains(OFFSETS_TOPIC) {
            return;
        }
        let now = cx.now_ms;
        if self
            .offsets_topic_asked_ms
            .is_some_and(|asked| now < asked + OFFSETS_TOPIC_ASK_INTERVAL_MS)
        {
            return;
        }
        self.offsets_topic_asked_ms = Some(now);
        let raft = cx.metadata_raft();
        if raft.is_leader() {
            self.offsets_topic_wanted = true;
        } else if let Some(controller) = raft.leader_id() {
            let request = ct_req::CreateTopicsRequest {
                topics: vec![ct_req::CreatableTopic {
                    name: OFFSETS_TOPIC.to_string(),
                    num_partitions: cx.config.groups.offsets_topic_num_partitions,
                    replication_factor: -1,
                    ..Default::default()
                }],
                timeout_ms: 5_000,
                validate_only: false,
            };
            cx.send_to_peer(
                controller,
                Request::CreateTopics(request),
                super::topics::FORWARD_CREATE_TOPICS_VERSION,
                PeerPending::Control,
                false,
            );
        }
    }

    /// Whether the last call found `__consumer_offsets` missing while this node leads the
    /// metadata log: the node then proposes it (`Topics::propose_offsets_topic`, topics.rs).
    /// Reading it clears it.
    pub(super) fn take_offsets_topic_wanted(&mut self) -> bool {
        std::mem::take(&mut self.offsets_topic_wanted)
    }

    // ---- loading, delivering, time ------------------------------------------------------

    /// After every storage step: partitions this node now coordinates are loaded, those it
    /// lost are unloaded (their waiting requests answered NOT_COORDINATOR), and the writes
    /// whose records committed are answered.
    pub(super) fn pump(&mut self, cx: &mut Cx, env: GroupsEnv) -> Result<(), NodeError> {
        let mut out = Outbox::new();
        // A walk over every hosted partition after every storage step was ~0.7 % of a voter's
        // CPU under 100 busy partitions (2026-12-06): the offsets partitions are found again
        // only when the table changed.
        if self.hosted_offsets.0 != cx.table.shape() {
            let ids = cx
                .table
                .ids()
                .filter(|id| cx.table.get(*id).topic == OFFSETS_TOPIC)
                .collect();
            self.hosted_offsets = (cx.table.shape(), ids);
        }
        let mut now_loaded = BTreeMap::new();
        for &partition in &self.hosted_offsets.1 {
            if let Some(epoch) = caught_up_leader_epoch(cx.host, partition) {
                now_loaded.insert(cx.table.get(partition).index, (partition, epoch));
            }
        }
        if now_loaded != self.loaded {
            for (index, was) in &self.loaded {
                if now_loaded.get(index) != Some(was) {
                    tracing::info!(partition = index, "no longer coordinator of its groups");
                    let coordinator = &mut self.coordinator;
                    coordinator.unload_partition(*index, ErrorCode::NotCoordinator, &mut out);
                }
            }
            let mut newly_loaded = Vec::new();
            for (index, now) in &now_loaded {
                if self.loaded.get(index) != Some(now) {
                    tracing::info!(
                        partition = index,
                        epoch = now.1,
                        "coordinator of its groups"
                    );
                    newly_loaded.push((*index, now.0));
                }
            }
            self.loaded = now_loaded;
            for (index, partition) in newly_loaded {
                self.restore_groups(cx.host, cx.now_ms, cx.now_wall_ms, index, partition);
            }
            let _ = self.persist_group_metadata(cx, env);
        }
        self.deliver_group_outbox(out)?;
        self.release_held_syncs(cx.host, None)?;
        self.check_group_writes(cx.host)
    }

    /// The coordinator's deadlines (sessions, join phases, syncs) and the writes' timeouts.
    pub(super) fn tick(
        &mut self,
        cx: &mut Cx,
        env: GroupsEnv,
        now_ms: u64,
    ) -> Result<(), NodeError> {
        let mut out = Outbox::new();
        self.coordinator.tick(now_ms, &mut out);
        self.deliver_group_outbox(out)?;
        let _ = self.persist_group_metadata(cx, env);
        self.release_held_syncs(cx.host, Some(now_ms))?;
        self.expire_group_writes(now_ms)?;
        self.maybe_expire_offsets(cx, env, now_ms)
    }

    /// Shutdown: every held request is answered NOT_COORDINATOR.
    pub(super) fn fail_all(&mut self) -> Result<(), NodeError> {
        let mut out = Outbox::new();
        let coordinator = &mut self.coordinator;
        coordinator.unload_all(ErrorCode::NotCoordinator, &mut out);
        self.loaded.clear();
        self.deliver_group_outbox(out)?;
        self.fail_held_syncs()?;
        self.fail_group_writes(ErrorCode::NotCoordinator)
    }

    fn hold(&mut self, responder: Responder, header: &RequestHeader) -> ReplyToken {
        let token = ReplyToken(self.next_token);
        self.next_token += 1;
        self.waiting.insert(
            token,
            WaitingReply {
                responder,
                correlation_id: header.correlation_id,
                version: header.api_version,
            },
        );
        token
    }

    /// Sends the coordinator's answers to their connections.
    pub(super) fn deliver_group_outbox(&mut self, out: Outbox) -> Result<(), NodeError> {
        for (token, reply) in out {
            let Some(waiting) = self.waiting.remove(&token) else {
                tracing::warn!(?token, "a group answer for no waiting request");
                continue;
            };
            let response = match reply {
                Reply::Join(result) => Response::JoinGroup(join_response(result, waiting.version)),
                Reply::Sync(result) => Response::SyncGroup(sync_response(result)),
            };
            let frame = encode_response(waiting.correlation_id, waiting.version, &response)?;
            waiting.responder.send(Some(frame));
        }
        Ok(())
    }

    // ---- FindCoordinator ----------------------------------------------------------------

    fn handle_find_coordinator(
        &mut self,
        cx: &mut Cx,
        env: GroupsEnv,
        brokers: &[md_resp::MetadataResponseBroker],
        request: &fc_req::FindCoordinatorRequest,
        version: i16,
    ) -> fc_resp::FindCoordinatorResponse {
        let keys = if version >= 4 {
            request.coordinator_keys.clone()
        } else {
            vec![request.key.clone()]
        };
        let coordinators: Vec<fc_resp::Coordinator> = keys
            .into_iter()
            .map(|key| {
                let found = self.find_coordinator_of(cx, env, brokers, &key, request.key_type);
                let mut answer = fc_resp::Coordinator {
                    key,
                    node_id: -1,
                    host: String::new(),
                    port: -1,
                    error_code: 0,
                    error_message: None,
                };
                match found {
                    Ok((node_id, host, port)) => {
                        (answer.node_id, answer.host, answer.port) = (node_id, host, port)
                    }
                    Err((code, message)) => {
                        answer.error_code = code.code();
                        answer.error_message = Some(message.to_string());
                    }
                }
                answer
            })
            .collect();
        if version >= 4 {
            return fc_resp::FindCoordinatorResponse {
                coordinators,
                ..Default::default()
            };
        }
        let one = coordinators.into_iter().next().expect("one key");
        fc_resp::FindCoordinatorResponse {
            throttle_time_ms: 0,
            error_code: one.error_code,
            error_message: one.error_message,
            node_id: one.node_id,
            host: one.host,
            port: one.port,
            coordinators: Vec::new(),
        }
    }

    /// The leader of the group's `__consumer_offsets` partition and its address among
    /// `brokers` (Kafka answers the leader even while it loads; the group requests then say
    /// COORDINATOR_LOAD_IN_PROGRESS).
    fn find_coordinator_of(
        &mut self,
        cx: &mut Cx,
        env: GroupsEnv,
        brokers: &[md_resp::MetadataResponseBroker],
        key: &str,
        key_type: i8,
    ) -> Result<(i32, String, i32), (ErrorCode, &'static str)> {
        match key_type {
            0 => {}
            1 => return Err((ErrorCode::InvalidRequest, "transactions are not supported")),
            _ => return Err((ErrorCode::InvalidRequest, "unknown coordinator key type")),
        }
        if key.is_empty() {
            return Err((ErrorCode::InvalidRequest, "empty group id"));
        }
        let Some(partitions) = offsets_topic_partitions(env.topics) else {
            self.request_offsets_topic(cx, env);
            return Err((
                ErrorCode::CoordinatorNotAvailable,
                "__consumer_offsets is being created",
            ));
        };
        let index = offsets::partition_for(key, partitions);
        let leader = cx
            .table
            .find(OFFSETS_TOPIC, index)
            .and_then(|p| cx.host.raft(p))
            .and_then(|r| r.leader_id())
            .ok_or((
                ErrorCode::CoordinatorNotAvailable,
                "the group's partition has no leader",
            ))?;
        brokers
            .iter()
            .find(|b| b.node_id == leader)
            .map(|b| (b.node_id, b.host.clone(), b.port))
            .ok_or((
                ErrorCode::CoordinatorNotAvailable,
                "the leader's address is unknown",
            ))
    }

    // ---- ListGroups, DescribeGroups -------------------------------------------------------

    /// The groups of every partition this node coordinates: those with members (from the
    /// coordinator) and those that only have committed offsets (Empty, no protocol type).
    fn handle_list_groups(
        &self,
        cx: &Cx,
        request: &ls_req::ListGroupsRequest,
    ) -> ls_resp::ListGroupsResponse {
        let classic = request.types_filter.is_empty()
            || request
                .types_filter
                .iter()
                .any(|t| t.eq_ignore_ascii_case("classic"));
        let states: Vec<Option<GroupState>> = request
            .states_filter
            .iter()
            .map(|s| GroupState::parse(s))
            .collect();
        let wanted = |state: GroupState| states.is_empty() || states.contains(&Some(state));
        let mut groups = Vec::new();
        if classic {
            let coordinator = &self.coordinator;
            for listed in coordinator.list() {
                if self.is_loaded(listed.partition) && wanted(listed.state) {
                    groups.push(listed_group(
                        listed.group_id,
                        listed.protocol_type,
                        listed.state,
                    ));
                }
            }
            for (_, (partition, _)) in self.loaded.iter() {
                let state = offsets_state(cx.host, *partition);
                // Groups not in memory: empty, with the protocol type of their metadata
                // record (none for a group that only has offsets).
                let mut empty: BTreeMap<String, String> =
                    crate::groups::metadata::all_group_metadata(state)
                        .into_iter()
                        .map(|(group_id, record)| (group_id, record.protocol_type))
                        .collect();
                for group_id in offsets::groups_with_offsets(state) {
                    empty.entry(group_id).or_default();
                }
                for (group_id, protocol_type) in empty {
                    if !coordinator.contains(&group_id) && wanted(GroupState::Empty) {
                        groups.push(listed_group(group_id, protocol_type, GroupState::Empty));
                    }
                }
            }
        }
        ls_resp::ListGroupsResponse {
            groups,
            ..Default::default()
        }
    }

    fn handle_describe_groups(
        &mut self,
        cx: &mut Cx,
        env: GroupsEnv,
        request: &dg_req::DescribeGroupsRequest,
        requester: &super::authorize::Requester,
    ) -> dg_resp::DescribeGroupsResponse {
        let groups = request
            .groups
            .iter()
            .map(|group_id| {
                let mut described = dg_resp::DescribedGroup {
                    group_id: group_id.clone(),
                    ..Default::default()
                };
                if !cx.authorizer().allowed(
                    requester,
                    crate::protocol::ApiKey::DescribeGroups,
                    group_id,
                ) {
                    described.error_code = ErrorCode::GroupAuthorizationFailed.code();
                    return described;
                }
                // v3+: the operations on the group the requester may perform, when asked.
                if request.include_authorized_operations {
                    described.authorized_operations = cx.authorizer().authorized_operations(
                        requester,
                        crate::acl::ResourceType::Group,
                        group_id,
                    );
                }
                let partition = match self.group_coordinator(cx, env, group_id) {
                    Ok((_, partition)) => partition,
                    Err(code) => {
                        described.error_code = code.code();
                        return described;
                    }
                };
                match self.coordinator.describe(group_id) {
                    Some(group) => {
                        described.group_state = group.state.name().to_string();
                        described.protocol_type = group.protocol_type;
                        described.protocol_data = group.protocol_name;
                        described.members = group
                            .members
                            .into_iter()
                            .map(|m| dg_resp::DescribedGroupMember {
                                member_id: m.member_id,
                                group_instance_id: m.group_instance_id,
                                client_id: m.client_id,
                                client_host: m.client_host,
                                member_metadata: m.metadata,
                                member_assignment: m.assignment,
                            })
                            .collect();
                    }
                    // Kafka's answers: a group with only offsets (or an empty metadata record)
                    // is Empty; no group is Dead.
                    None if offsets::has_offsets(offsets_state(cx.host, partition), group_id)
                        || crate::groups::metadata::group_metadata(
                            offsets_state(cx.host, partition),
                            group_id,
                        )
                        .is_some() =>
                    {
                        described.group_state = GroupState::Empty.name().to_string();
                        described.protocol_type = crate::groups::metadata::group_metadata(
                            offsets_state(cx.host, partition),
                            group_id,
                        )
                        .map(|m| m.protocol_type)
                        .unwrap_or_default();
                    }
                    None => described.group_state = GroupState::Dead.name().to_string(),
                }
                described
            })
            .collect();
        dg_resp::DescribeGroupsResponse {
            throttle_time_ms: 0,
            groups,
        }
    }
}

/// The partition count of `__consumer_offsets`, once its record is applied here.
pub(super) fn offsets_topic_partitions(topics: &Topics) -> Option<i32> {
    topics.image.get(OFFSETS_TOPIC).map(|t| t.partitions)
}

/// The committed offsets of a `__consumer_offsets` partition: its key-value state.
pub(super) fn offsets_state(host: &Host<AnyIo>, partition: PartitionId) -> &BTreeMap<Bytes, Bytes> {
    host.store(partition)
        .expect("hosted partition")
        .snapshots
        .state_machine
        .entries()
}

/// The epoch in which this node leads `partition` with a state machine that applied the
/// record opening that epoch, so every record committed before it: a coordinator's
/// offsets (or a controller's topic image) are complete from then on.
pub(super) fn caught_up_leader_epoch(host: &Host<AnyIo>, partition: PartitionId) -> Option<u32> {
    let raft = host.raft(partition)?;
    if !raft.is_leader() {
        return None;
    }
    let epoch = raft.epoch();
    let applied = host
        .store(partition)?
        .snapshots
        .state_machine
        .last_applied_offset();
    super::controller::applied_past_epoch_start(raft.log(), epoch, applied).then_some(epoch)
}

fn listed_group(
    group_id: String,
    protocol_type: String,
    state: GroupState,
) -> ls_resp::ListedGroup {
    ls_resp::ListedGroup {
        group_id,
        protocol_type,
        group_state: state.name().to_string(),
        group_type: "classic".to_string(),
    }
}
