//! KIP-630 FetchSnapshot with several partitions in one request, as the simulated host does it.
//!
//! Follower side: each node keeps one FetchSnapshot *session* per leader, like Kafka's replica
//! fetcher (one thread per source broker, one request in flight). A core's
//! `FetchSnapshotRequest` waits in the session; when no request is in flight, every waiting
//! partition goes out in ONE bundle (one wire request: lost, delayed or duplicated as a whole).
//! The session frees itself when the response bundle arrives or after `request_timeout_ms`
//! (the response was lost; each core also re-sends on its own timer). A node that downloads
//! several partitions' snapshots from the same leader therefore keeps asking for all of them
//! in one request.
//!
//! Leader side: every partition of a request bundle is stepped into its core; the cores'
//! answers are collected, their bytes read from the stored snapshots and shared by the real
//! [`fair_share`] under `min(request MaxBytes, replica.fetch.snapshot.response.max.bytes)`,
//! and sent back as one response bundle. The shares are then checked against KIP-630's rules
//! (re-derived here, not by calling `fair_share` again): the total never exceeds the cap, no
//! partition gets more than it can use, no byte is held back while a partition still wants
//! some, and each partition gets at least `min(its demand, cap / partitions)`.

use std::collections::BTreeMap;

use bytes::Bytes;

use super::{Cluster, EventKind, ReplicaKey};
use crate::error::ErrorCode;
use crate::fair_share::{
    FairShareConfig, PartitionRequest, fair_share, partition_demand_bytes, response_cap_bytes,
};
use crate::message::{FetchSnapshotRequest, FetchSnapshotResponse, Message};
use crate::sim::SnapshotMutation;
use crate::types::{NodeId, PartitionId};

/// `replica.fetch.snapshot.max.bytes` in the simulator.
const PARTITION_MAX_BYTES: u64 = 1 << 20;

/// One follower's FetchSnapshot session with one leader.
#[derive(Debug, Default)]
pub(super) struct SnapshotFetcher {
    /// The newest request of each partition, waiting for the next bundle.
    waiting: BTreeMap<PartitionId, FetchSnapshotRequest>,
    /// The bundle in flight, if any.
    in_flight: Option<u64>,
}

/// A core's answer to one partition of a request bundle, before its bytes are filled.
pub(super) struct CoreAnswer {
    partition: PartitionId,
    to: NodeId,
    response: FetchSnapshotResponse,
    max_bytes: u32,
}

impl Cluster {
    /// A core wants to send a FetchSnapshot: it waits in the session with that leader.
    pub(super) fn queue_fetch_snapshot(
        &mut self,
        from: ReplicaKey,
        leader: NodeId,
        request: FetchSnapshotRequest,
    ) {
        self.fetchers
            .entry((from.0, leader))
            .or_default()
            .waiting
            .insert(from.1, request);
    }

    /// After every event: each idle session with waiting partitions sends them in one bundle.
    pub(super) fn flush_fetchers(&mut self) {
        let ready: Vec<(NodeId, NodeId)> = self
            .fetchers
            .iter()
            .filter(|(_, f)| f.in_flight.is_none() && !f.waiting.is_empty())
            .map(|(key, _)| *key)
            .collect();
        for (node, leader) in ready {
            self.next_bundle_id += 1;
            let bundle_id = self.next_bundle_id;
            let fetcher = self.fetchers.get_mut(&(node, leader)).expect("listed");
            fetcher.in_flight = Some(bundle_id);
            let parts: Vec<(PartitionId, Message)> = std::mem::take(&mut fetcher.waiting)
                .into_iter()
                .map(|(p, r)| (p, Message::FetchSnapshotRequest(r)))
                .collect();
            self.count("fetch-snapshot-request");
            if parts.len() > 1 {
                self.count("fetch-snapshot-multi-partition-request");
            }
            let timeout_ms = self.nodes[&(node, 0)].config.request_timeout_ms;
            self.schedule(
                self.now_ms + timeout_ms,
                EventKind::FetcherTimeout {
                    node,
                    leader,
                    bundle_id,
                },
            );
            self.send_bundle(node, leader, bundle_id, parts);
        }
    }

    pub(super) fn fetcher_timeout(&mut self, node: NodeId, leader: NodeId, bundle_id: u64) {
        if let Some(fetcher) = self.fetchers.get_mut(&(node, leader))
            && fetcher.in_flight == Some(bundle_id)
        {
            fetcher.in_flight = None;
        }
    }

    fn send_bundle(
        &mut self,
        from: NodeId,
        to: NodeId,
        bundle_id: u64,
        parts: Vec<(PartitionId, Message)>,
    ) {
        let to_incarnation = self.incarnation(to);
        for at in self.delivery_times(from, to) {
            self.schedule(
                at,
                EventKind::DeliverSnapshotBundle {
                    from,
                    to,
                    to_incarnation,
                    bundle_id,
                    parts: parts.clone(),
                },
            );
        }
    }

    /// A request bundle reaches the leader, or a response bundle the follower.
    pub(super) fn deliver_snapshot_bundle(
        &mut self,
        from: NodeId,
        to: NodeId,
        bundle_id: u64,
        parts: Vec<(PartitionId, Message)>,
    ) {
        let is_request = parts
            .iter()
            .any(|(_, m)| matches!(m, Message::FetchSnapshotRequest(_)));
        if !is_request {
            if let Some(fetcher) = self.fetchers.get_mut(&(to, from))
                && fetcher.in_flight == Some(bundle_id)
            {
                fetcher.in_flight = None;
            }
            for (partition, message) in parts {
                self.step((to, partition), from, message);
            }
            return;
        }
        self.serving = Some(Vec::new());
        for (partition, message) in parts {
            self.step((to, partition), from, message);
        }
        let answers = self.serving.take().unwrap_or_default();
        self.serve_bundle(to, bundle_id, answers);
    }

    /// `Work::SendFetchSnapshotResponse`: collected while a bundle is being answered.
    pub(super) fn answer_fetch_snapshot(
        &mut self,
        replica: ReplicaKey,
        to: NodeId,
        response: FetchSnapshotResponse,
        max_bytes: u32,
    ) {
        let answer = CoreAnswer {
            partition: replica.1,
            to,
            response,
            max_bytes,
        };
        match &mut self.serving {
            Some(answers) => answers.push(answer),
            // Every request arrives in a bundle, but answer a lone one all the same.
            None => {
                self.next_bundle_id += 1;
                let bundle_id = self.next_bundle_id;
                self.serve_bundle(replica.0, bundle_id, vec![answer]);
            }
        }
    }

    /// Leader: fills the answers from the stored snapshots, shares the response's bytes and
    /// sends one response bundle per requester.
    fn serve_bundle(&mut self, leader: NodeId, bundle_id: u64, mut answers: Vec<CoreAnswer>) {
        let Some(to) = answers.first().map(|a| a.to) else {
            return;
        };
        debug_assert!(
            answers.iter().all(|a| a.to == to),
            "one requester per bundle"
        );
        let config = FairShareConfig {
            partition_max_bytes: PARTITION_MAX_BYTES,
            response_max_bytes: self.snapshot_response_max_bytes,
        };
        // The wire request has one MaxBytes for all partitions; errors carry 0.
        let request_max_bytes = answers.iter().map(|a| a.max_bytes).max().unwrap_or(0);
        let cap_bytes = response_cap_bytes(
            i32::try_from(request_max_bytes).unwrap_or(i32::MAX),
            &config,
        );
        let mut sources: Vec<Option<Bytes>> = Vec::with_capacity(answers.len());
        let mut requests = Vec::with_capacity(answers.len());
        for answer in &mut answers {
            let mut source = None;
            let mut request = PartitionRequest {
                remaining_bytes: 0,
                max_bytes: 0,
            };
            let response = &mut answer.response;
            if response.error_code == ErrorCode::None {
                let found = self.nodes[&(leader, answer.partition)]
                    .store
                    .snapshots
                    .get(&response.snapshot_id.offset)
                    .filter(|(sid, _)| *sid == response.snapshot_id)
                    .map(|(_, bytes)| bytes.clone());
                match found {
                    None => response.error_code = ErrorCode::SnapshotNotFound,
                    Some(bytes) => {
                        let size = bytes.len() as u64;
                        match PartitionRequest::from_wire(
                            size,
                            response.position as i64,
                            i32::try_from(answer.max_bytes).unwrap_or(i32::MAX),
                        ) {
                            None => response.error_code = ErrorCode::PositionOutOfRange,
                            Some(r) => {
                                response.size = size;
                                request = r;
                                source = Some(bytes);
                            }
                        }
                    }
                }
            }
            if response.error_code != ErrorCode::None {
                self.count("fetch-snapshot-error");
            }
            sources.push(source);
            requests.push(request);
        }
        let shares = match self.options.snapshot_mutation {
            // Broken on purpose: every partition gets all it asks for, whatever the cap.
            Some(SnapshotMutation::IgnoreFairShare) => requests
                .iter()
                .map(|r| partition_demand_bytes(r, &config))
                .collect(),
            // Broken on purpose: first come, first served within the cap.
            Some(SnapshotMutation::UnfairShare) => {
                let mut left_bytes = cap_bytes;
                requests
                    .iter()
                    .map(|r| {
                        let share = partition_demand_bytes(r, &config).min(left_bytes);
                        left_bytes -= share;
                        share
                    })
                    .collect()
            }
            _ => fair_share(cap_bytes, &config, &requests),
        };
        self.check_fair_shares(leader, cap_bytes, &config, &answers, &requests, &shares);
        let mut parts = Vec::with_capacity(answers.len());
        let mut with_bytes = 0;
        for ((answer, source), share) in answers.into_iter().zip(sources).zip(shares) {
            let mut response = answer.response;
            if let Some(bytes) = source {
                let start = response.position as usize;
                response.unaligned_records = bytes.slice(start..start + share as usize);
                with_bytes += usize::from(share > 0);
            }
            parts.push((answer.partition, Message::FetchSnapshotResponse(response)));
        }
        if with_bytes > 1 {
            self.count("fetch-snapshot-shared");
        }
        self.send_bundle(leader, to, bundle_id, parts);
    }

    /// KIP-630's sharing rules, checked on what the leader is about to send.
    fn check_fair_shares(
        &mut self,
        leader: NodeId,
        cap_bytes: u64,
        config: &FairShareConfig,
        answers: &[CoreAnswer],
        requests: &[PartitionRequest],
        shares: &[u64],
    ) {
        let demands: Vec<u64> = requests
            .iter()
            .map(|r| partition_demand_bytes(r, config))
            .collect();
        let total: u64 = shares.iter().sum();
        let total_demand: u64 = demands.iter().sum();
        let wanting = demands.iter().filter(|&&d| d > 0).count() as u64;
        let average = cap_bytes.checked_div(wanting).unwrap_or(0);
        let partitions: Vec<PartitionId> = answers.iter().map(|a| a.partition).collect();
        let context = || {
            format!(
                "leader {leader}: FetchSnapshot response for partitions {partitions:?}, cap {cap_bytes}, demands {demands:?}, shares {shares:?}"
            )
        };
        if total > cap_bytes {
            let message = format!("{}: the shares exceed the cap", context());
            self.fail(message);
        } else if shares.iter().zip(&demands).any(|(s, d)| s > d) {
            let message = format!("{}: a share exceeds its demand", context());
            self.fail(message);
        } else if total < cap_bytes.min(total_demand) {
            let message = format!(
                "{}: bytes held back while a partition wants more",
                context()
            );
            self.fail(message);
        } else if shares
            .iter()
            .zip(&demands)
            .any(|(&s, &d)| s < d.min(average))
        {
            let message = format!("{}: a partition got less than the average", context());
            self.fail(message);
        }
    }
}
