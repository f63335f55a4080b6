//! One client connection: a reader that decodes and dispatches, a writer that answers in order.
//!
//! Bad input, and what the connection does about it (Kafka's behaviour; `docs/server.md`):
//!
//! | input | outcome |
//! | --- | --- |
//! | size prefix negative or above `socket.request.max.bytes` | close before reading the body |
//! | a frame beyond the connection's read buffer that `queued.max.request.bytes` cannot take yet | stop reading this connection until request bytes are released (not an error) |
//! | connection closed inside a frame (truncated frame) | close |
//! | frame too short for the request header, unknown API key | close |
//! | ApiVersions at a version we do not speak | v0 ApiVersions response, UNSUPPORTED_VERSION + our ranges (KIP-511); keep serving |
//! | any other API at a version we do not speak | close |
//! | body with bytes after the last field its version defines | answered; the bytes are ignored (Kafka's rule), logged at debug |
//! | body that does not decode (a length past the frame, bad UTF-8, …) | close |
//! | handler replies [`Reply::Close`], its task panics, or its reply does not encode | close |
//! | a file region shorter than the response promised | close (the frame cannot be completed) |
//!
//! | on a SASL listener, any request but ApiVersions and the exchange's before authenticating | close ([`crate::sasl::SaslSession`]) |
//! | on a SASL listener, a failed exchange | SASL_AUTHENTICATION_FAILED (or UNSUPPORTED_SASL_MECHANISM), then close |
//! | on a SASL listener, before authenticating, a size prefix above 512 KiB | close before reading the body |
//!
//! "Close" always means: answer the requests read before the bad one, in order, then close.
//! Nothing here can end the server: every error ends at most this connection.
//!
//! A connection that read no request and wrote no answer for `connections.max.idle.ms`, with
//! nothing owed, is closed (Kafka's idle connection reaper), so idle clients cannot hold the
//! `max.connections` slots forever.

use std::os::fd::AsRawFd;
use std::rc::Rc;
use std::sync::Arc;

use bytes::Bytes;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc, oneshot};
use tokio_uring::net::TcpStream;

use super::connection_limits::ConnectionSlot;
use super::frame::{Frame, FrameError, FrameReader, FrameSource};
use super::tls_stream;
use super::writer::{SocketWriter, WriteError, set_nonblocking};
use super::{ConnectionInfo, Reply, Shared};
use crate::protocol::{
    ApiKey, ApiVersionsResponse, DecodeError, DecodedRequest, ErrorCode, Response,
    decode_request_frame, encode_response, encode_response_parts, supported_api_versions,
    unsupported_api_versions_response,
};
use crate::sasl::{SaslSession, SessionStep};

/// One unanswered request, in the order it was read.
enum Slot {
    /// A reply the handler will produce.
    Pending {
        api_key: ApiKey,
        api_version: i16,
        correlation_id: i32,
        reply: oneshot::Receiver<Reply>,
        task: tokio::task::AbortHandle,
        _permit: OwnedSemaphorePermit,
    },
    /// A response the server made itself (ApiVersions).
    Ready {
        frame: Bytes,
        _permit: OwnedSemaphorePermit,
    },
    /// Close once the earlier replies are written.
    Close,
}

/// When the connection last read a request or wrote an answer, and how many it owes.
struct Activity {
    last: std::cell::Cell<tokio::time::Instant>,
    unanswered: std::cell::Cell<usize>,
}

impl Activity {
    fn new() -> Self {
        Activity {
            last: std::cell::Cell::new(tokio::time::Instant::now()),
            unanswered: std::cell::Cell::new(0),
        }
    }

    fn request_read(&self) {
        self.last.set(tokio::time::Instant::now());
        self.unanswered.set(self.unanswered.get() + 1);
    }

    fn slot_done(&self) {
        self.last.set(tokio::time::Instant::now());
        self.unanswered.set(self.unanswered.get().saturating_sub(1));
    }
}

/// Closes the connection once it has been idle for `idle` with nothing owed (a long poll or a
/// slow answer in progress is not idleness). Ends with the connection (aborted by `serve`).
async fn close_when_idle(
    stream: Rc<TcpStream>,
    idle: std::time::Duration,
    activity: Rc<Activity>,
    id: u64,
) {
    loop {
        let due = activity.last.get() + idle;
        tokio::time::sleep_until(due.max(tokio::time::Instant::now() + idle / 16)).await;
        let idle_now = activity.last.get() + idle <= tokio::time::Instant::now();
        if idle_now && activity.unanswered.get() == 0 {
            tracing::debug!(
                connection = id,
                idle_ms = idle.as_millis() as u64,
                "idle connection closed"
            );
            // The reader sees the end of the stream and the connection ends as if the client
            // had closed it.
            let _ = stream.shutdown(std::net::Shutdown::Both);
            return;
        }
    }
}

/// Set by the reader when the client closed the connection.
#[derive(Default)]
struct PeerGone {
    gone: std::cell::Cell<bool>,
    notify: tokio::sync::Notify,
}

impl PeerGone {
    fn set(&self) {
        self.gone.set(true);
        self.notify.notify_waiters();
    }

    async fn wait(&self) {
        loop {
            let notified = self.notify.notified();
            if self.gone.get() {
                return;
            }
            notified.await;
        }
    }
}

/// Serves one accepted connection; `_slot` keeps it counted against the connection limits
/// until it ends.
pub(crate) async fn serve(
    stream: TcpStream,
    info: ConnectionInfo,
    shared: Rc<Shared>,
    _slot: ConnectionSlot,
) {
    let id = info.connection_id;
    let stream = Rc::new(stream);
    if let Err(error) = set_nonblocking(stream.as_raw_fd()) {
        tracing::warn!(connection = id, %error, "cannot make the socket non-blocking; closing");
        return;
    }
    let _ = stream.set_nodelay(true);
    shared.connections.borrow_mut().insert(id, stream.clone());
    tracing::debug!(connection = id, peer = %info.peer_addr, "connection open");
    serve_open(stream, info, &shared).await;
    shared.connections.borrow_mut().remove(&id);
    shared.connection_closed.notify_waiters();
    tracing::debug!(connection = id, "connection closed");
}

/// Serves a connection registered in the server's table, through TLS if its listener speaks
/// it; the caller unregisters it after.
async fn serve_open(stream: Rc<TcpStream>, mut info: ConnectionInfo, shared: &Rc<Shared>) {
    let id = info.connection_id;
    let (mut source, tls_writer) = match shared.tls_for(info.listener) {
        None => (FrameSource::Plain(stream.clone()), None),
        Some(config) => match tls_stream::accept(&stream, config).await {
            Ok(tls) => {
                // The client certificate's subject names the connection's ACL principal.
                info.tls_client_subject = tls
                    .get_ref()
                    .1
                    .peer_certificates()
                    .and_then(|chain| chain.first())
                    .and_then(|leaf| crate::acl::principal::subject_dn(leaf.as_ref()))
                    .map(std::sync::Arc::from);
                let (reader, writer) = tokio::io::split(tls);
                let fd = stream.as_raw_fd();
                (FrameSource::Tls { reader, fd }, Some(writer))
            }
            Err(error) => {
                // Garbage, a client that does not trust our certificate, or one without the
                // certificate `ssl.client.auth` requires: this connection only.
                tracing::info!(connection = id, peer = %info.peer_addr, %error, "TLS handshake failed; closing connection");
                let _ = stream.shutdown(std::net::Shutdown::Both);
                return;
            }
        },
    };

    let (slots_tx, slots_rx) = mpsc::unbounded_channel();
    let peer_gone = Rc::new(PeerGone::default());
    let activity = Rc::new(Activity::new());
    let reaper = shared.config.connections_max_idle.map(|idle| {
        tokio_uring::spawn(close_when_idle(stream.clone(), idle, activity.clone(), id))
    });
    let writer = tokio_uring::spawn(write_loop(
        SocketWriter::new(stream.clone(), tls_writer),
        slots_rx,
        id,
        shared.clone(),
        peer_gone.clone(),
        activity.clone(),
    ));
    read_loop(&mut source, info, shared, slots_tx, &peer_gone, &activity).await;
    // The reader has stopped: the writer answers what is owed and ends when the channel does.
    let _ = writer.await;
    if let Some(reaper) = reaper {
        reaper.abort();
    }
}

/// Kafka's `sasl.server.max.receive.size` default: the largest frame a SASL listener reads
/// from a connection that has not authenticated yet, so that an unauthenticated client cannot
/// make the node hold `socket.request.max.bytes` of its bytes.
const SASL_UNAUTHENTICATED_MAX_FRAME_BYTES: usize = 512 * 1024;

async fn read_loop(
    stream: &mut FrameSource,
    mut info: ConnectionInfo,
    shared: &Shared,
    slots: mpsc::UnboundedSender<Slot>,
    peer_gone: &PeerGone,
    activity: &Activity,
) {
    let id = info.connection_id;
    let config = &shared.config;
    let permits = Arc::new(Semaphore::new(config.max_in_flight_per_connection));
    let mut reader = FrameReader::new(
        config.socket_request_max_bytes as usize,
        Some(shared.memory_pool.clone()),
    );
    // A SASL listener's connection authenticates first (crate::sasl's table).
    let mut sasl = shared
        .sasl_for(info.listener)
        .map(|enabled| (enabled, SaslSession::new()));
    if sasl.is_some() {
        reader.set_max_frame_bytes(
            SASL_UNAUTHENTICATED_MAX_FRAME_BYTES.min(config.socket_request_max_bytes as usize),
        );
    }
    loop {
        // At the in-flight limit, stop reading: the kernel buffers fill and TCP pushes back.
        let Ok(permit) = permits.clone().acquire_owned().await else {
            return;
        };
        if shared.stopping.get() {
            return;
        }
        let Frame { body, charge } = match reader.next_frame(stream).await {
            Ok(frame) => frame,
            Err(FrameError::Closed) => {
                // The client closed its side: as Kafka, drop what it is still owed rather
                // than keep long polls running for nobody. (A stop's own shutdown of the
                // read side also ends here; then the owed replies are still written.)
                if !shared.stopping.get() {
                    peer_gone.set();
                }
                return;
            }
            Err(error) => {
                // A stop shuts the read side: that end of stream is not the client's fault.
                if !shared.stopping.get() {
                    tracing::info!(connection = id, peer = %info.peer_addr, %error, "closing connection");
                }
                let _ = slots.send(Slot::Close);
                return;
            }
        };
        if shared.stopping.get() {
            return;
        }
        let slot = match decode_request_frame(body) {
            Ok(DecodedRequest {
                header,
                request,
                ignored_trailing_bytes,
            }) => {
                let api_key = request.api_key();
                let api_version = header.api_version;
                let correlation_id = header.correlation_id;
                if ignored_trailing_bytes > 0 {
                    // Kafka's brokers read the fields a version defines and nothing more, and
                    // clients depend on it (librdkafka's all-topics Metadata v12).
                    tracing::debug!(
                        connection = id,
                        peer = %info.peer_addr,
                        api_key = api_key.key(),
                        api = api_key.name(),
                        api_version,
                        correlation_id,
                        ignored_trailing_bytes,
                        "ignoring bytes after the last field of the request"
                    );
                }
                let sasl_step = match sasl.as_mut() {
                    Some((_, session)) if session.user().is_some() => None,
                    Some((enabled, session)) => {
                        let lookup = |user: &str, mechanism| {
                            shared.handler.scram_credential(user, mechanism)
                        };
                        let step = session.on_request(enabled, &request, &lookup);
                        if let Some(user) = session.user() {
                            info.sasl_user = Some(user);
                            reader.set_max_frame_bytes(config.socket_request_max_bytes as usize);
                        }
                        Some(step)
                    }
                    None => None,
                };
                let sasl_answer = match sasl_step {
                    None | Some(SessionStep::Pass) => None,
                    Some(SessionStep::Close) => Some((None, true)),
                    Some(SessionStep::Answer(response)) => Some((Some(response), false)),
                    Some(SessionStep::AnswerAndClose(response)) => Some((Some(response), true)),
                };
                if let Some((response, close_after)) = sasl_answer {
                    let slot = match response
                        .map(|r| encode_response(correlation_id, api_version, &r))
                    {
                        None => Slot::Close,
                        Some(Ok(frame)) => Slot::Ready {
                            frame,
                            _permit: permit,
                        },
                        Some(Err(error)) => {
                            tracing::error!(connection = id, %error, "SASL response does not encode");
                            Slot::Close
                        }
                    };
                    let close = close_after || matches!(slot, Slot::Close);
                    activity.request_read();
                    if slots.send(slot).is_err() {
                        return;
                    }
                    if close {
                        let _ = slots.send(Slot::Close);
                        return;
                    }
                    continue;
                }
                if api_key == ApiKey::ApiVersions && config.answer_api_versions {
                    match api_versions_frame(correlation_id, api_version) {
                        Ok(frame) => Slot::Ready {
                            frame,
                            _permit: permit,
                        },
                        Err(error) => {
                            tracing::error!(connection = id, %error, "ApiVersions response does not encode");
                            Slot::Close
                        }
                    }
                } else {
                    let (reply_tx, reply_rx) = oneshot::channel();
                    let future = shared.handler.handle(info.clone(), header, request);
                    let task = tokio_uring::spawn(async move {
                        let reply = future.await;
                        // Answered: the request's bytes go back to the budget (an aborted
                        // task drops the charge too).
                        drop(charge);
                        let _ = reply_tx.send(reply);
                    });
                    Slot::Pending {
                        api_key,
                        api_version,
                        correlation_id,
                        reply: reply_rx,
                        task: task.abort_handle(),
                        _permit: permit,
                    }
                }
            }
            Err(DecodeError::UnsupportedVersion {
                api_key,
                version,
                correlation_id,
            }) if api_key == ApiKey::ApiVersions.key() => {
                // KIP-511: tell the client which versions we speak, in the v0 format every
                // client can read, and keep the connection.
                tracing::debug!(
                    connection = id,
                    version,
                    "ApiVersions at an unsupported version"
                );
                match unsupported_api_versions_response(correlation_id) {
                    Ok(frame) => Slot::Ready {
                        frame,
                        _permit: permit,
                    },
                    Err(error) => {
                        tracing::error!(connection = id, %error, "ApiVersions response does not encode");
                        Slot::Close
                    }
                }
            }
            Err(error) => {
                tracing::info!(connection = id, peer = %info.peer_addr, %error, "undecodable request; closing connection");
                Slot::Close
            }
        };
        let close = matches!(slot, Slot::Close);
        activity.request_read();
        if slots.send(slot).is_err() || close {
            // The writer is gone (write error) or the connection is closing.
            return;
        }
    }
}

/// The server's own ApiVersions answer: every API we speak, at the version the client asked.
fn api_versions_frame(
    correlation_id: i32,
    api_version: i16,
) -> Result<Bytes, crate::protocol::EncodeError> {
    let response = ApiVersionsResponse {
        error_code: ErrorCode::None.code(),
        api_keys: supported_api_versions(),
        ..ApiVersionsResponse::default()
    };
    encode_response(
        correlation_id,
        api_version,
        &Response::ApiVersions(response),
    )
}

async fn write_loop(
    mut writer: SocketWriter,
    mut slots: mpsc::UnboundedReceiver<Slot>,
    id: u64,
    shared: Rc<Shared>,
    peer_gone: Rc<PeerGone>,
    activity: Rc<Activity>,
) {
    while let Some(slot) = slots.recv().await {
        let _done = SlotDone(&activity);
        let result = match slot {
            Slot::Ready { frame, _permit } => writer.write_all(frame).await,
            Slot::Close => break,
            Slot::Pending {
                api_key,
                api_version,
                correlation_id,
                reply,
                task,
                _permit,
            } => {
                let reply = tokio::select! {
                    reply = reply => reply.ok(),
                    () = shared.forced_closed() => {
                        task.abort();
                        break;
                    }
                    () = peer_gone.wait() => {
                        task.abort();
                        break;
                    }
                };
                let Some(reply) = reply else {
                    tracing::error!(
                        connection = id,
                        api = api_key.name(),
                        correlation_id,
                        "request handler failed; closing connection"
                    );
                    break;
                };
                match write_reply(&mut writer, reply, api_key, correlation_id, api_version).await {
                    Ok(true) => Ok(()),
                    Ok(false) => break,
                    Err(error) => Err(error),
                }
            }
        };
        if let Err(error) = result {
            tracing::info!(connection = id, %error, "write failed; closing connection");
            break;
        }
    }
    // Replies that will never be written: stop their handlers (a long poll for a closed
    // connection is wasted work) and release their permits.
    slots.close();
    while let Ok(slot) = slots.try_recv() {
        if let Slot::Pending { task, .. } = slot {
            task.abort();
        }
    }
    writer.close();
}

/// Marks a slot answered (or dropped) when the writer is done with it, whichever way.
struct SlotDone<'a>(&'a Activity);

impl Drop for SlotDone<'_> {
    fn drop(&mut self) {
        self.0.slot_done();
    }
}

/// Writes one handler reply. `Ok(false)`: the connection must close.
async fn write_reply(
    writer: &mut SocketWriter,
    reply: Reply,
    api_key: ApiKey,
    correlation_id: i32,
    api_version: i16,
) -> Result<bool, WriteError> {
    let (response, regions) = match reply {
        Reply::Close => return Ok(false),
        Reply::Nothing => return Ok(true),
        Reply::Frame(frame) => {
            writer.write_all(frame).await?;
            return Ok(true);
        }
        Reply::Response(response) => (response, Vec::new()),
        Reply::WithRecords { response, regions } => (response, regions),
    };
    if response.api_key() != api_key {
        tracing::error!(
            correlation_id,
            request = api_key.name(),
            response = response.api_key().name(),
            "handler answered with another API's response; closing connection"
        );
        return Ok(false);
    }
    let parts = match encode_response_parts(correlation_id, api_version, &response) {
        Ok(parts) => parts,
        Err(error) => {
            tracing::error!(correlation_id, %error, "handler response does not encode; closing connection");
            return Ok(false);
        }
    };
    writer.write_parts(parts, &regions).await?;
    Ok(true)
}
