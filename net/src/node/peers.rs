//! The node's side of its peers: the two lanes to each peer (transport.rs `PeerLane`: control
//! and fetch), the address they dial, the correlation ids of the requests sent on them and
//! what each waits for ([`PeerPending`]).
//!
//! Where a peer is dialed (KIP-853), in order: the endpoint the metadata quorum's voter set in
//! force gives it (the one named like our controller listener first), its
//! `controller.quorum.voters` address, a bootstrap server's address (under the negative ids
//! of `topics::bootstrap_server_ids`), or an endpoint an answer gave (leader_endpoints.rs).
//! Lanes whose peer moved are replaced at the next request.
//!
//! Owns the lanes and the pending map; reads the voter set from the metadata partition's core
//! that the node passes in. Never touches the host or the API layer.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use ringlog_replication::{NodeId, Raft};
use tokio::sync::mpsc::UnboundedSender;

use super::NodeError;
use super::leader_endpoints::voter_set_endpoint;
use super::transport::{Event, Outgoing, PeerLane, PeerLanes, PeerPending};
use crate::config::{NodeConfig, SecurityProtocol};
use crate::protocol::{Request, RequestHeader, encode_request};

pub(super) struct Peers {
    lanes: BTreeMap<NodeId, PeerLanes>,
    /// KIP-853: quorum endpoints of nodes this node has no configured or voter set address
    /// for, as answers' `NodeEndpoints` gave them (leader_endpoints.rs).
    pub(super) learned: BTreeMap<NodeId, (String, u16)>,
    /// Where the lanes report; kept to open lanes to voters added since the start.
    events: UnboundedSender<Event>,
    /// TLS towards peers when the quorum's listener is SSL.
    tls: Option<Arc<rustls::ClientConfig>>,
    max_frame: usize,
    connect_timeout: Duration,
    next_correlation_id: i32,
    /// What each request sent to a peer waits for, by (peer, wire correlation id).
    pub(super) pending: HashMap<(NodeId, i32), PeerPending>,
    /// No forwarded request in `pending` has a deadline before this (`None`: none sent since
    /// the last look): `expire_forwarded` walks `pending` only once it passed. The walk costs
    /// the map's capacity, which an election of a thousand partitions grows to thousands of
    /// Vote and BeginQuorumEpoch entries; done on every turn it was ~23 % of a voter's CPU
    /// (2026-12-07).
    earliest_forward_deadline_ms: Option<u64>,
}

impl Peers {
    /// Lanes to the configured voters, or (KIP-853) to the bootstrap servers, under the ids
    /// the core knows them by (`topics::bootstrap_server_ids`).
    pub(super) fn open(
        config: &NodeConfig,
        events: UnboundedSender<Event>,
    ) -> Result<Peers, NodeError> {
        // Peers are reached on their quorum listener; TLS when ours speaks it (every voter's
        // controller listener is configured alike).
        let tls = match &config.tls {
            Some(tls) if config.listeners.quorum().security_protocol == SecurityProtocol::Ssl => {
                Some(tls.client_config()?)
            }
            _ => None,
        };
        let mut peers = Peers {
            lanes: BTreeMap::new(),
            learned: BTreeMap::new(),
            events,
            tls,
            max_frame: config.socket_request_max_bytes as usize,
            connect_timeout: Duration::from_millis(config.request_timeout_ms.min(1000)),
            next_correlation_id: 1,
            pending: HashMap::new(),
            earliest_forward_deadline_ms: None,
        };
        let configured: Vec<(NodeId, String)> = config
            .quorum_voters
            .iter()
            .filter(|voter| voter.node_id != config.node_id)
            .map(|voter| (voter.node_id, format!("{}:{}", voter.host, voter.port)))
            .chain(
                super::topics::bootstrap_server_ids(config)
                    .into_iter()
                    .zip(&config.quorum_bootstrap_servers)
                    .map(|(id, (host, port))| (id, format!("{host}:{port}"))),
            )
            .collect();
        for (node_id, address) in configured {
            peers.open_lanes(node_id, address);
        }
        Ok(peers)
    }

    fn open_lanes(&mut self, to: NodeId, address: String) {
        let lane = || {
            PeerLane::spawn(
                to,
                address.clone(),
                self.events.clone(),
                self.max_frame,
                self.connect_timeout,
                self.tls.clone(),
            )
        };
        let lanes = PeerLanes {
            control: lane(),
            fetch: lane(),
            address,
        };
        self.lanes.insert(to, lanes);
    }

    /// KIP-853: lanes to a peer at the endpoint the voter set in force gives it, when that is
    /// not where its lanes dial: a voter added since the start has no `controller.quorum.voters`
    /// address, and a voter that moved told the leader its new one with UpdateRaftVoter
    /// (own_endpoint.rs). Lanes to the old address are dropped (their task ends; requests in
    /// flight on them go unanswered, as after a lost connection, and the core resends).
    /// KIP-853: a peer with no lanes and no voter set endpoint whose endpoint an answer gave
    /// (leader_endpoints.rs: a leader found through a bootstrap server) gets lanes there.
    fn open_lanes_from_voter_set(&mut self, config: &NodeConfig, metadata: &Raft, to: NodeId) {
        let address = match voter_set_endpoint(config, metadata, to) {
            Some(endpoint) => format!("{}:{}", endpoint.host, endpoint.port),
            None => match self.learned.get(&to) {
                Some((host, port)) if !self.lanes.contains_key(&to) => format!("{host}:{port}"),
                _ => return,
            },
        };
        if self.lanes.get(&to).is_some_and(|l| l.address == address) {
            return;
        }
        tracing::info!(to, %address, "opening lanes to a peer at its voter set (or answered) endpoint");
        self.open_lanes(to, address);
    }

    /// Queues `request` on the lane to `to` (the fetch lane when `fetch_lane`) and records
    /// what it waits for. Returns the wire correlation id of the request it queued (`None`
    /// when the peer has no lane or its lane is gone).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn send(
        &mut self,
        config: &NodeConfig,
        metadata: &Raft,
        to: NodeId,
        request: Request,
        version: i16,
        pending: PeerPending,
        fetch_lane: bool,
    ) -> Result<Option<i32>, NodeError> {
        let moved = voter_set_endpoint(config, metadata, to).is_some_and(|endpoint| {
            self.lanes.get(&to).is_none_or(|lanes| {
                !lanes.address.rsplit_once(':').is_some_and(|(host, port)| {
                    host == endpoint.host && port.parse() == Ok(endpoint.port)
                })
            })
        });
        if moved || !self.lanes.contains_key(&to) {
            self.open_lanes_from_voter_set(config, metadata, to);
        }
        let Some(PeerLanes { control, fetch, .. }) = self.lanes.get(&to) else {
            tracing::warn!(to, "no address for this peer (not a voter)");
            return Ok(None);
        };
        let correlation_id = self.next_correlation_id;
        self.next_correlation_id = self.next_correlation_id.wrapping_add(1).max(1);
        let api = request.api_key();
        let header = RequestHeader {
            api_key: api.key(),
            api_version: version,
            correlation_id,
            client_id: Some(format!("ringlog-node-{}", config.node_id)),
        };
        let frame = encode_request(&header, &request)?;
        let lane = if fetch_lane { fetch } else { control };
        if lane.send(Outgoing {
            correlation_id,
            api,
            version,
            frame,
        }) {
            if let PeerPending::Forward { deadline_ms, .. } = &pending {
                self.earliest_forward_deadline_ms = Some(
                    self.earliest_forward_deadline_ms
                        .map_or(*deadline_ms, |d| d.min(*deadline_ms)),
                );
            }
            self.pending.insert((to, correlation_id), pending);
            return Ok(Some(correlation_id));
        }
        Ok(None)
    }

    /// Whether a Vote, BeginQuorumEpoch or EndQuorumEpoch sent to a peer is unanswered (a
    /// graceful shutdown waits for its resignation to be delivered).
    pub(super) fn control_requests_pending(&self) -> bool {
        self.pending
            .values()
            .any(|p| matches!(p, PeerPending::Quorum { .. }))
    }

    /// Forwarded admin requests the controller has not answered by their deadline (a paused
    /// or cut-off controller keeps its connection open, so the lane never fails them): the
    /// client's connection is closed, as when no controller is known, and the client retries.
    /// Answered ones leave `pending` without a look here, so the earliest deadline kept may be
    /// an answered request's: the walk then finds nothing late and notes the next deadline.
    pub(super) fn expire_forwarded(&mut self, now: u64) {
        if self.earliest_forward_deadline_ms.is_none_or(|d| d > now) {
            return;
        }
        let mut late = Vec::new();
        let mut next = None::<u64>;
        for (key, pending) in &self.pending {
            if let PeerPending::Forward { deadline_ms, .. } = pending {
                if *deadline_ms <= now {
                    late.push(*key);
                } else {
                    next = Some(next.map_or(*deadline_ms, |n| n.min(*deadline_ms)));
                }
            }
        }
        self.earliest_forward_deadline_ms = next;
        for key in late {
            if let Some(PeerPending::Forward { correlation_id, .. }) = self.pending.remove(&key) {
                tracing::info!(
                    controller = key.0,
                    client_correlation_id = correlation_id,
                    "a forwarded request timed out (controller.socket.timeout.ms); closing the client's connection"
                );
            }
        }
    }
}
