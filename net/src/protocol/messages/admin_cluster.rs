//! DeleteRecords (21), CreatePartitions (37) and DescribeCluster (60).
//!
//! Written from Kafka's JSON schemas (`/work/shared/kafka-message-schemas/`). DescribeCluster's
//! v2 fields (fenced brokers, Kafka 4.0) are in the tables but not advertised.

pub mod delete_records_request {
    use crate::protocol::dsl::message;

    message! {
        pub struct DeleteRecordsRequest {
            topics: Vec<DeleteRecordsTopic> { versions: 0.. },
            timeout_ms: i32 { versions: 0.. },
        }
    }

    message! {
        pub struct DeleteRecordsTopic {
            name: String { versions: 0.. },
            partitions: Vec<DeleteRecordsPartition> { versions: 0.. },
        }
    }

    message! {
        pub struct DeleteRecordsPartition {
            partition_index: i32 { versions: 0.. },
            /// Records below this offset go; -1: up to the high-watermark.
            offset: i64 { versions: 0.. },
        }
    }
}

pub mod delete_records_response {
    use crate::protocol::dsl::message;

    message! {
        pub struct DeleteRecordsResponse {
            throttle_time_ms: i32 { versions: 0.. },
            topics: Vec<DeleteRecordsTopicResult> { versions: 0.. },
        }
    }

    message! {
        pub struct DeleteRecordsTopicResult {
            name: String { versions: 0.. },
            partitions: Vec<DeleteRecordsPartitionResult> { versions: 0.. },
        }
    }

    message! {
        pub struct DeleteRecordsPartitionResult {
            partition_index: i32 { versions: 0.. },
            /// The partition's log start offset after the deletion.
            low_watermark: i64 { versions: 0.. },
            error_code: i16 { versions: 0.. },
        }
    }
}

pub mod create_partitions_request {
    use crate::protocol::dsl::message;

    message! {
        pub struct CreatePartitionsRequest {
            topics: Vec<CreatePartitionsTopic> { versions: 0.. },
            timeout_ms: i32 { versions: 0.. },
            validate_only: bool { versions: 0.. },
        }
    }

    message! {
        pub struct CreatePartitionsTopic {
            name: String { versions: 0.. },
            /// The new total number of partitions.
            count: i32 { versions: 0.. },
            /// Null: the controller places the new partitions.
            assignments: Option<Vec<CreatePartitionsAssignment>> { versions: 0.., nullable: 0.., default: Some(Vec::new()) },
        }
    }

    message! {
        pub struct CreatePartitionsAssignment {
            broker_ids: Vec<i32> { versions: 0.. },
        }
    }
}

pub mod create_partitions_response {
    use crate::protocol::dsl::message;

    message! {
        pub struct CreatePartitionsResponse {
            throttle_time_ms: i32 { versions: 0.. },
            results: Vec<CreatePartitionsTopicResult> { versions: 0.. },
        }
    }

    message! {
        pub struct CreatePartitionsTopicResult {
            name: String { versions: 0.. },
            error_code: i16 { versions: 0.. },
            error_message: Option<String> { versions: 0.., nullable: 0.., default: Some(String::new()) },
        }
    }
}

pub mod describe_cluster_request {
    use crate::protocol::dsl::message;

    message! {
        pub struct DescribeClusterRequest {
            include_cluster_authorized_operations: bool { versions: 0.. },
            /// 1 brokers, 2 controllers.
            endpoint_type: i8 { versions: 1.., default: 1 },
            include_fenced_brokers: bool { versions: 2.. },
        }
    }
}

pub mod describe_cluster_response {
    use crate::protocol::dsl::message;

    message! {
        pub struct DescribeClusterResponse {
            throttle_time_ms: i32 { versions: 0.. },
            error_code: i16 { versions: 0.. },
            error_message: Option<String> { versions: 0.., nullable: 0.. },
            endpoint_type: i8 { versions: 1.., default: 1 },
            cluster_id: String { versions: 0.. },
            controller_id: i32 { versions: 0.., default: -1 },
            brokers: Vec<DescribeClusterBroker> { versions: 0.. },
            cluster_authorized_operations: i32 { versions: 0.., default: -2147483648 },
        }
    }

    message! {
        pub struct DescribeClusterBroker {
            broker_id: i32 { versions: 0.. },
            host: String { versions: 0.. },
            port: i32 { versions: 0.. },
            rack: Option<String> { versions: 0.., nullable: 0.. },
            is_fenced: bool { versions: 2.. },
        }
    }
}
