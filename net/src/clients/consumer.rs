//! A blocking KIP-320 consumer: `assign`, `seek`, `poll`, and truncation detection.
//!
//! Every partition's position is an offset plus the leader epoch of the record before it (the
//! "offset epoch": the epoch of the last batch this consumer returned or stepped over), and the
//! consumer remembers which leader epoch it last validated that position against. Each Fetch
//! (v12) carries both: `CurrentLeaderEpoch` = the leader epoch Metadata reported (so a stale
//! leader fences us, FENCED_LEADER_EPOCH, or a stale us is told UNKNOWN_LEADER_EPOCH) and
//! `LastFetchedEpoch` = the offset epoch (so the leader answers `DivergingEpoch` when its log
//! no longer holds our position in that epoch).
//!
//! KIP-320, "Consumer Handling": the position is validated with OffsetForLeaderEpoch(offset
//! epoch) whenever
//!
//! | event | then |
//! | --- | --- |
//! | Metadata shows a new leader epoch | validate |
//! | Fetch answers FENCED_LEADER_EPOCH | refresh Metadata, validate |
//! | Fetch answers UNKNOWN_LEADER_EPOCH, NOT_LEADER_OR_FOLLOWER, a lost connection | refresh Metadata (validate if the epoch moved) |
//! | Fetch answers a DivergingEpoch | validate |
//!
//! and the validation's answer (end offset E of the largest leader epoch ≤ the offset epoch):
//!
//! | answer | then |
//! | --- | --- |
//! | E ≥ position | valid: fetch on |
//! | E < position, `auto.offset.reset` earliest or latest | move to E (the divergence point) |
//! | E < position, `auto.offset.reset` none | `poll` returns [`ConsumerError::LogTruncation`] with E; the position stays and the offset epoch is dropped, so fetching goes on from there |
//! | undefined (no such epoch) | reset by policy, or [`ConsumerError::OffsetOutOfRange`] |
//!
//! [`Consumer::seek_to_nearest`] is KIP-320's `seekToNearest`: the same validation, always
//! moving to E when the log was truncated.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use bytes::Bytes;
use ringlog_engine::batch::{BatchError, BatchIter};

use super::TopicPartition;
use super::transport::{
    Connections, FETCH_VERSION, LIST_OFFSETS_VERSION, LeaderAndEpoch,
    OFFSET_FOR_LEADER_EPOCH_VERSION, Target, Transport, fetch_metadata,
};
use crate::client::ClientError;
use crate::protocol::wire::Records;
use crate::protocol::{
    ErrorCode, Request, Response, fetch_request, fetch_response, list_offsets_request,
    offset_for_leader_epoch_request,
};

mod fetching;

/// `auto.offset.reset`: what to do without a valid position.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OffsetReset {
    Earliest,
    Latest,
    /// Kafka's `none` (librdkafka's `error`): report instead of moving.
    None,
}

impl std::str::FromStr for OffsetReset {
    type Err = String;
    fn from_str(text: &str) -> Result<OffsetReset, String> {
        match text {
            "earliest" | "smallest" | "beginning" => Ok(OffsetReset::Earliest),
            "latest" | "largest" | "end" => Ok(OffsetReset::Latest),
            "none" | "error" => Ok(OffsetReset::None),
            other => Err(format!(
                "auto.offset.reset {other:?}: expected earliest, latest or none"
            )),
        }
    }
}

/// Kafka's consumer settings that this consumer honours, with Kafka's defaults.
#[derive(Clone, Debug)]
pub struct ConsumerConfig {
    pub auto_offset_reset: OffsetReset,
    pub fetch_max_wait_ms: i32,
    pub fetch_min_bytes: i32,
    pub fetch_max_bytes: i32,
    pub max_partition_fetch_bytes: i32,
    pub retry_backoff_ms: u64,
    pub metadata_max_age_ms: u64,
    /// How long `seek_to_nearest` may take.
    pub default_api_timeout_ms: u64,
    pub request_timeout_ms: u64,
}

impl Default for ConsumerConfig {
    fn default() -> ConsumerConfig {
        ConsumerConfig {
            auto_offset_reset: OffsetReset::Latest,
            fetch_max_wait_ms: 500,
            fetch_min_bytes: 1,
            fetch_max_bytes: 50 * 1024 * 1024,
            max_partition_fetch_bytes: 1024 * 1024,
            retry_backoff_ms: 100,
            metadata_max_age_ms: 300_000,
            default_api_timeout_ms: 60_000,
            request_timeout_ms: 30_000,
        }
    }
}

/// One record as `poll` returns it, with the leader epoch of its batch (KIP-320's
/// `ConsumerRecord.leaderEpoch()`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConsumerRecord {
    pub partition: TopicPartition,
    pub offset: i64,
    pub leader_epoch: i32,
    pub timestamp: i64,
    pub key: Option<Bytes>,
    pub value: Option<Bytes>,
}

#[derive(Debug, thiserror::Error)]
pub enum ConsumerError {
    /// KIP-320's LogTruncationException: records this consumer returned at or after
    /// `divergence_offset` are no longer in the leader's log.
    #[error(
        "log truncation detected on {partition}: the log diverged at offset {divergence_offset}"
    )]
    LogTruncation {
        partition: TopicPartition,
        divergence_offset: i64,
    },
    #[error("{partition}: offset {offset} is out of range and auto.offset.reset is none")]
    OffsetOutOfRange {
        partition: TopicPartition,
        offset: i64,
    },
    #[error("{partition}: no position to fetch from and auto.offset.reset is none")]
    NoOffset { partition: TopicPartition },
    #[error("{partition} is not assigned to this consumer")]
    NotAssigned { partition: TopicPartition },
    #[error("{partition}: {error}")]
    Partition {
        partition: TopicPartition,
        error: ErrorCode,
    },
    #[error("{partition}: undecodable records at offset {offset}: {source}")]
    Records {
        partition: TopicPartition,
        offset: i64,
        source: BatchError,
    },
    /// A full-state read (`read_full_state`) got a snapshot that does not validate (CRC,
    /// structure, header and footer) or that its size and chunks do not add up to.
    #[error("{partition}: fetched snapshot: {source}")]
    Snapshot {
        partition: TopicPartition,
        source: ringlog_engine::snapshot::SnapshotError,
    },
    /// A full-state read got FetchSnapshot chunks that do not add up to one snapshot.
    #[error("{partition}: fetching snapshot {snapshot_id:?}: {reason}")]
    SnapshotTransfer {
        partition: TopicPartition,
        snapshot_id: ringlog_engine::snapshot::SnapshotId,
        reason: String,
    },
    /// A full-state read got a valid snapshot the key-value state machine cannot load (another
    /// format, a record without key).
    #[error("{partition}: loading the fetched snapshot: {source}")]
    StateMachine {
        partition: TopicPartition,
        source: ringlog_replication::state_machine::StateMachineError,
    },
    /// A full-state read found the log starting above 0 and no snapshot to start from (a
    /// `cleanup.policy=delete` topic whose retention removed the log's beginning).
    #[error("{partition}: the log starts at {log_start_offset} and the leader names no snapshot")]
    NoSnapshot {
        partition: TopicPartition,
        log_start_offset: i64,
    },
    /// A consumer group request answered with an error the member cannot recover from by
    /// rejoining or retrying (or, for OffsetCommit, a generation that moved on: the
    /// positions may belong to another member now, Kafka's CommitFailedException).
    #[error("group {group_id}: {api}: {error}")]
    Group {
        group_id: String,
        api: &'static str,
        error: ErrorCode,
    },
    #[error("timed out: {0}")]
    Timeout(String),
    #[error(transparent)]
    Client(#[from] ClientError),
}

/// A fetch position: the next offset and the leader epoch of the record before it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FetchPosition {
    pub offset: i64,
    /// `None` after a plain `seek` or a reset: the leader skips the LastFetchedEpoch check.
    pub offset_epoch: Option<i32>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Validation {
    /// Fetch on.
    Done,
    /// Ask OffsetForLeaderEpoch before the next fetch (`nearest`: seekToNearest semantics).
    Awaiting { nearest: bool },
}

#[derive(Clone, Debug)]
pub(super) struct PartitionState {
    /// `None`: reset by policy before fetching.
    pub(super) position: Option<FetchPosition>,
    pub(super) validation: Validation,
    /// The leader Metadata last reported.
    leader: Option<LeaderAndEpoch>,
    /// The high-watermark of the latest Fetch answer without error (for the full-state read).
    pub(super) high_watermark: Option<i64>,
}

pub struct Consumer<T: Transport = Connections> {
    pub(super) transport: T,
    pub(super) config: ConsumerConfig,
    assignment: BTreeMap<TopicPartition, PartitionState>,
    pub(super) metadata_stale: bool,
    metadata_refreshed_at: Option<Instant>,
    /// When a failed Metadata request was last logged: a consumer whose nodes are all down
    /// says so every `TROUBLE_LOG_INTERVAL`, as Kafka's clients warn, instead of waiting
    /// silently.
    trouble_logged_at: Option<Instant>,
}

/// How often a consumer that cannot get Metadata logs it.
const TROUBLE_LOG_INTERVAL: Duration = Duration::from_secs(5);

impl Consumer<Connections> {
    /// A consumer of the nodes behind `bootstrap` (comma-separated host:port).
    pub fn connect(bootstrap: &str, config: ConsumerConfig) -> Consumer<Connections> {
        let timeout = Duration::from_millis(config.request_timeout_ms.min(10_000));
        Consumer::with_transport(Connections::new(bootstrap, timeout), config)
    }
}

impl<T: Transport> Consumer<T> {
    pub fn with_transport(transport: T, config: ConsumerConfig) -> Consumer<T> {
        Consumer {
            transport,
            config,
            assignment: BTreeMap::new(),
            metadata_stale: true,
            metadata_refreshed_at: None,
            trouble_logged_at: None,
        }
    }

    /// Replaces the assignment. Partitions kept keep their position.
    pub fn assign(&mut self, partitions: impl IntoIterator<Item = TopicPartition>) {
        let mut next = BTreeMap::new();
        for tp in partitions {
            let state = self.assignment.remove(&tp).unwrap_or(PartitionState {
                position: None,
                validation: Validation::Done,
                leader: None,
                high_watermark: None,
            });
            next.insert(tp, state);
        }
        self.assignment = next;
        self.metadata_stale = true;
    }

    pub fn assignment(&self) -> Vec<TopicPartition> {
        self.assignment.keys().cloned().collect()
    }

    /// Fetch from `offset` next, with no epoch to check it against (KIP-320: a seek sends
    /// LastFetchedEpoch -1).
    pub fn seek(&mut self, partition: &TopicPartition, offset: i64) -> Result<(), ConsumerError> {
        let state = self.state_mut(partition)?;
        state.position = Some(FetchPosition {
            offset,
            offset_epoch: None,
        });
        state.validation = Validation::Done;
        Ok(())
    }

    /// Fetch from `offset`, known to follow a record of `leader_epoch`; the position is
    /// validated before the first fetch and a truncation is handled as `poll` would.
    pub fn seek_with_epoch(
        &mut self,
        partition: &TopicPartition,
        offset: i64,
        leader_epoch: i32,
    ) -> Result<(), ConsumerError> {
        let state = self.state_mut(partition)?;
        state.position = Some(FetchPosition {
            offset,
            offset_epoch: Some(leader_epoch),
        });
        state.validation = Validation::Awaiting { nearest: false };
        Ok(())
    }

    /// The log start (or end) offset next time `poll` runs.
    pub fn seek_to_beginning(&mut self, partition: &TopicPartition) -> Result<(), ConsumerError> {
        self.seek(partition, -2)
    }

    pub fn seek_to_end(&mut self, partition: &TopicPartition) -> Result<(), ConsumerError> {
        self.seek(partition, -1)
    }

    /// KIP-320's `seekToNearest(partition, offset, leader_epoch)`: "If the offset still exists
    /// and has the same leader epoch, then this will set the position to that offset.
    /// Otherwise, if the log has been truncated (e.g. due to unclean leader election), then the
    /// offset will be the first offset of the next largest leader epoch." Asks the leader
    /// (OffsetForLeaderEpoch) before it returns the position it chose.
    pub fn seek_to_nearest(
        &mut self,
        partition: &TopicPartition,
        offset: i64,
        leader_epoch: i32,
    ) -> Result<i64, ConsumerError> {
        let state = self.state_mut(partition)?;
        state.position = Some(FetchPosition {
            offset,
            offset_epoch: Some(leader_epoch),
        });
        state.validation = Validation::Awaiting { nearest: true };
        let deadline = Instant::now() + Duration::from_millis(self.config.default_api_timeout_ms);
        loop {
            let transient = self.prepare()?;
            let state = self.state_mut(partition)?;
            if state.validation == Validation::Done
                && let Some(position) = state.position
            {
                return Ok(position.offset);
            }
            if Instant::now() >= deadline {
                return Err(ConsumerError::Timeout(format!(
                    "seek_to_nearest({partition}, {offset}, {leader_epoch}): {}",
                    transient.map_or("no answer".to_string(), |e| e.to_string())
                )));
            }
            self.backoff(deadline);
        }
    }

    /// The next offset `poll` fetches (`None` until reset).
    pub fn position(&self, partition: &TopicPartition) -> Option<i64> {
        self.assignment
            .get(partition)
            .and_then(|s| s.position)
            .filter(|p| p.offset >= 0)
            .map(|p| p.offset)
    }

    /// The position with its offset epoch.
    pub fn fetch_position(&self, partition: &TopicPartition) -> Option<FetchPosition> {
        self.assignment.get(partition).and_then(|s| s.position)
    }

    /// Fetches until some records arrive or `timeout` passes. Transient trouble (a lost
    /// leader, a stale epoch) is retried inside; a truncation without reset policy, an
    /// out-of-range offset without policy or an unknown error is returned.
    pub fn poll(&mut self, timeout: Duration) -> Result<Vec<ConsumerRecord>, ConsumerError> {
        let deadline = Instant::now() + timeout;
        loop {
            let transient = self.prepare()?;
            let (records, fetch_trouble) = self.fetch_once(deadline)?;
            if !records.is_empty() {
                return Ok(records);
            }
            if Instant::now() >= deadline {
                return Ok(Vec::new());
            }
            if transient.is_some() || fetch_trouble {
                self.backoff(deadline);
            }
        }
    }

    pub(super) fn state_mut(
        &mut self,
        partition: &TopicPartition,
    ) -> Result<&mut PartitionState, ConsumerError> {
        self.assignment
            .get_mut(partition)
            .ok_or_else(|| ConsumerError::NotAssigned {
                partition: partition.clone(),
            })
    }

    /// Logs that `what` could not be had from any node, at most every
    /// `TROUBLE_LOG_INTERVAL` (the request is retried, quietly otherwise).
    pub(super) fn log_trouble(&mut self, what: &str, error: &dyn std::fmt::Display) {
        if self
            .trouble_logged_at
            .is_none_or(|at| at.elapsed() >= TROUBLE_LOG_INTERVAL)
        {
            self.trouble_logged_at = Some(Instant::now());
            tracing::warn!(%error, "no {what} answer from the cluster; retrying");
        }
    }

    pub(super) fn backoff(&self, deadline: Instant) {
        let pause = Duration::from_millis(self.config.retry_backoff_ms)
            .min(deadline.saturating_duration_since(Instant::now()));
        std::thread::sleep(pause);
    }

    /// Metadata, resets and validations: everything before a fetch. Returns the transient
    /// error that kept some partition from being ready, if any.
    pub(super) fn prepare(&mut self) -> Result<Option<ClientError>, ConsumerError> {
        let mut transient = None;
        let too_old = self.metadata_refreshed_at.is_none_or(|at| {
            at.elapsed() >= Duration::from_millis(self.config.metadata_max_age_ms)
        });
        let leaderless = self
            .assignment
            .values()
            .any(|s| s.leader.is_none_or(|l| l.leader_id.is_none()));
        if (self.metadata_stale || too_old || leaderless)
            && let Err(error) = self.refresh_metadata()
        {
            self.log_trouble("Metadata", &error);
            transient = Some(error);
        }
        if let Some(error) = self.reset_positions()? {
            transient = Some(error);
        }
        if let Some(error) = self.validate_positions()? {
            transient = Some(error);
        }
        Ok(transient)
    }

    /// KIP-320: a leader epoch that moved makes a position with a known epoch suspect.
    fn refresh_metadata(&mut self) -> Result<(), ClientError> {
        let mut topics: Vec<String> = self.assignment.keys().map(|tp| tp.topic.clone()).collect();
        topics.dedup();
        if topics.is_empty() {
            return Ok(());
        }
        let metadata = fetch_metadata(&mut self.transport, &topics)?;
        self.metadata_stale = false;
        self.metadata_refreshed_at = Some(Instant::now());
        for (tp, state) in &mut self.assignment {
            let Some(now) = metadata.partitions.get(tp).copied() else {
                state.leader = None;
                continue;
            };
            let epoch_moved = state
                .leader
                .is_some_and(|before| before.leader_epoch != now.leader_epoch);
            if epoch_moved
                && state.validation == Validation::Done
                && state.position.is_some_and(|p| p.offset_epoch.is_some())
            {
                tracing::debug!(partition = %tp, ?now, "leader epoch changed: validating the position");
                state.validation = Validation::Awaiting { nearest: false };
            }
            state.leader = Some(now);
        }
        Ok(())
    }

    pub(super) fn leader_of(&self, tp: &TopicPartition) -> Option<LeaderAndEpoch> {
        self.assignment
            .get(tp)
            .and_then(|s| s.leader)
            .filter(|l| l.leader_id.is_some())
    }

    /// Partitions without a position (or with the -1/-2 seek markers) ask ListOffsets.
    fn reset_positions(&mut self) -> Result<Option<ClientError>, ConsumerError> {
        let mut transient = None;
        let needing: Vec<(TopicPartition, i64)> = self
            .assignment
            .iter()
            .filter_map(|(tp, s)| match s.position {
                None => Some((tp.clone(), 0)),
                Some(p) if p.offset < 0 => Some((tp.clone(), p.offset)),
                Some(_) => None,
            })
            .collect();
        for (tp, marker) in needing {
            let timestamp = match (marker, self.config.auto_offset_reset) {
                (-2, _) | (0, OffsetReset::Earliest) => -2,
                (-1, _) | (0, OffsetReset::Latest) => -1,
                _ => return Err(ConsumerError::NoOffset { partition: tp }),
            };
            let Some(leader) = self.leader_of(&tp) else {
                continue;
            };
            match self.list_offset(&tp, leader, timestamp) {
                Ok(Ok(offset)) => {
                    let state = self.state_mut(&tp)?;
                    state.position = Some(FetchPosition {
                        offset,
                        offset_epoch: None,
                    });
                    state.validation = Validation::Done;
                }
                Ok(Err(error)) => {
                    self.metadata_stale = true;
                    transient = Some(ClientError::Protocol(format!("ListOffsets {tp}: {error}")));
                }
                Err(error) => {
                    self.metadata_stale = true;
                    transient = Some(error);
                }
            }
        }
        Ok(transient)
    }

    fn list_offset(
        &mut self,
        tp: &TopicPartition,
        leader: LeaderAndEpoch,
        timestamp: i64,
    ) -> Result<Result<i64, ErrorCode>, ClientError> {
        let request = Request::ListOffsets(list_offsets_request::ListOffsetsRequest {
            replica_id: -1,
            isolation_level: 0,
            topics: vec![list_offsets_request::ListOffsetsTopic {
                name: tp.topic.clone(),
                partitions: vec![list_offsets_request::ListOffsetsPartition {
                    partition_index: tp.partition,
                    current_leader_epoch: leader.leader_epoch,
                    timestamp,
                }],
            }],
            ..Default::default()
        });
        let target = Target::Node(leader.leader_id.expect("leader_of filters"));
        let Response::ListOffsets(response) =
            self.transport
                .request(target, &request, LIST_OFFSETS_VERSION)?
        else {
            return Err(ClientError::Protocol("not a ListOffsets answer".into()));
        };
        let answer = response
            .topics
            .iter()
            .filter(|t| t.name == tp.topic)
            .flat_map(|t| t.partitions.iter())
            .find(|p| p.partition_index == tp.partition)
            .ok_or_else(|| ClientError::Protocol(format!("ListOffsets answer without {tp}")))?;
        let error =
            ErrorCode::from_code(answer.error_code).unwrap_or(ErrorCode::UnknownServerError);
        if !error.is_none() {
            return Ok(Err(error));
        }
        Ok(Ok(answer.offset))
    }

    /// OffsetForLeaderEpoch for every partition awaiting validation (see the module table).
    fn validate_positions(&mut self) -> Result<Option<ClientError>, ConsumerError> {
        let mut transient = None;
        let awaiting: Vec<TopicPartition> = self
            .assignment
            .iter()
            .filter(|(_, s)| matches!(s.validation, Validation::Awaiting { .. }))
            .map(|(tp, _)| tp.clone())
            .collect();
        for tp in awaiting {
            let state = self.state_mut(&tp)?.clone();
            let Validation::Awaiting { nearest } = state.validation else {
                continue;
            };
            let Some(position) = state.position.filter(|p| p.offset >= 0) else {
                // Nothing to validate: the reset gives a fresh position.
                self.state_mut(&tp)?.validation = Validation::Done;
                continue;
            };
            let Some(offset_epoch) = position.offset_epoch else {
                self.state_mut(&tp)?.validation = Validation::Done;
                continue;
            };
            let Some(leader) = self.leader_of(&tp) else {
                continue;
            };
            let answer = match self.offset_for_leader_epoch(&tp, leader, offset_epoch) {
                Ok(answer) => answer,
                Err(error) => {
                    self.metadata_stale = true;
                    transient = Some(error);
                    continue;
                }
            };
            let (end_epoch, end_offset) = match answer {
                Ok(end) => end,
                Err(error) => {
                    // FENCED / UNKNOWN_LEADER_EPOCH / NOT_LEADER: our view is stale or theirs
                    // is; find the leader again and ask again.
                    self.metadata_stale = true;
                    transient = Some(ClientError::Protocol(format!(
                        "OffsetForLeaderEpoch {tp}: {error}"
                    )));
                    continue;
                }
            };
            let policy = self.config.auto_offset_reset;
            let state = self.state_mut(&tp)?;
            if end_epoch < 0 || end_offset < 0 {
                // The leader knows no epoch ≤ ours: nothing to compare with.
                state.validation = Validation::Done;
                if policy == OffsetReset::None && !nearest {
                    state.position = Some(FetchPosition {
                        offset: position.offset,
                        offset_epoch: None,
                    });
                    return Err(ConsumerError::OffsetOutOfRange {
                        partition: tp,
                        offset: position.offset,
                    });
                }
                state.position = None;
                continue;
            }
            state.validation = Validation::Done;
            if end_offset >= position.offset {
                tracing::debug!(partition = %tp, ?position, end_epoch, end_offset, "position validated");
                continue;
            }
            // KIP-320: the log was truncated below our position; `end_offset` is where it
            // diverged from what we read.
            tracing::warn!(partition = %tp, ?position, end_epoch, end_offset, "log truncation detected");
            if nearest || policy != OffsetReset::None {
                state.position = Some(FetchPosition {
                    offset: end_offset,
                    offset_epoch: Some(end_epoch),
                });
                continue;
            }
            // Reported once; if the caller fetches on, it does so without the epoch check.
            state.position = Some(FetchPosition {
                offset: position.offset,
                offset_epoch: None,
            });
            return Err(ConsumerError::LogTruncation {
                partition: tp,
                divergence_offset: end_offset,
            });
        }
        Ok(transient)
    }

    /// `Ok(Ok((end epoch, end offset)))`, `Ok(Err(code))` for a partition error.
    fn offset_for_leader_epoch(
        &mut self,
        tp: &TopicPartition,
        leader: LeaderAndEpoch,
        leader_epoch: i32,
    ) -> Result<Result<(i32, i64), ErrorCode>, ClientError> {
        use offset_for_leader_epoch_request as r;
        let request = Request::OffsetForLeaderEpoch(r::OffsetForLeaderEpochRequest {
            // -1: a consumer (-2 is a debugging tool, ids ≥ 0 are replicas).
            replica_id: -1,
            topics: vec![r::OffsetForLeaderTopic {
                topic: tp.topic.clone(),
                partitions: vec![r::OffsetForLeaderPartition {
                    partition: tp.partition,
                    current_leader_epoch: leader.leader_epoch,
                    leader_epoch,
                }],
            }],
        });
        let target = Target::Node(leader.leader_id.expect("leader_of filters"));
        let Response::OffsetForLeaderEpoch(response) =
            self.transport
                .request(target, &request, OFFSET_FOR_LEADER_EPOCH_VERSION)?
        else {
            return Err(ClientError::Protocol(
                "not an OffsetForLeaderEpoch answer".into(),
            ));
        };
        let answer = response
            .topics
            .iter()
            .filter(|t| t.topic == tp.topic)
            .flat_map(|t| t.partitions.iter())
            .find(|p| p.partition == tp.partition)
            .ok_or_else(|| {
                ClientError::Protocol(format!("OffsetForLeaderEpoch answer without {tp}"))
            })?;
        let error =
            ErrorCode::from_code(answer.error_code).unwrap_or(ErrorCode::UnknownServerError);
        if !error.is_none() {
            return Ok(Err(error));
        }
        Ok(Ok((answer.leader_epoch, answer.end_offset)))
    }

    /// The transport, for tests that need to reach behind the consumer.
    pub fn transport_mut(&mut self) -> &mut T {
        &mut self.transport
    }
}
