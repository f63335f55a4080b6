//! A peer's answers to what this node sent it (`QuorumRpc::handle_peer_response`), and what a
//! failed lane lost (`QuorumRpc::peer_failed`): each goes to the cores as their messages.

use super::*;

impl QuorumRpc {
    /// A peer's answer to a request this node sent: stepped into the cores, relayed to the
    /// client (a forwarded admin request), or handed back ([`PeerAnswer`]).
    pub(in crate::node) fn handle_peer_response(
        &mut self,
        q: &mut Qx,
        peer: NodeId,
        correlation_id: i32,
        response: Response,
        later: &mut Vec<Output>,
    ) -> Result<Option<PeerAnswer>, NodeError> {
        let Some(pending) = self.peers.pending.remove(&(peer, correlation_id)) else {
            return Ok(None);
        };
        // KIP-853: where the leaders this answer names listen (a node started with bootstrap
        // servers dials the leader there).
        leader_endpoints::learn_node_endpoints(
            &mut self.peers.learned,
            q.config,
            super::super::context::metadata_raft(q.host, q.table),
            &response,
        );
        // KIP-227: the answer to the Fetch that opened a session names it; an error on the
        // whole Fetch (the leader lost our session) starts over with a full one.
        if let (PeerPending::Fetch(_), Response::Fetch(r)) = (&pending, &response) {
            self.fetch_sessions
                .note_session(peer, correlation_id, r.error_code, r.session_id);
        }
        let pending = match pending {
            PeerPending::Forward {
                responder,
                correlation_id,
                version,
                ..
            } => {
                // The controller's answer to a forwarded request, relayed to the client.
                let frame = encode_response(correlation_id, version, &response)?;
                responder.send(Some(frame));
                return Ok(None);
            }
            PeerPending::ProducerIdBlock => {
                let answer = match response {
                    Response::AllocateProducerIds(r) => Some(r),
                    _ => None,
                };
                return Ok(Some(PeerAnswer::ProducerIdBlock(answer)));
            }
            PeerPending::LeaderLookup(asked) => {
                return Ok(Some(PeerAnswer::LeaderLookup(asked, Some(response))));
            }
            other => other,
        };
        let mut newest = true;
        if matches!(pending, PeerPending::Fetch(_)) {
            // The newest of this session's Fetches, or one a later Fetch superseded: its parts
            // are delivered all the same where their fetch still waits (`settle` below).
            newest = self.fetch_sessions.take_answer(peer, correlation_id);
            if self.fetch_sessions.held_may_leave(peer) {
                // Fetches held while two wire Fetches were out leave with this turn's
                // (`deliver` below sends them).
                self.fetches.entry(peer).or_default();
            }
        }
        let mut parts = match (&pending, &response) {
            (PeerPending::Fetch(fetches), Response::Fetch(r)) => {
                // In partition order (fetch_sessions.rs), so a search per answered part.
                convert::peer_fetch_response_parts(r, q.table, |partition| {
                    fetches
                        .binary_search_by_key(&partition, |(p, _)| *p)
                        .ok()
                        .map(|i| fetches[i].1)
                })
            }
            (PeerPending::Control | PeerPending::Quorum { .. }, r) => {
                convert::peer_response_parts(r, q.table)
            }
            (PeerPending::FetchSnapshot(asked), Response::FetchSnapshot(r)) => {
                fetch_snapshot::peer_response_parts(r, q.table, asked)
            }
            (PeerPending::OwnEndpointUpdate, Response::UpdateRaftVoter(r)) => {
                tracing::info!(
                    peer,
                    error_code = r.error_code,
                    "UpdateRaftVoter of this voter's listener answered"
                );
                return Ok(None);
            }
            _ => Vec::new(),
        };
        if matches!(pending, PeerPending::Fetch(_)) {
            let sessions = &mut self.fetch_sessions;
            // A superseded answer's errors are dropped (the leader answers a part that the
            // later Fetch asks differently REQUEST_TIMED_OUT, and a session error the later
            // Fetch is answered too), but not those that name the leader: a replica asking a
            // voter that does not lead the partition learns the leader only from them. Dropped
            // too until 2026-12-07, an observer that sent two Fetches at a time never learned
            // the leaders of half a 1,000-partition topic, and its leader-less fetches, which
            // do not long-poll, kept every voter answering it at once (docs/node.md).
            parts.retain(|(partition, message)| match message {
                core::Message::FetchResponse(r) => {
                    let names_leader = matches!(
                        r.error_code,
                        core::ErrorCode::None
                            | core::ErrorCode::NotLeaderOrFollower
                            | core::ErrorCode::FencedLeaderEpoch
                            | core::ErrorCode::UnknownLeaderEpoch
                    );
                    (newest || names_leader) && sessions.settle(peer, *partition, r.correlation_id)
                }
                _ => true,
            });
            for (partition, message) in &parts {
                if let core::Message::FetchResponse(r) = message {
                    self.fetch_sessions
                        .note_answer(*partition, r.records.is_empty());
                }
            }
        }
        // A leader's LogStartOffset that moved (a DeleteRecords, its retention) is followed
        // in this loop turn (delete_records.rs).
        let log_start_moved = parts.iter().any(|(partition, message)| {
            matches!(message, core::Message::FetchResponse(r)
            if q.host.raft(*partition).is_some_and(|raft| {
                raft.leader_log_start_offset() != r.log_start_offset
            }))
        });
        // Every partition's answer is stepped before the host's output is delivered, so the
        // requests they lead to (the next FetchSnapshot of each partition downloading from
        // this peer) leave together, in one wire request per peer.
        for (partition, message) in parts {
            let epoch = q.host.raft(partition).map_or(0, |r| r.epoch());
            let span = tracing::debug_span!(
                "peer_response",
                partition,
                epoch,
                peer,
                kind = message.kind()
            );
            let _guard = span.enter();
            match q
                .host
                .step(q.now_ms, peer, PartitionMessage { partition, message })
            {
                Ok(()) => {}
                Err(HostError::Storage(error)) => return Err(error.into()),
                Err(HostError::Raft(error)) => {
                    tracing::warn!(peer, partition, %error, "peer response refused by the core")
                }
            }
        }
        self.deliver(q, later)?;
        // Partitions the leader left out (parked there) go with the next wire Fetch: a core's
        // (in this delivery or soon after its flush), or alone when none comes (`expire`).
        self.fetch_sessions.note_left_out(peer, q.now_ms);
        Ok(log_start_moved.then_some(PeerAnswer::LeaderLogStartMoved))
    }

    /// A peer's lane failed with these requests unanswered. The core only learns of a lost
    /// fetch at its request timeout, and an observer looking for the leader would keep asking
    /// the same dead voter: the fetch is answered as failed (BROKER_NOT_AVAILABLE) so it backs
    /// off and asks the next one. Lost lookups and producer id requests are handed back.
    ///
    /// A lost Vote, BeginQuorumEpoch or EndQuorumEpoch is answered BROKER_NOT_AVAILABLE too: the
    /// core asks again after `controller.quorum.retry.backoff.ms` (Kafka's request manager
    /// retries a failed request so), where it would have waited its request timeout. Not while
    /// this node shuts down: its resignation goes to whoever is listening, and the lane's
    /// failure ends the wait for it.
    pub(in crate::node) fn peer_failed(
        &mut self,
        q: &mut Qx,
        peer: NodeId,
        correlation_ids: Vec<i32>,
        shutting_down: bool,
        later: &mut Vec<Output>,
    ) -> Result<Vec<PeerAnswer>, NodeError> {
        let mut answers = Vec::new();
        // The leader's fetch session is ours no more: the next Fetch there is a full one.
        self.fetch_sessions.reset_wire(peer);
        for id in correlation_ids {
            match self.peers.pending.remove(&(peer, id)) {
                Some(PeerPending::LeaderLookup(partitions)) => {
                    answers.push(PeerAnswer::LeaderLookup(partitions, None));
                }
                Some(PeerPending::ProducerIdBlock) => {
                    answers.push(PeerAnswer::ProducerIdBlock(None));
                }
                Some(PeerPending::Fetch(fetches)) if self.fetch_sessions.take_answer(peer, id) => {
                    for (partition, correlation_id) in fetches {
                        if !self.fetch_sessions.settle(peer, partition, correlation_id) {
                            continue;
                        }
                        let message = core::Message::FetchResponse(
                            core::FetchResponse::unreachable(correlation_id),
                        );
                        self.step_lost(q, peer, PartitionMessage { partition, message }, later)?;
                    }
                }
                Some(PeerPending::Quorum { partition, api }) if !shutting_down => {
                    let message = convert::lost_quorum_request_answer(api);
                    self.step_lost(q, peer, PartitionMessage { partition, message }, later)?;
                }
                _ => {}
            }
        }
        if self.fetch_sessions.held_may_leave(peer) {
            self.fetches.entry(peer).or_default();
            self.deliver(q, later)?;
        }
        Ok(answers)
    }

    /// Steps a core with the answer standing for a request its peer's lane lost, and delivers
    /// what that asks for. A core that no longer waits for it refuses it; that is logged only.
    fn step_lost(
        &mut self,
        q: &mut Qx,
        peer: NodeId,
        message: PartitionMessage,
        later: &mut Vec<Output>,
    ) -> Result<(), NodeError> {
        match q.host.step(q.now_ms, peer, message) {
            Ok(()) => {}
            Err(HostError::Raft(error)) => {
                tracing::debug!(%error, "lost request's answer not taken")
            }
            Err(HostError::Storage(error)) => return Err(error.into()),
        }
        self.deliver(q, later)
    }
}
