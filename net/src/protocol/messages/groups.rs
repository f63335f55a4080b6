//! Consumer groups, the classic protocol: FindCoordinator (10), JoinGroup (11), Heartbeat (12),
//! LeaveGroup (13), SyncGroup (14), DescribeGroups (15), ListGroups (16), DeleteGroups (42),
//! and the committed offsets: OffsetCommit (8), OffsetFetch (9), OffsetDelete (47).
//!
//! Written from Kafka's JSON schemas (`/work/shared/kafka-message-schemas/`). Fields of versions
//! we do not serve are left out where they belong only to older versions (OffsetCommit v1's
//! CommitTimestamp) or to newer ones that name topics by id (OffsetCommit/OffsetFetch v10).

pub mod find_coordinator_request {
    use crate::protocol::dsl::message;

    message! {
        pub struct FindCoordinatorRequest {
            /// v0-3: the one key (a group id, or a transactional id with KeyType 1).
            key: String { versions: 0..=3 },
            /// 0 group, 1 transaction (2 share, v6).
            key_type: i8 { versions: 1.. },
            /// v4+ (KIP-699): several keys of one type in one request.
            coordinator_keys: Vec<String> { versions: 4.. },
        }
    }
}

pub mod find_coordinator_response {
    use crate::protocol::dsl::message;

    message! {
        pub struct FindCoordinatorResponse {
            throttle_time_ms: i32 { versions: 1.. },
            error_code: i16 { versions: 0..=3 },
            error_message: Option<String> { versions: 1..=3, nullable: 1..=3, default: Some(String::new()) },
            node_id: i32 { versions: 0..=3 },
            host: String { versions: 0..=3 },
            port: i32 { versions: 0..=3 },
            coordinators: Vec<Coordinator> { versions: 4.. },
        }
    }

    message! {
        pub struct Coordinator {
            key: String { versions: 4.. },
            node_id: i32 { versions: 4.. },
            host: String { versions: 4.. },
            port: i32 { versions: 4.. },
            error_code: i16 { versions: 4.. },
            error_message: Option<String> { versions: 4.., nullable: 4.., default: Some(String::new()) },
        }
    }
}

pub mod join_group_request {
    use crate::protocol::dsl::message;
    use bytes::Bytes;

    message! {
        pub struct JoinGroupRequest {
            group_id: String { versions: 0.. },
            session_timeout_ms: i32 { versions: 0.. },
            /// v0 has none: the session timeout is the rebalance timeout.
            rebalance_timeout_ms: i32 { versions: 1.., default: -1 },
            member_id: String { versions: 0.. },
            /// KIP-345 static membership.
            group_instance_id: Option<String> { versions: 5.., nullable: 5.., default: None },
            protocol_type: String { versions: 0.. },
            protocols: Vec<JoinGroupRequestProtocol> { versions: 0.. },
            reason: Option<String> { versions: 8.., nullable: 8.., default: None },
        }
    }

    message! {
        pub struct JoinGroupRequestProtocol {
            name: String { versions: 0.. },
            metadata: Bytes { versions: 0.. },
        }
    }
}

pub mod join_group_response {
    use crate::protocol::dsl::message;
    use bytes::Bytes;

    message! {
        pub struct JoinGroupResponse {
            throttle_time_ms: i32 { versions: 2.. },
            error_code: i16 { versions: 0.. },
            generation_id: i32 { versions: 0.., default: -1 },
            protocol_type: Option<String> { versions: 7.., nullable: 7.., default: None },
            protocol_name: Option<String> { versions: 0.., nullable: 7.., default: Some(String::new()) },
            leader: String { versions: 0.. },
            skip_assignment: bool { versions: 9.. },
            member_id: String { versions: 0.. },
            /// Only the leader gets the members (with their subscriptions).
            members: Vec<JoinGroupResponseMember> { versions: 0.. },
        }
    }

    message! {
        pub struct JoinGroupResponseMember {
            member_id: String { versions: 0.. },
            group_instance_id: Option<String> { versions: 5.., nullable: 5.., default: None },
            metadata: Bytes { versions: 0.. },
        }
    }
}

pub mod heartbeat_request {
    use crate::protocol::dsl::message;

    message! {
        pub struct HeartbeatRequest {
            group_id: String { versions: 0.. },
            generation_id: i32 { versions: 0.. },
            member_id: String { versions: 0.. },
            group_instance_id: Option<String> { versions: 3.., nullable: 3.., default: None },
        }
    }
}

pub mod heartbeat_response {
    use crate::protocol::dsl::message;

    message! {
        pub struct HeartbeatResponse {
            throttle_time_ms: i32 { versions: 1.. },
            error_code: i16 { versions: 0.. },
        }
    }
}

pub mod leave_group_request {
    use crate::protocol::dsl::message;

    message! {
        pub struct LeaveGroupRequest {
            group_id: String { versions: 0.. },
            /// v0-2: the one member leaving.
            member_id: String { versions: 0..=2 },
            /// v3+ (KIP-345): several members, static ones by instance id.
            members: Vec<MemberIdentity> { versions: 3.. },
        }
    }

    message! {
        pub struct MemberIdentity {
            member_id: String { versions: 3.. },
            group_instance_id: Option<String> { versions: 3.., nullable: 3.., default: None },
            reason: Option<String> { versions: 5.., nullable: 5.., default: None },
        }
    }
}

pub mod leave_group_response {
    use crate::protocol::dsl::message;

    message! {
        pub struct LeaveGroupResponse {
            throttle_time_ms: i32 { versions: 1.. },
            error_code: i16 { versions: 0.. },
            members: Vec<MemberResponse> { versions: 3.. },
        }
    }

    message! {
        pub struct MemberResponse {
            member_id: String { versions: 3.. },
            group_instance_id: Option<String> { versions: 3.., nullable: 3.., default: Some(String::new()) },
            error_code: i16 { versions: 3.. },
        }
    }
}

pub mod sync_group_request {
    use crate::protocol::dsl::message;
    use bytes::Bytes;

    message! {
        pub struct SyncGroupRequest {
            group_id: String { versions: 0.. },
            generation_id: i32 { versions: 0.. },
            member_id: String { versions: 0.. },
            group_instance_id: Option<String> { versions: 3.., nullable: 3.., default: None },
            protocol_type: Option<String> { versions: 5.., nullable: 5.., default: None },
            protocol_name: Option<String> { versions: 5.., nullable: 5.., default: None },
            /// Only the leader sends assignments.
            assignments: Vec<SyncGroupRequestAssignment> { versions: 0.. },
        }
    }

    message! {
        pub struct SyncGroupRequestAssignment {
            member_id: String { versions: 0.. },
            assignment: Bytes { versions: 0.. },
        }
    }
}

pub mod sync_group_response {
    use crate::protocol::dsl::message;
    use bytes::Bytes;

    message! {
        pub struct SyncGroupResponse {
            throttle_time_ms: i32 { versions: 1.. },
            error_code: i16 { versions: 0.. },
            protocol_type: Option<String> { versions: 5.., nullable: 5.., default: None },
            protocol_name: Option<String> { versions: 5.., nullable: 5.., default: None },
            assignment: Bytes { versions: 0.. },
        }
    }
}

pub mod offset_commit_request {
    use crate::protocol::dsl::message;

    message! {
        pub struct OffsetCommitRequest {
            group_id: String { versions: 0.. },
            /// -1 for a commit outside group management (an admin or a simple consumer).
            generation_id_or_member_epoch: i32 { versions: 1.., default: -1 },
            member_id: String { versions: 1.. },
            group_instance_id: Option<String> { versions: 7.., nullable: 7.., default: None },
            retention_time_ms: i64 { versions: 2..=4, default: -1 },
            topics: Vec<OffsetCommitRequestTopic> { versions: 0.. },
        }
    }

    message! {
        pub struct OffsetCommitRequestTopic {
            name: String { versions: 0.. },
            partitions: Vec<OffsetCommitRequestPartition> { versions: 0.. },
        }
    }

    message! {
        pub struct OffsetCommitRequestPartition {
            partition_index: i32 { versions: 0.. },
            committed_offset: i64 { versions: 0.. },
            /// KIP-320: the leader epoch of the last record consumed before this offset.
            committed_leader_epoch: i32 { versions: 6.., default: -1 },
            committed_metadata: Option<String> { versions: 0.., nullable: 0.., default: Some(String::new()) },
        }
    }
}

pub mod offset_commit_response {
    use crate::protocol::dsl::message;

    message! {
        pub struct OffsetCommitResponse {
            throttle_time_ms: i32 { versions: 3.. },
            topics: Vec<OffsetCommitResponseTopic> { versions: 0.. },
        }
    }

    message! {
        pub struct OffsetCommitResponseTopic {
            name: String { versions: 0.. },
            partitions: Vec<OffsetCommitResponsePartition> { versions: 0.. },
        }
    }

    message! {
        pub struct OffsetCommitResponsePartition {
            partition_index: i32 { versions: 0.. },
            error_code: i16 { versions: 0.. },
        }
    }
}

pub mod offset_fetch_request {
    use crate::protocol::dsl::message;

    message! {
        pub struct OffsetFetchRequest {
            group_id: String { versions: 0..=7 },
            /// Null (v2+): every partition the group has an offset for.
            topics: Option<Vec<OffsetFetchRequestTopic>> { versions: 0..=7, nullable: 2..=7, default: Some(Vec::new()) },
            /// v8+ (KIP-709): several groups in one request.
            groups: Vec<OffsetFetchRequestGroup> { versions: 8.. },
            require_stable: bool { versions: 7.. },
        }
    }

    message! {
        pub struct OffsetFetchRequestTopic {
            name: String { versions: 0..=7 },
            partition_indexes: Vec<i32> { versions: 0..=7 },
        }
    }

    message! {
        pub struct OffsetFetchRequestGroup {
            group_id: String { versions: 8.. },
            member_id: Option<String> { versions: 9.., nullable: 9.., default: None },
            member_epoch: i32 { versions: 9.., default: -1 },
            topics: Option<Vec<OffsetFetchRequestTopics>> { versions: 8.., nullable: 8.., default: Some(Vec::new()) },
        }
    }

    message! {
        pub struct OffsetFetchRequestTopics {
            name: String { versions: 8.. },
            partition_indexes: Vec<i32> { versions: 8.. },
        }
    }
}

pub mod offset_fetch_response {
    use crate::protocol::dsl::message;

    message! {
        pub struct OffsetFetchResponse {
            throttle_time_ms: i32 { versions: 3.. },
            topics: Vec<OffsetFetchResponseTopic> { versions: 0..=7 },
            error_code: i16 { versions: 2..=7 },
            groups: Vec<OffsetFetchResponseGroup> { versions: 8.. },
        }
    }

    message! {
        pub struct OffsetFetchResponseTopic {
            name: String { versions: 0..=7 },
            partitions: Vec<OffsetFetchResponsePartition> { versions: 0..=7 },
        }
    }

    message! {
        pub struct OffsetFetchResponsePartition {
            partition_index: i32 { versions: 0..=7 },
            committed_offset: i64 { versions: 0..=7 },
            committed_leader_epoch: i32 { versions: 5..=7, default: -1 },
            metadata: Option<String> { versions: 0..=7, nullable: 0..=7, default: Some(String::new()) },
            error_code: i16 { versions: 0..=7 },
        }
    }

    message! {
        pub struct OffsetFetchResponseGroup {
            group_id: String { versions: 8.. },
            topics: Vec<OffsetFetchResponseTopics> { versions: 8.. },
            error_code: i16 { versions: 8.. },
        }
    }

    message! {
        pub struct OffsetFetchResponseTopics {
            name: String { versions: 8.. },
            partitions: Vec<OffsetFetchResponsePartitions> { versions: 8.. },
        }
    }

    message! {
        pub struct OffsetFetchResponsePartitions {
            partition_index: i32 { versions: 8.. },
            committed_offset: i64 { versions: 8.. },
            committed_leader_epoch: i32 { versions: 8.., default: -1 },
            metadata: Option<String> { versions: 8.., nullable: 8.., default: Some(String::new()) },
            error_code: i16 { versions: 8.. },
        }
    }
}

pub mod offset_delete_request {
    use crate::protocol::dsl::message;

    message! {
        pub struct OffsetDeleteRequest {
            group_id: String { versions: 0.. },
            topics: Vec<OffsetDeleteRequestTopic> { versions: 0.. },
        }
    }

    message! {
        pub struct OffsetDeleteRequestTopic {
            name: String { versions: 0.. },
            partitions: Vec<OffsetDeleteRequestPartition> { versions: 0.. },
        }
    }

    message! {
        pub struct OffsetDeleteRequestPartition {
            partition_index: i32 { versions: 0.. },
        }
    }
}

pub mod offset_delete_response {
    use crate::protocol::dsl::message;

    message! {
        pub struct OffsetDeleteResponse {
            error_code: i16 { versions: 0.. },
            throttle_time_ms: i32 { versions: 0.. },
            topics: Vec<OffsetDeleteResponseTopic> { versions: 0.. },
        }
    }

    message! {
        pub struct OffsetDeleteResponseTopic {
            name: String { versions: 0.. },
            partitions: Vec<OffsetDeleteResponsePartition> { versions: 0.. },
        }
    }

    message! {
        pub struct OffsetDeleteResponsePartition {
            partition_index: i32 { versions: 0.. },
            error_code: i16 { versions: 0.. },
        }
    }
}

pub mod list_groups_request {
    use crate::protocol::dsl::message;

    message! {
        pub struct ListGroupsRequest {
            /// v4+ (KIP-518): only groups in these states (empty: all).
            states_filter: Vec<String> { versions: 4.. },
            /// v5+ (KIP-848): only groups of these types (empty: all).
            types_filter: Vec<String> { versions: 5.. },
        }
    }
}

pub mod list_groups_response {
    use crate::protocol::dsl::message;

    message! {
        pub struct ListGroupsResponse {
            throttle_time_ms: i32 { versions: 1.. },
            error_code: i16 { versions: 0.. },
            groups: Vec<ListedGroup> { versions: 0.. },
        }
    }

    message! {
        pub struct ListedGroup {
            group_id: String { versions: 0.. },
            protocol_type: String { versions: 0.. },
            group_state: String { versions: 4.. },
            group_type: String { versions: 5.. },
        }
    }
}

pub mod describe_groups_request {
    use crate::protocol::dsl::message;

    message! {
        pub struct DescribeGroupsRequest {
            groups: Vec<String> { versions: 0.. },
            include_authorized_operations: bool { versions: 3.. },
        }
    }
}

pub mod describe_groups_response {
    use crate::protocol::dsl::message;
    use bytes::Bytes;

    message! {
        pub struct DescribeGroupsResponse {
            throttle_time_ms: i32 { versions: 1.. },
            groups: Vec<DescribedGroup> { versions: 0.. },
        }
    }

    message! {
        pub struct DescribedGroup {
            error_code: i16 { versions: 0.. },
            group_id: String { versions: 0.. },
            /// Kafka's names: Empty, PreparingRebalance, CompletingRebalance, Stable, Dead.
            group_state: String { versions: 0.. },
            protocol_type: String { versions: 0.. },
            /// The selected protocol (the assignor's name) once the group is stable.
            protocol_data: String { versions: 0.. },
            members: Vec<DescribedGroupMember> { versions: 0.. },
            authorized_operations: i32 { versions: 3.., default: i32::MIN },
        }
    }

    message! {
        pub struct DescribedGroupMember {
            member_id: String { versions: 0.. },
            group_instance_id: Option<String> { versions: 4.., nullable: 4.., default: None },
            client_id: String { versions: 0.. },
            client_host: String { versions: 0.. },
            member_metadata: Bytes { versions: 0.. },
            member_assignment: Bytes { versions: 0.. },
        }
    }
}

pub mod delete_groups_request {
    use crate::protocol::dsl::message;

    message! {
        pub struct DeleteGroupsRequest {
            groups_names: Vec<String> { versions: 0.. },
        }
    }
}

pub mod delete_groups_response {
    use crate::protocol::dsl::message;

    message! {
        pub struct DeleteGroupsResponse {
            throttle_time_ms: i32 { versions: 0.. },
            results: Vec<DeletableGroupResult> { versions: 0.. },
        }
    }

    message! {
        pub struct DeletableGroupResult {
            group_id: String { versions: 0.. },
            error_code: i16 { versions: 0.. },
        }
    }
}
