//! Produce (acks 0, 1 and all): each partition's batches are validated, checked against the
//! idempotent producers' state (idempotence.rs) and appended; an acks=1 answer waits for its
//! records to be durable here, an acks=all answer for the high-watermark to pass them
//! ([`Produces`]' waiters).
//!
//! The node drives a request through its partitions ([`ProduceCall`]): after each append it
//! delivers the host's output (the followers' parked fetches answered, the producer state
//! following the batches) before the next partition is looked at, and the request is answered
//! only after that, with no copy of the records and no timer on the way.

use std::collections::{BTreeSet, HashMap};

use ringlog_replication::host::HostError;
use ringlog_replication::{PartitionId, RaftError};

use super::super::NodeError;
use super::super::authorize::Requester;
use super::super::context::Cx;
use super::super::idempotence::{Producers, SequenceOutcome};
use super::super::metadata::{PartitionLookup, metadata_brokers};
use super::super::observe::StallWatch;
use super::super::produce_validation::{
    keyless_records, recompress_batches, validate_produce_records,
};
use super::super::topics::is_internal_topic;
use super::super::transport::Responder;
use crate::protocol::wire::Uuid;
use crate::protocol::{
    ApiKey, ErrorCode, RequestHeader, Response, encode_response, produce_request, produce_response,
};

/// Produce requests waiting for durability or the high-watermark.
#[derive(Default)]
pub(in crate::node) struct Produces {
    pending: HashMap<u64, PendingProduce>,
    next_id: u64,
    waiters: Vec<Waiter>,
}

struct PendingProduce {
    responder: Responder,
    correlation_id: i32,
    version: i16,
    topics: Vec<(String, Uuid, Vec<ProduceAnswer>)>,
    deadline_ms: u64,
}

#[derive(Clone)]
struct ProduceAnswer {
    index: i32,
    answer: Option<(ErrorCode, i64, Option<String>)>,
    /// Produce v8+'s RecordErrors: the records that made an INVALID_RECORD answer, by index.
    record_errors: Vec<produce_response::BatchIndexAndErrorMessage>,
}

/// A produced batch range waiting for acks=1 (durable locally) or acks=all (committed).
struct Waiter {
    produce: u64,
    topic: usize,
    part: usize,
    partition: PartitionId,
    base_offset: u64,
    last_offset: u64,
    acks_all: bool,
    leader_epoch: u32,
}

/// What a Produce partition's checks read besides the [`Cx`]: the idempotent producers'
/// state, the stall watch (which times a read of that state from the log), the topic image
/// and the partitions taken offline, the node's `message.max.bytes` in force
/// (broker_configs.rs) and whether the node is shutting down.
pub(in crate::node) struct ProduceEnv<'a> {
    pub(in crate::node) producers: &'a mut Producers,
    pub(in crate::node) stall: &'a mut StallWatch,
    pub(in crate::node) lookup: PartitionLookup<'a>,
    pub(in crate::node) message_max_bytes: u32,
    pub(in crate::node) shutting_down: bool,
}

/// One Produce request while the node drives it through its partitions: `next_partition`
/// until it returns false, `delivered` after each append it reports, then
/// [`Produces::finish`].
pub(in crate::node) struct ProduceCall {
    id: u64,
    responder: Responder,
    correlation_id: i32,
    version: i16,
    requester: Requester,
    request: produce_request::ProduceRequest,
    topics: Vec<(String, Uuid, Vec<ProduceAnswer>)>,
    waiters: Vec<Waiter>,
    /// The next partition to look at: (topic index, partition index).
    next: (usize, usize),
    /// The partition appended last, until the node delivered the host's output.
    appended: Option<Appended>,
}

/// An appended partition's answer in the making and where its records landed.
struct Appended {
    topic: usize,
    part: usize,
    answer: ProduceAnswer,
    partition: PartitionId,
    base_offset: u64,
    last_offset: u64,
    leader_epoch: u32,
}

/// How a partition's look ended when it was not refused.
enum Step {
    /// A retried batch already in the log: answered with its offsets, nothing appended.
    Duplicate {
        partition: PartitionId,
        base_offset: u64,
        last_offset: u64,
        leader_epoch: u32,
    },
    Appended {
        partition: PartitionId,
        base_offset: u64,
        last_offset: u64,
        leader_epoch: u32,
    },
}

impl Produces {
    pub(in crate::node) fn next_deadline_ms(&self) -> u64 {
        self.pending
            .values()
            .map(|p| p.deadline_ms)
            .min()
            .unwrap_or(u64::MAX)
    }

    /// A Produce request arrives: the node drives it with the call returned.
    pub(in crate::node) fn begin(
        &mut self,
        responder: Responder,
        header: &RequestHeader,
        request: produce_request::ProduceRequest,
    ) -> ProduceCall {
        let id = self.next_id;
        self.next_id += 1;
        ProduceCall {
            id,
            requester: responder.requester(),
            responder,
            correlation_id: header.correlation_id,
            version: header.api_version,
            request,
            topics: Vec::new(),
            waiters: Vec::new(),
            next: (0, 0),
            appended: None,
        }
    }

    /// Every partition of `call` was looked at. With acks=0 it is done: Kafka sends no
    /// response, the slot is freed so later answers flow. Otherwise it waits for its waiters;
    /// the node checks them (`Node::check_waiters`) and then answers it if it is complete
    /// ([`Produces::maybe_complete`] with the id returned).
    pub(in crate::node) fn finish(&mut self, call: ProduceCall, now_ms: u64) -> Option<u64> {
        if call.request.acks == 0 {
            call.responder.send(None);
            return None;
        }
        self.waiters.extend(call.waiters);
        let timeout_ms = u64::try_from(call.request.timeout_ms).unwrap_or(0).max(1);
        self.pending.insert(
            call.id,
            PendingProduce {
                responder: call.responder,
                correlation_id: call.correlation_id,
                version: call.version,
                topics: call.topics,
                deadline_ms: now_ms + timeout_ms,
            },
        );
        Some(call.id)
    }

    /// Answers the produce waiters whose records are durable (acks=1) or committed (acks=all),
    /// and fails those whose leader lost its epoch: records appended in a lost epoch may be
    /// replaced, so the high-watermark passing their offsets proves nothing about them.
    pub(in crate::node) fn check_waiters(
        &mut self,
        cx: &Cx,
        stall: &mut StallWatch,
    ) -> Result<(), NodeError> {
        let began = std::time::Instant::now();
        let mut touched = Vec::new();
        let mut index = 0;
        while index < self.waiters.len() {
            let w = &self.waiters[index];
            // A partition taken offline meanwhile: storage_faults.rs answers its waiters.
            let (Some(raft), Some(store)) = (cx.host.raft(w.partition), cx.host.store(w.partition))
            else {
                index += 1;
                continue;
            };
            let outcome = if !raft.is_leader() || raft.epoch() != w.leader_epoch {
                Some(ErrorCode::NotLeaderOrFollower)
            } else if (w.acks_all && store.high_watermark > w.last_offset)
                || (!w.acks_all && store.log.durable_end_offset() as u64 > w.last_offset)
            {
                Some(ErrorCode::None)
            } else {
                None
            };
            match outcome {
                None => index += 1,
                Some(code) => {
                    let w = self.waiters.swap_remove(index);
                    let base = if code == ErrorCode::None {
                        w.base_offset as i64
                    } else {
                        -1
                    };
                    if let Some(p) = self.pending.get_mut(&w.produce) {
                        p.topics[w.topic].2[w.part].answer = Some((code, base, None));
                    }
                    touched.push(w.produce);
                }
            }
        }
        stall.part(began, "pump: produce waiters");
        let began = std::time::Instant::now();
        for id in touched {
            self.maybe_complete(cx, id)?;
        }
        stall.part(began, "pump: produce responses");
        Ok(())
    }

    /// Answers produce request `id` if every partition of it has its answer.
    pub(in crate::node) fn maybe_complete(&mut self, cx: &Cx, id: u64) -> Result<(), NodeError> {
        let done = self.pending.get(&id).is_some_and(|p| {
            p.topics
                .iter()
                .all(|(_, _, parts)| parts.iter().all(|a| a.answer.is_some()))
        });
        if done {
            let p = self.pending.remove(&id).expect("checked");
            send_produce_response(cx, p)?;
        }
        Ok(())
    }

    /// Produce requests past their timeout are answered (the partitions still waiting with
    /// REQUEST_TIMED_OUT).
    pub(in crate::node) fn expire(&mut self, cx: &Cx, now: u64) {
        let expired: Vec<u64> = self
            .pending
            .iter()
            .filter(|(_, p)| p.deadline_ms <= now)
            .map(|(id, _)| *id)
            .collect();
        for id in expired {
            self.waiters.retain(|w| w.produce != id);
            let p = self.pending.remove(&id).expect("listed");
            if let Err(error) = send_produce_response(cx, p) {
                tracing::warn!(%error, "answering an expired produce");
            }
        }
    }

    /// Fails the produce waiters of one partition (its topic is being deleted, topics.rs).
    pub(in crate::node) fn fail_partition(
        &mut self,
        cx: &Cx,
        partition: PartitionId,
        code: ErrorCode,
    ) -> Result<(), NodeError> {
        let (failed, kept) = std::mem::take(&mut self.waiters)
            .into_iter()
            .partition(|w| w.partition == partition);
        self.waiters = kept;
        let mut touched = Vec::new();
        for w in failed {
            if let Some(p) = self.pending.get_mut(&w.produce) {
                p.topics[w.topic].2[w.part]
                    .answer
                    .get_or_insert((code, -1, None));
            }
            touched.push(w.produce);
        }
        for id in touched {
            self.maybe_complete(cx, id)?;
        }
        Ok(())
    }

    /// Shutdown: every waiting produce is answered now, its waiting partitions with `code`.
    pub(in crate::node) fn fail_all(&mut self, cx: &Cx, code: ErrorCode) -> Result<(), NodeError> {
        let waiters = std::mem::take(&mut self.waiters);
        for w in waiters {
            if let Some(p) = self.pending.get_mut(&w.produce) {
                p.topics[w.topic].2[w.part]
                    .answer
                    .get_or_insert((code, -1, None));
            }
        }
        let ids: Vec<u64> = self.pending.keys().copied().collect();
        for id in ids {
            self.maybe_complete(cx, id)?;
        }
        Ok(())
    }
}

impl ProduceCall {
    /// Looks at the request's partitions in order until one is appended (true: the node
    /// delivers the host's output, then calls [`ProduceCall::delivered`]) or none is left
    /// (false).
    pub(in crate::node) fn next_partition(&mut self, cx: &mut Cx, env: &mut ProduceEnv) -> bool {
        while let Some((topic_index, part_index)) = self.advance() {
            let topic = &self.request.topic_data[topic_index];
            let data = &topic.partition_data[part_index];
            let mut answer = ProduceAnswer {
                index: data.index,
                answer: None,
                record_errors: Vec::new(),
            };
            let step = produce_partition(
                cx,
                env,
                &self.requester,
                self.request.acks,
                topic,
                data,
                &mut answer,
            );
            match step {
                Ok(Step::Duplicate {
                    partition,
                    base_offset,
                    last_offset,
                    leader_epoch,
                }) => {
                    if self.request.acks == 0 {
                        answer.answer = Some((ErrorCode::None, base_offset as i64, None));
                    } else {
                        self.waiters.push(Waiter {
                            produce: self.id,
                            topic: topic_index,
                            part: part_index,
                            partition,
                            base_offset,
                            last_offset,
                            acks_all: self.request.acks == -1,
                            leader_epoch,
                        });
                    }
                }
                Ok(Step::Appended {
                    partition,
                    base_offset,
                    last_offset,
                    leader_epoch,
                }) => {
                    self.appended = Some(Appended {
                        topic: topic_index,
                        part: part_index,
                        answer,
                        partition,
                        base_offset,
                        last_offset,
                        leader_epoch,
                    });
                    return true;
                }
                Err((code, message)) => answer.answer = Some((code, -1, message)),
            }
            self.topics[topic_index].2.push(answer);
        }
        false
    }

    /// The host's output after the last append was delivered (`result`: how that went): the
    /// partition is answered (acks=0) or waits for its records.
    pub(in crate::node) fn delivered(&mut self, result: Result<(), NodeError>) {
        let Some(mut a) = self.appended.take() else {
            return;
        };
        match result {
            Err(e) => {
                a.answer.answer = Some((ErrorCode::KafkaStorageError, -1, Some(e.to_string())))
            }
            Ok(()) if self.request.acks == 0 => {
                a.answer.answer = Some((ErrorCode::None, a.base_offset as i64, None));
            }
            Ok(()) => self.waiters.push(Waiter {
                produce: self.id,
                topic: a.topic,
                part: a.part,
                partition: a.partition,
                base_offset: a.base_offset,
                last_offset: a.last_offset,
                acks_all: self.request.acks == -1,
                leader_epoch: a.leader_epoch,
            }),
        }
        self.topics[a.topic].2.push(a.answer);
    }

    /// The next (topic, partition) to look at; every topic gets its entry in the answer, one
    /// without partitions too.
    fn advance(&mut self) -> Option<(usize, usize)> {
        loop {
            let (topic_index, part_index) = self.next;
            let topic = self.request.topic_data.get(topic_index)?;
            if self.topics.len() == topic_index {
                self.topics
                    .push((topic.name.clone(), topic.topic_id, Vec::new()));
            }
            if part_index < topic.partition_data.len() {
                self.next = (topic_index, part_index + 1);
                return Some((topic_index, part_index));
            }
            self.next = (topic_index + 1, 0);
        }
    }
}

/// One Produce partition: refused, found a duplicate, or appended (the host's output not
/// delivered yet). `answer` gets the record errors of a compacted topic's keyless records.
fn produce_partition(
    cx: &mut Cx,
    env: &mut ProduceEnv,
    requester: &Requester,
    acks: i16,
    topic: &produce_request::TopicProduceData,
    data: &produce_request::PartitionProduceData,
    answer: &mut ProduceAnswer,
) -> Result<Step, (ErrorCode, Option<String>)> {
    if !matches!(acks, -1..=1) {
        return Err((ErrorCode::InvalidRequiredAcks, None));
    }
    if !cx
        .authorizer()
        .allowed(requester, ApiKey::Produce, &topic.name)
    {
        return Err((ErrorCode::TopicAuthorizationFailed, None));
    }
    // Internal state is written only by the node: a topic record produced to
    // `__cluster_metadata` would create, replace or delete a topic on every node, past
    // CreateTopics and DeleteTopics.
    if is_internal_topic(&topic.name) {
        let message = format!("Cannot append to internal topic {}", topic.name);
        return Err((ErrorCode::InvalidTopicException, Some(message)));
    }
    let Some(partition) = cx.table.find(&topic.name, data.index) else {
        return Err((env.lookup.absent_error(&topic.name, data.index), None));
    };
    // Internal state is written by the node only (docs/groups.md).
    if topic.name == crate::groups::offsets::OFFSETS_TOPIC {
        return Err((
            ErrorCode::InvalidTopicException,
            Some("__consumer_offsets is written by the group coordinator only".into()),
        ));
    }
    if env.shutting_down {
        return Err((ErrorCode::NotLeaderOrFollower, None));
    }
    // Out of disk space: nothing more is appended until a retried flush gets through
    // (storage_faults.rs); reads and other partitions go on.
    if cx.host.waiting_for_space(partition) {
        let message = format!(
            "{}-{} is waiting for disk space (ENOSPC)",
            topic.name, data.index
        );
        return Err((ErrorCode::KafkaStorageError, Some(message)));
    }
    let lookup = env.lookup;
    let topic_config = lookup.topics.topic_config(cx.table, partition);
    let max_batch_bytes =
        lookup
            .topics
            .produce_max_batch_bytes(cx.host, cx.table, env.message_max_bytes, partition);
    let batches = validate_produce_records(data.records.as_ref(), max_batch_bytes)
        .map_err(|(code, message)| (code, Some(message)))?;
    // Kafka's rule for a compacted topic: no record without a key. The whole Produce
    // partition is refused, the keyless records named (librdkafka fails those with
    // INVALID_RECORD and the others with _INVALID_DIFFERENT_RECORD).
    if topic_config.is_some_and(|c| c.cleanup_policy.requires_keys()) {
        let keyless = keyless_records(&batches).map_err(|(code, message)| (code, Some(message)))?;
        if !keyless.is_empty() {
            let message = format!(
                "Compacted topic cannot accept message without key in topic partition {}-{}.",
                topic.name, data.index
            );
            answer.record_errors = keyless
                .iter()
                .map(|&batch_index| produce_response::BatchIndexAndErrorMessage {
                    batch_index,
                    batch_index_error_message: Some(message.clone()),
                })
                .collect();
            let summary = format!(
                "One or more records have been rejected due to {} record errors in total",
                keyless.len()
            );
            return Err((ErrorCode::InvalidRecord, Some(summary)));
        }
    }
    // The topic's `compression.type`: batches stored in its codec.
    let codec = topic_config.and_then(|c| c.compression_type.codec());
    let batches = recompress_batches(batches, codec, max_batch_bytes)
        .map_err(|(code, message)| (code, Some(message)))?;
    let leading = cx.host.raft(partition).is_some_and(|r| r.is_leader());
    if leading {
        match env
            .producers
            .check_sequences(cx.host, env.stall, partition, &batches)
            .map_err(|e| (ErrorCode::KafkaStorageError, Some(e.to_string())))?
        {
            SequenceOutcome::Append => {}
            SequenceOutcome::Duplicate {
                base_offset,
                last_offset,
            } => {
                let raft = cx.host.raft(partition).expect("hosted");
                return Ok(Step::Duplicate {
                    partition,
                    base_offset,
                    last_offset,
                    leader_epoch: raft.epoch(),
                });
            }
            SequenceOutcome::Refused(code) => return Err((code, None)),
        }
    }
    match cx.host.append(cx.now_ms, partition, batches) {
        Ok(appended) => Ok(Step::Appended {
            partition,
            base_offset: appended.base_offset,
            last_offset: appended.last_offset,
            leader_epoch: appended.leader_epoch,
        }),
        Err(HostError::Raft(RaftError::NotLeader { .. })) => {
            Err((ErrorCode::NotLeaderOrFollower, None))
        }
        Err(HostError::Raft(error)) => Err((ErrorCode::InvalidRecord, Some(error.to_string()))),
        Err(HostError::Storage(error)) => {
            Err((ErrorCode::KafkaStorageError, Some(error.to_string())))
        }
    }
}

fn send_produce_response(cx: &Cx, p: PendingProduce) -> Result<(), NodeError> {
    let mut leaders_named = BTreeSet::new();
    let responses = p
        .topics
        .into_iter()
        .map(
            |(name, topic_id, parts)| produce_response::TopicProduceResponse {
                partition_responses: parts
                    .into_iter()
                    .map(|a| {
                        let (code, base_offset, message) =
                            a.answer.unwrap_or((ErrorCode::RequestTimedOut, -1, None));
                        // KIP-951: a partition refused because this node does not lead it
                        // names the leader it knows, so the client redirects without a
                        // metadata round trip. (Until 2026-12-02 this named the metadata
                        // partition's leader, whatever the topic: a client sent its retry to
                        // the wrong node.)
                        let redirect = matches!(
                            code,
                            ErrorCode::NotLeaderOrFollower | ErrorCode::FencedLeaderEpoch
                        );
                        let partition = if name.is_empty() {
                            cx.table.find_by_id(topic_id, a.index)
                        } else {
                            cx.table.find(&name, a.index)
                        };
                        let leader = partition
                            .filter(|_| redirect)
                            .and_then(|id| cx.host.raft(id))
                            .map(|r| r.leader_and_epoch());
                        if let Some(id) = leader.and_then(|l| l.leader_id) {
                            leaders_named.insert(id);
                        }
                        produce_response::PartitionProduceResponse {
                            index: a.index,
                            error_code: code.code(),
                            base_offset,
                            log_start_offset: 0,
                            error_message: message,
                            record_errors: a.record_errors,
                            current_leader: produce_response::LeaderIdAndEpoch {
                                leader_id: leader.and_then(|l| l.leader_id).unwrap_or(-1),
                                leader_epoch: leader.map_or(-1, |l| l.leader_epoch as i32),
                            },
                            ..Default::default()
                        }
                    })
                    .collect(),
                name,
                topic_id,
            },
        )
        .collect();
    // KIP-951: the endpoints of the leaders named above.
    let node_endpoints = metadata_brokers(cx.config, cx.metadata_raft())
        .into_iter()
        .filter(|b| leaders_named.contains(&b.node_id))
        .map(|b| produce_response::NodeEndpoint {
            node_id: b.node_id,
            host: b.host,
            port: b.port,
            rack: b.rack,
        })
        .collect();
    let response = Response::Produce(produce_response::ProduceResponse {
        responses,
        node_endpoints,
        ..Default::default()
    });
    let frame = encode_response(p.correlation_id, p.version, &response)?;
    p.responder.send(Some(frame));
    Ok(())
}
