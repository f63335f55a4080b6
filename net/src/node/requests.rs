//! Quorum requests between the sockets and the core: inbound Vote, BeginQuorumEpoch,
//! EndQuorumEpoch and replica Fetch become core steps with one answer slot per partition; the
//! core's answers fill the slots and a full set leaves as one wire response. Outbound, the
//! core's requests go to the peer lanes (the fetches of one work list batched per peer) and
//! the peers' answers become core steps.

use std::collections::BTreeMap;
use std::time::Duration;

use ringlog_replication::host::HostError;
use ringlog_replication::{self as core, NodeId, PartitionId, PartitionMessage};

use super::convert::{self, InboundPart, PartAnswer};
use super::transport::{Outgoing, PeerLane, Responder};
use super::{Node, NodeError, PeerPending, PendingRequest};
use crate::protocol::wire::Records;
use crate::protocol::{
    ApiKey, Request, RequestHeader, Response, encode_request, encode_response, fetch_response,
};
use crate::server::{FileRegion, RecordsSource, Reply};

impl Node {
    pub(super) fn handle_request(
        &mut self,
        responder: Responder,
        header: RequestHeader,
        request: Request,
    ) -> Result<(), NodeError> {
        let version = header.api_version;
        let replicas = |topic: super::admission::TopicRef<'_>, index: i32| {
            self.partition_replicas(topic, index)
        };
        let metadata_voters = self.metadata_voter_ids();
        let admitted = super::admission::admit_with_voters(
            &request,
            version,
            &self.cluster_id,
            &self.config,
            &metadata_voters,
            &replicas,
        );
        if let Err(refusal) = admitted {
            let now = self.now_ms();
            self.refusals.note(now, request.api_key(), &refusal);
            // An answer that cannot be encoded closes the connection (the responder dropped
            // unanswered): a stranger's request must never end the process.
            let frame = super::admission::refused_response(&request, refusal.error_code())
                .map(|response| encode_response(header.correlation_id, version, &response));
            match frame {
                Some(Ok(frame)) => responder.send(Some(frame)),
                Some(Err(error)) => tracing::warn!(%error, "encoding a refusal"),
                None => {}
            }
            return Ok(());
        }
        match request {
            Request::Vote(r) => {
                let parts = convert::vote_request_parts(&r, &self.table, self.config.node_id);
                self.start_raft_request(responder, &header, ApiKey::Vote, parts)
            }
            Request::BeginQuorumEpoch(r) => {
                let parts =
                    convert::begin_quorum_epoch_request_parts(&r, &self.table, self.config.node_id);
                self.start_raft_request(responder, &header, ApiKey::BeginQuorumEpoch, parts)
            }
            Request::EndQuorumEpoch(r) => {
                let parts = convert::end_quorum_epoch_request_parts(&r, &self.table);
                self.start_raft_request(responder, &header, ApiKey::EndQuorumEpoch, parts)
            }
            Request::Fetch(r) if convert::fetch_replica_id(&r, version) >= 0 => {
                self.handlers.delete_records.note_replica_log_starts(
                    &self.table,
                    &r,
                    convert::fetch_replica_id(&r, version),
                );
                let mut next = self.next_core_correlation_id;
                let parts = convert::replica_fetch_parts(&r, version, &self.table, || {
                    next += 1;
                    next
                });
                self.next_core_correlation_id = next;
                self.start_raft_request(responder, &header, ApiKey::Fetch, parts)
            }
            Request::FetchSnapshot(r) => {
                let parts = super::fetch_snapshot::request_parts(&r, &self.table);
                self.start_raft_request(responder, &header, ApiKey::FetchSnapshot, parts)
            }
            other => self.handle_client_request(responder, header, other),
        }
    }

    /// Registers an answer slot per partition, then steps the core with each part.
    pub(super) fn start_raft_request(
        &mut self,
        responder: Responder,
        header: &RequestHeader,
        api: ApiKey,
        parts: Vec<InboundPart>,
    ) -> Result<(), NodeError> {
        let id = self.next_pending_id;
        self.next_pending_id += 1;
        let mut answers = Vec::with_capacity(parts.len());
        let mut steps = Vec::new();
        for (slot, part) in parts.iter().enumerate() {
            match &part.target {
                Err(error) => answers.push(Some(PartAnswer::Error(*error))),
                Ok((partition, from, message)) => {
                    answers.push(None);
                    if let core::Message::FetchRequest(f) = message {
                        self.fetch_slots.insert(f.correlation_id, (id, slot));
                        let superseded = self
                            .latest_replica_fetch
                            .insert((*from, *partition), f.correlation_id);
                        if let Some(old) = superseded {
                            // The core drops a parked fetch when the same replica fetches
                            // again; answer the old request so its connection moves on.
                            self.answer_slot_by_fetch_id(
                                old,
                                PartAnswer::Error(crate::protocol::ErrorCode::RequestTimedOut),
                            );
                        }
                    } else {
                        self.fifo
                            .entry((*from, api, *partition))
                            .or_default()
                            .push_back((id, slot));
                    }
                    steps.push((slot, *partition, *from, message.clone()));
                }
            }
        }
        self.pending.insert(
            id,
            PendingRequest {
                responder,
                correlation_id: header.correlation_id,
                api,
                version: header.api_version,
                snapshot_regions: vec![None; parts.len()],
                parts,
                answers,
                started_ms: self.now_ms(),
                stepping: true,
                released: false,
            },
        );
        for (slot, partition, from, message) in steps {
            let now = self.now_ms();
            let epoch = self.host.raft(partition).map_or(0, |r| r.epoch());
            let span = tracing::debug_span!("step", partition, epoch, from, kind = message.kind());
            let _guard = span.enter();
            match self
                .host
                .step(now, from, PartitionMessage { partition, message })
            {
                Ok(()) => self.deliver()?,
                Err(HostError::Storage(error)) => return Err(error.into()),
                Err(HostError::Raft(error)) => {
                    tracing::warn!(%error, "request refused by the core");
                    self.fill(
                        id,
                        slot,
                        PartAnswer::Error(crate::protocol::ErrorCode::InvalidRequest),
                    );
                }
            }
        }
        if let Some(pending) = self.pending.get_mut(&id) {
            pending.stepping = false;
        }
        self.maybe_complete(id)
    }

    pub(super) fn fill(&mut self, id: u64, slot: usize, answer: PartAnswer) {
        if let Some(pending) = self.pending.get_mut(&id)
            && pending.answers[slot].is_none()
        {
            pending.answers[slot] = Some(answer);
        }
    }

    pub(super) fn answer_slot_by_fetch_id(&mut self, correlation_id: u64, answer: PartAnswer) {
        if let Some((id, slot)) = self.fetch_slots.remove(&correlation_id) {
            self.fill(id, slot, answer);
            if let Err(error) = self.maybe_complete(id) {
                tracing::warn!(%error, "answering a fetch");
            }
        }
    }

    /// Sends the wire response once every partition is answered.
    pub(super) fn maybe_complete(&mut self, id: u64) -> Result<(), NodeError> {
        let done = self
            .pending
            .get(&id)
            .is_some_and(|p| p.answers.iter().all(Option::is_some));
        if !done {
            return self.release_parked_parts(id);
        }
        let pending = self.pending.remove(&id).expect("checked above");
        if pending.api == ApiKey::Fetch {
            self.release_earlier_fetches_on(pending.responder.connection_id(), id);
        }
        let answers: Vec<PartAnswer> = pending
            .answers
            .into_iter()
            .map(|a| a.expect("all answered"))
            .collect();
        let mut response = match pending.api {
            ApiKey::Vote => Response::Vote(convert::vote_response(&pending.parts, &answers)),
            ApiKey::BeginQuorumEpoch => Response::BeginQuorumEpoch(
                convert::begin_quorum_epoch_response(&pending.parts, &answers),
            ),
            ApiKey::EndQuorumEpoch => Response::EndQuorumEpoch(convert::end_quorum_epoch_response(
                &pending.parts,
                &answers,
            )),
            ApiKey::Fetch => {
                let mut response = convert::fetch_response(&pending.parts, &answers);
                self.raise_to_client_log_starts(&pending.parts, &mut response);
                let regions = self.attach_fetch_regions(&pending.parts, &answers, &mut response);
                let mut response = Response::Fetch(response);
                self.fill_node_endpoints(&mut response);
                if !regions.is_empty() {
                    pending
                        .responder
                        .reply(Reply::WithRecords { response, regions });
                    return Ok(());
                }
                response
            }
            ApiKey::FetchSnapshot => {
                let (response, regions) = super::fetch_snapshot::response(
                    &pending.parts,
                    &answers,
                    pending.snapshot_regions,
                    u64::from(self.config.fetch_snapshot_response_max_bytes),
                );
                let mut response = Response::FetchSnapshot(response);
                self.fill_node_endpoints(&mut response);
                if !regions.is_empty() {
                    pending
                        .responder
                        .reply(Reply::WithRecords { response, regions });
                    return Ok(());
                }
                response
            }
            other => unreachable!("{other:?} is not a quorum request"),
        };
        // KIP-853 NodeEndpoints: the leaders named, where they listen (leader_endpoints.rs).
        self.fill_node_endpoints(&mut response);
        let frame = encode_response(pending.correlation_id, pending.version, &response)?;
        pending.responder.send(Some(frame));
        Ok(())
    }

    /// A replica Fetch answers each partition's client log start as its LogStartOffset (the
    /// core knows its log start, on a batch boundary; a DeleteRecords inside the batch is
    /// above it), which the followers take as theirs (delete_records.rs).
    fn raise_to_client_log_starts(
        &self,
        parts: &[InboundPart],
        response: &mut fetch_response::FetchResponse,
    ) {
        // `fetch_response` gives one partition entry per part, in order.
        let entries = response
            .responses
            .iter_mut()
            .flat_map(|t| t.partitions.iter_mut());
        for (data, part) in entries.zip(parts) {
            debug_assert_eq!(data.partition_index, part.index);
            if let Ok((id, _, _)) = &part.target
                && let Some(store) = self.host.store(*id)
                && data.error_code == 0
            {
                data.log_start_offset = data
                    .log_start_offset
                    .max(store.client_log_start_offset() as i64);
            }
        }
    }

    /// Puts the file regions read for this replica fetch's partitions into the wire response
    /// as external records (sent with sendfile by the server); returns them in token order.
    fn attach_fetch_regions(
        &mut self,
        parts: &[InboundPart],
        answers: &[PartAnswer],
        response: &mut fetch_response::FetchResponse,
    ) -> Vec<RecordsSource> {
        let mut regions = Vec::new();
        for (part, answer) in parts.iter().zip(answers) {
            let PartAnswer::Core(core::Message::FetchResponse(r)) = answer else {
                continue;
            };
            let Some(region) = self.fetch_regions.remove(&r.correlation_id) else {
                continue;
            };
            let data = response
                .responses
                .iter_mut()
                .filter(|t| t.topic == part.topic && t.topic_id == part.topic_id)
                .flat_map(|t| t.partitions.iter_mut())
                .find(|p| p.partition_index == part.index);
            if let Some(data) = data {
                data.records = Some(Records::External {
                    token: regions.len() as u64,
                    size_bytes: region.length,
                });
                regions.push(RecordsSource::File(region));
            }
        }
        regions
    }

    /// Answers quorum requests the core never answered (a dropped long-poll, a lost leader)
    /// so their connections are not blocked forever.
    pub(super) fn expire(&mut self, now: u64) {
        let limit_ms = self.config.fetch_max_wait_ms + self.config.request_timeout_ms;
        let stale: Vec<u64> = self
            .pending
            .iter()
            .filter(|(_, p)| now.saturating_sub(p.started_ms) > limit_ms)
            .map(|(id, _)| *id)
            .collect();
        for id in stale {
            if let Some(pending) = self.pending.get_mut(&id) {
                for answer in &mut pending.answers {
                    answer.get_or_insert(PartAnswer::Error(
                        crate::protocol::ErrorCode::RequestTimedOut,
                    ));
                }
            }
            if let Err(error) = self.maybe_complete(id) {
                tracing::warn!(%error, "answering an expired request");
            }
        }
        self.handlers_expire(now);
        self.answer_parked_metadata(now);
        self.expire_forwarded(now);
    }

    /// Forwarded admin requests the controller has not answered by their deadline (a paused
    /// or cut-off controller keeps its connection open, so the lane never fails them): the
    /// client's connection is closed, as when no controller is known, and the client retries.
    fn expire_forwarded(&mut self, now: u64) {
        let late: Vec<(NodeId, i32)> = self
            .peer_pending
            .iter()
            .filter(|(_, pending)| {
                matches!(pending, PeerPending::Forward { deadline_ms, .. } if *deadline_ms <= now)
            })
            .map(|(key, _)| *key)
            .collect();
        for key in late {
            if let Some(PeerPending::Forward { correlation_id, .. }) =
                self.peer_pending.remove(&key)
            {
                tracing::info!(
                    controller = key.0,
                    client_correlation_id = correlation_id,
                    "a forwarded request timed out (controller.socket.timeout.ms); closing the client's connection"
                );
            }
        }
    }

    pub(super) fn handle_peer_response(
        &mut self,
        peer: NodeId,
        correlation_id: i32,
        response: Response,
    ) -> Result<(), NodeError> {
        let Some(pending) = self.peer_pending.remove(&(peer, correlation_id)) else {
            return Ok(());
        };
        // KIP-853: where the leaders this answer names listen (a node started with bootstrap
        // servers dials the leader there).
        self.learn_node_endpoints(&response);
        let pending = match pending {
            PeerPending::Forward {
                responder,
                correlation_id,
                version,
                ..
            } => return Node::relay_forwarded(responder, correlation_id, version, &response),
            PeerPending::Fetch(_) if !self.fetch_sessions.take_answer(peer, correlation_id) => {
                // Superseded by a later Fetch that carries the same partitions' fetches.
                return Ok(());
            }
            other => other,
        };
        let parts = match (&pending, &response) {
            (PeerPending::Fetch(fetches), Response::Fetch(r)) => {
                convert::peer_fetch_response_parts(r, &self.table, |partition| {
                    fetches
                        .iter()
                        .find(|(p, _)| *p == partition)
                        .map(|(_, id)| *id)
                })
            }
            (PeerPending::Control, r) => convert::peer_response_parts(r, &self.table),
            (PeerPending::FetchSnapshot(asked), Response::FetchSnapshot(r)) => {
                super::fetch_snapshot::peer_response_parts(r, &self.table, asked)
            }
            (PeerPending::OwnEndpointUpdate, Response::UpdateRaftVoter(r)) => {
                tracing::info!(
                    peer,
                    error_code = r.error_code,
                    "UpdateRaftVoter of this voter's listener answered"
                );
                return Ok(());
            }
            (PeerPending::ProducerIdBlock, response) => {
                let answer = match response {
                    Response::AllocateProducerIds(r) => Some(r),
                    _ => None,
                };
                self.producer_id_block_answered(answer);
                return Ok(());
            }
            (PeerPending::LeaderLookup(asked), _) => {
                self.lookup_ended(asked);
                self.learn_remote_leaders(&response);
                return Ok(());
            }
            _ => Vec::new(),
        };
        // A leader's LogStartOffset that moved (a DeleteRecords, its retention) is followed
        // in this loop turn (delete_records.rs).
        for (partition, message) in &parts {
            if let core::Message::FetchResponse(r) = message
                && self
                    .host
                    .raft(*partition)
                    .is_some_and(|raft| raft.leader_log_start_offset() != r.log_start_offset)
            {
                self.handlers.delete_records.follow_due = true;
            }
        }
        // Every partition's answer is stepped before the host's output is delivered, so the
        // requests they lead to (the next FetchSnapshot of each partition downloading from
        // this peer) leave together, in one wire request per peer.
        for (partition, message) in parts {
            let now = self.now_ms();
            let epoch = self.host.raft(partition).map_or(0, |r| r.epoch());
            let span = tracing::debug_span!(
                "peer_response",
                partition,
                epoch,
                peer,
                kind = message.kind()
            );
            let _guard = span.enter();
            match self
                .host
                .step(now, peer, PartitionMessage { partition, message })
            {
                Ok(()) => {}
                Err(HostError::Storage(error)) => return Err(error.into()),
                Err(HostError::Raft(error)) => {
                    tracing::warn!(peer, partition, %error, "peer response refused by the core")
                }
            }
        }
        self.deliver()
    }

    pub(super) fn answer_fifo(
        &mut self,
        to: NodeId,
        api: ApiKey,
        partition: PartitionId,
        message: core::Message,
    ) -> Result<(), NodeError> {
        self.answer_fifo_with_region(to, api, partition, message, None)
    }

    /// [`Node::answer_fifo`] for a FetchSnapshot answer whose bytes are `region` of the
    /// snapshot file (dropped, closing its descriptor, if no request waits for the answer).
    pub(super) fn answer_fifo_with_region(
        &mut self,
        to: NodeId,
        api: ApiKey,
        partition: PartitionId,
        message: core::Message,
        region: Option<FileRegion>,
    ) -> Result<(), NodeError> {
        let queue = self.fifo.entry((to, api, partition)).or_default();
        while let Some((id, slot)) = queue.pop_front() {
            if let Some(pending) = self.pending.get_mut(&id) {
                if pending.answers[slot].is_none() {
                    pending.snapshot_regions[slot] = region;
                }
                self.fill(id, slot, PartAnswer::Core(message));
                return self.maybe_complete(id);
            }
        }
        tracing::debug!(to, ?api, "a core answer with no waiting request (expired)");
        Ok(())
    }

    /// A replica Fetch leaves as one wire response, so a partition whose fetch the core parked
    /// (long poll, up to `fetch.max.wait.ms`) would hold the answers of the others: once any
    /// part has the core's answer, the parts still parked are answered with what they have, in
    /// the same loop turn (`release_parked_fetches`, from `pump`, so the core is not called
    /// while a work list runs). Kafka does the same: a Fetch completes when any partition has
    /// something to return. Without it a node leading an idle and a busy partition answered
    /// the busy partition's followers only when the idle one's wait ended, and each commit
    /// there took that long.
    fn release_parked_parts(&mut self, id: u64) -> Result<(), NodeError> {
        let Some(pending) = self.pending.get_mut(&id) else {
            return Ok(());
        };
        let has_core_answer = pending
            .answers
            .iter()
            .any(|a| matches!(a, Some(PartAnswer::Core(_))));
        if pending.api == ApiKey::Fetch && !pending.stepping && !pending.released && has_core_answer
        {
            pending.released = true;
            self.parked_releases.push(id);
        }
        Ok(())
    }

    /// The server answers a connection's requests in order, so an answered Fetch would wait
    /// behind an earlier Fetch on the same connection that the core parked: those earlier ones
    /// are answered now with what they have (a follower fetching an idle and a busy partition
    /// from one leader sends them on one connection). Only an answer that is ready releases
    /// the ones ahead of it, so idle fetches still wait their long poll.
    fn release_earlier_fetches_on(&mut self, connection_id: u64, answered: u64) {
        for (&id, pending) in &mut self.pending {
            if id < answered
                && pending.api == ApiKey::Fetch
                && !pending.stepping
                && !pending.released
                && pending.responder.connection_id() == connection_id
            {
                pending.released = true;
                self.parked_releases.push(id);
            }
        }
    }

    /// Asks the core for the parked parts of the requests `release_parked_parts` queued.
    pub(super) fn release_parked_fetches(&mut self) -> Result<(), NodeError> {
        let mut ids = std::mem::take(&mut self.parked_releases);
        // Oldest request first: that is the order the connection answers them in.
        ids.sort_unstable();
        for id in ids {
            let Some(pending) = self.pending.get(&id) else {
                continue;
            };
            let parked: Vec<(PartitionId, NodeId)> = pending
                .answers
                .iter()
                .zip(&pending.parts)
                .filter(|(answer, _)| answer.is_none())
                .filter_map(|(_, part)| part.target.as_ref().ok().map(|(p, from, _)| (*p, *from)))
                .collect();
            for (partition, replica) in parked {
                let now = self.now_ms();
                self.host.complete_parked_fetch(now, partition, replica)?;
                // Each answer fills its slot; the last one sends the wire response.
                self.deliver()?;
            }
        }
        Ok(())
    }

    pub(super) fn answer_fetch(&mut self, response: core::FetchResponse) -> Result<(), NodeError> {
        let slot = self.fetch_slots.remove(&response.correlation_id);
        let open = slot.is_some_and(|(id, slot)| {
            self.pending
                .get(&id)
                .is_some_and(|p| p.answers[slot].is_none())
        });
        if !open {
            // Nobody will send this answer: release its file region now.
            self.fetch_regions.remove(&response.correlation_id);
        }
        match slot {
            Some((id, slot)) => {
                self.fill(
                    id,
                    slot,
                    PartAnswer::Core(core::Message::FetchResponse(response)),
                );
                self.maybe_complete(id)
            }
            None => Ok(()),
        }
    }

    pub(super) fn send_fetches(
        &mut self,
        fetches: BTreeMap<NodeId, Vec<(PartitionId, core::FetchRequest)>>,
    ) -> Result<(), NodeError> {
        for (to, list) in fetches {
            // One fetch session per leader (fetch_sessions.rs): the wire Fetch carries every
            // partition outstanding to `to` and supersedes the one before it.
            let list = self.fetch_sessions.request(to, list);
            let hosted: Vec<_> = list.iter().map(|(p, f)| (self.table.get(*p), f)).collect();
            let mut request =
                convert::fetch_request(&self.cluster_id, self.config.node_id, &hosted);
            // Each partition's client log start, which a leader's DeleteRecords waits for.
            for topic in &mut request.topics {
                for partition in &mut topic.partitions {
                    if let Some(store) = self
                        .table
                        .find(&topic.topic, partition.partition)
                        .and_then(|id| self.host.store(id))
                    {
                        partition.log_start_offset = store.client_log_start_offset() as i64;
                    }
                }
            }
            let pending =
                PeerPending::Fetch(list.iter().map(|(p, f)| (*p, f.correlation_id)).collect());
            let sent = self.send_to_peer_with_id(
                to,
                Request::Fetch(request),
                convert::PEER_FETCH_VERSION,
                pending,
                true,
            )?;
            self.fetch_sessions.sent(to, sent);
        }
        for (to, list) in std::mem::take(&mut self.snapshot_fetches) {
            let hosted: Vec<_> = list.iter().map(|(p, r)| (self.table.get(*p), r)).collect();
            let request =
                super::fetch_snapshot::request(&self.cluster_id, self.config.node_id, &hosted);
            tracing::debug!(
                to,
                partitions = list.len(),
                "FetchSnapshot request (KIP-630)"
            );
            let pending = PeerPending::FetchSnapshot(
                list.iter().map(|(p, r)| (*p, r.correlation_id)).collect(),
            );
            self.send_to_peer(
                to,
                Request::FetchSnapshot(request),
                super::fetch_snapshot::PEER_FETCH_SNAPSHOT_VERSION,
                pending,
                true,
            )?;
        }
        Ok(())
    }

    /// KIP-853: a voter's endpoint in the metadata quorum's voter set in force (the one named
    /// like our controller listener first), when its VotersRecord gave one.
    pub(super) fn voter_set_endpoint(&self, to: NodeId) -> Option<&ringlog_replication::Endpoint> {
        let info = self.metadata_raft().voter_set().voters().get(&to)?;
        info.endpoints
            .iter()
            .find(|e| e.name == self.config.controller_listener_name())
            .or(info.endpoints.first())
    }

    /// KIP-853: lanes to a peer at the endpoint the voter set in force gives it, when that is
    /// not where its lanes dial: a voter added since the start has no `controller.quorum.voters`
    /// address, and a voter that moved told the leader its new one with UpdateRaftVoter
    /// (own_endpoint.rs). Lanes to the old address are dropped (their task ends; requests in
    /// flight on them go unanswered, as after a lost connection, and the core resends).
    /// KIP-853: a peer with no lanes and no voter set endpoint whose endpoint an answer gave
    /// (leader_endpoints.rs: a leader found through a bootstrap server) gets lanes there.
    fn open_lanes_from_voter_set(&mut self, to: NodeId) {
        let address = match self.voter_set_endpoint(to) {
            Some(endpoint) => format!("{}:{}", endpoint.host, endpoint.port),
            None => match self.learned_endpoints.get(&to) {
                Some((host, port)) if !self.peers.contains_key(&to) => format!("{host}:{port}"),
                _ => return,
            },
        };
        if self.peers.get(&to).is_some_and(|l| l.address == address) {
            return;
        }
        tracing::info!(to, %address, "opening lanes to a peer at its voter set (or answered) endpoint");
        let max_frame = self.config.socket_request_max_bytes as usize;
        let connect_timeout = Duration::from_millis(self.config.request_timeout_ms.min(1000));
        let lane = || {
            PeerLane::spawn(
                to,
                address.clone(),
                self.peer_events.clone(),
                max_frame,
                connect_timeout,
                self.peer_tls.clone(),
            )
        };
        let lanes = super::PeerLanes {
            control: lane(),
            fetch: lane(),
            address,
        };
        self.peers.insert(to, lanes);
    }

    pub(super) fn send_to_peer(
        &mut self,
        to: NodeId,
        request: Request,
        version: i16,
        pending: PeerPending,
        fetch_lane: bool,
    ) -> Result<(), NodeError> {
        self.send_to_peer_with_id(to, request, version, pending, fetch_lane)
            .map(|_| ())
    }

    /// [`Node::send_to_peer`], returning the wire correlation id of the request it queued
    /// (`None` when the peer has no lane or its lane is gone).
    fn send_to_peer_with_id(
        &mut self,
        to: NodeId,
        request: Request,
        version: i16,
        pending: PeerPending,
        fetch_lane: bool,
    ) -> Result<Option<i32>, NodeError> {
        let moved = self.voter_set_endpoint(to).is_some_and(|endpoint| {
            self.peers.get(&to).is_none_or(|lanes| {
                !lanes.address.rsplit_once(':').is_some_and(|(host, port)| {
                    host == endpoint.host && port.parse() == Ok(endpoint.port)
                })
            })
        });
        if moved || !self.peers.contains_key(&to) {
            self.open_lanes_from_voter_set(to);
        }
        let Some(super::PeerLanes { control, fetch, .. }) = self.peers.get(&to) else {
            tracing::warn!(to, "no address for this peer (not a voter)");
            return Ok(None);
        };
        let correlation_id = self.next_peer_correlation_id;
        self.next_peer_correlation_id = self.next_peer_correlation_id.wrapping_add(1).max(1);
        let api = request.api_key();
        let header = RequestHeader {
            api_key: api.key(),
            api_version: version,
            correlation_id,
            client_id: Some(format!("ringlog-node-{}", self.config.node_id)),
        };
        let frame = encode_request(&header, &request)?;
        let lane = if fetch_lane { fetch } else { control };
        if lane.send(Outgoing {
            correlation_id,
            api,
            version,
            frame,
        }) {
            self.peer_pending.insert((to, correlation_id), pending);
            return Ok(Some(correlation_id));
        }
        Ok(None)
    }
}
