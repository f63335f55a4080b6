//! Records in a reply reach the client byte for byte, whether they come from a file region
//! (sendfile, or read through the ring when the page cache lacks it), an in-memory region, or
//! in-memory records inside the response.

#[path = "../../tests/disk_errors/eiofs.rs"]
mod eiofs;
mod server_support;

use std::fs::File;
use std::io::Write;
use std::path::PathBuf;
use std::rc::Rc;

use bytes::Bytes;
use ringlog_net::protocol::fetch_snapshot_response::{PartitionSnapshot, TopicSnapshot};
use ringlog_net::protocol::{
    ApiKey, FetchSnapshotRequest, FetchSnapshotResponse, Records, Request, RequestHeader, Response,
};
use ringlog_net::server::{
    ConnectionInfo, FileRegion, LocalBoxFuture, RecordsSource, Reply, RequestHandler, ServerConfig,
    ServerThread,
};
use server_support::*;

const FILE_SIZE_BYTES: usize = 6 * 1024 * 1024 + 123;
const REGION_POSITION: u64 = 1000;
const REGION_LENGTH: u32 = 5 * 1024 * 1024 + 7;
const VERSION: i16 = 1;

fn file_contents() -> Vec<u8> {
    (0..FILE_SIZE_BYTES as u64)
        .map(|i| (i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 56) as u8)
        .collect()
}

fn memory_records() -> Bytes {
    Bytes::from((0..70_000u32).map(|i| (i % 251) as u8).collect::<Vec<u8>>())
}

/// Answers FetchSnapshot according to the correlation id: 1 = a file region and a memory
/// region; 2 = records inside the response; 3 = a region that runs past the end of the file;
/// 4 = a region whose length differs from what the response promises.
struct RegionHandler {
    file: Rc<File>,
}

fn partition(index: i32, records: Records) -> PartitionSnapshot {
    PartitionSnapshot {
        index,
        size: FILE_SIZE_BYTES as i64,
        position: REGION_POSITION as i64,
        unaligned_records: records,
        ..PartitionSnapshot::default()
    }
}

fn response(partitions: Vec<PartitionSnapshot>) -> Response {
    Response::FetchSnapshot(FetchSnapshotResponse {
        topics: vec![TopicSnapshot {
            name: "__cluster_metadata".into(),
            partitions,
        }],
        ..FetchSnapshotResponse::default()
    })
}

impl RequestHandler for RegionHandler {
    fn handle(
        &self,
        _connection: ConnectionInfo,
        header: RequestHeader,
        _request: Request,
    ) -> LocalBoxFuture<'static, Reply> {
        let file_region = |position: u64, length: u32| {
            RecordsSource::File(FileRegion {
                file: self.file.clone(),
                position,
                length,
            })
        };
        let external = |token: u64, size_bytes: u32| Records::External { token, size_bytes };
        let memory = memory_records();
        let reply = match header.correlation_id {
            1 => Reply::WithRecords {
                response: response(vec![
                    partition(0, external(0, REGION_LENGTH)),
                    partition(1, external(1, memory.len() as u32)),
                    partition(2, external(2, 0)),
                ]),
                regions: vec![
                    file_region(REGION_POSITION, REGION_LENGTH),
                    RecordsSource::Memory(memory),
                    file_region(0, 0),
                ],
            },
            2 => Reply::Response(response(vec![partition(0, Records::Bytes(memory))])),
            3 => Reply::WithRecords {
                response: response(vec![partition(0, external(0, 4096))]),
                regions: vec![file_region(FILE_SIZE_BYTES as u64 - 100, 4096)],
            },
            _ => Reply::WithRecords {
                response: response(vec![partition(0, external(0, 10))]),
                regions: vec![file_region(0, 11)],
            },
        };
        Box::pin(async move { reply })
    }
}

fn temp_file() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = write_file_contents(dir.path());
    (dir, path)
}

fn write_file_contents(folder: &std::path::Path) -> PathBuf {
    let path = folder.join("00000000000000000000.checkpoint");
    File::create(&path)
        .unwrap()
        .write_all(&file_contents())
        .unwrap();
    path
}

fn start(path: PathBuf) -> ServerThread {
    ServerThread::spawn(
        ServerConfig::new("127.0.0.1:0".parse().unwrap()),
        move || {
            Rc::new(RegionHandler {
                file: Rc::new(File::open(path).unwrap()),
            })
        },
    )
    .unwrap()
}

fn records_of(response: &Response) -> Vec<Bytes> {
    let Response::FetchSnapshot(response) = response else {
        panic!("not a FetchSnapshot response")
    };
    response.topics[0]
        .partitions
        .iter()
        .map(|partition| partition.unaligned_records.as_bytes().unwrap().clone())
        .collect()
}

#[test]
fn file_and_memory_regions_arrive_byte_for_byte() {
    let (_dir, path) = temp_file();
    let server = start(path);
    let mut stream = connect(server.local_addr());
    let request = Request::FetchSnapshot(FetchSnapshotRequest::default());
    stream
        .write_all(&request_frame(1, VERSION, &request))
        .unwrap();
    stream
        .write_all(&request_frame(2, VERSION, &request))
        .unwrap();

    let (correlation_id, first) = read_response(&mut stream, ApiKey::FetchSnapshot, VERSION);
    assert_eq!(correlation_id, 1);
    let contents = file_contents();
    let start = REGION_POSITION as usize;
    let records = records_of(&first);
    assert_eq!(records.len(), 3);
    assert!(
        records[0][..] == contents[start..start + REGION_LENGTH as usize],
        "file region differs"
    );
    assert_eq!(records[1], memory_records());
    assert!(records[2].is_empty());

    let (correlation_id, second) = read_response(&mut stream, ApiKey::FetchSnapshot, VERSION);
    assert_eq!(correlation_id, 2);
    assert_eq!(records_of(&second), vec![memory_records()]);
}

/// A region the file cannot fill, or one whose length differs from the response's promise,
/// cannot make a valid frame: the connection closes and the server keeps serving.
#[test]
fn a_region_that_cannot_be_sent_closes_only_its_connection() {
    let (_dir, path) = temp_file();
    let server = start(path);
    let request = Request::FetchSnapshot(FetchSnapshotRequest::default());

    let mut stream = connect(server.local_addr());
    stream
        .write_all(&request_frame(3, VERSION, &request))
        .unwrap();
    // The header and the bytes the file had were sent; then the connection ends mid-frame.
    let mut received = Vec::new();
    let _ = std::io::Read::read_to_end(&mut stream, &mut received);
    let size = i32::from_be_bytes(received[..4].try_into().unwrap()) as usize;
    assert!(
        received.len() < 4 + size,
        "a short region must not complete the frame"
    );

    let mut stream = connect(server.local_addr());
    stream
        .write_all(&request_frame(4, VERSION, &request))
        .unwrap();
    expect_closed(&mut stream);

    api_versions_round_trip(server.local_addr());
}

/// A file region whose pages the page cache does not hold is not sent with `sendfile`, which
/// would wait for the disk on the server's only thread: while the disk holds the region's
/// reads (eiofs, a FUSE filesystem, with its hold file), the server answers another connection;
/// once the disk answers, the region arrives byte for byte. Runs as root with /dev/fuse, gcc,
/// pkg-config and libfuse3-dev (scripts/test-all.sh installs them).
#[test]
fn a_region_the_page_cache_lacks_does_not_hold_the_thread() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir_all(data.join("slow")).unwrap();
    write_file_contents(&data.join("slow"));
    // Written before the mount, so the mount's page cache holds none of it.
    let disk = eiofs::FaultyDisk::mount_over(
        &data,
        "slow",
        std::path::Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../tests/disk_errors/eiofs.c"
        )),
        std::path::Path::new(env!("CARGO_TARGET_TMPDIR")),
    );
    disk.hold_reads();
    let server = start(data.join("slow/00000000000000000000.checkpoint"));
    let mut stream = connect(server.local_addr());
    let request = Request::FetchSnapshot(FetchSnapshotRequest::default());
    stream
        .write_all(&request_frame(1, VERSION, &request))
        .unwrap();
    let deadline = std::time::Instant::now() + DEADLINE;
    while disk.held_reads().is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "the server never read the region"
        );
        // The pause between two looks at eiofs's log, not a wait for the read itself.
        std::thread::park_timeout(std::time::Duration::from_millis(20));
    }

    // The region's read is held; the thread is not. (Released before failing: the server's
    // thread, were it held, would keep the test from ending.)
    let address = server.local_addr();
    let answered = std::panic::catch_unwind(|| api_versions_round_trip(address));
    disk.release_reads();
    assert!(
        answered.is_ok(),
        "another connection waited for the disk's held read"
    );
    let (correlation_id, first) = read_response(&mut stream, ApiKey::FetchSnapshot, VERSION);
    assert_eq!(correlation_id, 1);
    let contents = file_contents();
    let start = REGION_POSITION as usize;
    let records = records_of(&first);
    assert!(
        records[0][..] == contents[start..start + REGION_LENGTH as usize],
        "file region differs"
    );
    assert_eq!(records[1], memory_records());
}
