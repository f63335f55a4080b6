//! The node's sockets, on the event loop's single-threaded tokio runtime: a listener whose
//! connections feed decoded requests to the loop and write the answers back in request order
//! (Kafka pipelining), and one client per peer and lane that sends requests and hands the
//! responses to the loop.
//!
//! The tasks never touch consensus or storage state: they only move frames. Everything they
//! learn goes into the loop's [`Event`] channel, which the loop drains one event at a time.
//!
//! Two lanes per peer (control: Vote, BeginQuorumEpoch, EndQuorumEpoch; fetch: Fetch) because a
//! server answers one connection's requests in order: a Vote must not wait behind a Fetch that
//! the leader holds for its long-poll.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use ringlog_replication::NodeId;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

use crate::protocol::{
    ApiKey, DecodeError, Request, RequestHeader, Response, decode_request, decode_response,
    split_frame, unsupported_api_versions_response,
};

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

/// The answer slot of one request on one connection. Answers leave in request order whatever
/// order they are given in; `None` answers nothing (Produce with acks=0) but frees the slot.
#[derive(Debug)]
pub struct Responder {
    sequence: u64,
    tx: UnboundedSender<(u64, Option<Bytes>)>,
}

impl Responder {
    pub fn send(self, frame: Option<Bytes>) {
        // A closed connection drops the answer: the client is gone.
        let _ = self.tx.send((self.sequence, frame));
    }
}

/// Accepts connections until the runtime stops.
pub async fn serve(listener: TcpListener, events: UnboundedSender<Event>, max_frame_bytes: usize) {
    loop {
        match listener.accept().await {
            Ok((stream, remote)) => {
                let _ = stream.set_nodelay(true);
                tokio::task::spawn_local(serve_connection(
                    stream,
                    remote,
                    events.clone(),
                    max_frame_bytes,
                ));
            }
            Err(error) => {
                tracing::warn!(%error, "accept failed");
                // EMFILE and friends: give the loop a moment instead of spinning.
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }
}

async fn serve_connection(
    stream: TcpStream,
    remote: SocketAddr,
    events: UnboundedSender<Event>,
    max_frame_bytes: usize,
) {
    let (mut reader, mut writer) = stream.into_split();
    let (tx, mut rx) = unbounded_channel::<(u64, Option<Bytes>)>();
    tokio::task::spawn_local(async move {
        let mut next = 0u64;
        let mut ready: BTreeMap<u64, Option<Bytes>> = BTreeMap::new();
        while let Some((sequence, frame)) = rx.recv().await {
            ready.insert(sequence, frame);
            while let Some(frame) = ready.remove(&next) {
                next += 1;
                if let Some(frame) = frame
                    && writer.write_all(&frame).await.is_err()
                {
                    return;
                }
            }
        }
    });
    let mut buf = BytesMut::with_capacity(64 * 1024);
    let mut sequence = 0u64;
    loop {
        loop {
            match split_frame(&mut buf, max_frame_bytes) {
                Ok(Some(frame)) => match decode_request(frame) {
                    Ok((header, request)) => {
                        let responder = Responder {
                            sequence,
                            tx: tx.clone(),
                        };
                        sequence += 1;
                        if events
                            .send(Event::Request {
                                responder,
                                header,
                                request,
                            })
                            .is_err()
                        {
                            return;
                        }
                    }
                    Err(DecodeError::UnsupportedVersion {
                        api_key,
                        correlation_id,
                        ..
                    }) if api_key == ApiKey::ApiVersions.key() => {
                        // KIP-511: tell the client which versions we speak.
                        if let Ok(frame) = unsupported_api_versions_response(correlation_id) {
                            let _ = tx.send((sequence, Some(frame)));
                        }
                        sequence += 1;
                    }
                    Err(error) => {
                        tracing::warn!(%remote, %error, "undecodable request; closing the connection");
                        return;
                    }
                },
                Ok(None) => break,
                Err(error) => {
                    tracing::warn!(%remote, %error, "bad frame; closing the connection");
                    return;
                }
            }
        }
        match reader.read_buf(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
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
    ) -> PeerLane {
        let (tx, rx) = unbounded_channel();
        tokio::task::spawn_local(run_lane(
            peer,
            address,
            rx,
            events,
            max_frame_bytes,
            connect_timeout,
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
) {
    let mut connection: Option<TcpStream> = None;
    let mut in_flight: HashMap<i32, (ApiKey, i16)> = HashMap::new();
    let mut buf = BytesMut::with_capacity(64 * 1024);
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
                    match tokio::time::timeout(connect_timeout, TcpStream::connect(&address)).await {
                        Ok(Ok(stream)) => {
                            let _ = stream.set_nodelay(true);
                            buf.clear();
                            connection = Some(stream);
                        }
                        _ => {
                            tracing::debug!(peer, %address, "peer unreachable");
                            fail(vec![outgoing.correlation_id]);
                            continue;
                        }
                    }
                }
                let stream = connection.as_mut().expect("connected above");
                if stream.write_all(&outgoing.frame).await.is_err() {
                    connection = None;
                    let mut ids: Vec<i32> = in_flight.drain().map(|(id, _)| id).collect();
                    ids.push(outgoing.correlation_id);
                    fail(ids);
                    continue;
                }
                in_flight.insert(outgoing.correlation_id, (outgoing.api, outgoing.version));
            }
            read = read_some(connection.as_mut(), &mut buf), if connection.is_some() => {
                let mut broken = !matches!(read, Ok(n) if n > 0);
                while !broken {
                    match split_frame(&mut buf, max_frame_bytes) {
                        Ok(Some(frame)) => {
                            if frame.len() < 4 {
                                broken = true;
                                break;
                            }
                            let correlation_id = i32::from_be_bytes([frame[0], frame[1], frame[2], frame[3]]);
                            let Some((api, version)) = in_flight.remove(&correlation_id) else {
                                tracing::warn!(peer, correlation_id, "response to no request");
                                broken = true;
                                break;
                            };
                            match decode_response(api, version, frame) {
                                Ok((_, response)) => {
                                    let _ = events.send(Event::PeerResponse { peer, correlation_id, response });
                                }
                                Err(error) => {
                                    tracing::warn!(peer, %error, "undecodable response");
                                    fail(vec![correlation_id]);
                                    broken = true;
                                }
                            }
                        }
                        Ok(None) => break,
                        Err(_) => broken = true,
                    }
                }
                if broken {
                    connection = None;
                    fail(in_flight.drain().map(|(id, _)| id).collect());
                }
            }
        }
    }
}

async fn read_some(stream: Option<&mut TcpStream>, buf: &mut BytesMut) -> std::io::Result<usize> {
    match stream {
        Some(stream) => stream.read_buf(buf).await,
        None => std::future::pending().await,
    }
}
