//! The answer slots of the quorum's inbound requests: a Vote, BeginQuorumEpoch,
//! EndQuorumEpoch, replica Fetch or FetchSnapshot from a peer becomes one core step per
//! partition, each with a slot; the core's answers fill the slots (by the order of the
//! requests of one (sender, API, partition) for the control APIs, by the correlation id the
//! node gave each replica fetch), and once every slot is filled the request leaves as one wire
//! response (requests.rs builds it).
//!
//! Owns only this bookkeeping: it never steps the host nor touches a socket. The node
//! registers a request, steps the core, and asks here which request is complete.

use std::collections::{HashMap, VecDeque};

use ringlog_replication::{self as core, NodeId, PartitionId};

use super::convert::{InboundPart, PartAnswer};
use super::transport::Responder;
use crate::protocol::{ApiKey, ErrorCode};
use crate::server::FileRegion;

/// A request from a peer waiting for the core's answers (one per partition).
pub(super) struct PendingRequest {
    pub(super) responder: Responder,
    pub(super) api: ApiKey,
    pub(super) parts: Vec<InboundPart>,
    pub(super) answers: Vec<Option<PartAnswer>>,
    /// KIP-630: per answer slot, the snapshot file region holding that FetchSnapshot answer's
    /// bytes (sent with sendfile).
    pub(super) snapshot_regions: Vec<Option<FileRegion>>,
    started_ms: u64,
    /// The core is still being stepped with this request's parts (`QuorumRpc::start_request`, quorum_rpc.rs).
    stepping: bool,
    /// A replica Fetch's parked parts were asked to answer early, because another part of the
    /// same request had an answer ([`AnswerSlots::note_partial`]).
    released: bool,
}

/// A core step a registered request asks for: (slot, partition, sender, message).
pub(super) type Step = (usize, PartitionId, NodeId, core::Message);

#[derive(Default)]
pub(super) struct AnswerSlots {
    pending: HashMap<u64, PendingRequest>,
    next_pending_id: u64,
    /// Vote/BeginQuorumEpoch/EndQuorumEpoch/FetchSnapshot answer slots, oldest first, by
    /// (sender, API, partition).
    fifo: HashMap<(NodeId, ApiKey, PartitionId), VecDeque<(u64, usize)>>,
    /// Replica fetch answer slots by the core correlation id we gave the fetch.
    fetch_slots: HashMap<u64, (u64, usize)>,
    /// File regions of replica fetch answers, by core correlation id, until their wire
    /// response is sent.
    fetch_regions: HashMap<u64, FileRegion>,
    /// The latest replica fetch of each (replica, partition), to answer one it supersedes.
    latest_replica_fetch: HashMap<(NodeId, PartitionId), u64>,
    next_core_correlation_id: u64,
    /// Replica Fetch requests whose parked parts are to be answered now.
    parked_releases: Vec<u64>,
}

impl AnswerSlots {
    /// A fresh core correlation id for a replica fetch's part.
    pub(super) fn next_fetch_correlation_id(&mut self) -> u64 {
        self.next_core_correlation_id += 1;
        self.next_core_correlation_id
    }

    /// Registers an answer slot per part (a part that names no hosted partition is answered
    /// with its error at once). Returns the request's id, the core steps to run, and the ids
    /// of earlier replica fetches these supersede (the core drops a parked fetch when the
    /// same replica fetches again; the node answers the old request so its connection moves
    /// on).
    pub(super) fn register(
        &mut self,
        responder: Responder,
        api: ApiKey,
        parts: Vec<InboundPart>,
        now_ms: u64,
    ) -> (u64, Vec<Step>, Vec<u64>) {
        let id = self.next_pending_id;
        self.next_pending_id += 1;
        let mut answers = Vec::with_capacity(parts.len());
        let mut steps = Vec::new();
        let mut superseded = Vec::new();
        for (slot, part) in parts.iter().enumerate() {
            match &part.target {
                Err(error) => answers.push(Some(PartAnswer::Error(*error))),
                Ok((partition, from, message)) => {
                    answers.push(None);
                    if let core::Message::FetchRequest(f) = message {
                        self.fetch_slots.insert(f.correlation_id, (id, slot));
                        if let Some(old) = self
                            .latest_replica_fetch
                            .insert((*from, *partition), f.correlation_id)
                        {
                            superseded.push(old);
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
                api,
                snapshot_regions: vec![None; parts.len()],
                parts,
                answers,
                started_ms: now_ms,
                stepping: true,
                released: false,
            },
        );
        (id, steps, superseded)
    }

    /// The core has been stepped with every part of request `id`.
    pub(super) fn stepped(&mut self, id: u64) {
        if let Some(pending) = self.pending.get_mut(&id) {
            pending.stepping = false;
        }
    }

    /// Fills a slot that is still empty.
    pub(super) fn fill(&mut self, id: u64, slot: usize, answer: PartAnswer) {
        if let Some(pending) = self.pending.get_mut(&id)
            && pending.answers[slot].is_none()
        {
            pending.answers[slot] = Some(answer);
        }
    }

    /// Fills the slot of the replica fetch the node gave `correlation_id`; returns its
    /// request's id.
    pub(super) fn fill_by_fetch_id(
        &mut self,
        correlation_id: u64,
        answer: PartAnswer,
    ) -> Option<u64> {
        let (id, slot) = self.fetch_slots.remove(&correlation_id)?;
        self.fill(id, slot, answer);
        Some(id)
    }

    /// The core's answer to a replica fetch part, with the file region of its records if it
    /// has one: fills the slot and returns the request's id, or drops the region (closing its
    /// descriptor) when no request waits for the answer.
    pub(super) fn answer_fetch(
        &mut self,
        response: core::FetchResponse,
        region: Option<FileRegion>,
    ) -> Option<u64> {
        let slot = self.fetch_slots.remove(&response.correlation_id);
        let open = slot.is_some_and(|(id, slot)| {
            self.pending
                .get(&id)
                .is_some_and(|p| p.answers[slot].is_none())
        });
        if open && let Some(region) = region {
            self.fetch_regions.insert(response.correlation_id, region);
        }
        let (id, slot) = slot?;
        self.fill(
            id,
            slot,
            PartAnswer::Core(core::Message::FetchResponse(response)),
        );
        Some(id)
    }

    /// Fills the oldest open slot of (`to`, `api`, `partition`) with a core answer (and, for
    /// FetchSnapshot, the snapshot file region holding its bytes); returns its request's id.
    /// `None`: no request waits for it (expired), and the region is dropped.
    pub(super) fn answer_fifo(
        &mut self,
        to: NodeId,
        api: ApiKey,
        partition: PartitionId,
        message: core::Message,
        region: Option<FileRegion>,
    ) -> Option<u64> {
        let queue = self.fifo.entry((to, api, partition)).or_default();
        while let Some((id, slot)) = queue.pop_front() {
            if let Some(pending) = self.pending.get_mut(&id) {
                if pending.answers[slot].is_none() {
                    pending.snapshot_regions[slot] = region;
                }
                self.fill(id, slot, PartAnswer::Core(message));
                return Some(id);
            }
        }
        tracing::debug!(to, ?api, "a core answer with no waiting request (expired)");
        None
    }

    /// Request `id` if every slot is filled: removed, with the file regions of its replica
    /// fetch answers (by core correlation id). A replica Fetch answered so releases the earlier
    /// Fetches on its connection (the server answers a connection's requests in order, so they
    /// would hold it). A replica Fetch not complete whose other parts have an answer is queued
    /// for its parked parts to answer now ([`AnswerSlots::take_releases`]).
    pub(super) fn take_complete(
        &mut self,
        id: u64,
    ) -> Option<(PendingRequest, Vec<PartAnswer>, HashMap<u64, FileRegion>)> {
        let done = self
            .pending
            .get(&id)
            .is_some_and(|p| p.answers.iter().all(Option::is_some));
        if !done {
            self.note_partial(id);
            return None;
        }
        let mut pending = self.pending.remove(&id).expect("checked above");
        if pending.api == ApiKey::Fetch {
            self.release_earlier_fetches_on(pending.responder.connection_id(), id);
        }
        let answers: Vec<PartAnswer> = std::mem::take(&mut pending.answers)
            .into_iter()
            .map(|a| a.expect("all answered"))
            .collect();
        let mut regions = HashMap::new();
        for answer in &answers {
            if let PartAnswer::Core(core::Message::FetchResponse(r)) = answer
                && let Some(region) = self.fetch_regions.remove(&r.correlation_id)
            {
                regions.insert(r.correlation_id, region);
            }
        }
        Some((pending, answers, regions))
    }

    /// A replica Fetch leaves as one wire response, so a partition whose fetch the core parked
    /// (long poll, up to `fetch.max.wait.ms`) would hold the answers of the others: once any
    /// part has the core's answer, the parts still parked are answered with what they have, in
    /// the same loop turn (`Node::release_parked_fetches`, from `pump`, so the core is not
    /// called while a work list runs). Kafka does the same: a Fetch completes when any
    /// partition has something to return. Without it a node leading an idle and a busy
    /// partition answered the busy partition's followers only when the idle one's wait ended,
    /// and each commit there took that long.
    fn note_partial(&mut self, id: u64) {
        let Some(pending) = self.pending.get_mut(&id) else {
            return;
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

    pub(super) fn has_releases(&self) -> bool {
        !self.parked_releases.is_empty()
    }

    /// The (partition, replica) of every parked part of the requests queued for release,
    /// oldest request first (the order the connection answers them in).
    pub(super) fn take_releases(&mut self) -> Vec<(PartitionId, NodeId)> {
        let mut ids = std::mem::take(&mut self.parked_releases);
        ids.sort_unstable();
        let mut parked = Vec::new();
        for id in ids {
            let Some(pending) = self.pending.get(&id) else {
                continue;
            };
            parked.extend(
                pending
                    .answers
                    .iter()
                    .zip(&pending.parts)
                    .filter(|(answer, _)| answer.is_none())
                    .filter_map(|(_, part)| {
                        part.target.as_ref().ok().map(|(p, from, _)| (*p, *from))
                    }),
            );
        }
        parked
    }

    /// Fills every open slot of the requests older than `limit_ms` (a dropped long poll, a
    /// lost leader) with REQUEST_TIMED_OUT, so their connections are not blocked forever;
    /// returns their ids for the node to complete.
    pub(super) fn expire(&mut self, now_ms: u64, limit_ms: u64) -> Vec<u64> {
        let stale: Vec<u64> = self
            .pending
            .iter()
            .filter(|(_, p)| now_ms.saturating_sub(p.started_ms) > limit_ms)
            .map(|(id, _)| *id)
            .collect();
        self.fill_all(&stale, ErrorCode::RequestTimedOut);
        stale
    }

    /// Shutdown: fills every open slot of every request with `code`; returns their ids.
    pub(super) fn fail_all(&mut self, code: ErrorCode) -> Vec<u64> {
        let ids: Vec<u64> = self.pending.keys().copied().collect();
        self.fill_all(&ids, code);
        ids
    }

    fn fill_all(&mut self, ids: &[u64], code: ErrorCode) {
        for id in ids {
            if let Some(pending) = self.pending.get_mut(id) {
                for answer in &mut pending.answers {
                    answer.get_or_insert(PartAnswer::Error(code));
                }
            }
        }
    }

    /// A partition stopped (its topic deleted, or a storage error): no answer will come for
    /// it. Peer requests (a replica's Fetch long-polling in the core, a Vote) that carry it
    /// among others would otherwise wait for that answer, holding back the other partitions'
    /// answers until the peer's request timeout: their slots for it are filled with `code`.
    /// Returns the ids of those requests, for the node to complete.
    pub(super) fn forget_partition(&mut self, partition: PartitionId, code: ErrorCode) -> Vec<u64> {
        self.latest_replica_fetch
            .retain(|(_, p), _| *p != partition);
        self.fifo.retain(|(_, _, p), _| *p != partition);
        let mut ids = std::collections::BTreeSet::new();
        for (id, pending) in &mut self.pending {
            for (answer, part) in pending.answers.iter_mut().zip(&pending.parts) {
                if answer.is_none() && part.target.as_ref().is_ok_and(|(p, _, _)| *p == partition) {
                    *answer = Some(PartAnswer::Error(code));
                    ids.insert(*id);
                }
            }
        }
        ids.into_iter().collect()
    }
}
