//! Consumer Fetch (replica id -1): read up to the high-watermark, and long-polled (parked in the
//! node's [`Purgatory`](ringlog_replication::purgatory::Purgatory), the type the core parks
//! replica fetches in) until a partition it asks for gains committed records or its wait ends.
//! The parked fetches are [`ParkedFetches`], a part of the handlers' state.

use bytes::Bytes;

use ringlog_replication::ValidatedOffset;

use ringlog_replication::purgatory::Purgatory;

use super::super::NodeError;
use super::super::context::Cx;
use super::super::convert;
use super::super::metadata::{PartitionLookup, check_current_leader_epoch};
use super::super::quorum_rpc::records_source;
use super::super::transport::Responder;
use crate::protocol::wire::Records;
use crate::protocol::{ErrorCode, RequestHeader, Response, fetch_request, fetch_response};
use crate::server::{RecordsSource, Reply};

/// A consumer Fetch waiting for committed records or its `max_wait_ms`.
pub(super) struct ParkedConsumerFetch {
    pub(super) responder: Responder,
    pub(super) version: i16,
    pub(super) request: fetch_request::FetchRequest,
}

/// Consumer fetches waiting for committed records or their `max_wait_ms`, in arrival order.
#[derive(Default)]
pub(in crate::node) struct ParkedFetches {
    parked: Purgatory<u64, ParkedConsumerFetch>,
    next_id: u64,
}

impl ParkedFetches {
    pub(in crate::node) fn next_deadline_ms(&self) -> u64 {
        self.parked.next_deadline_ms()
    }

    /// A consumer Fetch: answered now, or parked (`may_park`, nothing to read yet, a wait
    /// asked for and the node not shutting down).
    #[allow(clippy::too_many_arguments)]
    pub(in crate::node) fn consumer_fetch(
        &mut self,
        cx: &mut Cx,
        lookup: PartitionLookup,
        shutting_down: bool,
        responder: Responder,
        header: &RequestHeader,
        request: fetch_request::FetchRequest,
        may_park: bool,
    ) -> Result<(), NodeError> {
        let version = header.api_version;
        // Topics the requester may not read are answered TOPIC_AUTHORIZATION_FAILED now and
        // never parked (authorize.rs).
        let mut request = request;
        let requester = responder.requester();
        let mut refused = Vec::new();
        request.topics.retain(|t| {
            let name = fetch_topic_name(lookup, t, version);
            let allowed =
                cx.authorizer()
                    .allowed(&requester, crate::protocol::ApiKey::Fetch, &name);
            if !allowed {
                refused.push(fetch_response::FetchableTopicResponse {
                    topic: t.topic.clone(),
                    topic_id: t.topic_id,
                    partitions: t
                        .partitions
                        .iter()
                        .map(|p| {
                            convert::fetch_partition_error(
                                p.partition,
                                ErrorCode::TopicAuthorizationFailed,
                            )
                        })
                        .collect(),
                });
            }
            allowed
        });
        let (mut response, has_data, regions) = read_for_consumer(cx, lookup, &request, version)?;
        let has_data = has_data || !refused.is_empty();
        response.responses.extend(refused);
        let max_wait_ms = u64::try_from(request.max_wait_ms).unwrap_or(0);
        if !has_data && may_park && max_wait_ms > 0 && !shutting_down {
            let id = self.next_id;
            self.next_id += 1;
            let deadline_ms = cx.now_ms + max_wait_ms;
            self.parked.park(
                id,
                ParkedConsumerFetch {
                    responder,
                    version,
                    request,
                },
                deadline_ms,
            );
            return Ok(());
        }
        responder.reply(Reply::WithRecords {
            response: Response::Fetch(response),
            regions,
        });
        Ok(())
    }

    /// Parked fetches whose partitions gained committed records are answered.
    pub(in crate::node) fn wake(
        &mut self,
        cx: &mut Cx,
        lookup: PartitionLookup,
    ) -> Result<(), NodeError> {
        let (table, host) = (cx.table, &*cx.host);
        let ready = self.parked.take_ready(|_, p| {
            p.request.topics.iter().any(|t| {
                t.partitions.iter().any(|part| {
                    let id = if p.version >= 13 {
                        table.find_by_id(t.topic_id, part.partition)
                    } else {
                        table.find(&t.topic, part.partition)
                    };
                    id.is_some_and(|id| {
                        host.store(id).expect("hosted partition").high_watermark as i64
                            > part.fetch_offset
                    })
                })
            })
        });
        for (_, parked) in ready {
            answer_parked(cx, lookup, parked)?;
        }
        Ok(())
    }

    /// Parked fetches past their wait are answered.
    pub(in crate::node) fn expire(&mut self, cx: &mut Cx, lookup: PartitionLookup, now: u64) {
        for (_, parked) in self.parked.take_due(now, |_, _| false) {
            if let Err(error) = answer_parked(cx, lookup, parked) {
                tracing::warn!(%error, "answering a parked fetch");
            }
        }
    }

    /// Shutdown: every parked fetch is answered now.
    pub(in crate::node) fn answer_all(
        &mut self,
        cx: &mut Cx,
        lookup: PartitionLookup,
    ) -> Result<(), NodeError> {
        for (_, parked) in self.parked.take_all() {
            answer_parked(cx, lookup, parked)?;
        }
        Ok(())
    }
}

fn answer_parked(
    cx: &mut Cx,
    lookup: PartitionLookup,
    parked: ParkedConsumerFetch,
) -> Result<(), NodeError> {
    let (response, _, regions) = read_for_consumer(cx, lookup, &parked.request, parked.version)?;
    parked.responder.reply(Reply::WithRecords {
        response: Response::Fetch(response),
        regions,
    });
    Ok(())
}

/// A Fetch topic's name: as sent before v13, from its topic id after (empty when unknown).
fn fetch_topic_name(
    lookup: PartitionLookup,
    topic: &fetch_request::FetchTopic,
    version: i16,
) -> String {
    if version < 13 {
        return topic.topic.clone();
    }
    lookup
        .topics
        .image
        .values()
        .find(|t| t.topic_id == topic.topic_id)
        .map(|t| t.name.clone())
        .unwrap_or_default()
}

/// A consumer reads whole batches below the high-watermark only (uncommitted records may
/// still be truncated away). OFFSET_OUT_OF_RANGE only below the log start or past the log
/// end offset, as Kafka answers; in between it reads up to the high-watermark.
fn read_for_consumer(
    cx: &mut Cx,
    lookup: PartitionLookup,
    request: &fetch_request::FetchRequest,
    version: i16,
) -> Result<(fetch_response::FetchResponse, bool, Vec<RecordsSource>), NodeError> {
    let mut has_data = false;
    let mut regions = Vec::new();
    let mut responses = Vec::new();
    for topic in &request.topics {
        let mut partitions = Vec::new();
        for p in &topic.partitions {
            let id = if version >= 13 {
                cx.table.find_by_id(topic.topic_id, p.partition)
            } else {
                cx.table.find(&topic.topic, p.partition)
            };
            let Some(id) = id else {
                let error = if version >= 13 {
                    lookup.absent_error_by_id(topic.topic_id, p.partition)
                } else {
                    lookup.absent_error(&topic.topic, p.partition)
                };
                partitions.push(convert::fetch_partition_error(p.partition, error));
                continue;
            };
            let raft = cx.host.raft(id).expect("hosted partition");
            let leader = Some(raft.leader_and_epoch());
            let latest_snapshot_id = raft.log().latest_snapshot_id();
            let log_end_offset = raft.log().log_end_offset();
            // KIP-320: a consumer that knows another epoch than ours is fenced (older) or
            // ahead of us (newer); one whose last fetched epoch does not end where it
            // thinks is told where its log diverged, and reads nothing.
            let epoch_check = check_current_leader_epoch(p.current_leader_epoch, raft.epoch());
            let validated = (version >= 12 && p.last_fetched_epoch >= 0 && p.fetch_offset >= 0)
                .then(|| {
                    raft.log().validate_offset_and_epoch(
                        p.fetch_offset as u64,
                        p.last_fetched_epoch as u32,
                    )
                });
            let store = cx.host.store(id).expect("hosted partition");
            let high_watermark = store.high_watermark;
            // Kafka's logStartOffset: above the log start where a DeleteRecords cut
            // inside a batch (delete_records.rs).
            let log_start_offset = store.client_log_start_offset();
            let mut data = fetch_response::PartitionData {
                partition_index: p.partition,
                high_watermark: high_watermark as i64,
                last_stable_offset: high_watermark as i64,
                log_start_offset: log_start_offset as i64,
                current_leader: fetch_response::LeaderIdAndEpoch {
                    leader_id: leader.and_then(|l| l.leader_id).unwrap_or(-1),
                    leader_epoch: leader.map_or(-1, |l| l.leader_epoch as i32),
                },
                records: Some(Records::Bytes(Bytes::new())),
                ..Default::default()
            };
            if let Err(code) = epoch_check {
                data.error_code = code.code();
                has_data = true;
            } else if let Some(ValidatedOffset::Diverging(end)) = validated {
                data.diverging_epoch = fetch_response::EpochEndOffset {
                    epoch: end.epoch as i32,
                    end_offset: end.offset as i64,
                };
                has_data = true;
            } else if matches!(validated, Some(ValidatedOffset::Snapshot(_)))
                || p.fetch_offset < log_start_offset as i64
                || p.fetch_offset > log_end_offset as i64
            {
                has_data = true;
                data.error_code = ErrorCode::OffsetOutOfRange.code();
                // Beyond Kafka (docs/snapshots.md): below the log start of a snapshotted
                // partition, a consumer is also told the latest snapshot (the field KIP-630
                // fills for replicas), so it can read the full state with FetchSnapshot.
                // Kafka's consumers ignore the tagged field.
                if let Some(snapshot_id) = latest_snapshot_id
                    && p.fetch_offset < log_start_offset as i64
                {
                    data.snapshot_id = fetch_response::SnapshotId {
                        end_offset: snapshot_id.offset as i64,
                        epoch: snapshot_id.epoch as i32,
                    };
                }
            } else if (p.fetch_offset as u64) < high_watermark {
                let max_bytes = u32::try_from(p.partition_max_bytes).unwrap_or(0).max(1);
                let read = cx
                    .host
                    .read_region(id, p.fetch_offset as u64, max_bytes, high_watermark)
                    .and_then(|records| records_source(cx.host, records));
                match read {
                    // Zero copy: a tail slice is written by reference, a file region is
                    // sent with sendfile after the encoded bytes before it.
                    Ok(RecordsSource::Memory(bytes)) => {
                        has_data |= !bytes.is_empty();
                        data.records = Some(Records::Bytes(bytes));
                    }
                    Ok(source @ (RecordsSource::Chunks(_) | RecordsSource::File(_))) => {
                        has_data |= source.size_bytes() > 0;
                        data.records = Some(source.attach_to(&mut regions));
                    }
                    Err(error) => {
                        tracing::error!(%error, offset = p.fetch_offset, "log read failed");
                        data.error_code = ErrorCode::KafkaStorageError.code();
                    }
                }
            }
            // Otherwise the offset lies in [high-watermark, log end]: records this node has
            // but does not know to be committed yet. A new leader's high-watermark sits
            // below the old leader's until it commits a record of its own epoch, and a
            // restarted node's starts at its log start, so a consumer that read up to the
            // old high-watermark lands here after a failover. As Kafka does, it gets an
            // empty answer (out of range is only below the log start or past the log end)
            // and waits in the long poll until the high-watermark covers its offset.
            partitions.push(data);
        }
        responses.push(fetch_response::FetchableTopicResponse {
            topic: topic.topic.clone(),
            topic_id: topic.topic_id,
            partitions,
        });
    }
    Ok((
        fetch_response::FetchResponse {
            responses,
            ..Default::default()
        },
        has_data,
        regions,
    ))
}
