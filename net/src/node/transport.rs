//! The node's sockets, on the event loop's single-threaded tokio-uring runtime.
//!
//! Inbound, the node is a [`RequestHandler`] of the Kafka server (`crate::server`): the server
//! owns the connections (framing, `socket.request.max.bytes` checked before a body is read, a
//! bounded number of requests in flight per connection, replies in request order, file regions
//! sent with `sendfile(2)`), and [`NodeHandler`] only turns each decoded request into an
//! [`Event::Request`] whose [`Responder`] the event loop answers exactly once.
//!
//! Outbound, one client per peer and lane sends requests and hands the responses to the loop:
//! the same [`Exchange`] as every other ringlog client (`crate::client`), so a lane opens each
//! connection with the ApiVersions handshake, refuses a version the peer does not speak, bounds
//! every response by `max_frame_bytes` and closes a connection whose answers come out of order.
//! Two lanes per peer (control: Vote, BeginQuorumEpoch, EndQuorumEpoch; fetch: one batched
//! Fetch per round for every partition that peer leads) because a server answers one
//! connection's requests in order: a Vote must not wait behind a Fetch that the leader holds
//! for its long-poll.
//!
//! When the quorum's listener speaks SSL (`listener.security.protocol.map`), a lane connects
//! with TLS (tokio-rustls): it checks the peer's certificate against the truststore (and its
//! name against the voter's host, `ssl.endpoint.identification.algorithm=https`) and presents
//! this node's certificate, for peers whose listener requires client certificates.
//!
//! The tasks never touch consensus or storage state: they only move frames. Everything they
//! learn goes into the loop's [`Event`] channel, which the loop drains one event at a time.
//!
//! The loop's bookkeeping of its peers is here too: [`PeerLanes`] (the two lanes to one peer and
//! the address they dial) and [`PeerPending`] (what a request sent to a peer waits for).

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use ringlog_replication::NodeId;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};
use tokio::sync::oneshot;

use crate::client::exchange::Exchange;
use crate::protocol::{ApiKey, Request, RequestHeader, Response};
use crate::server::{ConnectionInfo, ListenerRole, LocalBoxFuture, Reply, RequestHandler};

/// What the sockets tell the event loop.
#[derive(Debug)]
pub enum Event {
    /// A decoded request; answer it (exactly once) through `responder`.
    Request {
        responder: Responder,
        header: RequestHeader,
        request: Request,
    },
    /// A peer answered a request we sent with `correlation_id`.
    PeerResponse {
        peer: NodeId,
        correlation_id: i32,
        response: Response,
    },
    /// These requests to `peer` will never be answered (connection failed or closed).
    PeerFailed {
        peer: NodeId,
        correlation_ids: Vec<i32>,
    },
}

/// The answer slot of one request on one connection. The server writes answers in request
/// order whatever order they are given in. A responder dropped unanswered closes its
/// connection after the earlier answers (the client would otherwise wait forever).
#[derive(Debug)]
pub struct Responder {
    tx: oneshot::Sender<Reply>,
    /// The server's id of the connection the request came on (answers leave it in order).
    connection_id: u64,
    /// Who sent it (behind a pointer: every event of the loop is as large as this).
    peer: std::sync::Arc<Peer>,
    /// The listener the request came on (ApiVersions lists what that listener serves).
    listener: ListenerRole,
}

/// The sender of a request.
#[derive(Debug)]
struct Peer {
    /// The client's address (DescribeGroups names each member's host).
    addr: std::net::SocketAddr,
    /// The connection's ACL principal (`crate::acl::principal::principal_of`).
    principal: std::sync::Arc<str>,
}

impl Responder {
    /// The connection this request came on, unique for the life of the server.
    pub fn connection_id(&self) -> u64 {
        self.connection_id
    }

    /// The address of the client that sent the request.
    pub fn peer_addr(&self) -> std::net::SocketAddr {
        self.peer.addr
    }

    /// The listener the request came on.
    pub fn listener(&self) -> ListenerRole {
        self.listener
    }

    /// Who asks, for the authorizer (authorize.rs).
    pub fn requester(&self) -> super::authorize::Requester {
        super::authorize::Requester::new(self.peer.principal.clone(), self.peer.addr, self.listener)
    }

    /// Answers with an encoded frame (size prefix included); `None` answers nothing (Produce
    /// with acks=0) but frees the slot.
    pub fn send(self, frame: Option<Bytes>) {
        self.reply(match frame {
            Some(frame) => Reply::Frame(frame),
            None => Reply::Nothing,
        });
    }

    /// Answers with a reply the server encodes, e.g. [`Reply::WithRecords`] whose file
    /// regions go from the segment file to the socket without a userspace copy.
    pub fn reply(self, reply: Reply) {
        // A closed connection drops the answer: the client is gone.
        let _ = self.tx.send(reply);
    }

    /// A responder for tests of the loop's bookkeeping, with the receiver of its reply.
    #[cfg(test)]
    pub(super) fn for_test(connection_id: u64) -> (Responder, oneshot::Receiver<Reply>) {
        let (tx, rx) = oneshot::channel();
        let peer = std::sync::Arc::new(Peer {
            addr: std::net::SocketAddr::from(([127, 0, 0, 1], 9)),
            principal: std::sync::Arc::from("User:ANONYMOUS"),
        });
        let responder = Responder {
            tx,
            connection_id,
            peer,
            listener: ListenerRole::Combined,
        };
        (responder, rx)
    }
}

/// The node as the server's request handler: every request becomes an event of the loop,
/// except a quorum request on a listener that does not serve the quorum, which closes its
/// connection without reaching the loop (admission.rs).
pub struct NodeHandler {
    events: UnboundedSender<Event>,
    /// Quorum requests refused on the client listener, for a rate-limited warning.
    refused_on_client_listener: std::cell::Cell<u64>,
    /// The node's SCRAM credential image, for the server's SASL exchanges.
    credentials: super::scram_record::SharedCredentials,
}

impl NodeHandler {
    pub fn new(events: UnboundedSender<Event>) -> NodeHandler {
        NodeHandler {
            events,
            refused_on_client_listener: std::cell::Cell::new(0),
            credentials: Default::default(),
        }
    }

    /// Reads SASL credentials from `credentials` (the node's image, scram_record.rs).
    pub fn with_credentials(mut self, credentials: super::scram_record::SharedCredentials) -> Self {
        self.credentials = credentials;
        self
    }
}

impl RequestHandler for NodeHandler {
    fn handle(
        &self,
        connection: ConnectionInfo,
        header: RequestHeader,
        request: Request,
    ) -> LocalBoxFuture<'static, Reply> {
        if !connection.listener.serves_quorum()
            && super::admission::is_quorum_request(&request, header.api_version)
        {
            let refused = self.refused_on_client_listener.get() + 1;
            self.refused_on_client_listener.set(refused);
            // The first and then every 1024th as a warning: a peer configured with the
            // client port keeps trying.
            if refused % 1024 == 1 {
                tracing::warn!(peer = %connection.peer_addr, api = request.api_key().name(), refused, "quorum request on the client listener; closing the connection (controller.listener.names)");
            } else {
                tracing::debug!(peer = %connection.peer_addr, api = request.api_key().name(), "quorum request on the client listener; closing the connection");
            }
            return Box::pin(async { Reply::Close });
        }
        // Queued now, not when the future first runs: the loop sees a connection's requests
        // in the order they were read.
        let (tx, rx) = oneshot::channel();
        let queued = self
            .events
            .send(Event::Request {
                responder: Responder {
                    tx,
                    connection_id: connection.connection_id,
                    peer: std::sync::Arc::new(Peer {
                        addr: connection.peer_addr,
                        principal: crate::acl::principal::principal_of(&connection).into(),
                    }),
                    listener: connection.listener,
                },
                header,
                request,
            })
            .is_ok();
        Box::pin(async move {
            if !queued {
                return Reply::Close;
            }
            rx.await.unwrap_or(Reply::Close)
        })
    }

    fn scram_credential(
        &self,
        user: &str,
        mechanism: crate::sasl::ScramMechanism,
    ) -> Option<crate::sasl::ScramCredential> {
        self.credentials.get(user, mechanism)
    }
}

/// A request for a peer, already encoded.
#[derive(Debug)]
pub struct Outgoing {
    pub correlation_id: i32,
    pub api: ApiKey,
    pub version: i16,
    pub frame: Bytes,
}

/// A lane's connection: plain TCP or TLS over it.
trait PeerStream: AsyncRead + AsyncWrite + Unpin {}

impl<T: AsyncRead + AsyncWrite + Unpin> PeerStream for T {}

/// Opens a lane's connection within `connect_timeout`: TCP, the TLS handshake if `tls`, then
/// the ApiVersions handshake.
async fn connect(
    address: &str,
    tls: Option<&std::sync::Arc<rustls::ClientConfig>>,
    connect_timeout: Duration,
    exchange: &mut Exchange,
) -> Result<Box<dyn PeerStream>, String> {
    let attempt = async {
        let stream = TcpStream::connect(address)
            .await
            .map_err(|e| e.to_string())?;
        let _ = stream.set_nodelay(true);
        let Some(config) = tls else {
            return Ok(Box::new(stream) as Box<dyn PeerStream>);
        };
        let host = address
            .rsplit_once(':')
            .map_or(address, |(host, _)| host)
            .trim_start_matches('[')
            .trim_end_matches(']');
        let name = crate::tls::server_name(host)?;
        let tls = tokio_rustls::TlsConnector::from(config.clone())
            .connect(name, stream)
            .await
            .map_err(|e| format!("TLS handshake: {e}"))?;
        Ok::<_, String>(Box::new(tls) as Box<dyn PeerStream>)
    };
    let handshake = async {
        let mut stream: Box<dyn PeerStream> = attempt.await?;
        handshake(&mut stream, exchange).await?;
        Ok(stream)
    };
    tokio::time::timeout(connect_timeout, handshake)
        .await
        .unwrap_or_else(|_| Err("timed out".into()))
}

/// ApiVersions on a fresh connection: the exchange learns the versions the peer speaks.
async fn handshake(
    stream: &mut Box<dyn PeerStream>,
    exchange: &mut Exchange,
) -> Result<(), String> {
    let (_, frame) = exchange.encode_handshake().map_err(|e| e.to_string())?;
    stream.write_all(&frame).await.map_err(|e| e.to_string())?;
    stream.flush().await.map_err(|e| e.to_string())?;
    loop {
        if let Some((_, response)) = exchange.next_response().map_err(|e| e.to_string())? {
            return exchange
                .on_api_versions(response)
                .map_err(|e| format!("handshake: {e}"));
        }
        let n = stream
            .read_buf(exchange.received_mut())
            .await
            .map_err(|e| e.to_string())?;
        if n == 0 {
            return Err("closed during the ApiVersions handshake".into());
        }
    }
}

/// The sending side of one peer lane.
#[derive(Clone, Debug)]
pub struct PeerLane {
    tx: UnboundedSender<Outgoing>,
}

impl PeerLane {
    /// Starts the lane's task. It connects lazily, on the first request and after a failure.
    pub fn spawn(
        peer: NodeId,
        address: String,
        events: UnboundedSender<Event>,
        max_frame_bytes: usize,
        connect_timeout: Duration,
        tls: Option<std::sync::Arc<rustls::ClientConfig>>,
    ) -> PeerLane {
        let (tx, rx) = unbounded_channel();
        tokio::task::spawn_local(run_lane(
            peer,
            address,
            rx,
            events,
            max_frame_bytes,
            connect_timeout,
            tls,
        ));
        PeerLane { tx }
    }

    /// Queues a request; a failure to deliver comes back as [`Event::PeerFailed`].
    pub fn send(&self, outgoing: Outgoing) -> bool {
        self.tx.send(outgoing).is_ok()
    }
}

async fn run_lane(
    peer: NodeId,
    address: String,
    mut rx: UnboundedReceiver<Outgoing>,
    events: UnboundedSender<Event>,
    max_frame_bytes: usize,
    connect_timeout: Duration,
    tls: Option<std::sync::Arc<rustls::ClientConfig>>,
) {
    let mut connection: Option<Box<dyn PeerStream>> = None;
    let mut exchange = Exchange::new("ringlog-peer", max_frame_bytes);
    let fail = |ids: Vec<i32>| {
        if !ids.is_empty() {
            let _ = events.send(Event::PeerFailed {
                peer,
                correlation_ids: ids,
            });
        }
    };
    loop {
        tokio::select! {
            outgoing = rx.recv() => {
                let Some(outgoing) = outgoing else { return };
                if connection.is_none() {
                    exchange.reset();
                    match connect(&address, tls.as_ref(), connect_timeout, &mut exchange).await {
                        Ok(stream) => connection = Some(stream),
                        Err(error) => {
                            tracing::debug!(peer, %address, %error, "peer unreachable");
                            fail(vec![outgoing.correlation_id]);
                            continue;
                        }
                    }
                }
                if let Err(error) = exchange.expect(outgoing.correlation_id, outgoing.api, outgoing.version) {
                    tracing::warn!(peer, %error, "request not sent");
                    fail(vec![outgoing.correlation_id]);
                    continue;
                }
                let stream = connection.as_mut().expect("connected above");
                let written = async {
                    stream.write_all(&outgoing.frame).await?;
                    // A TLS session holds the record until flushed.
                    stream.flush().await
                };
                if written.await.is_err() {
                    connection = None;
                    fail(exchange.reset());
                }
            }
            read = read_some(connection.as_mut(), exchange.reserve_for_read()), if connection.is_some() => {
                let mut broken = !matches!(read, Ok(n) if n > 0);
                while !broken {
                    match exchange.next_response() {
                        Ok(Some((correlation_id, response))) => {
                            let _ = events.send(Event::PeerResponse { peer, correlation_id, response });
                        }
                        Ok(None) => break,
                        Err(error) => {
                            tracing::warn!(peer, %error, "peer connection out of step");
                            broken = true;
                        }
                    }
                }
                if broken {
                    connection = None;
                    fail(exchange.reset());
                }
            }
        }
    }
}

async fn read_some(
    stream: Option<&mut Box<dyn PeerStream>>,
    buf: &mut BytesMut,
) -> std::io::Result<usize> {
    match stream {
        Some(stream) => stream.read_buf(buf).await,
        None => std::future::pending().await,
    }
}

/// The two connections to one peer (control: Vote, BeginQuorumEpoch, EndQuorumEpoch and
/// requests to the controller; fetch: Fetch and FetchSnapshot), and the address they dial.
pub(super) struct PeerLanes {
    pub(super) control: PeerLane,
    pub(super) fetch: PeerLane,
    /// `host:port`: the peer's `controller.quorum.voters` address, or the endpoint the metadata
    /// quorum's voter set in force gives it (KIP-853), which replaces it when it differs.
    pub(super) address: String,
}

/// What we sent a peer and wait for.
pub(super) enum PeerPending {
    /// A request whose answer, if any, only a core could use (a CreateTopics forwarded to the
    /// controller); nothing is told of its loss.
    Control,
    /// A core's Vote, BeginQuorumEpoch or EndQuorumEpoch for one partition: lost with a failed
    /// lane, the core is answered BROKER_NOT_AVAILABLE (`QuorumRpc::peer_failed`).
    Quorum {
        partition: ringlog_replication::PartitionId,
        api: ApiKey,
    },
    /// This node's UpdateRaftVoter to the metadata leader (KIP-853, own_endpoint.rs).
    OwnEndpointUpdate,
    /// Partition and core correlation id of each fetch in the wire request.
    Fetch(Vec<(ringlog_replication::PartitionId, u64)>),
    /// KIP-630: partition and core correlation id of each partition in the FetchSnapshot.
    FetchSnapshot(Vec<(ringlog_replication::PartitionId, u64)>),
    /// A client's admin request forwarded to the controller (configs.rs): its answer goes
    /// back to the client under the client's correlation id. Unanswered at `deadline_ms`
    /// (`controller.socket.timeout.ms`), the client's connection is closed.
    Forward {
        responder: Responder,
        correlation_id: i32,
        version: i16,
        deadline_ms: u64,
    },
    /// This node's AllocateProducerIds to the controller (producer_ids.rs).
    ProducerIdBlock,
    /// A DescribeQuorum asking a replica for the leaders of these partitions, which this node
    /// does not run (remote_leaders.rs).
    LeaderLookup(Vec<(String, i32)>),
}
