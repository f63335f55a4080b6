//! The KRaft quorum RPCs: Vote (52, KIP-595/KIP-996 pre-vote), BeginQuorumEpoch (53),
//! EndQuorumEpoch (54), DescribeQuorum (55) and FetchSnapshot (59, KIP-630), with the KIP-853
//! directory ids and endpoints of their newest versions.

pub mod vote_request {
    use crate::protocol::dsl::message;
    use crate::protocol::wire::Uuid;

    message! {
        /// A candidate (or, with `pre_vote`, a prospective candidate) asks for a vote.
        pub struct VoteRequest {
            cluster_id: Option<String> { versions: 0.., nullable: 0.. },
            voter_id: i32 { versions: 1.., default: -1 },
            topics: Vec<TopicData> { versions: 0.. },
        }
    }

    message! {
        pub struct TopicData {
            topic_name: String { versions: 0.. },
            partitions: Vec<PartitionData> { versions: 0.. },
        }
    }

    message! {
        pub struct PartitionData {
            partition_index: i32 { versions: 0.. },
            /// The epoch of the voter sending the request.
            replica_epoch: i32 { versions: 0.. },
            replica_id: i32 { versions: 0.. },
            replica_directory_id: Uuid { versions: 1.. },
            voter_directory_id: Uuid { versions: 1.. },
            last_offset_epoch: i32 { versions: 0.. },
            last_offset: i64 { versions: 0.. },
            /// KIP-996: a pre-vote does not bump the epoch.
            pre_vote: bool { versions: 2.. },
        }
    }
}

pub mod vote_response {
    use crate::protocol::dsl::message;

    message! {
        pub struct VoteResponse {
            error_code: i16 { versions: 0.. },
            topics: Vec<TopicData> { versions: 0.. },
            node_endpoints: Vec<NodeEndpoint> { versions: 1.., tag: (0, 1..) },
        }
    }

    message! {
        pub struct TopicData {
            topic_name: String { versions: 0.. },
            partitions: Vec<PartitionData> { versions: 0.. },
        }
    }

    message! {
        pub struct PartitionData {
            partition_index: i32 { versions: 0.. },
            error_code: i16 { versions: 0.. },
            leader_id: i32 { versions: 0.. },
            leader_epoch: i32 { versions: 0.. },
            vote_granted: bool { versions: 0.. },
        }
    }

    message! {
        pub struct NodeEndpoint {
            node_id: i32 { versions: 1.. },
            host: String { versions: 1.. },
            port: u16 { versions: 1.. },
        }
    }
}

pub mod begin_quorum_epoch_request {
    use crate::protocol::dsl::message;
    use crate::protocol::wire::Uuid;

    message! {
        /// A new leader announces its epoch to the voters.
        pub struct BeginQuorumEpochRequest {
            cluster_id: Option<String> { versions: 0.., nullable: 0.. },
            voter_id: i32 { versions: 1.., default: -1 },
            topics: Vec<TopicData> { versions: 0.. },
            leader_endpoints: Vec<LeaderEndpoint> { versions: 1.. },
        }
    }

    message! {
        pub struct TopicData {
            topic_name: String { versions: 0.. },
            partitions: Vec<PartitionData> { versions: 0.. },
        }
    }

    message! {
        pub struct PartitionData {
            partition_index: i32 { versions: 0.. },
            voter_directory_id: Uuid { versions: 1.. },
            leader_id: i32 { versions: 0.. },
            leader_epoch: i32 { versions: 0.. },
        }
    }

    message! {
        pub struct LeaderEndpoint {
            name: String { versions: 1.. },
            host: String { versions: 1.. },
            port: u16 { versions: 1.. },
        }
    }
}

pub mod begin_quorum_epoch_response {
    use crate::protocol::dsl::message;

    message! {
        pub struct BeginQuorumEpochResponse {
            error_code: i16 { versions: 0.. },
            topics: Vec<TopicData> { versions: 0.. },
            node_endpoints: Vec<NodeEndpoint> { versions: 1.., tag: (0, 1..) },
        }
    }

    message! {
        pub struct TopicData {
            topic_name: String { versions: 0.. },
            partitions: Vec<PartitionData> { versions: 0.. },
        }
    }

    message! {
        pub struct PartitionData {
            partition_index: i32 { versions: 0.. },
            error_code: i16 { versions: 0.. },
            leader_id: i32 { versions: 0.. },
            leader_epoch: i32 { versions: 0.. },
        }
    }

    message! {
        pub struct NodeEndpoint {
            node_id: i32 { versions: 1.. },
            host: String { versions: 1.. },
            port: u16 { versions: 1.. },
        }
    }
}

pub mod end_quorum_epoch_request {
    use crate::protocol::dsl::message;
    use crate::protocol::wire::Uuid;

    message! {
        /// A resigning leader asks the voters to start an election (KIP-595 graceful shutdown).
        pub struct EndQuorumEpochRequest {
            cluster_id: Option<String> { versions: 0.., nullable: 0.. },
            topics: Vec<TopicData> { versions: 0.. },
            leader_endpoints: Vec<LeaderEndpoint> { versions: 1.. },
        }
    }

    message! {
        pub struct TopicData {
            topic_name: String { versions: 0.. },
            partitions: Vec<PartitionData> { versions: 0.. },
        }
    }

    message! {
        pub struct PartitionData {
            partition_index: i32 { versions: 0.. },
            leader_id: i32 { versions: 0.. },
            leader_epoch: i32 { versions: 0.. },
            preferred_successors: Vec<i32> { versions: 0..=0 },
            preferred_candidates: Vec<ReplicaInfo> { versions: 1.. },
        }
    }

    message! {
        pub struct ReplicaInfo {
            candidate_id: i32 { versions: 1.. },
            candidate_directory_id: Uuid { versions: 1.. },
        }
    }

    message! {
        pub struct LeaderEndpoint {
            name: String { versions: 1.. },
            host: String { versions: 1.. },
            port: u16 { versions: 1.. },
        }
    }
}

pub mod end_quorum_epoch_response {
    use crate::protocol::dsl::message;

    message! {
        pub struct EndQuorumEpochResponse {
            error_code: i16 { versions: 0.. },
            topics: Vec<TopicData> { versions: 0.. },
            node_endpoints: Vec<NodeEndpoint> { versions: 1.., tag: (0, 1..) },
        }
    }

    message! {
        pub struct TopicData {
            topic_name: String { versions: 0.. },
            partitions: Vec<PartitionData> { versions: 0.. },
        }
    }

    message! {
        pub struct PartitionData {
            partition_index: i32 { versions: 0.. },
            error_code: i16 { versions: 0.. },
            leader_id: i32 { versions: 0.. },
            leader_epoch: i32 { versions: 0.. },
        }
    }

    message! {
        pub struct NodeEndpoint {
            node_id: i32 { versions: 1.. },
            host: String { versions: 1.. },
            port: u16 { versions: 1.. },
        }
    }
}

pub mod describe_quorum_request {
    use crate::protocol::dsl::message;

    message! {
        pub struct DescribeQuorumRequest {
            topics: Vec<TopicData> { versions: 0.. },
        }
    }

    message! {
        pub struct TopicData {
            topic_name: String { versions: 0.. },
            partitions: Vec<PartitionData> { versions: 0.. },
        }
    }

    message! {
        pub struct PartitionData {
            partition_index: i32 { versions: 0.. },
        }
    }
}

pub mod describe_quorum_response {
    use crate::protocol::dsl::message;
    use crate::protocol::wire::Uuid;

    message! {
        pub struct DescribeQuorumResponse {
            error_code: i16 { versions: 0.. },
            error_message: Option<String> { versions: 2.., nullable: 2.., default: Some(String::new()) },
            topics: Vec<TopicData> { versions: 0.. },
            nodes: Vec<Node> { versions: 2.. },
        }
    }

    message! {
        pub struct TopicData {
            topic_name: String { versions: 0.. },
            partitions: Vec<PartitionData> { versions: 0.. },
        }
    }

    message! {
        pub struct PartitionData {
            partition_index: i32 { versions: 0.. },
            error_code: i16 { versions: 0.. },
            error_message: Option<String> { versions: 2.., nullable: 2.., default: Some(String::new()) },
            leader_id: i32 { versions: 0.. },
            leader_epoch: i32 { versions: 0.. },
            high_watermark: i64 { versions: 0.. },
            current_voters: Vec<ReplicaState> { versions: 0.. },
            observers: Vec<ReplicaState> { versions: 0.. },
        }
    }

    message! {
        pub struct ReplicaState {
            replica_id: i32 { versions: 0.. },
            replica_directory_id: Uuid { versions: 2.. },
            log_end_offset: i64 { versions: 0.. },
            last_fetch_timestamp: i64 { versions: 1.., default: -1 },
            last_caught_up_timestamp: i64 { versions: 1.., default: -1 },
        }
    }

    message! {
        pub struct Node {
            node_id: i32 { versions: 2.. },
            listeners: Vec<Listener> { versions: 2.. },
        }
    }

    message! {
        pub struct Listener {
            name: String { versions: 2.. },
            host: String { versions: 2.. },
            port: u16 { versions: 2.. },
        }
    }
}

pub mod fetch_snapshot_request {
    use crate::protocol::dsl::message;
    use crate::protocol::wire::Uuid;

    message! {
        /// KIP-630: a follower whose fetch offset fell below the leader's log start offset
        /// copies the snapshot named by `snapshot_id`, `position` bytes at a time.
        pub struct FetchSnapshotRequest {
            cluster_id: Option<String> { versions: 0.., nullable: 0.., tag: (0, 0..) },
            replica_id: i32 { versions: 0.., default: -1 },
            max_bytes: i32 { versions: 0.., default: i32::MAX },
            topics: Vec<TopicSnapshot> { versions: 0.. },
        }
    }

    message! {
        pub struct TopicSnapshot {
            name: String { versions: 0.. },
            partitions: Vec<PartitionSnapshot> { versions: 0.. },
        }
    }

    message! {
        pub struct PartitionSnapshot {
            partition: i32 { versions: 0.. },
            current_leader_epoch: i32 { versions: 0.. },
            snapshot_id: SnapshotId { versions: 0.. },
            position: i64 { versions: 0.. },
            replica_directory_id: Uuid { versions: 1.., tag: (0, 1..) },
        }
    }

    message! {
        pub struct SnapshotId {
            end_offset: i64 { versions: 0.. },
            epoch: i32 { versions: 0.. },
        }
    }
}

pub mod fetch_snapshot_response {
    use crate::protocol::dsl::message;
    use crate::protocol::wire::Records;

    message! {
        pub struct FetchSnapshotResponse {
            throttle_time_ms: i32 { versions: 0.. },
            error_code: i16 { versions: 0.. },
            topics: Vec<TopicSnapshot> { versions: 0.. },
            node_endpoints: Vec<NodeEndpoint> { versions: 1.., tag: (0, 1..) },
        }
    }

    message! {
        pub struct TopicSnapshot {
            name: String { versions: 0.. },
            partitions: Vec<PartitionSnapshot> { versions: 0.. },
        }
    }

    message! {
        pub struct PartitionSnapshot {
            index: i32 { versions: 0.. },
            error_code: i16 { versions: 0.. },
            snapshot_id: SnapshotId { versions: 0.. },
            current_leader: LeaderIdAndEpoch { versions: 0.., tag: (0, 0..) },
            /// Total size of the snapshot in bytes.
            size: i64 { versions: 0.. },
            /// Where `unaligned_records` starts in the snapshot.
            position: i64 { versions: 0.. },
            /// A byte range of the snapshot file: not aligned to record batches.
            unaligned_records: Records { versions: 0.. },
        }
    }

    message! {
        pub struct SnapshotId {
            end_offset: i64 { versions: 0.. },
            epoch: i32 { versions: 0.. },
        }
    }

    message! {
        pub struct LeaderIdAndEpoch {
            leader_id: i32 { versions: 0.. },
            leader_epoch: i32 { versions: 0.. },
        }
    }

    message! {
        pub struct NodeEndpoint {
            node_id: i32 { versions: 1.. },
            host: String { versions: 1.. },
            port: u16 { versions: 1.. },
        }
    }
}

pub mod add_raft_voter_request {
    use crate::protocol::dsl::message;
    use crate::protocol::wire::Uuid;

    message! {
        /// KIP-853: adds a voter to the quorum (sent to any node; only the leader does it).
        pub struct AddRaftVoterRequest {
            cluster_id: Option<String> { versions: 0.., nullable: 0.. },
            timeout_ms: i32 { versions: 0.. },
            voter_id: i32 { versions: 0.. },
            voter_directory_id: Uuid { versions: 0.. },
            listeners: Vec<Listener> { versions: 0.. },
            /// v1: answer once the new voter set is committed (true), or once the leader
            /// appended it (false).
            ack_when_committed: bool { versions: 1.., default: true },
        }
    }

    message! {
        pub struct Listener {
            name: String { versions: 0.. },
            host: String { versions: 0.. },
            port: u16 { versions: 0.. },
        }
    }
}

pub mod add_raft_voter_response {
    use crate::protocol::dsl::message;

    message! {
        pub struct AddRaftVoterResponse {
            throttle_time_ms: i32 { versions: 0.. },
            error_code: i16 { versions: 0.. },
            error_message: Option<String> { versions: 0.., nullable: 0.. },
        }
    }
}

pub mod remove_raft_voter_request {
    use crate::protocol::dsl::message;
    use crate::protocol::wire::Uuid;

    message! {
        /// KIP-853: removes a voter from the quorum.
        pub struct RemoveRaftVoterRequest {
            cluster_id: Option<String> { versions: 0.., nullable: 0.. },
            voter_id: i32 { versions: 0.. },
            voter_directory_id: Uuid { versions: 0.. },
        }
    }
}

pub mod remove_raft_voter_response {
    use crate::protocol::dsl::message;

    message! {
        pub struct RemoveRaftVoterResponse {
            throttle_time_ms: i32 { versions: 0.. },
            error_code: i16 { versions: 0.. },
            error_message: Option<String> { versions: 0.., nullable: 0.. },
        }
    }
}

pub mod update_raft_voter_request {
    use crate::protocol::dsl::message;
    use crate::protocol::wire::Uuid;

    message! {
        /// KIP-853: a voter tells the leader its endpoints and supported kraft versions.
        pub struct UpdateRaftVoterRequest {
            cluster_id: Option<String> { versions: 0.., nullable: 0.. },
            current_leader_epoch: i32 { versions: 0.. },
            voter_id: i32 { versions: 0.. },
            voter_directory_id: Uuid { versions: 0.. },
            listeners: Vec<Listener> { versions: 0.. },
            k_raft_version_feature: KRaftVersionFeature { versions: 0.. },
        }
    }

    message! {
        pub struct Listener {
            name: String { versions: 0.. },
            host: String { versions: 0.. },
            port: u16 { versions: 0.. },
        }
    }

    message! {
        pub struct KRaftVersionFeature {
            min_supported_version: i16 { versions: 0.. },
            max_supported_version: i16 { versions: 0.. },
        }
    }
}

pub mod update_raft_voter_response {
    use crate::protocol::dsl::message;

    message! {
        pub struct UpdateRaftVoterResponse {
            throttle_time_ms: i32 { versions: 0.. },
            error_code: i16 { versions: 0.. },
            current_leader: CurrentLeader { versions: 0.., tag: (0, 0..) },
        }
    }

    message! {
        pub struct CurrentLeader {
            leader_id: i32 { versions: 0.., default: -1 },
            leader_epoch: i32 { versions: 0.., default: -1 },
            host: String { versions: 0.. },
            port: i32 { versions: 0.. },
        }
    }
}
