//! KIP-853: a voter tells the metadata leader where it listens and which disk it is. At start
//! (and until the voter set in force agrees), a node that is a voter of `__cluster_metadata-0`
//! compares its endpoint there (its VotersRecord endpoint named like its controller listener,
//! else the first, else its `controller.quorum.voters` address) with its own quorum listener
//! (the controller listener when `controller.listener.names` separates it, else the advertised
//! listener), and its
//! directory id there with its `meta.properties` `directory.id` (once the set is in the log,
//! Kafka's kraft.version 1: a static set gets no record for a directory id alone); when either
//! differs it sends UpdateRaftVoter to the leader, as Kafka's voters do after they find the leader
//! (`KafkaRaftClient.maybeSendUpdateVoterRequest`). The leader appends a VotersRecord with
//! the new endpoint, and every node dials the voter there from then on (requests.rs
//! `open_lanes_from_voter_set`), Metadata lists it there and DescribeQuorum shows it: a voter
//! that moved address is found again without editing every node's configuration.
//!
//! | situation | what this node does |
//! | --- | --- |
//! | not a voter in the set in force, or the endpoint there is its listener and the directory id there is its own (or it has none) | nothing |
//! | the set names it with another (non-zero) directory id | nothing (another disk of this node id was added; warned once: KIP-853 would refuse the update) |
//! | its advertised host is unspecified (`0.0.0.0`, `::`) | nothing (others could not dial it; warned once) |
//! | it asked less than `controller.quorum.request.timeout.ms` ago | nothing (the answer or the record may be on its way) |
//! | it leads the metadata partition | appends the change itself (`Host::update_voter`) |
//! | it follows a known leader | sends UpdateRaftVoter (v0) to it |
//! | no leader known | nothing yet |
//!
//! A refusal (REQUEST_TIMED_OUT while a change is in flight or the leader's epoch is not
//! committed, NOT_LEADER_OR_FOLLOWER after a leader change) is only logged: the next
//! comparison, a timeout later, asks again while the set still differs.

use ringlog_replication::{Endpoint, VoterInfo};

use super::PeerPending;
use super::context::Cx;
use crate::protocol::wire::Uuid;
use crate::protocol::{Request, update_raft_voter_request as urv};

/// UpdateRaftVoter's only version (KIP-853).
const UPDATE_RAFT_VOTER_VERSION: i16 = 0;

/// This node's directory id, when it last asked, and what it warned about.
#[derive(Default)]
pub(super) struct OwnEndpoint {
    /// `directory.id` of this node's `meta.properties` (`None`: formatted without one).
    pub(super) directory_id: Option<[u8; 16]>,
    asked_ms: Option<u64>,
    warned_unspecified: bool,
    warned_other_directory: bool,
    /// Where peers reach this node's quorum listener: the controller listener's address when
    /// `controller.listener.names` separates it, else the advertised listener (computed once).
    quorum_endpoint: Option<(String, u16)>,
}

/// The endpoint of this node's quorum listener that the voter set should hold.
pub(super) fn quorum_endpoint(config: &crate::config::NodeConfig) -> (String, u16) {
    match &config.listeners.controller {
        Some(controller) => (
            controller.address.ip().to_string(),
            controller.address.port(),
        ),
        None => config.advertised_listener.clone(),
    }
}

impl OwnEndpoint {
    /// The table in the module doc; called on every turn of the event loop.
    pub(super) fn maybe_send_update(&mut self, cx: &mut Cx) {
        let now = cx.now_ms;
        let own = cx.config.node_id;
        if self.quorum_endpoint.is_none() {
            self.quorum_endpoint = Some(quorum_endpoint(cx.config));
        }
        let raft = cx.metadata_raft();
        let Some(info) = raft.voter_set().voters().get(&own) else {
            return;
        };
        // Compared by reference: this runs on every turn of the loop.
        let (host, port) = self
            .quorum_endpoint
            .as_ref()
            .map(|(host, port)| (host, *port))
            .expect("computed above");
        let listener_name = cx.config.controller_listener_name();
        let endpoint_matches = match info
            .endpoints
            .iter()
            .find(|e| e.name == listener_name)
            .or(info.endpoints.first())
        {
            Some(e) => e.host == *host && e.port == port,
            None => cx
                .config
                .quorum_voters
                .iter()
                .find(|v| v.node_id == own)
                .is_some_and(|v| v.host == *host && v.port == port),
        };
        let recorded_directory = info.directory_id;
        // Kafka's kraft.version 1: the set comes from a VotersRecord. A static set (only
        // `controller.quorum.voters`, kraft.version 0) gets no record for a directory id alone,
        // as Kafka's voters send no UpdateRaftVoter then.
        let dynamic = raft.voter_history().latest_offset().is_some();
        let epoch = raft.epoch();
        let leading = raft.is_leader();
        let leader = raft.leader_id();
        let own_directory = self.directory_id;
        let directory_id = match own_directory {
            Some(own) if recorded_directory == [0; 16] && dynamic => own,
            Some(_) if recorded_directory == [0; 16] => recorded_directory,
            Some(own) if recorded_directory != own => {
                if !self.warned_other_directory {
                    tracing::warn!(
                        recorded = %crate::meta_properties::uuid_text(&recorded_directory),
                        own = %crate::meta_properties::uuid_text(&own),
                        "the voter set names this node id with another directory id (another \
                         disk): remove that voter and add this one"
                    );
                    self.warned_other_directory = true;
                }
                return;
            }
            _ => recorded_directory,
        };
        if endpoint_matches && directory_id == recorded_directory {
            return;
        }
        let host = host.clone();
        if host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_unspecified())
        {
            if !self.warned_unspecified {
                tracing::warn!(
                    %host,
                    "the advertised listener is unspecified: not sent to the voter set (set \
                     advertised.listeners)"
                );
                self.warned_unspecified = true;
            }
            return;
        }
        if self
            .asked_ms
            .is_some_and(|asked| now < asked + cx.config.request_timeout_ms)
        {
            return;
        }
        let endpoint = Endpoint {
            name: cx.config.controller_listener_name().to_string(),
            host: host.clone(),
            port,
        };
        if leading {
            self.asked_ms = Some(now);
            let partition = cx.metadata_partition_id();
            let info = VoterInfo {
                directory_id,
                endpoints: vec![endpoint],
            };
            match cx.host.update_voter(now, partition, own, info) {
                Ok(appended) => tracing::info!(
                    endpoint_matches,
                    offset = appended.map(|a| a.last_offset),
                    "own endpoint written into the voter set (KIP-853)"
                ),
                Err(error) => tracing::info!(%error, "own endpoint not written yet"),
            }
            return;
        }
        // No leader known, or this node resigning: nothing to ask yet.
        let Some(leader) = leader.filter(|leader| *leader != own) else {
            return;
        };
        self.asked_ms = Some(now);
        let request = urv::UpdateRaftVoterRequest {
            cluster_id: Some(cx.cluster_id.to_string()),
            current_leader_epoch: i32::try_from(epoch).unwrap_or(i32::MAX),
            voter_id: own,
            voter_directory_id: Uuid(directory_id),
            listeners: vec![urv::Listener {
                name: endpoint.name,
                host: endpoint.host,
                port: endpoint.port,
            }],
            k_raft_version_feature: urv::KRaftVersionFeature {
                min_supported_version: 0,
                max_supported_version: 1,
            },
        };
        tracing::info!(
            leader,
            endpoint_matches,
            directory_id = %crate::meta_properties::uuid_text(&directory_id),
            listener = %format!("{host}:{port}"),
            "asking the leader to record this voter's listener (UpdateRaftVoter)"
        );
        cx.send_to_peer(
            leader,
            Request::UpdateRaftVoter(request),
            UPDATE_RAFT_VOTER_VERSION,
            PeerPending::OwnEndpointUpdate,
            false,
        );
    }
}
