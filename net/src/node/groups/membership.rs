//! The group membership requests: JoinGroup, SyncGroup, Heartbeat and LeaveGroup, handed to the
//! coordinator of the group's `__consumer_offsets` partition.

use super::*;

impl GroupsState {
    pub(super) fn handle_join_group(
        &mut self,
        cx: &mut Cx,
        env: GroupsEnv,
        responder: Responder,
        header: &RequestHeader,
        request: jg_req::JoinGroupRequest,
    ) -> Result<(), NodeError> {
        let version = header.api_version;
        let (index, _) = match self.group_coordinator(cx, env, &request.group_id) {
            Ok(found) => found,
            Err(code) => {
                let response = join_response(JoinResult::error(code, &request.member_id), version);
                let frame = encode_response(
                    header.correlation_id,
                    version,
                    &Response::JoinGroup(response),
                )?;
                responder.send(Some(frame));
                return Ok(());
            }
        };
        // A negative timeout reads as 0, which no session or rebalance bound accepts.
        let session_timeout_ms = u64::try_from(request.session_timeout_ms).unwrap_or(0);
        let rebalance_timeout_ms = match u64::try_from(request.rebalance_timeout_ms) {
            Ok(ms) if version >= 1 => ms,
            _ => session_timeout_ms,
        };
        let join = JoinRequest {
            group_id: request.group_id,
            member_id: request.member_id,
            group_instance_id: request.group_instance_id,
            client_id: header.client_id.clone().unwrap_or_default(),
            client_host: format!("/{}", responder.peer_addr().ip()),
            session_timeout_ms,
            rebalance_timeout_ms,
            protocol_type: request.protocol_type,
            // Copied out of the request frame: a member's subscription lives as long as the
            // member, and must not keep the whole frame alive.
            protocols: request
                .protocols
                .into_iter()
                .map(|p| (p.name, Bytes::copy_from_slice(&p.metadata)))
                .collect(),
            require_known_member_id: version >= 4,
        };
        let token = self.hold(responder, header);
        let now = cx.now_ms;
        let mut out = Outbox::new();
        self.coordinator.join(now, index, token, join, &mut out);
        self.deliver_group_outbox(out)
    }

    pub(super) fn handle_sync_group(
        &mut self,
        cx: &mut Cx,
        env: GroupsEnv,
        responder: Responder,
        header: &RequestHeader,
        request: sg_req::SyncGroupRequest,
    ) -> Result<(), NodeError> {
        if let Err(code) = self.group_coordinator(cx, env, &request.group_id) {
            let response = Response::SyncGroup(sync_response(SyncResult::error(code)));
            let frame = encode_response(header.correlation_id, header.api_version, &response)?;
            responder.send(Some(frame));
            return Ok(());
        }
        let sync = SyncRequest {
            group_id: request.group_id,
            member_id: request.member_id,
            generation_id: request.generation_id,
            group_instance_id: request.group_instance_id,
            protocol_type: request.protocol_type,
            protocol_name: request.protocol_name,
            assignments: request
                .assignments
                .into_iter()
                .map(|a| (a.member_id, a.assignment))
                .collect(),
        };
        let token = self.hold(responder, header);
        let now = cx.now_ms;
        let mut out = Outbox::new();
        let group_id = sync.group_id.clone();
        self.coordinator.sync(now, token, sync, &mut out);
        let appended = self.persist_group_metadata(cx, env);
        self.deliver_sync_answers(cx, &group_id, out, &appended)
    }

    pub(super) fn handle_heartbeat(
        &mut self,
        cx: &mut Cx,
        env: GroupsEnv,
        request: &hb_req::HeartbeatRequest,
    ) -> hb_resp::HeartbeatResponse {
        let error = match self.group_coordinator(cx, env, &request.group_id) {
            Err(code) => code,
            Ok(_) => {
                let now = cx.now_ms;
                self.coordinator.heartbeat(
                    now,
                    &request.group_id,
                    &request.member_id,
                    request.generation_id,
                    request.group_instance_id.as_deref(),
                )
            }
        };
        hb_resp::HeartbeatResponse {
            throttle_time_ms: 0,
            error_code: error.code(),
        }
    }

    pub(super) fn handle_leave_group(
        &mut self,
        cx: &mut Cx,
        env: GroupsEnv,
        request: &lg_req::LeaveGroupRequest,
        version: i16,
    ) -> lg_resp::LeaveGroupResponse {
        let leaving: Vec<LeavingMember> = if version >= 3 {
            request
                .members
                .iter()
                .map(|m| LeavingMember {
                    member_id: m.member_id.clone(),
                    group_instance_id: m.group_instance_id.clone(),
                })
                .collect()
        } else {
            vec![LeavingMember {
                member_id: request.member_id.clone(),
                group_instance_id: None,
            }]
        };
        let mut out = Outbox::new();
        let result = match self.group_coordinator(cx, env, &request.group_id) {
            Err(code) => Err(code),
            Ok(_) => {
                let now = cx.now_ms;
                self.coordinator
                    .leave(now, &request.group_id, &leaving, &mut out)
            }
        };
        if let Err(error) = self.deliver_group_outbox(out) {
            tracing::warn!(%error, "answering requests a LeaveGroup released");
        }
        match result {
            Err(code) => lg_resp::LeaveGroupResponse {
                error_code: code.code(),
                ..Default::default()
            },
            Ok(errors) if version < 3 => lg_resp::LeaveGroupResponse {
                error_code: errors.first().map_or(0, |e| e.code()),
                ..Default::default()
            },
            Ok(errors) => lg_resp::LeaveGroupResponse {
                throttle_time_ms: 0,
                error_code: 0,
                members: leaving
                    .into_iter()
                    .zip(errors)
                    .map(|(m, e)| lg_resp::MemberResponse {
                        member_id: m.member_id,
                        group_instance_id: m.group_instance_id,
                        error_code: e.code(),
                    })
                    .collect(),
            },
        }
    }
}

/// A JoinGroup answer at `version`: before v7 the protocol name is not nullable (empty).
pub(super) fn join_response(result: JoinResult, version: i16) -> jg_resp::JoinGroupResponse {
    jg_resp::JoinGroupResponse {
        throttle_time_ms: 0,
        error_code: result.error.code(),
        generation_id: result.generation_id,
        protocol_type: result.protocol_type,
        protocol_name: match result.protocol_name {
            None if version < 7 => Some(String::new()),
            name => name,
        },
        leader: result.leader,
        skip_assignment: false,
        member_id: result.member_id,
        members: result
            .members
            .into_iter()
            .map(|m| jg_resp::JoinGroupResponseMember {
                member_id: m.member_id,
                group_instance_id: m.group_instance_id,
                metadata: m.metadata,
            })
            .collect(),
    }
}

pub(super) fn sync_response(result: SyncResult) -> sg_resp::SyncGroupResponse {
    sg_resp::SyncGroupResponse {
        throttle_time_ms: 0,
        error_code: result.error.code(),
        protocol_type: result.protocol_type,
        protocol_name: result.protocol_name,
        assignment: result.assignment,
    }
}
