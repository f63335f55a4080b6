//! CreateTopics (19) and DeleteTopics (20).

pub mod create_topics_request {
    use crate::protocol::dsl::message;

    message! {
        pub struct CreateTopicsRequest {
            topics: Vec<CreatableTopic> { versions: 0.. },
            timeout_ms: i32 { versions: 0.., default: 60000 },
            validate_only: bool { versions: 1.. },
        }
    }

    message! {
        pub struct CreatableTopic {
            name: String { versions: 0.. },
            /// -1: the broker default.
            num_partitions: i32 { versions: 0.. },
            replication_factor: i16 { versions: 0.. },
            assignments: Vec<CreatableReplicaAssignment> { versions: 0.. },
            configs: Vec<CreatableTopicConfig> { versions: 0.. },
        }
    }

    message! {
        pub struct CreatableReplicaAssignment {
            partition_index: i32 { versions: 0.. },
            broker_ids: Vec<i32> { versions: 0.. },
        }
    }

    message! {
        pub struct CreatableTopicConfig {
            name: String { versions: 0.. },
            value: Option<String> { versions: 0.., nullable: 0.., default: Some(String::new()) },
        }
    }
}

pub mod create_topics_response {
    use crate::protocol::dsl::message;
    use crate::protocol::wire::Uuid;

    message! {
        pub struct CreateTopicsResponse {
            throttle_time_ms: i32 { versions: 2.. },
            topics: Vec<CreatableTopicResult> { versions: 0.. },
        }
    }

    message! {
        pub struct CreatableTopicResult {
            name: String { versions: 0.. },
            topic_id: Uuid { versions: 7.. },
            error_code: i16 { versions: 0.. },
            error_message: Option<String> { versions: 1.., nullable: 0.., default: Some(String::new()) },
            topic_config_error_code: i16 { versions: 5.., tag: (0, 5..) },
            num_partitions: i32 { versions: 5.., default: -1 },
            replication_factor: i16 { versions: 5.., default: -1 },
            configs: Option<Vec<CreatableTopicConfigs>> { versions: 5.., nullable: 5.., default: Some(Vec::new()) },
        }
    }

    message! {
        pub struct CreatableTopicConfigs {
            name: String { versions: 5.. },
            value: Option<String> { versions: 5.., nullable: 5.., default: Some(String::new()) },
            read_only: bool { versions: 5.. },
            config_source: i8 { versions: 5.., default: -1 },
            is_sensitive: bool { versions: 5.. },
        }
    }
}

pub mod delete_topics_request {
    use crate::protocol::dsl::message;
    use crate::protocol::wire::Uuid;

    message! {
        pub struct DeleteTopicsRequest {
            topics: Vec<DeleteTopicState> { versions: 6.. },
            topic_names: Vec<String> { versions: 0..=5 },
            timeout_ms: i32 { versions: 0.. },
        }
    }

    message! {
        pub struct DeleteTopicState {
            name: Option<String> { versions: 6.., nullable: 6.. },
            topic_id: Uuid { versions: 6.. },
        }
    }
}

pub mod delete_topics_response {
    use crate::protocol::dsl::message;
    use crate::protocol::wire::Uuid;

    message! {
        pub struct DeleteTopicsResponse {
            throttle_time_ms: i32 { versions: 1.. },
            responses: Vec<DeletableTopicResult> { versions: 0.. },
        }
    }

    message! {
        pub struct DeletableTopicResult {
            name: Option<String> { versions: 0.., nullable: 6.., default: Some(String::new()) },
            topic_id: Uuid { versions: 6.. },
            error_code: i16 { versions: 0.. },
            error_message: Option<String> { versions: 5.., nullable: 5.. },
        }
    }
}
