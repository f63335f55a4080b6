//! The server's bounded resources against a test handler on 127.0.0.x: the request memory
//! budget (`queued.max.request.bytes`) pauses a connection whose frame does not fit and resumes
//! it when bytes come back, and connections over `max.connections.per.ip` or `max.connections`
//! are closed at accept.

mod server_support;

use std::io::Write;
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::os::fd::FromRawFd;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ringlog_net::protocol::{
    ApiKey, DescribeQuorumRequest, DescribeQuorumResponse, Request, RequestHeader, Response,
    VoteRequest, VoteResponse,
};
use ringlog_net::server::{
    ConnectionInfo, LocalBoxFuture, Reply, RequestHandler, ServerConfig, ServerMetrics,
    ServerThread,
};
use server_support::*;
use tokio::sync::Semaphore;

/// Answers DescribeQuorum at once and Vote once `gate` gives it a permit; anything else
/// closes the connection.
struct TestHandler {
    gate: Arc<Semaphore>,
}

impl RequestHandler for TestHandler {
    fn handle(
        &self,
        _connection: ConnectionInfo,
        _header: RequestHeader,
        request: Request,
    ) -> LocalBoxFuture<'static, Reply> {
        let gate = self.gate.clone();
        Box::pin(async move {
            match request {
                Request::DescribeQuorum(_) => {
                    Reply::Response(Response::DescribeQuorum(DescribeQuorumResponse::default()))
                }
                Request::Vote(_) => {
                    gate.acquire().await.expect("gate open").forget();
                    Reply::Response(Response::Vote(VoteResponse::default()))
                }
                _ => Reply::Close,
            }
        })
    }
}

/// A server with `edit` applied to its configuration; returns its metrics and the Vote gate.
fn start(edit: impl FnOnce(&mut ServerConfig)) -> (ServerThread, ServerMetrics, Arc<Semaphore>) {
    // On 0.0.0.0 so that clients may come from any 127.0.0.x address.
    let mut config = ServerConfig::new("0.0.0.0:0".parse().unwrap());
    edit(&mut config);
    let metrics = config.metrics.clone();
    let gate = Arc::new(Semaphore::new(0));
    let handler_gate = gate.clone();
    let server = ServerThread::spawn(config, move || Rc::new(TestHandler { gate: handler_gate }))
        .expect("server starts");
    (server, metrics, gate)
}

fn loopback(server: &ServerThread) -> SocketAddr {
    SocketAddr::from((Ipv4Addr::LOCALHOST, server.local_addr().port()))
}

/// Polls `condition` until it holds, failing the test with `what` at the deadline.
fn wait_until(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + DEADLINE;
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        // The pause between two probes of a condition, not a wait for the condition itself.
        std::thread::park_timeout(Duration::from_millis(5));
    }
}

const DESCRIBE_VERSION: i16 = 2;

const VOTE_VERSION: i16 = 2;

/// A DescribeQuorum frame of exactly `size_bytes` after its size prefix: the request, then
/// bytes past its last field, which the server reads and ignores (Kafka's rule).
fn padded_describe_frame(correlation_id: i32, size_bytes: usize) -> Vec<u8> {
    let request = Request::DescribeQuorum(DescribeQuorumRequest::default());
    padded_frame(correlation_id, DESCRIBE_VERSION, &request, size_bytes)
}

fn padded_frame(
    correlation_id: i32,
    version: i16,
    request: &Request,
    size_bytes: usize,
) -> Vec<u8> {
    let request = request_frame(correlation_id, version, request);
    let mut frame = (size_bytes as i32).to_be_bytes().to_vec();
    frame.extend_from_slice(&request[4..]);
    frame.resize(4 + size_bytes, 0xab);
    frame
}

fn describe_answered(stream: &mut TcpStream, correlation_id: i32) {
    let (answered, response) = read_response(stream, ApiKey::DescribeQuorum, DESCRIBE_VERSION);
    assert_eq!(answered, correlation_id);
    assert!(matches!(response, Response::DescribeQuorum(_)));
}

const KIB: usize = 1024;
const FRAME_BYTES: usize = 600 * KIB;
/// Bytes of each 600 KiB frame held back until the test lets the frame complete.
const UNSENT_BYTES: usize = 10 * KIB;

fn one_mib_budget(config: &mut ServerConfig) {
    config.socket_request_max_bytes = 1024 * KIB as u32;
    config.queued_max_request_bytes = Some(1024 * KIB as u64);
}

/// Two connections, each with a 600 KiB frame sent but for its last 10 KiB, to a server with
/// `queued.max.request.bytes` of 1 MiB; returns once the second waits for memory.
struct TwoHalfSentFrames {
    server: ServerThread,
    metrics: ServerMetrics,
    first: (TcpStream, Vec<u8>),
    second: (TcpStream, Vec<u8>),
}

fn two_half_sent_frames() -> TwoHalfSentFrames {
    let (server, metrics, _gate) = start(one_mib_budget);
    let addr = loopback(&server);
    let half_sent = |correlation_id| {
        let frame = padded_describe_frame(correlation_id, FRAME_BYTES);
        let mut stream = connect(addr);
        stream
            .write_all(&frame[..frame.len() - UNSENT_BYTES])
            .unwrap();
        (stream, frame)
    };
    let first = half_sent(1);
    // Charged: the frame's whole size less the connection's own 64 KiB read buffer.
    let first_charge = (4 + FRAME_BYTES - 64 * KIB) as f64;
    wait_until("the first frame charged in full", || {
        metrics.memory_pool_used.get() == first_charge
    });
    let second = half_sent(2);
    wait_until("the second frame waiting for memory", || {
        metrics.frames_waiting_for_memory.get() == 1.0
    });
    assert!(metrics.memory_pool_used.get() <= (1024 * KIB) as f64);
    assert!(metrics.memory_pool_used.get() > first_charge);
    TwoHalfSentFrames {
        server,
        metrics,
        first,
        second,
    }
}

fn send_the_rest((stream, frame): &mut (TcpStream, Vec<u8>)) {
    stream
        .write_all(&frame[frame.len() - UNSENT_BYTES..])
        .unwrap();
}

/// The first frame grows to its full size; the second is granted buffer while both could still
/// finish one after the other, and then waits (its connection is not read) rather than take
/// bytes that would leave neither able to finish. Small requests on other connections are
/// served meanwhile; when the first frame is answered its bytes come back and the second one
/// goes on.
#[test]
fn a_frame_the_budget_cannot_take_waits_until_bytes_come_back() {
    let TwoHalfSentFrames {
        server,
        metrics,
        mut first,
        mut second,
    } = two_half_sent_frames();

    // Small requests never wait for the budget.
    let mut small = connect(loopback(&server));
    small
        .write_all(&padded_describe_frame(3, 100))
        .expect("write");
    describe_answered(&mut small, 3);
    assert_eq!(metrics.frames_waiting_for_memory.get(), 1.0);

    // The first frame completes and is answered: the second may take its bytes.
    send_the_rest(&mut first);
    describe_answered(&mut first.0, 1);
    wait_until("the second frame no longer waiting", || {
        metrics.frames_waiting_for_memory.get() == 0.0
    });
    send_the_rest(&mut second);
    describe_answered(&mut second.0, 2);
    wait_until("every charged byte given back", || {
        metrics.memory_pool_used.get() == 0.0
    });
    assert_eq!(
        metrics.memory_pool_available.get(),
        (1024 * KIB) as f64,
        "the whole budget is free again"
    );
}

/// A frame waiting for memory is not reading its socket, so it would never see a stop shut
/// that socket's read side. Here nothing else would wake it either: the bytes it waits for are
/// held by a Vote whose handler has not answered. The stop wakes it and closes its connection
/// at once, and still answers the Vote it had read (a graceful stop).
#[test]
fn a_stop_ends_a_connection_waiting_for_memory() {
    let (server, metrics, gate) = start(one_mib_budget);
    let addr = loopback(&server);
    let mut voter = connect(addr);
    let vote = Request::Vote(VoteRequest::default());
    voter
        .write_all(&padded_frame(1, VOTE_VERSION, &vote, FRAME_BYTES))
        .unwrap();
    let vote_charge = (4 + FRAME_BYTES - 64 * KIB) as f64;
    wait_until("the Vote read and held by its handler", || {
        metrics.memory_pool_used.get() == vote_charge
    });
    // 536 KiB held leaves 488 KiB: too little for another 600 KiB frame to finish.
    let mut waiting = connect(addr);
    waiting
        .write_all(&padded_describe_frame(2, FRAME_BYTES)[..FRAME_BYTES - UNSENT_BYTES])
        .unwrap();
    wait_until("the second frame waiting for memory", || {
        metrics.frames_waiting_for_memory.get() == 1.0
    });

    let stop = std::thread::spawn(move || server.stop(DEADLINE));
    expect_closed(&mut waiting);
    gate.add_permits(1);
    let (correlation_id, _) = read_response(&mut voter, ApiKey::Vote, VOTE_VERSION);
    assert_eq!(correlation_id, 1);
    expect_closed(&mut voter);
    let report = stop.join().expect("stop");
    assert_eq!(report.connections_forced, 0);
    assert_eq!(metrics.memory_pool_used.get(), 0.0);
    assert_eq!(metrics.frames_waiting_for_memory.get(), 0.0);
}

/// A connection from `source` (any 127.0.0.x is this host) to `addr`.
fn connect_from(source: Ipv4Addr, addr: SocketAddr) -> TcpStream {
    let SocketAddr::V4(addr) = addr else {
        panic!("IPv4 only")
    };
    let sockaddr = |ip: Ipv4Addr, port: u16| libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: port.to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(ip).to_be(),
        },
        sin_zero: [0; 8],
    };
    let length = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
    // SAFETY: plain socket calls on a descriptor this function owns until it is wrapped.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        assert!(fd >= 0, "socket: {}", std::io::Error::last_os_error());
        let stream = TcpStream::from_raw_fd(fd);
        let local = sockaddr(source, 0);
        let bound = libc::bind(fd, (&raw const local).cast(), length);
        assert_eq!(
            bound,
            0,
            "bind {source}: {}",
            std::io::Error::last_os_error()
        );
        let remote = sockaddr(*addr.ip(), addr.port());
        let connected = libc::connect(fd, (&raw const remote).cast(), length);
        assert_eq!(connected, 0, "connect: {}", std::io::Error::last_os_error());
        stream.set_read_timeout(Some(DEADLINE)).unwrap();
        stream
    }
}

/// True when the server answers a DescribeQuorum on `stream`; false when it closed it.
fn served(stream: &mut TcpStream, correlation_id: i32) -> bool {
    let frame = request_frame(
        correlation_id,
        DESCRIBE_VERSION,
        &Request::DescribeQuorum(DescribeQuorumRequest::default()),
    );
    // A write to a connection the server already closed may fail; the read below says so too.
    let _ = stream.write_all(&frame);
    match read_frame(stream) {
        Received::Frame(_) => true,
        Received::Closed => false,
    }
}

/// Kafka's `max.connections.per.ip` and `max.connections`: the connection over either limit
/// is closed before anything is read from it, the per-address limit counts each 127.0.0.x
/// apart, and a slot freed by a closed connection is taken by the next one.
#[test]
fn connections_over_the_limits_are_closed_at_accept() {
    let (server, metrics, _gate) = start(|config| {
        config.max_connections = 4;
        config.max_connections_per_ip = 2;
    });
    let addr = loopback(&server);
    let host = |last: u8| Ipv4Addr::new(127, 0, 0, last);

    let mut a1 = connect_from(host(1), addr);
    let mut a2 = connect_from(host(1), addr);
    assert!(served(&mut a1, 1) && served(&mut a2, 2));
    let mut a3 = connect_from(host(1), addr);
    assert!(!served(&mut a3, 3), "a third connection from 127.0.0.1");
    assert_eq!(metrics.connections_refused_max_connections_per_ip.get(), 1);

    let mut b1 = connect_from(host(2), addr);
    let mut b2 = connect_from(host(2), addr);
    assert!(served(&mut b1, 4) && served(&mut b2, 5));
    assert_eq!(metrics.connection_count.get(), 4.0);
    let mut c1 = connect_from(host(3), addr);
    assert!(!served(&mut c1, 6), "a fifth connection in all");
    assert_eq!(metrics.connections_refused_max_connections.get(), 1);

    // The connections already open are untouched, and a closed one frees its slot.
    assert!(served(&mut a1, 7) && served(&mut b2, 8));
    drop(a2);
    wait_until("the closed connection's slot freed", || {
        metrics.connection_count.get() == 3.0
    });
    let mut c2 = connect_from(host(3), addr);
    assert!(served(&mut c2, 9));
    assert_eq!(metrics.connections_refused_max_connections.get(), 1);
    assert_eq!(metrics.connections_refused_max_connections_per_ip.get(), 1);
}

/// A budget smaller than the largest request could never read that request: refused at start.
#[test]
fn a_budget_below_the_largest_request_is_refused() {
    let config = ServerConfig {
        socket_request_max_bytes: 2048,
        queued_max_request_bytes: Some(1024),
        ..ServerConfig::new("127.0.0.1:0".parse().unwrap())
    };
    let gate = Arc::new(Semaphore::new(0));
    let error = ServerThread::spawn(config, move || Rc::new(TestHandler { gate }))
        .err()
        .expect("refused");
    assert!(error.to_string().contains("queued.max.request.bytes"));
}

/// Kafka's `connections.max.idle.ms`: a connection that read and wrote nothing for that long,
/// owing nothing, is closed; one that keeps asking stays open, and one waiting for an answer
/// (a long poll) is not idle until it has been answered and then left alone.
#[test]
fn idle_connections_are_closed_and_busy_ones_are_not() {
    let idle = Duration::from_millis(1500);
    let (server, _metrics, gate) = start(|config| config.connections_max_idle = Some(idle));
    let addr = loopback(&server);
    let mut silent = connect(addr);
    let mut chatty = connect(addr);
    let mut waiting = connect(addr);
    let vote = request_frame(7, VOTE_VERSION, &Request::Vote(VoteRequest::default()));
    waiting.write_all(&vote).unwrap();

    // Twice the idle time, one request after another on one connection.
    let started = Instant::now();
    let mut correlation_id = 0;
    while started.elapsed() < idle * 2 {
        correlation_id += 1;
        assert!(
            served(&mut chatty, correlation_id),
            "a connection that keeps asking was closed as idle"
        );
    }
    expect_closed(&mut silent);
    // The Vote is still owed: its connection stays open. Answered, it goes idle.
    gate.add_permits(1);
    let (answered, response) = read_response(&mut waiting, ApiKey::Vote, VOTE_VERSION);
    assert_eq!(answered, 7);
    assert!(matches!(response, Response::Vote(_)));
    expect_closed(&mut waiting);
    drop(server);
}
