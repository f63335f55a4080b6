//! Configs: DescribeConfigs (32), AlterConfigs (33) and IncrementalAlterConfigs (44).
//!
//! Written from Kafka's JSON schemas (`/work/shared/kafka-message-schemas/`). DescribeConfigs
//! v0 (deprecated, removed in Kafka 4.0) is not served, so its v0-only `IsDefault` is left out.

pub mod describe_configs_request {
    use crate::protocol::dsl::message;

    message! {
        pub struct DescribeConfigsRequest {
            resources: Vec<DescribeConfigsResource> { versions: 0.. },
            include_synonyms: bool { versions: 1.. },
            include_documentation: bool { versions: 3.. },
        }
    }

    message! {
        pub struct DescribeConfigsResource {
            /// 2 TOPIC, 4 BROKER, 8 BROKER_LOGGER (Kafka's `ConfigResource.Type`).
            resource_type: i8 { versions: 0.. },
            resource_name: String { versions: 0.. },
            /// Null: every config.
            configuration_keys: Option<Vec<String>> { versions: 0.., nullable: 0.., default: Some(Vec::new()) },
        }
    }
}

pub mod describe_configs_response {
    use crate::protocol::dsl::message;

    message! {
        pub struct DescribeConfigsResponse {
            throttle_time_ms: i32 { versions: 0.. },
            results: Vec<DescribeConfigsResult> { versions: 0.. },
        }
    }

    message! {
        pub struct DescribeConfigsResult {
            error_code: i16 { versions: 0.. },
            error_message: Option<String> { versions: 0.., nullable: 0.., default: Some(String::new()) },
            resource_type: i8 { versions: 0.. },
            resource_name: String { versions: 0.. },
            configs: Vec<DescribeConfigsResourceResult> { versions: 0.. },
        }
    }

    message! {
        pub struct DescribeConfigsResourceResult {
            name: String { versions: 0.. },
            value: Option<String> { versions: 0.., nullable: 0.., default: Some(String::new()) },
            read_only: bool { versions: 0.. },
            /// Kafka's `DescribeConfigsResponse.ConfigSource`: 1 DYNAMIC_TOPIC_CONFIG,
            /// 2 DYNAMIC_BROKER_CONFIG, 4 STATIC_BROKER_CONFIG, 5 DEFAULT_CONFIG.
            config_source: i8 { versions: 1.., default: -1 },
            is_sensitive: bool { versions: 0.. },
            synonyms: Vec<DescribeConfigsSynonym> { versions: 1.. },
            /// 1 BOOLEAN, 2 STRING, 3 INT, 4 SHORT, 5 LONG, 6 DOUBLE, 7 LIST, 8 CLASS, 9 PASSWORD.
            config_type: i8 { versions: 3.. },
            documentation: Option<String> { versions: 3.., nullable: 0.., default: Some(String::new()) },
        }
    }

    message! {
        pub struct DescribeConfigsSynonym {
            name: String { versions: 1.. },
            value: Option<String> { versions: 1.., nullable: 0.., default: Some(String::new()) },
            source: i8 { versions: 1.. },
        }
    }
}

pub mod incremental_alter_configs_request {
    use crate::protocol::dsl::message;

    message! {
        pub struct IncrementalAlterConfigsRequest {
            resources: Vec<AlterConfigsResource> { versions: 0.. },
            validate_only: bool { versions: 0.. },
        }
    }

    message! {
        pub struct AlterConfigsResource {
            resource_type: i8 { versions: 0.. },
            resource_name: String { versions: 0.. },
            configs: Vec<AlterableConfig> { versions: 0.. },
        }
    }

    message! {
        pub struct AlterableConfig {
            name: String { versions: 0.. },
            /// 0 SET, 1 DELETE, 2 APPEND, 3 SUBTRACT.
            config_operation: i8 { versions: 0.. },
            value: Option<String> { versions: 0.., nullable: 0.., default: Some(String::new()) },
        }
    }
}

pub mod incremental_alter_configs_response {
    use crate::protocol::dsl::message;

    message! {
        pub struct IncrementalAlterConfigsResponse {
            throttle_time_ms: i32 { versions: 0.. },
            responses: Vec<AlterConfigsResourceResponse> { versions: 0.. },
        }
    }

    message! {
        pub struct AlterConfigsResourceResponse {
            error_code: i16 { versions: 0.. },
            error_message: Option<String> { versions: 0.., nullable: 0.., default: Some(String::new()) },
            resource_type: i8 { versions: 0.. },
            resource_name: String { versions: 0.. },
        }
    }
}

/// The legacy AlterConfigs (33): every config of a resource at once, those left out back to
/// their defaults. Kafka's schema (not in the shared schema folder): versions 0-2, flexible
/// from 2. confluent-kafka's `AdminClient.alter_configs` (librdkafka's `AlterConfigs`) sends it.
pub mod alter_configs_request {
    use crate::protocol::dsl::message;

    message! {
        pub struct AlterConfigsRequest {
            resources: Vec<AlterConfigsResource> { versions: 0.. },
            validate_only: bool { versions: 0.. },
        }
    }

    message! {
        pub struct AlterConfigsResource {
            resource_type: i8 { versions: 0.. },
            resource_name: String { versions: 0.. },
            configs: Vec<AlterableConfig> { versions: 0.. },
        }
    }

    message! {
        pub struct AlterableConfig {
            name: String { versions: 0.. },
            value: Option<String> { versions: 0.., nullable: 0.., default: Some(String::new()) },
        }
    }
}

pub mod alter_configs_response {
    use crate::protocol::dsl::message;

    message! {
        pub struct AlterConfigsResponse {
            throttle_time_ms: i32 { versions: 0.. },
            responses: Vec<AlterConfigsResourceResponse> { versions: 0.. },
        }
    }

    message! {
        pub struct AlterConfigsResourceResponse {
            error_code: i16 { versions: 0.. },
            error_message: Option<String> { versions: 0.., nullable: 0.., default: Some(String::new()) },
            resource_type: i8 { versions: 0.. },
            resource_name: String { versions: 0.. },
        }
    }
}
