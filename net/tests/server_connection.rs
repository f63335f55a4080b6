//! The server's connection layer against a test handler on 127.0.0.1: ordering of pipelined
//! replies, the in-flight bound, bad input on live sockets, and a graceful stop.

mod server_support;

use std::cell::Cell;
use std::io::Write;
use std::net::{Shutdown, TcpStream};
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ringlog_net::protocol::{
    ApiKey, ApiVersionsRequest, DescribeQuorumRequest, DescribeQuorumResponse, ErrorCode,
    FetchRequest, FetchResponse, Request, RequestHeader, Response, VoteRequest, VoteResponse,
    decode_response,
};
use ringlog_net::server::{
    ConnectionInfo, LocalBoxFuture, Reply, RequestHandler, ServerConfig, ServerThread,
};
use server_support::*;
use tokio::sync::Semaphore;

#[derive(Debug, PartialEq)]
enum Event {
    Started(i32),
    Answered(i32),
}

/// Vote and Fetch wait for a permit of `gate` (a slow request, a long poll); DescribeQuorum
/// is answered at once; EndQuorumEpoch asks to close the connection.
struct GatedHandler {
    state: Rc<GatedState>,
}

struct GatedState {
    events: Mutex<mpsc::Sender<Event>>,
    gate: Arc<Semaphore>,
    running: Cell<usize>,
    running_max: Arc<AtomicUsize>,
}

impl RequestHandler for GatedHandler {
    fn handle(
        &self,
        _connection: ConnectionInfo,
        header: RequestHeader,
        request: Request,
    ) -> LocalBoxFuture<'static, Reply> {
        let state = self.state.clone();
        Box::pin(async move {
            let correlation_id = header.correlation_id;
            let send = |event| state.events.lock().unwrap().send(event).unwrap();
            send(Event::Started(correlation_id));
            state.running.set(state.running.get() + 1);
            state
                .running_max
                .fetch_max(state.running.get(), Ordering::SeqCst);
            let reply = match request {
                Request::Vote(_) => {
                    state.gate.acquire().await.unwrap().forget();
                    Reply::Response(Response::Vote(VoteResponse::default()))
                }
                Request::Fetch(_) => {
                    state.gate.acquire().await.unwrap().forget();
                    Reply::Response(Response::Fetch(FetchResponse::default()))
                }
                Request::DescribeQuorum(_) => {
                    Reply::Response(Response::DescribeQuorum(DescribeQuorumResponse::default()))
                }
                _ => Reply::Close,
            };
            state.running.set(state.running.get() - 1);
            send(Event::Answered(correlation_id));
            reply
        })
    }
}

struct Harness {
    server: Option<ServerThread>,
    events: mpsc::Receiver<Event>,
    gate: Arc<Semaphore>,
    running_max: Arc<AtomicUsize>,
}

fn start(config_edit: impl FnOnce(&mut ServerConfig)) -> Harness {
    let mut config = ServerConfig::new("127.0.0.1:0".parse().unwrap());
    config_edit(&mut config);
    let (events_tx, events) = mpsc::channel();
    let gate = Arc::new(Semaphore::new(0));
    let running_max = Arc::new(AtomicUsize::new(0));
    let (handler_gate, handler_max) = (gate.clone(), running_max.clone());
    let server = ServerThread::spawn(config, move || {
        Rc::new(GatedHandler {
            state: Rc::new(GatedState {
                events: Mutex::new(events_tx),
                gate: handler_gate,
                running: Cell::new(0),
                running_max: handler_max,
            }),
        })
    })
    .expect("server starts");
    Harness {
        server: Some(server),
        events,
        gate,
        running_max,
    }
}

impl Harness {
    fn addr(&self) -> std::net::SocketAddr {
        self.server.as_ref().unwrap().local_addr()
    }
}

const VOTE_VERSION: i16 = 2;
const FETCH_VERSION: i16 = 13;

fn vote() -> Request {
    Request::Vote(VoteRequest::default())
}

/// A slow first request (a long-polled Fetch) does not hold back the requests behind it from
/// being handled, but their responses still leave in request order.
#[test]
fn pipelined_responses_keep_request_order() {
    let harness = start(|_| {});
    let mut stream = connect(harness.addr());
    let mut pipeline = Vec::new();
    pipeline.extend_from_slice(&request_frame(
        1,
        FETCH_VERSION,
        &Request::Fetch(FetchRequest::default()),
    ));
    pipeline.extend_from_slice(&request_frame(
        2,
        3,
        &Request::ApiVersions(ApiVersionsRequest::default()),
    ));
    pipeline.extend_from_slice(&request_frame(
        3,
        2,
        &Request::DescribeQuorum(DescribeQuorumRequest::default()),
    ));
    stream.write_all(&pipeline).unwrap();

    // The Fetch is parked, the DescribeQuorum behind it is already answered by the handler.
    assert_eq!(next_event(&harness.events), Event::Started(1));
    assert_eq!(next_event(&harness.events), Event::Started(3));
    assert_eq!(next_event(&harness.events), Event::Answered(3));
    harness.gate.add_permits(1);

    let (first, response) = read_response(&mut stream, ApiKey::Fetch, FETCH_VERSION);
    assert_eq!(first, 1);
    assert!(matches!(response, Response::Fetch(_)));
    let (second, _) = read_response(&mut stream, ApiKey::ApiVersions, 3);
    assert_eq!(second, 2);
    let (third, _) = read_response(&mut stream, ApiKey::DescribeQuorum, 2);
    assert_eq!(third, 3);
}

/// With 20 requests pipelined and every handler parked, exactly `max_in_flight_per_connection`
/// are dispatched; each answered request lets exactly one more in.
#[test]
fn in_flight_requests_are_bounded_per_connection() {
    const BOUND: usize = 8;
    const REQUESTS: i32 = 20;
    let harness = start(|config| config.max_in_flight_per_connection = BOUND);
    let mut stream = connect(harness.addr());
    let mut pipeline = Vec::new();
    for correlation_id in 0..REQUESTS {
        pipeline.extend_from_slice(&request_frame(correlation_id, VOTE_VERSION, &vote()));
    }
    stream.write_all(&pipeline).unwrap();

    for expected in 0..BOUND as i32 {
        assert_eq!(next_event(&harness.events), Event::Started(expected));
    }
    // Release one at a time: each answer admits exactly the next request.
    for next in BOUND as i32..REQUESTS {
        harness.gate.add_permits(1);
        assert_eq!(
            next_event(&harness.events),
            Event::Answered(next - BOUND as i32)
        );
        assert_eq!(next_event(&harness.events), Event::Started(next));
    }
    harness.gate.add_permits(BOUND);
    for expected in 0..REQUESTS {
        let (correlation_id, _) = read_response(&mut stream, ApiKey::Vote, VOTE_VERSION);
        assert_eq!(correlation_id, expected);
    }
    assert_eq!(harness.running_max.load(Ordering::SeqCst), BOUND);
}

/// Every kind of bad input on a live socket ends with an error response or a closed
/// connection, and the server goes on serving new clients.
#[test]
fn bad_input_closes_or_answers_and_the_server_keeps_serving() {
    const LIMIT: u32 = 1024 * 1024;
    let harness = start(|config| config.socket_request_max_bytes = LIMIT);
    let addr = harness.addr();

    let cases: Vec<(&str, Vec<u8>)> = vec![
        // A size prefix above socket.request.max.bytes: closed before any body byte is sent.
        (
            "size over the limit",
            ((LIMIT + 1) as i32).to_be_bytes().to_vec(),
        ),
        ("negative size", (-1i32).to_be_bytes().to_vec()),
        ("i32::MIN size", i32::MIN.to_be_bytes().to_vec()),
        ("frame shorter than a header", vec![0, 0, 0, 3, 0, 18, 0]),
        ("unknown api key", raw_request_frame(9999, 0, 5, &[])),
        (
            "unsupported Vote version",
            raw_request_frame(ApiKey::Vote.key(), 99, 6, &[]),
        ),
        (
            "truncated Vote body",
            raw_request_frame(ApiKey::Vote.key(), 0, 7, &[0, 0, 0, 1]),
        ),
        ("garbage", {
            let mut frame = 64i32.to_be_bytes().to_vec();
            frame.extend((0..64u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8));
            frame
        }),
    ];
    for (name, bytes) in cases {
        let mut stream = connect(addr);
        stream.write_all(&bytes).unwrap();
        match read_frame(&mut stream) {
            Received::Closed => {}
            Received::Frame(frame) => panic!("{name}: expected a close, got {} bytes", frame.len()),
        }
        api_versions_round_trip(addr);
    }

    // A truncated frame: the client announces 100 bytes, sends 10 and closes its side.
    let mut stream = connect(addr);
    let mut partial = 100i32.to_be_bytes().to_vec();
    partial.extend_from_slice(&[0u8; 10]);
    stream.write_all(&partial).unwrap();
    stream.shutdown(Shutdown::Write).unwrap();
    expect_closed(&mut stream);
    api_versions_round_trip(addr);

    // KIP-511: ApiVersions at a version we do not speak gets UNSUPPORTED_VERSION and our
    // ranges in a v0 response, and the connection stays usable.
    let mut stream = connect(addr);
    stream
        .write_all(&raw_request_frame(ApiKey::ApiVersions.key(), 99, 8, &[]))
        .unwrap();
    let Received::Frame(frame) = read_frame(&mut stream) else {
        panic!("no ApiVersions answer")
    };
    let (header, response) = decode_response(ApiKey::ApiVersions, 0, frame).unwrap();
    assert_eq!(header.correlation_id, 8);
    let Response::ApiVersions(response) = response else {
        panic!()
    };
    assert_eq!(response.error_code, ErrorCode::UnsupportedVersion.code());
    let row = response
        .api_keys
        .iter()
        .find(|row| row.api_key == ApiKey::ApiVersions.key())
        .expect("ApiVersions range advertised");
    stream
        .write_all(&request_frame(
            9,
            row.max_version,
            &Request::ApiVersions(ApiVersionsRequest::default()),
        ))
        .unwrap();
    let (correlation_id, _) = read_response(&mut stream, ApiKey::ApiVersions, row.max_version);
    assert_eq!(correlation_id, 9);

    // A good request before a bad one is still answered, then the connection closes.
    let mut stream = connect(addr);
    let mut pipeline = request_frame(
        10,
        2,
        &Request::DescribeQuorum(DescribeQuorumRequest::default()),
    )
    .to_vec();
    pipeline.extend_from_slice(&raw_request_frame(9999, 0, 11, &[]));
    stream.write_all(&pipeline).unwrap();
    let (correlation_id, _) = read_response(&mut stream, ApiKey::DescribeQuorum, 2);
    assert_eq!(correlation_id, 10);
    expect_closed(&mut stream);

    // The handler may close a connection (Reply::Close) after earlier replies.
    let mut stream = connect(addr);
    stream
        .write_all(&request_frame(
            12,
            1,
            &Request::EndQuorumEpoch(Default::default()),
        ))
        .unwrap();
    expect_closed(&mut stream);
    api_versions_round_trip(addr);
}

/// Kafka's parsing rule on a live socket: the bytes after the last field of a request's
/// version are ignored, the request is answered, and the connection keeps serving the
/// requests pipelined behind it (librdkafka's all-topics Metadata v12 carries three such bytes).
#[test]
fn bytes_after_a_complete_request_are_ignored_and_the_connection_keeps_serving() {
    let harness = start(|_| {});
    let mut stream = connect(harness.addr());
    let describe = Request::DescribeQuorum(DescribeQuorumRequest::default());
    let tails: [(i32, &[u8]); 3] = [(31, &[0x01, 0x00, 0x00]), (32, &[]), (33, &[0xff; 40])];
    let mut pipeline = Vec::new();
    for (correlation_id, tail) in tails {
        let frame = request_frame(correlation_id, 2, &describe);
        let size = (frame.len() - 4 + tail.len()) as i32;
        pipeline.extend_from_slice(&size.to_be_bytes());
        pipeline.extend_from_slice(&frame[4..]);
        pipeline.extend_from_slice(tail);
    }
    stream.write_all(&pipeline).unwrap();
    for (expected, _) in tails {
        let (correlation_id, response) = read_response(&mut stream, ApiKey::DescribeQuorum, 2);
        assert_eq!(correlation_id, expected);
        assert!(matches!(response, Response::DescribeQuorum(_)));
    }
    // Still open and serving after them.
    stream.write_all(&request_frame(34, 2, &describe)).unwrap();
    assert_eq!(read_response(&mut stream, ApiKey::DescribeQuorum, 2).0, 34);
}

/// A stop answers the requests already read, closes the connection, and refuses new ones;
/// a request that outlives the grace period has its connection closed by force.
#[test]
fn graceful_stop_answers_in_flight_requests() {
    let mut harness = start(|_| {});
    let addr = harness.addr();
    let mut stream = connect(addr);
    stream
        .write_all(&request_frame(1, VOTE_VERSION, &vote()))
        .unwrap();
    assert_eq!(next_event(&harness.events), Event::Started(1));
    let server = harness.server.take().unwrap();
    let stopper = std::thread::spawn(move || server.stop(DEADLINE));
    harness.gate.add_permits(1);
    let (correlation_id, _) = read_response(&mut stream, ApiKey::Vote, VOTE_VERSION);
    assert_eq!(correlation_id, 1);
    expect_closed(&mut stream);
    let report = stopper.join().unwrap();
    assert_eq!(report.connections_forced, 0);
    assert!(
        TcpStream::connect(addr).is_err(),
        "a stopped server accepts no connection"
    );

    let mut harness = start(|_| {});
    let mut stream = connect(harness.addr());
    stream
        .write_all(&request_frame(2, VOTE_VERSION, &vote()))
        .unwrap();
    assert_eq!(next_event(&harness.events), Event::Started(2));
    let report = harness
        .server
        .take()
        .unwrap()
        .stop(Duration::from_millis(50));
    assert_eq!(report.connections_forced, 1);
    expect_closed(&mut stream);
}
