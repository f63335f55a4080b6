//! A blocking batching producer: records for a partition gather in one RecordBatch until it
//! reaches `batch.size` bytes or its first record has waited `linger.ms`; then one Produce
//! request per leader carries every ready batch of that leader.
//!
//! Retries: a batch answered NOT_LEADER_OR_FOLLOWER (or LEADER_NOT_AVAILABLE,
//! NOT_ENOUGH_REPLICAS, REQUEST_TIMED_OUT, UNKNOWN_TOPIC_OR_PARTITION, a lost connection) is
//! sent again, as the same bytes, to the leader a fresh Metadata names, up to `retries` times
//! `retry.backoff.ms` apart. Without idempotence (not done here) a retry after a lost answer
//! can store a batch twice, as with Kafka's non-idempotent producer.
//!
//! Single-threaded: the caller drives the clock. `send` sends what is due; a caller waiting
//! for input should wake at [`Producer::next_due`] and call [`Producer::send_due`].

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use bytes::Bytes;
use ringlog_engine::batch::RecordBatchBuilder;

use super::TopicPartition;
use super::transport::{
    Connections, LeaderAndEpoch, PRODUCE_VERSION, Target, Transport, fetch_metadata,
};
use crate::client::ClientError;
use crate::protocol::{ErrorCode, Request, Response, produce_request};

#[derive(Clone, Debug)]
pub struct ProducerConfig {
    /// 0, 1 or -1 (all).
    pub acks: i16,
    pub linger_ms: u64,
    pub batch_size_bytes: usize,
    pub retries: u32,
    pub retry_backoff_ms: u64,
    pub request_timeout_ms: u64,
}

impl Default for ProducerConfig {
    fn default() -> ProducerConfig {
        ProducerConfig {
            acks: -1,
            linger_ms: 5,
            batch_size_bytes: 16 * 1024,
            retries: 10,
            retry_backoff_ms: 100,
            request_timeout_ms: 30_000,
        }
    }
}

/// Where a record landed. `offset` is -1 with acks=0 (nobody answers).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordMetadata {
    pub partition: TopicPartition,
    pub offset: i64,
}

#[derive(Debug, thiserror::Error)]
pub enum ProducerError {
    #[error("{partition}: {error} after {attempts} attempts")]
    Partition {
        partition: TopicPartition,
        error: ErrorCode,
        attempts: u32,
    },
    #[error("{partition}: no leader after {attempts} attempts: {reason}")]
    NoLeader {
        partition: TopicPartition,
        attempts: u32,
        reason: String,
    },
    #[error(transparent)]
    Client(#[from] ClientError),
}

struct Pending {
    builder: RecordBatchBuilder,
    first_at: Instant,
}

/// A built batch on its way, with how often it was tried.
struct InFlight {
    partition: TopicPartition,
    records: Bytes,
    records_count: i32,
    attempts: u32,
}

pub struct Producer<T: Transport = Connections> {
    transport: T,
    config: ProducerConfig,
    leaders: HashMap<TopicPartition, LeaderAndEpoch>,
    pending: BTreeMap<TopicPartition, Pending>,
    acknowledged: Vec<RecordMetadata>,
}

impl Producer<Connections> {
    pub fn connect(bootstrap: &str, config: ProducerConfig) -> Producer<Connections> {
        let timeout = Duration::from_millis(config.request_timeout_ms.min(10_000));
        Producer::with_transport(Connections::new(bootstrap, timeout), config)
    }
}

impl<T: Transport> Producer<T> {
    pub fn with_transport(transport: T, config: ProducerConfig) -> Producer<T> {
        Producer {
            transport,
            config,
            leaders: HashMap::new(),
            pending: BTreeMap::new(),
            acknowledged: Vec::new(),
        }
    }

    /// Adds one record to its partition's batch; sends that batch if it is full, and any
    /// batch whose linger has passed.
    pub fn send(
        &mut self,
        partition: &TopicPartition,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
    ) -> Result<(), ProducerError> {
        let now = Instant::now();
        let pending = self
            .pending
            .entry(partition.clone())
            .or_insert_with(|| Pending {
                builder: RecordBatchBuilder::new(0),
                first_at: now,
            });
        pending.builder.append(wall_clock_ms(), key, value, &[]);
        if pending.builder.size_bytes() >= self.config.batch_size_bytes {
            self.send_partitions(vec![partition.clone()])?;
        }
        self.send_due()
    }

    /// When the oldest waiting batch is due.
    pub fn next_due(&self) -> Option<Instant> {
        self.pending
            .values()
            .map(|p| p.first_at + Duration::from_millis(self.config.linger_ms))
            .min()
    }

    /// Sends every batch whose first record waited `linger.ms`.
    pub fn send_due(&mut self) -> Result<(), ProducerError> {
        let linger = Duration::from_millis(self.config.linger_ms);
        let due: Vec<TopicPartition> = self
            .pending
            .iter()
            .filter(|(_, p)| p.first_at.elapsed() >= linger)
            .map(|(tp, _)| tp.clone())
            .collect();
        if due.is_empty() {
            return Ok(());
        }
        self.send_partitions(due)
    }

    /// Sends everything waiting, lingering or not.
    pub fn flush(&mut self) -> Result<(), ProducerError> {
        let all: Vec<TopicPartition> = self.pending.keys().cloned().collect();
        self.send_partitions(all)
    }

    /// Records acknowledged since the last call, in the order they were acknowledged.
    pub fn take_acknowledged(&mut self) -> Vec<RecordMetadata> {
        std::mem::take(&mut self.acknowledged)
    }

    fn send_partitions(&mut self, partitions: Vec<TopicPartition>) -> Result<(), ProducerError> {
        let mut batches: Vec<InFlight> = Vec::new();
        for tp in partitions {
            if let Some(pending) = self.pending.remove(&tp) {
                let records_count = pending.builder.records_count();
                batches.push(InFlight {
                    partition: tp,
                    records: pending.builder.build().into_bytes(),
                    records_count,
                    attempts: 0,
                });
            }
        }
        while !batches.is_empty() {
            let missing = batches.iter().any(|b| {
                self.leaders
                    .get(&b.partition)
                    .is_none_or(|l| l.leader_id.is_none())
            });
            if missing && let Err(error) = self.refresh_metadata(&batches) {
                tracing::debug!(%error, "metadata refresh failed");
            }
            let mut by_leader: BTreeMap<i32, Vec<InFlight>> = BTreeMap::new();
            let mut retry = Vec::new();
            for mut batch in batches {
                match self.leaders.get(&batch.partition).and_then(|l| l.leader_id) {
                    Some(leader) => by_leader.entry(leader).or_default().push(batch),
                    None => {
                        batch.attempts += 1;
                        if batch.attempts > self.config.retries {
                            return Err(ProducerError::NoLeader {
                                partition: batch.partition,
                                attempts: batch.attempts,
                                reason: "Metadata names none".into(),
                            });
                        }
                        retry.push(batch);
                    }
                }
            }
            for (leader, group) in by_leader {
                retry.extend(self.produce_to(leader, group)?);
            }
            if !retry.is_empty() {
                std::thread::sleep(Duration::from_millis(self.config.retry_backoff_ms));
            }
            batches = retry;
        }
        Ok(())
    }

    fn refresh_metadata(&mut self, batches: &[InFlight]) -> Result<(), ClientError> {
        let mut topics: Vec<String> = batches.iter().map(|b| b.partition.topic.clone()).collect();
        topics.sort();
        topics.dedup();
        let metadata = fetch_metadata(&mut self.transport, &topics)?;
        self.leaders = metadata.partitions;
        Ok(())
    }

    /// One Produce request to `leader`; returns the batches to try again.
    fn produce_to(
        &mut self,
        leader: i32,
        group: Vec<InFlight>,
    ) -> Result<Vec<InFlight>, ProducerError> {
        let mut topic_data: Vec<produce_request::TopicProduceData> = Vec::new();
        for batch in &group {
            let data = produce_request::PartitionProduceData {
                index: batch.partition.partition,
                records: Some(batch.records.clone()),
            };
            match topic_data
                .iter_mut()
                .find(|t| t.name == batch.partition.topic)
            {
                Some(t) => t.partition_data.push(data),
                None => topic_data.push(produce_request::TopicProduceData {
                    name: batch.partition.topic.clone(),
                    partition_data: vec![data],
                    ..Default::default()
                }),
            }
        }
        let request = Request::Produce(produce_request::ProduceRequest {
            acks: self.config.acks,
            timeout_ms: self.config.request_timeout_ms.min(i32::MAX as u64) as i32,
            topic_data,
            ..Default::default()
        });
        if self.config.acks == 0 {
            match self
                .transport
                .send(Target::Node(leader), &request, PRODUCE_VERSION)
            {
                Ok(()) => {
                    for batch in group {
                        self.acknowledge(&batch, -1);
                    }
                    return Ok(Vec::new());
                }
                Err(error) => return self.retry_all(group, ErrorCode::NetworkException, &error),
            }
        }
        let response = match self
            .transport
            .request(Target::Node(leader), &request, PRODUCE_VERSION)
        {
            Ok(Response::Produce(response)) => response,
            Ok(_) => return Err(ClientError::Protocol("not a Produce answer".into()).into()),
            Err(error) => return self.retry_all(group, ErrorCode::NetworkException, &error),
        };
        let mut retry = Vec::new();
        for mut batch in group {
            let answer = response
                .responses
                .iter()
                .filter(|t| t.name == batch.partition.topic)
                .flat_map(|t| t.partition_responses.iter())
                .find(|p| p.index == batch.partition.partition);
            let Some(answer) = answer else {
                return Err(ClientError::Protocol(format!(
                    "Produce answer without {}",
                    batch.partition
                ))
                .into());
            };
            let error =
                ErrorCode::from_code(answer.error_code).unwrap_or(ErrorCode::UnknownServerError);
            match error {
                ErrorCode::None => self.acknowledge(&batch, answer.base_offset),
                // KAFKA_STORAGE_ERROR: the leader's replica went offline (issue 17) or waits
                // for disk space; another replica may lead by now. Retriable in Kafka too
                // (KafkaStorageException is an InvalidMetadataException: refresh, retry).
                ErrorCode::KafkaStorageError
                | ErrorCode::NotLeaderOrFollower
                | ErrorCode::LeaderNotAvailable
                | ErrorCode::NotEnoughReplicas
                | ErrorCode::NotEnoughReplicasAfterAppend
                | ErrorCode::RequestTimedOut
                | ErrorCode::UnknownTopicOrPartition => {
                    batch.attempts += 1;
                    self.leaders.remove(&batch.partition);
                    if batch.attempts > self.config.retries {
                        return Err(ProducerError::Partition {
                            partition: batch.partition,
                            error,
                            attempts: batch.attempts,
                        });
                    }
                    tracing::debug!(partition = %batch.partition, %error, "retrying at the new leader");
                    retry.push(batch);
                }
                other => {
                    return Err(ProducerError::Partition {
                        partition: batch.partition,
                        error: other,
                        attempts: batch.attempts + 1,
                    });
                }
            }
        }
        Ok(retry)
    }

    fn retry_all(
        &mut self,
        group: Vec<InFlight>,
        code: ErrorCode,
        error: &ClientError,
    ) -> Result<Vec<InFlight>, ProducerError> {
        tracing::debug!(%error, "produce failed: finding the leader again");
        let mut retry = Vec::new();
        for mut batch in group {
            batch.attempts += 1;
            self.leaders.remove(&batch.partition);
            if batch.attempts > self.config.retries {
                return Err(ProducerError::Partition {
                    partition: batch.partition,
                    error: code,
                    attempts: batch.attempts,
                });
            }
            retry.push(batch);
        }
        Ok(retry)
    }

    fn acknowledge(&mut self, batch: &InFlight, base_offset: i64) {
        for i in 0..batch.records_count as i64 {
            self.acknowledged.push(RecordMetadata {
                partition: batch.partition.clone(),
                offset: if base_offset < 0 { -1 } else { base_offset + i },
            });
        }
    }
}

fn wall_clock_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}
