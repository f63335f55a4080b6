//! Fetch (1): consumers and Raft followers read the log. KIP-320 (current leader epoch,
//! last fetched epoch, diverging epoch), KIP-595 (Raft fetch: DivergingEpoch, CurrentLeader,
//! SnapshotId), KIP-516 (topic ids from v13), KIP-903 (ReplicaState from v15), KIP-853
//! (replica directory id from v17).

pub mod fetch_request {
    use crate::protocol::dsl::message;
    use crate::protocol::wire::Uuid;

    message! {
        pub struct FetchRequest {
            cluster_id: Option<String> { versions: 12.., nullable: 12.., tag: (0, 12..) },
            /// The follower's id, or -1 for a consumer (moved into `replica_state` in v15).
            replica_id: i32 { versions: 0..=14, default: -1 },
            replica_state: ReplicaState { versions: 15.., tag: (1, 15..) },
            max_wait_ms: i32 { versions: 0.. },
            min_bytes: i32 { versions: 0.. },
            max_bytes: i32 { versions: 3.., default: i32::MAX },
            isolation_level: i8 { versions: 4.. },
            session_id: i32 { versions: 7.. },
            session_epoch: i32 { versions: 7.., default: -1 },
            topics: Vec<FetchTopic> { versions: 0.. },
            forgotten_topics_data: Vec<ForgottenTopic> { versions: 7.. },
            rack_id: String { versions: 11.. },
        }
    }

    message! {
        pub struct ReplicaState {
            replica_id: i32 { versions: 15.., default: -1 },
            replica_epoch: i64 { versions: 15.., default: -1 },
        }
    }

    message! {
        pub struct FetchTopic {
            topic: String { versions: 0..=12 },
            topic_id: Uuid { versions: 13.. },
            partitions: Vec<FetchPartition> { versions: 0.. },
        }
    }

    message! {
        pub struct FetchPartition {
            partition: i32 { versions: 0.. },
            current_leader_epoch: i32 { versions: 9.., default: -1 },
            fetch_offset: i64 { versions: 0.. },
            last_fetched_epoch: i32 { versions: 12.., default: -1 },
            log_start_offset: i64 { versions: 5.., default: -1 },
            partition_max_bytes: i32 { versions: 0.. },
            replica_directory_id: Uuid { versions: 17.., tag: (0, 17..) },
            high_watermark: i64 { versions: 18.., tag: (1, 18..), default: i64::MAX },
        }
    }

    message! {
        pub struct ForgottenTopic {
            topic: String { versions: 7..=12 },
            topic_id: Uuid { versions: 13.. },
            partitions: Vec<i32> { versions: 7.. },
        }
    }
}

pub mod fetch_response {
    use crate::protocol::dsl::message;
    use crate::protocol::wire::{Records, Uuid};

    message! {
        pub struct FetchResponse {
            throttle_time_ms: i32 { versions: 1.. },
            error_code: i16 { versions: 7.. },
            session_id: i32 { versions: 7.. },
            responses: Vec<FetchableTopicResponse> { versions: 0.. },
            node_endpoints: Vec<NodeEndpoint> { versions: 16.., tag: (0, 16..) },
        }
    }

    message! {
        pub struct FetchableTopicResponse {
            topic: String { versions: 0..=12 },
            topic_id: Uuid { versions: 13.. },
            partitions: Vec<PartitionData> { versions: 0.. },
        }
    }

    message! {
        pub struct PartitionData {
            partition_index: i32 { versions: 0.. },
            error_code: i16 { versions: 0.. },
            high_watermark: i64 { versions: 0.. },
            last_stable_offset: i64 { versions: 4.., default: -1 },
            log_start_offset: i64 { versions: 5.., default: -1 },
            /// KIP-595: the follower's log diverged; truncate to this epoch's end offset.
            diverging_epoch: EpochEndOffset { versions: 12.., tag: (0, 12..) },
            current_leader: LeaderIdAndEpoch { versions: 12.., tag: (1, 12..) },
            /// KIP-630: the fetch offset is below the log start; fetch this snapshot instead.
            snapshot_id: SnapshotId { versions: 12.., tag: (2, 12..) },
            aborted_transactions: Option<Vec<AbortedTransaction>> { versions: 4.., nullable: 4.., default: Some(Vec::new()) },
            preferred_read_replica: i32 { versions: 11.., default: -1 },
            records: Option<Records> { versions: 0.., nullable: 0.., default: Some(Records::default()) },
        }
    }

    message! {
        pub struct EpochEndOffset {
            epoch: i32 { versions: 12.., default: -1 },
            end_offset: i64 { versions: 12.., default: -1 },
        }
    }

    message! {
        pub struct LeaderIdAndEpoch {
            leader_id: i32 { versions: 12.., default: -1 },
            leader_epoch: i32 { versions: 12.., default: -1 },
        }
    }

    message! {
        pub struct SnapshotId {
            end_offset: i64 { versions: 0.., default: -1 },
            epoch: i32 { versions: 0.., default: -1 },
        }
    }

    message! {
        pub struct AbortedTransaction {
            producer_id: i64 { versions: 4.. },
            first_offset: i64 { versions: 4.. },
        }
    }

    message! {
        pub struct NodeEndpoint {
            node_id: i32 { versions: 16.. },
            host: String { versions: 16.. },
            port: i32 { versions: 16.. },
            rack: Option<String> { versions: 16.., nullable: 16.. },
        }
    }
}
