//! The consumer's KIP-320 decisions against a small in-process fake leader, for the cases a
//! real node cannot be made to serve on demand: a stale Metadata epoch (UNKNOWN_LEADER_EPOCH),
//! a leader change without truncation, a truncated log found by DivergingEpoch, and
//! `seek_to_nearest` into a log whose epochs we choose. The end-to-end story with real nodes
//! (`ringlog unclean-recover`) is `tests/kip320.rs`.
//!
//! The fake answers Metadata, ListOffsets, OffsetForLeaderEpoch and Fetch the way KIP-320 asks
//! a leader to: CurrentLeaderEpoch older → FENCED_LEADER_EPOCH, newer → UNKNOWN_LEADER_EPOCH;
//! a LastFetchedEpoch whose end offset in the leader's epoch cache lies below the fetch offset
//! (or names an epoch the cache does not hold) → DivergingEpoch; it records every request.

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use ringlog_engine::batch::RecordBatchBuilder;

use super::TopicPartition;
use super::consumer::{Consumer, ConsumerConfig, ConsumerError, FetchPosition, OffsetReset};
use super::transport::{Target, Transport};
use crate::client::ClientError;
use crate::protocol::wire::Records;
use crate::protocol::{
    ErrorCode, Request, Response, fetch_request, fetch_response, list_offsets_response,
    metadata_response, offset_for_leader_epoch_response,
};

const TOPIC: &str = "t";

/// One partition led by node 1: records as (leader epoch, value), offsets from 0.
struct FakeLeader {
    leader_epoch: i32,
    /// What Metadata reports (may lag or lead `leader_epoch`, like stale metadata).
    metadata_epoch: i32,
    log: Vec<(i32, String)>,
    fetches: Vec<fetch_request::FetchPartition>,
    validations: Vec<(i32, i32)>,
}

impl FakeLeader {
    fn new(leader_epoch: i32, log: &[(i32, &str)]) -> FakeLeader {
        FakeLeader {
            leader_epoch,
            metadata_epoch: leader_epoch,
            log: log.iter().map(|(e, v)| (*e, v.to_string())).collect(),
            fetches: Vec::new(),
            validations: Vec::new(),
        }
    }

    /// KIP-101/320: the end offset of the largest epoch ≤ `epoch` (the start of the next
    /// larger one, or the log end), with that epoch; (-1, -1) when none is ≤ `epoch`.
    fn end_offset_for_epoch(&self, epoch: i32) -> (i32, i64) {
        let Some(found) = self
            .log
            .iter()
            .map(|(e, _)| *e)
            .filter(|e| *e <= epoch)
            .max()
        else {
            return (-1, -1);
        };
        let end = self
            .log
            .iter()
            .position(|(e, _)| *e > found)
            .unwrap_or(self.log.len());
        (found, end as i64)
    }

    fn epoch_check(&self, current_leader_epoch: i32) -> ErrorCode {
        if current_leader_epoch < 0 || current_leader_epoch == self.leader_epoch {
            ErrorCode::None
        } else if current_leader_epoch < self.leader_epoch {
            ErrorCode::FencedLeaderEpoch
        } else {
            ErrorCode::UnknownLeaderEpoch
        }
    }

    fn records_from(&self, offset: i64) -> Bytes {
        let mut out = BytesMut::new();
        for (i, (epoch, value)) in self.log.iter().enumerate().skip(offset as usize) {
            let mut builder = RecordBatchBuilder::new(i as i64).with_leader_epoch(*epoch);
            builder.append(1_000 + i as i64, None, Some(value.as_bytes()), &[]);
            out.extend_from_slice(builder.build().as_bytes());
        }
        out.freeze()
    }

    fn fetch(&mut self, p: &fetch_request::FetchPartition) -> fetch_response::PartitionData {
        self.fetches.push(p.clone());
        let mut data = fetch_response::PartitionData {
            partition_index: p.partition,
            high_watermark: self.log.len() as i64,
            ..Default::default()
        };
        let error = self.epoch_check(p.current_leader_epoch);
        if !error.is_none() {
            data.error_code = error.code();
            return data;
        }
        if p.last_fetched_epoch >= 0 {
            let (epoch, end_offset) = self.end_offset_for_epoch(p.last_fetched_epoch);
            if epoch != p.last_fetched_epoch || end_offset < p.fetch_offset {
                data.diverging_epoch = fetch_response::EpochEndOffset { epoch, end_offset };
                return data;
            }
        }
        if p.fetch_offset > self.log.len() as i64 || p.fetch_offset < 0 {
            data.error_code = ErrorCode::OffsetOutOfRange.code();
            return data;
        }
        data.records = Some(Records::Bytes(self.records_from(p.fetch_offset)));
        data
    }
}

impl Transport for FakeLeader {
    fn request(
        &mut self,
        target: Target,
        request: &Request,
        _version: i16,
    ) -> Result<Response, ClientError> {
        assert!(
            matches!(target, Target::Any | Target::Node(1)),
            "only node 1 exists: {target:?}"
        );
        Ok(match request {
            Request::Metadata(_) => Response::Metadata(metadata_response::MetadataResponse {
                brokers: vec![metadata_response::MetadataResponseBroker {
                    node_id: 1,
                    host: "fake".into(),
                    port: 1,
                    ..Default::default()
                }],
                topics: vec![metadata_response::MetadataResponseTopic {
                    name: Some(TOPIC.into()),
                    partitions: vec![metadata_response::MetadataResponsePartition {
                        partition_index: 0,
                        leader_id: 1,
                        leader_epoch: self.metadata_epoch,
                        ..Default::default()
                    }],
                    ..Default::default()
                }],
                ..Default::default()
            }),
            Request::ListOffsets(r) => {
                let p = &r.topics[0].partitions[0];
                let offset = if p.timestamp == -2 {
                    0
                } else {
                    self.log.len() as i64
                };
                Response::ListOffsets(list_offsets_response::ListOffsetsResponse {
                    topics: vec![list_offsets_response::ListOffsetsTopicResponse {
                        name: TOPIC.into(),
                        partitions: vec![list_offsets_response::ListOffsetsPartitionResponse {
                            partition_index: 0,
                            error_code: self.epoch_check(p.current_leader_epoch).code(),
                            offset,
                            leader_epoch: self.leader_epoch,
                            ..Default::default()
                        }],
                    }],
                    ..Default::default()
                })
            }
            Request::OffsetForLeaderEpoch(r) => {
                let p = &r.topics[0].partitions[0];
                self.validations
                    .push((p.current_leader_epoch, p.leader_epoch));
                let error = self.epoch_check(p.current_leader_epoch);
                let (leader_epoch, end_offset) = if error.is_none() {
                    self.end_offset_for_epoch(p.leader_epoch)
                } else {
                    (-1, -1)
                };
                use offset_for_leader_epoch_response as o;
                Response::OffsetForLeaderEpoch(o::OffsetForLeaderEpochResponse {
                    topics: vec![o::OffsetForLeaderTopicResult {
                        topic: TOPIC.into(),
                        partitions: vec![o::EpochEndOffset {
                            error_code: error.code(),
                            partition: 0,
                            leader_epoch,
                            end_offset,
                        }],
                    }],
                    ..Default::default()
                })
            }
            Request::Fetch(r) => {
                let partitions = r.topics[0]
                    .partitions
                    .iter()
                    .map(|p| self.fetch(p))
                    .collect();
                Response::Fetch(fetch_response::FetchResponse {
                    responses: vec![fetch_response::FetchableTopicResponse {
                        topic: TOPIC.into(),
                        partitions,
                        ..Default::default()
                    }],
                    ..Default::default()
                })
            }
            other => panic!("the fake does not answer {:?}", other.api_key()),
        })
    }

    fn send(&mut self, _: Target, request: &Request, _: i16) -> Result<(), ClientError> {
        panic!(
            "the consumer never sends without an answer: {:?}",
            request.api_key()
        )
    }

    fn set_brokers(&mut self, _: Vec<(i32, String)>) {}
}

fn tp() -> TopicPartition {
    TopicPartition::new(TOPIC, 0)
}

fn consumer(leader: FakeLeader, reset: OffsetReset) -> Consumer<FakeLeader> {
    let config = ConsumerConfig {
        auto_offset_reset: reset,
        retry_backoff_ms: 1,
        default_api_timeout_ms: 2_000,
        ..ConsumerConfig::default()
    };
    let mut consumer = Consumer::with_transport(leader, config);
    consumer.assign([tp()]);
    consumer
}

fn values(records: &[super::consumer::ConsumerRecord]) -> Vec<(i64, i32, String)> {
    records
        .iter()
        .map(|r| {
            let value = String::from_utf8_lossy(r.value.as_deref().unwrap_or_default());
            (r.offset, r.leader_epoch, value.into_owned())
        })
        .collect()
}

const POLL: Duration = Duration::from_millis(200);

#[test]
fn records_carry_their_epoch_and_every_fetch_carries_both_epochs() {
    // KIP-320: each record exposes its leader epoch; a fetch after records sends the epoch of
    // the last one as LastFetchedEpoch and the Metadata epoch as CurrentLeaderEpoch.
    let leader = FakeLeader::new(3, &[(1, "a"), (1, "b"), (3, "c")]);
    let mut consumer = consumer(leader, OffsetReset::Earliest);
    let records = consumer.poll(POLL).unwrap();
    assert_eq!(
        values(&records),
        vec![(0, 1, "a".into()), (1, 1, "b".into()), (2, 3, "c".into())]
    );
    assert_eq!(
        consumer.fetch_position(&tp()),
        Some(FetchPosition {
            offset: 3,
            offset_epoch: Some(3)
        })
    );
    assert!(consumer.poll(Duration::from_millis(20)).unwrap().is_empty());
    let fetches = &consumer.transport_mut().fetches;
    // The first fetch after the reset has no epoch to check; the later ones have.
    assert_eq!(
        (
            fetches[0].fetch_offset,
            fetches[0].current_leader_epoch,
            fetches[0].last_fetched_epoch
        ),
        (0, 3, -1)
    );
    let last = fetches.last().unwrap();
    assert_eq!(
        (
            last.fetch_offset,
            last.current_leader_epoch,
            last.last_fetched_epoch
        ),
        (3, 3, 3)
    );
}

#[test]
fn truncation_found_by_diverging_epoch_is_reported_without_reset_policy() {
    // We read offsets 0..4 (epoch 2); an unclean leader kept only 0..2 of epoch 2 and wrote
    // epoch 5 from offset 2. Divergence point: the end of epoch 2 in the new log, 2.
    let leader = FakeLeader::new(2, &[(1, "a"), (2, "b"), (2, "c"), (2, "d")]);
    let mut consumer = consumer(leader, OffsetReset::None);
    consumer.seek(&tp(), 0).unwrap();
    assert_eq!(consumer.poll(POLL).unwrap().len(), 4);
    let fake = consumer.transport_mut();
    fake.log = vec![(1, "a".into()), (2, "b".into()), (5, "x".into())];
    fake.leader_epoch = 5;
    fake.metadata_epoch = 5;
    // The old leader's connection is gone: our metadata is stale, the fetch is fenced.
    let error = consumer.poll(POLL).unwrap_err();
    let ConsumerError::LogTruncation {
        partition,
        divergence_offset,
    } = error
    else {
        panic!("expected LogTruncation, got {error}");
    };
    assert_eq!((partition, divergence_offset), (tp(), 2));
    assert_eq!(consumer.transport_mut().validations.last(), Some(&(5, 2)));
    // KIP-320: if the user ignores it, fetching goes on from the position without the epoch.
    assert_eq!(
        consumer.fetch_position(&tp()),
        Some(FetchPosition {
            offset: 4,
            offset_epoch: None
        })
    );
    let error = consumer.poll(POLL).unwrap_err();
    assert!(
        matches!(error, ConsumerError::OffsetOutOfRange { offset: 4, .. }),
        "{error}"
    );
}

#[test]
fn diverging_epoch_alone_triggers_validation_and_a_policy_moves_to_the_divergence() {
    // No leader change that Metadata or fencing could reveal: the DivergingEpoch of the fetch
    // alone triggers the OffsetForLeaderEpoch check, and a reset policy moves to the
    // divergence point (KIP-320), not to the policy's end of the log.
    let leader = FakeLeader::new(4, &[(2, "a"), (4, "b"), (4, "c")]);
    let mut consumer = consumer(leader, OffsetReset::Earliest);
    consumer.seek(&tp(), 0).unwrap();
    assert_eq!(consumer.poll(POLL).unwrap().len(), 3);
    consumer.transport_mut().log.truncate(2);
    assert!(consumer.poll(Duration::from_millis(50)).unwrap().is_empty());
    assert_eq!(consumer.transport_mut().validations, vec![(4, 4)]);
    assert_eq!(
        consumer.fetch_position(&tp()),
        Some(FetchPosition {
            offset: 2,
            offset_epoch: Some(4)
        })
    );
    consumer.transport_mut().log.push((4, "z".into()));
    let records = consumer.poll(POLL).unwrap();
    assert_eq!(values(&records), vec![(2, 4, "z".into())]);
}

#[test]
fn a_leader_change_without_truncation_validates_and_carries_on() {
    let leader = FakeLeader::new(1, &[(1, "a"), (1, "b")]);
    let mut consumer = consumer(leader, OffsetReset::None);
    consumer.seek(&tp(), 0).unwrap();
    assert_eq!(consumer.poll(POLL).unwrap().len(), 2);
    let fake = consumer.transport_mut();
    fake.leader_epoch = 2;
    fake.metadata_epoch = 2;
    fake.log.push((2, "c".into()));
    let records = consumer.poll(POLL).unwrap();
    assert_eq!(values(&records), vec![(2, 2, "c".into())]);
    // Fenced at epoch 1, Metadata says 2: validated epoch 1 against the epoch-2 leader.
    assert_eq!(consumer.transport_mut().validations, vec![(2, 1)]);
}

#[test]
fn unknown_leader_epoch_refreshes_metadata_and_retries() {
    // KIP-232/320: Metadata (from a node ahead of this leader) names epoch 8; the leader
    // still is at 7 and answers UNKNOWN_LEADER_EPOCH until it catches up.
    let mut leader = FakeLeader::new(7, &[(7, "a")]);
    leader.metadata_epoch = 8;
    let mut consumer = consumer(leader, OffsetReset::Earliest);
    consumer.seek(&tp(), 0).unwrap();
    assert!(consumer.poll(Duration::from_millis(50)).unwrap().is_empty());
    let fake = consumer.transport_mut();
    assert!(fake.fetches.iter().all(|f| f.current_leader_epoch == 8));
    fake.metadata_epoch = 7;
    let records = consumer.poll(POLL).unwrap();
    assert_eq!(values(&records), vec![(0, 7, "a".into())]);
}

#[test]
fn seek_to_nearest_keeps_a_valid_offset_and_moves_a_truncated_one() {
    // Epochs: 1 at 0..3, 3 at 3..5, 6 at 5..6.
    let leader = FakeLeader::new(
        6,
        &[(1, "a"), (1, "b"), (1, "c"), (3, "d"), (3, "e"), (6, "f")],
    );
    let mut consumer = consumer(leader, OffsetReset::None);
    // Offset 2 in epoch 1 still exists: kept.
    assert_eq!(consumer.seek_to_nearest(&tp(), 2, 1).unwrap(), 2);
    // Offset 4 "in epoch 2": epoch 2 is unknown, the largest ≤ 2 is 1, which ends at 3.
    assert_eq!(consumer.seek_to_nearest(&tp(), 4, 2).unwrap(), 3);
    // Offset 5 in epoch 1: epoch 1 ended at 3, the first offset of the next epoch.
    assert_eq!(consumer.seek_to_nearest(&tp(), 5, 1).unwrap(), 3);
    let records = consumer.poll(POLL).unwrap();
    assert_eq!(values(&records)[0], (3, 3, "d".into()));
}

#[test]
fn out_of_range_without_policy_is_an_error_and_with_one_a_reset() {
    let leader = FakeLeader::new(1, &[(1, "a"), (1, "b")]);
    let mut strict = consumer(leader, OffsetReset::None);
    strict.seek(&tp(), 9).unwrap();
    let error = strict.poll(POLL).unwrap_err();
    assert!(
        matches!(error, ConsumerError::OffsetOutOfRange { offset: 9, .. }),
        "{error}"
    );
    let leader = FakeLeader::new(1, &[(1, "a"), (1, "b")]);
    let mut resetting = consumer(leader, OffsetReset::Earliest);
    resetting.seek(&tp(), 9).unwrap();
    assert_eq!(resetting.poll(POLL).unwrap().len(), 2);
    let mut unassigned = super::consumer::Consumer::with_transport(
        FakeLeader::new(1, &[]),
        ConsumerConfig::default(),
    );
    assert!(matches!(
        unassigned.seek(&tp(), 0),
        Err(ConsumerError::NotAssigned { .. })
    ));
}
