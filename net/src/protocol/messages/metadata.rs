//! ApiVersions (18, KIP-511 client software name) and Metadata (3): what a client asks first.

pub mod api_versions_request {
    use crate::protocol::dsl::message;

    message! {
        pub struct ApiVersionsRequest {
            client_software_name: String { versions: 3.. },
            client_software_version: String { versions: 3.. },
        }
    }
}

pub mod api_versions_response {
    use crate::protocol::dsl::message;

    message! {
        /// Always sent with response header v0, even at flexible versions (KIP-511), so that
        /// a client can parse it before it knows which versions we speak.
        pub struct ApiVersionsResponse {
            error_code: i16 { versions: 0.. },
            api_keys: Vec<ApiVersion> { versions: 0.. },
            throttle_time_ms: i32 { versions: 1.. },
            supported_features: Vec<SupportedFeatureKey> { versions: 3.., tag: (0, 3..) },
            finalized_features_epoch: i64 { versions: 3.., tag: (1, 3..), default: -1 },
            finalized_features: Vec<FinalizedFeatureKey> { versions: 3.., tag: (2, 3..) },
            zk_migration_ready: bool { versions: 3.., tag: (3, 3..) },
        }
    }

    message! {
        pub struct ApiVersion {
            api_key: i16 { versions: 0.. },
            min_version: i16 { versions: 0.. },
            max_version: i16 { versions: 0.. },
        }
    }

    message! {
        pub struct SupportedFeatureKey {
            name: String { versions: 3.. },
            min_version: i16 { versions: 3.. },
            max_version: i16 { versions: 3.. },
        }
    }

    message! {
        pub struct FinalizedFeatureKey {
            name: String { versions: 3.. },
            max_version_level: i16 { versions: 3.. },
            min_version_level: i16 { versions: 3.. },
        }
    }
}

pub mod metadata_request {
    use crate::protocol::dsl::message;
    use crate::protocol::wire::Uuid;

    message! {
        pub struct MetadataRequest {
            /// v1+: null means every topic (v0: an empty array did).
            topics: Option<Vec<MetadataRequestTopic>> { versions: 0.., nullable: 1.., default: Some(Vec::new()) },
            allow_auto_topic_creation: bool { versions: 4.., default: true },
            include_cluster_authorized_operations: bool { versions: 8..=10 },
            include_topic_authorized_operations: bool { versions: 8.. },
        }
    }

    message! {
        pub struct MetadataRequestTopic {
            topic_id: Uuid { versions: 10.. },
            name: Option<String> { versions: 0.., nullable: 10.., default: Some(String::new()) },
        }
    }
}

pub mod metadata_response {
    use crate::protocol::dsl::message;
    use crate::protocol::wire::Uuid;

    message! {
        pub struct MetadataResponse {
            throttle_time_ms: i32 { versions: 3.. },
            brokers: Vec<MetadataResponseBroker> { versions: 0.. },
            cluster_id: Option<String> { versions: 2.., nullable: 2.. },
            controller_id: i32 { versions: 1.., default: -1 },
            topics: Vec<MetadataResponseTopic> { versions: 0.. },
            cluster_authorized_operations: i32 { versions: 8..=10, default: i32::MIN },
            error_code: i16 { versions: 13.. },
        }
    }

    message! {
        pub struct MetadataResponseBroker {
            node_id: i32 { versions: 0.. },
            host: String { versions: 0.. },
            port: i32 { versions: 0.. },
            rack: Option<String> { versions: 1.., nullable: 1.. },
        }
    }

    message! {
        pub struct MetadataResponseTopic {
            error_code: i16 { versions: 0.. },
            name: Option<String> { versions: 0.., nullable: 12.., default: Some(String::new()) },
            topic_id: Uuid { versions: 10.. },
            is_internal: bool { versions: 1.. },
            partitions: Vec<MetadataResponsePartition> { versions: 0.. },
            topic_authorized_operations: i32 { versions: 8.., default: i32::MIN },
        }
    }

    message! {
        pub struct MetadataResponsePartition {
            error_code: i16 { versions: 0.. },
            partition_index: i32 { versions: 0.. },
            leader_id: i32 { versions: 0.. },
            leader_epoch: i32 { versions: 7.., default: -1 },
            replica_nodes: Vec<i32> { versions: 0.. },
            isr_nodes: Vec<i32> { versions: 0.. },
            offline_replicas: Vec<i32> { versions: 5.. },
        }
    }
}
