//! ListOffsets (2), OffsetForLeaderEpoch (23, KIP-101/KIP-320), InitProducerId (22,
//! idempotent producers) and AllocateProducerIds (67: a node asks the controller for a block of
//! producer ids, KIP-730).

pub mod list_offsets_request {
    use crate::protocol::dsl::message;

    message! {
        pub struct ListOffsetsRequest {
            replica_id: i32 { versions: 0.. },
            isolation_level: i8 { versions: 2.. },
            topics: Vec<ListOffsetsTopic> { versions: 0.. },
            timeout_ms: i32 { versions: 10.. },
        }
    }

    message! {
        pub struct ListOffsetsTopic {
            name: String { versions: 0.. },
            partitions: Vec<ListOffsetsPartition> { versions: 0.. },
        }
    }

    message! {
        pub struct ListOffsetsPartition {
            partition_index: i32 { versions: 0.. },
            current_leader_epoch: i32 { versions: 4.., default: -1 },
            /// -1 latest, -2 earliest, -3 max timestamp, or a timestamp in ms.
            timestamp: i64 { versions: 0.. },
        }
    }
}

pub mod list_offsets_response {
    use crate::protocol::dsl::message;

    message! {
        pub struct ListOffsetsResponse {
            throttle_time_ms: i32 { versions: 2.. },
            topics: Vec<ListOffsetsTopicResponse> { versions: 0.. },
        }
    }

    message! {
        pub struct ListOffsetsTopicResponse {
            name: String { versions: 0.. },
            partitions: Vec<ListOffsetsPartitionResponse> { versions: 0.. },
        }
    }

    message! {
        pub struct ListOffsetsPartitionResponse {
            partition_index: i32 { versions: 0.. },
            error_code: i16 { versions: 0.. },
            timestamp: i64 { versions: 1.., default: -1 },
            offset: i64 { versions: 1.., default: -1 },
            leader_epoch: i32 { versions: 4.., default: -1 },
        }
    }
}

pub mod offset_for_leader_epoch_request {
    use crate::protocol::dsl::message;

    message! {
        pub struct OffsetForLeaderEpochRequest {
            replica_id: i32 { versions: 3.., default: -2 },
            topics: Vec<OffsetForLeaderTopic> { versions: 0.. },
        }
    }

    message! {
        pub struct OffsetForLeaderTopic {
            topic: String { versions: 0.. },
            partitions: Vec<OffsetForLeaderPartition> { versions: 0.. },
        }
    }

    message! {
        pub struct OffsetForLeaderPartition {
            partition: i32 { versions: 0.. },
            current_leader_epoch: i32 { versions: 2.., default: -1 },
            leader_epoch: i32 { versions: 0.. },
        }
    }
}

pub mod offset_for_leader_epoch_response {
    use crate::protocol::dsl::message;

    message! {
        pub struct OffsetForLeaderEpochResponse {
            throttle_time_ms: i32 { versions: 2.. },
            topics: Vec<OffsetForLeaderTopicResult> { versions: 0.. },
        }
    }

    message! {
        pub struct OffsetForLeaderTopicResult {
            topic: String { versions: 0.. },
            partitions: Vec<EpochEndOffset> { versions: 0.. },
        }
    }

    message! {
        pub struct EpochEndOffset {
            error_code: i16 { versions: 0.. },
            partition: i32 { versions: 0.. },
            leader_epoch: i32 { versions: 1.., default: -1 },
            end_offset: i64 { versions: 0.., default: -1 },
        }
    }
}

pub mod init_producer_id_request {
    use crate::protocol::dsl::message;

    message! {
        pub struct InitProducerIdRequest {
            transactional_id: Option<String> { versions: 0.., nullable: 0.., default: Some(String::new()) },
            transaction_timeout_ms: i32 { versions: 0.. },
            producer_id: i64 { versions: 3.., default: -1 },
            producer_epoch: i16 { versions: 3.., default: -1 },
            enable2_pc: bool { versions: 6.. },
            keep_prepared_txn: bool { versions: 6.. },
        }
    }
}

pub mod init_producer_id_response {
    use crate::protocol::dsl::message;

    message! {
        pub struct InitProducerIdResponse {
            throttle_time_ms: i32 { versions: 0.. },
            error_code: i16 { versions: 0.. },
            producer_id: i64 { versions: 0.., default: -1 },
            producer_epoch: i16 { versions: 0.. },
            ongoing_txn_producer_id: i64 { versions: 6.., default: -1 },
            ongoing_txn_producer_epoch: i16 { versions: 6.., default: -1 },
        }
    }
}

pub mod allocate_producer_ids_request {
    use crate::protocol::dsl::message;

    message! {
        /// KIP-730: a node asks the controller for its next block of producer ids.
        pub struct AllocateProducerIdsRequest {
            broker_id: i32 { versions: 0.. },
            broker_epoch: i64 { versions: 0.., default: -1 },
        }
    }
}

pub mod allocate_producer_ids_response {
    use crate::protocol::dsl::message;

    message! {
        pub struct AllocateProducerIdsResponse {
            throttle_time_ms: i32 { versions: 0.. },
            error_code: i16 { versions: 0.. },
            /// The first producer id of the block, inclusive.
            producer_id_start: i64 { versions: 0.. },
            /// How many ids the block holds.
            producer_id_len: i32 { versions: 0.. },
        }
    }
}
