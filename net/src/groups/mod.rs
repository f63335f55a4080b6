//! Consumer groups, the classic protocol (docs/groups.md): the group coordinator's membership
//! state machine and the committed offsets' record format.
//!
//! The coordinator is pure: it never touches a socket, a file, a thread or the clock. The node
//! hands it each request with `now_ms` and a [`ReplyToken`] naming the request's answer slot;
//! the coordinator answers at once or later (a JoinGroup waits for the join phase, a follower's
//! SyncGroup for the leader's assignment) by pushing `(token, Reply)` into an outbox the node
//! drains. Time moves only through `tick(now_ms)`, and `next_deadline_ms()` tells the node's
//! loop when to wake. Assignors run in the clients: the leader's JoinGroup answer carries
//! every member's subscription, its SyncGroup brings the assignment back.
//!
//! States and transitions (Kafka's `GroupMetadata`; `group::TRANSITIONS` is the same table in
//! code, tested exhaustively):
//!
//! ```text
//!            first JoinGroup                 every member joined, or the join deadline
//!   Empty ───────────────────▶ PreparingRebalance ──────────────────────▶ CompletingRebalance
//!     ▲                          │  ▲   ▲                                   │        │
//!     │ join phase ends with     │  │   │ a member joins, leaves, changes   │        │ leader's
//!     └──── no member ───────────┘  │   │ or is lost (session, sync timeout)│        │ SyncGroup
//!                                   │   └───────────────────────────────────┘        ▼
//!                                   └────────────── same ─────────────────────── Stable
//! ```
//!
//! A group that ends up Empty with no members is dropped from memory: it lives on only through
//! its committed offsets (the node's `__consumer_offsets` state), which is where DescribeGroups,
//! ListGroups and DeleteGroups look for it. Its generation restarts at 1 with the next member;
//! member ids are never reused, so a member of an earlier generation is still refused.

mod coordinator;
mod group;
mod join;
pub mod metadata;
pub mod offsets;

#[cfg(test)]
mod tests;

use bytes::Bytes;

pub use coordinator::{Coordinator, GroupDescription, ListedGroup, MemberDescription};
pub use group::{GroupState, TRANSITIONS, subscription_topics, transition_allowed};

use crate::protocol::ErrorCode;

/// A new member that joined but never completed a join phase is dropped after this long
/// (Kafka's `NewMemberJoinTimeoutMs`, 5 minutes): its client may have given up on the request.
pub const NEW_MEMBER_JOIN_TIMEOUT_MS: u64 = 5 * 60 * 1000;

/// The group settings, under Kafka's broker property names (docs/configuration.md).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupConfig {
    /// `offsets.topic.num.partitions`: partitions of `__consumer_offsets` when the node creates it.
    pub offsets_topic_num_partitions: i32,
    /// `offsets.topic.segment.bytes`: its segment size.
    pub offsets_topic_segment_bytes: i64,
    /// `offsets.commit.timeout.ms`: an OffsetCommit not committed by then is REQUEST_TIMED_OUT.
    pub offsets_commit_timeout_ms: u64,
    /// `offset.metadata.max.bytes`: longer commit metadata is OFFSET_METADATA_TOO_LARGE.
    pub offset_metadata_max_bytes: usize,
    /// `offsets.retention.minutes`, in ms: how long the offsets of a group without members
    /// are kept (KIP-211).
    pub offsets_retention_ms: u64,
    /// `offsets.retention.check.interval.ms`: how often the coordinator looks for them.
    pub offsets_retention_check_interval_ms: u64,
    /// `group.initial.rebalance.delay.ms`: how long an Empty group's first join phase waits
    /// for more members.
    pub initial_rebalance_delay_ms: u64,
    /// `group.min.session.timeout.ms` and `group.max.session.timeout.ms`: the session
    /// timeouts a JoinGroup may ask for (INVALID_SESSION_TIMEOUT outside).
    pub min_session_timeout_ms: u64,
    pub max_session_timeout_ms: u64,
}

impl Default for GroupConfig {
    fn default() -> Self {
        GroupConfig {
            offsets_topic_num_partitions: 50,
            offsets_topic_segment_bytes: 104_857_600,
            offsets_commit_timeout_ms: 5_000,
            offset_metadata_max_bytes: 4096,
            offsets_retention_ms: 7 * 24 * 60 * 60 * 1000,
            offsets_retention_check_interval_ms: 600_000,
            initial_rebalance_delay_ms: 3_000,
            min_session_timeout_ms: 6_000,
            max_session_timeout_ms: 1_800_000,
        }
    }
}

/// Names the answer slot of a waiting request; chosen by the node, opaque here.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ReplyToken(pub u64);

/// A JoinGroup, version-independent (the node fills the fields older versions lack).
#[derive(Clone, Debug, Default)]
pub struct JoinRequest {
    pub group_id: String,
    /// Empty for a member that has no id yet.
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout_ms: u64,
    /// JoinGroup v0 has none: the node passes the session timeout.
    pub rebalance_timeout_ms: u64,
    pub protocol_type: String,
    /// (name, metadata): the metadata copied out of the request frame.
    pub protocols: Vec<(String, Bytes)>,
    /// JoinGroup v4+ (KIP-394): a new dynamic member first gets its id with
    /// MEMBER_ID_REQUIRED and joins again with it.
    pub require_known_member_id: bool,
}

/// One member as the leader's JoinGroup answer lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JoinedMember {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub metadata: Bytes,
}

/// A JoinGroup answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JoinResult {
    pub error: ErrorCode,
    pub generation_id: i32,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub leader: String,
    pub member_id: String,
    /// Only the leader's answer lists the members.
    pub members: Vec<JoinedMember>,
}

impl JoinResult {
    pub fn error(error: ErrorCode, member_id: &str) -> JoinResult {
        JoinResult {
            error,
            generation_id: -1,
            protocol_type: None,
            protocol_name: None,
            leader: String::new(),
            member_id: member_id.to_string(),
            members: Vec::new(),
        }
    }
}

/// A SyncGroup, version-independent.
#[derive(Clone, Debug, Default)]
pub struct SyncRequest {
    pub group_id: String,
    pub member_id: String,
    pub generation_id: i32,
    pub group_instance_id: Option<String>,
    /// v5+: checked against the group's when present.
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    /// The leader's assignment, by member id (others send none).
    pub assignments: Vec<(String, Bytes)>,
}

/// A SyncGroup answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SyncResult {
    pub error: ErrorCode,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub assignment: Bytes,
}

impl SyncResult {
    pub fn error(error: ErrorCode) -> SyncResult {
        SyncResult {
            error,
            protocol_type: None,
            protocol_name: None,
            assignment: Bytes::new(),
        }
    }
}

/// An answer to a request the coordinator held.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    Join(JoinResult),
    Sync(SyncResult),
}

/// Answers the coordinator produced, in order; the node sends each to its token's slot.
pub type Outbox = Vec<(ReplyToken, Reply)>;

/// One member leaving (LeaveGroup v3+ lists several; v0-2 one, without an instance id).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LeavingMember {
    /// Empty with an instance id: the static member holding that id leaves.
    pub member_id: String,
    pub group_instance_id: Option<String>,
}
