//! A follower's fetch session per leader: at most one replica Fetch of ours waits at each peer.
//!
//! A Kafka server answers one connection's requests in order, and a leader parks a replica
//! Fetch with nothing new for up to `fetch.max.wait.ms`. The cores of the partitions a peer
//! leads ask to fetch at different moments (each after its own flush), so before this each
//! such moment sent one more wire Fetch on the peer's fetch lane: with many partitions a
//! dozen were outstanding, each parked behind the one before it, and the server stops reading
//! a connection with 8 requests in flight. A partition's fetch, the one that carries its
//! durable offset and moves its high-watermark, waited for the long polls of the others, past
//! the 2 s fetch timeout: elections, and 100 partitions ran at a tenth of one partition's rate.
//!
//! Now every wire Fetch to a peer carries *every* partition whose fetch to that peer is
//! outstanding (the core's request as it sent it: same offsets, same correlation id) and
//! supersedes the one before it. The leader's core takes a replica's new fetch of a partition
//! in place of its parked one (whose slot the node answers at once), so the superseded wire
//! request is answered right away and only the newest waits. Every answer, a superseded
//! request's too, is delivered part by part: a partition's part goes to its core when the
//! session still waits for exactly the fetch it answers (the core's same request), and is
//! dropped when that fetch was answered already (a later Fetch carried it again) or its core
//! asked anew since. A superseded answer's errors are dropped too (the later Fetch carries
//! the same ask, and the leader answers it again), except those that name the leader
//! (peer_answers.rs). Dropping superseded answers whole, as this did before 2026-12-07, let a
//! follower whose cores asked again faster than the leader's round trip (a thousand
//! partitions, their elections spread in time) never hear an answer: each arrived superseded,
//! every fetch timed out after 2 s, the pre-votes that followed were refused and named the
//! leader, its cores asked again, and the cycle went on. A superseded request's failure is
//! still dropped (the newest one, on the same lane, fails with it).
//!
//! At most [`MAX_IN_FLIGHT`] wire Fetches are in flight to a leader: the parked one and the
//! one superseding it, which the leader answers at once. A core's fetch that comes while two
//! are out is held and leaves, with every other outstanding fetch, in the turn the older of
//! the two is answered: about one round trip later, never a timer. Before 2026-12-07 every
//! turn with a new fetch sent one more wire Fetch: with a thousand partitions whose elections
//! spread their fetches in time, each of a follower's turns sent one, each carrying a third
//! of the partitions, and the leader and the follower spent their CPU building, expanding and
//! answering them (both cores busy with no load, fetches unanswered for the whole 2 s fetch
//! timeout, leaders resigning on check quorum). This is Kafka's one fetch session per leader
//! (KIP-227), its requests incremental too: once the leader has named its session, a Fetch
//! names only the partitions whose ask changed and forgets those no longer outstanding, and
//! the leader fills in the rest (replica_fetch_sessions.rs). Its responses are incremental: the
//! leader answers once any partition has something and leaves out the partitions whose
//! fetch it still holds parked (answer_slots.rs); those stay outstanding here, and the next
//! wire Fetch (a core's next fetch, or alone after `RESEND_AFTER_MS` if none asks) carries
//! them again unchanged, which the leader recognises without stepping its core.

use std::collections::{BTreeMap, HashMap, HashSet};

use ringlog_replication::{self as core, NodeId, PartitionId};

use super::convert::FetchSessionPlan;
use crate::protocol::ErrorCode;
use crate::protocol::wire::Uuid;

#[derive(Default)]
pub(super) struct FetchSessions {
    peers: HashMap<NodeId, Session>,
    /// Partitions whose latest answer carried no records: caught up with their leader then.
    /// The next wire Fetch asks them for a small share of the response's bytes and the others
    /// for the rest (`convert::fetch::partition_shares`).
    idle: HashSet<PartitionId>,
}

/// How long fetches the leader left out of its answer may wait, with no wire Fetch in flight,
/// for a core's next fetch to carry them before they are sent alone. A follower's core fetches
/// again right after an answer, or after the flush of what it appended (well under this): the
/// wait only matters when no partition of the session fetches soon (an answer that was an
/// error backs off), and bounds how long the leader holds the answers it has for them.
pub(super) const RESEND_AFTER_MS: u64 = 5;

/// Wire Fetches in flight to one leader at most: the one it may hold parked and the one
/// superseding it.
pub(super) const MAX_IN_FLIGHT: usize = 2;

/// A wire Fetch unanswered this long no longer counts as in flight. A leader answers every
/// Fetch within its wait and request timeout (2.5 s by default, `QuorumRpc::expire`), or its
/// connection fails and every Fetch on it with it; should an answer still be lost, the held
/// fetches leave with the next core's fetch after this, not never.
const UNANSWERED_AFTER_MS: u64 = 5_000;

#[derive(Default)]
struct Session {
    /// The cores' fetches to this peer not yet answered, by partition.
    outstanding: BTreeMap<PartitionId, core::FetchRequest>,
    /// The wire Fetches sent here and not yet answered (nor failed), oldest first, with when
    /// they were sent: the last is the newest, which carries every outstanding fetch.
    in_flight: Vec<(i32, u64)>,
    /// A fetch is outstanding that no wire Fetch carries yet: it came while
    /// [`MAX_IN_FLIGHT`] were out, and leaves when one is answered.
    held: bool,
    /// Since when fetches are outstanding here with no wire Fetch in flight.
    unsent_since_ms: Option<u64>,
    /// The leader's side of it: its fetch session (KIP-227).
    wire: WireSession,
}

/// The follower's view of its fetch session at a leader (KIP-227): the leader remembers each
/// partition's last ask (replica_fetch_sessions.rs), so a Fetch names only the partitions whose
/// ask changed and forgets those no longer outstanding there.
#[derive(Default)]
struct WireSession {
    /// The leader's session id (0: none yet; the next Fetch is a full one that opens one).
    id: i32,
    /// The epoch of the last Fetch sent in it (0: the full one that opened it).
    epoch: i32,
    /// What the leader's session holds after the last Fetch sent: every partition it
    /// carried, with its wire key (topic id, index) and the core's ask.
    view: BTreeMap<PartitionId, HeldAsk>,
    /// The full Fetch that opens a session, its wire correlation id, until its answer names
    /// the session (an earlier full Fetch's answer names a session this one replaced).
    opening: Option<i32>,
    /// The Fetch being built: taken into the view at [`FetchSessions::sent`].
    planned: Option<Planned>,
}

/// What a Fetch changes in the leader's session.
struct Planned {
    epoch: i32,
    /// Partitions the Fetch names (their new ask) or forgets (`None`).
    changes: Vec<(PartitionId, Option<HeldAsk>)>,
}

/// A partition's ask as the leader's session holds it: its wire key (topic id, index) and the
/// core's fetch.
type HeldAsk = ((Uuid, i32), core::FetchRequest);

impl FetchSessions {
    /// The cores ask to fetch `list` from `to`: returns what the next wire Fetch to `to`
    /// carries, every partition outstanding there with these (a partition's new fetch replaces
    /// its older one; a partition now fetching from `to` no longer fetches elsewhere). Nothing
    /// while [`MAX_IN_FLIGHT`] wire Fetches are out there: the fetches are held until one is
    /// answered ([`FetchSessions::take_answer`]).
    pub(super) fn request(
        &mut self,
        to: NodeId,
        list: Vec<(PartitionId, core::FetchRequest)>,
        now_ms: u64,
    ) -> Vec<(PartitionId, core::FetchRequest)> {
        for (peer, session) in self.peers.iter_mut() {
            if *peer != to {
                for (partition, _) in &list {
                    session.outstanding.remove(partition);
                }
            }
        }
        let session = self.peers.entry(to).or_default();
        for (partition, request) in list {
            session.outstanding.insert(partition, request);
        }
        session
            .in_flight
            .retain(|(_, sent_ms)| sent_ms + UNANSWERED_AFTER_MS > now_ms);
        if session.in_flight.len() >= MAX_IN_FLIGHT {
            session.held |= !session.outstanding.is_empty();
            return Vec::new();
        }
        session
            .outstanding
            .iter()
            .map(|(partition, request)| (*partition, request.clone()))
            .collect()
    }

    /// How the next wire Fetch to `to`, carrying `list` (what [`FetchSessions::request`]
    /// returned, in partition order, with each partition's wire key), stands in the leader's
    /// session: a full Fetch opening one while none is known, else an incremental one naming
    /// the partitions whose ask the leader does not hold and forgetting those it holds that
    /// are not in `list`. The session's view changes only once the Fetch is sent.
    pub(super) fn plan(
        &mut self,
        to: NodeId,
        list: &[(PartitionId, core::FetchRequest)],
        key: impl Fn(PartitionId) -> (Uuid, i32),
    ) -> FetchSessionPlan {
        let wire = &mut self.peers.entry(to).or_default().wire;
        if wire.id == 0 {
            let view = list.iter().map(|(p, f)| (*p, Some((key(*p), f.clone()))));
            wire.planned = Some(Planned {
                epoch: 0,
                changes: view.collect(),
            });
            return FetchSessionPlan {
                session_id: 0,
                session_epoch: 0,
                named: Vec::new(),
                forgotten: Vec::new(),
            };
        }
        // Both in partition order: one walk.
        debug_assert!(list.windows(2).all(|w| w[0].0 < w[1].0));
        let mut named = Vec::with_capacity(list.len());
        let mut forgotten = Vec::new();
        let mut changes = Vec::new();
        let mut held = wire.view.iter().peekable();
        for (p, f) in list {
            while let Some((gone, (gone_key, _))) = held.next_if(|(q, _)| *q < p) {
                forgotten.push(*gone_key);
                changes.push((*gone, None));
            }
            let now = key(*p);
            let same = match held.next_if(|(q, _)| *q == p) {
                Some((_, (held_key, _))) if *held_key != now => {
                    // The id now names another partition (a topic made again).
                    forgotten.push(*held_key);
                    false
                }
                Some((_, (_, held_ask))) => held_ask == f,
                None => false,
            };
            named.push(!same);
            if !same {
                changes.push((*p, Some((now, f.clone()))));
            }
        }
        for (gone, (gone_key, _)) in held {
            forgotten.push(*gone_key);
            changes.push((*gone, None));
        }
        forgotten.sort();
        let epoch = FetchSessionPlan::next_epoch(wire.epoch);
        wire.planned = Some(Planned { epoch, changes });
        FetchSessionPlan {
            session_id: wire.id,
            session_epoch: epoch,
            named,
            forgotten,
        }
    }

    /// The wire Fetch carrying them left as `correlation_id` (`None`: it could not be queued).
    pub(super) fn sent(&mut self, to: NodeId, correlation_id: Option<i32>, now_ms: u64) {
        let session = self.peers.entry(to).or_default();
        session.unsent_since_ms = None;
        session.held = false;
        let planned = session.wire.planned.take();
        match correlation_id {
            Some(id) => {
                session.in_flight.push((id, now_ms));
                if let Some(planned) = planned {
                    let wire = &mut session.wire;
                    // Planned and sent in one call (`QuorumRpc::flush_fetches`), so no answer
                    // came between: no session known then means the Fetch was a full one,
                    // and the leader's new session holds only its partitions.
                    if wire.id == 0 {
                        wire.view.clear();
                    }
                    for (partition, change) in planned.changes {
                        match change {
                            Some(ask) => wire.view.insert(partition, ask),
                            None => wire.view.remove(&partition),
                        };
                    }
                    if wire.id == 0 {
                        wire.opening = Some(id);
                    } else {
                        wire.epoch = planned.epoch;
                    }
                }
            }
            // Nothing is in flight to this peer: its cores learn of it at their fetch timeout.
            None => {
                session.outstanding.clear();
                session.wire = WireSession::default();
            }
        }
    }

    /// Wire Fetch `correlation_id` to `peer` was answered with this top-level error code and
    /// session id: the answer to the full Fetch that opened a session names it; an error
    /// (the leader lost the session, or its epoch) starts over with a full Fetch.
    pub(super) fn note_session(
        &mut self,
        peer: NodeId,
        correlation_id: i32,
        error_code: i16,
        session_id: i32,
    ) {
        let Some(session) = self.peers.get_mut(&peer) else {
            return;
        };
        let wire = &mut session.wire;
        if error_code != ErrorCode::None.code() {
            *wire = WireSession::default();
        } else if wire.opening == Some(correlation_id) {
            wire.opening = None;
            // 0: the leader keeps no session; every Fetch stays a full one.
            wire.id = session_id;
            wire.epoch = 0;
        }
    }

    /// The connection to `peer` failed: the next Fetch there is a full one.
    pub(super) fn reset_wire(&mut self, peer: NodeId) {
        if let Some(session) = self.peers.get_mut(&peer) {
            session.wire = WireSession::default();
        }
    }

    /// The newest answer's part for `partition` carried no records (`idle`) or some.
    pub(super) fn note_answer(&mut self, partition: PartitionId, idle: bool) {
        if idle {
            self.idle.insert(partition);
        } else {
            self.idle.remove(&partition);
        }
    }

    /// The node stopped running `partition` (its topic was deleted, or a storage error took it
    /// offline): no later wire Fetch carries it, and a partition id used again starts as one
    /// never answered (not idle).
    pub(super) fn forget(&mut self, partition: PartitionId) {
        self.idle.remove(&partition);
        for session in self.peers.values_mut() {
            session.outstanding.remove(&partition);
        }
    }

    /// Whether `partition`'s latest answer carried no records (never answered: not idle).
    pub(super) fn is_idle(&self, partition: PartitionId) -> bool {
        self.idle.contains(&partition)
    }

    /// The answer (or failure) of wire Fetch `correlation_id` from `peer` came: `true` when it
    /// is the newest (nothing of this session is then in flight), `false` when a later Fetch
    /// superseded it. Either way its parts are delivered where [`FetchSessions::settle`] says;
    /// a leader leaves out the partitions whose fetch it still holds parked, and those stay
    /// outstanding.
    pub(super) fn take_answer(&mut self, peer: NodeId, correlation_id: i32) -> bool {
        let Some(session) = self.peers.get_mut(&peer) else {
            return true;
        };
        // Answers come in order on the lane, so a Fetch is the newest when none sent after it
        // is still out.
        match session
            .in_flight
            .iter()
            .position(|(id, _)| *id == correlation_id)
        {
            Some(at) => {
                session.in_flight.remove(at);
                at == session.in_flight.len()
            }
            None => session.in_flight.is_empty(),
        }
    }

    /// An answer from `peer` (of whichever of its wire Fetches) carries `partition`'s answer
    /// to the core fetch `core_correlation_id`: `true` (deliver it; the partition is no longer
    /// outstanding) when the session still waits for exactly that fetch, `false` (drop it)
    /// when an earlier answer settled it or the partition's core asked anew since (its newer
    /// fetch waits), or fetches elsewhere now.
    pub(super) fn settle(
        &mut self,
        peer: NodeId,
        partition: PartitionId,
        core_correlation_id: u64,
    ) -> bool {
        let Some(session) = self.peers.get_mut(&peer) else {
            return false;
        };
        let waits = session
            .outstanding
            .get(&partition)
            .is_some_and(|f| f.correlation_id == core_correlation_id);
        if waits {
            session.outstanding.remove(&partition);
        }
        waits
    }

    /// Whether fetches held back at `peer` (while [`MAX_IN_FLIGHT`] wire Fetches were out)
    /// may leave now: the node then sends the session's next wire Fetch in this turn.
    pub(super) fn held_may_leave(&self, peer: NodeId) -> bool {
        self.peers
            .get(&peer)
            .is_some_and(|s| s.held && s.in_flight.len() < MAX_IN_FLIGHT)
    }

    /// Whether fetches to `peer` are outstanding with no wire Fetch in flight carrying them
    /// (the leader left them out of its answer).
    #[cfg(test)]
    fn wants_resend(&self, peer: NodeId) -> bool {
        self.peers.get(&peer).is_some_and(Session::wants_resend)
    }

    /// After an answer from `peer` was delivered: if fetches the leader left out are still
    /// outstanding with nothing in flight, they leave with the next core's fetch, or alone
    /// [`RESEND_AFTER_MS`] from now ([`FetchSessions::due_resends`]), so the leader always
    /// gets a Fetch to answer them in.
    pub(super) fn note_left_out(&mut self, peer: NodeId, now_ms: u64) {
        if let Some(session) = self.peers.get_mut(&peer)
            && session.wants_resend()
        {
            session.unsent_since_ms.get_or_insert(now_ms);
        }
    }

    /// The peers whose left-out fetches waited [`RESEND_AFTER_MS`] for a core's fetch.
    pub(super) fn due_resends(&self, now_ms: u64) -> Vec<NodeId> {
        self.peers
            .iter()
            .filter(|(_, s)| s.wants_resend())
            .filter(|(_, s)| {
                s.unsent_since_ms
                    .is_some_and(|since| since + RESEND_AFTER_MS <= now_ms)
            })
            .map(|(peer, _)| *peer)
            .collect()
    }

    /// When the earliest such resend is due (the event loop's wake-up).
    pub(super) fn next_resend_ms(&self) -> Option<u64> {
        self.peers
            .values()
            .filter(|s| s.wants_resend())
            .filter_map(|s| s.unsent_since_ms)
            .min()
            .map(|since| since + RESEND_AFTER_MS)
    }
}

impl Session {
    fn wants_resend(&self) -> bool {
        self.in_flight.is_empty() && !self.outstanding.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fetch(correlation_id: u64, fetch_offset: u64) -> core::FetchRequest {
        core::FetchRequest {
            correlation_id,
            replica_id: 1,
            current_leader_epoch: 1,
            fetch_offset,
            last_fetched_epoch: 1,
            max_bytes: 1 << 20,
            max_wait_ms: 500,
            replica_directory_id: Default::default(),
        }
    }

    #[test]
    fn each_wire_fetch_carries_every_outstanding_partition_and_supersedes_the_last() {
        let mut sessions = FetchSessions::default();
        let first = sessions.request(3, vec![(1, fetch(10, 5)), (2, fetch(11, 7))], 0);
        assert_eq!(
            first.iter().map(|(p, _)| *p).collect::<Vec<_>>(),
            vec![1, 2]
        );
        sessions.sent(3, Some(100), 0);
        // Partition 4's core asks later: the next wire Fetch carries 1 and 2 again, unchanged.
        let second = sessions.request(3, vec![(4, fetch(12, 9))], 0);
        assert_eq!(
            second
                .iter()
                .map(|(p, f)| (*p, f.correlation_id, f.fetch_offset))
                .collect::<Vec<_>>(),
            vec![(1, 10, 5), (2, 11, 7), (4, 12, 9)]
        );
        sessions.sent(3, Some(101), 0);
        assert!(!sessions.take_answer(3, 100), "superseded");
        assert!(sessions.take_answer(3, 101), "the newest");
        // The leader answered 1 and 4 and left 2 (parked there) out.
        assert!(sessions.settle(3, 1, 10));
        assert!(sessions.settle(3, 4, 12));
        assert!(
            sessions.wants_resend(3),
            "2 is outstanding, nothing in flight"
        );
        sessions.note_left_out(3, 1_000);
        assert_eq!(sessions.next_resend_ms(), Some(1_000 + RESEND_AFTER_MS));
        assert!(sessions.due_resends(1_000 + RESEND_AFTER_MS - 1).is_empty());
        assert_eq!(sessions.due_resends(1_000 + RESEND_AFTER_MS), vec![3]);
        let again = sessions.request(3, vec![], 0);
        assert_eq!(
            again
                .iter()
                .map(|(p, f)| (*p, f.correlation_id))
                .collect::<Vec<_>>(),
            vec![(2, 11)],
            "asked again unchanged"
        );
        sessions.sent(3, Some(102), 0);
        assert!(!sessions.wants_resend(3));
        assert_eq!(sessions.next_resend_ms(), None);
        assert!(sessions.take_answer(3, 102));
        assert!(sessions.settle(3, 2, 11));
        assert!(!sessions.wants_resend(3));
        assert!(
            sessions.request(3, vec![], 0).is_empty(),
            "nothing outstanding"
        );
    }

    #[test]
    fn a_superseded_answer_is_delivered_where_its_fetch_still_waits() {
        let mut sessions = FetchSessions::default();
        sessions.request(3, vec![(1, fetch(10, 5)), (2, fetch(11, 7))], 0);
        sessions.sent(3, Some(100), 0);
        // Partition 3's core asks (a new leader learned, say) before 100's answer is back.
        sessions.request(3, vec![(3, fetch(12, 0))], 0);
        sessions.sent(3, Some(101), 0);
        // 100's answer carries 1 and 2: their fetches still wait, so it is theirs. Dropping it
        // left a follower whose cores kept asking faster than the round trip unanswered.
        assert!(!sessions.take_answer(3, 100));
        assert!(sessions.settle(3, 1, 10));
        assert!(sessions.settle(3, 2, 11));
        // Partition 1's core fetches on from its new offset before 101's answer is back.
        sessions.request(3, vec![(1, fetch(13, 9))], 0);
        sessions.sent(3, Some(102), 0);
        // 101 carried 1's old fetch, 2's settled one and 3's: only 3's part is delivered.
        assert!(!sessions.take_answer(3, 101));
        assert!(!sessions.settle(3, 1, 10), "1 asked anew since");
        assert!(!sessions.settle(3, 2, 11), "2 was answered already");
        assert!(sessions.settle(3, 3, 12));
        assert!(sessions.take_answer(3, 102));
        assert!(sessions.settle(3, 1, 13));
        assert!(
            sessions.request(3, vec![], 0).is_empty(),
            "nothing outstanding"
        );
    }

    #[test]
    fn a_third_wire_fetch_waits_for_one_of_two_in_flight_to_be_answered() {
        let mut sessions = FetchSessions::default();
        let first = sessions.request(3, vec![(1, fetch(10, 5))], 0);
        assert_eq!(first.len(), 1);
        sessions.sent(3, Some(100), 0);
        let second = sessions.request(3, vec![(2, fetch(11, 7))], 0);
        assert_eq!(second.len(), 2, "supersedes the first");
        sessions.sent(3, Some(101), 0);
        assert!(!sessions.held_may_leave(3));
        // Two are out: partition 4's fetch is held, nothing is sent.
        assert!(sessions.request(3, vec![(4, fetch(12, 0))], 0).is_empty());
        assert!(!sessions.held_may_leave(3), "still two out");
        // The first (superseded, answered at once by the leader) comes back: the held fetch
        // leaves now, with every outstanding one.
        assert!(!sessions.take_answer(3, 100));
        assert!(sessions.held_may_leave(3));
        let third = sessions.request(3, vec![], 0);
        assert_eq!(
            third.iter().map(|(p, _)| *p).collect::<Vec<_>>(),
            vec![1, 2, 4]
        );
        sessions.sent(3, Some(102), 0);
        assert!(!sessions.held_may_leave(3));
        // A lane's failure counts as an answer too.
        assert!(!sessions.take_answer(3, 101));
        assert!(sessions.take_answer(3, 102));
        assert!(!sessions.held_may_leave(3), "nothing held");
    }

    #[test]
    fn a_wire_fetch_unanswered_for_long_no_longer_holds_the_next() {
        let mut sessions = FetchSessions::default();
        sessions.request(3, vec![(1, fetch(10, 5))], 1_000);
        sessions.sent(3, Some(100), 1_000);
        sessions.request(3, vec![(2, fetch(11, 7))], 1_000);
        sessions.sent(3, Some(101), 1_000);
        // Neither is ever answered, nor does their lane fail.
        let at = 1_000 + UNANSWERED_AFTER_MS;
        assert!(
            sessions
                .request(3, vec![(4, fetch(12, 0))], at - 1)
                .is_empty()
        );
        let list = sessions.request(3, vec![], at);
        assert_eq!(
            list.iter().map(|(p, _)| *p).collect::<Vec<_>>(),
            vec![1, 2, 4]
        );
    }

    #[test]
    fn an_answer_from_a_former_leader_is_not_delivered() {
        let mut sessions = FetchSessions::default();
        sessions.request(2, vec![(1, fetch(10, 5))], 0);
        sessions.sent(2, Some(1), 0);
        sessions.request(3, vec![(1, fetch(10, 5))], 0);
        sessions.sent(3, Some(2), 0);
        assert!(sessions.take_answer(2, 1));
        assert!(!sessions.settle(2, 1, 10), "1 fetches from 3 now");
        assert!(sessions.settle(3, 1, 10));
    }

    #[test]
    fn a_partition_that_fetches_from_a_new_leader_leaves_the_old_session() {
        let mut sessions = FetchSessions::default();
        sessions.request(2, vec![(1, fetch(10, 5)), (7, fetch(11, 5))], 0);
        sessions.sent(2, Some(1), 0);
        sessions.request(3, vec![(1, fetch(12, 5))], 0);
        let to_old = sessions.request(2, vec![], 0);
        assert_eq!(to_old.iter().map(|(p, _)| *p).collect::<Vec<_>>(), vec![7]);
    }

    #[test]
    fn a_fetch_that_could_not_be_queued_leaves_nothing_outstanding() {
        let mut sessions = FetchSessions::default();
        sessions.request(2, vec![(1, fetch(10, 5))], 0);
        sessions.sent(2, None, 0);
        assert!(!sessions.wants_resend(2));
        assert!(sessions.request(2, vec![], 0).is_empty());
        assert!(sessions.take_answer(2, 5));
    }

    #[test]
    fn a_forgotten_partition_leaves_every_session_and_the_idle_set() {
        let mut sessions = FetchSessions::default();
        sessions.request(2, vec![(1, fetch(10, 5)), (7, fetch(11, 5))], 0);
        sessions.sent(2, Some(1), 0);
        sessions.note_answer(7, true);
        sessions.forget(7);
        assert!(!sessions.is_idle(7), "an id used again starts unanswered");
        let next = sessions.request(2, vec![], 0);
        assert_eq!(next.iter().map(|(p, _)| *p).collect::<Vec<_>>(), vec![1]);
    }

    #[test]
    fn a_partition_is_idle_while_its_latest_answer_carried_no_records() {
        let mut sessions = FetchSessions::default();
        assert!(!sessions.is_idle(7), "never answered: not idle");
        sessions.note_answer(7, true);
        assert!(sessions.is_idle(7));
        sessions.note_answer(7, false);
        assert!(!sessions.is_idle(7));
    }
}
