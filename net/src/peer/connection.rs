//! [`PeerClient`]: one lazily opened connection, requests matched to responses by correlation id.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::net::{SocketAddr, ToSocketAddrs};
use std::rc::Rc;
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use tokio_uring::net::TcpStream;

use super::{PeerConfig, PeerError};
use crate::protocol::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, ErrorCode, Request, RequestHeader, Response,
    decode_response, encode_request,
};
use crate::server::frame::{FrameError, FrameReader};

/// A connection to one peer, shared by every task that sends to it (clone it freely).
#[derive(Clone)]
pub struct PeerClient {
    inner: Rc<Inner>,
}

struct Inner {
    address: String,
    config: Rc<PeerConfig>,
    /// `[control, data]`: see [`Lane`].
    lanes: [Lane; 2],
    next_correlation_id: Cell<i32>,
}

/// One of the two connections to the peer. The server answers a connection's requests in
/// order, so a long-polled Fetch would hold back every response behind it; long polls (Fetch,
/// FetchSnapshot) therefore get a connection of their own, and Vote, BeginQuorumEpoch,
/// EndQuorumEpoch and DescribeQuorum never wait behind one.
#[derive(Default)]
struct Lane {
    connection: RefCell<Option<Rc<Connection>>>,
    /// Consecutive failed connection attempts, and when the next one may start.
    failures: Cell<u32>,
    retry_at: Cell<Option<Instant>>,
    /// One connection attempt at a time; the others wait for its outcome.
    connecting: tokio::sync::Mutex<()>,
}

const CONTROL_LANE: usize = 0;
const DATA_LANE: usize = 1;

fn lane_of(api: ApiKey) -> usize {
    match api {
        ApiKey::Fetch | ApiKey::FetchSnapshot | ApiKey::Produce => DATA_LANE,
        _ => CONTROL_LANE,
    }
}

struct Connection {
    stream: Rc<TcpStream>,
    /// The version to send of each API both sides speak (highest common).
    versions: HashMap<ApiKey, i16>,
    pending: RefCell<HashMap<i32, Pending>>,
    /// Frames for the writer task, in `send` order. `None` once the connection failed.
    outgoing: RefCell<Option<mpsc::UnboundedSender<Bytes>>>,
    open: Cell<bool>,
    closed_reason: RefCell<String>,
}

struct Pending {
    api: ApiKey,
    version: i16,
    reply: oneshot::Sender<Result<Response, PeerError>>,
}

impl PeerClient {
    /// A client for `address` (`host:port`); nothing is connected until the first request.
    pub fn new(address: impl Into<String>, config: PeerConfig) -> PeerClient {
        PeerClient::with_shared_config(address.into(), Rc::new(config))
    }

    pub(crate) fn with_shared_config(address: String, config: Rc<PeerConfig>) -> PeerClient {
        PeerClient {
            inner: Rc::new(Inner {
                address,
                config,
                lanes: [Lane::default(), Lane::default()],
                next_correlation_id: Cell::new(0),
            }),
        }
    }

    pub fn address(&self) -> &str {
        &self.inner.address
    }

    /// True while a handshaken connection (of either lane) is open.
    pub fn is_connected(&self) -> bool {
        (0..self.inner.lanes.len()).any(|lane| self.live_connection(lane).is_some())
    }

    /// The version `send` uses for `api`, once a connection has been handshaken.
    pub fn negotiated_version(&self, api: ApiKey) -> Option<i16> {
        (0..self.inner.lanes.len())
            .filter_map(|lane| self.live_connection(lane))
            .find_map(|connection| connection.versions.get(&api).copied())
    }

    /// Connects the control lane and handshakes now (normally `send` does it on demand).
    pub async fn connect(&self) -> Result<(), PeerError> {
        let timeout_ms = self.inner.config.request_timeout_ms;
        let deadline = Instant::now() + Duration::from_millis(timeout_ms);
        match tokio::time::timeout_at(deadline, self.connection(CONTROL_LANE)).await {
            Ok(result) => result.map(|_| ()),
            Err(_) => Err(PeerError::Timeout {
                api: ApiKey::ApiVersions,
                timeout_ms,
            }),
        }
    }

    /// Sends `request` at the highest version both sides speak and waits for its response,
    /// at most `request_timeout_ms` (connecting and back-off included).
    pub async fn send(&self, request: Request) -> Result<Response, PeerError> {
        let api = request.api_key();
        let timeout_ms = self.inner.config.request_timeout_ms;
        let deadline = Instant::now() + Duration::from_millis(timeout_ms);
        let timed_out = PeerError::Timeout { api, timeout_ms };
        let connection =
            match tokio::time::timeout_at(deadline, self.connection(lane_of(api))).await {
                Ok(connection) => connection?,
                Err(_) => return Err(timed_out),
            };
        let version = *connection
            .versions
            .get(&api)
            .ok_or(PeerError::NoCommonVersion { api })?;
        let correlation_id = self.next_correlation_id();
        let header = RequestHeader {
            api_key: api.key(),
            api_version: version,
            correlation_id,
            client_id: Some(self.inner.config.client_id.clone()),
        };
        let frame = encode_request(&header, &request)?;
        let (reply_tx, reply_rx) = oneshot::channel();
        connection.pending.borrow_mut().insert(
            correlation_id,
            Pending {
                api,
                version,
                reply: reply_tx,
            },
        );
        let queued = connection
            .outgoing
            .borrow()
            .as_ref()
            .is_some_and(|outgoing| outgoing.send(frame).is_ok());
        if !queued {
            connection.pending.borrow_mut().remove(&correlation_id);
            return Err(connection.disconnected());
        }
        match tokio::time::timeout_at(deadline, reply_rx).await {
            Ok(Ok(result)) => result,
            Ok(Err(_)) => Err(connection.disconnected()),
            Err(_) => {
                connection.pending.borrow_mut().remove(&correlation_id);
                // As Kafka's NetworkClient: a request timeout means the peer is unresponsive;
                // drop the connection so the next request starts afresh.
                connection.close(&format!("{api:?} request {correlation_id} timed out"));
                Err(timed_out)
            }
        }
    }

    fn next_correlation_id(&self) -> i32 {
        let id = self.inner.next_correlation_id.get();
        self.inner.next_correlation_id.set(id.wrapping_add(1));
        id
    }

    fn live_connection(&self, lane: usize) -> Option<Rc<Connection>> {
        self.inner.lanes[lane]
            .connection
            .borrow()
            .as_ref()
            .filter(|connection| connection.open.get())
            .cloned()
    }

    /// The lane's open connection, or a new one once the back-off since the last failure has
    /// passed.
    async fn connection(&self, lane_index: usize) -> Result<Rc<Connection>, PeerError> {
        if let Some(connection) = self.live_connection(lane_index) {
            return Ok(connection);
        }
        let lane = &self.inner.lanes[lane_index];
        let config = &self.inner.config;
        let _attempt = lane.connecting.lock().await;
        // Another sender may have connected while this one waited for the lock.
        if let Some(connection) = self.live_connection(lane_index) {
            return Ok(connection);
        }
        if lane.connection.borrow_mut().take().is_some() {
            // The connection was lost: back off before reconnecting, as after a failed attempt.
            lane.failures.set(lane.failures.get().max(1));
            let pause = config.backoff_ms(1);
            lane.retry_at
                .set(Some(Instant::now() + Duration::from_millis(pause)));
        }
        if let Some(retry_at) = lane.retry_at.get() {
            tokio::time::sleep_until(retry_at).await;
        }
        match open(&self.inner.address, config).await {
            Ok(connection) => {
                lane.failures.set(0);
                lane.retry_at.set(None);
                *lane.connection.borrow_mut() = Some(connection.clone());
                Ok(connection)
            }
            Err(error) => {
                let failures = lane.failures.get().saturating_add(1);
                lane.failures.set(failures);
                let pause = config.backoff_ms(failures);
                lane.retry_at
                    .set(Some(Instant::now() + Duration::from_millis(pause)));
                tracing::debug!(address = %self.inner.address, %error, failures, "peer connection failed");
                Err(error)
            }
        }
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        for lane in &self.lanes {
            if let Some(connection) = lane.connection.borrow_mut().take() {
                connection.close("client dropped");
            }
        }
    }
}

impl Connection {
    fn disconnected(&self) -> PeerError {
        PeerError::Disconnected {
            reason: self.closed_reason.borrow().clone(),
        }
    }

    /// Fails every request in flight and ends both tasks.
    fn close(&self, reason: &str) {
        if self.open.replace(false) {
            *self.closed_reason.borrow_mut() = reason.to_string();
        }
        self.outgoing.borrow_mut().take();
        let _ = self.stream.shutdown(std::net::Shutdown::Both);
        let pending: Vec<Pending> = self.pending.borrow_mut().drain().map(|(_, p)| p).collect();
        for request in pending {
            let _ = request.reply.send(Err(self.disconnected()));
        }
    }
}

fn resolve(address: &str) -> Result<SocketAddr, PeerError> {
    // std's resolver blocks; peers are configured as IP addresses or local names, and the
    // lookup happens only when a connection is (re)opened.
    address
        .to_socket_addrs()
        .map_err(|error| PeerError::Resolve {
            address: address.into(),
            reason: error.to_string(),
        })?
        .next()
        .ok_or_else(|| PeerError::Resolve {
            address: address.into(),
            reason: "no address".into(),
        })
}

/// Connects, handshakes, and starts the reader and writer tasks.
async fn open(address: &str, config: &PeerConfig) -> Result<Rc<Connection>, PeerError> {
    let socket_addr = resolve(address)?;
    let stream = TcpStream::connect(socket_addr)
        .await
        .map_err(|error| PeerError::Connect {
            address: socket_addr,
            reason: error.to_string(),
        })?;
    let _ = stream.set_nodelay(true);
    // Responses are not charged to a budget (the node asked for them), but they too get
    // memory only as their bytes arrive.
    let mut reader = FrameReader::new(config.max_frame_bytes, None);
    let versions = handshake(&stream, &mut reader, config).await?;
    let stream = Rc::new(stream);
    let (outgoing_tx, outgoing_rx) = mpsc::unbounded_channel();
    let connection = Rc::new(Connection {
        stream: stream.clone(),
        versions,
        pending: RefCell::new(HashMap::new()),
        outgoing: RefCell::new(Some(outgoing_tx)),
        open: Cell::new(true),
        closed_reason: RefCell::new(String::new()),
    });
    tokio_uring::spawn(write_loop(stream, outgoing_rx));
    tokio_uring::spawn(read_loop(connection.clone(), reader));
    tracing::debug!(%address, "peer connected");
    Ok(connection)
}

/// KIP-511 handshake: ApiVersions at our highest version; on UNSUPPORTED_VERSION (answered in
/// v0) once more at the highest ApiVersions version the server lists. Returns the highest
/// common version of every API both sides speak.
async fn handshake(
    stream: &TcpStream,
    reader: &mut FrameReader,
    config: &PeerConfig,
) -> Result<HashMap<ApiKey, i16>, PeerError> {
    let ours = ApiKey::ApiVersions.versions();
    let mut version = ours.max;
    for attempt in 0..2 {
        let response = api_versions(stream, reader, config, version, attempt).await?;
        if response.error_code == ErrorCode::UnsupportedVersion.code() && attempt == 0 {
            let theirs = response
                .api_keys
                .iter()
                .find(|row| row.api_key == ApiKey::ApiVersions.key())
                .ok_or_else(|| PeerError::Handshake {
                    reason: "UNSUPPORTED_VERSION without an ApiVersions range".into(),
                })?;
            version = theirs.max_version.min(ours.max);
            if version < ours.min.max(theirs.min_version) {
                return Err(PeerError::NoCommonVersion {
                    api: ApiKey::ApiVersions,
                });
            }
            continue;
        }
        if response.error_code != ErrorCode::None.code() {
            return Err(PeerError::Handshake {
                reason: format!("ApiVersions error code {}", response.error_code),
            });
        }
        let mut versions = HashMap::new();
        for row in &response.api_keys {
            let Some(api) = ApiKey::from_i16(row.api_key) else {
                continue;
            };
            let ours = api.versions();
            let high = ours.max.min(row.max_version);
            if high >= ours.min.max(row.min_version) {
                versions.insert(api, high);
            }
        }
        return Ok(versions);
    }
    Err(PeerError::Handshake {
        reason: "the server rejected the ApiVersions version it advertised".into(),
    })
}

async fn api_versions(
    stream: &TcpStream,
    reader: &mut FrameReader,
    config: &PeerConfig,
    version: i16,
    correlation_id: i32,
) -> Result<ApiVersionsResponse, PeerError> {
    let header = RequestHeader {
        api_key: ApiKey::ApiVersions.key(),
        api_version: version,
        correlation_id,
        client_id: Some(config.client_id.clone()),
    };
    let request = Request::ApiVersions(ApiVersionsRequest {
        client_software_name: "ringlog".into(),
        client_software_version: env!("CARGO_PKG_VERSION").into(),
    });
    let frame = encode_request(&header, &request)?;
    let (result, _) = stream.write_all(frame).await;
    result.map_err(|error| PeerError::Handshake {
        reason: format!("write: {error}"),
    })?;
    let frame = reader
        .next_frame(stream)
        .await
        .map_err(|error| PeerError::Handshake {
            reason: error.to_string(),
        })?
        .body;
    // An UNSUPPORTED_VERSION answer comes in v0 whatever we asked (KIP-511).
    let decoded = decode_response(ApiKey::ApiVersions, version, frame.clone())
        .or_else(|_| decode_response(ApiKey::ApiVersions, 0, frame))?;
    let (header, response) = decoded;
    if header.correlation_id != correlation_id {
        return Err(PeerError::Handshake {
            reason: format!(
                "response to correlation id {}, expected {correlation_id}",
                header.correlation_id
            ),
        });
    }
    match response {
        Response::ApiVersions(response) => Ok(response),
        _ => Err(PeerError::Handshake {
            reason: "not an ApiVersions response".into(),
        }),
    }
}

async fn write_loop(stream: Rc<TcpStream>, mut outgoing: mpsc::UnboundedReceiver<Bytes>) {
    while let Some(frame) = outgoing.recv().await {
        let (result, _) = stream.write_all(frame).await;
        if let Err(error) = result {
            tracing::debug!(%error, "peer write failed");
            let _ = stream.shutdown(std::net::Shutdown::Both);
            return;
        }
    }
}

async fn read_loop(connection: Rc<Connection>, mut reader: FrameReader) {
    let reason = loop {
        let frame = match reader.next_frame(&connection.stream).await {
            Ok(frame) => frame.body,
            Err(FrameError::Closed) => break "closed by the peer".to_string(),
            Err(error) => break error.to_string(),
        };
        if frame.len() < 4 {
            break format!("response frame of {} bytes has no header", frame.len());
        }
        let correlation_id = i32::from_be_bytes([frame[0], frame[1], frame[2], frame[3]]);
        let Some(pending) = connection.pending.borrow_mut().remove(&correlation_id) else {
            // Only a response to a request that timed out could be unknown, and a timeout
            // closes the connection: anything else is a confused peer.
            break format!("response to unknown correlation id {correlation_id}");
        };
        let result = decode_response(pending.api, pending.version, frame)
            .map(|(_, response)| response)
            .map_err(PeerError::from);
        let _ = pending.reply.send(result);
    };
    if connection.open.get() {
        tracing::debug!(%reason, "peer connection closed");
    }
    connection.close(&reason);
}
