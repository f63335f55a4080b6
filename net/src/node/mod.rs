//! The node: the runtime around the replication host (`ringlog_replication::host::Host`: the
//! core, the partition stores and the executor of the core's work), with the sockets, the clock,
//! signals and metrics, driven by one event loop on one thread (docs/node.md).
//!
//! ```text
//!  sockets (transport.rs) ──Event──▶ ┌────────────── event loop ──────────────┐
//!  peer lanes ─────────────Event──▶ │ host.step / tick / append / pump       │──▶ Host<AnyIo>
//!  ring readiness fd ──────────────▶ │ deliver the host's Output, in order:   │◀── Vec<Output>
//!  snapshot writer threads ────────▶ │   messages (peer lanes, answer slots)  │
//!                                    │   producer state, waiters, snapshots   │
//!                                    └────────────────────────────────────────┘
//! ```
//!
//! The host keeps the persistence rules (no re-entrancy into the core, quorum-state durable
//! before what follows it, messages held behind flushes, durability reported only after an
//! fdatasync); the node only moves what the host returns to sockets and to the API layer.

mod acls;
mod admin_answers;
mod admission;
mod authorize;
mod broker_configs;
mod configs;
#[macro_use]
mod context;
mod controller;
pub mod convert;
mod create_partitions;
mod delete_records;
mod delete_topics;
mod describe_cluster;
mod error;
mod fetch_sessions;
mod fetch_snapshot;
mod group_metadata;
mod group_offsets;
mod groups;
mod handlers;
mod idempotence;
mod leader_endpoints;
mod metadata;
mod observe;
mod offset_expiry;
mod own_endpoint;
mod partition_dirs;
mod partition_table;
pub mod placement;
mod produce_validation;
mod producer_ids;
pub mod producer_state;
pub mod producer_state_file;
mod pump;
mod remote_leaders;
mod shutdown;
mod storage_faults;
mod voter_changes;
use pump::{ReadinessFd, storage_signal};
mod requests;
mod retention;
mod scram;
pub mod scram_record;
mod snapshots;
mod topic_image;
mod topic_record;
mod topics;
pub mod transport;
pub mod unclean;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::rc::Rc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use ringlog_engine::io::{AnyIo, Io};
use ringlog_engine::log::LogConfig;
use ringlog_replication::host::{Host, HostConfig, HostError, Output, PartitionSpec, StorageError};
use ringlog_replication::{self as core, NodeId, PartitionId};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

use crate::config::{NodeConfig, SecurityProtocol};
use crate::meta_properties::MetaProperties;
use crate::metrics::MetricsServer;
use crate::protocol::ApiKey;
use crate::server::{FileRegion, RecordsSource, Server, ServerConfig, ServerError, ServerMetrics};
use convert::{InboundPart, PartAnswer, PartitionTable};
use transport::{Event, NodeHandler, PeerLane, PeerLanes, PeerPending, Responder};

pub use error::NodeError;

/// Starts a node from its configuration and runs it until SIGTERM or SIGINT (graceful: a leader
/// resigns first). Blocks the calling thread.
pub fn run(mut config: NodeConfig) -> Result<(), NodeError> {
    let meta = MetaProperties::check(&config.metadata_log_dir, config.node_id, None)?;
    // KIP-853: this disk's directory id goes into every request the cores send.
    config.directory_id = meta.directory_id;
    // tokio-uring's runtime is a current-thread tokio runtime with a LocalSet: the event loop,
    // the server's connections and the peer lanes all run on this one thread.
    let mut builder = tokio_uring::builder();
    builder.entries(256);
    builder.start(async move {
        let (events_tx, events_rx) = unbounded_channel();
        let mut node = Node::open(config, meta.cluster_id, events_tx.clone())?;
        node.handlers.own_endpoint.directory_id = meta.directory_id;
        let listener_tls = |protocol: SecurityProtocol| match (&node.config.tls, protocol) {
            (Some(tls), protocol) if protocol.uses_tls() => tls.server_config().map(Some),
            _ => Ok(None),
        };
        let listeners = &node.config.listeners;
        let client_tls = listener_tls(listeners.client.security_protocol)?;
        let controller_tls = match &listeners.controller {
            Some(controller) => listener_tls(controller.security_protocol)?,
            None => None,
        };
        let server_config = ServerConfig {
            // The node answers ApiVersions itself, listing only the APIs it serves.
            answer_api_versions: false,
            client_tls,
            controller_tls,
            client_sasl: listeners
                .client
                .security_protocol
                .uses_sasl()
                .then(|| node.config.sasl_enabled_mechanisms.clone()),
            metrics: ServerMetrics::register(&node.observer.registry()),
            ..ServerConfig::from_node_config(&node.config)
        };
        let handler =
            NodeHandler::new(events_tx).with_credentials(node.handlers.credentials.shared());
        let server =
            Server::start(server_config, Rc::new(handler)).map_err(|error| match error {
                ServerError::Bind { address, source } => NodeError::Bind {
                    address: address.to_string(),
                    source,
                },
                other => NodeError::Runtime(std::io::Error::other(other.to_string())),
            })?;
        let _metrics_server = match node.config.metrics_listener {
            Some(address) => Some(
                MetricsServer::start(address, node.observer.registry()).map_err(|source| {
                    NodeError::Bind {
                        address: address.to_string(),
                        source,
                    }
                })?,
            ),
            None => None,
        };
        tracing::info!(
            node_id = node.config.node_id,
            listener = %server.local_addr(),
            controller_listener = ?server.controller_local_addr(),
            voter = node.config.is_voter(),
            io = node.host.io().backend_name(),
            "node started"
        );
        let result = node.run(events_rx).await;
        // The loop answered or failed every request it held; let the connections write the
        // last answers, then close them.
        server.stop(Duration::from_millis(200)).await;
        result
    })
}

/// Why the event loop woke up.
enum Wake {
    Signal,
    Event(Option<Event>),
    SnapshotDone(snapshots::SnapshotDone),
    /// The ring posted a completion (its readiness fd became readable).
    Storage,
    Timer,
}

/// A request from a peer waiting for the core's answers (one per partition).
struct PendingRequest {
    responder: Responder,
    correlation_id: i32,
    api: ApiKey,
    version: i16,
    parts: Vec<InboundPart>,
    answers: Vec<Option<PartAnswer>>,
    /// KIP-630: per answer slot, the snapshot file region holding that FetchSnapshot answer's
    /// bytes (sent with sendfile).
    snapshot_regions: Vec<Option<FileRegion>>,
    started_ms: u64,
    /// The core is still being stepped with this request's parts (`start_raft_request`).
    stepping: bool,
    /// A replica Fetch's parked parts were asked to answer early, because another part of the
    /// same request had an answer (`requests.rs`, `release_parked_parts`).
    released: bool,
}

pub(crate) struct Node {
    config: NodeConfig,
    /// Snapshot writer threads report completion here (snapshots.rs); the loop takes the
    /// receiver when it starts.
    snapshot_done_tx: UnboundedSender<snapshots::SnapshotDone>,
    snapshot_done_rx: Option<UnboundedReceiver<snapshots::SnapshotDone>>,
    cluster_id: String,
    table: PartitionTable,
    /// The replication core, the partition stores and the executor of the core's work.
    host: Host<AnyIo>,
    started: Instant,
    /// Wall-clock milliseconds at `started`, for DescribeQuorum's timestamps.
    started_wall_ms: u64,
    peers: BTreeMap<NodeId, PeerLanes>,
    /// KIP-853: quorum endpoints of nodes this node has no configured or voter set address
    /// for, as answers' `NodeEndpoints` gave them (leader_endpoints.rs).
    learned_endpoints: BTreeMap<NodeId, (String, u16)>,
    /// Where peer lanes report; kept to open lanes to voters added since the start.
    peer_events: UnboundedSender<Event>,
    /// TLS towards peers when the quorum's listener is SSL.
    peer_tls: Option<std::sync::Arc<rustls::ClientConfig>>,
    next_peer_correlation_id: i32,
    peer_pending: HashMap<(NodeId, i32), PeerPending>,
    /// One replica Fetch of ours waiting at each leader (fetch_sessions.rs).
    fetch_sessions: fetch_sessions::FetchSessions,
    /// KIP-630: the cores' FetchSnapshot requests of the work being executed, by leader; each
    /// leader gets one wire request with all of them (`send_fetches`).
    snapshot_fetches: BTreeMap<NodeId, Vec<(PartitionId, core::FetchSnapshotRequest)>>,
    pending: HashMap<u64, PendingRequest>,
    next_pending_id: u64,
    /// Vote/BeginQuorumEpoch/EndQuorumEpoch answer slots, oldest first, by (sender, API, partition).
    fifo: HashMap<(NodeId, ApiKey, PartitionId), VecDeque<(u64, usize)>>,
    /// Replica fetch answer slots by the core correlation id we gave the fetch.
    fetch_slots: HashMap<u64, (u64, usize)>,
    /// File regions of replica fetch answers, by core correlation id, until their wire
    /// response is sent.
    fetch_regions: HashMap<u64, FileRegion>,
    /// The latest replica fetch of each (replica, partition), to answer one it supersedes.
    latest_replica_fetch: HashMap<(NodeId, PartitionId), u64>,
    next_core_correlation_id: u64,
    /// Replica Fetch requests whose parked parts are to be answered now (requests.rs).
    parked_releases: Vec<u64>,
    handlers: handlers::State,
    /// Leaders of partitions this node is not a replica of, as replicas reported them.
    remote_leaders: remote_leaders::RemoteLeaders,
    /// Refused quorum requests, for a rate-limited warning (admission.rs).
    refusals: admission::RefusalLog,
    /// Last (leader, epoch) logged per partition.
    last_leader: BTreeMap<PartitionId, (Option<NodeId>, u32)>,
    /// Set by SIGTERM/SIGINT: the loop ends at this time or once the resignation is delivered.
    shutdown_until_ms: Option<u64>,
    /// KRaft's metrics, fed once per loop iteration.
    observer: observe::Observer,
    /// Warns of loop turns that hold the thread, naming the slowest step and the slowest work
    /// item or `pump` stage inside it.
    stall: observe::StallWatch,
    /// When to ask the partitions waiting for disk space to flush again (storage_faults.rs).
    space_retry: storage_faults::SpaceRetry,
    /// Partitions taken offline by a storage error (storage_faults.rs).
    offline: storage_faults::OfflinePartitions,
    /// Requests for peers the handlers queued in their last call (context.rs), sent by
    /// `after_call`.
    to_peers: Vec<context::PeerRequest>,
}

impl Node {
    fn open(
        config: NodeConfig,
        cluster_id: String,
        events: UnboundedSender<Event>,
    ) -> Result<Node, NodeError> {
        let io = AnyIo::from_env(Some(&config.metadata_log_dir))?;
        let table = PartitionTable::metadata_only();
        let voter_ids: Vec<NodeId> = config.quorum_voters.iter().map(|v| v.node_id).collect();
        let specs = table
            .ids()
            .map(|id| PartitionSpec {
                id,
                dir: config.metadata_log_dir.join(table.dir_name(id)),
                log_config: LogConfig {
                    segment_size_bytes: config.segment_size_bytes,
                    max_batch_size_bytes: (config.message_max_bytes as usize)
                        .max(ringlog_engine::batch::DEFAULT_MAX_BATCH_SIZE_BYTES),
                    ..LogConfig::default()
                },
                // The metadata partition is KRaft's snapshotted log.
                keeps_snapshots: true,
            })
            .collect();
        let quorum = topics::quorum_config(&config, &voter_ids)?;
        let host_config = HostConfig::new(
            cluster_id.clone(),
            voter_ids,
            snapshots::policy_config(&config),
            config.fetch_snapshot_max_bytes,
        );
        let mut host = Host::open(io, host_config, &quorum, specs, random_seed(), 0)?;
        let stall = observe::StallWatch::new(config.fetch_timeout_ms);
        host.set_probe(Box::new(stall.probe()));
        let max_frame = config.socket_request_max_bytes as usize;
        let connect_timeout = Duration::from_millis(config.request_timeout_ms.min(1000));
        // Peers are reached on their quorum listener; TLS when ours speaks it (every voter's
        // controller listener is configured alike).
        let peer_tls = match &config.tls {
            Some(tls) if config.listeners.quorum().security_protocol == SecurityProtocol::Ssl => {
                Some(tls.client_config()?)
            }
            _ => None,
        };
        let mut peers = BTreeMap::new();
        // Lanes to the configured voters, or (KIP-853) to the bootstrap servers, under the ids
        // the core knows them by (`topics::bootstrap_server_ids`).
        let configured_peers: Vec<(NodeId, String)> = config
            .quorum_voters
            .iter()
            .filter(|voter| voter.node_id != config.node_id)
            .map(|voter| (voter.node_id, format!("{}:{}", voter.host, voter.port)))
            .chain(
                topics::bootstrap_server_ids(&config)
                    .into_iter()
                    .zip(&config.quorum_bootstrap_servers)
                    .map(|(id, (host, port))| (id, format!("{host}:{port}"))),
            )
            .collect();
        for (node_id, address) in configured_peers {
            let lane = |events: &UnboundedSender<Event>| {
                PeerLane::spawn(
                    node_id,
                    address.clone(),
                    events.clone(),
                    max_frame,
                    connect_timeout,
                    peer_tls.clone(),
                )
            };
            peers.insert(
                node_id,
                PeerLanes {
                    control: lane(&events),
                    fetch: lane(&events),
                    address: address.clone(),
                },
            );
        }
        let observer = observe::Observer::new(table.ids().map(|id| {
            let dir = config.metadata_log_dir.join(table.dir_name(id));
            (id, table.dir_name(id), dir)
        }));
        let started_wall_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let (snapshot_done_tx, snapshot_done_rx) = unbounded_channel();
        let mut node = Node {
            snapshot_done_tx,
            snapshot_done_rx: Some(snapshot_done_rx),
            config,
            cluster_id,
            table,
            host,
            started: Instant::now(),
            started_wall_ms,
            peers,
            learned_endpoints: BTreeMap::new(),
            peer_events: events.clone(),
            peer_tls,
            next_peer_correlation_id: 1,
            peer_pending: HashMap::new(),
            fetch_sessions: Default::default(),
            snapshot_fetches: BTreeMap::new(),
            pending: HashMap::new(),
            next_pending_id: 1,
            fifo: HashMap::new(),
            fetch_slots: HashMap::new(),
            fetch_regions: HashMap::new(),
            latest_replica_fetch: HashMap::new(),
            next_core_correlation_id: 1,
            parked_releases: Vec::new(),
            handlers: handlers::State::default(),
            remote_leaders: remote_leaders::RemoteLeaders::default(),
            refusals: admission::RefusalLog::default(),
            last_leader: BTreeMap::new(),
            shutdown_until_ms: None,
            stall,
            observer,
            space_retry: storage_faults::SpaceRetry::default(),
            offline: storage_faults::OfflinePartitions::default(),
            to_peers: Vec::new(),
        };
        // Idempotent producing's state is read from each log here, before the loop runs, and
        // then follows every append: never a scan of the log on the loop when this node becomes
        // leader (idempotence.rs).
        let ids: Vec<PartitionId> = node.host.stores().map(|(id, _)| id).collect();
        for id in ids {
            node.ensure_producer_state(id)?;
        }
        node.preopen_partitions()?;
        node.handlers.groups = groups::GroupsState::new(node.config.groups.clone(), random_seed());
        Ok(node)
    }

    fn now_ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    /// After a handler's call with a [`context::Cx`]: sends the requests it queued for peers,
    /// answers the admin requests whose records are applied, and moves the host's output on
    /// (what its appends produced).
    fn after_call(&mut self) -> Result<(), NodeError> {
        for r in std::mem::take(&mut self.to_peers) {
            self.send_to_peer(r.to, r.request, r.version, r.pending, r.fetch_lane)?;
        }
        self.answer_admin()?;
        if self.host.has_output() {
            self.deliver()?;
        }
        Ok(())
    }

    /// Answers the parked admin requests whose metadata records are applied (admin_answers.rs).
    fn answer_admin(&mut self) -> Result<(), NodeError> {
        let metadata = context::metadata_raft(&self.host, &self.table);
        let (epoch, leading) = (metadata.epoch(), metadata.is_leader());
        let now = self.now_ms();
        self.handlers
            .admin
            .answer_ready(self.handlers.topics.applied_offset, epoch, leading, now)
    }

    // ---- services of context.rs, for the handlers still reached through the node ----------

    fn metadata_partition_id(&self) -> PartitionId {
        context::metadata_partition_id(&self.table)
    }

    fn metadata_raft(&self) -> &core::Raft {
        context::metadata_raft(&self.host, &self.table)
    }

    fn metadata_state(&self) -> &ringlog_replication::state_machine::KeyValueStateMachine {
        context::metadata_state(&self.host, &self.table)
    }

    fn controller_active(&self) -> bool {
        context::controller_active(self.metadata_raft(), self.handlers.topics.applied_offset)
    }

    fn authorizer(&self) -> authorize::Authorizer<'_> {
        authorize::Authorizer {
            config: &self.config.authorizer,
            image: &self.handlers.acl_image,
        }
    }

    fn allowed(&self, requester: &authorize::Requester, api: ApiKey, name: &str) -> bool {
        self.authorizer().allowed(requester, api, name)
    }

    fn propose_metadata_record(
        &mut self,
        topic: &str,
        value: Option<&[u8]>,
    ) -> Result<u64, crate::protocol::ErrorCode> {
        let offset = cx!(self).propose_metadata_record(topic, value)?;
        self.deliver()
            .map_err(|_| crate::protocol::ErrorCode::KafkaStorageError)?;
        Ok(offset)
    }

    fn propose_metadata_entry(
        &mut self,
        key: &[u8],
        value: Option<&[u8]>,
    ) -> Result<u64, crate::protocol::ErrorCode> {
        let offset = cx!(self).propose_metadata_entry(key, value)?;
        self.deliver()
            .map_err(|_| crate::protocol::ErrorCode::KafkaStorageError)?;
        Ok(offset)
    }

    fn propose_metadata_batch(
        &mut self,
        bytes: bytes::Bytes,
    ) -> Result<u64, crate::protocol::ErrorCode> {
        let offset = cx!(self).propose_metadata_batch(bytes)?;
        self.deliver()
            .map_err(|_| crate::protocol::ErrorCode::KafkaStorageError)?;
        Ok(offset)
    }

    fn forward_to_controller(
        &mut self,
        responder: Responder,
        header: &crate::protocol::RequestHeader,
        request: crate::protocol::Request,
    ) -> Result<(), NodeError> {
        cx!(self).forward_to_controller(responder, header, request)?;
        self.after_call()
    }

    fn park_admin_answer(
        &mut self,
        responder: Responder,
        header: &crate::protocol::RequestHeader,
        request_timeout_ms: i32,
        results: admin_answers::AdminResults,
        waiting: Vec<(usize, u64)>,
    ) -> Result<(), NodeError> {
        cx!(self).park_admin_answer(responder, header, request_timeout_ms, results, waiting)?;
        self.answer_admin()
    }

    // ---- the topic controller's partitions (topic_image.rs, retention.rs, delete_records.rs) --
    //
    // The topic image and the controller's state are `handlers.topics`; what they decide about
    // the partitions this node runs (start, stop, cut a log's start) is done here, because it
    // touches the node's own bookkeeping (partition table, producer state, metrics, waiters).

    /// Brings the metadata images up to the metadata partition's key-value state (which holds
    /// the latest snapshot plus every committed record applied after it, snapshots.rs): ACLs,
    /// SCRAM credentials, dynamic node configs, and the topic image, starting the partitions of
    /// new topics and stopping deleted ones (topic_image.rs); then answers the admin requests
    /// waiting for them.
    fn apply_metadata_records(&mut self) -> Result<(), NodeError> {
        // Between work lists, like the rest of this: retention's snapshots are reported to
        // the core by the same pump round.
        self.maybe_enforce_retention()?;
        let changes = topic_image::apply_images(&mut self.handlers, &self.host, &self.table);
        if let Some(changes) = changes {
            for change in changes {
                match change {
                    topic_image::TopicChange::Deleted(topic) => self.stop_topic(&topic)?,
                    topic_image::TopicChange::Started {
                        topic,
                        from,
                        config_changed,
                    } => {
                        for index in from..topic.partitions {
                            if topic_image::hosts_partition(&self.config, &topic, index) {
                                self.start_partition(&topic, index)?;
                            }
                        }
                        topic_image::apply_topic_settings(
                            &mut self.host,
                            &self.table,
                            &self.config,
                            &topic,
                            from,
                            config_changed,
                        );
                    }
                }
            }
            partition_dirs::sweep_leftovers(
                &mut self.handlers.topics.swept,
                &mut self.host,
                &self.config.metadata_log_dir,
                self.handlers.topics.applied_offset,
            )?;
        }
        self.answer_admin()
    }

    /// Opens (or recovers) a topic partition and starts its Raft group (topic_image.rs,
    /// `open_partition`), with its producer state and metrics.
    fn start_partition(
        &mut self,
        topic: &topics::TopicRecord,
        index: i32,
    ) -> Result<(), NodeError> {
        if let Some(error) = self.offline_partition_error(&topic.name, index) {
            // Taken offline by a storage error: it stays so until the node restarts.
            tracing::warn!(topic = %topic.name, index, error, "not starting an offline partition");
            return Ok(());
        }
        let now = self.now_ms();
        let (id, dir, recovered) = topic_image::open_partition(
            &mut self.host,
            &mut self.table,
            &self.config,
            self.handlers.topics.applied_offset,
            topic,
            index,
            now,
        )?;
        self.adopt_preopened_producer_state(id, &dir);
        // Idempotent producing's state exists from the partition's start and follows every
        // append, the follower's too: a follower that becomes leader answers its first Produce
        // without reading its whole log on the loop (seen in scripts/fault-run.sh as 1.5-6 s
        // turns on a new leader of a topic created while the node ran). A new partition's
        // log is empty, so this reads nothing; a preopened one was read before the loop.
        self.ensure_producer_state(id)?;
        self.observer
            .add_partition(id, self.table.dir_name(id), &dir);
        tracing::info!(partition = id, dir = %dir.display(), ?recovered, "partition started");
        Ok(())
    }

    /// Stops every partition of a topic that left the image and removes its folders
    /// (delete_topics.rs).
    fn stop_topic(&mut self, topic: &topics::TopicRecord) -> Result<(), NodeError> {
        for id in topic_image::topic_partition_ids(&self.table, topic) {
            self.stop_partition(id, topic.topic_id)?;
        }
        self.forget_remote_leaders(&topic.name);
        tracing::info!(topic = %topic.name, "topic deleted");
        Ok(())
    }

    /// Takes one partition out of the node. Called between work lists (from `pump`), so no
    /// work of the partition is half executed; what still refers to it is dropped here.
    fn stop_partition(
        &mut self,
        id: PartitionId,
        topic_id: crate::protocol::wire::Uuid,
    ) -> Result<(), NodeError> {
        self.fail_partition_waiters(id, crate::protocol::ErrorCode::UnknownTopicOrPartition)?;
        // The host drops the partition's core, queued reports and held messages, and closes
        // its log after its in-flight I/O (other logs' completions stay in the ring).
        let dir = self.host.remove_partition(id);
        self.forget_partition(id, crate::protocol::ErrorCode::UnknownTopicOrPartition)?;
        let Some(dir) = dir else {
            return Ok(());
        };
        partition_dirs::remove_partition_dir(&dir, topic_id).map_err(NodeError::Runtime)?;
        Ok(())
    }

    /// Forgets a partition the host no longer runs (its topic was deleted, or a storage error
    /// took it offline): what waits on it is answered `code`, lookups skip it.
    fn forget_partition(
        &mut self,
        id: PartitionId,
        code: crate::protocol::ErrorCode,
    ) -> Result<(), NodeError> {
        self.fail_partition_waiters(id, code)?;
        self.observer.remove_partition(id);
        // Lookups skip it from now on: peer messages and client requests for it are answered
        // UNKNOWN_TOPIC_OR_PARTITION, late responses are refused by the core (no group).
        self.table.remove(id);
        self.last_leader.remove(&id);
        self.latest_replica_fetch.retain(|(_, p), _| *p != id);
        self.fifo.retain(|(_, _, p), _| *p != id);
        // Peer requests (a replica's Fetch long-polling in the core, a Vote) that carry this
        // partition among others would otherwise wait for an answer that never comes, holding
        // back the other partitions' answers until the peer's request timeout.
        let waiting: Vec<(u64, usize)> = self
            .pending
            .iter()
            .flat_map(|(pid, pending)| {
                pending
                    .parts
                    .iter()
                    .enumerate()
                    .filter(move |(slot, part)| {
                        pending.answers[*slot].is_none()
                            && part.target.as_ref().is_ok_and(|(p, _, _)| *p == id)
                    })
                    .map(move |(slot, _)| (*pid, slot))
            })
            .collect();
        for (pid, slot) in &waiting {
            self.fill(*pid, *slot, convert::PartAnswer::Error(code));
        }
        for pid in waiting
            .iter()
            .map(|(pid, _)| *pid)
            .collect::<std::collections::BTreeSet<_>>()
        {
            self.maybe_complete(pid)?;
        }
        Ok(())
    }

    /// At start-up, before the loop serves: recovers the partitions of every topic this node
    /// knows from its own metadata log whose folder is here (topic_image.rs, `preopen_list`),
    /// and reads their producer state, so that starting them when the committed topic image
    /// reaches them takes no recovery on the event loop.
    fn preopen_partitions(&mut self) -> Result<(), NodeError> {
        let started = std::time::Instant::now();
        let (topics, folders) =
            topic_image::preopen_list(&mut self.host, &self.table, &self.config)?;
        let mut opened = 0;
        for (dir, log_config) in folders {
            match self.host.preopen(dir.clone(), log_config) {
                Ok(()) => {
                    self.read_preopened_producer_state(&dir)?;
                    opened += 1;
                }
                Err(error) => {
                    tracing::warn!(dir = %dir.display(), %error, "not recovered ahead; it is opened when started")
                }
            }
        }
        tracing::info!(
            topics,
            partitions = opened,
            took_ms = started.elapsed().as_millis() as u64,
            "partitions recovered before serving"
        );
        Ok(())
    }

    /// Applies the retention rules to every `cleanup.policy=delete` partition (retention.rs),
    /// and lets followers' log starts follow their leaders' (delete_records.rs). Runs between
    /// work lists: the snapshots it records are reported to the core by
    /// `report_snapshots_written`.
    fn maybe_enforce_retention(&mut self) -> Result<(), NodeError> {
        let now = self.now_ms();
        if std::mem::take(&mut self.handlers.delete_records.follow_due) {
            self.follow_leader_log_starts()?;
        }
        if !self.handlers.topics.retention_check_due(now) {
            return Ok(());
        }
        // Followers' log starts follow their leaders' (DeleteRecords, delete_records.rs).
        self.follow_leader_log_starts()?;
        let now_wall_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        self.expire_producers(now_wall_ms);
        let snapshots =
            self.handlers
                .topics
                .retention_snapshots(&self.host, &self.table, now_wall_ms);
        self.record_empty_snapshots(snapshots)
    }

    /// delete_records.rs, `follow_leader_log_starts`: the snapshots it asks for, recorded.
    fn follow_leader_log_starts(&mut self) -> Result<(), NodeError> {
        let snapshots = delete_records::follow_leader_log_starts(
            &mut self.host,
            &self.table,
            &self.handlers.topics,
        )?;
        self.record_empty_snapshots(snapshots)
    }

    /// Records the empty snapshots retention, DeleteRecords or a follower following its
    /// leader's log start decided (retention.rs, delete_records.rs), each with its partition's
    /// producer state at its end offset (idempotence.rs): the producers' state outlives their
    /// batches. A DeleteRecords cut that cannot be recorded answers its partition
    /// KAFKA_STORAGE_ERROR; any other failure is the node's.
    fn record_empty_snapshots(
        &mut self,
        snapshots: Vec<retention::EmptySnapshot>,
    ) -> Result<(), NodeError> {
        for snapshot in snapshots {
            let producer_state =
                self.producer_state_record(snapshot.partition, snapshot.snapshot_id.offset);
            let recorded = self.host.record_empty_snapshot(
                snapshot.partition,
                snapshot.snapshot_id,
                snapshot.now_wall_ms,
                producer_state,
            );
            match recorded {
                Ok(()) => snapshot.recorded(),
                Err(error)
                    if matches!(
                        snapshot.cause,
                        retention::SnapshotCause::DeleteRecords { .. }
                    ) =>
                {
                    tracing::error!(partition = snapshot.partition, %error, "DeleteRecords: recording the cut");
                    self.handlers.delete_records.cut_failed(&snapshot);
                }
                Err(error) => return Err(error.into()),
            }
        }
        Ok(())
    }

    /// DeleteRecords (delete_records.rs): the cuts the leader makes are recorded here
    /// (`record_empty_snapshots`), then what is done is answered.
    fn handle_delete_records(
        &mut self,
        responder: Responder,
        header: &crate::protocol::RequestHeader,
        request: crate::protocol::delete_records_request::DeleteRecordsRequest,
    ) -> Result<(), NodeError> {
        let mut cx = cx!(self);
        let cuts = self.handlers.delete_records.handle_delete_records(
            &mut cx,
            &self.handlers.topics,
            responder,
            header,
            request,
        )?;
        self.record_empty_snapshots(cuts)?;
        let now = self.now_ms();
        self.handlers
            .delete_records
            .answer_ready(&self.host, &self.config, now)?;
        self.after_call()
    }

    /// The event loop. Returns after a graceful shutdown.
    async fn run(mut self, mut events: UnboundedReceiver<Event>) -> Result<(), NodeError> {
        use tokio::signal::unix::{SignalKind, signal};
        let mut terminate = signal(SignalKind::terminate()).map_err(NodeError::Runtime)?;
        let mut interrupt = signal(SignalKind::interrupt()).map_err(NodeError::Runtime)?;
        // Start-up (recovery of every partition, producer state) is not a turn of the loop.
        self.stall.begin_turn();
        let mut snapshot_done = self
            .snapshot_done_rx
            .take()
            .expect("the event loop runs once");
        // The ring signals this fd for every completion it posts: the loop sleeps until then,
        // with no timer between a submission and the reaction to its completion.
        let storage_ready = match self.host.io().readiness_fd() {
            // SAFETY: the fd belongs to the host's backend, which outlives this registration: it
            // is dropped below, before `finish_shutdown` consumes the node.
            Some(fd) => Some(
                unsafe {
                    tokio::io::unix::AsyncFd::register_with_interest(
                        ReadinessFd(fd),
                        tokio::io::Interest::READABLE,
                    )
                }
                .map_err(|e| NodeError::Runtime(e.into()))?,
            ),
            None => None,
        };
        loop {
            let now = self.now_ms();
            let began = Instant::now();
            let next_deadline_ms = self.host.tick(now)?;
            self.deliver()?;
            self.stall.step(began, "tick", "");
            let began = Instant::now();
            self.pump()?;
            self.stall.step(began, "pump", "");
            let began = Instant::now();
            self.expire(now);
            self.log_leader_changes();
            self.observer.observe(self.host.multi());
            self.observer
                .observe_snapshot_totals(self.host.stores().map(|(id, store)| {
                    (
                        id,
                        store.snapshots.generated_total,
                        store.snapshots.fetched_total,
                    )
                }));
            self.stall.step(began, "observe", "");
            let began = Instant::now();
            let space_retry_ms = self.watch_storage_faults(now)?;
            self.stall.step(began, "storage faults", "");
            if let Some(until) = self.shutdown_until_ms
                && (now >= until || !self.control_requests_pending())
            {
                break;
            }
            let mut wake_ms = next_deadline_ms
                .min(self.handlers.next_deadline_ms())
                .min(space_retry_ms.unwrap_or(u64::MAX))
                .min(self.parked_metadata_deadline_ms().unwrap_or(u64::MAX))
                .min(now + 100);
            // A backend without a readiness fd finished its operations inside the last
            // `submit_and_wait`; anything still in flight is picked up at once, not later.
            let storage_waits = self.host.storage_in_flight();
            if storage_waits && storage_ready.is_none() {
                wake_ms = now;
            }
            if let Some(until) = self.shutdown_until_ms {
                wake_ms = wake_ms.min(until);
            }
            let due = self.started + Duration::from_millis(wake_ms);
            let sleep = tokio::time::sleep_until(tokio::time::Instant::from_std(due));
            self.stall.end_turn();
            let wait_began = self.observer.poll_wait_begins();
            let wake = tokio::select! {
                biased;
                _ = terminate.recv(), if self.shutdown_until_ms.is_none() => Wake::Signal,
                _ = interrupt.recv(), if self.shutdown_until_ms.is_none() => Wake::Signal,
                event = events.recv() => Wake::Event(event),
                // Never None: the node holds a sender.
                Some(done) = snapshot_done.recv() => Wake::SnapshotDone(done),
                ready = storage_signal(storage_ready.as_ref()), if storage_waits => {
                    ready.map_err(NodeError::Runtime)?;
                    Wake::Storage
                }
                _ = sleep => Wake::Timer,
            };
            // Only the wait counts as idle (poll-idle-ratio), not the event's handling.
            self.observer.poll_wait_ends(wait_began);
            self.stall.begin_turn();
            match wake {
                Wake::Signal => self.begin_shutdown()?,
                Wake::Event(None) => break,
                Wake::Event(Some(event)) => {
                    self.handle_event_timed(event)?;
                    // Drain what is already queued before the next tick.
                    for _ in 0..256 {
                        match events.try_recv() {
                            Ok(event) => self.handle_event_timed(event)?,
                            Err(_) => break,
                        }
                    }
                }
                Wake::SnapshotDone(done) => {
                    let began = Instant::now();
                    self.on_snapshot_generated(done);
                    self.stall.step(began, "snapshot generated", "");
                }
                Wake::Timer => self.stall.woke_after_timer(due),
                // `pump`, at the top of the loop, drains the completions.
                Wake::Storage => {}
            }
        }
        drop(storage_ready);
        self.finish_shutdown().await
    }

    /// `handle_event`, timed for the stall watch under the event's kind and API.
    fn handle_event_timed(&mut self, event: Event) -> Result<(), NodeError> {
        let (what, detail) = match &event {
            Event::Request { header, .. } => (
                "request",
                ApiKey::from_i16(header.api_key).map_or("unknown API", ApiKey::name),
            ),
            Event::PeerResponse { response, .. } => ("peer response", response.api_key().name()),
            Event::PeerFailed { .. } => ("peer failed", ""),
        };
        let began = Instant::now();
        let result = self.handle_event(event);
        self.stall.step(began, what, detail);
        result
    }

    fn handle_event(&mut self, event: Event) -> Result<(), NodeError> {
        match event {
            Event::Request {
                responder,
                header,
                request,
            } => self.handle_request(responder, header, request),
            Event::PeerResponse {
                peer,
                correlation_id,
                response,
            } => self.handle_peer_response(peer, correlation_id, response),
            Event::PeerFailed {
                peer,
                correlation_ids,
            } => {
                for id in correlation_ids {
                    let pending = self.peer_pending.remove(&(peer, id));
                    if let Some(PeerPending::LeaderLookup(partitions)) = &pending {
                        self.lookup_ended(partitions);
                    }
                    if let Some(PeerPending::ProducerIdBlock) = &pending {
                        self.producer_id_block_answered(None);
                    }
                    if let Some(PeerPending::Fetch(fetches)) = pending
                        && self.fetch_sessions.take_answer(peer, id)
                    {
                        // The core only learns of a lost fetch at its request timeout, and an
                        // observer looking for the leader would keep asking the same dead
                        // voter: answer the fetch as failed (BROKER_NOT_AVAILABLE) so it backs
                        // off and asks the next one.
                        for (partition, correlation_id) in fetches {
                            let message = core::Message::FetchResponse(core::FetchResponse {
                                correlation_id,
                                error_code: core::ErrorCode::BrokerNotAvailable,
                                current_leader: core::LeaderIdAndEpoch {
                                    leader_id: None,
                                    leader_epoch: 0,
                                },
                                high_watermark: 0,
                                log_start_offset: 0,
                                diverging_epoch: None,
                                snapshot_id: None,
                                records: bytes::Bytes::new(),
                            });
                            let now = self.now_ms();
                            let step = self.host.step(
                                now,
                                peer,
                                ringlog_replication::PartitionMessage { partition, message },
                            );
                            match step {
                                Ok(()) => {}
                                Err(HostError::Raft(error)) => {
                                    tracing::debug!(%error, "failed fetch not taken")
                                }
                                Err(HostError::Storage(error)) => return Err(error.into()),
                            }
                            self.deliver()?;
                        }
                    }
                }
                Ok(())
            }
        }
    }

    // ---- delivering the host's output ----------------------------------------------------

    /// Moves what the host produced to the sockets and the API layer, in order: messages to
    /// peers (one wire Fetch and one FetchSnapshot per leader), answers into the requests that
    /// wait for them, appends and truncations to the producer state, high-watermarks to the
    /// state that follows them, snapshots to a writer thread.
    fn deliver(&mut self) -> Result<(), NodeError> {
        self.adopt_offline_partitions()?;
        let mut fetches: BTreeMap<NodeId, Vec<(PartitionId, core::FetchRequest)>> = BTreeMap::new();
        while self.host.has_output() {
            for output in self.host.take_output() {
                match output {
                    Output::Send {
                        partition,
                        to,
                        message,
                    } => self.dispatch(partition, to, message, &mut fetches)?,
                    Output::FetchResponse {
                        partition: _,
                        mut response,
                        records,
                    } => {
                        match records.map(|range| self.open_range(&range)) {
                            None => {}
                            Some(Ok(RecordsSource::File(region))) => {
                                self.fetch_regions.insert(response.correlation_id, region);
                            }
                            Some(Ok(RecordsSource::Memory(bytes))) => response.records = bytes,
                            Some(Err(error)) => {
                                tracing::error!(%error, "log read failed");
                                response.error_code = core::ErrorCode::UnknownServerError;
                            }
                        }
                        self.answer_fetch(response)?;
                    }
                    Output::FetchSnapshotResponse {
                        partition,
                        to,
                        mut response,
                        region,
                    } => {
                        let region = match region.map(|r| self.open_range(&r)) {
                            None => None,
                            Some(Ok(RecordsSource::File(region))) => Some(region),
                            Some(Ok(RecordsSource::Memory(bytes))) => {
                                response.unaligned_records = bytes;
                                None
                            }
                            Some(Err(error)) => {
                                tracing::error!(%error, "reading a snapshot for FetchSnapshot");
                                response.error_code = core::ErrorCode::UnknownServerError;
                                None
                            }
                        };
                        let message = core::Message::FetchSnapshotResponse(response);
                        self.answer_fifo_with_region(
                            to,
                            ApiKey::FetchSnapshot,
                            partition,
                            message,
                            region,
                        )?;
                    }
                    Output::LeaderAppended {
                        partition,
                        base_offset,
                        batches,
                    } => self.track_leader_append(partition, base_offset, &batches),
                    Output::FollowerAppended { partition, records } => {
                        self.track_follower_append(partition, &records)
                    }
                    Output::Truncated {
                        partition,
                        offset,
                        snapshot,
                    } => self.track_truncation(partition, offset, snapshot),
                    // Produce waiters and parked consumer fetches are checked in `pump`.
                    Output::HighWatermark {
                        partition,
                        high_watermark,
                    } => self.track_high_watermark(partition, high_watermark),
                    Output::GenerateSnapshot {
                        partition,
                        dir,
                        mut job,
                    } => {
                        // The snapshot carries the producer state at its end offset, for a
                        // replica whose log starts there (docs/snapshots.md).
                        job.producer_state =
                            self.producer_state_record(partition, job.snapshot_id.offset);
                        self.spawn_snapshot_writer(partition, dir, job)?
                    }
                }
            }
        }
        self.send_fetches(fetches)
    }

    /// A file range of the host's answer as the server sends it: a descriptor of our own (so
    /// the bytes outlive a truncation or a deletion until they are on the socket), or the
    /// bytes read through the host where the file is not on disk (the in-memory backend).
    fn open_range(
        &mut self,
        range: &ringlog_replication::host::FileRange,
    ) -> Result<RecordsSource, StorageError> {
        match std::fs::File::open(&range.path) {
            Ok(file) => Ok(RecordsSource::File(FileRegion {
                file: Rc::new(file),
                position: range.position,
                length: range.length,
            })),
            Err(error) => {
                tracing::debug!(path = %range.path.display(), %error, "not on disk; reading it");
                Ok(RecordsSource::Memory(self.host.read_file_range(range)?))
            }
        }
    }

    /// Sends a core message: requests go to the peer, responses fill answer slots.
    fn dispatch(
        &mut self,
        partition: PartitionId,
        to: NodeId,
        message: core::Message,
        fetches: &mut BTreeMap<NodeId, Vec<(PartitionId, core::FetchRequest)>>,
    ) -> Result<(), NodeError> {
        match message {
            core::Message::FetchRequest(f) => {
                fetches.entry(to).or_default().push((partition, f));
                Ok(())
            }
            core::Message::VoteRequest(_)
            | core::Message::BeginQuorumEpochRequest(_)
            | core::Message::EndQuorumEpochRequest(_) => {
                let Some((request, version)) = convert::peer_request(
                    &self.cluster_id,
                    self.table.get(partition),
                    &message,
                    to,
                ) else {
                    return Ok(());
                };
                self.send_to_peer(to, request, version, PeerPending::Control, false)
            }
            core::Message::VoteResponse(_) => {
                self.answer_fifo(to, ApiKey::Vote, partition, message)
            }
            core::Message::BeginQuorumEpochResponse(_) => {
                self.answer_fifo(to, ApiKey::BeginQuorumEpoch, partition, message)
            }
            core::Message::EndQuorumEpochResponse(_) => {
                self.answer_fifo(to, ApiKey::EndQuorumEpoch, partition, message)
            }
            core::Message::FetchResponse(r) => self.answer_fetch(r),
            core::Message::FetchSnapshotRequest(r) => {
                // Sent with every other partition's for the same leader (send_fetches).
                self.snapshot_fetches
                    .entry(to)
                    .or_default()
                    .push((partition, r));
                Ok(())
            }
            core::Message::FetchSnapshotResponse(r) => self.answer_fifo(
                to,
                ApiKey::FetchSnapshot,
                partition,
                core::Message::FetchSnapshotResponse(r),
            ),
        }
    }

    fn control_requests_pending(&self) -> bool {
        self.peer_pending
            .values()
            .any(|p| matches!(p, PeerPending::Control))
    }

    fn log_leader_changes(&mut self) {
        for (partition, raft) in self.host.multi().partitions() {
            let now = (raft.leader_id(), raft.epoch());
            if self.last_leader.get(&partition) != Some(&now) {
                self.last_leader.insert(partition, now);
                let topic = self.table.dir_name(partition);
                match now.0 {
                    Some(leader) => tracing::info!(
                        partition = %topic,
                        epoch = now.1,
                        leader,
                        local = leader == self.config.node_id,
                        "leader known"
                    ),
                    None => tracing::info!(partition = %topic, epoch = now.1, "no leader"),
                }
            }
        }
    }
}

fn random_seed() -> u64 {
    use std::io::Read;
    let mut bytes = [0u8; 8];
    match std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut bytes)) {
        Ok(()) => u64::from_le_bytes(bytes),
        Err(_) => SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64),
    }
}
