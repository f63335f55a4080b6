//! The authorizer: `authorizer.class.name` and its two settings, and the evaluation of one
//! action against the ACL image as Kafka's `StandardAuthorizer` evaluates it
//! (`metadata/.../authorizer/StandardAuthorizerData.java`):
//!
//! 1. A super user (`super.users`) may do anything.
//! 2. The bindings that apply to the resource are its LITERAL ones of the same name, the
//!    LITERAL `*` one of its type, and the PREFIXED ones whose name starts the resource's.
//! 3. Of those, a binding matches the action when its principal is the asker's or `User:*`,
//!    its host is the client's IP or `*`, and its operation is the action's or ALL; an ALLOW
//!    binding also matches through implication (READ, WRITE, DELETE and ALTER imply
//!    DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS), a DENY binding never does.
//! 4. A matching DENY wins over any ALLOW; else a matching ALLOW allows.
//! 5. No binding matches: allowed only when no binding applies to the resource at all and
//!    `allow.everyone.if.no.acl.found` is true.
//!
//! Without an authorizer (the default) everything is allowed, the ACL APIs answer
//! SECURITY_DISABLED, and "authorized operations" lists every operation of the resource type.

use super::binding::{
    AclBinding, AclOperation, AclPermissionType, PatternType, ResourceType, WILDCARD_HOST,
    WILDCARD_PRINCIPAL, WILDCARD_RESOURCE,
};

/// Kafka's KRaft authorizer, the one `authorizer.class.name` may name.
pub const STANDARD_AUTHORIZER: &str = "org.apache.kafka.metadata.authorizer.StandardAuthorizer";
/// The ZooKeeper-era authorizer's name, taken as an alias (same rules).
pub const ACL_AUTHORIZER: &str = "kafka.security.authorizer.AclAuthorizer";

/// `authorizer.class.name`, `allow.everyone.if.no.acl.found`, `super.users`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AuthorizerConfig {
    /// `None`: no authorizer (`authorizer.class.name` empty).
    pub settings: Option<AuthorizerSettings>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthorizerSettings {
    pub allow_everyone_if_no_acl_found: bool,
    /// `Type:name` principals, e.g. `User:admin`.
    pub super_users: Vec<String>,
}

impl AuthorizerConfig {
    /// From the three properties' values; the error says what is wrong with which.
    pub fn parse(
        class_name: &str,
        allow_everyone_if_no_acl_found: bool,
        super_users: &str,
    ) -> Result<AuthorizerConfig, (&'static str, String)> {
        let super_users: Vec<String> = super_users
            .split(';')
            .map(str::trim)
            .filter(|u| !u.is_empty())
            .map(str::to_string)
            .collect();
        if let Some(bad) = super_users.iter().find(|u| {
            !u.split_once(':')
                .is_some_and(|(k, n)| !k.is_empty() && !n.is_empty())
        }) {
            return Err((
                "super.users",
                format!("{bad:?} is not a principal of the form Type:name (e.g. User:admin)"),
            ));
        }
        match class_name.trim() {
            "" => Ok(AuthorizerConfig { settings: None }),
            STANDARD_AUTHORIZER | ACL_AUTHORIZER => Ok(AuthorizerConfig {
                settings: Some(AuthorizerSettings {
                    allow_everyone_if_no_acl_found,
                    super_users,
                }),
            }),
            other => Err((
                "authorizer.class.name",
                format!(
                    "{other:?} is not supported (empty, {STANDARD_AUTHORIZER} or {ACL_AUTHORIZER})"
                ),
            )),
        }
    }

    pub fn enabled(&self) -> bool {
        self.settings.is_some()
    }
}

/// Who asks: the connection's principal (`Type:name`) and the client's IP address as text.
#[derive(Debug, Clone, Copy)]
pub struct Asker<'a> {
    pub principal: &'a str,
    pub host: &'a str,
}

/// What is asked: an operation on one resource (always a literal name).
#[derive(Debug, Clone, Copy)]
pub struct Action<'a> {
    pub operation: AclOperation,
    pub resource_type: ResourceType,
    pub resource_name: &'a str,
}

/// The decision, with the rule that made it (for logs and tests).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// No authorizer configured.
    NoAuthorizer,
    SuperUser,
    AllowedByAcl,
    DeniedByAcl,
    /// Bindings apply to the resource, none matched.
    NoMatchingAcl,
    /// No binding applies to the resource: `allow.everyone.if.no.acl.found` decided.
    NoAclFound {
        allowed: bool,
    },
}

impl Decision {
    pub fn allowed(self) -> bool {
        matches!(
            self,
            Decision::NoAuthorizer
                | Decision::SuperUser
                | Decision::AllowedByAcl
                | Decision::NoAclFound { allowed: true }
        )
    }
}

/// Decides one action (module doc) against `bindings`, the ACL image.
pub fn authorize<'a>(
    config: &AuthorizerConfig,
    bindings: impl IntoIterator<Item = &'a AclBinding>,
    asker: Asker<'_>,
    action: Action<'_>,
) -> Decision {
    let Some(settings) = &config.settings else {
        return Decision::NoAuthorizer;
    };
    if settings.super_users.iter().any(|u| u == asker.principal) {
        return Decision::SuperUser;
    }
    let mut resource_has_acls = false;
    let mut allowed = false;
    for binding in bindings {
        if !applies_to_resource(binding, action) {
            continue;
        }
        resource_has_acls = true;
        match binding_result(binding, asker, action.operation) {
            Some(AclPermissionType::Deny) => return Decision::DeniedByAcl,
            Some(AclPermissionType::Allow) => allowed = true,
            _ => {}
        }
    }
    if allowed {
        Decision::AllowedByAcl
    } else if resource_has_acls {
        Decision::NoMatchingAcl
    } else {
        Decision::NoAclFound {
            allowed: settings.allow_everyone_if_no_acl_found,
        }
    }
}

/// Kafka's authorized-operations bitfield of one resource: bit `code` set for each of the
/// resource type's operations the asker may perform (all of them without an authorizer).
pub fn authorized_operations<'a>(
    config: &AuthorizerConfig,
    bindings: impl IntoIterator<Item = &'a AclBinding> + Clone,
    asker: Asker<'_>,
    resource_type: ResourceType,
    resource_name: &str,
) -> i32 {
    resource_type
        .supported_operations()
        .iter()
        .filter(|&&operation| {
            authorize(
                config,
                bindings.clone(),
                asker,
                Action {
                    operation,
                    resource_type,
                    resource_name,
                },
            )
            .allowed()
        })
        .fold(0i32, |bits, op| bits | (1i32 << op.code()))
}

/// Step 2 of the module doc: whether the binding's resource pattern covers the resource.
fn applies_to_resource(binding: &AclBinding, action: Action<'_>) -> bool {
    if binding.resource_type != action.resource_type {
        return false;
    }
    match binding.pattern_type {
        PatternType::Literal => {
            binding.resource_name == action.resource_name
                || binding.resource_name == WILDCARD_RESOURCE
        }
        PatternType::Prefixed => action.resource_name.starts_with(&binding.resource_name),
        _ => false,
    }
}

/// Step 3: the binding's permission when it matches the asker and operation, else `None`.
fn binding_result(
    binding: &AclBinding,
    asker: Asker<'_>,
    operation: AclOperation,
) -> Option<AclPermissionType> {
    if binding.principal != asker.principal && binding.principal != WILDCARD_PRINCIPAL {
        return None;
    }
    if binding.host != WILDCARD_HOST && binding.host != asker.host {
        return None;
    }
    if binding.operation != AclOperation::All {
        let matches = match binding.permission_type {
            AclPermissionType::Allow => match operation {
                AclOperation::Describe => matches!(
                    binding.operation,
                    AclOperation::Describe
                        | AclOperation::Read
                        | AclOperation::Write
                        | AclOperation::Delete
                        | AclOperation::Alter
                ),
                AclOperation::DescribeConfigs => matches!(
                    binding.operation,
                    AclOperation::DescribeConfigs | AclOperation::AlterConfigs
                ),
                other => binding.operation == other,
            },
            _ => binding.operation == operation,
        };
        if !matches {
            return None;
        }
    }
    Some(binding.permission_type)
}
