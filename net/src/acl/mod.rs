//! Kafka's ACLs, without sockets or state: the bindings and filters (`binding.rs`), the
//! authorizer's evaluation rules (`authorizer.rs`) and the principal of a connection
//! (`principal.rs`). The node stores the bindings as records of `__cluster_metadata` and
//! serves the ACL APIs and the checks (`net/src/node/acls.rs`, `net/src/node/authorize.rs`);
//! docs/clients.md ("ACLs and the authorizer") says what is enforced.

pub mod authorizer;
pub mod binding;
pub mod principal;

pub use authorizer::{
    Action, Asker, AuthorizerConfig, AuthorizerSettings, Decision, authorize, authorized_operations,
};
pub use binding::{
    AclBinding, AclBindingFilter, AclOperation, AclPermissionType, PatternType, ResourceType,
};

#[cfg(test)]
mod tests;
