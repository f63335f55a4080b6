//! Admin answers parked until the metadata records they wait for are applied: CreateTopics,
//! DeleteTopics, (Incremental)AlterConfigs, CreatePartitions, CreateAcls, DeleteAcls and
//! AlterUserScramCredentials. The controller proposes a request's records, parks its answer
//! here with each result's record offset, and the answer leaves once every record is applied
//! in the epoch it was proposed in; a result whose controller lost that epoch (the record may
//! be replaced) is answered NOT_CONTROLLER, one past the request's timeout REQUEST_TIMED_OUT.
//!
//! Owns nothing but the parked answers: the node tells it what the metadata image applied and
//! which epoch the metadata partition is in (`answer_ready`).

use super::NodeError;
use super::transport::Responder;
use crate::protocol::{
    ErrorCode, RequestHeader, Response, create_topics_response as ct_resp, encode_response,
};

/// The per-topic answers of a CreateTopics or a DeleteTopics.
pub(super) enum AdminResults {
    Create(Vec<ct_resp::CreatableTopicResult>),
    Delete(Vec<crate::protocol::delete_topics_response::DeletableTopicResult>),
    /// IncrementalAlterConfigs, or the legacy AlterConfigs when `legacy` (same answers).
    AlterConfigs {
        legacy: bool,
        results:
            Vec<crate::protocol::incremental_alter_configs_response::AlterConfigsResourceResponse>,
    },
    CreatePartitions(Vec<crate::protocol::create_partitions_response::CreatePartitionsTopicResult>),
    /// CreateAcls and DeleteAcls (acls.rs).
    CreateAcls(Vec<crate::protocol::create_acls_response::AclCreationResult>),
    DeleteAcls(Vec<crate::protocol::delete_acls_response::DeleteAclsFilterResult>),
    /// AlterUserScramCredentials (scram.rs).
    ScramCredentials(
        Vec<
            crate::protocol::alter_user_scram_credentials_response::AlterUserScramCredentialsResult,
        >,
    ),
}

impl AdminResults {
    fn set_error(&mut self, index: usize, code: ErrorCode) {
        match self {
            AdminResults::Create(r) => r[index].error_code = code.code(),
            AdminResults::Delete(r) => r[index].error_code = code.code(),
            AdminResults::AlterConfigs { results, .. } => results[index].error_code = code.code(),
            AdminResults::CreatePartitions(r) => r[index].error_code = code.code(),
            AdminResults::CreateAcls(r) => r[index].error_code = code.code(),
            AdminResults::DeleteAcls(r) => r[index].error_code = code.code(),
            AdminResults::ScramCredentials(r) => r[index].error_code = code.code(),
        }
    }

    fn into_response(self) -> Response {
        match self {
            AdminResults::Create(topics) => Response::CreateTopics(ct_resp::CreateTopicsResponse {
                throttle_time_ms: 0,
                topics,
            }),
            AdminResults::Delete(responses) => Response::DeleteTopics(
                crate::protocol::delete_topics_response::DeleteTopicsResponse {
                    throttle_time_ms: 0,
                    responses,
                },
            ),
            AdminResults::AlterConfigs {
                legacy: false,
                results,
            } => Response::IncrementalAlterConfigs(
                crate::protocol::IncrementalAlterConfigsResponse {
                    throttle_time_ms: 0,
                    responses: results,
                },
            ),
            AdminResults::AlterConfigs {
                legacy: true,
                results,
            } => Response::AlterConfigs(crate::protocol::AlterConfigsResponse {
                throttle_time_ms: 0,
                responses: results
                    .into_iter()
                    .map(|r| {
                        crate::protocol::alter_configs_response::AlterConfigsResourceResponse {
                            error_code: r.error_code,
                            error_message: r.error_message,
                            resource_type: r.resource_type,
                            resource_name: r.resource_name,
                        }
                    })
                    .collect(),
            }),
            AdminResults::CreatePartitions(results) => {
                Response::CreatePartitions(crate::protocol::CreatePartitionsResponse {
                    throttle_time_ms: 0,
                    results,
                })
            }
            AdminResults::CreateAcls(results) => {
                Response::CreateAcls(crate::protocol::CreateAclsResponse {
                    throttle_time_ms: 0,
                    results,
                })
            }
            AdminResults::DeleteAcls(filter_results) => {
                Response::DeleteAcls(crate::protocol::DeleteAclsResponse {
                    throttle_time_ms: 0,
                    filter_results,
                })
            }
            AdminResults::ScramCredentials(results) => Response::AlterUserScramCredentials(
                crate::protocol::AlterUserScramCredentialsResponse {
                    throttle_time_ms: 0,
                    results,
                },
            ),
        }
    }
}

struct ParkedAdminAnswer {
    responder: Responder,
    correlation_id: i32,
    version: i16,
    results: AdminResults,
    /// (result index, metadata-log offset of its record).
    waiting: Vec<(usize, u64)>,
    metadata_epoch: u32,
    deadline_ms: u64,
}

/// The parked admin answers, in arrival order.
#[derive(Default)]
pub(super) struct AdminAnswers {
    parked: Vec<ParkedAdminAnswer>,
}

impl AdminAnswers {
    /// Parks an answer until the records in `waiting` ((result index, record offset)) are
    /// applied in `metadata_epoch`, or `request_timeout_ms` passes. The node answers what is
    /// ready after the call that parked it (`answer_ready`).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn park(
        &mut self,
        responder: Responder,
        header: &RequestHeader,
        request_timeout_ms: i32,
        results: AdminResults,
        waiting: Vec<(usize, u64)>,
        metadata_epoch: u32,
        now_ms: u64,
    ) {
        let timeout_ms = u64::try_from(request_timeout_ms).unwrap_or(0).max(1);
        self.parked.push(ParkedAdminAnswer {
            responder,
            correlation_id: header.correlation_id,
            version: header.api_version,
            results,
            waiting,
            metadata_epoch,
            deadline_ms: now_ms + timeout_ms,
        });
    }

    pub(super) fn next_deadline_ms(&self) -> u64 {
        self.parked
            .iter()
            .map(|c| c.deadline_ms)
            .min()
            .unwrap_or(u64::MAX)
    }

    /// Answers the parked requests whose records are applied (every record below
    /// `applied_offset`); fails the results whose controller lost its epoch (`leading` false or
    /// another `metadata_epoch`) or whose timeout passed.
    pub(super) fn answer_ready(
        &mut self,
        applied_offset: u64,
        metadata_epoch: u32,
        leading: bool,
        now_ms: u64,
    ) -> Result<(), NodeError> {
        let mut index = 0;
        while index < self.parked.len() {
            let c = &mut self.parked[index];
            let lost = !leading || c.metadata_epoch != metadata_epoch;
            let expired = now_ms >= c.deadline_ms;
            c.waiting.retain(|(i, offset)| {
                if *offset < applied_offset {
                    return false;
                }
                if lost || expired {
                    let code = if lost {
                        ErrorCode::NotController
                    } else {
                        ErrorCode::RequestTimedOut
                    };
                    c.results.set_error(*i, code);
                    return false;
                }
                true
            });
            if c.waiting.is_empty() {
                let c = self.parked.swap_remove(index);
                let response = c.results.into_response();
                let frame = encode_response(c.correlation_id, c.version, &response)?;
                c.responder.send(Some(frame));
            } else {
                index += 1;
            }
        }
        Ok(())
    }
}
