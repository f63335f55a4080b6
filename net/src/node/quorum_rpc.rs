//! The quorum's wire side: the peers' requests become core steps, the core's messages become
//! wire requests and answers, the peers' answers become core steps.
//!
//! ```text
//!  peer request ──▶ admission ──▶ answer slots ──▶ host.step ──▶ Output::Send (a response)
//!                                      ▲                              │
//!                                      └──────── fill, complete ◀─────┘ ──▶ wire response
//!  Output::Send (a request) ──▶ one wire Fetch / FetchSnapshot per leader ──▶ peer lanes
//!  peer answer ──▶ host.step ──▶ …
//! ```
//!
//! Owns the peer lanes (peers.rs), the answer slots (answer_slots.rs), the fetch sessions
//! (fetch_sessions.rs), the FetchSnapshot requests of the delivery under way and the refusal
//! log. Receives the host and the node's configuration for each call ([`Qx`]). The host's
//! outputs that are not the quorum's (appends, truncations, high-watermarks and snapshot jobs,
//! for the API layer) are handed back in the caller's `later`, in order, for the node to route;
//! what a peer's answer means to the API layer (a producer id block, a leader lookup, a
//! forwarded admin answer) comes back as a [`PeerAnswer`].

use std::collections::BTreeMap;
use std::rc::Rc;

use ringlog_engine::io::AnyIo;
use ringlog_replication::host::Records as HostRecords;
use ringlog_replication::host::{FileRange, Host, HostError, Output, StorageError};
use ringlog_replication::{self as core, NodeId, PartitionId, PartitionMessage};
use tokio::sync::mpsc::UnboundedSender;

use super::NodeError;
use super::admission::{self, TopicRef};
use super::answer_slots::{AnswerSlots, FetchCarrier};
use super::convert::{self, InboundPart, PartAnswer, PartitionTable};
use super::fetch_sessions::FetchSessions;
use super::fetch_snapshot;
use super::leader_endpoints::{self, Endpoints};
use super::peers::Peers;
use super::replica_fetch_sessions::ReplicaFetchSessions;
use super::requests;
use super::transport::{Event, PeerPending, Responder};
use crate::config::NodeConfig;
use crate::protocol::{
    ApiKey, ErrorCode, Request, RequestHeader, Response, allocate_producer_ids_response,
    encode_response, fetch_response,
};
use crate::server::{FileRegion, RecordsSource};

mod peer_answers;

/// What a quorum call receives from the node: the host and what it reads of the node.
pub(super) struct Qx<'a> {
    pub(super) host: &'a mut Host<AnyIo>,
    pub(super) config: &'a NodeConfig,
    pub(super) table: &'a PartitionTable,
    pub(super) cluster_id: &'a str,
    pub(super) now_ms: u64,
}

/// Builds a [`Qx`] from a node's fields (a macro so that the node's other fields stay free).
macro_rules! qx {
    ($node:expr) => {
        $crate::node::quorum_rpc::Qx {
            host: &mut $node.host,
            config: &$node.config,
            table: &$node.table,
            cluster_id: &$node.cluster_id,
            now_ms: $node.started.elapsed().as_millis() as u64,
        }
    };
}

impl Qx<'_> {
    fn metadata(&self) -> &core::Raft {
        super::context::metadata_raft(self.host, self.table)
    }
}

/// What a peer's answer (or its loss) means beyond the quorum, for the node to act on.
pub(super) enum PeerAnswer {
    /// The controller's AllocateProducerIds answer (`None`: lost or not that answer).
    ProducerIdBlock(Option<allocate_producer_ids_response::AllocateProducerIdsResponse>),
    /// A leader lookup ended (answered with `Some`, or lost).
    LeaderLookup(Vec<(String, i32)>, Option<Response>),
    /// A leader's Fetch answer whose LogStartOffset moved (a DeleteRecords, its retention):
    /// followed in this loop turn (delete_records.rs).
    LeaderLogStartMoved,
}

pub(super) struct QuorumRpc {
    pub(super) peers: Peers,
    slots: AnswerSlots,
    /// One replica Fetch of ours waiting at each leader (fetch_sessions.rs).
    fetch_sessions: FetchSessions,
    /// As a leader, each replica's fetch session (KIP-227 incremental Fetch requests,
    /// replica_fetch_sessions.rs).
    replica_sessions: ReplicaFetchSessions,
    /// The core's Fetch requests of the delivery under way, by leader; each leader gets one
    /// wire request with all of them (`flush_fetches`).
    fetches: BTreeMap<NodeId, Vec<(PartitionId, core::FetchRequest)>>,
    /// KIP-630: the same for the cores' FetchSnapshot requests.
    snapshot_fetches: BTreeMap<NodeId, Vec<(PartitionId, core::FetchSnapshotRequest)>>,
    /// Refused quorum requests, for a rate-limited warning (admission.rs).
    refusals: admission::RefusalLog,
}

impl QuorumRpc {
    pub(super) fn open(
        config: &NodeConfig,
        events: UnboundedSender<Event>,
    ) -> Result<QuorumRpc, NodeError> {
        Ok(QuorumRpc {
            peers: Peers::open(config, events)?,
            slots: AnswerSlots::default(),
            fetch_sessions: FetchSessions::default(),
            replica_sessions: ReplicaFetchSessions::default(),
            fetches: BTreeMap::new(),
            snapshot_fetches: BTreeMap::new(),
            refusals: admission::RefusalLog::default(),
        })
    }

    /// The replica fetch sessions' metrics join the node's (replica_fetch_sessions.rs).
    pub(super) fn register_metrics(&mut self, registry: &crate::metrics::MetricsRegistry) {
        self.replica_sessions.register_metrics(registry);
    }

    /// A request from a connection: refused by admission (answered here), a quorum request
    /// (stepped here), or a client request, handed back for the API layer.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn handle_request(
        &mut self,
        q: &mut Qx,
        replicas: &dyn Fn(TopicRef<'_>, i32) -> Option<Vec<NodeId>>,
        metadata_voters: &[NodeId],
        responder: Responder,
        header: RequestHeader,
        request: Request,
        later: &mut Vec<Output>,
    ) -> Result<Option<(Responder, RequestHeader, Request)>, NodeError> {
        let version = header.api_version;
        let admitted = admission::admit_with_voters(
            &request,
            version,
            q.cluster_id,
            q.config,
            metadata_voters,
            replicas,
        );
        if let Err(refusal) = admitted {
            self.refusals.note(q.now_ms, request.api_key(), &refusal);
            // An answer that cannot be encoded closes the connection (the responder dropped
            // unanswered): a stranger's request must never end the process.
            let frame = admission::refused_response(&request, refusal.error_code())
                .map(|response| encode_response(header.correlation_id, version, &response));
            match frame {
                Some(Ok(frame)) => responder.send(Some(frame)),
                Some(Err(error)) => tracing::warn!(%error, "encoding a refusal"),
                None => {}
            }
            return Ok(None);
        }
        let node_id = q.config.node_id;
        let mut session = None;
        let (api, parts) = match request {
            Request::Vote(r) => (
                ApiKey::Vote,
                convert::vote_request_parts(&r, q.table, node_id),
            ),
            Request::BeginQuorumEpoch(r) => (
                ApiKey::BeginQuorumEpoch,
                convert::begin_quorum_epoch_request_parts(&r, q.table, node_id),
            ),
            Request::EndQuorumEpoch(r) => (
                ApiKey::EndQuorumEpoch,
                convert::end_quorum_epoch_request_parts(&r, q.table),
            ),
            Request::Fetch(r) if convert::fetch_replica_id(&r, version) >= 0 => {
                let replica = convert::fetch_replica_id(&r, version);
                // An incremental Fetch names what changed in its session (KIP-227); the
                // session's other parked fetches are carried (answer_slots.rs).
                let session_id = match self.replica_sessions.take(replica, version, &r) {
                    Ok(id) => id,
                    Err(error) => {
                        let response = Response::Fetch(fetch_response::FetchResponse {
                            error_code: error.code(),
                            ..Default::default()
                        });
                        match encode_response(header.correlation_id, version, &response) {
                            Ok(frame) => responder.send(Some(frame)),
                            Err(error) => tracing::warn!(%error, "encoding a session error"),
                        }
                        return Ok(None);
                    }
                };
                let slots = &mut self.slots;
                let next_id = || slots.next_fetch_correlation_id();
                let parts = convert::replica_fetch_parts(&r, version, q.table, next_id);
                if session_id != 0 {
                    // Parts answered with an error (a partition not hosted here): the replica
                    // stops asking for them, so the session lets them go.
                    let unknown = parts
                        .iter()
                        .filter(|p| p.target.is_err())
                        .map(|p| (p.topic_id, p.index));
                    self.replica_sessions
                        .forget_unknown(replica, session_id, unknown);
                    let forgotten: Vec<PartitionId> = r
                        .forgotten_topics_data
                        .iter()
                        .flat_map(|t| t.partitions.iter().map(move |i| (t.topic_id, *i)))
                        .filter_map(|(topic_id, index)| q.table.find_by_id(topic_id, index))
                        .collect();
                    self.slots.forget_session_parts(replica, &forgotten);
                    session = Some(FetchCarrier {
                        replica,
                        session_id,
                        incremental: r.session_epoch > 0,
                    });
                }
                (ApiKey::Fetch, parts)
            }
            Request::FetchSnapshot(r) => (
                ApiKey::FetchSnapshot,
                fetch_snapshot::request_parts(&r, q.table),
            ),
            other => return Ok(Some((responder, header, other))),
        };
        self.start_request(q, responder, api, parts, session, later)?;
        Ok(None)
    }

    /// Registers an answer slot per partition, then steps the core with each part.
    fn start_request(
        &mut self,
        q: &mut Qx,
        responder: Responder,
        api: ApiKey,
        parts: Vec<InboundPart>,
        session: Option<FetchCarrier>,
        later: &mut Vec<Output>,
    ) -> Result<(), NodeError> {
        let (id, steps, superseded, carried_from) = self
            .slots
            .register(responder, api, parts, q.now_ms, session);
        // Earlier requests whose parked parts this one carries now: they may be complete.
        for earlier in carried_from {
            if let Err(error) = self.maybe_complete(q, earlier) {
                tracing::warn!(%error, "answering a fetch");
            }
        }
        for old in superseded {
            // The core drops a parked fetch when the same replica fetches again; answer the
            // old request so its connection moves on.
            if let Some(old) = self
                .slots
                .fill_by_fetch_id(old, PartAnswer::Error(ErrorCode::RequestTimedOut))
                && let Err(error) = self.maybe_complete(q, old)
            {
                tracing::warn!(%error, "answering a fetch");
            }
        }
        for (slot, partition, from, message) in steps {
            let epoch = q.host.raft(partition).map_or(0, |r| r.epoch());
            let span = tracing::debug_span!("step", partition, epoch, from, kind = message.kind());
            let _guard = span.enter();
            match q
                .host
                .step(q.now_ms, from, PartitionMessage { partition, message })
            {
                Ok(()) => self.deliver(q, later)?,
                Err(HostError::Storage(error)) => return Err(error.into()),
                Err(HostError::Raft(error)) => {
                    tracing::warn!(%error, "request refused by the core");
                    self.slots
                        .fill(id, slot, PartAnswer::Error(ErrorCode::InvalidRequest));
                }
            }
        }
        self.slots.stepped(id);
        self.maybe_complete(q, id)
    }

    /// Sends request `id`'s wire response once every partition is answered (requests.rs).
    fn maybe_complete(&mut self, q: &Qx, id: u64) -> Result<(), NodeError> {
        let Some((pending, answers, regions)) = self.slots.take_complete(id) else {
            return Ok(());
        };
        let endpoints = Endpoints {
            config: q.config,
            metadata: q.metadata(),
            learned: &self.peers.learned,
        };
        requests::send_response(
            pending,
            answers,
            regions,
            q.host,
            endpoints,
            u64::from(q.config.fetch_snapshot_response_max_bytes),
        )
    }

    // ---- the host's output --------------------------------------------------------------

    /// Routes the host's output until there is none: the quorum's messages go to the peers
    /// and the answer slots, everything else to `later`, in order; then the Fetch and
    /// FetchSnapshot requests of the delivery leave, one of each per leader.
    pub(super) fn deliver(&mut self, q: &mut Qx, later: &mut Vec<Output>) -> Result<(), NodeError> {
        while q.host.has_output() {
            for output in q.host.take_output() {
                self.route(q, output, later)?;
            }
        }
        self.flush_fetches(q)
    }

    fn route(
        &mut self,
        q: &mut Qx,
        output: Output,
        later: &mut Vec<Output>,
    ) -> Result<(), NodeError> {
        match output {
            Output::Send {
                partition,
                to,
                message,
            } => self.dispatch(q, partition, to, message),
            Output::FetchResponse {
                partition: _,
                mut response,
                records,
            } => {
                let mut region = None;
                match records.map(|records| records_source(q.host, records)) {
                    None => {}
                    Some(Ok(RecordsSource::Memory(bytes))) => response.records = bytes,
                    Some(Ok(source)) => region = Some(source),
                    Some(Err(error)) => {
                        tracing::error!(%error, "log read failed");
                        response.error_code = core::ErrorCode::UnknownServerError;
                    }
                }
                self.answer_fetch(q, response, region)
            }
            Output::FetchSnapshotResponse {
                partition,
                to,
                mut response,
                region,
            } => {
                let region = match region.map(|r| open_range(q.host, &r)) {
                    None => None,
                    Some(Ok(OpenedRange::File(region))) => Some(region),
                    Some(Ok(OpenedRange::Read(bytes))) => {
                        response.unaligned_records = bytes;
                        None
                    }
                    Some(Err(error)) => {
                        tracing::error!(%error, "reading a snapshot for FetchSnapshot");
                        response.error_code = core::ErrorCode::UnknownServerError;
                        None
                    }
                };
                let message = core::Message::FetchSnapshotResponse(response);
                self.answer_fifo(q, to, ApiKey::FetchSnapshot, partition, message, region)
            }
            other => {
                later.push(other);
                Ok(())
            }
        }
    }

    /// Sends a core message: requests go to the peer, responses fill answer slots.
    fn dispatch(
        &mut self,
        q: &mut Qx,
        partition: PartitionId,
        to: NodeId,
        message: core::Message,
    ) -> Result<(), NodeError> {
        match message {
            core::Message::FetchRequest(f) => {
                self.fetches.entry(to).or_default().push((partition, f));
                Ok(())
            }
            core::Message::VoteRequest(_)
            | core::Message::BeginQuorumEpochRequest(_)
            | core::Message::EndQuorumEpochRequest(_) => {
                let Some((request, version)) =
                    convert::peer_request(q.cluster_id, q.table.get(partition), &message, to)
                else {
                    return Ok(());
                };
                let api = request.api_key();
                let pending = PeerPending::Quorum { partition, api };
                self.send(q, to, request, version, pending, false)
                    .map(|_| ())
            }
            core::Message::VoteResponse(_) => {
                self.answer_fifo(q, to, ApiKey::Vote, partition, message, None)
            }
            core::Message::BeginQuorumEpochResponse(_) => {
                self.answer_fifo(q, to, ApiKey::BeginQuorumEpoch, partition, message, None)
            }
            core::Message::EndQuorumEpochResponse(_) => {
                self.answer_fifo(q, to, ApiKey::EndQuorumEpoch, partition, message, None)
            }
            core::Message::FetchResponse(r) => self.answer_fetch(q, r, None),
            core::Message::FetchSnapshotRequest(r) => {
                // Sent with every other partition's for the same leader (`flush_fetches`).
                self.snapshot_fetches
                    .entry(to)
                    .or_default()
                    .push((partition, r));
                Ok(())
            }
            core::Message::FetchSnapshotResponse(r) => self.answer_fifo(
                q,
                to,
                ApiKey::FetchSnapshot,
                partition,
                core::Message::FetchSnapshotResponse(r),
                None,
            ),
        }
    }

    /// The core's answer to a replica fetch part, with the file region of its records.
    fn answer_fetch(
        &mut self,
        q: &Qx,
        response: core::FetchResponse,
        region: Option<RecordsSource>,
    ) -> Result<(), NodeError> {
        match self.slots.answer_fetch(response, region) {
            Some(id) => self.maybe_complete(q, id),
            None => Ok(()),
        }
    }

    /// A core answer to the oldest waiting request of (`to`, `api`, `partition`); a
    /// FetchSnapshot answer's bytes are `region` of the snapshot file (dropped, closing its
    /// descriptor, if no request waits for the answer).
    fn answer_fifo(
        &mut self,
        q: &Qx,
        to: NodeId,
        api: ApiKey,
        partition: PartitionId,
        message: core::Message,
        region: Option<FileRegion>,
    ) -> Result<(), NodeError> {
        match self.slots.answer_fifo(to, api, partition, message, region) {
            Some(id) => self.maybe_complete(q, id),
            None => Ok(()),
        }
    }

    /// Sends the delivery's Fetch requests (one per leader: its fetch session's, carrying every
    /// partition outstanding there, fetch_sessions.rs) and FetchSnapshot requests.
    fn flush_fetches(&mut self, q: &mut Qx) -> Result<(), NodeError> {
        for (to, list) in std::mem::take(&mut self.fetches) {
            let list = self.fetch_sessions.request(to, list, q.now_ms);
            if list.is_empty() {
                continue;
            }
            let plan = self.fetch_sessions.plan(to, &list, |partition| {
                let hosted = q.table.get(partition);
                (hosted.topic_id, hosted.index)
            });
            let sessions = &self.fetch_sessions;
            let request = requests::fetch_request(
                q.host,
                q.table,
                q.cluster_id,
                q.config.node_id,
                &list,
                |partition| sessions.is_idle(partition),
                &plan,
            );
            let pending =
                PeerPending::Fetch(list.iter().map(|(p, f)| (*p, f.correlation_id)).collect());
            let sent = self.send(
                q,
                to,
                Request::Fetch(request),
                convert::PEER_FETCH_VERSION,
                pending,
                true,
            )?;
            self.fetch_sessions.sent(to, sent, q.now_ms);
        }
        for (to, list) in std::mem::take(&mut self.snapshot_fetches) {
            let hosted: Vec<_> = list.iter().map(|(p, r)| (q.table.get(*p), r)).collect();
            let request = fetch_snapshot::request(q.cluster_id, q.config.node_id, &hosted);
            tracing::debug!(
                to,
                partitions = list.len(),
                "FetchSnapshot request (KIP-630)"
            );
            let pending = PeerPending::FetchSnapshot(
                list.iter().map(|(p, r)| (*p, r.correlation_id)).collect(),
            );
            self.send(
                q,
                to,
                Request::FetchSnapshot(request),
                fetch_snapshot::PEER_FETCH_SNAPSHOT_VERSION,
                pending,
                true,
            )?;
        }
        Ok(())
    }

    /// Queues `request` for the peer `to`; returns its wire correlation id (peers.rs).
    pub(super) fn send(
        &mut self,
        q: &Qx,
        to: NodeId,
        request: Request,
        version: i16,
        pending: PeerPending,
        fetch_lane: bool,
    ) -> Result<Option<i32>, NodeError> {
        let metadata = super::context::metadata_raft(q.host, q.table);
        self.peers.send(
            q.config, metadata, to, request, version, pending, fetch_lane,
        )
    }

    // ---- parked fetches, deadlines, stopped partitions ----------------------------------

    /// When fetches a leader left out must leave alone, if no core's fetch carries them first
    /// (fetch_sessions.rs).
    pub(super) fn next_fetch_resend_ms(&self) -> Option<u64> {
        self.fetch_sessions.next_resend_ms()
    }

    pub(super) fn has_released_fetches(&self) -> bool {
        self.slots.has_releasable()
    }

    /// Completes the replica Fetches that an answered later Fetch on the same connection
    /// released (answer_slots.rs, `release_earlier_fetches_on`): their parked parts carried,
    /// they leave now, in order.
    pub(super) fn send_released_fetches(&mut self, q: &Qx) -> Result<(), NodeError> {
        let mut ids = self.slots.take_releasable();
        ids.sort_unstable();
        for id in ids {
            self.maybe_complete(q, id)?;
        }
        Ok(())
    }

    /// Answers quorum requests the core never answered (a dropped long-poll, a lost leader)
    /// so their connections are not blocked forever, and forwarded admin requests the
    /// controller did not answer in time.
    pub(super) fn expire(&mut self, q: &mut Qx) {
        // Fetches a leader left out of its answer, for which no core's fetch came.
        let due = self.fetch_sessions.due_resends(q.now_ms);
        if !due.is_empty() {
            for peer in due {
                self.fetches.entry(peer).or_default();
            }
            if let Err(error) = self.flush_fetches(q) {
                tracing::warn!(%error, "sending left-out fetches again");
            }
        }
        let limit_ms = q.config.fetch_max_wait_ms + q.config.request_timeout_ms;
        for id in self.slots.expire(q.now_ms, limit_ms) {
            if let Err(error) = self.maybe_complete(q, id) {
                tracing::warn!(%error, "answering an expired request");
            }
        }
        self.peers.expire_forwarded(q.now_ms);
    }

    /// Shutdown: every request still waiting is answered `code`.
    pub(super) fn fail_all(&mut self, q: &Qx, code: ErrorCode) -> Result<(), NodeError> {
        for id in self.slots.fail_all(code) {
            self.maybe_complete(q, id)?;
        }
        Ok(())
    }

    /// A partition stopped: what waits on it is answered `code` (answer_slots.rs).
    pub(super) fn forget_partition(
        &mut self,
        q: &Qx,
        partition: PartitionId,
        code: ErrorCode,
    ) -> Result<(), NodeError> {
        self.fetch_sessions.forget(partition);
        for id in self.slots.forget_partition(partition, code) {
            self.maybe_complete(q, id)?;
        }
        Ok(())
    }
}

/// A file range of the host's answer as the server sends it: from the reader its owner keeps
/// open (a segment's, or the served snapshot's), whose clone keeps the bytes readable after a
/// truncation or a deletion until they are on the socket; or the bytes read through the host
/// where the file has no reader (the in-memory backend).
pub(super) enum OpenedRange {
    File(FileRegion),
    Read(bytes::Bytes),
}

pub(super) fn open_range(
    host: &mut Host<AnyIo>,
    range: &FileRange,
) -> Result<OpenedRange, StorageError> {
    match &range.reader {
        Some(reader) => Ok(OpenedRange::File(FileRegion {
            file: Rc::new(reader.clone()),
            position: range.position,
            length: range.length,
        })),
        None => Ok(OpenedRange::Read(host.read_file_range(range)?)),
    }
}

/// A read of a partition's log as the server sends it: bytes and slices by reference, a file
/// range opened ([`open_range`]).
pub(super) fn records_source(
    host: &mut Host<AnyIo>,
    records: HostRecords,
) -> Result<RecordsSource, StorageError> {
    Ok(match records {
        HostRecords::Memory(bytes) => RecordsSource::Memory(bytes),
        HostRecords::Chunks(chunks) => RecordsSource::Chunks(chunks),
        HostRecords::File(range) => match open_range(host, &range)? {
            OpenedRange::File(region) => RecordsSource::File(region),
            OpenedRange::Read(bytes) => RecordsSource::Memory(bytes),
        },
    })
}
