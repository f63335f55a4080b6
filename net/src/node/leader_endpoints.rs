//! KIP-853: the leader's endpoint in every quorum answer, and dialing a leader from it.
//!
//! Kafka's quorum responses carry `NodeEndpoints` (tagged field 0 of Fetch v16+, FetchSnapshot
//! v1, Vote v1, BeginQuorumEpoch v1, EndQuorumEpoch v1): the address of each leader the answer
//! names. A node started with `controller.quorum.bootstrap.servers` instead of
//! `controller.quorum.voters` knows no voter's address: its first Fetch goes to a bootstrap
//! server (a lane under a negative id, Kafka's -2, -3, …), whose answer names the leader, and
//! the endpoint beside it is where the node dials that leader (`learn_node_endpoints`, then
//! `requests.rs` `send_to_peer_with_id`). Once its log holds the voter set, the endpoints
//! there take over, as for any node. DescribeQuorum v2 gives every voter's listeners in its
//! `Nodes` (handlers.rs `quorum_nodes`).
//!
//! | endpoint of node N in an answer | taken from |
//! | --- | --- |
//! | N is this node | its quorum listener (own_endpoint.rs `quorum_endpoint`) |
//! | N is in the metadata quorum's voter set in force with an endpoint | that endpoint (the controller listener's name first) |
//! | N is in `controller.quorum.voters` | that address |
//! | N's endpoint came in an answer this node received | that endpoint |
//! | otherwise | none sent |

use std::collections::BTreeMap;

use ringlog_replication::{Endpoint, NodeId, Raft};

use crate::config::NodeConfig;
use crate::protocol::Response;
use crate::protocol::{
    begin_quorum_epoch_response as bqe, end_quorum_epoch_response as eqe, fetch_response,
    fetch_snapshot_response as fsr, vote_response as vote,
};

/// KIP-853: a voter's endpoint in the metadata quorum's voter set in force (`metadata` is
/// `__cluster_metadata-0`'s core; the endpoint named like our controller listener first), when
/// its VotersRecord gave one.
pub(super) fn voter_set_endpoint<'r>(
    config: &NodeConfig,
    metadata: &'r Raft,
    to: NodeId,
) -> Option<&'r Endpoint> {
    let info = metadata.voter_set().voters().get(&to)?;
    info.endpoints
        .iter()
        .find(|e| e.name == config.controller_listener_name())
        .or(info.endpoints.first())
}

/// What this node knows of quorum endpoints (the module table): its configuration, the
/// metadata partition's voter set in force, and the endpoints answers gave.
#[derive(Clone, Copy)]
pub(super) struct Endpoints<'a> {
    pub(super) config: &'a NodeConfig,
    pub(super) metadata: &'a Raft,
    pub(super) learned: &'a BTreeMap<NodeId, (String, u16)>,
}

impl Endpoints<'_> {
    /// Where peers reach node `id`'s quorum listener, when this node knows (the module table).
    pub(super) fn quorum_endpoint_of(&self, id: NodeId) -> Option<(String, u16)> {
        if id == self.config.node_id {
            return Some(super::own_endpoint::quorum_endpoint(self.config));
        }
        if let Some(endpoint) = voter_set_endpoint(self.config, self.metadata, id) {
            return Some((endpoint.host.clone(), endpoint.port));
        }
        if let Some(voter) = self.config.quorum_voters.iter().find(|v| v.node_id == id) {
            return Some((voter.host.clone(), voter.port));
        }
        self.learned.get(&id).cloned()
    }

    /// Fills the `NodeEndpoints` of a quorum answer with the endpoint of every leader it names.
    pub(super) fn fill_node_endpoints(&self, response: &mut Response) {
        let endpoints = |leaders: Vec<i32>| -> Vec<(i32, String, u16)> {
            let mut ids: Vec<i32> = leaders.into_iter().filter(|&id| id >= 0).collect();
            ids.sort_unstable();
            ids.dedup();
            ids.into_iter()
                .filter_map(|id| {
                    self.quorum_endpoint_of(id)
                        .map(|(host, port)| (id, host, port))
                })
                .collect()
        };
        match response {
            Response::Fetch(r) => {
                let leaders = r
                    .responses
                    .iter()
                    .flat_map(|t| &t.partitions)
                    .map(|p| p.current_leader.leader_id)
                    .collect();
                r.node_endpoints = endpoints(leaders)
                    .into_iter()
                    .map(|(node_id, host, port)| fetch_response::NodeEndpoint {
                        node_id,
                        host,
                        port: i32::from(port),
                        rack: None,
                    })
                    .collect();
            }
            Response::FetchSnapshot(r) => {
                let leaders = r
                    .topics
                    .iter()
                    .flat_map(|t| &t.partitions)
                    .map(|p| p.current_leader.leader_id)
                    .collect();
                r.node_endpoints = endpoints(leaders)
                    .into_iter()
                    .map(|(node_id, host, port)| fsr::NodeEndpoint {
                        node_id,
                        host,
                        port,
                    })
                    .collect();
            }
            Response::Vote(r) => {
                let leaders = r
                    .topics
                    .iter()
                    .flat_map(|t| &t.partitions)
                    .map(|p| p.leader_id)
                    .collect();
                r.node_endpoints = endpoints(leaders)
                    .into_iter()
                    .map(|(node_id, host, port)| vote::NodeEndpoint {
                        node_id,
                        host,
                        port,
                    })
                    .collect();
            }
            Response::BeginQuorumEpoch(r) => {
                let leaders = r
                    .topics
                    .iter()
                    .flat_map(|t| &t.partitions)
                    .map(|p| p.leader_id)
                    .collect();
                r.node_endpoints = endpoints(leaders)
                    .into_iter()
                    .map(|(node_id, host, port)| bqe::NodeEndpoint {
                        node_id,
                        host,
                        port,
                    })
                    .collect();
            }
            Response::EndQuorumEpoch(r) => {
                let leaders = r
                    .topics
                    .iter()
                    .flat_map(|t| &t.partitions)
                    .map(|p| p.leader_id)
                    .collect();
                r.node_endpoints = endpoints(leaders)
                    .into_iter()
                    .map(|(node_id, host, port)| eqe::NodeEndpoint {
                        node_id,
                        host,
                        port,
                    })
                    .collect();
            }
            _ => {}
        }
    }
}

/// Remembers in `learned` the endpoints a quorum answer gives for nodes this node has no
/// address for (neither in `controller.quorum.voters` nor in the voter set in force): a node
/// started with bootstrap servers dials the leader it was told of there.
pub(super) fn learn_node_endpoints(
    learned: &mut BTreeMap<NodeId, (String, u16)>,
    config: &NodeConfig,
    metadata: &Raft,
    response: &Response,
) {
    let given: Vec<(i32, String, u16)> = match response {
        Response::Fetch(r) => r
            .node_endpoints
            .iter()
            .filter_map(|e| Some((e.node_id, e.host.clone(), u16::try_from(e.port).ok()?)))
            .collect(),
        Response::FetchSnapshot(r) => r
            .node_endpoints
            .iter()
            .map(|e| (e.node_id, e.host.clone(), e.port))
            .collect(),
        Response::Vote(r) => r
            .node_endpoints
            .iter()
            .map(|e| (e.node_id, e.host.clone(), e.port))
            .collect(),
        Response::BeginQuorumEpoch(r) => r
            .node_endpoints
            .iter()
            .map(|e| (e.node_id, e.host.clone(), e.port))
            .collect(),
        Response::EndQuorumEpoch(r) => r
            .node_endpoints
            .iter()
            .map(|e| (e.node_id, e.host.clone(), e.port))
            .collect(),
        _ => Vec::new(),
    };
    for (id, host, port) in given {
        if id < 0 || id == config.node_id || host.is_empty() {
            continue;
        }
        let known = voter_set_endpoint(config, metadata, id).is_some()
            || config.quorum_voters.iter().any(|v| v.node_id == id);
        if known {
            continue;
        }
        let endpoint = (host, port);
        if learned.get(&id) != Some(&endpoint) {
            tracing::info!(
                node = id,
                address = %format!("{}:{}", endpoint.0, endpoint.1),
                "learned a quorum endpoint from an answer (KIP-853 NodeEndpoints)"
            );
            learned.insert(id, endpoint);
        }
    }
}
