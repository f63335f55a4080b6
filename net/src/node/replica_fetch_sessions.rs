//! A leader's fetch sessions with its replicas (KIP-227): an incremental replica Fetch names
//! only the partitions whose fetch changed since the replica's previous Fetch; the session's
//! other partitions ask what they asked.
//!
//! A follower's every wire Fetch to a leader carries every partition it fetches there
//! (fetch_sessions.rs); with a hundred partitions most of them are parked at the leader, asked
//! again unchanged each round, so each round encoded, sent, decoded and looked up dozens of
//! partitions to learn nothing. The session remembers each partition's last ask (the wire
//! partition as the replica sent it); [`ReplicaFetchSessions::take`] checks a request's
//! session and epoch and takes its changes. The node steps only the partitions a Fetch names;
//! the session's other parked fetches are carried by the replica's newest Fetch, their answers
//! joining it when they come (answer_slots.rs). Until 2026-12-07 the leader turned every
//! incremental request back into the full request it stands for, every partition of the
//! session looked up and registered per Fetch.
//!
//! Kafka's rules (`FetchSession.scala`, KIP-227's table), for Fetch v13+ (topic ids):
//! SessionId 0 and SessionEpoch -1, a sessionless full Fetch; SessionEpoch 0, a full Fetch that
//! opens a session (closing SessionId's, if any), its id in the response; SessionEpoch N > 0,
//! an incremental Fetch of session SessionId, whose epoch must be the previous one plus one,
//! else the whole Fetch is answered INVALID_FETCH_SESSION_EPOCH (or FETCH_SESSION_ID_NOT_FOUND
//! for a session the leader does not hold) and the replica starts over with a full Fetch.
//! Here a replica holds one session at most (a new full Fetch replaces it), a session forgets
//! a partition its leader does not host (the replica was answered UNKNOWN_TOPIC_OR_PARTITION
//! for it and stops asking), and at most [`MAX_SESSIONS`] are held, the oldest going first:
//! the memory a session holds is bounded by the partitions this node hosts.

use std::collections::{BTreeMap, HashMap};

use ringlog_replication::NodeId;

use super::convert::FetchSessionPlan;
use crate::metrics::{Counter, Gauge, MetricsRegistry};
use crate::protocol::ErrorCode;
use crate::protocol::fetch_request::{FetchPartition, FetchRequest, FetchTopic};
use crate::protocol::wire::Uuid;

/// Sessions held at once: one per replica of this node's partitions in any real quorum.
pub(super) const MAX_SESSIONS: usize = 1024;

/// The first Fetch version with topic ids, which sessions here are keyed by.
const MIN_SESSION_VERSION: i16 = 13;

#[derive(Default)]
pub(super) struct ReplicaFetchSessions {
    by_replica: HashMap<NodeId, Session>,
    last_id: i32,
    metrics: Option<SessionMetrics>,
}

/// Kafka's `FetchSessionCache` metrics (NumIncrementalFetchSessions,
/// NumIncrementalFetchPartitionsCached, IncrementalFetchSessionEvictionsPerSec as a total),
/// and the replica Fetches taken by kind.
struct SessionMetrics {
    sessions: Gauge,
    partitions_cached: Gauge,
    evictions: Counter,
    full: Counter,
    incremental: Counter,
    refused: Counter,
}

struct Session {
    id: i32,
    /// The epoch of the last Fetch taken in this session (0: the full one that opened it).
    epoch: i32,
    /// Each partition's last ask, by (topic id, partition index).
    parts: BTreeMap<(Uuid, i32), FetchPartition>,
}

impl ReplicaFetchSessions {
    /// Reports the sessions in `registry` (the node's metrics listener).
    pub(super) fn register_metrics(&mut self, registry: &MetricsRegistry) {
        const GROUP: &str = "kafka_server_fetch_session_cache_";
        let fetches = |kind| {
            registry.counter(
                "ringlog_replica_fetch_requests_total",
                "Replica Fetch requests taken by this node as a leader, by kind (KIP-227): full \
                 (sessionless, or opening a session), incremental, or refused (session unknown \
                 or epoch out of order).",
                &[("kind", kind)],
            )
        };
        self.metrics = Some(SessionMetrics {
            sessions: registry.gauge(
                &format!("{GROUP}num_incremental_fetch_sessions"),
                "Replica fetch sessions held (one per replica at most).",
                &[],
            ),
            partitions_cached: registry.gauge(
                &format!("{GROUP}num_incremental_fetch_partitions_cached"),
                "Partitions held in all replica fetch sessions.",
                &[],
            ),
            evictions: registry.counter(
                &format!("{GROUP}incremental_fetch_session_evictions_total"),
                "Sessions evicted to keep at most 1,024.",
                &[],
            ),
            full: fetches("full"),
            incremental: fetches("incremental"),
            refused: fetches("refused"),
        });
    }

    fn note(&self, taken: &Result<i32, ErrorCode>, incremental: bool) {
        let Some(m) = &self.metrics else {
            return;
        };
        match taken {
            Ok(_) if incremental => m.incremental.increment(1),
            Ok(_) => m.full.increment(1),
            Err(_) => m.refused.increment(1),
        }
        m.sessions.set(self.by_replica.len() as f64);
        let cached: usize = self.by_replica.values().map(|s| s.parts.len()).sum();
        m.partitions_cached.set(cached as f64);
    }

    /// Takes `request`, a replica's Fetch at `version`, into the replica's session:
    /// `Ok(session id)` to answer it with (0: sessionless, the request is the full one), or the
    /// error that answers the whole Fetch (the session unknown, or its epoch not the next).
    /// In a session, only the partitions the request names are stepped; the others ask what
    /// they asked (answer_slots.rs carries their parked fetches).
    pub(super) fn take(
        &mut self,
        replica: NodeId,
        version: i16,
        request: &FetchRequest,
    ) -> Result<i32, ErrorCode> {
        let taken = self.take_into_session(replica, version, request);
        self.note(&taken, request.session_epoch > 0);
        taken
    }

    fn take_into_session(
        &mut self,
        replica: NodeId,
        version: i16,
        request: &FetchRequest,
    ) -> Result<i32, ErrorCode> {
        let (id, epoch) = (request.session_id, request.session_epoch);
        if version < MIN_SESSION_VERSION {
            // Sessionless below v13 (a server may always decline one: KIP-227).
            return if epoch > 0 {
                Err(ErrorCode::FetchSessionIdNotFound)
            } else {
                Ok(0)
            };
        }
        match epoch {
            -1 => {
                if id != 0 {
                    self.close(replica, id);
                }
                Ok(0)
            }
            0 => Ok(self.open(replica, &request.topics)),
            epoch if epoch > 0 => {
                let Some(session) = self.by_replica.get_mut(&replica).filter(|s| s.id == id) else {
                    return Err(ErrorCode::FetchSessionIdNotFound);
                };
                if epoch != FetchSessionPlan::next_epoch(session.epoch) {
                    // Kafka keeps the session; the replica's next Fetch is a full one anyway.
                    self.by_replica.remove(&replica);
                    return Err(ErrorCode::InvalidFetchSessionEpoch);
                }
                session.epoch = epoch;
                for forgotten in &request.forgotten_topics_data {
                    for index in &forgotten.partitions {
                        session.parts.remove(&(forgotten.topic_id, *index));
                    }
                }
                session.parts.extend(keyed(&request.topics));
                Ok(id)
            }
            _ => Err(ErrorCode::InvalidFetchSessionEpoch),
        }
    }

    /// Session `id`'s partitions, each with its last ask: what the replica's latest Fetch in
    /// it stands for, by topic id and partition index (the tests check that this is what the
    /// follower has outstanding, which the carried fetches rely on).
    #[cfg(test)]
    fn parts(&self, replica: NodeId, id: i32) -> impl Iterator<Item = (Uuid, &FetchPartition)> {
        self.by_replica
            .get(&replica)
            .filter(|s| s.id == id)
            .into_iter()
            .flat_map(|s| s.parts.iter().map(|((topic_id, _), p)| (*topic_id, p)))
    }

    /// The request's parts this node does not host: the replica was answered
    /// UNKNOWN_TOPIC_OR_PARTITION for them and will not ask again, so the session lets them go.
    pub(super) fn forget_unknown(
        &mut self,
        replica: NodeId,
        id: i32,
        unknown: impl Iterator<Item = (Uuid, i32)>,
    ) {
        if let Some(session) = self.by_replica.get_mut(&replica).filter(|s| s.id == id) {
            for key in unknown {
                session.parts.remove(&key);
            }
        }
    }

    fn open(&mut self, replica: NodeId, topics: &[FetchTopic]) -> i32 {
        self.last_id = if self.last_id >= i32::MAX - 1 {
            1
        } else {
            self.last_id + 1
        };
        let id = self.last_id;
        let parts = keyed(topics).collect();
        let replaced = self.by_replica.insert(
            replica,
            Session {
                id,
                epoch: 0,
                parts,
            },
        );
        if replaced.is_none() && self.by_replica.len() > MAX_SESSIONS {
            // The oldest session other than this one (ids grow; a wrapped counter makes the
            // choice arbitrary, never wrong: an evicted replica starts over with a full Fetch).
            let oldest = self
                .by_replica
                .iter()
                .filter(|(r, _)| **r != replica)
                .min_by_key(|(_, s)| s.id)
                .map(|(r, _)| *r);
            if let Some(oldest) = oldest {
                self.by_replica.remove(&oldest);
                if let Some(m) = &self.metrics {
                    m.evictions.increment(1);
                }
            }
        }
        id
    }

    fn close(&mut self, replica: NodeId, id: i32) {
        if self.by_replica.get(&replica).is_some_and(|s| s.id == id) {
            self.by_replica.remove(&replica);
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.by_replica.len()
    }
}

/// A request's partitions keyed as a session holds them: (topic id, partition index).
fn keyed(topics: &[FetchTopic]) -> impl Iterator<Item = ((Uuid, i32), FetchPartition)> + '_ {
    topics.iter().flat_map(|t| {
        t.partitions
            .iter()
            .map(|p| ((t.topic_id, p.partition), p.clone()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::fetch_request::ForgottenTopic;

    const VERSION: i16 = 17;

    fn topic(n: u8) -> Uuid {
        Uuid([n; 16])
    }

    fn part(index: i32, fetch_offset: i64) -> FetchPartition {
        FetchPartition {
            partition: index,
            fetch_offset,
            ..Default::default()
        }
    }

    fn request(
        session_id: i32,
        session_epoch: i32,
        parts: &[(u8, i32, i64)],
        forgotten: &[(u8, i32)],
    ) -> FetchRequest {
        let mut topics: Vec<FetchTopic> = Vec::new();
        for &(t, index, offset) in parts {
            match topics.iter_mut().find(|x| x.topic_id == topic(t)) {
                Some(x) => x.partitions.push(part(index, offset)),
                None => topics.push(FetchTopic {
                    topic_id: topic(t),
                    partitions: vec![part(index, offset)],
                    ..Default::default()
                }),
            }
        }
        FetchRequest {
            session_id,
            session_epoch,
            topics,
            forgotten_topics_data: forgotten
                .iter()
                .map(|&(t, index)| ForgottenTopic {
                    topic_id: topic(t),
                    partitions: vec![index],
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
    }

    /// What `request`, taken into the session `id` of replica 2, stands for.
    fn asked(sessions: &ReplicaFetchSessions, id: i32) -> Vec<(u8, i32, i64)> {
        let mut out: Vec<_> = sessions
            .parts(2, id)
            .map(|(topic_id, p)| (topic_id.0[0], p.partition, p.fetch_offset))
            .collect();
        out.sort();
        out
    }

    #[test]
    fn an_incremental_fetch_stands_for_the_session_s_full_fetch() {
        let mut sessions = ReplicaFetchSessions::default();
        let full = request(0, 0, &[(1, 0, 10), (1, 1, 20), (2, 0, 30)], &[]);
        let id = sessions.take(2, VERSION, &full).unwrap();
        assert!(id > 0, "a full Fetch with epoch 0 opens a session");
        assert_eq!(asked(&sessions, id), [(1, 0, 10), (1, 1, 20), (2, 0, 30)]);

        // Partition 1-1 moved on, 2-0 is no longer fetched here, 2-1 is new; 1-0 is unchanged.
        let next = request(id, 1, &[(1, 1, 25), (2, 1, 5)], &[(2, 0)]);
        assert_eq!(sessions.take(2, VERSION, &next), Ok(id));
        assert_eq!(asked(&sessions, id), [(1, 0, 10), (1, 1, 25), (2, 1, 5)]);

        // Nothing changed: the Fetch names nothing and stands for all of them.
        assert_eq!(sessions.take(2, VERSION, &request(id, 2, &[], &[])), Ok(id));
        assert_eq!(asked(&sessions, id), [(1, 0, 10), (1, 1, 25), (2, 1, 5)]);
    }

    #[test]
    fn a_wrong_epoch_or_an_unknown_session_answers_the_whole_fetch() {
        let mut sessions = ReplicaFetchSessions::default();
        let id = sessions
            .take(2, VERSION, &request(0, 0, &[(1, 0, 10)], &[]))
            .unwrap();
        // Epoch 2 where 1 is next: refused, and the session is gone.
        assert_eq!(
            sessions.take(2, VERSION, &request(id, 2, &[], &[])),
            Err(ErrorCode::InvalidFetchSessionEpoch)
        );
        assert_eq!(
            sessions.take(2, VERSION, &request(id, 1, &[], &[])),
            Err(ErrorCode::FetchSessionIdNotFound)
        );
        // Another replica cannot use this replica's session.
        let id = sessions
            .take(2, VERSION, &request(0, 0, &[(1, 0, 10)], &[]))
            .unwrap();
        assert_eq!(
            sessions.take(3, VERSION, &request(id, 1, &[], &[])),
            Err(ErrorCode::FetchSessionIdNotFound)
        );
        assert_eq!(
            sessions.take(2, VERSION, &request(id, -2, &[], &[])),
            Err(ErrorCode::InvalidFetchSessionEpoch)
        );
    }

    #[test]
    fn a_new_full_fetch_replaces_the_replica_s_session() {
        let mut sessions = ReplicaFetchSessions::default();
        let first = sessions
            .take(2, VERSION, &request(0, 0, &[(1, 0, 10)], &[]))
            .unwrap();
        let second = sessions
            .take(2, VERSION, &request(0, 0, &[(1, 1, 7)], &[]))
            .unwrap();
        assert_ne!(first, second);
        assert_eq!(
            sessions.take(2, VERSION, &request(first, 1, &[], &[])),
            Err(ErrorCode::FetchSessionIdNotFound)
        );
        assert_eq!(
            sessions.take(2, VERSION, &request(second, 1, &[], &[])),
            Ok(second)
        );
        assert_eq!(asked(&sessions, second), [(1, 1, 7)]);
        // Sessionless: epoch -1 closes it and is answered with session id 0.
        assert_eq!(
            sessions.take(2, VERSION, &request(second, -1, &[(1, 1, 8)], &[])),
            Ok(0)
        );
        assert_eq!(sessions.len(), 0);
    }

    #[test]
    fn sessions_and_their_partitions_stay_bounded() {
        let mut sessions = ReplicaFetchSessions::default();
        for replica in 0..(MAX_SESSIONS as i32 + 10) {
            sessions
                .take(replica, VERSION, &request(0, 0, &[(1, 0, 1)], &[]))
                .unwrap();
        }
        assert_eq!(sessions.len(), MAX_SESSIONS);
        // The newest replica's session is held; the first ones went.
        let newest = MAX_SESSIONS as i32 + 9;
        assert_eq!(
            sessions.take(0, VERSION, &request(1, 1, &[], &[])),
            Err(ErrorCode::FetchSessionIdNotFound)
        );
        let id = sessions.by_replica[&newest].id;
        // A partition this node does not host leaves the session.
        sessions
            .take(newest, VERSION, &request(id, 1, &[(9, 3, 1)], &[]))
            .unwrap();
        sessions.forget_unknown(newest, id, [(topic(9), 3)].into_iter());
        sessions
            .take(newest, VERSION, &request(id, 2, &[], &[]))
            .unwrap();
        let left: Vec<_> = sessions
            .parts(newest, id)
            .map(|(t, p)| (t.0[0], p.partition))
            .collect();
        assert_eq!(left, [(1, 0)]);
    }

    /// The follower's side (fetch_sessions.rs) and the leader's, through the codec: under any
    /// sequence of cores asking, answers, partitions forgotten or moving to another leader,
    /// lost sessions and failed connections, after every incremental Fetch the follower sends
    /// the leader's session holds the full Fetch it stands for (every outstanding partition,
    /// each with its current ask), and no partition's ask is ever served stale: what the
    /// leader's carried fetches (answer_slots.rs) rely on.
    #[test]
    fn every_incremental_fetch_expands_to_the_full_fetch_it_stands_for() {
        use super::super::convert::{self, HostedPartition, PartitionTable, fetch_replica_id};
        use super::super::fetch_sessions::FetchSessions;
        use crate::protocol::{Request, RequestHeader, decode_request, encode_request};
        use ringlog_replication as core;

        let mut table = PartitionTable::metadata_only();
        let ids: Vec<_> = (0..12)
            .map(|i| {
                table.add(HostedPartition {
                    topic: format!("t{}", i % 3),
                    topic_id: Uuid([1 + (i % 3) as u8; 16]),
                    index: i / 3,
                })
            })
            .collect();
        let (leader, other_leader, replica) = (1, 2, 3);
        let mut follower = FetchSessions::default();
        let mut sessions = ReplicaFetchSessions::default();
        let mut rng = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = |n: u64| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng % n
        };
        let ask = |replica_id| core::FetchRequest {
            correlation_id: 0,
            replica_id,
            current_leader_epoch: 1,
            fetch_offset: 0,
            last_fetched_epoch: 1,
            max_bytes: 1 << 20,
            max_wait_ms: 500,
            replica_directory_id: [0; 16],
        };
        let mut correlation = 0u64;
        let mut offsets = vec![0u64; ids.len()];
        let mut wire_id = 0;
        let mut incremental = 0;
        for _ in 0..3000 {
            // Some cores ask (a new ask: a new correlation id, maybe a new offset).
            let mut asks = Vec::new();
            for (i, p) in ids.iter().enumerate() {
                if next(4) == 0 {
                    correlation += 1;
                    offsets[i] += next(3);
                    asks.push((
                        *p,
                        core::FetchRequest {
                            correlation_id: correlation,
                            fetch_offset: offsets[i],
                            ..ask(replica)
                        },
                    ));
                }
            }
            // Now and then a partition fetches from another leader, or stops.
            if next(10) == 0 {
                let p = ids[next(ids.len() as u64) as usize];
                correlation += 1;
                let moved = core::FetchRequest {
                    correlation_id: correlation,
                    ..asks
                        .first()
                        .map_or_else(|| ask(replica), |(_, f)| f.clone())
                };
                follower.request(other_leader, vec![(p, moved)], 0);
                asks.retain(|(q, _)| *q != p);
            }
            if next(20) == 0 {
                follower.forget(ids[next(ids.len() as u64) as usize]);
            }
            let list = follower.request(leader, asks, 0);
            if list.is_empty() {
                continue;
            }
            let plan = follower.plan(leader, &list, |p| {
                let hosted = table.get(p);
                (hosted.topic_id, hosted.index)
            });
            let hosted: Vec<_> = list
                .iter()
                .map(|(p, f)| (table.get(*p), f, false, 0))
                .collect();
            let request = convert::fetch_request_in_session("c", replica, &hosted, &plan);
            wire_id += 1;
            if next(50) == 0 {
                // The connection failed with it.
                follower.sent(leader, Some(wire_id), 0);
                follower.reset_wire(leader);
                follower.take_answer(leader, wire_id);
                for (p, f) in &list {
                    follower.settle(leader, *p, f.correlation_id);
                }
                continue;
            }
            follower.sent(leader, Some(wire_id), 0);
            if plan.session_id != 0 {
                incremental += 1;
            }
            let header = RequestHeader {
                api_key: 1,
                api_version: VERSION,
                correlation_id: wire_id,
                client_id: Some("t".into()),
            };
            let frame = encode_request(&header, &Request::Fetch(request)).unwrap();
            let Request::Fetch(decoded) = decode_request(frame.slice(4..)).unwrap().1 else {
                panic!("not a Fetch");
            };
            assert_eq!(fetch_replica_id(&decoded, VERSION), replica);
            if next(100) == 0 {
                // The leader lost every session (evicted).
                sessions = ReplicaFetchSessions::default();
            }
            match sessions.take(replica, VERSION, &decoded) {
                Ok(session_id) => {
                    assert_ne!(session_id, 0);
                    let mut served: Vec<_> = sessions
                        .parts(replica, session_id)
                        .map(|(topic_id, p)| (topic_id, p.partition, p.fetch_offset))
                        .collect();
                    served.sort();
                    let mut full: Vec<_> = list
                        .iter()
                        .map(|(p, f)| {
                            let hosted = table.get(*p);
                            (hosted.topic_id, hosted.index, f.fetch_offset as i64)
                        })
                        .collect();
                    full.sort();
                    assert_eq!(served, full, "plan {plan:?}");
                    follower.note_session(leader, wire_id, 0, session_id);
                    // The leader answers some of them.
                    follower.take_answer(leader, wire_id);
                    for (p, f) in &list {
                        if next(2) == 0 {
                            follower.settle(leader, *p, f.correlation_id);
                        }
                    }
                }
                Err(error) => {
                    follower.note_session(leader, wire_id, error.code(), 0);
                    follower.take_answer(leader, wire_id);
                }
            }
        }
        assert!(incremental > 1000, "{incremental} incremental Fetches");
    }

    #[test]
    fn before_topic_ids_fetches_are_sessionless() {
        let mut sessions = ReplicaFetchSessions::default();
        assert_eq!(
            sessions.take(2, 12, &request(0, 0, &[(1, 0, 1)], &[])),
            Ok(0)
        );
        assert_eq!(
            sessions.take(2, 12, &request(5, 1, &[], &[])),
            Err(ErrorCode::FetchSessionIdNotFound)
        );
        assert_eq!(sessions.len(), 0);
    }
}
