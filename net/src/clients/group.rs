//! A consumer in a consumer group (Kafka's classic protocol, docs/groups.md), on top of the
//! KIP-320 [`Consumer`]: it finds the group's coordinator (FindCoordinator), joins
//! (JoinGroup), runs the range assignor when it is the group's leader, takes its assignment
//! (SyncGroup), keeps its session (Heartbeat), commits positions with their leader epochs
//! (OffsetCommit v8, `CommittedLeaderEpoch`) and leaves (LeaveGroup).
//!
//! KIP-320, "Consumer Handling": a committed offset carries the leader epoch of the record
//! before it, and a consumer resuming there first validates it. After every assignment the
//! member reads its partitions' committed (offset, leader epoch) with OffsetFetch v7 and
//! positions the consumer with [`Consumer::seek_with_epoch`], so the first thing done for that
//! partition is an OffsetForLeaderEpoch: if the leader's log diverged below the committed
//! offset (its epoch ends earlier), `poll` returns [`ConsumerError::LogTruncation`] (with
//! `auto.offset.reset` none) or moves to the divergence point, never fetching from a position
//! the log no longer has. A committed offset without an epoch (-1, an older client) is a plain
//! seek; a partition without one is reset by `auto.offset.reset`.
//!
//! | event | then |
//! | --- | --- |
//! | no coordinator known, NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, a lost connection | FindCoordinator again, then retry |
//! | COORDINATOR_LOAD_IN_PROGRESS | retry after `retry.backoff.ms` |
//! | JoinGroup MEMBER_ID_REQUIRED (KIP-394) | join again at once with the id it gave |
//! | UNKNOWN_MEMBER_ID | forget the member id, join again |
//! | Heartbeat REBALANCE_IN_PROGRESS | commit the positions (auto commit), join again |
//! | ILLEGAL_GENERATION, SyncGroup REBALANCE_IN_PROGRESS | join again |
//! | any other group error | returned as [`ConsumerError::Group`] |
//!
//! Blocking like the consumer, with one thread of its own, as Kafka's Java consumer: the
//! session is kept by a heartbeat thread (heartbeat.rs) that sends Heartbeat every
//! `heartbeat.interval.ms` while the member holds an assignment, whatever the caller does
//! between two `poll`s; what bounds that time is `max.poll.interval.ms` (past it the thread
//! leaves the group, and the next `poll` joins again). The thread reports what the
//! coordinator answered and `poll` acts on it (commit and rejoin on a rebalance, find the
//! coordinator again, …).

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use super::TopicPartition;
pub use super::assignor::{
    decode_assignment, encode_assignment, encode_subscription, range_assign,
};
use super::consumer::{Consumer, ConsumerConfig, ConsumerError, ConsumerRecord};
use super::heartbeat::{HeartbeatEvent, HeartbeatThread, HeartbeatTiming, Session};
use super::transport::{Connections, Target, Transport, fetch_metadata};
use crate::client::ClientError;
use crate::protocol::{
    ErrorCode, Request, Response, find_coordinator_request, join_group_request,
    leave_group_request, offset_commit_request, offset_fetch_request, sync_group_request,
};

mod coordinator_requests;

/// Versions the group member speaks (the node serves them, docs/groups.md).
pub const FIND_COORDINATOR_VERSION: i16 = 3;
pub const JOIN_GROUP_VERSION: i16 = 7;
pub const SYNC_GROUP_VERSION: i16 = 5;
pub const HEARTBEAT_VERSION: i16 = 4;
pub const LEAVE_GROUP_VERSION: i16 = 4;
/// v6+ carries CommittedLeaderEpoch (KIP-320).
pub const OFFSET_COMMIT_VERSION: i16 = 8;
/// v5+ answers the committed leader epoch (KIP-320); v7 is the last with one group.
pub const OFFSET_FETCH_VERSION: i16 = 7;

/// The protocol type and the one assignor this member offers (it runs when the member leads).
pub const PROTOCOL_TYPE: &str = "consumer";
pub const RANGE_ASSIGNOR: &str = "range";

/// Kafka's group settings of a consumer, with Kafka's defaults.
#[derive(Clone, Debug)]
pub struct GroupConsumerConfig {
    pub group_id: String,
    /// `group.instance.id` (KIP-345): a static member.
    pub group_instance_id: Option<String>,
    pub session_timeout_ms: i32,
    /// `max.poll.interval.ms`: the rebalance timeout sent in JoinGroup.
    pub max_poll_interval_ms: i32,
    pub heartbeat_interval_ms: u64,
    /// `enable.auto.commit`: positions are committed every `auto.commit.interval.ms`, before
    /// rejoining a rebalance and at `close`.
    pub enable_auto_commit: bool,
    pub auto_commit_interval_ms: u64,
}

impl GroupConsumerConfig {
    pub fn new(group_id: impl Into<String>) -> GroupConsumerConfig {
        GroupConsumerConfig {
            group_id: group_id.into(),
            group_instance_id: None,
            session_timeout_ms: 45_000,
            max_poll_interval_ms: 300_000,
            heartbeat_interval_ms: 3_000,
            enable_auto_commit: true,
            auto_commit_interval_ms: 5_000,
        }
    }
}

/// A committed position as OffsetFetch answers it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CommittedOffset {
    pub offset: i64,
    /// KIP-320: the leader epoch of the record before `offset`; -1 when not known.
    pub leader_epoch: i32,
}

/// Where the member stands in the group.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Membership {
    /// Not in the current generation: JoinGroup next.
    Unjoined,
    /// In `generation_id` with an assignment.
    Stable { generation_id: i32 },
}

/// What a failed group request tells the member to do.
enum Retry {
    /// Find the coordinator again.
    Rediscover,
    /// Join again (the generation moved on, or the member id is gone).
    Rejoin,
    /// Wait `retry.backoff.ms` and ask again.
    Backoff,
}

pub struct GroupConsumer<T: Transport = Connections> {
    consumer: Consumer<T>,
    /// Connections for the coordinator's requests: JoinGroup and SyncGroup may be held for up
    /// to the rebalance timeout, longer than a Fetch's connection waits.
    coordinator_transport: T,
    config: GroupConsumerConfig,
    topics: Vec<String>,
    /// The coordinator's node id and `host:port`.
    coordinator: Option<(i32, String)>,
    member_id: String,
    membership: Membership,
    heartbeat: HeartbeatThread,
    last_auto_commit: Instant,
}

impl GroupConsumer<Connections> {
    /// A group member of the nodes behind `bootstrap` (comma-separated host:port).
    pub fn connect(
        bootstrap: &str,
        consumer_config: ConsumerConfig,
        config: GroupConsumerConfig,
    ) -> GroupConsumer<Connections> {
        let coordinator_timeout =
            Duration::from_millis(config.max_poll_interval_ms.max(0) as u64 + 5_000);
        let coordinator_transport = Connections::new(bootstrap, coordinator_timeout);
        let heartbeat_transport = Connections::new(
            bootstrap,
            Duration::from_millis(config.session_timeout_ms.max(0) as u64),
        );
        GroupConsumer::with_transports(
            Consumer::connect(bootstrap, consumer_config),
            coordinator_transport,
            Box::new(heartbeat_transport),
            config,
        )
    }
}

impl<T: Transport> GroupConsumer<T> {
    /// `heartbeat_transport` is the heartbeat thread's own (heartbeat.rs).
    ///
    /// # Panics
    /// When the heartbeat thread cannot be started (the process is out of threads).
    pub fn with_transports(
        consumer: Consumer<T>,
        coordinator_transport: T,
        heartbeat_transport: Box<dyn Transport + Send>,
        config: GroupConsumerConfig,
    ) -> GroupConsumer<T> {
        let timing = HeartbeatTiming {
            heartbeat_interval: Duration::from_millis(config.heartbeat_interval_ms),
            max_poll_interval: Duration::from_millis(config.max_poll_interval_ms.max(0) as u64),
            retry_backoff: Duration::from_millis(consumer.config.retry_backoff_ms),
        };
        let heartbeat = HeartbeatThread::spawn(heartbeat_transport, timing)
            .expect("starting the group member's heartbeat thread");
        GroupConsumer {
            consumer,
            coordinator_transport,
            config,
            topics: Vec::new(),
            coordinator: None,
            member_id: String::new(),
            membership: Membership::Unjoined,
            heartbeat,
            last_auto_commit: Instant::now(),
        }
    }

    /// The topics to consume; the group's partitions of them are shared out at the next
    /// `poll` (a change rejoins the group).
    pub fn subscribe(&mut self, topics: impl IntoIterator<Item = String>) {
        let topics: BTreeSet<String> = topics.into_iter().collect();
        self.topics = topics.into_iter().collect();
        self.membership = Membership::Unjoined;
    }

    /// The partitions this member was assigned in its current generation.
    pub fn assignment(&self) -> Vec<TopicPartition> {
        match self.membership {
            Membership::Stable { .. } => self.consumer.assignment(),
            Membership::Unjoined => Vec::new(),
        }
    }

    /// The generation this member is in, if any.
    pub fn generation_id(&self) -> Option<i32> {
        match self.membership {
            Membership::Stable { generation_id } => Some(generation_id),
            Membership::Unjoined => None,
        }
    }

    pub fn member_id(&self) -> &str {
        &self.member_id
    }

    /// The consumer underneath (positions, seeks).
    pub fn consumer(&mut self) -> &mut Consumer<T> {
        &mut self.consumer
    }

    /// Joins the group if needed, keeps the session, and fetches until records arrive or
    /// `timeout` passes (a rebalance may make it take longer: a JoinGroup waits for the other
    /// members). A detected log truncation (KIP-320) and fatal group errors are returned.
    pub fn poll(&mut self, timeout: Duration) -> Result<Vec<ConsumerRecord>, ConsumerError> {
        let deadline = Instant::now() + timeout;
        if self.topics.is_empty() {
            std::thread::sleep(timeout);
            return Ok(Vec::new());
        }
        self.heartbeat.polled();
        loop {
            self.ensure_active(deadline)?;
            self.act_on_heartbeat()?;
            if self.membership == Membership::Unjoined {
                continue;
            }
            self.maybe_auto_commit()?;
            // Back at least every heartbeat interval to act on what the thread learned.
            let wait = deadline
                .min(Instant::now() + Duration::from_millis(self.config.heartbeat_interval_ms))
                .saturating_duration_since(Instant::now());
            if self.consumer.assignment().is_empty() {
                // A member the leader gave nothing (more members than partitions) only keeps
                // its session.
                std::thread::sleep(wait);
                if Instant::now() >= deadline {
                    return Ok(Vec::new());
                }
                continue;
            }
            let records = self.consumer.poll(wait)?;
            if !records.is_empty() {
                return Ok(records);
            }
            if Instant::now() >= deadline {
                return Ok(Vec::new());
            }
        }
    }

    /// Commits the consumer's positions (offset and the epoch of the record before it) of
    /// every assigned partition that has one (Kafka's `commitSync()`).
    pub fn commit(&mut self) -> Result<(), ConsumerError> {
        let offsets: Vec<(TopicPartition, CommittedOffset)> = self
            .consumer
            .assignment()
            .into_iter()
            .filter_map(|tp| {
                let position = self.consumer.fetch_position(&tp)?;
                (position.offset >= 0).then(|| {
                    let committed = CommittedOffset {
                        offset: position.offset,
                        leader_epoch: position.offset_epoch.unwrap_or(-1),
                    };
                    (tp, committed)
                })
            })
            .collect();
        self.commit_offsets(&offsets)
    }

    /// Commits the given positions as this member (its generation; -1 outside one, which the
    /// coordinator accepts only while the group has no member). Answered once the commit is in
    /// `__consumer_offsets`' log on a majority (acks=all).
    pub fn commit_offsets(
        &mut self,
        offsets: &[(TopicPartition, CommittedOffset)],
    ) -> Result<(), ConsumerError> {
        if offsets.is_empty() {
            return Ok(());
        }
        let deadline =
            Instant::now() + Duration::from_millis(self.consumer.config.default_api_timeout_ms);
        let mut topics: Vec<offset_commit_request::OffsetCommitRequestTopic> = Vec::new();
        for (tp, committed) in offsets {
            let partition = offset_commit_request::OffsetCommitRequestPartition {
                partition_index: tp.partition,
                committed_offset: committed.offset,
                committed_leader_epoch: committed.leader_epoch,
                committed_metadata: Some(String::new()),
            };
            match topics.iter_mut().find(|t| t.name == tp.topic) {
                Some(topic) => topic.partitions.push(partition),
                None => topics.push(offset_commit_request::OffsetCommitRequestTopic {
                    name: tp.topic.clone(),
                    partitions: vec![partition],
                }),
            }
        }
        let generation_id = self.generation_id().unwrap_or(-1);
        let member_id = if generation_id < 0 {
            String::new()
        } else {
            self.member_id.clone()
        };
        let request = Request::OffsetCommit(offset_commit_request::OffsetCommitRequest {
            group_id: self.config.group_id.clone(),
            generation_id_or_member_epoch: generation_id,
            member_id,
            group_instance_id: self.config.group_instance_id.clone(),
            topics,
            ..Default::default()
        });
        loop {
            let response = self.coordinator_request(&request, OFFSET_COMMIT_VERSION, deadline)?;
            let Response::OffsetCommit(response) = response else {
                return Err(ClientError::Protocol("not an OffsetCommit answer".into()).into());
            };
            let first_error = response
                .topics
                .iter()
                .flat_map(|t| t.partitions.iter())
                .map(|p| {
                    ErrorCode::from_code(p.error_code).unwrap_or(ErrorCode::UnknownServerError)
                })
                .find(|e| !e.is_none());
            let Some(error) = first_error else {
                tracing::debug!(group = %self.config.group_id, count = offsets.len(), "offsets committed");
                return Ok(());
            };
            match self.classify(error) {
                Some(Retry::Rejoin) | None => {
                    // The generation we commit for is gone: these positions may belong to
                    // another member now (Kafka's CommitFailedException).
                    return Err(self.group_error("OffsetCommit", error));
                }
                Some(retry) => self.retry(retry, "OffsetCommit", error, deadline)?,
            }
        }
    }

    /// The committed positions of `partitions` (OffsetFetch v7); partitions without one are
    /// left out.
    pub fn committed(
        &mut self,
        partitions: &[TopicPartition],
    ) -> Result<BTreeMap<TopicPartition, CommittedOffset>, ConsumerError> {
        let deadline =
            Instant::now() + Duration::from_millis(self.consumer.config.default_api_timeout_ms);
        let mut topics: Vec<offset_fetch_request::OffsetFetchRequestTopic> = Vec::new();
        for tp in partitions {
            match topics.iter_mut().find(|t| t.name == tp.topic) {
                Some(topic) => topic.partition_indexes.push(tp.partition),
                None => topics.push(offset_fetch_request::OffsetFetchRequestTopic {
                    name: tp.topic.clone(),
                    partition_indexes: vec![tp.partition],
                }),
            }
        }
        let request = Request::OffsetFetch(offset_fetch_request::OffsetFetchRequest {
            group_id: self.config.group_id.clone(),
            topics: Some(topics),
            ..Default::default()
        });
        loop {
            let response = self.coordinator_request(&request, OFFSET_FETCH_VERSION, deadline)?;
            let Response::OffsetFetch(response) = response else {
                return Err(ClientError::Protocol("not an OffsetFetch answer".into()).into());
            };
            let top_error =
                ErrorCode::from_code(response.error_code).unwrap_or(ErrorCode::UnknownServerError);
            let partition_error = response
                .topics
                .iter()
                .flat_map(|t| t.partitions.iter())
                .map(|p| {
                    ErrorCode::from_code(p.error_code).unwrap_or(ErrorCode::UnknownServerError)
                })
                .find(|e| !e.is_none());
            let error = if top_error.is_none() {
                partition_error
            } else {
                Some(top_error)
            };
            if let Some(error) = error {
                match self.classify(error) {
                    Some(Retry::Rejoin) | None => {
                        return Err(self.group_error("OffsetFetch", error));
                    }
                    Some(retry) => {
                        self.retry(retry, "OffsetFetch", error, deadline)?;
                        continue;
                    }
                }
            }
            let mut committed = BTreeMap::new();
            for topic in &response.topics {
                for p in &topic.partitions {
                    if p.committed_offset < 0 {
                        continue;
                    }
                    committed.insert(
                        TopicPartition::new(topic.name.clone(), p.partition_index),
                        CommittedOffset {
                            offset: p.committed_offset,
                            leader_epoch: p.committed_leader_epoch,
                        },
                    );
                }
            }
            return Ok(committed);
        }
    }

    /// Commits (auto commit) and leaves the group (LeaveGroup), so the others take its
    /// partitions over at once instead of after its session timeout. A static member keeps
    /// its place (KIP-345: it does not send LeaveGroup).
    pub fn close(mut self) -> Result<(), ConsumerError> {
        let commit = if self.config.enable_auto_commit && self.generation_id().is_some() {
            self.commit()
        } else {
            Ok(())
        };
        let leave = self.leave_group();
        commit.and(leave)
    }

    fn leave_group(&mut self) -> Result<(), ConsumerError> {
        if self.member_id.is_empty() || self.config.group_instance_id.is_some() {
            return Ok(());
        }
        let request = Request::LeaveGroup(leave_group_request::LeaveGroupRequest {
            group_id: self.config.group_id.clone(),
            members: vec![leave_group_request::MemberIdentity {
                member_id: self.member_id.clone(),
                group_instance_id: None,
                reason: Some("the consumer is closing".to_string()),
            }],
            ..Default::default()
        });
        let deadline =
            Instant::now() + Duration::from_millis(self.consumer.config.request_timeout_ms);
        self.heartbeat.pause();
        self.membership = Membership::Unjoined;
        let response = self.coordinator_request(&request, LEAVE_GROUP_VERSION, deadline)?;
        let Response::LeaveGroup(response) = response else {
            return Err(ClientError::Protocol("not a LeaveGroup answer".into()).into());
        };
        let error = std::iter::once(response.error_code)
            .chain(response.members.iter().map(|m| m.error_code))
            .map(|c| ErrorCode::from_code(c).unwrap_or(ErrorCode::UnknownServerError))
            .find(|e| !e.is_none());
        self.member_id.clear();
        match error {
            // Already gone (its session ended, or a new coordinator never knew it).
            None | Some(ErrorCode::UnknownMemberId) => Ok(()),
            Some(error) => Err(self.group_error("LeaveGroup", error)),
        }
    }

    /// Joins and syncs until this member holds an assignment of the current generation.
    fn ensure_active(&mut self, deadline: Instant) -> Result<(), ConsumerError> {
        let join_deadline = deadline.max(
            Instant::now() + Duration::from_millis(self.config.max_poll_interval_ms.max(0) as u64),
        );
        while self.membership == Membership::Unjoined {
            self.heartbeat.pause();
            let Some((generation_id, assignment)) = self.join_and_sync(join_deadline)? else {
                continue;
            };
            tracing::info!(
                group = %self.config.group_id, member = %self.member_id, generation_id,
                partitions = ?assignment, "assigned"
            );
            self.consumer.assign(assignment.iter().cloned());
            self.membership = Membership::Stable { generation_id };
            if let Some(coordinator) = self.coordinator.clone() {
                self.heartbeat.start_session(Session {
                    group_id: self.config.group_id.clone(),
                    generation_id,
                    member_id: self.member_id.clone(),
                    group_instance_id: self.config.group_instance_id.clone(),
                    coordinator,
                });
            }
            self.position_at_committed(&assignment)?;
        }
        Ok(())
    }

    /// KIP-320: every assigned partition starts at its committed offset, validated against
    /// the leader's log with the committed leader epoch before the first fetch.
    fn position_at_committed(
        &mut self,
        assignment: &[TopicPartition],
    ) -> Result<(), ConsumerError> {
        if assignment.is_empty() {
            return Ok(());
        }
        let committed = self.committed(assignment)?;
        for tp in assignment {
            let Some(position) = committed.get(tp) else {
                // No commit: a partition kept from the previous generation keeps its
                // position, a new one is reset by auto.offset.reset.
                continue;
            };
            if position.leader_epoch >= 0 {
                self.consumer
                    .seek_with_epoch(tp, position.offset, position.leader_epoch)?;
            } else {
                self.consumer.seek(tp, position.offset)?;
            }
        }
        Ok(())
    }

    /// One JoinGroup + SyncGroup round. `None`: try again (the reason is handled).
    fn join_and_sync(
        &mut self,
        deadline: Instant,
    ) -> Result<Option<(i32, Vec<TopicPartition>)>, ConsumerError> {
        let request = Request::JoinGroup(join_group_request::JoinGroupRequest {
            group_id: self.config.group_id.clone(),
            session_timeout_ms: self.config.session_timeout_ms,
            rebalance_timeout_ms: self.config.max_poll_interval_ms,
            member_id: self.member_id.clone(),
            group_instance_id: self.config.group_instance_id.clone(),
            protocol_type: PROTOCOL_TYPE.to_string(),
            protocols: vec![join_group_request::JoinGroupRequestProtocol {
                name: RANGE_ASSIGNOR.to_string(),
                metadata: encode_subscription(&self.topics),
            }],
            reason: None,
        });
        let response = self.coordinator_request(&request, JOIN_GROUP_VERSION, deadline)?;
        let Response::JoinGroup(join) = response else {
            return Err(ClientError::Protocol("not a JoinGroup answer".into()).into());
        };
        let error = ErrorCode::from_code(join.error_code).unwrap_or(ErrorCode::UnknownServerError);
        match error {
            ErrorCode::None => {}
            // KIP-394: the coordinator hands out the id; join again with it.
            ErrorCode::MemberIdRequired => {
                self.member_id = join.member_id;
                return Ok(None);
            }
            other => {
                match self.classify(other) {
                    // A coordinator answering REBALANCE_IN_PROGRESS again and again is not
                    // asked in a tight loop.
                    Some(_) => self.retry(Retry::Backoff, "JoinGroup", other, deadline)?,
                    None => return Err(self.group_error("JoinGroup", other)),
                }
                return Ok(None);
            }
        }
        self.member_id = join.member_id.clone();
        let generation_id = join.generation_id;
        let assignments = if join.leader == join.member_id {
            let members: Vec<(String, Vec<String>)> = join
                .members
                .iter()
                .map(|m| {
                    let topics =
                        crate::groups::subscription_topics(&m.metadata).unwrap_or_default();
                    (m.member_id.clone(), topics)
                })
                .collect();
            let subscribed: BTreeSet<String> = members
                .iter()
                .flat_map(|(_, t)| t.iter().cloned())
                .collect();
            let partitions = self.partition_counts(&subscribed.into_iter().collect::<Vec<_>>())?;
            range_assign(&members, &partitions)
                .into_iter()
                .map(
                    |(member_id, assigned)| sync_group_request::SyncGroupRequestAssignment {
                        member_id,
                        assignment: encode_assignment(&assigned),
                    },
                )
                .collect()
        } else {
            Vec::new()
        };
        let request = Request::SyncGroup(sync_group_request::SyncGroupRequest {
            group_id: self.config.group_id.clone(),
            generation_id,
            member_id: self.member_id.clone(),
            group_instance_id: self.config.group_instance_id.clone(),
            protocol_type: Some(PROTOCOL_TYPE.to_string()),
            protocol_name: join.protocol_name.clone(),
            assignments,
        });
        let response = self.coordinator_request(&request, SYNC_GROUP_VERSION, deadline)?;
        let Response::SyncGroup(sync) = response else {
            return Err(ClientError::Protocol("not a SyncGroup answer".into()).into());
        };
        let error = ErrorCode::from_code(sync.error_code).unwrap_or(ErrorCode::UnknownServerError);
        if !error.is_none() {
            match self.classify(error) {
                Some(Retry::Rejoin) => {}
                Some(retry) => self.retry(retry, "SyncGroup", error, deadline)?,
                None => return Err(self.group_error("SyncGroup", error)),
            }
            return Ok(None);
        }
        let assignment = decode_assignment(&sync.assignment).ok_or_else(|| {
            ClientError::Protocol(format!(
                "SyncGroup of {}: an assignment that is not Kafka's consumer protocol",
                self.config.group_id
            ))
        })?;
        Ok(Some((generation_id, assignment)))
    }

    /// Partition counts of `topics` from Metadata (topics it does not know are left out).
    fn partition_counts(
        &mut self,
        topics: &[String],
    ) -> Result<BTreeMap<String, i32>, ConsumerError> {
        let metadata = fetch_metadata(self.consumer.transport_mut(), topics)?;
        let mut counts: BTreeMap<String, i32> = BTreeMap::new();
        for tp in metadata.partitions.keys() {
            let count = counts.entry(tp.topic.clone()).or_default();
            *count = (*count).max(tp.partition + 1);
        }
        Ok(counts)
    }

    /// Acts on what the heartbeat thread learned (heartbeat.rs's table).
    fn act_on_heartbeat(&mut self) -> Result<(), ConsumerError> {
        let Some(event) = self.heartbeat.take_event() else {
            return Ok(());
        };
        match event {
            // A rebalance: still a member of this generation, which may commit before
            // rejoining (so whoever gets these partitions resumes where we are).
            HeartbeatEvent::Rebalance => {
                tracing::info!(group = %self.config.group_id, "rebalance: rejoining");
                if self.config.enable_auto_commit
                    && let Err(error) = self.commit()
                {
                    tracing::warn!(group = %self.config.group_id, %error, "commit before rejoining failed");
                }
            }
            HeartbeatEvent::Rejoin { forget_member_id } => {
                if forget_member_id {
                    self.member_id.clear();
                }
            }
            HeartbeatEvent::CoordinatorLost => self.coordinator = None,
            // The thread left the group: join as a new member.
            HeartbeatEvent::PollIntervalExceeded => self.member_id.clear(),
            HeartbeatEvent::Fatal(error) => {
                self.membership = Membership::Unjoined;
                return Err(self.group_error("Heartbeat", error));
            }
        }
        self.membership = Membership::Unjoined;
        Ok(())
    }

    fn maybe_auto_commit(&mut self) -> Result<(), ConsumerError> {
        if !self.config.enable_auto_commit
            || self.last_auto_commit.elapsed()
                < Duration::from_millis(self.config.auto_commit_interval_ms)
        {
            return Ok(());
        }
        self.last_auto_commit = Instant::now();
        match self.commit() {
            Ok(()) => Ok(()),
            // A rebalance under way: the heartbeat finds out and rejoins.
            Err(ConsumerError::Group { error, .. })
                if matches!(
                    error,
                    ErrorCode::RebalanceInProgress
                        | ErrorCode::IllegalGeneration
                        | ErrorCode::UnknownMemberId
                ) =>
            {
                self.membership = Membership::Unjoined;
                if error == ErrorCode::UnknownMemberId {
                    self.member_id.clear();
                }
                Ok(())
            }
            Err(error) => Err(error),
        }
    }
}
