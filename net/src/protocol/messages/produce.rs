//! Produce (0): record batches in, base offsets out. `records` stays a zero-copy slice of the
//! request frame (RecordBatch v2, opaque here; the engine parses it).

pub mod produce_request {
    use bytes::Bytes;

    use crate::protocol::dsl::message;
    use crate::protocol::wire::Uuid;

    message! {
        pub struct ProduceRequest {
            transactional_id: Option<String> { versions: 3.., nullable: 3.. },
            /// 0: no response, 1: leader only, -1: the whole quorum (acks=all).
            acks: i16 { versions: 0.. },
            timeout_ms: i32 { versions: 0.. },
            topic_data: Vec<TopicProduceData> { versions: 0.. },
        }
    }

    message! {
        pub struct TopicProduceData {
            name: String { versions: 0..=12 },
            topic_id: Uuid { versions: 13.. },
            partition_data: Vec<PartitionProduceData> { versions: 0.. },
        }
    }

    message! {
        pub struct PartitionProduceData {
            index: i32 { versions: 0.. },
            records: Option<Bytes> { versions: 0.., nullable: 0.., default: Some(Bytes::new()) },
        }
    }
}

pub mod produce_response {
    use crate::protocol::dsl::message;
    use crate::protocol::wire::Uuid;

    message! {
        pub struct ProduceResponse {
            responses: Vec<TopicProduceResponse> { versions: 0.. },
            throttle_time_ms: i32 { versions: 1.. },
            node_endpoints: Vec<NodeEndpoint> { versions: 10.., tag: (0, 10..) },
        }
    }

    message! {
        pub struct TopicProduceResponse {
            name: String { versions: 0..=12 },
            topic_id: Uuid { versions: 13.. },
            partition_responses: Vec<PartitionProduceResponse> { versions: 0.. },
        }
    }

    message! {
        pub struct PartitionProduceResponse {
            index: i32 { versions: 0.. },
            error_code: i16 { versions: 0.. },
            base_offset: i64 { versions: 0.. },
            log_append_time_ms: i64 { versions: 2.., default: -1 },
            log_start_offset: i64 { versions: 5.., default: -1 },
            record_errors: Vec<BatchIndexAndErrorMessage> { versions: 8.. },
            error_message: Option<String> { versions: 8.., nullable: 8.. },
            current_leader: LeaderIdAndEpoch { versions: 10.., tag: (0, 10..) },
        }
    }

    message! {
        pub struct BatchIndexAndErrorMessage {
            batch_index: i32 { versions: 8.. },
            batch_index_error_message: Option<String> { versions: 8.., nullable: 8.. },
        }
    }

    message! {
        pub struct LeaderIdAndEpoch {
            leader_id: i32 { versions: 10.., default: -1 },
            leader_epoch: i32 { versions: 10.., default: -1 },
        }
    }

    message! {
        pub struct NodeEndpoint {
            node_id: i32 { versions: 10.. },
            host: String { versions: 10.. },
            port: i32 { versions: 10.. },
            rack: Option<String> { versions: 10.., nullable: 10.. },
        }
    }
}
