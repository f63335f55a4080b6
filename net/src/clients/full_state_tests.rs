//! `Consumer::read_full_state` against an in-process fake leader of a snapshotted partition:
//! the snapshot fetched chunk by chunk (ReplicaId -1), validated and loaded, the log after it
//! applied; a flipped bit refused; no snapshot read from offset 0; a log start without
//! snapshot refused; a snapshot replaced mid-download read again. The story on real nodes is
//! `tests/snapshot_topics.rs`.

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use ringlog_engine::batch::RecordBatchBuilder;
use ringlog_engine::snapshot::{SnapshotEncoder, SnapshotFormat, SnapshotId};
use ringlog_replication::state_machine::kv::{KV_FORMAT_NAME, KV_FORMAT_VERSION};

use super::TopicPartition;
use super::consumer::{Consumer, ConsumerConfig, ConsumerError};
use super::transport::{Target, Transport};
use crate::client::ClientError;
use crate::protocol::wire::Records;
use crate::protocol::{
    ErrorCode, Request, Response, fetch_response, fetch_snapshot_request, fetch_snapshot_response,
    metadata_response,
};

const TOPIC: &str = "kv";
const EPOCH: i32 = 3;
/// The fake's FetchSnapshot chunk size, so a snapshot takes several requests.
const CHUNK_BYTES: usize = 64;

/// Leader 1 of `kv`-0: a snapshot (or none) at `log_start_offset`, then `log` (key, value)
/// records one per batch from there.
struct FakeLeader {
    log_start_offset: i64,
    snapshot: Option<(SnapshotId, Bytes)>,
    log: Vec<(String, Option<String>)>,
    /// Serve this snapshot id instead once the first chunk was sent (a newer snapshot replaced
    /// it): the consumer must start over.
    replace_after_first_chunk: Option<(SnapshotId, Bytes)>,
    snapshot_requests: Vec<fetch_snapshot_request::PartitionSnapshot>,
    replica_ids: Vec<i32>,
}

fn snapshot_bytes(id: SnapshotId, entries: &[(&str, &str)]) -> Bytes {
    let format = SnapshotFormat {
        name: KV_FORMAT_NAME.into(),
        version: KV_FORMAT_VERSION,
    };
    // Small batches: several batches, several chunks.
    let mut encoder = SnapshotEncoder::with_batch_size(id, &format, 0, 100);
    for (key, value) in entries {
        ringlog_engine::snapshot::SnapshotRecordSink::append_record(
            &mut encoder,
            Some(key.as_bytes()),
            Some(value.as_bytes()),
        );
    }
    let mut out = BytesMut::new();
    out.extend_from_slice(&encoder.take_encoded());
    out.extend_from_slice(&encoder.finish());
    out.freeze()
}

impl FakeLeader {
    fn new(snapshot: Option<(SnapshotId, Bytes)>, log: &[(&str, Option<&str>)]) -> FakeLeader {
        FakeLeader {
            log_start_offset: snapshot.as_ref().map_or(0, |(id, _)| id.end_offset),
            snapshot,
            log: log
                .iter()
                .map(|(k, v)| (k.to_string(), v.map(String::from)))
                .collect(),
            replace_after_first_chunk: None,
            snapshot_requests: Vec::new(),
            replica_ids: Vec::new(),
        }
    }

    fn high_watermark(&self) -> i64 {
        self.log_start_offset + self.log.len() as i64
    }

    fn fetch(&self, offset: i64) -> fetch_response::PartitionData {
        let mut data = fetch_response::PartitionData {
            partition_index: 0,
            high_watermark: self.high_watermark(),
            log_start_offset: self.log_start_offset,
            records: Some(Records::Bytes(Bytes::new())),
            ..Default::default()
        };
        if offset < self.log_start_offset || offset > self.high_watermark() {
            data.error_code = ErrorCode::OffsetOutOfRange.code();
            if let Some((id, _)) = &self.snapshot {
                data.snapshot_id = fetch_response::SnapshotId {
                    end_offset: id.end_offset,
                    epoch: id.epoch,
                };
            }
            return data;
        }
        let mut out = BytesMut::new();
        let skip = (offset - self.log_start_offset) as usize;
        for (i, (key, value)) in self.log.iter().enumerate().skip(skip) {
            let base = self.log_start_offset + i as i64;
            let mut builder = RecordBatchBuilder::new(base).with_leader_epoch(EPOCH);
            builder.append(
                0,
                Some(key.as_bytes()),
                value.as_deref().map(str::as_bytes),
                &[],
            );
            out.extend_from_slice(builder.build().as_bytes());
        }
        data.records = Some(Records::Bytes(out.freeze()));
        data
    }

    fn fetch_snapshot(
        &mut self,
        p: &fetch_snapshot_request::PartitionSnapshot,
    ) -> fetch_snapshot_response::PartitionSnapshot {
        self.snapshot_requests.push(p.clone());
        let asked = SnapshotId {
            end_offset: p.snapshot_id.end_offset,
            epoch: p.snapshot_id.epoch,
        };
        let mut answer = fetch_snapshot_response::PartitionSnapshot {
            index: 0,
            snapshot_id: fetch_snapshot_response::SnapshotId {
                end_offset: asked.end_offset,
                epoch: asked.epoch,
            },
            position: p.position,
            ..Default::default()
        };
        let Some((id, bytes)) = self.snapshot.clone().filter(|(id, _)| *id == asked) else {
            answer.error_code = ErrorCode::SnapshotNotFound.code();
            return answer;
        };
        let start = (p.position as usize).min(bytes.len());
        let end = (start + CHUNK_BYTES).min(bytes.len());
        answer.size = bytes.len() as i64;
        answer.unaligned_records = Records::Bytes(bytes.slice(start..end));
        if let Some(newer) = self.replace_after_first_chunk.take() {
            self.log_start_offset = newer.0.end_offset;
            self.log
                .drain(..(newer.0.end_offset - id.end_offset) as usize);
            self.snapshot = Some(newer);
        }
        answer
    }
}

impl Transport for FakeLeader {
    fn request(
        &mut self,
        target: Target,
        request: &Request,
        _version: i16,
    ) -> Result<Response, ClientError> {
        assert!(matches!(target, Target::Any | Target::Node(1)));
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
                        leader_epoch: EPOCH,
                        ..Default::default()
                    }],
                    ..Default::default()
                }],
                ..Default::default()
            }),
            Request::Fetch(f) => {
                let p = &f.topics[0].partitions[0];
                assert_eq!(p.current_leader_epoch, EPOCH);
                Response::Fetch(fetch_response::FetchResponse {
                    responses: vec![fetch_response::FetchableTopicResponse {
                        topic: TOPIC.into(),
                        partitions: vec![self.fetch(p.fetch_offset)],
                        ..Default::default()
                    }],
                    ..Default::default()
                })
            }
            Request::FetchSnapshot(r) => {
                self.replica_ids.push(r.replica_id);
                let answer = self.fetch_snapshot(&r.topics[0].partitions[0]);
                Response::FetchSnapshot(fetch_snapshot_response::FetchSnapshotResponse {
                    topics: vec![fetch_snapshot_response::TopicSnapshot {
                        name: TOPIC.into(),
                        partitions: vec![answer],
                    }],
                    ..Default::default()
                })
            }
            other => panic!("unexpected request {other:?}"),
        })
    }

    fn send(&mut self, _: Target, _: &Request, _: i16) -> Result<(), ClientError> {
        unreachable!("the consumer never sends without an answer")
    }

    fn set_brokers(&mut self, _: Vec<(i32, String)>) {}
}

fn consumer(leader: FakeLeader) -> Consumer<FakeLeader> {
    Consumer::with_transport(
        leader,
        ConsumerConfig {
            retry_backoff_ms: 1,
            ..ConsumerConfig::default()
        },
    )
}

fn tp() -> TopicPartition {
    TopicPartition::new(TOPIC, 0)
}

fn map(entries: &[(&str, &str)]) -> BTreeMap<Bytes, Bytes> {
    entries
        .iter()
        .map(|(k, v)| (Bytes::from(k.to_string()), Bytes::from(v.to_string())))
        .collect()
}

fn many_entries() -> Vec<(String, String)> {
    (0..20)
        .map(|i| (format!("key-{i:02}"), format!("value-{i}")))
        .collect()
}

#[test]
fn the_snapshot_is_fetched_in_chunks_then_the_log_after_it_is_applied() {
    let id = SnapshotId {
        end_offset: 50,
        epoch: 2,
    };
    let entries = many_entries();
    let borrowed: Vec<(&str, &str)> = entries
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let bytes = snapshot_bytes(id, &borrowed);
    assert!(bytes.len() > 3 * CHUNK_BYTES, "several chunks");
    let leader = FakeLeader::new(
        Some((id, bytes.clone())),
        &[
            ("key-00", Some("new")),
            ("key-01", None),
            ("fresh", Some("1")),
        ],
    );
    let mut consumer = consumer(leader);
    let state = consumer
        .read_full_state(&tp(), Duration::from_secs(5))
        .unwrap();
    let mut expected = map(&borrowed);
    expected.insert(Bytes::from("key-00"), Bytes::from("new"));
    expected.remove(&b"key-01"[..]);
    expected.insert(Bytes::from("fresh"), Bytes::from("1"));
    assert_eq!(state.entries, expected);
    assert_eq!(state.snapshot_id, Some(id));
    assert_eq!(state.position.offset, 53);
    assert_eq!(state.position.offset_epoch, Some(EPOCH));
    // Chunk by chunk from position 0, as a consumer (ReplicaId -1).
    let leader = consumer.transport_mut();
    let positions: Vec<i64> = leader
        .snapshot_requests
        .iter()
        .map(|p| p.position)
        .collect();
    let expected_positions: Vec<i64> = (0..bytes.len())
        .step_by(CHUNK_BYTES)
        .map(|p| p as i64)
        .collect();
    assert_eq!(positions, expected_positions);
    assert!(leader.replica_ids.iter().all(|id| *id == -1));
    // The consumer goes on from the position the read reached.
    leader.log.push(("later".into(), Some("x".into())));
    let records = consumer.poll(Duration::from_secs(1)).unwrap();
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].offset, 53);
}

#[test]
fn a_flipped_bit_in_the_fetched_snapshot_is_refused() {
    let id = SnapshotId {
        end_offset: 20,
        epoch: 1,
    };
    let good = snapshot_bytes(id, &[("a", "1"), ("b", "2"), ("c", "3")]);
    // One flipped bit in a data batch (the engine's tests flip every bit of a file).
    let mut bad = good.to_vec();
    let position = bad.len() / 2;
    bad[position] ^= 0x10;
    let mut consumer = consumer(FakeLeader::new(Some((id, Bytes::from(bad))), &[]));
    let error = consumer
        .read_full_state(&tp(), Duration::from_secs(5))
        .unwrap_err();
    assert!(
        matches!(error, ConsumerError::Snapshot { ref source, .. } if source.is_corruption()),
        "{error}"
    );
}

#[test]
fn without_a_snapshot_the_log_is_read_from_offset_0() {
    let leader = FakeLeader::new(None, &[("a", Some("1")), ("b", Some("2")), ("a", None)]);
    let mut consumer = consumer(leader);
    let state = consumer
        .read_full_state(&tp(), Duration::from_secs(5))
        .unwrap();
    assert_eq!(state.entries, map(&[("b", "2")]));
    assert_eq!(state.snapshot_id, None);
    assert_eq!(state.position.offset, 3);
    assert!(consumer.transport_mut().snapshot_requests.is_empty());
}

#[test]
fn a_log_start_without_a_snapshot_is_refused() {
    let mut leader = FakeLeader::new(None, &[("a", Some("1"))]);
    leader.log_start_offset = 10;
    let error = consumer(leader)
        .read_full_state(&tp(), Duration::from_secs(5))
        .unwrap_err();
    assert!(
        matches!(
            error,
            ConsumerError::NoSnapshot {
                log_start_offset: 10,
                ..
            }
        ),
        "{error}"
    );
}

#[test]
fn a_snapshot_replaced_during_the_download_is_read_again_from_the_newer_one() {
    let old = SnapshotId {
        end_offset: 10,
        epoch: 1,
    };
    let newer = SnapshotId {
        end_offset: 12,
        epoch: 1,
    };
    let entries = many_entries();
    let borrowed: Vec<(&str, &str)> = entries
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let mut leader = FakeLeader::new(
        Some((old, snapshot_bytes(old, &borrowed))),
        &[
            ("key-00", Some("x")),
            ("key-01", Some("y")),
            ("z", Some("1")),
        ],
    );
    let mut at_newer = map(&borrowed);
    at_newer.insert(Bytes::from("key-00"), Bytes::from("x"));
    at_newer.insert(Bytes::from("key-01"), Bytes::from("y"));
    let newer_entries: Vec<(String, String)> = at_newer
        .iter()
        .map(|(k, v)| {
            (
                String::from_utf8(k.to_vec()).unwrap(),
                String::from_utf8(v.to_vec()).unwrap(),
            )
        })
        .collect();
    let newer_borrowed: Vec<(&str, &str)> = newer_entries
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    leader.replace_after_first_chunk = Some((newer, snapshot_bytes(newer, &newer_borrowed)));
    let mut consumer = consumer(leader);
    let state = consumer
        .read_full_state(&tp(), Duration::from_secs(5))
        .unwrap();
    at_newer.insert(Bytes::from("z"), Bytes::from("1"));
    assert_eq!(state.snapshot_id, Some(newer));
    assert_eq!(state.entries, at_newer);
    assert_eq!(state.position.offset, 13);
}
