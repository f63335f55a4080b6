//! The ACL store and the ACL APIs: DescribeAcls (29), CreateAcls (30), DeleteAcls (31).
//!
//! Each binding is one record of `__cluster_metadata-0` (as Kafka's AccessControlEntryRecord
//! is), under a key of its own, so the metadata partition's key-value state machine holds
//! exactly the bindings in force, its KIP-630 snapshots carry them, and every node, voter or
//! observer, derives the same image by applying the log:
//!
//! ```text
//! key   = "ringlog.acl.v1/<32 hex digits: the binding's random id>"
//! value = "resource_type=<code>\tresource_name=<name>\tpattern_type=<code>\tprincipal=<Type:name>
//!          \thost=<ip or *>\toperation=<code>\tpermission_type=<code>"
//! ```
//!
//! Codes are Kafka's (crate::acl::binding); `%`, tab and newline in a text value are escaped
//! as `%25`, `%09`, `%0A`. Deleting a binding (Kafka's RemoveAccessControlEntryRecord) is a
//! tombstone of its key. A record that does not decode to a binding CreateAcls would take is
//! skipped with a warning, as a malformed topic record is.
//!
//! Only the controller (the leader of `__cluster_metadata-0`, caught up: controller.rs)
//! proposes them: CreateAcls and DeleteAcls reaching any other node are forwarded to it, as
//! CreateTopics is, and answered once their records are applied. Bindings the controller
//! proposed and has not applied yet count for the next request (a binding created twice in a
//! row is one record; a binding being deleted is not deleted twice). DescribeAcls and the
//! authorizer read the node's own applied image, as Kafka's brokers do.
//!
//! With no authorizer configured the three APIs answer SECURITY_DISABLED, as Kafka's do.

use std::collections::BTreeMap;

use super::NodeError;
use super::acl_image::{AclId, acl_record_key};
use super::admin_answers::AdminResults;
use super::context::Cx;
use super::transport::Responder;
use crate::acl::{
    AclBinding, AclBindingFilter, AclOperation, AclPermissionType, PatternType, ResourceType,
};
use crate::protocol::{
    ErrorCode, Request, RequestHeader, Response, create_acls_request as ca_req,
    create_acls_response as ca_resp, delete_acls_request as da_req,
    delete_acls_response as da_resp, describe_acls_request as dsa_req,
    describe_acls_response as dsa_resp, encode_response,
};

/// How long CreateAcls and DeleteAcls wait for their records to apply.
const ACL_WRITE_TIMEOUT_MS: i32 = 30_000;

const SECURITY_DISABLED_MESSAGE: &str = "No Authorizer is configured.";

/// The controller's ACL proposals not applied yet, and the ACL APIs.
#[derive(Default)]
pub(super) struct AclState {
    /// Proposed by this node as controller: the binding created (`None`: deleted), the
    /// record's offset and the metadata epoch it was proposed in.
    pending: BTreeMap<AclId, (Option<AclBinding>, u64, u32)>,
}

impl AclState {
    /// The proposals the image applied (up to `applied`) are done.
    pub(super) fn applied(&mut self, applied: i64) {
        self.pending
            .retain(|_, (_, offset, _)| *offset as i64 > applied);
    }
    /// The bindings as the controller's next change must see them: the image with this
    /// controller's proposals of its current epoch that are not applied yet.
    fn latest_acls(&self, cx: &Cx) -> BTreeMap<AclId, AclBinding> {
        let epoch = cx.metadata_raft().epoch();
        let mut latest = cx.acls.image.clone();
        for (id, (binding, _, proposed_in)) in &self.pending {
            if *proposed_in != epoch {
                continue;
            }
            match binding {
                Some(binding) => latest.insert(*id, binding.clone()),
                None => latest.remove(id),
            };
        }
        latest
    }

    fn propose_acl_record(
        &mut self,
        cx: &mut Cx,
        id: AclId,
        binding: Option<AclBinding>,
    ) -> Result<u64, ErrorCode> {
        let value = binding.as_ref().map(AclBinding::encode_value);
        let offset = cx.propose_metadata_entry(&acl_record_key(&id), value.as_deref())?;
        let epoch = cx.metadata_raft().epoch();
        tracing::info!(?binding, offset, "ACL change proposed");
        self.pending.insert(id, (binding, offset, epoch));
        Ok(offset)
    }

    // ---- CreateAcls ---------------------------------------------------------------------------

    pub(super) fn handle_create_acls(
        &mut self,
        cx: &mut Cx,
        responder: Responder,
        header: &RequestHeader,
        request: ca_req::CreateAclsRequest,
    ) -> Result<(), NodeError> {
        if !cx.config.authorizer.enabled() {
            let results = request
                .creations
                .iter()
                .map(|_| ca_resp::AclCreationResult {
                    error_code: ErrorCode::SecurityDisabled.code(),
                    error_message: Some(SECURITY_DISABLED_MESSAGE.into()),
                })
                .collect();
            let response = Response::CreateAcls(ca_resp::CreateAclsResponse {
                throttle_time_ms: 0,
                results,
            });
            return send(responder, header, &response);
        }
        if !cx.controller_active() {
            return cx.forward_to_controller(responder, header, Request::CreateAcls(request));
        }
        let mut latest = self.latest_acls(cx);
        let mut results = Vec::with_capacity(request.creations.len());
        let mut waiting = Vec::new();
        for creation in &request.creations {
            let binding = binding_of_creation(creation);
            let outcome = match binding.validate_new() {
                Err(invalid) => Err((ErrorCode::InvalidRequest, invalid.to_string())),
                // The same binding again is no change (Kafka keeps one of each).
                Ok(()) if latest.values().any(|b| *b == binding) => Ok(None),
                Ok(()) => {
                    let id = random_acl_id();
                    latest.insert(id, binding.clone());
                    self.propose_acl_record(cx, id, Some(binding))
                        .map(Some)
                        .map_err(|code| (code, "metadata append failed".to_string()))
                }
            };
            let (error_code, error_message) = match outcome {
                Ok(Some(offset)) => {
                    waiting.push((results.len(), offset));
                    (0, None)
                }
                Ok(None) => (0, None),
                Err((code, message)) => (code.code(), Some(message)),
            };
            results.push(ca_resp::AclCreationResult {
                error_code,
                error_message,
            });
        }
        cx.park_admin_answer(
            responder,
            header,
            ACL_WRITE_TIMEOUT_MS,
            AdminResults::CreateAcls(results),
            waiting,
        )
    }

    // ---- DeleteAcls ---------------------------------------------------------------------------

    pub(super) fn handle_delete_acls(
        &mut self,
        cx: &mut Cx,
        responder: Responder,
        header: &RequestHeader,
        request: da_req::DeleteAclsRequest,
    ) -> Result<(), NodeError> {
        if !cx.config.authorizer.enabled() {
            let filter_results = request
                .filters
                .iter()
                .map(|_| da_resp::DeleteAclsFilterResult {
                    error_code: ErrorCode::SecurityDisabled.code(),
                    error_message: Some(SECURITY_DISABLED_MESSAGE.into()),
                    matching_acls: Vec::new(),
                })
                .collect();
            let response = Response::DeleteAcls(da_resp::DeleteAclsResponse {
                throttle_time_ms: 0,
                filter_results,
            });
            return send(responder, header, &response);
        }
        if !cx.controller_active() {
            return cx.forward_to_controller(responder, header, Request::DeleteAcls(request));
        }
        let latest = self.latest_acls(cx);
        // The tombstones proposed by this request, by id: a binding two filters match is
        // deleted once and listed by both.
        let mut deleted: BTreeMap<AclId, u64> = BTreeMap::new();
        let mut results = Vec::with_capacity(request.filters.len());
        let mut waiting = Vec::new();
        for f in &request.filters {
            let filter = AclBindingFilter {
                resource_type: ResourceType::from_code(f.resource_type_filter),
                resource_name: f.resource_name_filter.clone(),
                pattern_type: PatternType::from_code(f.pattern_type_filter),
                principal: f.principal_filter.clone(),
                host: f.host_filter.clone(),
                operation: AclOperation::from_code(f.operation),
                permission_type: AclPermissionType::from_code(f.permission_type),
            };
            if let Err(message) = filter.validate() {
                results.push(da_resp::DeleteAclsFilterResult {
                    error_code: ErrorCode::InvalidRequest.code(),
                    error_message: Some(message.into()),
                    matching_acls: Vec::new(),
                });
                continue;
            }
            let mut result = da_resp::DeleteAclsFilterResult::default();
            let mut last_offset = None;
            for (id, binding) in latest.iter().filter(|(_, b)| filter.matches(b)) {
                let offset = match deleted.get(id) {
                    Some(offset) => Ok(*offset),
                    None => self.propose_acl_record(cx, *id, None),
                };
                match offset {
                    Ok(offset) => {
                        deleted.insert(*id, offset);
                        last_offset = last_offset.max(Some(offset));
                        result.matching_acls.push(matching_acl(binding));
                    }
                    Err(code) => {
                        result.error_code = code.code();
                        result.error_message = Some("metadata append failed".into());
                        break;
                    }
                }
            }
            if let Some(offset) = last_offset {
                waiting.push((results.len(), offset));
            }
            results.push(result);
        }
        cx.park_admin_answer(
            responder,
            header,
            ACL_WRITE_TIMEOUT_MS,
            AdminResults::DeleteAcls(results),
            waiting,
        )
    }

    // ---- DescribeAcls -------------------------------------------------------------------------

    pub(super) fn handle_describe_acls(
        cx: &Cx,
        request: &dsa_req::DescribeAclsRequest,
    ) -> dsa_resp::DescribeAclsResponse {
        let refused = |code: ErrorCode, message: &str| dsa_resp::DescribeAclsResponse {
            error_code: code.code(),
            error_message: Some(message.to_string()),
            ..Default::default()
        };
        if !cx.config.authorizer.enabled() {
            return refused(ErrorCode::SecurityDisabled, SECURITY_DISABLED_MESSAGE);
        }
        let filter = AclBindingFilter {
            resource_type: ResourceType::from_code(request.resource_type_filter),
            resource_name: request.resource_name_filter.clone(),
            pattern_type: PatternType::from_code(request.pattern_type_filter),
            principal: request.principal_filter.clone(),
            host: request.host_filter.clone(),
            operation: AclOperation::from_code(request.operation),
            permission_type: AclPermissionType::from_code(request.permission_type),
        };
        if let Err(message) = filter.validate() {
            return refused(ErrorCode::InvalidRequest, message);
        }
        dsa_resp::DescribeAclsResponse {
            resources: describe_matching(cx.acls.bindings(), &filter),
            ..Default::default()
        }
    }
}

/// DescribeAcls' answer: the bindings `filter` matches, grouped by resource pattern (in the
/// order of type, name, pattern type).
pub fn describe_matching<'a>(
    bindings: impl Iterator<Item = &'a AclBinding>,
    filter: &AclBindingFilter,
) -> Vec<dsa_resp::DescribeAclsResource> {
    let mut resources: BTreeMap<(ResourceType, String, PatternType), Vec<&AclBinding>> =
        BTreeMap::new();
    for binding in bindings.filter(|b| filter.matches(b)) {
        resources
            .entry((
                binding.resource_type,
                binding.resource_name.clone(),
                binding.pattern_type,
            ))
            .or_default()
            .push(binding);
    }
    resources
        .into_iter()
        .map(|((resource_type, resource_name, pattern_type), bindings)| {
            dsa_resp::DescribeAclsResource {
                resource_type: resource_type.code(),
                resource_name,
                pattern_type: pattern_type.code(),
                acls: bindings
                    .into_iter()
                    .map(|b| dsa_resp::AclDescription {
                        principal: b.principal.clone(),
                        host: b.host.clone(),
                        operation: b.operation.code(),
                        permission_type: b.permission_type.code(),
                    })
                    .collect(),
            }
        })
        .collect()
}

fn binding_of_creation(creation: &ca_req::AclCreation) -> AclBinding {
    AclBinding {
        resource_type: ResourceType::from_code(creation.resource_type),
        resource_name: creation.resource_name.clone(),
        pattern_type: PatternType::from_code(creation.resource_pattern_type),
        principal: creation.principal.clone(),
        host: creation.host.clone(),
        operation: AclOperation::from_code(creation.operation),
        permission_type: AclPermissionType::from_code(creation.permission_type),
    }
}

fn matching_acl(binding: &AclBinding) -> da_resp::DeleteAclsMatchingAcl {
    da_resp::DeleteAclsMatchingAcl {
        error_code: 0,
        error_message: None,
        resource_type: binding.resource_type.code(),
        resource_name: binding.resource_name.clone(),
        pattern_type: binding.pattern_type.code(),
        principal: binding.principal.clone(),
        host: binding.host.clone(),
        operation: binding.operation.code(),
        permission_type: binding.permission_type.code(),
    }
}

fn random_acl_id() -> AclId {
    let mut id = [0u8; 16];
    id[..8].copy_from_slice(&super::random_seed().to_le_bytes());
    id[8..].copy_from_slice(&super::random_seed().to_le_bytes());
    id
}

fn send(
    responder: Responder,
    header: &RequestHeader,
    response: &Response,
) -> Result<(), NodeError> {
    let frame = encode_response(header.correlation_id, header.api_version, response)?;
    responder.send(Some(frame));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::acl_image::acl_image;
    use bytes::Bytes;

    fn binding(name: &str, pattern_type: PatternType, principal: &str) -> AclBinding {
        AclBinding {
            resource_type: ResourceType::Topic,
            resource_name: name.to_string(),
            pattern_type,
            principal: principal.to_string(),
            host: "*".to_string(),
            operation: AclOperation::Read,
            permission_type: AclPermissionType::Allow,
        }
    }

    /// The image is every decodable record under the ACL prefix of the metadata state, and
    /// nothing else: topic records and malformed ACL records are not bindings.
    #[test]
    fn the_image_is_the_decodable_acl_records_of_the_metadata_state() {
        let good = binding("orders", PatternType::Literal, "User:alice");
        let id = [7u8; 16];
        let mut entries = BTreeMap::new();
        entries.insert(
            Bytes::from(acl_record_key(&id)),
            Bytes::from(good.encode_value()),
        );
        // A binding CreateAcls would refuse (principal without a type), a bad id, and a topic.
        let refused = binding("orders", PatternType::Literal, "alice");
        entries.insert(
            Bytes::from(acl_record_key(&[8u8; 16])),
            Bytes::from(refused.encode_value()),
        );
        entries.insert(
            Bytes::from_static(b"ringlog.acl.v1/not-hex"),
            Bytes::from(good.encode_value()),
        );
        entries.insert(
            Bytes::from_static(b"ringlog.topic.v2/orders"),
            Bytes::from_static(b"name=orders"),
        );
        let image = acl_image(&entries);
        assert_eq!(image.len(), 1);
        assert_eq!(image.get(&id), Some(&good));
    }

    /// DescribeAcls groups the matching bindings by resource pattern.
    #[test]
    fn describe_groups_bindings_by_resource_pattern() {
        let bindings = [
            binding("orders", PatternType::Literal, "User:alice"),
            binding("orders", PatternType::Literal, "User:bob"),
            binding("orders", PatternType::Prefixed, "User:carol"),
            binding("other", PatternType::Literal, "User:dave"),
        ];
        let filter = AclBindingFilter {
            resource_type: ResourceType::Topic,
            resource_name: Some("orders".into()),
            pattern_type: PatternType::Any,
            principal: None,
            host: None,
            operation: AclOperation::Any,
            permission_type: AclPermissionType::Any,
        };
        let described = describe_matching(bindings.iter(), &filter);
        let shape: Vec<(String, i8, Vec<String>)> = described
            .into_iter()
            .map(|r| {
                let principals = r.acls.into_iter().map(|a| a.principal).collect();
                (r.resource_name, r.pattern_type, principals)
            })
            .collect();
        assert_eq!(
            shape,
            vec![
                (
                    "orders".to_string(),
                    PatternType::Literal.code(),
                    vec!["User:alice".to_string(), "User:bob".to_string()]
                ),
                (
                    "orders".to_string(),
                    PatternType::Prefixed.code(),
                    vec!["User:carol".to_string()]
                ),
            ]
        );
    }
}
