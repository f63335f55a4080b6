//! Shared by the server and peer tests: a blocking Kafka-protocol client on std sockets (so the
//! tests drive the server from outside its runtime, byte by byte when they need to) and helpers
//! to wait for events with a deadline instead of sleeping.
#![allow(dead_code)]

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use bytes::Bytes;
use ringlog_net::protocol::{
    ApiKey, ApiVersionsRequest, Request, RequestHeader, Response, decode_response, encode_request,
};

/// Long enough for a loaded CI machine, short enough that a hang fails the test run.
pub const DEADLINE: Duration = Duration::from_secs(20);

pub fn connect(addr: SocketAddr) -> TcpStream {
    let stream = TcpStream::connect(addr).expect("connect");
    stream.set_read_timeout(Some(DEADLINE)).unwrap();
    stream.set_nodelay(true).unwrap();
    stream
}

/// A size-prefixed request frame.
pub fn request_frame(correlation_id: i32, version: i16, request: &Request) -> Bytes {
    let header = RequestHeader {
        api_key: request.api_key().key(),
        api_version: version,
        correlation_id,
        client_id: Some("server-test".into()),
    };
    encode_request(&header, request).expect("encode request")
}

/// A frame whose header names any api key and version, with `body` after the header v1.
pub fn raw_request_frame(api_key: i16, version: i16, correlation_id: i32, body: &[u8]) -> Vec<u8> {
    let mut inner = Vec::new();
    inner.extend_from_slice(&api_key.to_be_bytes());
    inner.extend_from_slice(&version.to_be_bytes());
    inner.extend_from_slice(&correlation_id.to_be_bytes());
    inner.extend_from_slice(&(-1i16).to_be_bytes()); // null client id
    inner.extend_from_slice(body);
    let mut frame = (inner.len() as i32).to_be_bytes().to_vec();
    frame.extend_from_slice(&inner);
    frame
}

/// What came back on a connection.
#[derive(Debug)]
pub enum Received {
    Frame(Bytes),
    Closed,
}

/// Reads one response frame (without its size prefix), or notices that the server closed.
pub fn read_frame(stream: &mut TcpStream) -> Received {
    let mut size = [0u8; 4];
    match read_exact_or_closed(stream, &mut size) {
        Some(()) => {}
        None => return Received::Closed,
    }
    let size = i32::from_be_bytes(size);
    assert!(size >= 0, "negative response size {size}");
    let mut body = vec![0u8; size as usize];
    match read_exact_or_closed(stream, &mut body) {
        Some(()) => Received::Frame(Bytes::from(body)),
        None => panic!("server closed inside a response frame"),
    }
}

fn read_exact_or_closed(stream: &mut TcpStream, buffer: &mut [u8]) -> Option<()> {
    let mut filled = 0;
    while filled < buffer.len() {
        match stream.read(&mut buffer[filled..]) {
            Ok(0) => return None,
            Ok(n) => filled += n,
            Err(error) if error.kind() == ErrorKind::Interrupted => {}
            Err(error)
                if matches!(
                    error.kind(),
                    ErrorKind::ConnectionReset | ErrorKind::ConnectionAborted
                ) =>
            {
                return None;
            }
            Err(error) => panic!(
                "read failed (timeout means the server neither answered nor closed): {error}"
            ),
        }
    }
    Some(())
}

/// Reads one frame and decodes it as the response to `api` at `version`.
pub fn read_response(stream: &mut TcpStream, api: ApiKey, version: i16) -> (i32, Response) {
    match read_frame(stream) {
        Received::Frame(frame) => {
            let (header, response) = decode_response(api, version, frame).expect("decode response");
            (header.correlation_id, response)
        }
        Received::Closed => panic!("connection closed, expected a {api:?} response"),
    }
}

/// Asserts that the server closes the connection without sending anything more.
pub fn expect_closed(stream: &mut TcpStream) {
    match read_frame(stream) {
        Received::Closed => {}
        Received::Frame(frame) => panic!(
            "expected the connection to close, got a frame of {} bytes",
            frame.len()
        ),
    }
}

/// One ApiVersions v3 round trip on a new connection: the server is alive and serving.
pub fn api_versions_round_trip(addr: SocketAddr) {
    let mut stream = connect(addr);
    let request = Request::ApiVersions(ApiVersionsRequest {
        client_software_name: "ringlog-test".into(),
        client_software_version: "1".into(),
    });
    stream.write_all(&request_frame(77, 3, &request)).unwrap();
    let (correlation_id, response) = read_response(&mut stream, ApiKey::ApiVersions, 3);
    assert_eq!(correlation_id, 77);
    let Response::ApiVersions(response) = response else {
        panic!("not an ApiVersions response")
    };
    assert_eq!(response.error_code, 0);
    assert!(
        response
            .api_keys
            .iter()
            .any(|row| row.api_key == ApiKey::Vote.key())
    );
}

/// Waits for the next event from the server thread, failing the test at the deadline.
pub fn next_event<T>(events: &std::sync::mpsc::Receiver<T>) -> T {
    events
        .recv_timeout(DEADLINE)
        .expect("no event from the server before the deadline")
}
