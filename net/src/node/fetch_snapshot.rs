//! KIP-630 FetchSnapshot between Kafka's wire message and the core's per-partition messages.
//!
//! Inbound (leader): each requested partition becomes a core `FetchSnapshotRequest`; the core
//! answers synchronously, the node fills the bytes from the snapshot file (snapshots.rs) and the
//! answers are shared fairly (`fair_share::water_fill`) under
//! `min(request MaxBytes, replica.fetch.snapshot.response.max.bytes)` when the wire response is
//! built. Zero copy: an answer whose bytes are a region of the frozen snapshot file is encoded
//! as external records (the length prefix only) and its region, cut to the partition's share,
//! goes to the socket with sendfile, as the Fetch path does. Outbound (follower): the
//! FetchSnapshot requests the cores emit while the node executes one batch of work are grouped
//! by leader, and each leader gets ONE wire request carrying all of its partitions (KIP-630's
//! request is multi-partition so that the leader can share one response's bytes between them);
//! the response is split back into one core message per partition. A wiped or lagging replica
//! that needs several partitions' snapshots from one leader therefore keeps downloading them
//! in the same requests: the answers arrive together, are stepped together, and the cores'
//! next requests leave together. Sent on the data lane.

use ringlog_replication::fair_share::water_fill;
use ringlog_replication::{self as core, NodeId, OffsetAndEpoch, PartitionId};

use super::convert::{HostedPartition, InboundPart, PartAnswer, PartitionTable, error_to_core};
use crate::protocol::wire::{Records, Uuid};
use crate::protocol::{ErrorCode, fetch_snapshot_request as req, fetch_snapshot_response as resp};
use crate::server::{FileRegion, RecordsSource};

/// The FetchSnapshot version the node sends (v1: KIP-853's ReplicaDirectoryId, and the leader's
/// NodeEndpoints in the answer).
pub const PEER_FETCH_SNAPSHOT_VERSION: i16 = 1;

fn non_negative<T: TryFrom<i64>>(value: i64) -> Result<T, ErrorCode> {
    T::try_from(value).map_err(|_| ErrorCode::InvalidRequest)
}

/// One [`InboundPart`] per requested partition.
pub fn request_parts(
    request: &req::FetchSnapshotRequest,
    table: &PartitionTable,
) -> Vec<InboundPart> {
    let mut parts = Vec::new();
    for topic in &request.topics {
        for p in &topic.partitions {
            let build = || -> Result<(NodeId, core::Message), ErrorCode> {
                let snapshot_id = OffsetAndEpoch::new(
                    non_negative(p.snapshot_id.end_offset)?,
                    non_negative(i64::from(p.snapshot_id.epoch))?,
                );
                Ok((
                    request.replica_id,
                    core::Message::FetchSnapshotRequest(core::FetchSnapshotRequest {
                        correlation_id: 0,
                        replica_id: request.replica_id,
                        current_leader_epoch: non_negative(i64::from(p.current_leader_epoch))?,
                        snapshot_id,
                        position: non_negative(p.position)?,
                        max_bytes: non_negative(i64::from(request.max_bytes)).unwrap_or(0),
                        // KIP-853 (v1): checked by the core as a Fetch's is.
                        replica_directory_id: p.replica_directory_id.0,
                    }),
                ))
            };
            let target = match table.find(&topic.name, p.partition) {
                None => Err(ErrorCode::UnknownTopicOrPartition),
                Some(id) => build().map(|(from, message)| (id, from, message)),
            };
            parts.push(InboundPart {
                topic: topic.name.clone(),
                topic_id: Uuid::ZERO,
                index: p.partition,
                target,
            });
        }
    }
    parts
}

/// The wire response, with each partition's bytes cut to its fair share of
/// `min(request MaxBytes, response_max_bytes)`: every partition gets at least the even split if
/// it has that much, and what a short one leaves goes to the others. An answer with a file
/// region in `regions` (one entry per answer) has those bytes as its records: the response
/// then holds `Records::External` for it and the returned sources, in token order, are the
/// regions cut to their shares (empty when no answer has a region).
pub fn response(
    parts: &[InboundPart],
    answers: &[PartAnswer],
    regions: Vec<Option<FileRegion>>,
    response_max_bytes: u64,
) -> (resp::FetchSnapshotResponse, Vec<RecordsSource>) {
    debug_assert_eq!(answers.len(), regions.len());
    let request_max_bytes = parts
        .iter()
        .find_map(|p| match &p.target {
            Ok((_, _, core::Message::FetchSnapshotRequest(r))) => Some(u64::from(r.max_bytes)),
            _ => None,
        })
        .unwrap_or(0);
    let cap = request_max_bytes.min(response_max_bytes);
    let demands: Vec<u64> = answers
        .iter()
        .zip(&regions)
        .map(|(a, region)| match (a, region) {
            (PartAnswer::Core(core::Message::FetchSnapshotResponse(_)), Some(region)) => {
                u64::from(region.length)
            }
            (PartAnswer::Core(core::Message::FetchSnapshotResponse(r)), None) => {
                r.unaligned_records.len() as u64
            }
            _ => 0,
        })
        .collect();
    let shares = water_fill(cap, &demands);
    let mut topics: Vec<resp::TopicSnapshot> = Vec::new();
    let mut sources = Vec::new();
    for (((part, answer), share), region) in parts.iter().zip(answers).zip(shares).zip(regions) {
        let entry = match answer {
            PartAnswer::Core(core::Message::FetchSnapshotResponse(r)) => {
                let unaligned_records = match region {
                    Some(region) => {
                        // A share never exceeds its demand, the region's u32 length.
                        let length = u32::try_from(share).expect("share within the region");
                        RecordsSource::File(FileRegion { length, ..region }).attach_to(&mut sources)
                    }
                    None => Records::Bytes(r.unaligned_records.slice(..share as usize)),
                };
                resp::PartitionSnapshot {
                    index: part.index,
                    error_code: r.error_code.code(),
                    snapshot_id: resp::SnapshotId {
                        end_offset: r.snapshot_id.offset as i64,
                        epoch: r.snapshot_id.epoch as i32,
                    },
                    current_leader: resp::LeaderIdAndEpoch {
                        leader_id: r.current_leader.leader_id.unwrap_or(-1),
                        leader_epoch: r.current_leader.leader_epoch as i32,
                    },
                    size: r.size as i64,
                    position: r.position as i64,
                    unaligned_records,
                }
            }
            PartAnswer::Error(e) => resp::PartitionSnapshot {
                index: part.index,
                error_code: e.code(),
                ..Default::default()
            },
            PartAnswer::Core(_) => resp::PartitionSnapshot {
                index: part.index,
                error_code: ErrorCode::UnknownServerError.code(),
                ..Default::default()
            },
        };
        match topics.last_mut() {
            Some(t) if t.name == part.topic => t.partitions.push(entry),
            _ => topics.push(resp::TopicSnapshot {
                name: part.topic.clone(),
                partitions: vec![entry],
            }),
        }
    }
    (
        resp::FetchSnapshotResponse {
            topics,
            ..Default::default()
        },
        sources,
    )
}

/// A follower's FetchSnapshot requests for several partitions (all to the same leader) as ONE
/// wire request: partitions of the same topic share a topic entry; the request's MaxBytes (the
/// wire has one for all partitions) is the largest the cores asked for (they all use the
/// node's `fetch_max_bytes`). `parts` must not be empty.
pub fn request(
    cluster_id: &str,
    replica_id: NodeId,
    parts: &[(&HostedPartition, &core::FetchSnapshotRequest)],
) -> req::FetchSnapshotRequest {
    debug_assert!(
        !parts.is_empty(),
        "a FetchSnapshot names at least one partition"
    );
    let max_bytes = parts.iter().map(|(_, r)| r.max_bytes).max().unwrap_or(0);
    let mut topics: Vec<req::TopicSnapshot> = Vec::new();
    for (hosted, r) in parts {
        debug_assert_eq!(r.replica_id, replica_id);
        let partition = req::PartitionSnapshot {
            partition: hosted.index,
            current_leader_epoch: r.current_leader_epoch as i32,
            snapshot_id: req::SnapshotId {
                end_offset: r.snapshot_id.offset as i64,
                epoch: r.snapshot_id.epoch as i32,
            },
            position: r.position as i64,
            replica_directory_id: Uuid(r.replica_directory_id),
        };
        match topics.iter_mut().find(|t| t.name == hosted.topic) {
            Some(topic) => topic.partitions.push(partition),
            None => topics.push(req::TopicSnapshot {
                name: hosted.topic.clone(),
                partitions: vec![partition],
            }),
        }
    }
    req::FetchSnapshotRequest {
        cluster_id: Some(cluster_id.to_string()),
        replica_id,
        max_bytes: i32::try_from(max_bytes).unwrap_or(i32::MAX),
        topics,
    }
}

/// The leader's answers for every partition of a FetchSnapshot we sent (`asked`: each
/// partition with the core correlation id of its request), one core message each. A partition
/// the response leaves out is answered UNKNOWN_SERVER_ERROR, so its core asks again.
pub fn peer_response_parts(
    response: &resp::FetchSnapshotResponse,
    table: &PartitionTable,
    asked: &[(PartitionId, u64)],
) -> Vec<(PartitionId, core::Message)> {
    asked
        .iter()
        .filter_map(|&(partition, correlation_id)| {
            peer_response_part(response, table, partition, correlation_id)
                .map(|message| (partition, message))
        })
        .collect()
}

/// The leader's answer for `partition` (asked with core correlation id `correlation_id`) as a
/// core message; a top-level error applies to it. `None` if the partition is missing.
pub fn peer_response_part(
    response: &resp::FetchSnapshotResponse,
    table: &PartitionTable,
    partition: PartitionId,
    correlation_id: u64,
) -> Option<core::Message> {
    let hosted = table.get(partition);
    let entry = response
        .topics
        .iter()
        .filter(|t| t.name == hosted.topic)
        .flat_map(|t| t.partitions.iter())
        .find(|p| p.index == hosted.index);
    let error_code = if response.error_code != 0 {
        error_to_core(response.error_code)
    } else {
        entry.map_or(core::ErrorCode::UnknownServerError, |p| {
            error_to_core(p.error_code)
        })
    };
    let entry = entry.cloned().unwrap_or_default();
    let unaligned_records = match entry.unaligned_records {
        Records::Bytes(bytes) => bytes,
        Records::External { .. } => bytes::Bytes::new(),
    };
    Some(core::Message::FetchSnapshotResponse(
        core::FetchSnapshotResponse {
            correlation_id,
            error_code,
            current_leader: core::LeaderIdAndEpoch {
                leader_id: (entry.current_leader.leader_id >= 0)
                    .then_some(entry.current_leader.leader_id),
                leader_epoch: u32::try_from(entry.current_leader.leader_epoch).unwrap_or(0),
            },
            snapshot_id: OffsetAndEpoch::new(
                u64::try_from(entry.snapshot_id.end_offset).unwrap_or(0),
                u32::try_from(entry.snapshot_id.epoch).unwrap_or(0),
            ),
            size: u64::try_from(entry.size).unwrap_or(0),
            position: u64::try_from(entry.position).unwrap_or(0),
            unaligned_records,
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> PartitionTable {
        let mut table = PartitionTable::default();
        for (topic, index) in [("a", 0), ("a", 1), ("b", 0)] {
            table.add(HostedPartition {
                topic: topic.to_string(),
                topic_id: Uuid::ZERO,
                index,
            });
        }
        table
    }

    fn core_request(
        correlation_id: u64,
        end_offset: u64,
        position: u64,
    ) -> core::FetchSnapshotRequest {
        core::FetchSnapshotRequest {
            correlation_id,
            replica_id: 7,
            current_leader_epoch: 3,
            snapshot_id: OffsetAndEpoch::new(end_offset, 2),
            position,
            max_bytes: 4096,
            replica_directory_id: [7; 16],
        }
    }

    // KIP-630: one FetchSnapshot request carries every partition a follower downloads from
    // that leader; partitions of one topic share its topic entry.
    #[test]
    fn one_request_carries_every_partition() {
        let table = table();
        let requests = [
            core_request(1, 100, 0),
            core_request(2, 200, 512),
            core_request(3, 300, 1024),
        ];
        let parts: Vec<_> = (0..3)
            .map(|p| (table.get(p), &requests[p as usize]))
            .collect();
        let wire = request("cluster", 7, &parts);
        assert_eq!(wire.replica_id, 7);
        assert_eq!(wire.max_bytes, 4096);
        assert_eq!(wire.cluster_id.as_deref(), Some("cluster"));
        // (partition, end offset, position) per topic.
        type TopicParts<'a> = (&'a str, Vec<(i32, i64, i64)>);
        let names: Vec<TopicParts<'_>> = wire
            .topics
            .iter()
            .map(|t| {
                (
                    t.name.as_str(),
                    t.partitions
                        .iter()
                        .map(|p| (p.partition, p.snapshot_id.end_offset, p.position))
                        .collect(),
                )
            })
            .collect();
        assert_eq!(
            names,
            vec![
                ("a", vec![(0, 100, 0), (1, 200, 512)]),
                ("b", vec![(0, 300, 1024)])
            ]
        );
        assert!(
            wire.topics
                .iter()
                .flat_map(|t| &t.partitions)
                .all(|p| p.current_leader_epoch == 3 && p.snapshot_id.epoch == 2)
        );
    }

    // KIP-853: FetchSnapshot v1 carries the replica's directory id through the wire to the
    // leader's core, which checks it against the voter set as a Fetch's.
    #[test]
    fn the_directory_id_survives_the_wire() {
        use crate::protocol::{Request, RequestHeader, decode_request, encode_request};
        let table = table();
        let sent = core_request(1, 100, 0);
        let wire = Request::FetchSnapshot(request("cluster", 7, &[(table.get(0), &sent)]));
        let header = RequestHeader {
            api_key: wire.api_key().key(),
            api_version: PEER_FETCH_SNAPSHOT_VERSION,
            correlation_id: 1,
            client_id: None,
        };
        let frame = encode_request(&header, &wire).unwrap();
        let Request::FetchSnapshot(decoded) = decode_request(frame.slice(4..)).unwrap().1 else {
            panic!("not a FetchSnapshot")
        };
        let parts = request_parts(&decoded, &table);
        let Ok((_, 7, core::Message::FetchSnapshotRequest(received))) = &parts[0].target else {
            panic!("{:?}", parts[0].target)
        };
        assert_eq!(received.replica_directory_id, [7; 16]);
    }

    // The response is split back per partition, each with its own core correlation id; a
    // partition the leader left out is answered with an error so its core asks again.
    #[test]
    fn response_is_split_per_partition() {
        let table = table();
        let entry = |index, end_offset, bytes: &'static [u8]| resp::PartitionSnapshot {
            index,
            snapshot_id: resp::SnapshotId {
                end_offset,
                epoch: 2,
            },
            size: 10,
            position: 0,
            unaligned_records: Records::Bytes(bytes::Bytes::from_static(bytes)),
            ..Default::default()
        };
        let response = resp::FetchSnapshotResponse {
            topics: vec![
                resp::TopicSnapshot {
                    name: "a".to_string(),
                    partitions: vec![entry(1, 200, b"xyz")],
                },
                resp::TopicSnapshot {
                    name: "b".to_string(),
                    partitions: vec![entry(0, 300, b"pq")],
                },
            ],
            ..Default::default()
        };
        let parts = peer_response_parts(&response, &table, &[(0, 11), (1, 12), (2, 13)]);
        let summary: Vec<(PartitionId, u64, core::ErrorCode, usize)> = parts
            .iter()
            .map(|(p, m)| match m {
                core::Message::FetchSnapshotResponse(r) => (
                    *p,
                    r.correlation_id,
                    r.error_code,
                    r.unaligned_records.len(),
                ),
                other => panic!("unexpected {other:?}"),
            })
            .collect();
        assert_eq!(
            summary,
            vec![
                (0, 11, core::ErrorCode::UnknownServerError, 0),
                (1, 12, core::ErrorCode::None, 3),
                (2, 13, core::ErrorCode::None, 2),
            ]
        );
    }
}
