//! ListOffsets (earliest, latest, by timestamp) and OffsetForLeaderEpoch (KIP-101/KIP-320:
//! where an epoch ends), for the partitions this node leads.

use ringlog_engine::batch::BatchIter;
use ringlog_engine::io::AnyIo;
use ringlog_replication::PartitionId;
use ringlog_replication::host::Host;

use super::super::authorize::Requester;
use super::super::context::Cx;
use super::{PartitionLookup, end_offset_for_epoch, epoch_of_offset, leader_check};
use crate::protocol::{
    ApiKey, ErrorCode, list_offsets_request as lo_req, list_offsets_response as lo_resp,
    offset_for_leader_epoch_request as ofle_req, offset_for_leader_epoch_response as ofle_resp,
};

/// ListOffsets' special timestamps (Kafka's `ListOffsetsRequest`).
const LATEST_TIMESTAMP: i64 = -1;
const EARLIEST_TIMESTAMP: i64 = -2;
const MAX_TIMESTAMP: i64 = -3;

/// How many bytes a timestamp lookup reads from the log at a time.
const SCAN_CHUNK_BYTES: u32 = 1 << 20;

// ---- ListOffsets --------------------------------------------------------------------------

pub(in crate::node) fn handle_list_offsets(
    cx: &mut Cx,
    lookup: PartitionLookup,
    request: &lo_req::ListOffsetsRequest,
    requester: &Requester,
) -> lo_resp::ListOffsetsResponse {
    let topics = request
        .topics
        .iter()
        .map(|t| lo_resp::ListOffsetsTopicResponse {
            name: t.name.clone(),
            partitions: t
                .partitions
                .iter()
                .map(|p| {
                    let answer = if cx
                        .authorizer()
                        .allowed(requester, ApiKey::ListOffsets, &t.name)
                    {
                        list_offset(cx, lookup, &t.name, p)
                    } else {
                        Err(ErrorCode::TopicAuthorizationFailed)
                    };
                    let (error, timestamp, offset, leader_epoch) = match answer {
                        Ok((timestamp, offset, epoch)) => {
                            (ErrorCode::None, timestamp, offset, epoch)
                        }
                        Err(code) => (code, -1, -1, -1),
                    };
                    lo_resp::ListOffsetsPartitionResponse {
                        partition_index: p.partition_index,
                        error_code: error.code(),
                        timestamp,
                        offset,
                        leader_epoch,
                    }
                })
                .collect(),
        })
        .collect();
    lo_resp::ListOffsetsResponse {
        throttle_time_ms: 0,
        topics,
    }
}

/// (timestamp, offset, leader epoch) for one partition; offsets are those a consumer may
/// read (below the high-watermark).
fn list_offset(
    cx: &mut Cx,
    lookup: PartitionLookup,
    topic: &str,
    p: &lo_req::ListOffsetsPartition,
) -> Result<(i64, i64, i32), ErrorCode> {
    let id = cx
        .table
        .find(topic, p.partition_index)
        .ok_or_else(|| lookup.absent_error(topic, p.partition_index))?;
    let raft = cx.host.raft(id).expect("hosted partition");
    leader_check(raft, p.current_leader_epoch)?;
    let cache = raft.log().epoch_cache().to_vec();
    let epoch = raft.epoch() as i32;
    let store = cx.host.store(id).expect("hosted partition");
    let high_watermark = store.high_watermark;
    // Kafka's logStartOffset (delete_records.rs): the earliest offset a client may read.
    let log_start_offset = store.client_log_start_offset();
    match p.timestamp {
        LATEST_TIMESTAMP => Ok((-1, high_watermark as i64, epoch)),
        EARLIEST_TIMESTAMP => Ok((
            -1,
            log_start_offset as i64,
            epoch_of_offset(&cache, log_start_offset),
        )),
        MAX_TIMESTAMP => Ok(
            scan_timestamps(cx.host, id, log_start_offset, high_watermark, None)
                .unwrap_or((-1, -1, -1)),
        ),
        target if target >= 0 => {
            Ok(
                scan_timestamps(cx.host, id, log_start_offset, high_watermark, Some(target))
                    .unwrap_or((-1, -1, -1)),
            )
        }
        _ => Err(ErrorCode::InvalidRequest),
    }
}

/// With `Some(target)`, the first record whose timestamp is at least `target`; with
/// `None`, the record with the largest timestamp (the first of them); both among the data
/// batches in `[from, high_watermark)`. The batch comes from the engine's in-memory batch
/// entries (`PartitionLog::find_batch_by_timestamp`, no I/O); only that one batch is read,
/// to name the record. A compressed batch is decompressed for it; one that cannot be is
/// answered with its base offset and MaxTimestamp.
fn scan_timestamps(
    host: &mut Host<AnyIo>,
    id: PartitionId,
    from: u64,
    high_watermark: u64,
    target: Option<i64>,
) -> Option<(i64, i64, i32)> {
    let store = host.store(id)?;
    let (base_offset, max_timestamp) =
        store
            .log
            .find_batch_by_timestamp(from as i64, high_watermark as i64, target)?;
    let bytes = match host.read(id, base_offset as u64, SCAN_CHUNK_BYTES) {
        Ok(bytes) => bytes,
        Err(error) => {
            tracing::error!(%error, base_offset, "log read failed in a timestamp lookup");
            return None;
        }
    };
    let batch = BatchIter::new(bytes).next()?.ok()?;
    let epoch = batch.partition_leader_epoch();
    // `from` may be inside this batch (a DeleteRecords cut there): no record below it.
    let mut found = (max_timestamp, batch.base_offset().max(from as i64), epoch);
    if let Ok(records) = batch.records() {
        for record in records.flatten().filter(|r| r.offset() >= from as i64) {
            let hit = match target {
                Some(t) => record.timestamp() >= t,
                None => record.timestamp() == max_timestamp,
            };
            if hit {
                found = (record.timestamp(), record.offset(), epoch);
                break;
            }
        }
    }
    Some(found)
}

// ---- OffsetForLeaderEpoch -----------------------------------------------------------------

pub(in crate::node) fn handle_offset_for_leader_epoch(
    cx: &Cx,
    lookup: PartitionLookup,
    request: &ofle_req::OffsetForLeaderEpochRequest,
) -> ofle_resp::OffsetForLeaderEpochResponse {
    let topics = request
        .topics
        .iter()
        .map(|t| ofle_resp::OffsetForLeaderTopicResult {
            topic: t.topic.clone(),
            partitions: t
                .partitions
                .iter()
                .map(|p| {
                    let answer = cx
                        .table
                        .find(&t.topic, p.partition)
                        .ok_or_else(|| lookup.absent_error(&t.topic, p.partition))
                        .and_then(|id| {
                            let raft = cx.host.raft(id).expect("hosted partition");
                            leader_check(raft, p.current_leader_epoch)?;
                            let log = raft.log();
                            Ok(end_offset_for_epoch(
                                log.epoch_cache(),
                                log.log_end_offset(),
                                p.leader_epoch,
                            ))
                        });
                    let (error, (leader_epoch, end_offset)) = match answer {
                        Ok(found) => (ErrorCode::None, found.unwrap_or((-1, -1))),
                        Err(code) => (code, (-1, -1)),
                    };
                    ofle_resp::EpochEndOffset {
                        error_code: error.code(),
                        partition: p.partition,
                        leader_epoch,
                        end_offset,
                    }
                })
                .collect(),
        })
        .collect();
    ofle_resp::OffsetForLeaderEpochResponse {
        throttle_time_ms: 0,
        topics,
    }
}
