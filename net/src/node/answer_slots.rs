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
    /// Replica Fetch parts left out of this request's answer: parked in the core, carried to
    /// the replica's next Fetch ([`AnswerSlots::register`]).
    omitted: Vec<bool>,
    /// Per replica Fetch part, the core correlation id whose answer fills it (its own, or
    /// the parked fetch it was carried to).
    fetch_ids: Vec<Option<u64>>,
    /// A replica Fetch's session (KIP-227, replica_fetch_sessions.rs), named in its answer
    /// (0: sessionless).
    pub(super) fetch_session_id: i32,
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
    /// What each replica fetch the core holds asked for, by core correlation id, with its
    /// replica and partition: a replica's next Fetch asking the same is carried to it. One
    /// with no answer slot (`fetch_slots`) and no held answer was left out of its request and
    /// no later one carries it yet.
    asks: HashMap<u64, (NodeId, PartitionId, core::FetchRequest)>,
    /// Answers of carried fetches that came while no request of their replica carried them,
    /// with their file regions: the replica's next Fetch asking the same takes them.
    held: HashMap<u64, (PartAnswer, Option<FileRegion>)>,
    /// Earlier Fetches on a connection whose later one was answered, to complete.
    releasable: Vec<u64>,
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
    pub(super) fn register(
        &mut self,
        responder: Responder,
        api: ApiKey,
        parts: Vec<InboundPart>,
        now_ms: u64,
    ) -> (u64, Vec<Step>, Vec<u64>, Vec<u64>) {
        let id = self.next_pending_id;
        self.next_pending_id += 1;
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
                                .is_some_and(|(_, _, asked)| same_ask(asked, f))
                        });
                        if let Some(old) = parked {
                            fetch_ids[slot] = Some(old);
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
                        self.asks
                            .insert(f.correlation_id, (*from, *partition, f.clone()));
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
                fetch_session_id: 0,
            },
        );
        (id, steps, superseded, carried_from)
    }

    /// The fetch session request `id`'s answer names (KIP-227).
    pub(super) fn set_fetch_session_id(&mut self, id: u64, session_id: i32) {
        if let Some(pending) = self.pending.get_mut(&id) {
            pending.fetch_session_id = session_id;
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

    /// The core's answer to a replica fetch part, with the file region of its records if it
    /// has one: fills the slot and returns the request's id, or drops the region (closing its
    /// descriptor) when no request waits for the answer.
    pub(super) fn answer_fetch(
        &mut self,
        response: core::FetchResponse,
        region: Option<FileRegion>,
    ) -> Option<u64> {
        let correlation_id = response.correlation_id;
        if self.is_carried(correlation_id) {
            // Carried, and no request of the replica carries it yet: its next one takes it.
            let answer = PartAnswer::Core(core::Message::FetchResponse(response));
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
        self.note_partial(id);
        let done = self.pending.get(&id).is_some_and(|p| {
            p.answers
                .iter()
                .zip(&p.omitted)
                .all(|(answer, omitted)| answer.is_some() || *omitted)
        });
        if !done {
            return None;
        }
        let mut pending = self.pending.remove(&id).expect("checked above");
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
            .filter(|(_, (_, p, _))| *p == partition)
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
mod tests {
    use super::*;
    use crate::protocol::wire::Uuid;

    const REPLICA: NodeId = 2;

    impl AnswerSlots {
        fn any_carried(&self) -> bool {
            self.asks.keys().any(|id| self.is_carried(*id))
        }
    }

    fn ask(fetch_offset: u64) -> core::FetchRequest {
        core::FetchRequest {
            correlation_id: 0,
            replica_id: REPLICA,
            current_leader_epoch: 1,
            fetch_offset,
            last_fetched_epoch: 1,
            max_bytes: 1 << 20,
            max_wait_ms: 500,
            replica_directory_id: [0; 16],
        }
    }

    /// A replica Fetch of (partition, fetch offset) parts, each given the next core
    /// correlation id as the node does.
    fn register(
        slots: &mut AnswerSlots,
        parts: &[(PartitionId, u64)],
    ) -> (u64, Vec<u64>, Vec<u64>, Vec<u64>) {
        register_waiting(slots, parts, 500)
    }

    /// [`register`] of a Fetch whose MaxWaitMs is `max_wait_ms` (every part has the request's).
    fn register_waiting(
        slots: &mut AnswerSlots,
        parts: &[(PartitionId, u64)],
        max_wait_ms: u64,
    ) -> (u64, Vec<u64>, Vec<u64>, Vec<u64>) {
        let (responder, _reply) = Responder::for_test(1);
        let parts = parts
            .iter()
            .map(|&(partition, offset)| {
                let mut fetch = ask(offset);
                fetch.max_wait_ms = max_wait_ms;
                fetch.correlation_id = slots.next_fetch_correlation_id();
                InboundPart {
                    topic: "t".into(),
                    topic_id: Uuid::ZERO,
                    index: partition as i32,
                    target: Ok((partition, REPLICA, core::Message::FetchRequest(fetch))),
                }
            })
            .collect();
        let (id, steps, superseded, carried_from) =
            slots.register(responder, ApiKey::Fetch, parts, 0);
        let stepped = steps
            .iter()
            .map(|(_, _, _, m)| match m {
                core::Message::FetchRequest(f) => f.correlation_id,
                _ => unreachable!(),
            })
            .collect();
        slots.stepped(id);
        (id, stepped, superseded, carried_from)
    }

    fn answer(correlation_id: u64, records: &'static [u8]) -> core::FetchResponse {
        let mut response = core::FetchResponse::unreachable(correlation_id);
        response.error_code = core::ErrorCode::None;
        response.records = bytes::Bytes::from_static(records);
        response
    }

    fn answered_partitions(
        done: &(PendingRequest, Vec<PartAnswer>, HashMap<u64, FileRegion>),
    ) -> Vec<i32> {
        done.0.parts.iter().map(|p| p.index).collect()
    }

    #[test]
    fn parked_parts_are_left_out_and_carried_to_the_replica_s_next_fetch() {
        let mut slots = AnswerSlots::default();
        // Fetch 1: partitions 1 (busy) and 2 (idle); both stepped into the core.
        let (r1, stepped, _, _) = register(&mut slots, &[(1, 10), (2, 20)]);
        assert_eq!(stepped, vec![1, 2]);
        // The core answers partition 1 at once and parks 2: the Fetch leaves with 1 only.
        assert_eq!(slots.answer_fetch(answer(1, b"x"), None), Some(r1));
        let done = slots
            .take_complete(r1)
            .expect("complete without the parked part");
        assert_eq!(answered_partitions(&done), vec![1]);

        // Fetch 2 asks 1 anew and 2 unchanged: only 1 is stepped; 2 is carried.
        let (r2, stepped, superseded, carried_from) = register(&mut slots, &[(1, 11), (2, 20)]);
        assert_eq!(stepped, vec![3], "the unchanged ask is not stepped again");
        assert_eq!(
            superseded,
            vec![1],
            "1's answered fetch: nothing left to answer"
        );
        assert!(carried_from.is_empty(), "fetch 1 has left");
        assert!(slots.take_complete(r2).is_none(), "nothing answered yet");
        // The parked fetch of 2 (core id 2) is answered: it fills fetch 2's slot, and the
        // Fetch leaves with 2, leaving 1 (now parked) out.
        assert_eq!(slots.answer_fetch(answer(2, b"y"), None), Some(r2));
        let done = slots.take_complete(r2).expect("complete");
        assert_eq!(answered_partitions(&done), vec![2]);
        match &done.1[0] {
            PartAnswer::Core(core::Message::FetchResponse(r)) => assert_eq!(r.correlation_id, 2),
            _ => panic!("the parked fetch's answer"),
        }

        // 1's parked fetch (core id 3) is answered while no Fetch carries it: held.
        assert_eq!(slots.answer_fetch(answer(3, b"z"), None), None);
        // Fetch 3 asks 1 unchanged: not stepped, answered from what was held.
        let (r3, stepped, _, _) = register(&mut slots, &[(1, 11), (2, 21)]);
        assert_eq!(stepped, vec![6], "only 2's new ask");
        let done = slots.take_complete(r3).expect("the held answer is ready");
        assert_eq!(
            answered_partitions(&done),
            vec![1],
            "2's new fetch left out (parked)"
        );

        // Fetch 4 asks 2 differently from its parked fetch (core id 6): stepped, and the
        // parked one is superseded (the core drops it).
        let (_r4, stepped, superseded, _) = register(&mut slots, &[(1, 12), (2, 22)]);
        assert_eq!(stepped, vec![7, 8]);
        assert_eq!(superseded, vec![3, 6]);
        // The superseded fetch's late answer goes nowhere.
        assert_eq!(slots.answer_fetch(answer(6, b""), None), None);
        assert!(slots.held.is_empty() && !slots.any_carried());
    }

    #[test]
    fn an_earlier_fetch_whose_parts_are_carried_away_leaves_empty() {
        let mut slots = AnswerSlots::default();
        let (r1, _, _, _) = register(&mut slots, &[(1, 10), (2, 20)]);
        assert!(slots.take_complete(r1).is_none(), "both parked");
        // The replica's next Fetch asks the same: both carried to it, the first leaves empty.
        let (r2, stepped, _, carried_from) = register(&mut slots, &[(1, 10), (2, 20)]);
        assert!(stepped.is_empty());
        assert_eq!(carried_from, vec![r1, r1]);
        let done = slots.take_complete(r1).expect("nothing left to wait for");
        assert!(answered_partitions(&done).is_empty());
        assert_eq!(slots.answer_fetch(answer(2, b"y"), None), Some(r2));
        let done = slots.take_complete(r2).expect("complete");
        assert_eq!(answered_partitions(&done), vec![2]);
    }

    #[test]
    fn a_parked_fetch_is_carried_whatever_the_next_fetch_s_wait() {
        let mut slots = AnswerSlots::default();
        let (r1, _, _, _) = register(&mut slots, &[(1, 10), (2, 20)]);
        assert!(slots.take_complete(r1).is_none(), "both parked");
        // The replica's next Fetch adds partition 3's first fetch to a new leader, which does
        // not long-poll: the whole Fetch says MaxWaitMs 0. 1 and 2 ask what they asked.
        let (r2, stepped, superseded, carried_from) =
            register_waiting(&mut slots, &[(1, 10), (2, 20), (3, 0)], 0);
        assert_eq!(stepped, vec![5], "only 3 is stepped");
        assert!(
            superseded.is_empty(),
            "the parked fetches are not answered REQUEST_TIMED_OUT"
        );
        assert_eq!(carried_from, vec![r1, r1]);
        assert_eq!(slots.answer_fetch(answer(5, b""), None), Some(r2));
        let done = slots.take_complete(r2).expect("3's answer");
        assert_eq!(answered_partitions(&done), vec![3]);
        assert!(slots.is_carried(1) && slots.is_carried(2), "still parked");
    }

    #[test]
    fn a_forgotten_partition_leaves_nothing_carried_or_held() {
        let mut slots = AnswerSlots::default();
        let (r1, _, _, _) = register(&mut slots, &[(1, 10), (2, 20)]);
        slots.answer_fetch(answer(1, b"x"), None);
        slots.take_complete(r1).expect("complete");
        assert!(slots.is_carried(2));
        slots.answer_fetch(answer(2, b""), None);
        assert!(slots.held.contains_key(&2));
        slots.forget_partition(2, ErrorCode::NotLeaderOrFollower);
        assert!(slots.held.is_empty() && !slots.any_carried() && slots.asks.is_empty());
    }
}
