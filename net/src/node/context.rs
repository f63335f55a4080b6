//! What the node lends the Kafka API handlers and the controller for one call: the
//! replication host, the node's configuration and partition table, the clocks' readings, the
//! authorizer, and two outboxes the node empties when the call returns (requests for peers,
//! admin answers parked until their metadata records apply).
//!
//! A handler owns its own state (`&mut self` of its module's type) and receives a `Cx` beside
//! it; it never reaches the runtime (sockets, tokio, the clock, metrics) or another handler's
//! state. The node builds a `Cx` from its fields with [`cx!`](super::cx), so the borrow checker
//! sees the handler's state and the `Cx` as disjoint, then calls the handler, then
//! `Node::after_call` sends what was queued and moves the host's output on.
//!
//! Appends go to the host here and their outputs (messages to followers, durability) are
//! delivered by `after_call`, so no handler calls up into the node.

use ringlog_engine::batch::RecordBatchBuilder;
use ringlog_engine::io::AnyIo;
use ringlog_replication::host::{Host, HostError};
use ringlog_replication::state_machine::KeyValueStateMachine;
use ringlog_replication::{NodeId, PartitionId, Raft};

use super::NodeError;
use super::acl_image::AclImage;
use super::admin_answers::{AdminAnswers, AdminResults};
use super::authorize::Authorizer;
use super::controller::{LogStart, controller_caught_up};
use super::convert::{self, PartitionTable};
use super::topic_record::topic_record_key;
use super::transport::{PeerPending, Responder};
use crate::config::NodeConfig;
use crate::protocol::{ErrorCode, Request, RequestHeader};

/// A request for a peer, queued by a handler and sent by the node after the call
/// (`Node::send_to_peer`).
pub(super) struct PeerRequest {
    pub(super) to: NodeId,
    pub(super) request: Request,
    pub(super) version: i16,
    pub(super) pending: PeerPending,
    pub(super) fetch_lane: bool,
}

pub(super) struct Cx<'a> {
    pub(super) host: &'a mut Host<AnyIo>,
    pub(super) config: &'a NodeConfig,
    pub(super) cluster_id: &'a str,
    pub(super) table: &'a PartitionTable,
    /// The node clock's reading for this call (milliseconds since the node started).
    pub(super) now_ms: u64,
    /// The wall clock's reading for this call (milliseconds since the Unix epoch), for record
    /// timestamps: nothing decides on it.
    pub(super) now_wall_ms: i64,
    /// The applied ACL image (acls.rs), for the authorizer.
    pub(super) acls: &'a AclImage,
    /// Everything of the metadata log below this offset is applied to the topic image.
    pub(super) metadata_applied_offset: u64,
    pub(super) to_peers: &'a mut Vec<PeerRequest>,
    pub(super) admin: &'a mut AdminAnswers,
}

/// Builds a [`Cx`] from a node's fields (a macro, not a method, so that the borrow checker
/// sees the fields it borrows and lets the caller borrow a handler's state beside it).
macro_rules! cx {
    ($node:expr) => {
        $crate::node::context::Cx {
            host: &mut $node.host,
            config: &$node.config,
            cluster_id: &$node.cluster_id,
            table: &$node.table,
            now_ms: $node.started.elapsed().as_millis() as u64,
            now_wall_ms: $crate::node::wall_clock_ms(),
            acls: &$node.handlers.acl_image,
            metadata_applied_offset: $node.handlers.topics.applied_offset,
            to_peers: &mut $node.to_peers,
            admin: &mut $node.handlers.admin,
        }
    };
}
#[allow(unused_imports)]
pub(super) use cx;

impl Cx<'_> {
    pub(super) fn authorizer(&self) -> Authorizer<'_> {
        Authorizer {
            config: &self.config.authorizer,
            image: self.acls,
        }
    }

    pub(super) fn metadata_partition_id(&self) -> PartitionId {
        metadata_partition_id(self.table)
    }

    pub(super) fn metadata_raft(&self) -> &Raft {
        metadata_raft(self.host, self.table)
    }

    /// `__cluster_metadata-0`'s key-value state: every kind of metadata record as applied.
    pub(super) fn metadata_state(&self) -> &KeyValueStateMachine {
        metadata_state(self.host, self.table)
    }

    /// Whether this node acts as the controller (controller.rs).
    pub(super) fn controller_active(&self) -> bool {
        controller_active(self.metadata_raft(), self.metadata_applied_offset)
    }

    /// Appends one record under `topic`'s key to the metadata log (this node must lead it):
    /// a topic record, or a tombstone (`value` None). Returns its offset.
    pub(super) fn propose_metadata_record(
        &mut self,
        topic: &str,
        value: Option<&[u8]>,
    ) -> Result<u64, ErrorCode> {
        self.propose_metadata_entry(&topic_record_key(topic), value)
    }

    /// Proposes one record under `key` to `__cluster_metadata-0` (this node leads it); returns
    /// its offset.
    pub(super) fn propose_metadata_entry(
        &mut self,
        key: &[u8],
        value: Option<&[u8]>,
    ) -> Result<u64, ErrorCode> {
        let mut builder = RecordBatchBuilder::new(0);
        builder.append(self.now_wall_ms, Some(key), value, &[]);
        self.propose_metadata_batch(builder.build().into_bytes())
    }

    /// Proposes one record batch to `__cluster_metadata-0` (this node leads it); returns the
    /// offset of its last record.
    pub(super) fn propose_metadata_batch(&mut self, bytes: bytes::Bytes) -> Result<u64, ErrorCode> {
        propose_metadata_batch(self.host, self.table, self.now_ms, bytes)
    }

    /// Queues `request` for the peer `to` (sent when the call returns).
    pub(super) fn send_to_peer(
        &mut self,
        to: NodeId,
        request: Request,
        version: i16,
        pending: PeerPending,
        fetch_lane: bool,
    ) {
        self.to_peers.push(PeerRequest {
            to,
            request,
            version,
            pending,
            fetch_lane,
        });
    }

    /// Sends a client's request to the controller and relays its answer under the client's
    /// correlation id (Kafka's brokers forward admin requests the same way, KIP-590). With no
    /// controller known, or when this node leads but has not caught up, the connection is
    /// closed (the responder dropped), and the client retries as after any broken connection.
    pub(super) fn forward_to_controller(
        &mut self,
        responder: Responder,
        header: &RequestHeader,
        request: Request,
    ) -> Result<(), NodeError> {
        let controller = self
            .metadata_raft()
            .leader_id()
            .filter(|&id| id != self.config.node_id);
        let Some(controller) = controller else {
            tracing::info!(api = ?request.api_key(), "no controller to forward to; closing");
            return Ok(());
        };
        tracing::debug!(api = ?request.api_key(), controller, "forwarded to the controller");
        let deadline_ms = self.now_ms + self.config.controller_socket_timeout_ms;
        self.send_to_peer(
            controller,
            request,
            header.api_version,
            PeerPending::Forward {
                responder,
                correlation_id: header.correlation_id,
                version: header.api_version,
                deadline_ms,
            },
            false,
        );
        Ok(())
    }

    /// Parks an admin answer until the records it waits for are applied in this metadata
    /// epoch (admin_answers.rs); the node answers what is ready when the call returns.
    pub(super) fn park_admin_answer(
        &mut self,
        responder: Responder,
        header: &RequestHeader,
        request_timeout_ms: i32,
        results: AdminResults,
        waiting: Vec<(usize, u64)>,
    ) -> Result<(), NodeError> {
        let epoch = self.metadata_raft().epoch();
        self.admin.park(
            responder,
            header,
            request_timeout_ms,
            results,
            waiting,
            epoch,
            self.now_ms,
        );
        Ok(())
    }
}

pub(super) fn metadata_partition_id(table: &PartitionTable) -> PartitionId {
    table
        .find(convert::METADATA_TOPIC, 0)
        .expect("every node hosts the metadata partition")
}

pub(super) fn metadata_raft<'h>(host: &'h Host<AnyIo>, table: &PartitionTable) -> &'h Raft {
    host.raft(metadata_partition_id(table)).expect("hosted")
}

pub(super) fn metadata_state<'h>(
    host: &'h Host<AnyIo>,
    table: &PartitionTable,
) -> &'h KeyValueStateMachine {
    &host
        .store(metadata_partition_id(table))
        .expect("the metadata partition is always hosted")
        .snapshots
        .state_machine
}

/// Whether this node acts as the controller: it leads `__cluster_metadata-0` and its topic
/// image has applied every record committed before its epoch ([`controller_caught_up`]).
pub(super) fn controller_active(metadata: &Raft, metadata_applied_offset: u64) -> bool {
    metadata.is_leader()
        && controller_caught_up(
            metadata.epoch(),
            metadata.log().epoch_cache(),
            LogStart {
                offset: metadata.log().log_start_offset(),
                epoch: metadata.log().last_fetched_epoch(),
            },
            metadata_applied_offset,
        )
}

/// Appends one record batch to `__cluster_metadata-0` (this node must lead it); returns the
/// offset of its last record. The host's outputs are the caller's to deliver.
pub(super) fn propose_metadata_batch(
    host: &mut Host<AnyIo>,
    table: &PartitionTable,
    now_ms: u64,
    bytes: bytes::Bytes,
) -> Result<u64, ErrorCode> {
    let batches = super::produce_validation::validate_produce_records(Some(&bytes), usize::MAX)
        .map_err(|(code, _)| code)?;
    match host.append(now_ms, metadata_partition_id(table), batches) {
        Ok(appended) => Ok(appended.last_offset),
        Err(HostError::Raft(_)) => Err(ErrorCode::NotController),
        Err(HostError::Storage(_)) => Err(ErrorCode::KafkaStorageError),
    }
}
