//! The peer client against our own server on 127.0.0.1: handshake and round trip, several
//! requests in flight on one connection, request timeout, reconnect after a restart, and the
//! blocking KafkaClient.

mod server_support;

use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use ringlog_net::peer::{KafkaClient, PeerClient, PeerConfig, PeerError};
use ringlog_net::protocol::{
    ApiKey, DescribeQuorumResponse, FetchRequest, FetchResponse, Request, RequestHeader, Response,
    VoteRequest, VoteResponse,
};
use ringlog_net::server::{
    ConnectionInfo, LocalBoxFuture, Reply, RequestHandler, ServerConfig, ServerThread,
};
use server_support::*;
use tokio::sync::Semaphore;

/// Vote and DescribeQuorum are answered at once; a Fetch with a max wait waits for a permit
/// of `gate` (a long poll); every Fetch echoes its version in `throttle_time_ms`. Every request reports its connection.
struct PeerTestHandler {
    connections: Arc<Mutex<mpsc::Sender<(u64, ApiKey)>>>,
    gate: Arc<Semaphore>,
}

impl RequestHandler for PeerTestHandler {
    fn handle(
        &self,
        connection: ConnectionInfo,
        header: RequestHeader,
        request: Request,
    ) -> LocalBoxFuture<'static, Reply> {
        let _ = self
            .connections
            .lock()
            .unwrap()
            .send((connection.connection_id, request.api_key()));
        let gate = self.gate.clone();
        let api_version = header.api_version;
        Box::pin(async move {
            match request {
                Request::Vote(_) => Reply::Response(Response::Vote(VoteResponse {
                    error_code: 0,
                    ..VoteResponse::default()
                })),
                Request::Fetch(fetch) => {
                    if fetch.max_wait_ms > 0 {
                        gate.acquire().await.unwrap().forget();
                    }
                    Reply::Response(Response::Fetch(FetchResponse {
                        throttle_time_ms: i32::from(api_version),
                        ..FetchResponse::default()
                    }))
                }
                Request::DescribeQuorum(_) => {
                    Reply::Response(Response::DescribeQuorum(DescribeQuorumResponse::default()))
                }
                _ => Reply::Close,
            }
        })
    }
}

struct TestServer {
    server: ServerThread,
    connections: mpsc::Receiver<(u64, ApiKey)>,
    gate: Arc<Semaphore>,
}

fn start_server(address: SocketAddr) -> TestServer {
    let (connections_tx, connections) = mpsc::channel();
    let gate = Arc::new(Semaphore::new(0));
    let handler_gate = gate.clone();
    let server = ServerThread::spawn(ServerConfig::new(address), move || {
        Rc::new(PeerTestHandler {
            connections: Arc::new(Mutex::new(connections_tx)),
            gate: handler_gate,
        })
    })
    .expect("server starts");
    TestServer {
        server,
        connections,
        gate,
    }
}

fn config(request_timeout_ms: u64) -> PeerConfig {
    PeerConfig {
        request_timeout_ms,
        retry_backoff_ms: 5,
        retry_backoff_max_ms: 50,
        ..PeerConfig::new("peer-test")
    }
}

fn long_poll() -> Request {
    Request::Fetch(FetchRequest {
        max_wait_ms: 500,
        ..FetchRequest::default()
    })
}

fn vote() -> Request {
    Request::Vote(VoteRequest::default())
}

#[test]
fn handshake_then_round_trip_at_the_highest_common_version() {
    let server = start_server("127.0.0.1:0".parse().unwrap());
    let address = server.server.local_addr().to_string();
    tokio_uring::start(async move {
        let peer = PeerClient::new(address, config(10_000));
        let response = peer.send(vote()).await.expect("vote answered");
        assert!(matches!(response, Response::Vote(_)));
        for api in [
            ApiKey::Vote,
            ApiKey::Fetch,
            ApiKey::FetchSnapshot,
            ApiKey::DescribeQuorum,
        ] {
            assert_eq!(peer.negotiated_version(api), Some(api.versions().max));
        }
    });
}

/// KIP-595 followers long-poll with Fetch: a Vote sent after it must not wait for it, and
/// several requests may be in flight on one connection.
#[test]
fn votes_overtake_a_long_polled_fetch() {
    let server = start_server("127.0.0.1:0".parse().unwrap());
    let address = server.server.local_addr().to_string();
    let gate = server.gate.clone();
    tokio_uring::start(async move {
        let peer = PeerClient::new(address, config(10_000));
        let fetcher = peer.clone();
        let fetch = tokio_uring::spawn(async move { fetcher.send(long_poll()).await });
        // Three votes in flight together complete while the fetch is parked in the handler.
        let votes: Vec<_> = (0..3)
            .map(|_| {
                let voter = peer.clone();
                tokio_uring::spawn(async move { voter.send(vote()).await })
            })
            .collect();
        for vote in votes {
            let response = vote.await.unwrap();
            assert!(matches!(response, Ok(Response::Vote(_))), "{response:?}");
        }
        assert!(!fetch.is_finished());
        gate.add_permits(1);
        let Ok(Response::Fetch(response)) = fetch.await.unwrap() else {
            panic!("fetch failed")
        };
        assert_eq!(
            response.throttle_time_ms,
            i32::from(ApiKey::Fetch.versions().max)
        );
    });
    let requests: Vec<(u64, ApiKey)> = server.connections.try_iter().collect();
    assert_eq!(requests.len(), 4);
    let vote_connections: Vec<u64> = requests
        .iter()
        .filter(|(_, api)| *api == ApiKey::Vote)
        .map(|(id, _)| *id)
        .collect();
    assert_eq!(vote_connections.len(), 3);
    assert!(
        vote_connections.iter().all(|id| *id == vote_connections[0]),
        "the votes share one connection: {requests:?}"
    );
}

/// A request unanswered within controller.quorum.request.timeout.ms fails with Timeout, the
/// connection is dropped, and the next request gets a fresh one.
#[test]
fn an_unanswered_request_times_out_and_the_next_one_reconnects() {
    let server = start_server("127.0.0.1:0".parse().unwrap());
    let address = server.server.local_addr().to_string();
    tokio_uring::start(async move {
        let peer = PeerClient::new(address, config(200));
        let error = peer.send(long_poll()).await.unwrap_err();
        assert!(
            matches!(
                error,
                PeerError::Timeout {
                    api: ApiKey::Fetch,
                    timeout_ms: 200
                }
            ),
            "{error}"
        );
        assert!(!peer.is_connected());
        let response = peer.send(Request::Fetch(FetchRequest::default())).await;
        assert!(matches!(response, Ok(Response::Fetch(_))), "{response:?}");
    });
    let connection_ids: Vec<u64> = server.connections.try_iter().map(|(id, _)| id).collect();
    assert_eq!(connection_ids, vec![0, 1]);
}

/// After the server restarts on the same port, the client reconnects by itself (after the
/// back-off) and requests succeed again.
#[test]
fn the_client_reconnects_after_the_server_restarts() {
    let server = start_server("127.0.0.1:0".parse().unwrap());
    let socket_addr = server.server.local_addr();
    tokio_uring::start(async move {
        let peer = PeerClient::new(socket_addr.to_string(), config(1000));
        assert!(peer.send(vote()).await.is_ok());
        drop(server); // stops the server, closing our connection

        let error = peer.send(vote()).await.unwrap_err();
        assert!(
            matches!(
                error,
                PeerError::Disconnected { .. }
                    | PeerError::Connect { .. }
                    | PeerError::Handshake { .. }
            ),
            "{error}"
        );
        let _restarted = start_server(socket_addr);
        let deadline = Instant::now() + DEADLINE;
        loop {
            match peer.send(vote()).await {
                Ok(response) => {
                    assert!(matches!(response, Response::Vote(_)));
                    break;
                }
                Err(error) => assert!(Instant::now() < deadline, "never reconnected: {error}"),
            }
        }
        assert!(peer.is_connected());
    });
}

#[test]
fn blocking_kafka_client_describes_the_quorum() {
    let server = start_server("127.0.0.1:0".parse().unwrap());
    let client = KafkaClient::connect(&server.server.local_addr().to_string(), config(10_000))
        .expect("connect");
    let response = client.describe_quorum("__cluster_metadata", 0).unwrap();
    assert_eq!(response.error_code, 0);
    assert_eq!(
        client.peer().negotiated_version(ApiKey::DescribeQuorum),
        Some(ApiKey::DescribeQuorum.versions().max)
    );
}

#[test]
fn connection_refused_is_an_error_not_a_hang() {
    tokio_uring::start(async move {
        // A port bound but never listened on, held for the whole test: Linux refuses connections
        // to it, and no other test can start listening there meanwhile (bind-and-drop would leave
        // the port free for another test's listener to take).
        let held = tokio::net::TcpSocket::new_v4().unwrap();
        held.bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let port = held.local_addr().unwrap().port();
        let peer = PeerClient::new(format!("127.0.0.1:{port}"), config(2000));
        let error = peer.send(vote()).await.unwrap_err();
        assert!(matches!(error, PeerError::Connect { .. }), "{error}");
    });
}
