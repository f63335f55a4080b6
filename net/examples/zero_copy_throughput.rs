//! Bytes per second of a 256 MiB file region served through the server (a FetchSnapshot reply
//! whose records are a file region, sent with sendfile) to a loopback reader, against a plain
//! blocking `sendfile` loop of the same file over loopback, in the same run.
//!
//! `cargo run --release -p ringlog-net --example zero_copy_throughput [size_mib] [rounds]`

use std::fs::File;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::rc::Rc;
use std::time::{Duration, Instant};

use ringlog_net::protocol::fetch_snapshot_response::{PartitionSnapshot, TopicSnapshot};
use ringlog_net::protocol::{
    FetchSnapshotRequest, FetchSnapshotResponse, Records, Request, RequestHeader, Response,
    encode_request,
};
use ringlog_net::server::{
    ConnectionInfo, FileRegion, LocalBoxFuture, RecordsSource, Reply, RequestHandler, ServerConfig,
    ServerThread,
};

struct SnapshotHandler {
    file: Rc<File>,
    length: u32,
}

impl RequestHandler for SnapshotHandler {
    fn handle(
        &self,
        _connection: ConnectionInfo,
        _header: RequestHeader,
        _request: Request,
    ) -> LocalBoxFuture<'static, Reply> {
        let response = Response::FetchSnapshot(FetchSnapshotResponse {
            topics: vec![TopicSnapshot {
                name: "__cluster_metadata".into(),
                partitions: vec![PartitionSnapshot {
                    size: i64::from(self.length),
                    unaligned_records: Records::External {
                        token: 0,
                        size_bytes: self.length,
                    },
                    ..PartitionSnapshot::default()
                }],
            }],
            ..FetchSnapshotResponse::default()
        });
        let regions = vec![RecordsSource::File(FileRegion {
            file: self.file.clone(),
            position: 0,
            length: self.length,
        })];
        Box::pin(async move { Reply::WithRecords { response, regions } })
    }
}

/// Reads exactly `total` bytes, discarding them (the same loop for both measurements).
fn drain(stream: &mut TcpStream, total: u64) {
    let mut buffer = vec![0u8; 1 << 20];
    let mut received = 0u64;
    while received < total {
        let n = stream.read(&mut buffer).expect("read");
        assert!(n > 0, "closed after {received} of {total} bytes");
        received += n as u64;
    }
}

fn plain_sendfile(path: &std::path::Path, length: u64) -> Duration {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let path = path.to_path_buf();
    let sender = std::thread::spawn(move || {
        let (socket, _) = listener.accept().unwrap();
        let file = File::open(path).unwrap();
        let mut offset: i64 = 0;
        while (offset as u64) < length {
            // SAFETY: both descriptors are open for the whole call.
            let sent = unsafe {
                libc::sendfile(
                    socket.as_raw_fd(),
                    file.as_raw_fd(),
                    &mut offset,
                    (length - offset as u64) as usize,
                )
            };
            assert!(sent > 0, "sendfile: {}", std::io::Error::last_os_error());
        }
    });
    let started = Instant::now();
    let mut stream = TcpStream::connect(addr).unwrap();
    drain(&mut stream, length);
    let elapsed = started.elapsed();
    sender.join().unwrap();
    elapsed
}

fn through_server(server: &ServerThread, length: u64) -> Duration {
    let header = RequestHeader {
        api_key: 59,
        api_version: 1,
        correlation_id: 1,
        client_id: None,
    };
    let request = encode_request(
        &header,
        &Request::FetchSnapshot(FetchSnapshotRequest::default()),
    )
    .unwrap();
    let started = Instant::now();
    let mut stream = TcpStream::connect(server.local_addr()).unwrap();
    stream.write_all(&request).unwrap();
    let mut size = [0u8; 4];
    stream.read_exact(&mut size).unwrap();
    let frame_bytes = i32::from_be_bytes(size) as u64;
    assert!(frame_bytes > length, "the frame carries the whole region");
    drain(&mut stream, frame_bytes);
    started.elapsed()
}

fn mib_per_second(bytes: u64, elapsed: Duration) -> f64 {
    bytes as f64 / (1024.0 * 1024.0) / elapsed.as_secs_f64()
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(|a, b| a.total_cmp(b));
    values[values.len() / 2]
}

fn main() {
    let mut args = std::env::args().skip(1);
    let size_mib: u64 = args.next().map_or(256, |a| a.parse().expect("size in MiB"));
    let rounds: usize = args.next().map_or(5, |a| a.parse().expect("rounds"));
    let length = size_mib * 1024 * 1024;
    assert!(length <= u64::from(u32::MAX), "a region length is a u32");

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("region.bin");
    {
        let mut file = File::create(&path).unwrap();
        let chunk: Vec<u8> = (0..1u32 << 20)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
            .collect();
        for _ in 0..size_mib {
            file.write_all(&chunk).unwrap();
        }
        file.sync_all().unwrap();
    }
    // Warm the page cache once so both sides read cached pages.
    std::io::copy(&mut File::open(&path).unwrap(), &mut std::io::sink()).unwrap();

    let server_path = path.clone();
    let server = ServerThread::spawn(
        ServerConfig::new("127.0.0.1:0".parse().unwrap()),
        move || {
            Rc::new(SnapshotHandler {
                file: Rc::new(File::open(server_path).unwrap()),
                length: length as u32,
            })
        },
    )
    .unwrap();

    let mut plain = Vec::new();
    let mut served = Vec::new();
    for _ in 0..rounds {
        plain.push(mib_per_second(length, plain_sendfile(&path, length)));
        served.push(mib_per_second(length, through_server(&server, length)));
    }
    let (plain_median, served_median) = (median(plain.clone()), median(served.clone()));
    println!("region {size_mib} MiB, {rounds} rounds (MiB/s per round)");
    println!("plain sendfile : {plain:.0?}  median {plain_median:.0}");
    println!("through server : {served:.0?}  median {served_median:.0}");
    println!("ratio (median) : {:.2}", served_median / plain_median);
    server.stop(Duration::from_secs(5));
}
