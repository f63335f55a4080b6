//! Quorum requests between the sockets and the core: inbound Vote, BeginQuorumEpoch,
//! EndQuorumEpoch, replica Fetch and FetchSnapshot become core steps with one answer slot per
//! partition (answer_slots.rs); once the core's answers fill every slot, [`send_response`]
//! builds the one wire response and sends it. Outbound, the core's requests go to the peer
//! lanes (the fetches of one work list batched per peer, [`fetch_request`]) and the peers'
//! answers become core steps (the node's `handle_peer_response`).
//!
//! Functions of their arguments only: the node calls them with the host and what it knows of
//! endpoints; nothing here steps the core or holds state.

use std::collections::HashMap;

use ringlog_engine::io::AnyIo;
use ringlog_replication::host::Host;
use ringlog_replication::{self as core, NodeId, PartitionId};

use super::NodeError;
use super::answer_slots::PendingRequest;
use super::convert::{self, InboundPart, PartAnswer, PartitionTable};
use super::leader_endpoints::Endpoints;
use crate::protocol::{ApiKey, Response, fetch_request, fetch_response};
use crate::server::{RecordsSource, Reply};

/// Sends the wire response of a request whose every slot is answered: replica Fetch answers
/// carry each partition's client log start and their file regions (sendfile), FetchSnapshot
/// answers their snapshot regions, and every answer the endpoints of the leaders it names
/// (KIP-853 NodeEndpoints, leader_endpoints.rs).
pub(super) fn send_response(
    pending: PendingRequest,
    answers: Vec<PartAnswer>,
    fetch_regions: HashMap<u64, RecordsSource>,
    host: &Host<AnyIo>,
    endpoints: Endpoints,
    fetch_snapshot_response_max_bytes: u64,
) -> Result<(), NodeError> {
    let (mut response, regions) = match pending.api {
        ApiKey::Vote => (
            Response::Vote(convert::vote_response(&pending.parts, &answers)),
            Vec::new(),
        ),
        ApiKey::BeginQuorumEpoch => (
            Response::BeginQuorumEpoch(convert::begin_quorum_epoch_response(
                &pending.parts,
                &answers,
            )),
            Vec::new(),
        ),
        ApiKey::EndQuorumEpoch => (
            Response::EndQuorumEpoch(convert::end_quorum_epoch_response(&pending.parts, &answers)),
            Vec::new(),
        ),
        ApiKey::Fetch => {
            let mut response = convert::fetch_response(&pending.parts, &answers);
            response.session_id = pending.fetch_session_id;
            raise_to_client_log_starts(host, &pending.parts, &mut response);
            let regions =
                attach_fetch_regions(fetch_regions, &pending.parts, &answers, &mut response);
            (Response::Fetch(response), regions)
        }
        ApiKey::FetchSnapshot => {
            let (response, regions) = super::fetch_snapshot::response(
                &pending.parts,
                &answers,
                pending.snapshot_regions,
                fetch_snapshot_response_max_bytes,
            );
            (Response::FetchSnapshot(response), regions)
        }
        other => unreachable!("{other:?} is not a quorum request"),
    };
    // KIP-853 NodeEndpoints: the leaders named, where they listen (leader_endpoints.rs).
    endpoints.fill_node_endpoints(&mut response);
    if !regions.is_empty() {
        // Records sent with sendfile after the response's other bytes (net/src/server/).
        pending
            .responder
            .reply(Reply::WithRecords { response, regions });
        return Ok(());
    }
    // Encoded by the connection, which writes in-memory records by reference (writev): a
    // replica Fetch's records are not copied into a frame (until 2026-12-04 they were: 4.8% of
    // a voter's CPU with 100 partitions, in `put_records_blob`).
    pending.responder.reply(Reply::Response(response));
    Ok(())
}

/// A replica Fetch answers each partition's client log start as its LogStartOffset (the
/// core knows its log start, on a batch boundary; a DeleteRecords inside the batch is
/// above it), which the followers take as theirs (delete_records.rs).
fn raise_to_client_log_starts(
    host: &Host<AnyIo>,
    parts: &[InboundPart],
    response: &mut fetch_response::FetchResponse,
) {
    // `fetch_response` gives one partition entry per part, in order.
    let entries = response
        .responses
        .iter_mut()
        .flat_map(|t| t.partitions.iter_mut());
    for (data, part) in entries.zip(parts) {
        debug_assert_eq!(data.partition_index, part.index);
        if let Ok((id, _, _)) = &part.target
            && let Some(store) = host.store(*id)
            && data.error_code == 0
        {
            data.log_start_offset = data
                .log_start_offset
                .max(store.client_log_start_offset() as i64);
        }
    }
}

/// Puts the records of this replica fetch's partitions that are not in their answers (slices
/// of the log's tail, written by reference; file regions, sent with sendfile) into the wire
/// response as external records; returns them in token order.
fn attach_fetch_regions(
    mut fetch_regions: HashMap<u64, RecordsSource>,
    parts: &[InboundPart],
    answers: &[PartAnswer],
    response: &mut fetch_response::FetchResponse,
) -> Vec<RecordsSource> {
    let mut regions = Vec::new();
    for (part, answer) in parts.iter().zip(answers) {
        let PartAnswer::Core(core::Message::FetchResponse(r)) = answer else {
            continue;
        };
        let Some(region) = fetch_regions.remove(&r.correlation_id) else {
            continue;
        };
        let data = response
            .responses
            .iter_mut()
            .filter(|t| t.topic == part.topic && t.topic_id == part.topic_id)
            .flat_map(|t| t.partitions.iter_mut())
            .find(|p| p.partition_index == part.index);
        if let Some(data) = data {
            data.records = Some(region.attach_to(&mut regions));
        }
    }
    regions
}

/// The one wire Fetch to a leader for the core fetches `list` (its fetch session's,
/// fetch_sessions.rs), each partition carrying its client log start, which a leader's
/// DeleteRecords waits for (delete_records.rs); `idle` says which partitions' latest answer
/// carried no records (their share of the response's bytes, `convert::fetch::partition_shares`).
pub(super) fn fetch_request(
    host: &Host<AnyIo>,
    table: &PartitionTable,
    cluster_id: &str,
    node_id: NodeId,
    list: &[(PartitionId, core::FetchRequest)],
    idle: impl Fn(PartitionId) -> bool,
    plan: &convert::FetchSessionPlan,
) -> fetch_request::FetchRequest {
    // The log start by id (a lookup of each wire partition by topic name and index walked the
    // table once per partition), read only for the partitions the Fetch names.
    let hosted: Vec<_> = list
        .iter()
        .enumerate()
        .map(|(i, (p, f))| {
            let log_start_offset = match host.store(*p) {
                Some(store) if plan.names(i) => store.client_log_start_offset() as i64,
                _ => -1,
            };
            (table.get(*p), f, idle(*p), log_start_offset)
        })
        .collect();
    convert::fetch_request_in_session(cluster_id, node_id, &hosted, plan)
}
