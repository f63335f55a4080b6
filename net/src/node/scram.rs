//! DescribeUserScramCredentials (50) and AlterUserScramCredentials (51), as Kafka's controller
//! (`ScramControlManager`) and brokers (`ScramImage.describe`) answer them. The credentials are
//! records of `__cluster_metadata-0` (scram_record.rs): the controller validates an alteration,
//! derives each upserted credential's StoredKey and ServerKey from the client's SaltedPassword,
//! proposes every record of the request in one batch, and answers once it is committed and
//! applied. A node that is not the controller forwards the request to it (context.rs,
//! `Cx::forward_to_controller`). Every node answers Describe from its own credential image, and
//! the server's SASL exchanges read the same image.
//!
//! | alteration | answer |
//! | --- | --- |
//! | the same user twice in one request (deletions and upsertions together) | DUPLICATE_RESOURCE |
//! | empty user name | UNACCEPTABLE_CREDENTIAL |
//! | mechanism other than 1 (SCRAM-SHA-256) or 2 (SCRAM-SHA-512) | UNSUPPORTED_SASL_MECHANISM |
//! | upsertion with iterations outside 4096..=16384 | UNACCEPTABLE_CREDENTIAL |
//! | deletion of a credential that does not exist | RESOURCE_NOT_FOUND |
//!
//! | describe | answer |
//! | --- | --- |
//! | users null or empty | every user with a credential, each with its (mechanism, iterations) |
//! | a named user without credentials (the empty name too) | RESOURCE_NOT_FOUND for that user |
//! | a user named twice | DUPLICATE_RESOURCE for that user |

use std::collections::BTreeMap;

use ringlog_engine::batch::RecordBatchBuilder;

use super::NodeError;
use super::admin_answers::AdminResults;
use super::context::Cx;
use super::scram_record::{CredentialImage, encode_scram_record_value, scram_record_key};
use super::transport::Responder;
use crate::protocol::{
    ErrorCode, Request, RequestHeader, Response, SaslAuthenticateResponse, SaslHandshakeResponse,
    alter_user_scram_credentials_request as alter_req,
    alter_user_scram_credentials_response as alter_resp,
    describe_user_scram_credentials_request as describe_req,
    describe_user_scram_credentials_response as describe_resp,
};
use crate::sasl::{ScramCredential, ScramMechanism};

/// How long an alteration waits for its records to commit (the API has no timeout field).
const ALTER_TIMEOUT_MS: i32 = 30_000;

/// SaslHandshake or SaslAuthenticate that reached the node: on a listener without SASL, or on a
/// connection that has already authenticated (the server layer runs the exchange itself).
/// Kafka's `KafkaApis` answers both ILLEGAL_SASL_STATE.
pub(super) fn sasl_request_outside_the_exchange(request: &Request) -> Response {
    match request {
        Request::SaslHandshake(_) => Response::SaslHandshake(SaslHandshakeResponse {
            error_code: ErrorCode::IllegalSaslState.code(),
            mechanisms: Vec::new(),
        }),
        _ => Response::SaslAuthenticate(SaslAuthenticateResponse {
            error_code: ErrorCode::IllegalSaslState.code(),
            error_message: Some(
                "SaslAuthenticate request received outside a SASL exchange".to_string(),
            ),
            ..Default::default()
        }),
    }
}

/// One alteration that passed validation.
enum Change<'a> {
    Delete {
        user: &'a str,
        mechanism: ScramMechanism,
    },
    Upsert {
        user: &'a str,
        mechanism: ScramMechanism,
        credential: ScramCredential,
    },
}

impl CredentialImage {
    /// DescribeUserScramCredentials, answered from this node's credential image.
    pub(super) fn handle_describe_user_scram_credentials(
        &self,
        request: &describe_req::DescribeUserScramCredentialsRequest,
    ) -> describe_resp::DescribeUserScramCredentialsResponse {
        let users = self.users();
        let named: Vec<&str> = request
            .users
            .iter()
            .flatten()
            .map(|u| u.name.as_str())
            .collect();
        let results = if named.is_empty() {
            users
                .iter()
                .map(|(user, infos)| described(user, infos))
                .collect()
        } else {
            let mut counts: Vec<(&str, usize)> = Vec::new();
            for name in named {
                match counts.iter_mut().find(|(n, _)| *n == name) {
                    Some((_, count)) => *count += 1,
                    None => counts.push((name, 1)),
                }
            }
            counts
                .into_iter()
                .map(|(name, count)| {
                    let failed = |code: ErrorCode, message: &str| {
                        describe_resp::DescribeUserScramCredentialsResult {
                            user: name.to_string(),
                            error_code: code.code(),
                            error_message: Some(format!("{message}{name}")),
                            credential_infos: Vec::new(),
                        }
                    };
                    if count > 1 {
                        failed(
                            ErrorCode::DuplicateResource,
                            "Cannot describe SCRAM credentials for the same user twice in a single request: ",
                        )
                    } else {
                        match users.get(name) {
                            Some(infos) => described(name, infos),
                            None => failed(
                                ErrorCode::ResourceNotFound,
                                "Attempt to describe a user credential that does not exist: ",
                            ),
                        }
                    }
                })
                .collect()
        };
        describe_resp::DescribeUserScramCredentialsResponse {
            throttle_time_ms: 0,
            error_code: ErrorCode::None.code(),
            error_message: None,
            results,
        }
    }

    /// AlterUserScramCredentials: forwarded to the controller, or (on it) validated against
    /// this image, proposed in one batch and answered once it is applied.
    pub(super) fn handle_alter_user_scram_credentials(
        &self,
        cx: &mut Cx,
        responder: Responder,
        header: &RequestHeader,
        request: alter_req::AlterUserScramCredentialsRequest,
    ) -> Result<(), NodeError> {
        if !cx.controller_active() {
            return cx.forward_to_controller(
                responder,
                header,
                Request::AlterUserScramCredentials(request),
            );
        }
        let (changes, mut errors) = self.validate_alterations(&request);
        let mut results: Vec<alter_resp::AlterUserScramCredentialsResult> = changes
            .iter()
            .map(|change| {
                let (Change::Delete { user, .. } | Change::Upsert { user, .. }) = change;
                alter_resp::AlterUserScramCredentialsResult {
                    user: user.to_string(),
                    error_code: ErrorCode::None.code(),
                    error_message: None,
                }
            })
            .collect();
        let mut waiting = Vec::new();
        if !changes.is_empty() {
            match propose_credential_records(cx, &changes) {
                Ok(offset) => waiting = (0..results.len()).map(|i| (i, offset)).collect(),
                Err(code) => {
                    for result in &mut results {
                        result.error_code = code.code();
                    }
                }
            }
        }
        results.append(&mut errors);
        cx.park_admin_answer(
            responder,
            header,
            ALTER_TIMEOUT_MS,
            AdminResults::ScramCredentials(results),
            waiting,
        )
    }

    /// Kafka's `ScramControlManager.alterCredentials` checks: deletions first, then
    /// upsertions; a user named a second time fails both of its alterations.
    fn validate_alterations<'a>(
        &self,
        request: &'a alter_req::AlterUserScramCredentialsRequest,
    ) -> (
        Vec<Change<'a>>,
        Vec<alter_resp::AlterUserScramCredentialsResult>,
    ) {
        let mut changes: BTreeMap<&str, Change<'a>> = BTreeMap::new();
        let mut order: Vec<&str> = Vec::new();
        let mut errors: Vec<(&str, ErrorCode, &'static str)> = Vec::new();
        let failed = |errors: &Vec<(&str, ErrorCode, &'static str)>, name: &str| {
            errors.iter().any(|(n, _, _)| *n == name)
        };
        let alterations = request
            .deletions
            .iter()
            .map(|d| (d.name.as_str(), d.mechanism, None))
            .chain(
                request
                    .upsertions
                    .iter()
                    .map(|u| (u.name.as_str(), u.mechanism, Some(u))),
            );
        for (name, mechanism_type, upsertion) in alterations {
            if failed(&errors, name) {
                continue;
            }
            if changes.remove(name).is_some() {
                order.retain(|n| *n != name);
                errors.push((
                    name,
                    ErrorCode::DuplicateResource,
                    "A user credential cannot be altered twice in the same request",
                ));
                continue;
            }
            if name.is_empty() {
                errors.push((
                    name,
                    ErrorCode::UnacceptableCredential,
                    "Username must not be empty",
                ));
                continue;
            }
            let Some(mechanism) = ScramMechanism::from_type(mechanism_type) else {
                errors.push((
                    name,
                    ErrorCode::UnsupportedSaslMechanism,
                    "Unknown SCRAM mechanism",
                ));
                continue;
            };
            let change = match upsertion {
                None => {
                    if self.get(name, mechanism).is_none() {
                        errors.push((
                            name,
                            ErrorCode::ResourceNotFound,
                            "Attempt to delete a user credential that does not exist",
                        ));
                        continue;
                    }
                    Change::Delete {
                        user: name,
                        mechanism,
                    }
                }
                Some(upsertion) => {
                    if upsertion.iterations < ScramMechanism::MIN_ITERATIONS {
                        errors.push((
                            name,
                            ErrorCode::UnacceptableCredential,
                            "Too few iterations",
                        ));
                        continue;
                    }
                    if upsertion.iterations > ScramMechanism::MAX_ITERATIONS {
                        errors.push((
                            name,
                            ErrorCode::UnacceptableCredential,
                            "Too many iterations",
                        ));
                        continue;
                    }
                    Change::Upsert {
                        user: name,
                        mechanism,
                        credential: ScramCredential::from_salted_password(
                            mechanism,
                            &upsertion.salt,
                            &upsertion.salted_password,
                            upsertion.iterations,
                        ),
                    }
                }
            };
            changes.insert(name, change);
            order.push(name);
        }
        let changes = order
            .into_iter()
            .filter_map(|name| changes.remove(name))
            .collect();
        let errors = errors
            .into_iter()
            .map(
                |(name, code, message)| alter_resp::AlterUserScramCredentialsResult {
                    user: name.to_string(),
                    error_code: code.code(),
                    error_message: Some(message.to_string()),
                },
            )
            .collect();
        (changes, errors)
    }
}

/// Appends every change of one request as one batch (Kafka's `ControllerResult.atomicOf`):
/// all of them commit, or none. Returns the batch's last offset.
fn propose_credential_records(cx: &mut Cx, changes: &[Change<'_>]) -> Result<u64, ErrorCode> {
    let now_wall = cx.now_wall_ms;
    let mut builder = RecordBatchBuilder::new(0);
    for change in changes {
        match change {
            Change::Delete { user, mechanism } => {
                builder.append(
                    now_wall,
                    Some(&scram_record_key(user, *mechanism)),
                    None,
                    &[],
                );
            }
            Change::Upsert {
                user,
                mechanism,
                credential,
            } => {
                let value = encode_scram_record_value(credential);
                builder.append(
                    now_wall,
                    Some(&scram_record_key(user, *mechanism)),
                    Some(&value),
                    &[],
                );
            }
        }
    }
    let offset = cx.propose_metadata_batch(builder.build().into_bytes())?;
    tracing::info!(
        changes = changes.len(),
        offset,
        "SCRAM credential changes proposed"
    );
    Ok(offset)
}

fn described(
    user: &str,
    infos: &[(ScramMechanism, i32)],
) -> describe_resp::DescribeUserScramCredentialsResult {
    describe_resp::DescribeUserScramCredentialsResult {
        user: user.to_string(),
        error_code: ErrorCode::None.code(),
        error_message: None,
        credential_infos: infos
            .iter()
            .map(|(mechanism, iterations)| describe_resp::CredentialInfo {
                mechanism: mechanism.type_id(),
                iterations: *iterations,
            })
            .collect(),
    }
}
