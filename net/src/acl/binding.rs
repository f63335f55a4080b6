//! ACL bindings as Kafka's `clients/.../common/acl/` and `common/resource/` define them: a
//! resource pattern (type, name, pattern type) bound to an access control entry (principal,
//! host, operation, permission type), every enum with Kafka's wire codes; the filters of
//! DescribeAcls and DeleteAcls with Kafka's ANY / MATCH semantics; the validation CreateAcls
//! applies (Kafka's `AclControlManager.validateNewAcl`); and the metadata record one binding is
//! stored as in `__cluster_metadata` (module doc of `net/src/node/acls.rs`).

use std::collections::BTreeMap;

/// The resource name that a LITERAL binding uses to mean "every resource of this type".
pub const WILDCARD_RESOURCE: &str = "*";
/// The host that matches every client address.
pub const WILDCARD_HOST: &str = "*";
/// The principal that matches every principal (of type User).
pub const WILDCARD_PRINCIPAL: &str = "User:*";

macro_rules! kafka_enum {
    ($(#[$meta:meta])* $name:ident { $($variant:ident = $code:literal => $text:literal,)* }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[repr(i8)]
        pub enum $name {
            $($variant = $code,)*
        }

        impl $name {
            pub const ALL: &[$name] = &[$($name::$variant,)*];

            /// Kafka's code; an unknown code reads as `Unknown`, as Kafka's `fromCode` does.
            pub fn from_code(code: i8) -> $name {
                match code {
                    $($code => $name::$variant,)*
                    _ => $name::Unknown,
                }
            }

            pub const fn code(self) -> i8 {
                self as i8
            }

            /// Kafka's name, e.g. `PREFIXED`.
            pub const fn name(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)*
                }
            }
        }
    };
}

kafka_enum! {
    /// Kafka's `ResourceType`.
    ResourceType {
        Unknown = 0 => "UNKNOWN",
        Any = 1 => "ANY",
        Topic = 2 => "TOPIC",
        Group = 3 => "GROUP",
        Cluster = 4 => "CLUSTER",
        TransactionalId = 5 => "TRANSACTIONAL_ID",
        DelegationToken = 6 => "DELEGATION_TOKEN",
        User = 7 => "USER",
    }
}

kafka_enum! {
    /// Kafka's `PatternType`: how a binding's resource name matches (LITERAL, PREFIXED), or how
    /// a filter's does (ANY, MATCH too).
    PatternType {
        Unknown = 0 => "UNKNOWN",
        Any = 1 => "ANY",
        Match = 2 => "MATCH",
        Literal = 3 => "LITERAL",
        Prefixed = 4 => "PREFIXED",
    }
}

kafka_enum! {
    /// Kafka's `AclOperation`.
    AclOperation {
        Unknown = 0 => "UNKNOWN",
        Any = 1 => "ANY",
        All = 2 => "ALL",
        Read = 3 => "READ",
        Write = 4 => "WRITE",
        Create = 5 => "CREATE",
        Delete = 6 => "DELETE",
        Alter = 7 => "ALTER",
        Describe = 8 => "DESCRIBE",
        ClusterAction = 9 => "CLUSTER_ACTION",
        DescribeConfigs = 10 => "DESCRIBE_CONFIGS",
        AlterConfigs = 11 => "ALTER_CONFIGS",
        IdempotentWrite = 12 => "IDEMPOTENT_WRITE",
        CreateTokens = 13 => "CREATE_TOKENS",
        DescribeTokens = 14 => "DESCRIBE_TOKENS",
        TwoPhaseCommit = 15 => "TWO_PHASE_COMMIT",
    }
}

kafka_enum! {
    /// Kafka's `AclPermissionType`.
    AclPermissionType {
        Unknown = 0 => "UNKNOWN",
        Any = 1 => "ANY",
        Deny = 2 => "DENY",
        Allow = 3 => "ALLOW",
    }
}

impl ResourceType {
    /// The operations that apply to a resource of this type (Kafka's
    /// `AclEntry.supportedOperations`): what "authorized operations" lists when every one is
    /// allowed. Empty for UNKNOWN and ANY. A group's are Kafka 3.9's (READ, DESCRIBE, DELETE):
    /// Kafka 4.0 added DESCRIBE_CONFIGS and ALTER_CONFIGS with group configs (KIP-848), which
    /// ringlog does not serve, and librdkafka's suite, told it talks to 3.9, expects the three.
    pub fn supported_operations(self) -> &'static [AclOperation] {
        use AclOperation::*;
        match self {
            ResourceType::Topic => &[
                Read,
                Write,
                Create,
                Describe,
                Delete,
                Alter,
                DescribeConfigs,
                AlterConfigs,
            ],
            ResourceType::Group => &[Read, Describe, Delete],
            ResourceType::Cluster => &[
                Create,
                ClusterAction,
                DescribeConfigs,
                AlterConfigs,
                IdempotentWrite,
                Alter,
                Describe,
            ],
            ResourceType::TransactionalId => &[Describe, Write],
            ResourceType::DelegationToken => &[Describe],
            ResourceType::User => &[CreateTokens, DescribeTokens],
            ResourceType::Unknown | ResourceType::Any => &[],
        }
    }
}

/// The name of the one CLUSTER resource (Kafka's `kafka-cluster`).
pub const CLUSTER_RESOURCE_NAME: &str = "kafka-cluster";

/// One ACL: a resource pattern bound to an access control entry. A stored binding's enums
/// are concrete (no UNKNOWN, ANY or MATCH): [`AclBinding::validate_new`] holds the door.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AclBinding {
    pub resource_type: ResourceType,
    pub resource_name: String,
    pub pattern_type: PatternType,
    /// `Type:name`, e.g. `User:alice`, or `User:*`.
    pub principal: String,
    /// A client IP address, or `*`.
    pub host: String,
    pub operation: AclOperation,
    pub permission_type: AclPermissionType,
}

/// Why CreateAcls refuses a binding: Kafka answers INVALID_REQUEST with this message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidAcl {
    #[error("Invalid resourceType {0}")]
    ResourceType(&'static str),
    #[error("Invalid patternType {0}")]
    PatternType(&'static str),
    #[error("Invalid operation {0}")]
    Operation(&'static str),
    #[error("Invalid permissionType {0}")]
    PermissionType(&'static str),
    #[error("Resource name should not be empty")]
    EmptyResourceName,
    #[error(
        "Could not parse principal from `{0}` (no colon is present separating the principal type from the principal name)"
    )]
    Principal(String),
}

impl AclBinding {
    /// CreateAcls' checks, in Kafka's order (`AclControlManager.validateNewAcl`, then the
    /// principal's `Type:name` form, which `SecurityUtils.parseKafkaPrincipal` requires).
    pub fn validate_new(&self) -> Result<(), InvalidAcl> {
        if matches!(
            self.resource_type,
            ResourceType::Unknown | ResourceType::Any
        ) {
            return Err(InvalidAcl::ResourceType(self.resource_type.name()));
        }
        if !matches!(
            self.pattern_type,
            PatternType::Literal | PatternType::Prefixed
        ) {
            return Err(InvalidAcl::PatternType(self.pattern_type.name()));
        }
        if matches!(self.operation, AclOperation::Unknown | AclOperation::Any) {
            return Err(InvalidAcl::Operation(self.operation.name()));
        }
        if !matches!(
            self.permission_type,
            AclPermissionType::Allow | AclPermissionType::Deny
        ) {
            return Err(InvalidAcl::PermissionType(self.permission_type.name()));
        }
        if self.resource_name.is_empty() {
            return Err(InvalidAcl::EmptyResourceName);
        }
        match self.principal.split_once(':') {
            Some((kind, name)) if !kind.is_empty() && !name.is_empty() => Ok(()),
            _ => Err(InvalidAcl::Principal(self.principal.clone())),
        }
    }

    /// The record's value (module doc of `net/src/node/acls.rs`): tab-separated `name=value`
    /// fields, a `%`, tab or newline inside a value escaped as `%25`, `%09`, `%0A`.
    pub fn encode_value(&self) -> Vec<u8> {
        let fields = [
            ("resource_type", self.resource_type.code().to_string()),
            ("resource_name", escape(&self.resource_name)),
            ("pattern_type", self.pattern_type.code().to_string()),
            ("principal", escape(&self.principal)),
            ("host", escape(&self.host)),
            ("operation", self.operation.code().to_string()),
            ("permission_type", self.permission_type.code().to_string()),
        ];
        let text: Vec<String> = fields.iter().map(|(k, v)| format!("{k}={v}")).collect();
        text.join("\t").into_bytes()
    }

    /// Reads a record's value; a binding that CreateAcls would refuse is malformed.
    pub fn decode_value(value: &[u8]) -> Result<AclBinding, AclRecordError> {
        let text = std::str::from_utf8(value).map_err(|_| AclRecordError("utf-8"))?;
        let mut fields: BTreeMap<&str, &str> = BTreeMap::new();
        for field in text.split('\t') {
            let (k, v) = field
                .split_once('=')
                .ok_or(AclRecordError("field without '='"))?;
            fields.insert(k, v);
        }
        let text_field = |name: &'static str| {
            fields
                .get(name)
                .ok_or(AclRecordError(name))
                .and_then(|v| unescape(v).ok_or(AclRecordError(name)))
        };
        let code_field = |name: &'static str| {
            fields
                .get(name)
                .and_then(|v| v.parse::<i8>().ok())
                .ok_or(AclRecordError(name))
        };
        let binding = AclBinding {
            resource_type: ResourceType::from_code(code_field("resource_type")?),
            resource_name: text_field("resource_name")?,
            pattern_type: PatternType::from_code(code_field("pattern_type")?),
            principal: text_field("principal")?,
            host: text_field("host")?,
            operation: AclOperation::from_code(code_field("operation")?),
            permission_type: AclPermissionType::from_code(code_field("permission_type")?),
        };
        binding
            .validate_new()
            .map_err(|_| AclRecordError("a binding CreateAcls refuses"))?;
        Ok(binding)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("ACL record: {0}")]
pub struct AclRecordError(&'static str);

impl AclRecordError {
    pub fn new(what: &'static str) -> AclRecordError {
        AclRecordError(what)
    }
}

fn escape(text: &str) -> String {
    text.replace('%', "%25")
        .replace('\t', "%09")
        .replace('\n', "%0A")
}

fn unescape(text: &str) -> Option<String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('%') {
        out.push_str(&rest[..at]);
        let code = rest.get(at + 1..at + 3)?;
        out.push(match code {
            "25" => '%',
            "09" => '\t',
            "0A" => '\n',
            _ => return None,
        });
        rest = &rest[at + 3..];
    }
    out.push_str(rest);
    Some(out)
}

/// A DescribeAcls or DeleteAcls filter (Kafka's `AclBindingFilter`): `None` strings and the
/// ANY codes match everything; a MATCH pattern type matches the bindings that would apply to
/// the named resource (LITERAL of that name or `*`, PREFIXED of a prefix of it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AclBindingFilter {
    pub resource_type: ResourceType,
    pub resource_name: Option<String>,
    pub pattern_type: PatternType,
    pub principal: Option<String>,
    pub host: Option<String>,
    pub operation: AclOperation,
    pub permission_type: AclPermissionType,
}

impl AclBindingFilter {
    /// Kafka refuses a filter with an UNKNOWN (or unknown code) field with INVALID_REQUEST.
    pub fn validate(&self) -> Result<(), &'static str> {
        if self.resource_type == ResourceType::Unknown || self.pattern_type == PatternType::Unknown
        {
            return Err("Unknown patternFilter.");
        }
        if self.operation == AclOperation::Unknown
            || self.permission_type == AclPermissionType::Unknown
        {
            return Err("Unknown entryFilter.");
        }
        Ok(())
    }

    /// Kafka's `ResourcePatternFilter.matches` and `AccessControlEntryFilter.matches`.
    pub fn matches(&self, binding: &AclBinding) -> bool {
        self.matches_pattern(binding) && self.matches_entry(binding)
    }

    fn matches_pattern(&self, binding: &AclBinding) -> bool {
        if self.resource_type != ResourceType::Any && self.resource_type != binding.resource_type {
            return false;
        }
        if !matches!(self.pattern_type, PatternType::Any | PatternType::Match)
            && self.pattern_type != binding.pattern_type
        {
            return false;
        }
        let Some(name) = &self.resource_name else {
            return true;
        };
        if self.pattern_type == PatternType::Any || self.pattern_type == binding.pattern_type {
            return *name == binding.resource_name;
        }
        // MATCH: the bindings that apply to the resource `name`.
        match binding.pattern_type {
            PatternType::Literal => {
                *name == binding.resource_name || binding.resource_name == WILDCARD_RESOURCE
            }
            PatternType::Prefixed => name.starts_with(&binding.resource_name),
            _ => false,
        }
    }

    fn matches_entry(&self, binding: &AclBinding) -> bool {
        if self
            .principal
            .as_ref()
            .is_some_and(|p| *p != binding.principal)
        {
            return false;
        }
        if self.host.as_ref().is_some_and(|h| *h != binding.host) {
            return false;
        }
        if self.operation != AclOperation::Any && self.operation != binding.operation {
            return false;
        }
        self.permission_type == AclPermissionType::Any
            || self.permission_type == binding.permission_type
    }
}
