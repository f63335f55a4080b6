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
//! Here: `Node`'s state, start-up and the event loop. The rest of its orchestration is in
//! `runtime/`, one concept per file (delivery, dispatch of client requests, the partitions it
//! runs, waiters and deadlines, storage faults, shutdown). Every rule lives in the parts it
//! routes between: the host, the quorum's wire side (`QuorumRpc`), and the API layer and the
//! controller (a type per domain, each in its own files, called with a `Cx`, context.rs). No
//! other module of `net/src/node/` has an `impl Node`: until 2026-12-03 the Kafka APIs and the
//! controller were themselves methods of `Node` spread over 33 files (issue 15).

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
mod folder_prep;
mod groups;
mod handlers;
mod idempotence;
mod idle_poll;
mod lazy_thread;
mod leader_balance;
mod leader_endpoints;
mod listed_checks;
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
mod replica_fetch_sessions;
mod requests;
mod retention;
mod runtime;
mod scram;
pub mod scram_record;
mod snapshots;
mod topic_image;
mod topic_record;
mod topics;
pub mod transport;
pub mod unclean;

use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use ringlog_engine::io::{AnyIo, Io};
use ringlog_engine::log::LogConfig;
use ringlog_replication::host::{Host, HostConfig, HostError, Output, PartitionSpec};
use ringlog_replication::{self as core, NodeId, PartitionId};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

use crate::config::{NodeConfig, SecurityProtocol};
use crate::data_dir_lock::DataDirLock;
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
    // Held until the process ends: no second process recovers or writes this folder meanwhile.
    let _data_dir_lock =
        DataDirLock::acquire_waiting(&config.metadata_log_dir, crate::server::DEAD_OWNER_WAIT)?;
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
    ListedChecked(listed_checks::ListedChecked),
    FolderPrepared(folder_prep::FolderPrepared),
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
    /// Checks behind the start the batches a crash's recovery took unread (listed_checks.rs);
    /// its reports come on `listed_checked_rx`, which the loop takes when it starts.
    listed_checks: listed_checks::ListedChecks,
    listed_checked_rx: Option<UnboundedReceiver<listed_checks::ListedChecked>>,
    /// Makes new partitions' folders ahead of their starts (folder_prep.rs); its reports come
    /// on `folder_prepared_rx`, which the loop takes when it starts.
    folder_prep: folder_prep::FolderPrep,
    folder_prepared_rx: Option<UnboundedReceiver<folder_prep::FolderPrepared>>,
    /// Topic changes the image applied that this node has still to run: partitions to start
    /// or stop, a few milliseconds of them per loop turn (runtime/partitions.rs).
    topic_changes: std::collections::VecDeque<topic_image::PendingTopicChange>,
    /// When this turn's run of them ends (`None`: not begun this turn).
    topic_changes_until: Option<Instant>,
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
    /// KRaft's metrics, fed at most once per millisecond of the loop's clock
    /// (`observed_ms`).
    observer: observe::Observer,
    /// The loop's millisecond whose turn last fed the metrics and the leader log lines. Each
    /// pass looks at every partition, and under load the loop turns several times a
    /// millisecond: with 100 partitions the passes were ~3 % of a voter's CPU (2026-12-05).
    /// A turn that skips them wakes the loop within a millisecond, so none is more than that
    /// late.
    observed_ms: Option<u64>,
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
    /// Bytes appended lately: the loop polls before it sleeps only while they are few
    /// (idle_poll.rs).
    append_load: idle_poll::AppendLoad,
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
        let mut host_config = HostConfig::new(
            cluster_id.clone(),
            voter_ids,
            snapshots::policy_config(&config),
            config.fetch_snapshot_max_bytes,
        );
        host_config.lagging_tail_budget_bytes = config.lagging_tail_budget_bytes;
        let mut host = Host::open(io, host_config, &quorum, specs, random_seed(), 0)?;
        let observer = observe::Observer::new(table.ids().map(|id| {
            let dir = config.metadata_log_dir.join(table.dir_name(id));
            (id, table.dir_name(id), dir)
        }));
        let stall = observe::StallWatch::new(config.fetch_timeout_ms, &observer.registry());
        host.set_probe(Box::new(stall.probe()));
        let mut quorum = quorum_rpc::QuorumRpc::open(&config, events.clone())?;
        quorum.register_metrics(&observer.registry());
        let started_wall_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let (snapshot_writers, snapshot_done_rx) = snapshots::SnapshotWriters::new();
        let (listed_checks, listed_checked_rx) = listed_checks::ListedChecks::new();
        let (folder_prep, folder_prepared_rx) = folder_prep::FolderPrep::new();
        let mut node = Node {
            snapshot_writers,
            snapshot_done_rx: Some(snapshot_done_rx),
            listed_checks,
            listed_checked_rx: Some(listed_checked_rx),
            folder_prep,
            folder_prepared_rx: Some(folder_prepared_rx),
            topic_changes: std::collections::VecDeque::new(),
            topic_changes_until: None,
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
            observed_ms: None,
            append_load: idle_poll::AppendLoad::default(),
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

    //

    /// The event loop. Returns after a graceful shutdown.
    async fn run(mut self, mut events: UnboundedReceiver<Event>) -> Result<(), NodeError> {
        use tokio::signal::unix::{SignalKind, signal};
        let mut terminate = signal(SignalKind::terminate()).map_err(NodeError::Runtime)?;
        let mut interrupt = signal(SignalKind::interrupt()).map_err(NodeError::Runtime)?;
        let mut hangup = crate::signals::hangup().map_err(NodeError::Runtime)?;
        // Start-up (recovery of every partition, producer state) is not a turn of the loop.
        self.stall.begin_turn();
        let mut snapshot_done = self
            .snapshot_done_rx
            .take()
            .expect("the event loop runs once");
        let mut listed_checked = self
            .listed_checked_rx
            .take()
            .expect("the event loop runs once");
        let mut folder_prepared = self
            .folder_prepared_rx
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
        let idle_poll = Duration::from_micros(self.config.idle_poll_us);
        // Whether the last wait ended in something to handle (not the timer).
        let mut busy = false;
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
            let observe_later = self.observed_ms == Some(now);
            if !observe_later {
                self.observed_ms = Some(now);
                // Only the groups reached since the last look can show anything new (a
                // snapshot written or installed reaches its group too).
                let touched = self.host.take_touched_partitions();
                self.log_leader_changes(&touched);
                self.observer.observe(self.host.multi(), &touched);
                self.observer
                    .observe_tail_cache(self.host.tail_cache_bytes());
                self.observer
                    .observe_snapshot_totals(touched.iter().filter_map(|&id| {
                        let store = self.host.store(id)?;
                        Some((
                            id,
                            store.snapshots.generated_total,
                            store.snapshots.fetched_total,
                        ))
                    }));
            }
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
                // Fetches a leader left out of its answer, if no core's fetch carries them.
                .min(self.quorum.next_fetch_resend_ms().unwrap_or(u64::MAX))
                // A confirmation record that began to wait during this turn's pump.
                .min(self.host.next_confirmation_due_ms().unwrap_or(u64::MAX))
                .min(now + if observe_later { 1 } else { 100 });
            // A backend without a readiness fd finished its operations inside the last
            // `submit_and_wait`; anything still in flight is picked up at once, not later.
            let storage_waits = self.host.storage_in_flight();
            if storage_waits && storage_ready.is_none() {
                wake_ms = now;
            }
            // Partitions of a new topic left to start: the next few at once, after whatever
            // else is ready.
            if self.has_topic_changes() {
                wake_ms = now;
            }
            if let Some(until) = self.shutdown_until_ms {
                wake_ms = wake_ms.min(until);
            }
            let due = self.started + Duration::from_millis(wake_ms);
            let sleep = tokio::time::sleep_until(tokio::time::Instant::from_std(due));
            tokio::pin!(sleep);
            self.stall.end_turn();
            let wait_began = self.observer.poll_wait_begins();
            // After a busy turn the next event tends to come within microseconds (a follower's
            // answer, a flush's completion, a client's next record): poll for it a while
            // instead of sleeping, since a halted CPU takes tens of microseconds to wake
            // (`idle.poll.us`). Each poll is an io_uring no-op: the runtime submits what the
            // turn queued and reaps every completion (socket reads too) on the way, which
            // a plain yield would not (tokio-uring submits only when the thread parks).
            // Only while the load is light (idle_poll.rs): under a heavy one the loop has work
            // queued anyway, and polling there lengthened the tail.
            let poll_until = (busy && !idle_poll.is_zero() && self.append_load.light(now))
                .then(|| Instant::now() + idle_poll);
            let wake = loop {
                let polling = poll_until.is_some_and(|until| Instant::now() < until);
                let wake = tokio::select! {
                    biased;
                    _ = terminate.recv(), if self.shutdown_until_ms.is_none() => Wake::Signal,
                    _ = interrupt.recv(), if self.shutdown_until_ms.is_none() => Wake::Signal,
                    _ = crate::signals::next(&mut hangup), if self.shutdown_until_ms.is_none() => Wake::Signal,
                    event = events.recv() => Wake::Event(event),
                    // Never None: the node holds a sender.
                    Some(done) = snapshot_done.recv() => Wake::SnapshotDone(done),
                    Some(checked) = listed_checked.recv() => Wake::ListedChecked(checked),
                    Some(prepared) = folder_prepared.recv() => Wake::FolderPrepared(prepared),
                    ready = storage_signal(storage_ready.as_ref()), if storage_waits => {
                        ready.map_err(NodeError::Runtime)?;
                        Wake::Storage
                    }
                    _ = &mut sleep => Wake::Timer,
                    _ = tokio_uring::no_op(), if polling => {
                        // Another process with work on this CPU goes first.
                        std::thread::yield_now();
                        continue;
                    }
                };
                break wake;
            };
            busy = !matches!(wake, Wake::Timer);
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
                Wake::ListedChecked(checked) => {
                    let began = Instant::now();
                    self.on_listed_checked(checked)?;
                    self.stall.step(began, "listed batches checked", "");
                }
                // `pump`, at the top of the loop, runs the starts that waited for it.
                Wake::FolderPrepared(prepared) => self.folder_prep.on_prepared(prepared),
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
                let shutting_down = self.shutdown_until_ms.is_some();
                let mut q = qx!(self);
                let answers = self.quorum.peer_failed(
                    &mut q,
                    peer,
                    correlation_ids,
                    shutting_down,
                    &mut later,
                )?;
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

    fn log_leader_changes(&mut self, touched: &BTreeSet<PartitionId>) {
        for &partition in touched {
            let Some(raft) = self.host.multi().partition(partition) else {
                continue;
            };
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
