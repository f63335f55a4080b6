//! The node: the runtime around the replication host (`ringlog_replication::host::Host`: the
//! core, the partition stores and the executor of the core's work), with the sockets, the clock,
//! signals and metrics, driven by one event loop on one thread (docs/node.md).
//!
//! ```text
//!  sockets (transport.rs) ──Event──▶ ┌────────────── event loop ──────────────┐
//!  peer lanes ─────────────Event──▶ │ host.step / tick / append / pump       │──▶ Host<AnyIo>
//!  ring readiness fd ──────────────▶ │ deliver the host's Output:             │◀── Vec<Output>
//!  snapshot writer threads ────────▶ │   messages: QuorumRpc (quorum_rpc.rs)  │
//!                                    │   the rest: producer state, snapshots  │
//!                                    │ client requests → their API, with a Cx │
//!                                    └────────────────────────────────────────┘
//! ```
//!
//! The host keeps the persistence rules (no re-entrancy into the core, quorum-state durable
//! before what follows it, messages held behind flushes, durability reported only after an
//! fdatasync); the node only moves what the host returns to sockets and to the API layer.
//!
//! Why this file is long: it is the node's one `impl Node`, the routing between the parts
//! that own state: the host, the quorum's wire side (`QuorumRpc`), and the API layer and the
//! controller (a type per domain, each in its own files, called with a `Cx`, context.rs). Every
//! rule lives in those parts; what is here is which part is called when, in what order, and
//! what is done with what it returns (the event loop, the dispatch of client requests, the
//! waiters and deadlines, the partition lifecycle, storage faults, shutdown). Spreading that
//! routing over files by `impl Node` is what made the old node a god object (issue 15).

mod acl_image;
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
mod groups;
mod handlers;
mod idempotence;
mod leader_endpoints;
mod metadata;
mod observe;
mod own_endpoint;
mod partition_dirs;
mod partition_table;
mod peers;
pub mod placement;
mod produce_validation;
mod producer_ids;
pub mod producer_state;
pub mod producer_state_file;
mod pump;
mod remote_leaders;
mod storage_faults;
mod voter_changes;
use pump::{ReadinessFd, storage_signal};
mod answer_slots;
#[macro_use]
mod quorum_rpc;
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

use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use ringlog_engine::io::{AnyIo, Io};
use ringlog_engine::log::LogConfig;
use ringlog_replication::host::{Host, HostConfig, HostError, Output, PartitionSpec};
use ringlog_replication::{self as core, NodeId, PartitionId};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

use crate::config::{NodeConfig, SecurityProtocol};
use crate::meta_properties::MetaProperties;
use crate::metrics::MetricsServer;
use crate::protocol::{
    ApiKey, ApiVersionsResponse, ErrorCode, Request, RequestHeader, Response, encode_response,
};
use crate::server::{ListenerRole, Server, ServerConfig, ServerError, ServerMetrics};
use convert::PartitionTable;
use handlers::{ProduceEnv, describe_quorum, served_api_versions};
use metadata::PartitionLookup;
use transport::{Event, NodeHandler, PeerPending, Responder};

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

pub(crate) struct Node {
    config: NodeConfig,
    /// Starts snapshot writer threads (snapshots.rs); they report on `snapshot_done_rx`,
    /// which the loop takes when it starts.
    snapshot_writers: snapshots::SnapshotWriters,
    snapshot_done_rx: Option<UnboundedReceiver<snapshots::SnapshotDone>>,
    cluster_id: String,
    table: PartitionTable,
    /// The replication core, the partition stores and the executor of the core's work.
    host: Host<AnyIo>,
    started: Instant,
    /// Wall-clock milliseconds at `started`, for DescribeQuorum's timestamps.
    started_wall_ms: u64,
    /// The quorum's wire side: peer lanes, answer slots, fetch sessions (quorum_rpc.rs).
    quorum: quorum_rpc::QuorumRpc,
    handlers: handlers::State,
    /// Leaders of partitions this node is not a replica of, as replicas reported them.
    remote_leaders: remote_leaders::RemoteLeaders,
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
        let quorum = quorum_rpc::QuorumRpc::open(&config, events.clone())?;
        let observer = observe::Observer::new(table.ids().map(|id| {
            let dir = config.metadata_log_dir.join(table.dir_name(id));
            (id, table.dir_name(id), dir)
        }));
        let started_wall_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let (snapshot_writers, snapshot_done_rx) = snapshots::SnapshotWriters::new();
        let mut node = Node {
            snapshot_writers,
            snapshot_done_rx: Some(snapshot_done_rx),
            config,
            cluster_id,
            table,
            host,
            started: Instant::now(),
            started_wall_ms,
            quorum,
            handlers: handlers::State::default(),
            remote_leaders: remote_leaders::RemoteLeaders::default(),
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
            node.handlers.producers.ensure(&mut node.host, id)?;
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

    fn metadata_raft(&self) -> &core::Raft {
        context::metadata_raft(&self.host, &self.table)
    }

    fn authorizer(&self) -> authorize::Authorizer<'_> {
        authorize::Authorizer {
            config: &self.config.authorizer,
            image: &self.handlers.acl_image,
        }
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
        self.handlers.producers.adopt_preopened(id, &dir);
        // Idempotent producing's state exists from the partition's start and follows every
        // append, the follower's too: a follower that becomes leader answers its first Produce
        // without reading its whole log on the loop (seen in scripts/fault-run.sh as 1.5-6 s
        // turns on a new leader of a topic created while the node ran). A new partition's
        // log is empty, so this reads nothing; a preopened one was read before the loop.
        self.handlers.producers.ensure(&mut self.host, id)?;
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
        self.remote_leaders.forget(&topic.name);
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
        self.handlers.produces.fail_partition(
            &cx!(self),
            id,
            ErrorCode::UnknownTopicOrPartition,
        )?;
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
                    self.handlers
                        .producers
                        .read_preopened(&mut self.host, &dir)?;
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
        let now_wall_ms = wall_clock_ms().max(0) as u64;
        self.handlers
            .producers
            .expire(self.config.producer_id_expiration_ms, now_wall_ms);
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
            wall_clock_ms().max(0) as u64,
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
            let producer_state = self.handlers.producers.state_record(
                &mut self.host,
                &self.table,
                snapshot.partition,
                snapshot.snapshot_id.offset,
            );
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
                .min(self.remote_leaders.parked_deadline_ms().unwrap_or(u64::MAX))
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
                    done.report_to(&mut self.host);
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
            } => {
                let mut later = Vec::new();
                let mut q = qx!(self);
                let answer = self.quorum.handle_peer_response(
                    &mut q,
                    peer,
                    correlation_id,
                    response,
                    &mut later,
                )?;
                self.deliver_later(later)?;
                if let Some(answer) = answer {
                    self.take_peer_answer(answer);
                }
                self.deliver()
            }
            Event::PeerFailed {
                peer,
                correlation_ids,
            } => {
                let mut later = Vec::new();
                let mut q = qx!(self);
                let answers = self
                    .quorum
                    .peer_failed(&mut q, peer, correlation_ids, &mut later)?;
                self.deliver_later(later)?;
                for answer in answers {
                    self.take_peer_answer(answer);
                }
                self.deliver()
            }
        }
    }

    /// What a peer's answer means to the API layer (quorum_rpc.rs).
    fn take_peer_answer(&mut self, answer: quorum_rpc::PeerAnswer) {
        match answer {
            quorum_rpc::PeerAnswer::ProducerIdBlock(answer) => {
                self.handlers.producer_ids.block_answered(answer.as_ref())
            }
            quorum_rpc::PeerAnswer::LeaderLookup(asked, response) => {
                self.remote_leaders.lookup_ended(&asked);
                if let Some(response) = response {
                    let now = self.now_ms();
                    self.remote_leaders.learn(&response, now);
                }
            }
            quorum_rpc::PeerAnswer::LeaderLogStartMoved => {
                self.handlers.delete_records.follow_due = true;
            }
        }
    }

    /// A request from a connection: the quorum's own go to quorum_rpc.rs, the rest to the API
    /// layer.
    fn handle_request(
        &mut self,
        responder: Responder,
        header: RequestHeader,
        request: Request,
    ) -> Result<(), NodeError> {
        if let Request::Fetch(r) = &request {
            let replica = convert::fetch_replica_id(r, header.api_version);
            if replica >= 0 {
                self.handlers
                    .delete_records
                    .note_replica_log_starts(&self.table, r, replica);
            }
        }
        let metadata_voters = self.metadata_voter_ids();
        let configured_voters: Vec<NodeId> = self
            .config
            .quorum_voters
            .iter()
            .map(|v| v.node_id)
            .collect();
        let image = &self.handlers.topics.image;
        let replicas = |topic: admission::TopicRef<'_>, index: i32| {
            remote_leaders::partition_replicas(
                image,
                &configured_voters,
                &metadata_voters,
                topic,
                index,
            )
        };
        let mut later = Vec::new();
        let mut q = qx!(self);
        let client = self.quorum.handle_request(
            &mut q,
            &replicas,
            &metadata_voters,
            responder,
            header,
            request,
            &mut later,
        )?;
        self.deliver_later(later)?;
        match client {
            Some((responder, header, request)) => {
                self.handle_client_request(responder, header, request)
            }
            None => self.deliver(),
        }
    }

    // ---- client requests: the API layer -----------------------------------------------------

    /// A client request: refused whole when its one resource is not authorized (authorize.rs),
    /// else handed to the API that serves it (each in its own file, taking a `Cx`).
    fn handle_client_request(
        &mut self,
        responder: Responder,
        header: RequestHeader,
        request: Request,
    ) -> Result<(), NodeError> {
        let version = header.api_version;
        // With an authorizer, nothing is authorized before the ACL image is loaded (acls.rs,
        // `AclImage::loaded`): the connection is closed unanswered (a Kafka broker does not serve
        // before its authorizer's initial load either) and the client reconnects and retries.
        if self.config.authorizer.settings.is_some()
            && !matches!(request, Request::ApiVersions(_))
            && responder.listener() != ListenerRole::Controller
            && !self
                .handlers
                .acl_image
                .loaded(context::metadata_raft(&self.host, &self.table))
        {
            tracing::debug!(api = ?request.api_key(), "ACL image not loaded yet; connection closed");
            return Ok(());
        }
        // The requests whose one resource the requester may not touch stop here (authorize.rs).
        let requester = responder.requester();
        if let Some(refused) = self.authorizer().refuse_unauthorized(&requester, &request) {
            let frame = encode_response(header.correlation_id, version, &refused)?;
            responder.send(Some(frame));
            return Ok(());
        }
        let response = match request {
            Request::InitProducerId(r) => {
                let response = idempotence::handle_init_producer_id(&r, || {
                    let mut cx = cx!(self);
                    self.handlers
                        .producer_ids
                        .claim_producer_id(&mut cx, &mut self.handlers.producer_id_control)
                });
                // It may have asked for a producer id block (producer_ids.rs).
                self.after_call()?;
                Response::InitProducerId(response)
            }
            Request::ApiVersions(_) => Response::ApiVersions(ApiVersionsResponse {
                error_code: 0,
                api_keys: served_api_versions(responder.listener()),
                ..Default::default()
            }),
            Request::Metadata(r) => {
                let mut cx = cx!(self);
                metadata::answer_metadata(
                    &mut cx,
                    &mut self.handlers.topics,
                    &self.offline,
                    &mut self.remote_leaders,
                    responder,
                    &header,
                    r,
                )?;
                return self.after_call();
            }
            Request::ListOffsets(r) => {
                let lookup = PartitionLookup {
                    topics: &self.handlers.topics,
                    offline: &self.offline,
                };
                let response =
                    metadata::handle_list_offsets(&mut cx!(self), lookup, &r, &requester);
                Response::ListOffsets(response)
            }
            Request::OffsetForLeaderEpoch(r) => {
                let lookup = PartitionLookup {
                    topics: &self.handlers.topics,
                    offline: &self.offline,
                };
                let response = metadata::handle_offset_for_leader_epoch(&cx!(self), lookup, &r);
                Response::OffsetForLeaderEpoch(response)
            }
            Request::DescribeQuorum(r) => {
                Response::DescribeQuorum(describe_quorum(&cx!(self), self.started_wall_ms, &r))
            }
            Request::Produce(r) => {
                let message_max_bytes = self
                    .handlers
                    .broker_configs
                    .message_max_bytes(&self.config)
                    .0;
                let mut call = self.handlers.produces.begin(responder, &header, r);
                // Each append's output is delivered before the next partition is looked at,
                // and before any answer.
                loop {
                    let mut cx = cx!(self);
                    let mut env = ProduceEnv {
                        producers: &mut self.handlers.producers,
                        stall: &mut self.stall,
                        lookup: PartitionLookup {
                            topics: &self.handlers.topics,
                            offline: &self.offline,
                        },
                        message_max_bytes,
                        shutting_down: self.shutdown_until_ms.is_some(),
                    };
                    if !call.next_partition(&mut cx, &mut env) {
                        break;
                    }
                    let delivered = self.deliver();
                    call.delivered(delivered);
                }
                let now = self.now_ms();
                let Some(id) = self.handlers.produces.finish(call, now) else {
                    return Ok(());
                };
                self.check_waiters()?;
                return self.handlers.produces.maybe_complete(&cx!(self), id);
            }
            Request::CreateTopics(r) => {
                let mut cx = cx!(self);
                self.handlers
                    .topics
                    .handle_create_topics(&mut cx, responder, &header, r)?;
                return self.after_call();
            }
            Request::DeleteTopics(r) => {
                let mut cx = cx!(self);
                self.handlers
                    .topics
                    .handle_delete_topics(&mut cx, responder, &header, r)?;
                return self.after_call();
            }
            Request::DescribeConfigs(r) => {
                Response::DescribeConfigs(configs::handle_describe_configs(
                    &cx!(self),
                    &self.handlers.topics,
                    &self.handlers.broker_configs,
                    &r,
                    &requester,
                ))
            }
            Request::IncrementalAlterConfigs(r) => {
                let mut cx = cx!(self);
                configs::handle_incremental_alter_configs(
                    &mut cx,
                    &mut self.handlers.topics,
                    &mut self.handlers.broker_configs,
                    responder,
                    &header,
                    r,
                )?;
                return self.after_call();
            }
            Request::AlterConfigs(r) => {
                let mut cx = cx!(self);
                configs::handle_alter_configs(
                    &mut cx,
                    &mut self.handlers.topics,
                    &mut self.handlers.broker_configs,
                    responder,
                    &header,
                    r,
                )?;
                return self.after_call();
            }
            Request::CreatePartitions(r) => {
                let mut cx = cx!(self);
                self.handlers
                    .topics
                    .handle_create_partitions(&mut cx, responder, &header, r)?;
                return self.after_call();
            }
            Request::DeleteRecords(r) => return self.handle_delete_records(responder, &header, r),
            Request::DescribeAcls(r) => {
                Response::DescribeAcls(acls::AclState::handle_describe_acls(&cx!(self), &r))
            }
            Request::CreateAcls(r) => {
                let mut cx = cx!(self);
                self.handlers
                    .acls
                    .handle_create_acls(&mut cx, responder, &header, r)?;
                return self.after_call();
            }
            Request::DeleteAcls(r) => {
                let mut cx = cx!(self);
                self.handlers
                    .acls
                    .handle_delete_acls(&mut cx, responder, &header, r)?;
                return self.after_call();
            }
            Request::DescribeCluster(r) => {
                let brokers = metadata::metadata_brokers(&self.config, self.metadata_raft());
                Response::DescribeCluster(describe_cluster::handle_describe_cluster(
                    &cx!(self),
                    &r,
                    &requester,
                    brokers,
                ))
            }
            Request::AllocateProducerIds(r) => {
                let mut cx = cx!(self);
                self.handlers
                    .producer_id_control
                    .handle_allocate_producer_ids(
                        &mut cx,
                        &mut self.handlers.producer_ids,
                        responder,
                        &header,
                        &r,
                    )?;
                return self.after_call();
            }
            Request::Fetch(r) => {
                let lookup = PartitionLookup {
                    topics: &self.handlers.topics,
                    offline: &self.offline,
                };
                let shutting_down = self.shutdown_until_ms.is_some();
                let mut cx = cx!(self);
                return self.handlers.fetches.consumer_fetch(
                    &mut cx,
                    lookup,
                    shutting_down,
                    responder,
                    &header,
                    r,
                    true,
                );
            }
            r @ (Request::AddRaftVoter(_)
            | Request::RemoveRaftVoter(_)
            | Request::UpdateRaftVoter(_)) => {
                let mut cx = cx!(self);
                self.handlers
                    .voter_changes
                    .handle(&mut cx, responder, &header, r)?;
                return self.after_call();
            }
            Request::DescribeUserScramCredentials(r) => Response::DescribeUserScramCredentials(
                self.handlers
                    .credentials
                    .handle_describe_user_scram_credentials(&r),
            ),
            Request::AlterUserScramCredentials(r) => {
                let mut cx = cx!(self);
                self.handlers
                    .credentials
                    .handle_alter_user_scram_credentials(&mut cx, responder, &header, r)?;
                return self.after_call();
            }
            r @ (Request::SaslHandshake(_) | Request::SaslAuthenticate(_)) => {
                scram::sasl_request_outside_the_exchange(&r)
            }
            r if groups::is_group_request(&r) => {
                let brokers = match r {
                    Request::FindCoordinator(_) => {
                        metadata::metadata_brokers(&self.config, self.metadata_raft())
                    }
                    _ => Vec::new(),
                };
                let env = groups::GroupsEnv {
                    topics: &self.handlers.topics,
                    message_max_bytes: self
                        .handlers
                        .broker_configs
                        .message_max_bytes(&self.config)
                        .0,
                };
                let mut cx = cx!(self);
                let call = self
                    .handlers
                    .groups
                    .handle_request(&mut cx, env, brokers, responder, header, r);
                if self.handlers.groups.take_offsets_topic_wanted()
                    && let Err(code) = self.handlers.topics.propose_offsets_topic(&mut cx!(self))
                {
                    tracing::info!(?code, "__consumer_offsets not proposed yet");
                }
                let after = self.after_call();
                return call.and(after);
            }
            other => {
                // Not served by this node yet: an empty answer keeps the connection in step.
                tracing::debug!(api = ?other.api_key(), "request not served; empty answer");
                match other {
                    Request::FetchSnapshot(_) => Response::FetchSnapshot(Default::default()),
                    _ => return Ok(()),
                }
            }
        };
        let frame = encode_response(header.correlation_id, version, &response)?;
        responder.send(Some(frame));
        Ok(())
    }

    // ---- delivering the host's output ----------------------------------------------------

    /// Moves what the host produced to the sockets and the API layer: messages to peers and
    /// answers to the requests that wait for them (quorum_rpc.rs), then appends and
    /// truncations to the producer state, high-watermarks to the state that follows them,
    /// snapshots to a writer thread.
    fn deliver(&mut self) -> Result<(), NodeError> {
        self.adopt_offline_partitions()?;
        let mut later = Vec::new();
        let mut q = qx!(self);
        self.quorum.deliver(&mut q, &mut later)?;
        self.deliver_later(later)
    }

    /// The host's outputs for the API layer, in order (the quorum routed the rest).
    fn deliver_later(&mut self, outputs: Vec<Output>) -> Result<(), NodeError> {
        for output in outputs {
            match output {
                Output::LeaderAppended {
                    partition,
                    base_offset,
                    batches,
                } => self
                    .handlers
                    .producers
                    .track_leader_append(partition, base_offset, &batches),
                Output::FollowerAppended { partition, records } => self
                    .handlers
                    .producers
                    .track_follower_append(partition, &records),
                Output::Truncated {
                    partition,
                    offset,
                    snapshot,
                } => self
                    .handlers
                    .producers
                    .track_truncation(&self.host, partition, offset, snapshot),
                // Produce waiters and parked consumer fetches are checked in `pump`.
                Output::HighWatermark {
                    partition,
                    high_watermark,
                } => {
                    if partition == context::metadata_partition_id(&self.table) {
                        self.handlers.acl_image.note_high_watermark(high_watermark);
                    }
                    self.handlers
                        .producers
                        .track_high_watermark(partition, high_watermark)
                }
                Output::GenerateSnapshot {
                    partition,
                    dir,
                    mut job,
                } => {
                    // The snapshot carries the producer state at its end offset, for a
                    // replica whose log starts there (docs/snapshots.md).
                    job.producer_state = self.handlers.producers.state_record(
                        &mut self.host,
                        &self.table,
                        partition,
                        job.snapshot_id.offset,
                    );
                    let now = self.now_ms();
                    self.snapshot_writers.spawn(partition, dir, job, now)?
                }
                Output::Send { .. }
                | Output::FetchResponse { .. }
                | Output::FetchSnapshotResponse { .. } => {
                    unreachable!("the quorum's outputs are routed in quorum_rpc.rs")
                }
            }
        }
        Ok(())
    }

    fn control_requests_pending(&self) -> bool {
        self.quorum.peers.control_requests_pending()
    }

    // ---- storage completions (pump.rs) -------------------------------------------------------

    // The node's half of storage completions: the host drains the ring, reports durability to
    // the core and releases what waited on it (`Host::pump`); the node then delivers the host's
    // output, answers produce waiters and releases parked replica fetches, until nothing is
    // left to do. What a routed completion queued reaches the kernel before the event loop
    // sleeps on the ring's readiness fd.

    /// Drains storage completions through the host and acts on everything that follows from
    /// them, until nothing is left to do.
    fn pump(&mut self) -> Result<(), NodeError> {
        let mut first = true;
        loop {
            let now = self.now_ms();
            let began = Instant::now();
            let progressed = self.host.pump(now)?;
            self.stall.part(began, "pump: host");
            // One more round after anything happened: what the waiters' check did (retention's
            // snapshot, a topic's partitions started) is reported to the core in it.
            if !first && !progressed && !self.host.has_output() && !self.quorum.has_releases() {
                return Ok(());
            }
            first = false;
            self.deliver()?;
            // Its stages are timed inside (handlers.rs).
            self.check_waiters()?;
            if self.quorum.has_releases() {
                self.release_parked_fetches()?;
            }
        }
    }

    /// Asks the core for the parked parts of the replica Fetches whose other parts have an
    /// answer (quorum_rpc.rs).
    fn release_parked_fetches(&mut self) -> Result<(), NodeError> {
        let mut later = Vec::new();
        let mut q = qx!(self);
        self.quorum.release_parked_fetches(&mut q, &mut later)?;
        self.deliver_later(later)
    }

    /// The deadlines of one loop turn: the quorum's unanswered requests, the API layer's.
    fn expire(&mut self, now: u64) {
        let q = qx!(self);
        self.quorum.expire(&q);
        self.handlers_expire(now);
        let mut cx = cx!(self);
        metadata::answer_parked_metadata(
            &mut cx,
            &mut self.handlers.topics,
            &self.offline,
            &mut self.remote_leaders,
        );
        if let Err(error) = self.after_call() {
            tracing::warn!(%error, "answering parked Metadata requests");
        }
    }

    // ---- the API layer's waiters and deadlines ---------------------------------------------

    /// After storage completions: the committed metadata records are applied first (a topic
    /// may have been created), then the groups, DeleteRecords, voter changes and producer id
    /// blocks move on, the produce waiters whose records are durable or committed are
    /// answered (handlers/produce.rs), and the parked consumer fetches whose partitions gained
    /// committed records (handlers/consumer_fetch.rs). Each stage is timed for the stall watch.
    fn check_waiters(&mut self) -> Result<(), NodeError> {
        let began = Instant::now();
        self.apply_metadata_records()?;
        self.stall.part(began, "pump: apply_metadata_records");
        let began = Instant::now();
        let env = groups::GroupsEnv {
            topics: &self.handlers.topics,
            message_max_bytes: self
                .handlers
                .broker_configs
                .message_max_bytes(&self.config)
                .0,
        };
        let call = self.handlers.groups.pump(&mut cx!(self), env);
        let after = self.after_call();
        call.and(after)?;
        self.stall.part(began, "pump: groups");
        let now = self.now_ms();
        self.handlers
            .delete_records
            .answer_ready(&self.host, &self.config, now)?;
        self.answer_voter_changes()?;
        self.handlers
            .producer_id_control
            .answer_blocks(&cx!(self), &mut self.handlers.producer_ids)?;
        self.handlers
            .produces
            .check_waiters(&cx!(self), &mut self.stall)?;
        let began = Instant::now();
        let lookup = metadata::PartitionLookup {
            topics: &self.handlers.topics,
            offline: &self.offline,
        };
        let woken = self.handlers.fetches.wake(&mut cx!(self), lookup);
        self.stall.part(began, "pump: wake_parked_fetches");
        woken
    }

    /// The API layer's deadlines: groups, DeleteRecords, voter changes, this voter's own
    /// endpoint update; produce requests past their timeout and parked fetches past their wait
    /// are answered.
    fn handlers_expire(&mut self, now: u64) {
        let env = groups::GroupsEnv {
            topics: &self.handlers.topics,
            message_max_bytes: self
                .handlers
                .broker_configs
                .message_max_bytes(&self.config)
                .0,
        };
        let call = self.handlers.groups.tick(&mut cx!(self), env, now);
        let after = self.after_call();
        if let Err(error) = call.and(after) {
            tracing::warn!(%error, "group deadlines");
        }
        if let Err(error) = self
            .handlers
            .delete_records
            .answer_ready(&self.host, &self.config, now)
        {
            tracing::warn!(%error, "DeleteRecords deadlines");
        }
        if let Err(error) = self.answer_voter_changes() {
            tracing::warn!(%error, "voter change deadlines");
        }
        let mut cx = cx!(self);
        self.handlers.own_endpoint.maybe_send_update(&mut cx);
        if let Err(error) = self.after_call() {
            tracing::warn!(%error, "sending UpdateRaftVoter");
        }
        self.handlers.produces.expire(&cx!(self), now);
        let lookup = metadata::PartitionLookup {
            topics: &self.handlers.topics,
            offline: &self.offline,
        };
        self.handlers.fetches.expire(&mut cx!(self), lookup, now);
    }

    /// Shutdown: every waiting produce, parked fetch, voter change and group request is
    /// answered now.
    fn handlers_fail_all(&mut self, code: ErrorCode) -> Result<(), NodeError> {
        self.handlers.produces.fail_all(&cx!(self), code)?;
        let lookup = metadata::PartitionLookup {
            topics: &self.handlers.topics,
            offline: &self.offline,
        };
        self.handlers.fetches.answer_all(&mut cx!(self), lookup)?;
        self.handlers.voter_changes.fail_all(code)?;
        self.handlers.groups.fail_all()
    }

    // ---- graceful shutdown (SIGTERM/SIGINT) ---------------------------------------------------

    // Every partition this node leads resigns with EndQuorumEpoch, the loop runs until the
    // resignations are delivered or the deadline passes, then every log is flushed and closed.

    /// KIP-595 graceful shutdown: a leader (or candidate) resigns, so the voters elect a
    /// successor at once instead of waiting for the fetch timeout.
    fn begin_shutdown(&mut self) -> Result<(), NodeError> {
        let now = self.now_ms();
        tracing::info!("shutting down");
        let ids: Vec<PartitionId> = self.table.ids().collect();
        for partition in ids {
            match self.host.resign(now, partition) {
                Ok(()) => {
                    tracing::info!(partition, "resigning");
                    self.deliver()?;
                }
                Err(HostError::Raft(core::RaftError::NothingToResign)) => {}
                Err(HostError::Storage(error)) => return Err(error.into()),
                Err(HostError::Raft(error)) => tracing::warn!(partition, %error, "resign failed"),
            }
        }
        self.handlers_fail_all(crate::protocol::ErrorCode::NotLeaderOrFollower)?;
        // Wait for the EndQuorumEpoch answers, but not longer than a request may take.
        self.shutdown_until_ms = Some(now + self.config.request_timeout_ms.min(1000));
        Ok(())
    }

    async fn finish_shutdown(mut self) -> Result<(), NodeError> {
        self.handlers_fail_all(crate::protocol::ErrorCode::NotLeaderOrFollower)?;
        let q = qx!(self);
        self.quorum.fail_all(&q, ErrorCode::NotLeaderOrFollower)?;
        self.host.close();
        tracing::info!("stopped");
        Ok(())
    }

    // ---- storage faults (storage_faults.rs) -----------------------------------------------

    /// Runs the retry of flushes waiting for space when it is due, and takes in the partitions
    /// the host took offline. Returns the retry's deadline, for the loop's sleep.
    fn watch_storage_faults(&mut self, now_ms: u64) -> Result<Option<u64>, NodeError> {
        let waiting = self.host.partitions_waiting_for_space();
        if self.space_retry.due(!waiting.is_empty(), now_ms) {
            let asked = self.host.retry_flushes();
            tracing::debug!(
                asked,
                "asking the partitions waiting for space to flush again"
            );
        }
        // Requests waiting on a partition that waits for space are answered now rather than
        // at their timeout (their records may still become durable and committed later, as
        // after any error following an append; an idempotent producer's retry is answered as
        // the duplicate it is).
        for partition in &waiting {
            self.handlers.produces.fail_partition(
                &cx!(self),
                *partition,
                ErrorCode::KafkaStorageError,
            )?;
        }
        self.adopt_offline_partitions()?;
        self.observer.observe_storage_faults(
            self.offline.by_name.len(),
            self.host.partitions_waiting_for_space().len(),
        );
        Ok(self.space_retry.deadline_ms())
    }

    /// Forgets every partition the host took offline since the last call: its requests are
    /// answered KAFKA_STORAGE_ERROR, lookups skip it, Metadata reports it offline. Called after
    /// every host call (`deliver`), before anything looks the partition up again.
    fn adopt_offline_partitions(&mut self) -> Result<(), NodeError> {
        for (id, name, error) in self.offline.take_new(&self.host, &self.table)? {
            self.forget_partition(id, ErrorCode::KafkaStorageError)?;
            self.offline.record(name, error);
        }
        Ok(())
    }

    /// Forgets a partition the host no longer runs (its topic was deleted, or a storage error
    /// took it offline): what waits on it is answered `code`, lookups skip it.
    fn forget_partition(&mut self, id: PartitionId, code: ErrorCode) -> Result<(), NodeError> {
        self.handlers
            .produces
            .fail_partition(&cx!(self), id, code)?;
        self.observer.remove_partition(id);
        // Lookups skip it from now on: peer messages and client requests for it are answered
        // UNKNOWN_TOPIC_OR_PARTITION, late responses are refused by the core (no group).
        self.table.remove(id);
        self.last_leader.remove(&id);
        let q = qx!(self);
        self.quorum.forget_partition(&q, id, code)?;
        Ok(())
    }

    /// The error of an offline partition of this node, if `topic`-`index` is one.
    fn offline_partition_error(&self, topic: &str, index: i32) -> Option<&str> {
        self.offline.error_of(topic, index)
    }

    /// The voter ids of the metadata partition's quorum in force (KIP-853: from its log, else
    /// `controller.quorum.voters`).
    fn metadata_voter_ids(&self) -> Vec<NodeId> {
        self.metadata_raft().voter_set().ids()
    }

    /// Answers the voter changes whose record committed, was truncated, or ran out of time.
    fn answer_voter_changes(&mut self) -> Result<(), NodeError> {
        let now = self.now_ms();
        self.handlers
            .voter_changes
            .answer(&self.host, &self.table, now)
    }

    // ---- peers ------------------------------------------------------------------------------

    fn send_to_peer(
        &mut self,
        to: NodeId,
        request: crate::protocol::Request,
        version: i16,
        pending: PeerPending,
        fetch_lane: bool,
    ) -> Result<(), NodeError> {
        self.send_to_peer_with_id(to, request, version, pending, fetch_lane)
            .map(|_| ())
    }

    /// [`Node::send_to_peer`], returning the wire correlation id of the request it queued
    /// (`None` when the peer has no lane or its lane is gone).
    fn send_to_peer_with_id(
        &mut self,
        to: NodeId,
        request: crate::protocol::Request,
        version: i16,
        pending: PeerPending,
        fetch_lane: bool,
    ) -> Result<Option<i32>, NodeError> {
        let q = qx!(self);
        self.quorum
            .send(&q, to, request, version, pending, fetch_lane)
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

/// The wall clock, in milliseconds since the Unix epoch: record timestamps, snapshot times and
/// `retention.ms` (the runtime reads it; the API layer gets it in its `Cx`).
pub(super) fn wall_clock_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
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
