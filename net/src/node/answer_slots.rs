//! The answer slots of the quorum's inbound requests: a Vote, BeginQuorumEpoch,
//! EndQuorumEpoch, replica Fetch or FetchSnapshot from a peer becomes one core step per
//! partition, each with a slot; the core's answers fill the slots (by the order of the
//! requests of one (sender, API, partition) for the control APIs, by the correlation id the
//! node gave each replica fetch), and once every slot is filled the request leaves as one wire
//! response (requests.rs builds it).
//!
//! A replica Fetch leaves once any of its parts has the core's answer; the parts the core
//! still holds parked are left out of that answer and carried to the replica's next Fetch
//! (which, from a ringlog follower's fetch session, asks for them again unchanged): the core
//! is not stepped again for them, and their answer, when it comes, goes out in whichever
//! Fetch of the replica then carries them (KIP-227's incremental responses, which leave out
//! the partitions with nothing to say). An idle partition so costs the leader one core step
//! and one answer per long poll, not per round of its busy neighbours.
//!
//! In a fetch session (KIP-227, replica_fetch_sessions.rs) a replica's incremental Fetch names
//! only the partitions whose ask changed; the others ask what they asked, so their parked
//! fetches are carried by the session, not by a request: the replica's newest Fetch of the
//! session is its carrier ([`FetchCarrier`]), and a carried fetch's answer joins the carrier as
//! one more part (or is held for the next one). The leader so touches the partitions a Fetch
//! names and those with something to say, never the session's others.
//!
//! Owns only this bookkeeping: it never steps the host nor touches a socket. The node
//! registers a request, steps the core, and asks here which request is complete.

use std::collections::{HashMap, VecDeque};

use ringlog_replication::{self as core, NodeId, PartitionId};

use super::convert::{InboundPart, PartAnswer};
use super::transport::Responder;
use crate::protocol::{ApiKey, ErrorCode};
use crate::server::{FileRegion, RecordsSource};

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
    /// Replica Fetch parts left out of this request's answer: parked in the core, carried to
    /// the replica's next Fetch ([`AnswerSlots::register`]).
    omitted: Vec<bool>,
    /// Per replica Fetch part, the core correlation id whose answer fills it (its own, or
    /// the parked fetch it was carried to).
    fetch_ids: Vec<Option<u64>>,
    /// A replica Fetch's session (KIP-227, replica_fetch_sessions.rs), named in its answer
    /// (0: sessionless).
    pub(super) fetch_session_id: i32,
    /// The replica whose session's carried fetches this request carries: it waits for any
    /// answer, even with no part of its own.
    carrier_of: Option<NodeId>,
    /// Leaves with what it has: a later Fetch of its replica carries the session now, or
    /// it expired.
    released: bool,
}

/// A replica Fetch in a fetch session: whose, which session, and whether it is incremental
/// (it names only what changed; the session's other partitions ask what they asked).
#[derive(Clone, Copy, Debug)]
pub(super) struct FetchCarrier {
    pub(super) replica: NodeId,
    pub(super) session_id: i32,
    pub(super) incremental: bool,
}

/// A replica fetch the core holds: the wire part that asked it (its partition, replica and
/// core request; kept to answer it in a later request), and the fetch session it was asked in
/// (0: none).
struct Ask {
    part: InboundPart,
    session_id: i32,
}

impl Ask {
    /// The part's hosted partition, its replica and what it asked: an ask is registered only
    /// for a part that names a hosted partition with a replica fetch.
    fn target(&self) -> (PartitionId, NodeId, &core::FetchRequest) {
        match &self.part.target {
            Ok((partition, replica, core::Message::FetchRequest(f))) => (*partition, *replica, f),
            _ => unreachable!("an ask is a hosted partition's replica fetch"),
        }
    }

    fn replica(&self) -> NodeId {
        self.target().1
    }
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
    fetch_regions: HashMap<u64, RecordsSource>,
    /// The latest replica fetch of each (replica, partition), to answer one it supersedes.
    latest_replica_fetch: HashMap<(NodeId, PartitionId), u64>,
    next_core_correlation_id: u64,
    /// What each replica fetch the core holds asked for, by core correlation id, with its
    /// replica and partition: a replica's next Fetch asking the same is carried to it. One
    /// with no answer slot (`fetch_slots`) and no held answer was left out of its request and
    /// no later one carries it yet.
    asks: HashMap<u64, Ask>,
    /// Answers of carried fetches that came while no request of their replica carried them,
    /// with their file regions: the replica's next Fetch asking the same takes them.
    held: HashMap<u64, (PartAnswer, Option<RecordsSource>)>,
    /// Earlier Fetches on a connection whose later one was answered, to complete.
    releasable: Vec<u64>,
    /// Each replica's fetch session and the request carrying its carried fetches.
    carriers: HashMap<NodeId, (i32, u64)>,
}

/// Whether two replica fetches ask for the same (the core's correlation id, the byte budget,
/// which the follower shares anew each round, and the wait aside: a Fetch has one MaxWaitMs
/// for all its partitions, the least of its fetches', so one partition's first fetch to a new
/// leader, which does not long-poll, would otherwise make every parked fetch of the session
/// look new, each answered REQUEST_TIMED_OUT and stepped again).
fn same_ask(a: &core::FetchRequest, b: &core::FetchRequest) -> bool {
    a.replica_id == b.replica_id
        && a.current_leader_epoch == b.current_leader_epoch
        && a.fetch_offset == b.fetch_offset
        && a.last_fetched_epoch == b.last_fetched_epoch
        && a.replica_directory_id == b.replica_directory_id
}

impl AnswerSlots {
    /// A fresh core correlation id for a replica fetch's part.
    pub(super) fn next_fetch_correlation_id(&mut self) -> u64 {
        self.next_core_correlation_id += 1;
        self.next_core_correlation_id
    }

    /// Registers an answer slot per part (a part that names no hosted partition is answered
    /// with its error at once). Returns the request's id, the core steps to run, the ids
    /// of earlier replica fetches these supersede (the core drops a parked fetch when the
    /// same replica fetches again; the node answers the old request so its connection moves
    /// on), and the earlier requests a part was carried away from (complete, maybe, now).
    ///
    /// A replica fetch that asks for what the replica's previous fetch of that partition
    /// asked, while the core still holds that one parked (or holds its answer here), is not
    /// stepped: the parked fetch's answer fills this request's slot.
    ///
    /// A Fetch in a session (`session`) becomes its replica's carrier: the previous carrier
    /// leaves with what it has, and an incremental Fetch takes the answers held for the
    /// session's partitions it does not name.
    pub(super) fn register(
        &mut self,
        responder: Responder,
        api: ApiKey,
        mut parts: Vec<InboundPart>,
        now_ms: u64,
        session: Option<FetchCarrier>,
    ) -> (u64, Vec<Step>, Vec<u64>, Vec<u64>) {
        let id = self.next_pending_id;
        self.next_pending_id += 1;
        let session_id = session.map_or(0, |s| s.session_id);
        let mut answers = Vec::with_capacity(parts.len());
        let mut fetch_ids = vec![None; parts.len()];
        let mut steps = Vec::new();
        let mut superseded = Vec::new();
        let mut carried_from = Vec::new();
        for (slot, part) in parts.iter().enumerate() {
            match &part.target {
                Err(error) => answers.push(Some(PartAnswer::Error(*error))),
                Ok((partition, from, message)) => {
                    answers.push(None);
                    if let core::Message::FetchRequest(f) = message {
                        let key = (*from, *partition);
                        let parked = self.latest_replica_fetch.get(&key).copied().filter(|old| {
                            self.asks
                                .get(old)
                                .is_some_and(|ask| same_ask(ask.target().2, f))
                        });
                        if let Some(old) = parked {
                            fetch_ids[slot] = Some(old);
                            if let Some(ask) = self.asks.get_mut(&old) {
                                ask.session_id = session_id;
                            }
                            if let Some((answer, region)) = self.held.remove(&old) {
                                self.asks.remove(&old);
                                if let Some(region) = region {
                                    self.fetch_regions.insert(old, region);
                                }
                                answers[slot] = Some(answer);
                            } else if let Some((earlier, earlier_slot)) =
                                self.fetch_slots.insert(old, (id, slot))
                                && let Some(pending) = self.pending.get_mut(&earlier)
                                && pending.answers[earlier_slot].is_none()
                            {
                                pending.omitted[earlier_slot] = true;
                                carried_from.push(earlier);
                            }
                            continue;
                        }
                        fetch_ids[slot] = Some(f.correlation_id);
                        self.fetch_slots.insert(f.correlation_id, (id, slot));
                        let ask = Ask {
                            part: part.clone(),
                            session_id,
                        };
                        self.asks.insert(f.correlation_id, ask);
                        if let Some(old) = self.latest_replica_fetch.insert(key, f.correlation_id) {
                            self.asks.remove(&old);
                            self.held.remove(&old);
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
        if let Some(session) = session {
            carried_from.extend(self.take_over_session(session, id));
            if session.incremental {
                for (cid, part, answer) in self.take_held_of(session) {
                    parts.push(part);
                    answers.push(Some(answer));
                    fetch_ids.push(Some(cid));
                }
            }
        }
        self.pending.insert(
            id,
            PendingRequest {
                responder,
                api,
                snapshot_regions: vec![None; parts.len()],
                omitted: vec![false; parts.len()],
                fetch_ids,
                parts,
                answers,
                started_ms: now_ms,
                stepping: true,
                fetch_session_id: session_id,
                carrier_of: session.map(|s| s.replica),
                released: false,
            },
        );
        (id, steps, superseded, carried_from)
    }

    /// Request `id` carries `session` from now on: the previous carrier leaves with what it
    /// has (returned, for the node to complete), its parked parts carried by the session. A
    /// full Fetch opens a new session: what the replica's earlier ones carried is let go (the
    /// full Fetch named everything it still asks).
    fn take_over_session(&mut self, session: FetchCarrier, id: u64) -> Option<u64> {
        if !session.incremental {
            let stale: Vec<u64> = self
                .asks
                .iter()
                .filter(|(_, a)| {
                    a.replica() == session.replica && a.session_id != session.session_id
                })
                .map(|(cid, _)| *cid)
                .collect();
            for cid in stale {
                self.asks.remove(&cid);
                self.held.remove(&cid);
            }
        }
        let (_, previous) = self
            .carriers
            .insert(session.replica, (session.session_id, id))?;
        self.carry_parked(previous);
        let pending = self.pending.get_mut(&previous)?;
        pending.released = true;
        Some(previous)
    }

    /// The answers held for `session`'s carried fetches, each with its wire part: the
    /// session's next Fetch takes them (their regions kept for its response).
    fn take_held_of(&mut self, session: FetchCarrier) -> Vec<(u64, InboundPart, PartAnswer)> {
        let ids: Vec<u64> = self
            .held
            .keys()
            .copied()
            .filter(|cid| {
                self.asks.get(cid).is_some_and(|a| {
                    a.replica() == session.replica && a.session_id == session.session_id
                })
            })
            .collect();
        let mut taken = Vec::with_capacity(ids.len());
        for cid in ids {
            let (answer, region) = self.held.remove(&cid).expect("listed above");
            let ask = self.asks.remove(&cid).expect("listed above");
            if let Some(region) = region {
                self.fetch_regions.insert(cid, region);
            }
            taken.push((cid, ask.part, answer));
        }
        taken
    }

    /// A replica's incremental Fetch forgot `partitions` (ForgottenTopicsData): their parked
    /// fetches are no longer carried, and their held answers are dropped.
    pub(super) fn forget_session_parts(&mut self, replica: NodeId, partitions: &[PartitionId]) {
        for partition in partitions {
            if let Some(cid) = self.latest_replica_fetch.remove(&(replica, *partition)) {
                self.asks.remove(&cid);
                self.held.remove(&cid);
            }
        }
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

    /// The core's answer to a replica fetch part, with its records where they are not in the
    /// response (slices of the log's tail, a file region): fills the slot and returns the
    /// request's id, or drops the records (closing a region's descriptor) when no request
    /// waits for the answer.
    pub(super) fn answer_fetch(
        &mut self,
        response: core::FetchResponse,
        region: Option<RecordsSource>,
    ) -> Option<u64> {
        let correlation_id = response.correlation_id;
        if self.is_carried(correlation_id) {
            let answer = PartAnswer::Core(core::Message::FetchResponse(response));
            // Carried by its session: it joins the session's carrier as one more part.
            if let Some(id) = self.carrier_for(correlation_id) {
                let ask = self.asks.remove(&correlation_id).expect("carried");
                if let Some(region) = region {
                    self.fetch_regions.insert(correlation_id, region);
                }
                let pending = self.pending.get_mut(&id).expect("a carrier is pending");
                pending.parts.push(ask.part);
                pending.answers.push(Some(answer));
                pending.omitted.push(false);
                pending.fetch_ids.push(Some(correlation_id));
                pending.snapshot_regions.push(None);
                return Some(id);
            }
            // No request of the replica carries it yet: its next one takes it.
            self.held.insert(correlation_id, (answer, region));
            return None;
        }
        self.asks.remove(&correlation_id);
        let slot = self.fetch_slots.remove(&correlation_id);
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

    /// The pending request that carries the session of carried fetch `correlation_id`, if
    /// one does and has not been released.
    fn carrier_for(&self, correlation_id: u64) -> Option<u64> {
        let ask = self.asks.get(&correlation_id)?;
        if ask.session_id == 0 {
            return None;
        }
        let (session_id, id) = *self.carriers.get(&ask.replica())?;
        let pending = self.pending.get(&id)?;
        (session_id == ask.session_id && !pending.released).then_some(id)
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
    ) -> Option<(PendingRequest, Vec<PartAnswer>, HashMap<u64, RecordsSource>)> {
        self.note_partial(id);
        let done = self.pending.get(&id).is_some_and(|p| {
            let all = p
                .answers
                .iter()
                .zip(&p.omitted)
                .all(|(answer, omitted)| answer.is_some() || *omitted);
            // A session's carrier waits for any answer, even with no part of its own.
            let carried =
                p.carrier_of.is_none() || p.released || p.answers.iter().any(Option::is_some);
            all && carried
        });
        if !done {
            return None;
        }
        let mut pending = self.pending.remove(&id).expect("checked above");
        if let Some(replica) = pending.carrier_of
            && self.carriers.get(&replica).is_some_and(|(_, c)| *c == id)
        {
            self.carriers.remove(&replica);
        }
        if pending.api == ApiKey::Fetch {
            self.release_earlier_fetches_on(pending.responder.connection_id(), id);
        }
        // The parts left out are not in the wire response.
        let omitted = std::mem::take(&mut pending.omitted);
        let parts = std::mem::take(&mut pending.parts);
        let regions_in = std::mem::take(&mut pending.snapshot_regions);
        let mut answers = Vec::with_capacity(parts.len());
        for (((part, answer), omitted), region) in parts
            .into_iter()
            .zip(std::mem::take(&mut pending.answers))
            .zip(omitted)
            .zip(regions_in)
        {
            if !omitted {
                pending.parts.push(part);
                pending.snapshot_regions.push(region);
                answers.push(answer.expect("all answered"));
            }
        }
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
    /// part has the core's answer (and every part was stepped), the parts still parked are
    /// left out of the answer and carried ([`AnswerSlots::register`]). Kafka does the same: a
    /// Fetch completes when any partition has something to return. Without it a node leading
    /// an idle and a busy partition answered the busy partition's followers only when the idle
    /// one's wait ended, and each commit there took that long.
    fn note_partial(&mut self, id: u64) {
        let Some(pending) = self.pending.get(&id) else {
            return;
        };
        let has_core_answer = pending
            .answers
            .iter()
            .any(|a| matches!(a, Some(PartAnswer::Core(_))));
        if pending.api == ApiKey::Fetch && !pending.stepping && has_core_answer {
            self.carry_parked(id);
        }
    }

    /// Leaves request `id`'s parts without an answer out of it: their fetches stay parked
    /// in the core, carried to the replica's next Fetch.
    fn carry_parked(&mut self, id: u64) {
        let Some(pending) = self.pending.get_mut(&id) else {
            return;
        };
        for slot in 0..pending.answers.len() {
            if pending.answers[slot].is_some() || pending.omitted[slot] {
                continue;
            }
            let Some(fetch_id) = pending.fetch_ids[slot] else {
                continue;
            };
            pending.omitted[slot] = true;
            if self.fetch_slots.get(&fetch_id) == Some(&(id, slot)) {
                self.fetch_slots.remove(&fetch_id);
            }
        }
    }

    /// The server answers a connection's requests in order, so an answered Fetch would wait
    /// behind an earlier Fetch on the same connection that the core parked: those earlier ones
    /// leave now, their parked parts carried. Only an answer that is ready moves the ones
    /// ahead of it, so idle fetches still wait their long poll.
    fn release_earlier_fetches_on(&mut self, connection_id: u64, answered: u64) {
        let earlier: Vec<u64> = self
            .pending
            .iter()
            .filter(|(id, pending)| {
                **id < answered
                    && pending.api == ApiKey::Fetch
                    && !pending.stepping
                    && pending.responder.connection_id() == connection_id
            })
            .map(|(id, _)| *id)
            .collect();
        for id in earlier {
            self.carry_parked(id);
            self.releasable.push(id);
        }
    }

    /// Whether the core's parked fetch `correlation_id` was left out of its request's answer
    /// and no later request carries it yet (no slot, no held answer).
    fn is_carried(&self, correlation_id: u64) -> bool {
        self.asks.contains_key(&correlation_id)
            && !self.fetch_slots.contains_key(&correlation_id)
            && !self.held.contains_key(&correlation_id)
    }

    /// Requests that may be complete now (earlier Fetches on a connection whose later one
    /// was answered): the node completes each ([`AnswerSlots::take_complete`]).
    pub(super) fn take_releasable(&mut self) -> Vec<u64> {
        std::mem::take(&mut self.releasable)
    }

    pub(super) fn has_releasable(&self) -> bool {
        !self.releasable.is_empty()
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
                pending.released = true;
                for (answer, omitted) in pending.answers.iter_mut().zip(&pending.omitted) {
                    if !omitted {
                        answer.get_or_insert(PartAnswer::Error(code));
                    }
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
        let gone: Vec<u64> = self
            .asks
            .iter()
            .filter(|(_, ask)| ask.target().0 == partition)
            .map(|(id, _)| *id)
            .collect();
        for id in gone {
            self.asks.remove(&id);
            self.held.remove(&id);
        }
        let mut ids = std::collections::BTreeSet::new();
        for (id, pending) in &mut self.pending {
            for ((answer, part), omitted) in pending
                .answers
                .iter_mut()
                .zip(&pending.parts)
                .zip(&pending.omitted)
            {
                if answer.is_none()
                    && !omitted
                    && part.target.as_ref().is_ok_and(|(p, _, _)| *p == partition)
                {
                    *answer = Some(PartAnswer::Error(code));
                    ids.insert(*id);
                }
            }
        }
        ids.into_iter().collect()
    }
}

#[cfg(test)]
mod tests;
