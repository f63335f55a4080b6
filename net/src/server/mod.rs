//! The Kafka-protocol TCP server: framing, pipelining, ordered replies, zero-copy records.
//!
//! One [`Server`] runs on the current `tokio-uring` runtime thread (see `docs/server.md` for why
//! one thread). Each accepted connection gets a reader and a writer:
//!
//! - the **reader** ([`frame::FrameReader`]) reads the int32 size prefix, rejects a negative size
//!   or one above `socket.request.max.bytes` before any body byte is read, reads the body into a
//!   buffer owned by the connection and hands it on as [`Bytes`] (Produce records stay slices
//!   of that buffer). It decodes the request with [`crate::protocol::decode_request_frame`] and
//!   spawns the [`RequestHandler`]'s future, so a long-polled Fetch does not hold back the
//!   ApiVersions behind it. At most `max_in_flight_per_connection` requests may be unanswered;
//!   at the limit the reader stops reading and TCP pushes back on the client. Memory for a
//!   frame is reserved as its bytes arrive; beyond the connection's 64 KiB read buffer it is
//!   charged to the node-wide `queued.max.request.bytes` budget ([`memory_pool`]), and a frame
//!   the budget cannot take yet pauses its connection's reading.
//! - the **writer** ([`connection`]) takes the requests' reply slots in request order and writes
//!   each reply when its turn comes, so responses leave strictly in request order.
//!
//! Records in a reply are never copied into the response buffer: in-memory records go out in a
//! vectored write next to the encoded bytes, a file region goes from the file to the socket
//! with `sendfile(2)`, except pieces the page cache lacks, which are read through the ring so
//! the thread never waits for the disk ([`writer`], [`file_pages`]).
//!
//! The server binds the client listener (or the only one) and, with `controller.listener.names`,
//! a controller listener; each connection knows its [`ListenerRole`], and the handler decides
//! what each may carry. A listener with a TLS configuration runs each connection through
//! rustls ([`tls_stream`]); such replies are encrypted in userspace, so their file regions are
//! read and written rather than sent with `sendfile`.
//!
//! Connections over `max.connections` or `max.connections.per.ip` are closed at accept
//! ([`connection_limits`]). What happens on bad input is one table, in `docs/server.md` and in
//! [`connection`].

mod connection;
mod connection_limits;
mod file_pages;
pub(crate) mod frame;
mod memory_pool;
mod metrics;
mod thread;
pub(crate) mod tls_stream;
mod writer;

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::pin::Pin;
use std::rc::Rc;
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::Notify;

use crate::config::NodeConfig;
use crate::protocol::{Request, RequestHeader, Response};
use connection_limits::{ConnectionLimits, Refusal};
use memory_pool::RequestMemoryPool;

pub use memory_pool::PoolClosed;
pub use metrics::ServerMetrics;
pub use thread::ServerThread;

/// A boxed future that need not be `Send`: the server and the node share one thread.
pub type LocalBoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + 'a>>;

/// Who sent a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectionInfo {
    /// Unique for the life of the server, in accept order.
    pub connection_id: u64,
    pub peer_addr: SocketAddr,
    pub local_addr: SocketAddr,
    /// Which listener accepted the connection.
    pub listener: ListenerRole,
    /// The subject DN of the client certificate a TLS client presented (`CN=x,O=y`), for its
    /// ACL principal (`crate::acl::principal::principal_of`); `None` on PLAINTEXT or without one.
    pub tls_client_subject: Option<std::sync::Arc<str>>,
    /// On a SASL listener, the user the connection authenticated as (`User:<name>`); `None`
    /// before that and on every other listener. Interned, so this stays `Copy`
    /// ([`crate::sasl::SaslUser`]).
    pub sasl_user: Option<crate::sasl::SaslUser>,
}

/// What a listener is for (`controller.listener.names`): the handler decides which APIs each
/// may carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListenerRole {
    /// The only listener: peers and clients alike.
    Combined,
    /// The client listener of a node with a separate controller listener.
    Client,
    /// The separate controller listener.
    Controller,
}

impl ListenerRole {
    /// Whether the quorum's requests may arrive on this listener.
    pub fn serves_quorum(self) -> bool {
        matches!(self, ListenerRole::Combined | ListenerRole::Controller)
    }
}

/// The node's side of the server: turns one decoded request into a reply.
///
/// Called on the server's thread; the future is spawned as its own task, so it may wait (a
/// long-polled Fetch) while later requests on the same connection are handled. Its reply is
/// written only after every earlier request of that connection has been answered.
pub trait RequestHandler {
    fn handle(
        &self,
        connection: ConnectionInfo,
        header: RequestHeader,
        request: Request,
    ) -> LocalBoxFuture<'static, Reply>;

    /// The stored SCRAM credential of `user` for `mechanism`, which a SASL listener's exchange
    /// checks the client's proof against ([`crate::sasl::SaslSession`]); `None`: no such user.
    fn scram_credential(
        &self,
        _user: &str,
        _mechanism: crate::sasl::ScramMechanism,
    ) -> Option<crate::sasl::ScramCredential> {
        None
    }
}

/// What to send back for one request.
#[derive(Debug)]
pub enum Reply {
    /// A response; in-memory records (`Records::Bytes`) are written by reference.
    Response(Response),
    /// A response whose records fields hold `Records::External { token, size_bytes }`:
    /// `token` is an index into `regions` and `size_bytes` must equal that region's length.
    WithRecords {
        response: Response,
        regions: Vec<RecordsSource>,
    },
    /// A response already encoded by the handler: the whole frame, size prefix included,
    /// written as it is (the handler answers for its API and correlation id).
    Frame(Bytes),
    /// Kafka sends no response to this request (Produce with acks=0): write nothing, free the
    /// slot, and go on with the next request's reply.
    Nothing,
    /// Send nothing, and close the connection once the earlier responses are out.
    Close,
}

/// Where the bytes of an external records field come from.
#[derive(Debug, Clone)]
pub enum RecordsSource {
    Memory(Bytes),
    /// Several buffers whose concatenation is the records (slices of a log's in-memory tail),
    /// written by reference with the frame's other buffers in one `writev`.
    Chunks(Vec<Bytes>),
    File(FileRegion),
}

impl RecordsSource {
    /// These bytes as a records field of a response to encode: `Records::External`, its token
    /// the place this source takes in `sources` (which the writer sends after the encoded bytes
    /// before each field, in token order).
    pub fn attach_to(self, sources: &mut Vec<RecordsSource>) -> crate::protocol::wire::Records {
        let size_bytes = u32::try_from(self.size_bytes())
            .expect("a read stays within one segment, at most 2 GiB");
        let token = sources.len() as u64;
        sources.push(self);
        crate::protocol::wire::Records::External { token, size_bytes }
    }

    pub fn size_bytes(&self) -> u64 {
        match self {
            RecordsSource::Memory(bytes) => bytes.len() as u64,
            RecordsSource::Chunks(chunks) => chunks.iter().map(|chunk| chunk.len() as u64).sum(),
            RecordsSource::File(region) => u64::from(region.length),
        }
    }
}

/// `length` bytes of a file from `position`, sent with `sendfile(2)`. `file` keeps the
/// descriptor open until the bytes are on the socket (the node's: a segment's or a snapshot's
/// kept-open reader, `ringlog_engine::io::FileReader`, which stays readable if the file is
/// deleted meanwhile).
#[derive(Clone)]
pub struct FileRegion {
    pub file: Rc<dyn AsFd>,
    pub position: u64,
    pub length: u32,
}

impl FileRegion {
    pub fn raw_fd(&self) -> RawFd {
        self.file.as_fd().as_raw_fd()
    }
}

impl std::fmt::Debug for FileRegion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileRegion")
            .field("fd", &self.raw_fd())
            .field("position", &self.position)
            .field("length", &self.length)
            .finish()
    }
}

/// The server's settings.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// The client listener, or the only one.
    pub listener: SocketAddr,
    /// The separate controller listener (`controller.listener.names`); `None`: `listener`
    /// serves everything ([`ListenerRole::Combined`]).
    pub controller_listener: Option<SocketAddr>,
    /// `socket.request.max.bytes`: a larger size prefix closes the connection unread.
    pub socket_request_max_bytes: u32,
    /// Requests read but not yet answered, per connection, before the reader pauses.
    pub max_in_flight_per_connection: usize,
    /// Answer ApiVersions in the server from `supported_api_versions()` instead of asking the
    /// handler, so a client handshake works before any node logic exists.
    pub answer_api_versions: bool,
    /// `queued.max.request.bytes`: request bytes charged across all connections (frames beyond
    /// a connection's read buffer, until answered) before reading pauses; `None` is unbounded.
    /// Must hold the largest frame (`socket_request_max_bytes`).
    pub queued_max_request_bytes: Option<u64>,
    /// `max.connections`: connections open at once; more are closed at accept.
    pub max_connections: usize,
    /// `max.connections.per.ip`: connections open at once from one address.
    pub max_connections_per_ip: usize,
    /// `connections.max.idle.ms`: a connection that read and wrote nothing for this long, with
    /// nothing owed, is closed; `None` keeps idle connections.
    pub connections_max_idle: Option<std::time::Duration>,
    /// Where the server reports its memory and connection counts.
    pub metrics: ServerMetrics,
    /// TLS on the client listener (or the only one): `listener.security.protocol.map` SSL.
    pub client_tls: Option<std::sync::Arc<rustls::ServerConfig>>,
    /// TLS on the controller listener.
    pub controller_tls: Option<std::sync::Arc<rustls::ServerConfig>>,
    /// SASL on the client listener (`SASL_PLAINTEXT`, or `SASL_SSL` with `client_tls`): the
    /// mechanisms of `sasl.enabled.mechanisms`. Every connection must authenticate before any
    /// request but ApiVersions and the exchange's own ([`crate::sasl::SaslSession`]).
    pub client_sasl: Option<Vec<crate::sasl::ScramMechanism>>,
}

impl ServerConfig {
    pub const DEFAULT_MAX_IN_FLIGHT_PER_CONNECTION: usize = 8;
    /// 100 MiB, the largest frame's size: any one request can always be read, and frames being
    /// read never hold more than that. (Kafka's default, -1, is unbounded.)
    pub const DEFAULT_QUEUED_MAX_REQUEST_BYTES: u64 = 100 * 1024 * 1024;
    /// Kafka's default is unbounded. A connection costs a descriptor, up to 64 KiB of read
    /// buffer and kernel socket buffers; 4096 keeps that to a few hundred MiB at most.
    pub const DEFAULT_MAX_CONNECTIONS: usize = 4096;
    /// A quarter of `max.connections`: one host (or one NAT) cannot take every slot.
    pub const DEFAULT_MAX_CONNECTIONS_PER_IP: usize = 1024;
    /// Kafka's default: 10 minutes.
    pub const DEFAULT_CONNECTIONS_MAX_IDLE_MS: u64 = 600_000;

    pub fn new(listener: SocketAddr) -> ServerConfig {
        ServerConfig {
            listener,
            controller_listener: None,
            socket_request_max_bytes: crate::protocol::DEFAULT_MAX_FRAME_BYTES as u32,
            max_in_flight_per_connection: Self::DEFAULT_MAX_IN_FLIGHT_PER_CONNECTION,
            answer_api_versions: true,
            queued_max_request_bytes: Some(Self::DEFAULT_QUEUED_MAX_REQUEST_BYTES),
            max_connections: Self::DEFAULT_MAX_CONNECTIONS,
            max_connections_per_ip: Self::DEFAULT_MAX_CONNECTIONS_PER_IP,
            connections_max_idle: Some(std::time::Duration::from_millis(
                Self::DEFAULT_CONNECTIONS_MAX_IDLE_MS,
            )),
            metrics: ServerMetrics::default(),
            client_tls: None,
            controller_tls: None,
            client_sasl: None,
        }
    }

    pub fn from_node_config(config: &NodeConfig) -> ServerConfig {
        ServerConfig {
            socket_request_max_bytes: config.socket_request_max_bytes,
            queued_max_request_bytes: config.queued_max_request_bytes,
            max_connections: config.max_connections,
            max_connections_per_ip: config.max_connections_per_ip,
            connections_max_idle: config
                .connections_max_idle_ms
                .map(std::time::Duration::from_millis),
            controller_listener: config.listeners.controller.as_ref().map(|l| l.address),
            ..ServerConfig::new(config.listeners.client.address)
        }
    }
}

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("bind {address}: {source}")]
    Bind {
        address: SocketAddr,
        source: std::io::Error,
    },
    #[error("server thread: {source}")]
    Thread { source: std::io::Error },
    #[error("max_in_flight_per_connection must be at least 1")]
    NoInFlight,
    #[error(
        "queued.max.request.bytes ({budget_bytes}) must hold the largest request, socket.request.max.bytes ({frame_max_bytes})"
    )]
    BudgetBelowFrame {
        budget_bytes: u64,
        frame_max_bytes: u32,
    },
    #[error("max.connections and max.connections.per.ip must be at least 1")]
    NoConnections,
}

/// What a graceful stop achieved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StopReport {
    /// Connections still open when the grace period ended (closed by force).
    pub connections_forced: usize,
}

/// State shared by the accept loop, the connections and the handle.
pub(crate) struct Shared {
    pub(crate) config: ServerConfig,
    pub(crate) handler: Rc<dyn RequestHandler>,
    pub(crate) stopping: Cell<bool>,
    /// Open connections by id: their sockets, so a stop can shut their read side.
    pub(crate) connections: RefCell<HashMap<u64, Rc<tokio_uring::net::TcpStream>>>,
    /// Signalled whenever a connection ends.
    pub(crate) connection_closed: Notify,
    /// Set when the grace period of a stop is over: writers stop waiting for replies.
    pub(crate) forced: Cell<bool>,
    pub(crate) force_close: Notify,
    /// `queued.max.request.bytes`, shared by every connection's reader.
    pub(crate) memory_pool: Rc<RequestMemoryPool>,
    limits: Rc<ConnectionLimits>,
    /// Connection ids are unique across the listeners.
    next_connection_id: Cell<u64>,
}

impl Shared {
    /// The TLS configuration of the listener with `role`, if it speaks TLS.
    pub(crate) fn tls_for(
        &self,
        role: ListenerRole,
    ) -> Option<std::sync::Arc<rustls::ServerConfig>> {
        match role {
            ListenerRole::Combined | ListenerRole::Client => self.config.client_tls.clone(),
            ListenerRole::Controller => self.config.controller_tls.clone(),
        }
    }

    /// The SASL mechanisms of the listener with `role`, if it requires authentication (the
    /// controller listener never does).
    pub(crate) fn sasl_for(&self, role: ListenerRole) -> Option<&[crate::sasl::ScramMechanism]> {
        match role {
            ListenerRole::Combined | ListenerRole::Client => self.config.client_sasl.as_deref(),
            ListenerRole::Controller => None,
        }
    }

    /// Resolves once a stop has run out of grace.
    pub(crate) async fn forced_closed(&self) {
        loop {
            // Created before the check: `notify_waiters` reaches it even before its first poll.
            let notified = self.force_close.notified();
            if self.forced.get() {
                return;
            }
            notified.await;
        }
    }
}

/// A running server. Dropping it does not stop the server; call [`ServerHandle::stop`].
pub struct ServerHandle {
    /// The client listener (or the only one) first, then the controller listener.
    listeners: Vec<BoundListener>,
    shared: Rc<Shared>,
}

struct BoundListener {
    local_addr: SocketAddr,
    listener_fd: RawFd,
    accept_task: tokio::task::JoinHandle<()>,
}

/// Namespace for starting a server.
pub struct Server;

/// How long a node waits, at start, for something a process before it may still hold: its
/// listeners' addresses here, its data folder's lock (`data_dir_lock.rs`).
pub(crate) const DEAD_OWNER_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// Runs `attempt` until it succeeds, fails otherwise than `held` says, or `wait` passes,
/// 50 ms apart; `first_held` is told of the first held answer (to log the wait once). A node
/// restarted right after kill -9 of its predecessor meets what the dying process still holds;
/// a live holder still fails, after the wait, with its own error.
pub(crate) fn retry_while_held<T, E>(
    wait: std::time::Duration,
    mut attempt: impl FnMut() -> Result<T, E>,
    held: impl Fn(&E) -> bool,
    first_held: impl FnOnce(&E),
) -> Result<T, E> {
    let deadline = std::time::Instant::now() + wait;
    let mut first_held = Some(first_held);
    loop {
        match attempt() {
            Err(error) if held(&error) && std::time::Instant::now() < deadline => {
                if let Some(tell) = first_held.take() {
                    tell(&error);
                }
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            result => return result,
        }
    }
}

/// Binds `address`, retrying for up to `DEAD_OWNER_WAIT` while it is in use
/// ([`retry_while_held`]). A node restarted right after a kill -9 meets its own previous
/// listener: the kernel tears a dead process's io_uring down only after the process was
/// reaped, and a pending accept keeps the listening socket open until then (seen in CI as
/// "Address already in use" on restart). Every listener of a node binds through it: the Kafka
/// listeners here and the metrics endpoint (`metrics::MetricsServer`, since 2026-12-05, after
/// CI met the same error on it).
pub(crate) fn bind_waiting_for_a_dead_owner(
    address: std::net::SocketAddr,
) -> std::io::Result<std::net::TcpListener> {
    retry_while_held(
        DEAD_OWNER_WAIT,
        || std::net::TcpListener::bind(address),
        |error| error.kind() == std::io::ErrorKind::AddrInUse,
        |_| {
            tracing::warn!(%address, "listener address in use; waiting up to {} ms for it to be freed", DEAD_OWNER_WAIT.as_millis());
        },
    )
}

impl Server {
    /// Binds the listener and spawns the accept loop on the current tokio-uring runtime.
    pub fn start(
        config: ServerConfig,
        handler: Rc<dyn RequestHandler>,
    ) -> Result<ServerHandle, ServerError> {
        if config.max_in_flight_per_connection == 0 {
            return Err(ServerError::NoInFlight);
        }
        if let Some(budget_bytes) = config.queued_max_request_bytes
            && budget_bytes < u64::from(config.socket_request_max_bytes)
        {
            return Err(ServerError::BudgetBelowFrame {
                budget_bytes,
                frame_max_bytes: config.socket_request_max_bytes,
            });
        }
        if config.max_connections == 0 || config.max_connections_per_ip == 0 {
            return Err(ServerError::NoConnections);
        }
        let (client_role, controller) = match config.controller_listener {
            None => (ListenerRole::Combined, None),
            Some(address) => (ListenerRole::Client, Some(address)),
        };
        let mut bound = vec![(bind(config.listener)?, client_role)];
        if let Some(address) = controller {
            bound.push((bind(address)?, ListenerRole::Controller));
        }
        let memory_pool =
            RequestMemoryPool::new(config.queued_max_request_bytes, config.metrics.clone());
        let limits = ConnectionLimits::new(
            config.max_connections,
            config.max_connections_per_ip,
            config.metrics.clone(),
        );
        let shared = Rc::new(Shared {
            config,
            handler,
            stopping: Cell::new(false),
            connections: RefCell::new(HashMap::new()),
            connection_closed: Notify::new(),
            forced: Cell::new(false),
            force_close: Notify::new(),
            memory_pool,
            limits,
            next_connection_id: Cell::new(0),
        });
        let mut listeners = Vec::new();
        for ((listener, local_addr), role) in bound {
            let listener_fd = listener.as_raw_fd();
            let accept_task =
                tokio_uring::spawn(accept_loop(listener, local_addr, role, shared.clone()));
            tracing::info!(%local_addr, ?role, "server listening");
            listeners.push(BoundListener {
                local_addr,
                listener_fd,
                accept_task,
            });
        }
        Ok(ServerHandle { listeners, shared })
    }
}

/// Binds one listener (see [`bind_waiting_for_a_dead_owner`]).
fn bind(address: SocketAddr) -> Result<(tokio_uring::net::TcpListener, SocketAddr), ServerError> {
    // std's bind sets SO_REUSEADDR only; tokio-uring's own bind also sets SO_REUSEPORT,
    // which would let a second node on the same port silently take half the connections.
    let listener = bind_waiting_for_a_dead_owner(address)
        .map(tokio_uring::net::TcpListener::from_std)
        .map_err(|source| ServerError::Bind { address, source })?;
    let local_addr = listener
        .local_addr()
        .map_err(|source| ServerError::Bind { address, source })?;
    Ok((listener, local_addr))
}

impl ServerHandle {
    /// The client listener's address (the only listener's, without a controller listener).
    pub fn local_addr(&self) -> SocketAddr {
        self.listeners[0].local_addr
    }

    /// The separate controller listener's address.
    pub fn controller_local_addr(&self) -> Option<SocketAddr> {
        self.listeners.get(1).map(|l| l.local_addr)
    }

    /// Connections open right now.
    pub fn connection_count(&self) -> usize {
        self.shared.connections.borrow().len()
    }

    /// Stops accepting, stops reading new requests, and waits up to `grace` for the requests
    /// already read to be answered; connections still busy after that are closed by force.
    pub async fn stop(self, grace: Duration) -> StopReport {
        self.shared.stopping.set(true);
        // Frames waiting for request memory would never see the shutdown below: wake them.
        self.shared.memory_pool.close();
        for listener in self.listeners {
            // shutdown(2) on a listening socket makes the pending accept fail at once, so the
            // accept loop ends without a cancelled accept that could leak a descriptor.
            // SAFETY: the descriptor is owned by the accept task, which is still running.
            unsafe { libc::shutdown(listener.listener_fd, libc::SHUT_RDWR) };
            let _ = listener.accept_task.await;
        }
        for stream in self.shared.connections.borrow().values() {
            // The readers' pending reads return end-of-stream; their writers then drain the
            // replies already owed and close.
            let _ = stream.shutdown(std::net::Shutdown::Read);
        }
        let deadline = tokio::time::Instant::now() + grace;
        let mut report = StopReport::default();
        while !self.shared.connections.borrow().is_empty() {
            let closed = self.shared.connection_closed.notified();
            if tokio::time::timeout_at(deadline, closed).await.is_err() {
                let connections = self.shared.connections.borrow();
                report.connections_forced = connections.len();
                for stream in connections.values() {
                    let _ = stream.shutdown(std::net::Shutdown::Both);
                }
                // Writers parked on a handler's reply give up on it (and abort the handlers).
                self.shared.forced.set(true);
                self.shared.force_close.notify_waiters();
                break;
            }
        }
        // Forced connections end promptly once their sockets are shut: wait for them so no
        // task outlives the stop.
        while !self.shared.connections.borrow().is_empty() {
            self.shared.connection_closed.notified().await;
        }
        tracing::info!(?report, "server stopped");
        report
    }
}

async fn accept_loop(
    listener: tokio_uring::net::TcpListener,
    local_addr: SocketAddr,
    role: ListenerRole,
    shared: Rc<Shared>,
) {
    loop {
        let accepted = listener.accept().await;
        if shared.stopping.get() {
            break;
        }
        match accepted {
            Ok((stream, peer_addr)) => {
                let slot = match shared.limits.admit(peer_addr.ip()) {
                    Ok(slot) => slot,
                    Err(refusal) => {
                        refuse(&shared.limits, refusal, peer_addr);
                        // Closed before anything is read from it.
                        drop(stream);
                        continue;
                    }
                };
                let info = ConnectionInfo {
                    connection_id: shared.next_connection_id.get(),
                    peer_addr,
                    local_addr,
                    listener: role,
                    tls_client_subject: None,
                    sasl_user: None,
                };
                shared.next_connection_id.set(info.connection_id + 1);
                tokio_uring::spawn(connection::serve(stream, info, shared.clone(), slot));
            }
            Err(error) => {
                // EMFILE and friends: the listener stays; back off a little so a descriptor
                // shortage does not turn into a busy loop.
                tracing::warn!(%error, "accept failed");
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }
}

/// Logs a refused connection: every one at debug, the first and then every 1024th of each limit
/// as a warning, so a flood of connections does not become a flood of log lines.
fn refuse(limits: &ConnectionLimits, refusal: Refusal, peer_addr: SocketAddr) {
    let refused_total = limits.refused_total(refusal);
    let limit = limits.limit(refusal);
    if refused_total % 1024 == 1 {
        tracing::warn!(peer = %peer_addr, limit, refused_total, "connection closed at accept: {} reached", refusal.key());
    } else {
        tracing::debug!(peer = %peer_addr, limit, refused_total, "connection closed at accept: {} reached", refusal.key());
    }
}
