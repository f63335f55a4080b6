//! DescribeAcls (29), CreateAcls (30) and DeleteAcls (31), versions 0-3 (flexible from 2).
//!
//! Written from Kafka's JSON schemas (`clients/src/main/resources/common/message/`). Resource
//! types, pattern types, operations and permission types travel as Kafka's int8 codes
//! (`net/src/node/acls/binding.rs` names them). The pattern type fields exist from v1; at v0
//! they read as their schema default, 3 (LITERAL).

pub mod describe_acls_request {
    use crate::protocol::dsl::message;

    message! {
        pub struct DescribeAclsRequest {
            resource_type_filter: i8 { versions: 0.. },
            /// Null: any resource name.
            resource_name_filter: Option<String> { versions: 0.., nullable: 0.. },
            pattern_type_filter: i8 { versions: 1.., default: 3 },
            /// Null: any principal.
            principal_filter: Option<String> { versions: 0.., nullable: 0.. },
            /// Null: any host.
            host_filter: Option<String> { versions: 0.., nullable: 0.. },
            operation: i8 { versions: 0.. },
            permission_type: i8 { versions: 0.. },
        }
    }
}

pub mod describe_acls_response {
    use crate::protocol::dsl::message;

    message! {
        pub struct DescribeAclsResponse {
            throttle_time_ms: i32 { versions: 0.. },
            error_code: i16 { versions: 0.. },
            error_message: Option<String> { versions: 0.., nullable: 0.. },
            resources: Vec<DescribeAclsResource> { versions: 0.. },
        }
    }

    message! {
        pub struct DescribeAclsResource {
            resource_type: i8 { versions: 0.. },
            resource_name: String { versions: 0.. },
            pattern_type: i8 { versions: 1.., default: 3 },
            acls: Vec<AclDescription> { versions: 0.. },
        }
    }

    message! {
        pub struct AclDescription {
            principal: String { versions: 0.. },
            host: String { versions: 0.. },
            operation: i8 { versions: 0.. },
            permission_type: i8 { versions: 0.. },
        }
    }
}

pub mod create_acls_request {
    use crate::protocol::dsl::message;

    message! {
        pub struct CreateAclsRequest {
            creations: Vec<AclCreation> { versions: 0.. },
        }
    }

    message! {
        pub struct AclCreation {
            resource_type: i8 { versions: 0.. },
            resource_name: String { versions: 0.. },
            resource_pattern_type: i8 { versions: 1.., default: 3 },
            principal: String { versions: 0.. },
            host: String { versions: 0.. },
            operation: i8 { versions: 0.. },
            permission_type: i8 { versions: 0.. },
        }
    }
}

pub mod create_acls_response {
    use crate::protocol::dsl::message;

    message! {
        pub struct CreateAclsResponse {
            throttle_time_ms: i32 { versions: 0.. },
            /// One per creation, in request order.
            results: Vec<AclCreationResult> { versions: 0.. },
        }
    }

    message! {
        pub struct AclCreationResult {
            error_code: i16 { versions: 0.. },
            error_message: Option<String> { versions: 0.., nullable: 0.. },
        }
    }
}

pub mod delete_acls_request {
    use crate::protocol::dsl::message;

    message! {
        pub struct DeleteAclsRequest {
            filters: Vec<DeleteAclsFilter> { versions: 0.. },
        }
    }

    message! {
        pub struct DeleteAclsFilter {
            resource_type_filter: i8 { versions: 0.. },
            resource_name_filter: Option<String> { versions: 0.., nullable: 0.. },
            pattern_type_filter: i8 { versions: 1.., default: 3 },
            principal_filter: Option<String> { versions: 0.., nullable: 0.. },
            host_filter: Option<String> { versions: 0.., nullable: 0.. },
            operation: i8 { versions: 0.. },
            permission_type: i8 { versions: 0.. },
        }
    }
}

pub mod delete_acls_response {
    use crate::protocol::dsl::message;

    message! {
        pub struct DeleteAclsResponse {
            throttle_time_ms: i32 { versions: 0.. },
            /// One per filter, in request order.
            filter_results: Vec<DeleteAclsFilterResult> { versions: 0.. },
        }
    }

    message! {
        pub struct DeleteAclsFilterResult {
            error_code: i16 { versions: 0.. },
            error_message: Option<String> { versions: 0.., nullable: 0.. },
            matching_acls: Vec<DeleteAclsMatchingAcl> { versions: 0.. },
        }
    }

    message! {
        pub struct DeleteAclsMatchingAcl {
            error_code: i16 { versions: 0.. },
            error_message: Option<String> { versions: 0.., nullable: 0.. },
            resource_type: i8 { versions: 0.. },
            resource_name: String { versions: 0.. },
            pattern_type: i8 { versions: 1.., default: 3 },
            principal: String { versions: 0.. },
            host: String { versions: 0.. },
            operation: i8 { versions: 0.. },
            permission_type: i8 { versions: 0.. },
        }
    }
}
