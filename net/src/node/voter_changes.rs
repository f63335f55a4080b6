//! KIP-853 AddRaftVoter (80), RemoveRaftVoter (81) and UpdateRaftVoter (82) for the quorum of
//! `__cluster_metadata-0`. The leader appends a `VotersRecord` (the core's
//! `add_voter_with_info` / `remove_voter` / `update_voter`, docs/raft.md "Voter changes"); the
//! answer waits, like an acks=all produce, until the high-watermark passes that record (checked
//! where produce waiters are, `Node::check_waiters`), or until the request's time is up.
//!
//! | situation                                          | answer                                  |
//! | -------------------------------------------------- | --------------------------------------- |
//! | ClusterId set and not this cluster's               | INCONSISTENT_CLUSTER_ID                 |
//! | this node does not lead the metadata partition     | NOT_LEADER_OR_FOLLOWER (Kafka's answer) |
//! | Add: already a voter                               | DUPLICATE_VOTER                         |
//! | Remove / Update: not a voter (or another disk)     | VOTER_NOT_FOUND                         |
//! | Remove: the last voter                             | INVALID_REQUEST                         |
//! | a change in flight, leader epoch not committed, the new voter not caught up | REQUEST_TIMED_OUT (retry) |
//! | appended; AddRaftVoter v1 with AckWhenCommitted=false | NONE at once                         |
//! | appended                                           | NONE once the record is committed       |
//! | the record is not committed in time (Add: TimeoutMs; Remove, Update: `controller.quorum.request.timeout.ms`) | REQUEST_TIMED_OUT |
//! | the record was truncated (leadership lost)         | NOT_LEADER_OR_FOLLOWER                  |
//!
//! Kafka answers from the leader only too; its admin client finds the leader first. Ours
//! (`ringlog add-voter`) asks DescribeQuorum for the leader and sends the request there.

use ringlog_engine::io::AnyIo;
use ringlog_replication::host::{Host, HostError};
use ringlog_replication::{Endpoint, RaftError, VoterInfo, VoterSet};

use super::NodeError;
use super::context::Cx;
use super::convert::PartitionTable;
use super::transport::Responder;
use crate::protocol::wire::Uuid;
use crate::protocol::{
    ApiKey, ErrorCode, Request, RequestHeader, Response, add_raft_voter_request,
    add_raft_voter_response, encode_response, remove_raft_voter_response,
    update_raft_voter_response,
};

/// Voter change answers waiting for their record to commit.
#[derive(Default)]
pub(super) struct PendingVoterChanges {
    waiting: Vec<PendingVoterChange>,
}

struct PendingVoterChange {
    responder: Responder,
    correlation_id: i32,
    version: i16,
    api: ApiKey,
    /// The VotersRecord's offset and the voter set it holds: the change is done when the
    /// high-watermark passes it and the record there is still this one.
    record_offset: u64,
    voters: VoterSet,
    deadline_ms: u64,
}

impl PendingVoterChanges {
    pub(super) fn next_deadline_ms(&self) -> u64 {
        self.waiting
            .iter()
            .map(|p| p.deadline_ms)
            .min()
            .unwrap_or(u64::MAX)
    }
}

fn endpoints<'a>(listeners: impl Iterator<Item = (&'a str, &'a str, u16)>) -> Vec<Endpoint> {
    listeners
        .map(|(name, host, port)| Endpoint {
            name: name.to_string(),
            host: host.to_string(),
            port,
        })
        .collect()
}

/// The wire error for a refused change (KIP-853's codes where it has one).
fn error_code(error: &RaftError) -> ErrorCode {
    match error {
        RaftError::AlreadyVoter(_) => ErrorCode::DuplicateVoter,
        RaftError::UnknownVoter(_) => ErrorCode::VoterNotFound,
        other => ErrorCode::from_code(super::convert::error_to_wire(
            other.voter_change_error_code(),
        ))
        .unwrap_or(ErrorCode::UnknownServerError),
    }
}

fn response(api: ApiKey, code: ErrorCode, message: Option<String>) -> Response {
    match api {
        ApiKey::AddRaftVoter => {
            Response::AddRaftVoter(add_raft_voter_response::AddRaftVoterResponse {
                error_code: code.code(),
                error_message: message,
                ..Default::default()
            })
        }
        ApiKey::RemoveRaftVoter => {
            Response::RemoveRaftVoter(remove_raft_voter_response::RemoveRaftVoterResponse {
                error_code: code.code(),
                error_message: message,
                ..Default::default()
            })
        }
        _ => Response::UpdateRaftVoter(update_raft_voter_response::UpdateRaftVoterResponse {
            error_code: code.code(),
            ..Default::default()
        }),
    }
}

/// Answers a voter change at once.
fn send_now(
    responder: Responder,
    header: &RequestHeader,
    api: ApiKey,
    code: ErrorCode,
    message: Option<String>,
) -> Result<(), NodeError> {
    let frame = encode_response(
        header.correlation_id,
        header.api_version,
        &response(api, code, message),
    )?;
    responder.send(Some(frame));
    Ok(())
}

impl PendingVoterChanges {
    /// AddRaftVoter, RemoveRaftVoter, UpdateRaftVoter: see the module doc.
    pub(super) fn handle(
        &mut self,
        cx: &mut Cx,
        responder: Responder,
        header: &RequestHeader,
        request: Request,
    ) -> Result<(), NodeError> {
        let api = request.api_key();
        let now = cx.now_ms;
        let partition = cx.metadata_partition_id();
        let (cluster_id, voter_id, directory_id, timeout_ms, ack_when_committed) = match &request {
            Request::AddRaftVoter(r) => (
                r.cluster_id.clone(),
                r.voter_id,
                r.voter_directory_id,
                u64::try_from(r.timeout_ms).unwrap_or(0),
                r.ack_when_committed,
            ),
            Request::RemoveRaftVoter(r) => (
                r.cluster_id.clone(),
                r.voter_id,
                r.voter_directory_id,
                cx.config.request_timeout_ms,
                true,
            ),
            Request::UpdateRaftVoter(r) => (
                r.cluster_id.clone(),
                r.voter_id,
                r.voter_directory_id,
                cx.config.request_timeout_ms,
                true,
            ),
            _ => unreachable!("only voter changes are routed here"),
        };
        if cluster_id.as_ref().is_some_and(|c| *c != cx.cluster_id) {
            return send_now(
                responder,
                header,
                api,
                ErrorCode::InconsistentClusterId,
                None,
            );
        }
        let info = |listeners: Vec<Endpoint>| VoterInfo {
            directory_id: directory_id.0,
            endpoints: listeners,
        };
        let result = match &request {
            Request::AddRaftVoter(r) => {
                let listeners = endpoints(r.listeners.iter().map(
                    |l: &add_raft_voter_request::Listener| {
                        (l.name.as_str(), l.host.as_str(), l.port)
                    },
                ));
                cx.host
                    .add_voter(now, partition, voter_id, info(listeners))
                    .map(Some)
            }
            Request::RemoveRaftVoter(_) => {
                // KIP-853: the voter is named with its disk; a zero directory id names any.
                let known = cx
                    .metadata_raft()
                    .voter_set()
                    .voters()
                    .get(&voter_id)
                    .map(|v| v.directory_id);
                match known {
                    Some(known)
                        if known != [0; 16]
                            && directory_id != Uuid::ZERO
                            && known != directory_id.0 =>
                    {
                        Err(HostError::Raft(RaftError::UnknownVoter(voter_id)))
                    }
                    _ => cx.host.remove_voter(now, partition, voter_id).map(Some),
                }
            }
            Request::UpdateRaftVoter(r) => {
                let listeners = endpoints(
                    r.listeners
                        .iter()
                        .map(|l| (l.name.as_str(), l.host.as_str(), l.port)),
                );
                cx.host
                    .update_voter(now, partition, voter_id, info(listeners))
            }
            _ => unreachable!("only voter changes are routed here"),
        };
        let appended = match result {
            Ok(appended) => appended,
            Err(HostError::Raft(error)) => {
                tracing::info!(?api, voter_id, %error, "voter change refused");
                return send_now(
                    responder,
                    header,
                    api,
                    error_code(&error),
                    Some(error.to_string()),
                );
            }
            Err(HostError::Storage(error)) => return Err(error.into()),
        };
        let Some(appended) = appended else {
            // UpdateRaftVoter with nothing to change.
            return send_now(responder, header, api, ErrorCode::None, None);
        };
        let voters = cx.metadata_raft().voter_set().clone();
        tracing::info!(
            ?api,
            voter_id,
            offset = appended.last_offset,
            voters = ?voters.ids(),
            "voter set record appended"
        );
        if !ack_when_committed {
            return send_now(responder, header, api, ErrorCode::None, None);
        }
        self.waiting.push(PendingVoterChange {
            responder,
            correlation_id: header.correlation_id,
            version: header.api_version,
            api,
            record_offset: appended.last_offset,
            voters,
            deadline_ms: now + timeout_ms.max(1),
        });
        self.answer(cx.host, cx.table, now)
    }

    /// Answers the voter changes whose record committed, was truncated, or ran out of time.
    pub(super) fn answer(
        &mut self,
        host: &Host<AnyIo>,
        table: &PartitionTable,
        now: u64,
    ) -> Result<(), NodeError> {
        if self.waiting.is_empty() {
            return Ok(());
        }
        let partition = super::context::metadata_partition_id(table);
        let mut index = 0;
        while index < self.waiting.len() {
            let pending = &self.waiting[index];
            let raft = host.raft(partition).expect("hosted");
            let high_watermark = host.store(partition).expect("hosted").high_watermark;
            let ours = raft
                .voter_history()
                .entries()
                .iter()
                .any(|e| e.offset == pending.record_offset && e.voters == pending.voters);
            // A record below the log start went into a snapshot: committed.
            let snapshotted = pending.record_offset < raft.log().log_start_offset();
            let outcome = if high_watermark > pending.record_offset && (ours || snapshotted) {
                Some(ErrorCode::None)
            } else if !ours && !snapshotted {
                Some(ErrorCode::NotLeaderOrFollower)
            } else if now >= pending.deadline_ms {
                Some(ErrorCode::RequestTimedOut)
            } else {
                None
            };
            let Some(code) = outcome else {
                index += 1;
                continue;
            };
            let pending = self.waiting.swap_remove(index);
            tracing::info!(api = ?pending.api, offset = pending.record_offset, ?code, "voter change answered");
            let frame = encode_response(
                pending.correlation_id,
                pending.version,
                &response(pending.api, code, None),
            )?;
            pending.responder.send(Some(frame));
        }
        Ok(())
    }

    /// Shutdown: every waiting voter change is answered now.
    pub(super) fn fail_all(&mut self, code: ErrorCode) -> Result<(), NodeError> {
        for pending in std::mem::take(&mut self.waiting) {
            let frame = encode_response(
                pending.correlation_id,
                pending.version,
                &response(pending.api, code, None),
            )?;
            pending.responder.send(Some(frame));
        }
        Ok(())
    }
}
