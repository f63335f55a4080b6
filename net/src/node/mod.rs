//! The node: the replication core, the storage engine and the sockets, driven by one event
//! loop on one thread (docs/node.md).
//!
//! ```text
//!  sockets (transport.rs) ──Event──▶ ┌────────────── event loop ──────────────┐
//!  peer lanes ─────────────Event──▶ │ step / tick / on_persisted / append    │──▶ MultiRaft
//!                                    │ execute Work, in order:                │◀── Vec<Work>
//!                                    │   storage (storage.rs, shared AnyIo)   │
//!                                    │   messages (peer lanes, answer slots)  │
//!                                    └────────────────────────────────────────┘
//! ```
//!
//! No re-entrancy: the core is never called while a work list is being executed. Persistence
//! completions (`Persisted::Log`, `Persisted::QuorumState`) go into a queue and are reported
//! after the current list is done, like a completion ring drained into a queue.
//!
//! Persistence order (KIP-595): a quorum-state write is synchronous (tmp + fdatasync + rename +
//! folder fsync) and finishes before the next work item runs; a `SendAfterPersist` message
//! waits in `held` until every log flush requested before it has completed; `Persisted::Log`
//! is reported only from the engine's durable end offset, which moves only after an fdatasync.

pub mod client;
pub mod convert;
mod delete_topics;
mod fetch_snapshot;
mod group_offsets;
mod groups;
mod handlers;
mod idempotence;
mod metadata;
mod observe;
mod produce_validation;
mod producer_state;
mod pump;
mod shutdown;
use pump::{ReadinessFd, storage_signal};
mod requests;
mod retention;
mod snapshots;
pub mod storage;
mod topic_image;
mod topics;
pub mod transport;
pub mod unclean;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::PathBuf;
use std::rc::Rc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use ringlog_engine::io::{AnyIo, BackendChoiceError, Io};
use ringlog_engine::log::LogConfig;
use ringlog_replication::{
    self as core, MultiRaft, NodeId, PartitionId, PartitionWork, Persisted, QuorumConfig,
    RaftError, RecoveredState, Work,
};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

use crate::config::NodeConfig;
use crate::meta_properties::{MetaProperties, MetaPropertiesError};
use crate::metrics::MetricsServer;
use crate::protocol::{ApiKey, EncodeError};
use crate::server::{FileRegion, RecordsSource, Server, ServerConfig, ServerError};
use convert::{InboundPart, PartAnswer, PartitionTable};
use storage::{PartitionStore, StorageError};
use transport::{Event, NodeHandler, PeerLane, Responder};

#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    #[error(transparent)]
    Meta(#[from] MetaPropertiesError),
    #[error(transparent)]
    Storage(#[from] StorageError),
    #[error(transparent)]
    IoBackend(#[from] BackendChoiceError),
    #[error("replication core: {0}")]
    Raft(#[from] RaftError),
    #[error("cannot listen on {address}: {source}")]
    Bind {
        address: String,
        source: std::io::Error,
    },
    #[error("runtime: {0}")]
    Runtime(std::io::Error),
    #[error("encoding a message: {0}")]
    Encode(#[from] EncodeError),
}

/// Starts a node from its configuration and runs it until SIGTERM or SIGINT (graceful: a leader
/// resigns first). Blocks the calling thread.
pub fn run(config: NodeConfig) -> Result<(), NodeError> {
    let meta = MetaProperties::check(&config.metadata_log_dir, config.node_id, None)?;
    // tokio-uring's runtime is a current-thread tokio runtime with a LocalSet: the event loop,
    // the server's connections and the peer lanes all run on this one thread.
    let mut builder = tokio_uring::builder();
    builder.entries(256);
    builder.start(async move {
        let (events_tx, events_rx) = unbounded_channel();
        let node = Node::open(config, meta.cluster_id, events_tx.clone())?;
        let server_config = ServerConfig {
            // The node answers ApiVersions itself, listing only the APIs it serves.
            answer_api_versions: false,
            ..ServerConfig::from_node_config(&node.config)
        };
        let server = Server::start(server_config, Rc::new(NodeHandler::new(events_tx))).map_err(
            |error| match error {
                ServerError::Bind { address, source } => NodeError::Bind {
                    address: address.to_string(),
                    source,
                },
                other => NodeError::Runtime(std::io::Error::other(other.to_string())),
            },
        )?;
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
            voter = node.config.is_voter(),
            io = node.io.backend_name(),
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

/// What we sent a peer and wait for.
enum PeerPending {
    Control,
    /// Partition and core correlation id of each fetch in the wire request.
    Fetch(Vec<(PartitionId, u64)>),
    /// KIP-630: partition and core correlation id of each partition in the FetchSnapshot.
    FetchSnapshot(Vec<(PartitionId, u64)>),
}

/// A `SendAfterPersist` message waiting for the flushes requested before it.
struct Held {
    /// (partition, flush target, truncation count) when the message was held.
    targets: Vec<(PartitionId, u64, u64)>,
    partition: PartitionId,
    to: NodeId,
    message: core::Message,
}

pub(crate) struct Node {
    config: NodeConfig,
    /// Snapshot writer threads report completion here (snapshots.rs); the loop takes the
    /// receiver when it starts.
    snapshot_done_tx: UnboundedSender<snapshots::SnapshotDone>,
    snapshot_done_rx: Option<UnboundedReceiver<snapshots::SnapshotDone>>,
    cluster_id: String,
    table: PartitionTable,
    multi: MultiRaft,
    io: AnyIo,
    stores: BTreeMap<PartitionId, PartitionStore>,
    started: Instant,
    /// Wall-clock milliseconds at `started`, for DescribeQuorum's timestamps.
    started_wall_ms: u64,
    peers: BTreeMap<NodeId, (PeerLane, PeerLane)>,
    next_peer_correlation_id: i32,
    peer_pending: HashMap<(NodeId, i32), PeerPending>,
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
    held: VecDeque<Held>,
    persisted: VecDeque<(PartitionId, Persisted)>,
    /// Replica Fetch requests whose parked parts are to be answered now (requests.rs).
    parked_releases: Vec<u64>,
    handlers: handlers::State,
    /// Last (leader, epoch) logged per partition.
    last_leader: BTreeMap<PartitionId, (Option<NodeId>, u32)>,
    /// Set by SIGTERM/SIGINT: the loop ends at this time or once the resignation is delivered.
    shutdown_until_ms: Option<u64>,
    /// KRaft's metrics, fed once per loop iteration.
    observer: observe::Observer,
    /// Warns of loop turns that hold the thread, naming the slowest step and the slowest work
    /// item or `pump` stage inside it.
    stall: observe::StallWatch,
}

impl Node {
    fn open(
        config: NodeConfig,
        cluster_id: String,
        events: UnboundedSender<Event>,
    ) -> Result<Node, NodeError> {
        let mut io = AnyIo::from_env(Some(&config.metadata_log_dir))?;
        let table = PartitionTable::metadata_only();
        let voter_ids: Vec<NodeId> = config.quorum_voters.iter().map(|v| v.node_id).collect();
        let mut stores = BTreeMap::new();
        let mut recovered: BTreeMap<PartitionId, RecoveredState> = BTreeMap::new();
        for id in table.ids() {
            let dir: PathBuf = config.metadata_log_dir.join(table.dir_name(id));
            let log_config = LogConfig {
                segment_size_bytes: config.segment_size_bytes,
                max_batch_size_bytes: (config.message_max_bytes as usize)
                    .max(ringlog_engine::batch::DEFAULT_MAX_BATCH_SIZE_BYTES),
                ..LogConfig::default()
            };
            let (store, state) =
                PartitionStore::open(&mut io, &dir, log_config, &cluster_id, &voter_ids)?;
            tracing::info!(partition = id, ?state, "recovered");
            stores.insert(id, store);
            recovered.insert(id, state);
        }
        let mut quorum = QuorumConfig::new(config.node_id, &voter_ids)?;
        quorum.election_timeout_ms = config.election_timeout_ms;
        quorum.election_backoff_max_ms = config.election_backoff_max_ms;
        quorum.fetch_timeout_ms = config.fetch_timeout_ms;
        quorum.request_timeout_ms = config.request_timeout_ms;
        quorum.fetch_max_wait_ms = config.fetch_max_wait_ms;
        quorum.max_replication_lag_ms = config.max_replication_lag_ms;
        let seed = random_seed();
        let recovered_snapshots = stores
            .iter()
            .map(|(id, store)| (*id, snapshots::recovered_snapshots(store)))
            .collect();
        let multi =
            MultiRaft::new_with_snapshots(&quorum, &recovered, &recovered_snapshots, seed, 0)?;
        let max_frame = config.socket_request_max_bytes as usize;
        let connect_timeout = Duration::from_millis(config.request_timeout_ms.min(1000));
        let mut peers = BTreeMap::new();
        for voter in &config.quorum_voters {
            if voter.node_id == config.node_id {
                continue;
            }
            let address = format!("{}:{}", voter.host, voter.port);
            let lane = |events: &UnboundedSender<Event>| {
                PeerLane::spawn(
                    voter.node_id,
                    address.clone(),
                    events.clone(),
                    max_frame,
                    connect_timeout,
                )
            };
            peers.insert(voter.node_id, (lane(&events), lane(&events)));
        }
        let observer = observe::Observer::new(
            table.ids().map(|id| {
                let dir = config.metadata_log_dir.join(table.dir_name(id));
                (id, table.dir_name(id), dir)
            }),
            config.is_voter(),
        );
        let started_wall_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let (snapshot_done_tx, snapshot_done_rx) = unbounded_channel();
        let stall = observe::StallWatch::new(config.fetch_timeout_ms);
        let mut node = Node {
            snapshot_done_tx,
            snapshot_done_rx: Some(snapshot_done_rx),
            config,
            cluster_id,
            table,
            multi,
            io,
            stores,
            started: Instant::now(),
            started_wall_ms,
            peers,
            next_peer_correlation_id: 1,
            peer_pending: HashMap::new(),
            snapshot_fetches: BTreeMap::new(),
            pending: HashMap::new(),
            next_pending_id: 1,
            fifo: HashMap::new(),
            fetch_slots: HashMap::new(),
            fetch_regions: HashMap::new(),
            latest_replica_fetch: HashMap::new(),
            next_core_correlation_id: 1,
            held: VecDeque::new(),
            persisted: VecDeque::new(),
            parked_releases: Vec::new(),
            handlers: handlers::State::default(),
            last_leader: BTreeMap::new(),
            shutdown_until_ms: None,
            stall,
            observer,
        };
        // Idempotent producing's state is read from each log here, before the loop runs, and
        // then follows every append: never a scan of the log on the loop when this node becomes
        // leader (idempotence.rs).
        let ids: Vec<PartitionId> = node.stores.keys().copied().collect();
        for id in ids {
            node.ensure_producer_state(id)?;
        }
        node.handlers.groups = groups::GroupsState::new(node.config.groups.clone(), random_seed());
        Ok(node)
    }

    fn now_ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    /// The event loop. Returns after a graceful shutdown.
    async fn run(mut self, mut events: UnboundedReceiver<Event>) -> Result<(), NodeError> {
        use tokio::signal::unix::{SignalKind, signal};
        let mut terminate = signal(SignalKind::terminate()).map_err(NodeError::Runtime)?;
        let mut interrupt = signal(SignalKind::interrupt()).map_err(NodeError::Runtime)?;
        let mut snapshot_done = self
            .snapshot_done_rx
            .take()
            .expect("the event loop runs once");
        // The ring signals this fd for every completion it posts: the loop sleeps until then,
        // with no timer between a submission and the reaction to its completion.
        let storage_ready = match self.io.readiness_fd() {
            // SAFETY: the fd belongs to `self.io`, which outlives this registration: it is
            // dropped below, before `finish_shutdown` consumes the node.
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
            let (work, next_deadline_ms) = self.multi.tick(now)?;
            self.execute(work)?;
            self.stall.step(began, "tick", "");
            let began = Instant::now();
            self.pump()?;
            self.stall.step(began, "pump", "");
            let began = Instant::now();
            self.expire(now);
            self.log_leader_changes();
            self.observer.observe(&self.multi);
            self.stall.step(began, "observe", "");
            if let Some(until) = self.shutdown_until_ms
                && (now >= until || !self.control_requests_pending())
            {
                break;
            }
            let mut wake_ms = next_deadline_ms
                .min(self.handlers.next_deadline_ms())
                .min(now + 100);
            // A backend without a readiness fd finished its operations inside the last
            // `submit_and_wait`; anything still in flight is picked up at once, not later.
            let storage_waits = self.io.in_flight() > 0;
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
                    self.on_snapshot_generated(done)?;
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
                    if let Some(PeerPending::Fetch(fetches)) = self.peer_pending.remove(&(peer, id))
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
                            let step = self.multi.step(
                                now,
                                peer,
                                ringlog_replication::PartitionMessage { partition, message },
                            );
                            match step {
                                Ok(work) => self.execute(work)?,
                                Err(error) => tracing::debug!(%error, "failed fetch not taken"),
                            }
                        }
                    }
                }
                Ok(())
            }
        }
    }

    // ---- executing the core's work ---------------------------------------------------------

    /// Executes one work list front to back (see `Work`'s rules).
    fn execute(&mut self, work: Vec<PartitionWork>) -> Result<(), NodeError> {
        let mut fetches: BTreeMap<NodeId, Vec<(PartitionId, core::FetchRequest)>> = BTreeMap::new();
        for PartitionWork { partition, work } in work {
            let epoch = self.multi.partition(partition).map_or(0, |r| r.epoch());
            let span = tracing::debug_span!("work", partition, epoch);
            let _guard = span.enter();
            let began = Instant::now();
            let name = work.name();
            match work {
                Work::Send { to, message } => {
                    self.dispatch(partition, to, message, &mut fetches)?
                }
                Work::SendAfterPersist { to, message } => {
                    if self.stores.values().any(PartitionStore::flush_outstanding) {
                        let targets = self
                            .stores
                            .iter()
                            .map(|(p, s)| (*p, s.flush_target, s.truncations))
                            .collect();
                        self.held.push_back(Held {
                            targets,
                            partition,
                            to,
                            message,
                        });
                    } else if self.held.is_empty() {
                        self.dispatch(partition, to, message, &mut fetches)?;
                    } else {
                        // Keep the order of held messages.
                        self.held.push_back(Held {
                            targets: Vec::new(),
                            partition,
                            to,
                            message,
                        });
                    }
                }
                Work::SendFetchResponse {
                    to: _,
                    mut response,
                    fetch_offset,
                    max_bytes,
                } => {
                    if response.error_code == core::ErrorCode::None
                        && response.diverging_epoch.is_none()
                        && response.snapshot_id.is_none()
                    {
                        let store = self.stores.get_mut(&partition).expect("hosted partition");
                        match store.read_region(&mut self.io, fetch_offset, max_bytes, u64::MAX) {
                            Ok(RecordsSource::Memory(records)) => response.records = records,
                            // Zero copy: the region goes to the socket with sendfile when the
                            // whole wire response is complete (`maybe_complete`). The core
                            // never looks at the records of a response it sent.
                            Ok(RecordsSource::File(region)) => {
                                self.fetch_regions.insert(response.correlation_id, region);
                            }
                            // A read error is treated as corruption of that range: the fetcher
                            // gets no records (and retries), the node keeps serving the rest.
                            Err(error) => {
                                tracing::error!(%error, fetch_offset, "log read failed");
                                response.error_code = core::ErrorCode::UnknownServerError;
                            }
                        }
                    }
                    self.answer_fetch(response)?;
                }
                Work::AppendAsLeader {
                    base_offset,
                    leader_epoch,
                    batches,
                } => {
                    let store = self.stores.get_mut(&partition).expect("hosted partition");
                    let got = store.append_as_leader(&batches, leader_epoch)?;
                    assert_eq!(
                        got, base_offset,
                        "the engine and the core disagree on the log end"
                    );
                    self.track_leader_append(partition, base_offset, &batches);
                }
                Work::AppendAsFollower { records } => {
                    self.track_follower_append(partition, &records);
                    let store = self.stores.get_mut(&partition).expect("hosted partition");
                    store
                        .log
                        .append_as_follower(records)
                        .map_err(StorageError::from)?;
                }
                Work::Truncate { offset } => {
                    let store = self.stores.get_mut(&partition).expect("hosted partition");
                    let floor = store.high_watermark as i64;
                    let end = store
                        .log
                        .truncate_to(&mut self.io, offset as i64, floor)
                        .map_err(StorageError::from)? as u64;
                    if end != offset {
                        tracing::warn!(offset, end, "truncation ended below the asked offset");
                    }
                    store.truncations += 1;
                    store.flush_target = store.flush_target.min(end);
                    store.reported_durable_end_offset = store.reported_durable_end_offset.min(end);
                    tracing::info!(offset = end, "log truncated (diverging epoch)");
                    self.track_truncation(partition, end, false);
                }
                Work::Flush { end_offset, .. } => {
                    let store = self.stores.get_mut(&partition).expect("hosted partition");
                    store.flush_target = store.flush_target.max(end_offset);
                    store.log.flush(&mut self.io).map_err(StorageError::from)?;
                }
                Work::WriteQuorumState(state) => {
                    let store = self.stores.get_mut(&partition).expect("hosted partition");
                    store.write_quorum_state(&mut self.io, state)?;
                    self.persisted
                        .push_back((partition, Persisted::QuorumState(state)));
                }
                Work::HighWatermarkChanged { high_watermark } => {
                    let store = self.stores.get_mut(&partition).expect("hosted partition");
                    assert!(
                        high_watermark >= store.high_watermark,
                        "the high-watermark moved back from {} to {high_watermark}",
                        store.high_watermark
                    );
                    // Produce waiters and parked consumer fetches are checked in `pump`.
                    store.high_watermark = high_watermark;
                    self.track_high_watermark(partition, high_watermark);
                    self.apply_committed(partition)?;
                }
                // The node never reports a snapshot written, so the core does not emit these
                // yet; when it does, keeping the segments and snapshots is still correct.
                // KIP-630 (snapshots.rs).
                // The engine's advance first waits for the log's flush in flight (write +
                // fdatasync, then the confirmation record's): on the loop that was a stall of
                // one or two fsyncs after every snapshot, 2.8 s and 4.8 s measured under load,
                // past the fetch timeout. The core already moved its log start (it never reads
                // below it), so the files can wait until the ring is idle (`pump`).
                Work::AdvanceLogStartOffset { offset } => {
                    let store = self.stores.get_mut(&partition).expect("hosted partition");
                    let deferred = store.deferred_log_start_offset.get_or_insert(offset);
                    *deferred = (*deferred).max(offset);
                }
                Work::DeleteSnapshotsBefore { snapshot_id } => {
                    self.delete_old_snapshots(partition, snapshot_id)?
                }
                Work::SendFetchSnapshotResponse {
                    to,
                    mut response,
                    max_bytes,
                } => {
                    let region =
                        self.fill_fetch_snapshot_response(partition, &mut response, max_bytes);
                    let message = core::Message::FetchSnapshotResponse(response);
                    self.answer_fifo_with_region(
                        to,
                        ApiKey::FetchSnapshot,
                        partition,
                        message,
                        region,
                    )?;
                }
                Work::WriteSnapshotChunk {
                    snapshot_id,
                    size_bytes,
                    position,
                    bytes,
                } => {
                    self.write_snapshot_chunk(partition, snapshot_id, size_bytes, position, bytes)?
                }
                Work::InstallSnapshot { snapshot_id } => {
                    self.install_snapshot(partition, snapshot_id)?;
                    // The log now starts at the snapshot: what it held before is gone.
                    self.track_truncation(partition, snapshot_id.offset, true);
                }
            }
            self.stall.part(began, name);
        }
        self.send_fetches(fetches)
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
                let Some((request, version)) =
                    convert::peer_request(&self.cluster_id, self.table.get(partition), &message)
                else {
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
        for (partition, raft) in self.multi.partitions() {
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
