//! Bounded resources at the socket boundary of a real `ringlog serve` (docs/server.md, "Request
//! memory"): clients that announce huge frames, or send parts of them, cost the node what they
//! sent up to `queued.max.request.bytes`, never what they announced, and the node keeps
//! serving everyone else.

mod quorum;

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use ringlog_net::client::Client;
use ringlog_net::protocol::{
    ApiVersionsRequest, Request, RequestHeader, Response, create_topics_request, encode_request,
};

use quorum::{
    Quorum, batch_of, eventually, produce_to, read_partition_values, scrape_metrics, serial,
};

const ATTACKERS: usize = 500;
/// `socket.request.max.bytes`' default: the largest frame a client may announce.
const ANNOUNCED_BYTES: i32 = 100 * 1024 * 1024;
const GIB: u64 = 1024 * 1024 * 1024;
/// Generous: the node itself needs a few tens of MiB; the announced frames add up to 50 GB.
const RSS_MAX_BYTES: u64 = GIB;

/// A field of /proc/<pid>/status in bytes (`VmRSS`: resident; `VmSize`: address space).
fn process_bytes(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("node status");
    let line = status
        .lines()
        .find(|line| line.starts_with(&format!("{field}:")))
        .unwrap_or_else(|| panic!("{field} in /proc/{pid}/status"));
    let kib: u64 = line
        .split_whitespace()
        .nth(1)
        .and_then(|value| value.parse().ok())
        .unwrap_or_else(|| panic!("a number in {line:?}"));
    kib * 1024
}

fn assert_rss_bounded(pid: u32, when: &str) -> u64 {
    let rss_bytes = process_bytes(pid, "VmRSS");
    assert!(
        rss_bytes < RSS_MAX_BYTES,
        "{when}: the node's RSS is {} MiB",
        rss_bytes >> 20
    );
    rss_bytes
}

fn api_versions_frame(correlation_id: i32) -> Vec<u8> {
    let header = RequestHeader {
        api_key: 18,
        api_version: 3,
        correlation_id,
        client_id: Some("limits-test".into()),
    };
    let request = Request::ApiVersions(ApiVersionsRequest {
        client_software_name: "limits-test".into(),
        client_software_version: "1".into(),
    });
    encode_request(&header, &request).expect("encode").to_vec()
}

/// Reads one response frame and returns its correlation id.
fn read_correlation_id(stream: &mut TcpStream) -> i32 {
    let mut size = [0u8; 4];
    stream.read_exact(&mut size).expect("a response size");
    let mut body = vec![0u8; i32::from_be_bytes(size) as usize];
    stream.read_exact(&mut body).expect("a response body");
    i32::from_be_bytes([body[0], body[1], body[2], body[3]])
}

/// A client that is not attacking gets everything done: DescribeQuorum, and a record produced
/// with acks=all to a new topic and read back.
fn a_client_is_served(quorum: &Quorum, value: &str) {
    let address = quorum.address(1);
    let view = Client::connect(&address, Duration::from_secs(5))
        .and_then(|mut client| client.describe_quorum())
        .expect("DescribeQuorum answered");
    assert_eq!(view.partition.leader_id, 1);
    let mut client = Client::connect(&address, Duration::from_secs(5)).expect("connect");
    let create = Request::CreateTopics(create_topics_request::CreateTopicsRequest {
        topics: vec![create_topics_request::CreatableTopic {
            name: "limits".into(),
            num_partitions: 1,
            replication_factor: -1,
            ..Default::default()
        }],
        timeout_ms: 5000,
        validate_only: false,
    });
    let Ok(Response::CreateTopics(created)) = client.request(&create, 7) else {
        panic!("CreateTopics answered")
    };
    // 0: created; 36: TOPIC_ALREADY_EXISTS (an earlier call of this function).
    let error_code = created.topics[0].error_code;
    assert!(matches!(error_code, 0 | 36), "CreateTopics: {error_code}");
    // Until the new partition has elected its leader the produce is refused.
    eventually(Duration::from_secs(20), "a produce to `limits`", || {
        let (error_code, _) = produce_to(&mut client, "limits", 0, batch_of(value));
        (error_code == 0).then_some(())
    });
    let values = read_partition_values(&mut client, "limits").expect("read back");
    assert!(
        values.iter().any(|stored| stored == value.as_bytes()),
        "{value} is in `limits`"
    );
}

/// Issue 17: the frame reader used to reserve a frame's whole announced size when its size
/// prefix arrived. 500 connections each announce 100 MiB and send ten bytes of it: the node
/// reserves nothing for them (its address space, which the old reader grew to 50 GB, stays
/// small, and so does its RSS), and a normal client is served throughout.
#[test]
fn five_hundred_announced_100_mib_frames_reserve_nothing() {
    let _serial = serial();
    let quorum = Quorum::start(1);
    quorum.wait_for_leader(Duration::from_secs(20));
    let pid = quorum.pid(1);
    let vm_size_before = process_bytes(pid, "VmSize");

    let mut attackers = Vec::new();
    for index in 0..ATTACKERS {
        let mut stream = TcpStream::connect(quorum.address(1)).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        // A complete ApiVersions, then the size prefix of a 100 MiB frame and ten of its bytes.
        let mut bytes = api_versions_frame(index as i32);
        bytes.extend_from_slice(&ANNOUNCED_BYTES.to_be_bytes());
        bytes.extend_from_slice(&[0u8; 10]);
        stream.write_all(&bytes).expect("write");
        attackers.push(stream);
    }
    // The node reads a connection's bytes in order on one thread and parses the next size
    // prefix before it next waits: once a connection's ApiVersions is answered, the node has
    // seen the 100 MiB announced behind it.
    for (index, stream) in attackers.iter_mut().enumerate() {
        assert_eq!(read_correlation_id(stream), index as i32);
    }

    let rss_bytes = assert_rss_bounded(pid, "500 frames of 100 MiB announced");
    let vm_size_bytes = process_bytes(pid, "VmSize");
    // Room for the read buffers (64 KiB each) and allocator slack, nowhere near 500 x 100 MiB.
    assert!(
        vm_size_bytes < vm_size_before + 4 * GIB,
        "the node's address space grew from {} MiB to {} MiB",
        vm_size_before >> 20,
        vm_size_bytes >> 20
    );
    eprintln!(
        "500 announced frames: RSS {} MiB, address space {} MiB (before: {} MiB)",
        rss_bytes >> 20,
        vm_size_bytes >> 20,
        vm_size_before >> 20
    );
    a_client_is_served(&quorum, "served beside 500 announced frames");
    assert_rss_bounded(pid, "after serving a client");
    drop(attackers);
}

/// `queued.max.request.bytes` (100 MiB by default): 500 connections each announce 100 MiB and
/// push up to 4 MiB of it as fast as the node takes it (2 GiB in all, which the old reader
/// read into memory). The node reads a connection's 64 KiB read buffer, then charges every
/// growth to the budget; the frames it cannot take pause their connections (TCP pushes back),
/// so its RSS stays small, and a normal client is served meanwhile.
#[test]
fn half_sent_frames_are_held_to_the_request_budget() {
    const PUSHED_BYTES: usize = 4 * 1024 * 1024;
    let _serial = serial();
    let quorum = Quorum::start(1);
    quorum.wait_for_leader(Duration::from_secs(20));
    let pid = quorum.pid(1);
    let metrics_port = quorum.node(1).metrics_port;

    let mut prefix = vec![0u8; PUSHED_BYTES];
    prefix[..4].copy_from_slice(&ANNOUNCED_BYTES.to_be_bytes());
    let prefix = Arc::new(prefix);
    let streams: Vec<TcpStream> = (0..ATTACKERS)
        .map(|_| {
            let stream = TcpStream::connect(quorum.address(1)).expect("connect");
            stream.set_nonblocking(true).unwrap();
            stream
        })
        .collect();
    let stop = Arc::new(AtomicBool::new(false));
    let pusher = {
        let (prefix, stop) = (prefix.clone(), stop.clone());
        std::thread::spawn(move || push_until_stopped(streams, &prefix, &stop))
    };

    // Every probe checks the RSS, so a node that reads everything fails here, not later.
    let (waiting, used_bytes) = eventually(
        Duration::from_secs(60),
        "almost every connection waiting for request memory",
        || {
            assert_rss_bounded(pid, "while 500 connections push");
            let samples = scrape_metrics(metrics_port)?;
            let waiting = *samples.get("ringlog_server_frames_waiting_for_memory")?;
            let used_bytes = *samples.get("kafka_network_socketserver_memorypoolused")?;
            (waiting >= (ATTACKERS - 10) as f64).then_some((waiting, used_bytes))
        },
    );
    assert!(
        used_bytes <= 100.0 * 1024.0 * 1024.0,
        "{used_bytes} bytes charged"
    );
    a_client_is_served(&quorum, "served beside 500 half-sent frames");
    let rss_bytes = assert_rss_bounded(pid, "after serving a client");
    eprintln!(
        "500 half-sent frames: {waiting} waiting for memory, {} MiB charged, RSS {} MiB",
        (used_bytes as u64) >> 20,
        rss_bytes >> 20
    );
    stop.store(true, Ordering::Relaxed);
    let pushed_bytes = pusher.join().expect("pusher");
    assert!(
        pushed_bytes < ATTACKERS * PUSHED_BYTES,
        "the node pushed back"
    );
}

/// Writes `prefix` to every stream without blocking, round after round, until each stream has
/// taken all of it or `stop` is set; returns the bytes written in all.
fn push_until_stopped(mut streams: Vec<TcpStream>, prefix: &[u8], stop: &AtomicBool) -> usize {
    let mut written = vec![0usize; streams.len()];
    while !stop.load(Ordering::Relaxed) {
        let mut progress = false;
        for (stream, done) in streams.iter_mut().zip(written.iter_mut()) {
            if *done == prefix.len() {
                continue;
            }
            match stream.write(&prefix[*done..]) {
                Ok(count) => {
                    *done += count;
                    progress |= count > 0;
                }
                Err(error) if error.kind() == ErrorKind::WouldBlock => {}
                Err(error) => panic!("write: {error}"),
            }
        }
        if !progress {
            // Every socket is full: the pause between two rounds, not a wait for a condition.
            std::thread::park_timeout(Duration::from_millis(2));
        }
    }
    written.iter().sum()
}
