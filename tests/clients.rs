//! Unmodified Kafka clients against a three-voter quorum of real `ringlog serve` processes:
//! confluent-kafka (librdkafka), kafka-python and kcat, driven by the Python scripts in
//! tests/clients/ (scripts/test-all.sh installs them). Each script exits non-zero with a
//! message naming what differed; the test shows its output and the nodes' logs.
//!
//! One cluster at a time (`quorum::serial`), short Raft timeouts (election 300 ms, fetch 600 ms).

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use bytes::Bytes;
use ringlog_engine::batch::RecordBatchBuilder;
use ringlog_net::client::Client;
use ringlog_net::protocol::{
    Request, Response, create_topics_request, init_producer_id_request, metadata_request,
};

mod quorum;
use quorum::{RINGLOG, free_port, log_tails, read_partition_values, run_client_script, serial};

struct NodeProcess {
    id: i32,
    port: u16,
    log: PathBuf,
    child: Option<Child>,
}

struct Cluster {
    _dir: tempfile::TempDir,
    nodes: Vec<NodeProcess>,
}

impl Cluster {
    /// Three voters, formatted and started; `extra` holds more properties lines.
    fn start(extra: &str) -> Cluster {
        let dir = tempfile::tempdir().unwrap();
        let ids: Vec<(i32, u16)> = (1..=3).map(|id| (id, free_port())).collect();
        let voters = ids
            .iter()
            .map(|(id, port)| format!("{id}@127.0.0.1:{port}"))
            .collect::<Vec<_>>()
            .join(",");
        let mut nodes = Vec::new();
        for (id, port) in ids {
            let config = dir.path().join(format!("node-{id}.properties"));
            let data = dir.path().join(format!("node-{id}"));
            std::fs::write(
                &config,
                format!(
                    "node.id={id}\ncontroller.quorum.voters={voters}\nlisteners=127.0.0.1:{port}\n\
                     metadata.log.dir={}\nmetadata.log.segment.bytes=1048576\n\
                     controller.quorum.election.timeout.ms=300\n\
                     controller.quorum.election.backoff.max.ms=200\n\
                     controller.quorum.fetch.timeout.ms=600\n\
                     controller.quorum.request.timeout.ms=500\n\
                     controller.quorum.fetch.max.wait.ms=100\n\
                     offsets.topic.num.partitions=3\noffsets.topic.segment.bytes=1048576\n{extra}",
                    data.display()
                ),
            )
            .unwrap();
            let status = Command::new(RINGLOG)
                .args([
                    "format",
                    "--cluster-id",
                    "MkU3OEVBNTcwNTJENDM2Qg",
                    "--config",
                ])
                .arg(&config)
                .stdout(Stdio::null())
                .status()
                .unwrap();
            assert!(status.success(), "format node {id}");
            let log_path = dir.path().join(format!("node-{id}.log"));
            let log = std::fs::File::create(&log_path).unwrap();
            let child = Command::new(RINGLOG)
                .arg("serve")
                .arg("--config")
                .arg(&config)
                .env("RUST_LOG", "info")
                .env("NO_COLOR", "1")
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()
                .unwrap();
            nodes.push(NodeProcess {
                id,
                port,
                log: log_path,
                child: Some(child),
            });
        }
        Cluster { _dir: dir, nodes }
    }

    fn bootstrap(&self) -> String {
        self.nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// kill -9: no resignation, no flush.
    fn kill(&mut self, id: i32) {
        let node = self.nodes.iter_mut().find(|n| n.id == id).expect("known");
        if let Some(mut child) = node.child.take() {
            child.kill().unwrap();
            child.wait().unwrap();
        }
    }

    fn dump_logs(&self) -> String {
        log_tails(self.nodes.iter().map(|n| (n.id, n.log.as_path())), 20)
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("{}", self.dump_logs());
        }
        for node in &mut self.nodes {
            if let Some(mut child) = node.child.take() {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
}

/// Runs a client script against `cluster` (see `quorum::run_client_script`).
fn run_script(
    cluster: &mut Cluster,
    script: &str,
    topic: &str,
    timeout: Duration,
    on_line: impl FnMut(&mut Cluster, &str) -> Option<String>,
) {
    let bootstrap = cluster.bootstrap();
    run_client_script(cluster, &bootstrap, script, topic, timeout, on_line);
}

/// CreateTopics through kafka-python's admin client; confluent-kafka and kafka-python each
/// produce (acks=all, idempotent and not) and consume back by assign+seek from the start and
/// the middle, byte for byte with offsets and leader epochs; kcat -L and kcat -C agree.
#[test]
fn kafka_clients_create_produce_and_consume_on_a_three_voter_quorum() {
    let _serial = serial();
    let mut cluster = Cluster::start("");
    run_script(
        &mut cluster,
        "roundtrip.py",
        "roundtrip",
        Duration::from_secs(180),
        |_, _| None,
    );
}

/// The partition leader killed mid-stream (kill -9): the idempotent producer and the consumer
/// carry on to the new leader; every acknowledged record is read exactly once, in order.
#[test]
fn kafka_clients_carry_on_when_the_leader_is_killed() {
    let _serial = serial();
    let mut cluster = Cluster::start("");
    let mut killed = None;
    run_script(
        &mut cluster,
        "failover.py",
        "failover",
        Duration::from_secs(240),
        |cluster, line| {
            let id: i32 = line.strip_prefix("KILL ")?.trim().parse().ok()?;
            cluster.kill(id);
            killed = Some(id);
            Some("killed\n".into())
        },
    );
    assert!(killed.is_some(), "the script never asked for the kill");
}

// ---- bad input through a client socket ---------------------------------------------------------

fn batch(values: &[&[u8]]) -> Vec<u8> {
    let mut builder = RecordBatchBuilder::new(0);
    for v in values {
        builder.append(0, None, Some(v), &[]);
    }
    builder.build().into_bytes().to_vec()
}

fn produce_to(client: &mut Client, topic: &str, records: Vec<u8>) -> i16 {
    produce_at(client, topic, records).0
}

/// (error code, base offset) of a Produce (acks=all) of `records` to `topic`-0.
fn produce_at(client: &mut Client, topic: &str, records: Vec<u8>) -> (i16, i64) {
    quorum::produce_to(client, topic, 0, Bytes::from(records))
}

/// Creates `topic` through CreateTopics at whichever node is the controller; returns a client
/// connected to the leader of its partition 0.
fn create_topic_and_connect_to_leader(cluster: &Cluster, topic: &str) -> Client {
    create_topic(cluster, topic);
    leader_client(cluster, topic, None).0
}

fn create_topic(cluster: &Cluster, topic: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        assert!(Instant::now() < deadline, "topic {topic} never created");
        for address in cluster.bootstrap().split(',') {
            let Ok(mut client) = Client::connect(address, Duration::from_millis(500)) else {
                continue;
            };
            let request = Request::CreateTopics(create_topics_request::CreateTopicsRequest {
                topics: vec![create_topics_request::CreatableTopic {
                    name: topic.into(),
                    num_partitions: 1,
                    replication_factor: 3,
                    ..Default::default()
                }],
                timeout_ms: 5000,
                validate_only: false,
            });
            if let Ok(Response::CreateTopics(r)) = client.request(&request, 7)
                && r.topics[0].error_code == 0
            {
                return;
            }
        }
        // The pause between two probes of a condition, not a wait for the condition itself.
        std::thread::park_timeout(Duration::from_millis(50));
    }
}

/// A client of the leader of `topic`-0 (not `not`) as Metadata names it, and its node id.
fn leader_client(cluster: &Cluster, topic: &str, not: Option<i32>) -> (Client, i32) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        assert!(
            Instant::now() < deadline,
            "topic {topic} never got a leader"
        );
        for address in cluster.bootstrap().split(',') {
            let Ok(mut client) = Client::connect(address, Duration::from_millis(500)) else {
                continue;
            };
            let request = Request::Metadata(metadata_request::MetadataRequest {
                topics: Some(vec![metadata_request::MetadataRequestTopic {
                    name: Some(topic.into()),
                    ..Default::default()
                }]),
                ..Default::default()
            });
            if let Ok(Response::Metadata(m)) = client.request(&request, 12)
                && let Some(p) = m.topics.first().and_then(|t| t.partitions.first())
                && p.error_code == 0
                && Some(p.leader_id) != not
                && let Some(b) = m.brokers.iter().find(|b| b.node_id == p.leader_id)
                && let Ok(leader) = Client::connect(
                    &format!("{}:{}", b.host, b.port),
                    Duration::from_millis(500),
                )
            {
                return (leader, p.leader_id);
            }
        }
        // The pause between two probes of a condition, not a wait for the condition itself.
        std::thread::park_timeout(Duration::from_millis(50));
    }
}

/// KIP-98 through a socket and across a failover: a retried batch is answered with the offset
/// it got the first time, a gap is OUT_OF_ORDER_SEQUENCE_NUMBER, an older producer epoch is
/// INVALID_PRODUCER_EPOCH; after kill -9 of the leader, the new leader (its producer state
/// rebuilt from its log) answers a retry of the last batch with the same offset.
#[test]
fn idempotent_produce_detects_duplicates_also_after_a_leader_change() {
    const OUT_OF_ORDER_SEQUENCE_NUMBER: i16 = 45;
    const INVALID_PRODUCER_EPOCH: i16 = 47;
    let _serial = serial();
    let mut cluster = Cluster::start("");
    create_topic(&cluster, "idem");
    let (mut client, leader) = leader_client(&cluster, "idem", None);
    let init = |client: &mut Client, producer_id: i64, producer_epoch: i16| {
        let request = Request::InitProducerId(init_producer_id_request::InitProducerIdRequest {
            transactional_id: None,
            transaction_timeout_ms: -1,
            producer_id,
            producer_epoch,
            ..Default::default()
        });
        // COORDINATOR_LOAD_IN_PROGRESS while the node gets its first block of ids from the
        // controller (net/src/node/producer_ids.rs): retried, as clients do.
        quorum::eventually(Duration::from_secs(10), "an InitProducerId answer", || {
            let Response::InitProducerId(r) = client.request(&request, 4).unwrap() else {
                panic!("not an InitProducerId answer")
            };
            if r.error_code == 14 {
                return None;
            }
            assert_eq!(r.error_code, 0);
            Some((r.producer_id, r.producer_epoch))
        })
    };
    let (pid, epoch) = init(&mut client, -1, -1);
    assert!(pid >= 0);
    let idem = |epoch: i16, seq: i32, values: &[&[u8]]| {
        let mut builder = RecordBatchBuilder::new(0).with_producer(pid, epoch, seq);
        // Now, as a client stamps them: a producer whose newest batch is older than
        // producer.id.expiration.ms (a day) is forgotten, as in Kafka.
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64;
        for v in values {
            builder.append(now_ms, None, Some(v), &[]);
        }
        builder.build().into_bytes().to_vec()
    };

    let (code, first) = produce_at(&mut client, "idem", idem(epoch, 0, &[b"a", b"b"]));
    assert_eq!(code, 0);
    let (code, again) = produce_at(&mut client, "idem", idem(epoch, 0, &[b"a", b"b"]));
    assert_eq!(
        (code, again),
        (0, first),
        "a retry is answered with its first offset"
    );
    let (code, _) = produce_at(&mut client, "idem", idem(epoch, 5, &[b"gap"]));
    assert_eq!(code, OUT_OF_ORDER_SEQUENCE_NUMBER);
    let (code, next) = produce_at(&mut client, "idem", idem(epoch, 2, &[b"c"]));
    assert_eq!((code, next), (0, first + 2));

    // KIP-360: the same id with the next epoch; the old epoch is fenced.
    let (same, bumped) = init(&mut client, pid, epoch);
    assert_eq!((same, bumped), (pid, epoch + 1));
    let (code, last) = produce_at(&mut client, "idem", idem(bumped, 0, &[b"d"]));
    assert_eq!(code, 0);
    let (code, _) = produce_at(&mut client, "idem", idem(epoch, 3, &[b"old"]));
    assert_eq!(code, INVALID_PRODUCER_EPOCH);

    cluster.kill(leader);
    let (mut client, new_leader) = leader_client(&cluster, "idem", Some(leader));
    let deadline = Instant::now() + Duration::from_secs(20);
    let retried = loop {
        // The new leader may still be settling (NOT_LEADER_OR_FOLLOWER): try until it answers.
        let answer = produce_at(&mut client, "idem", idem(bumped, 0, &[b"d"]));
        if answer.0 == 0 || Instant::now() > deadline {
            break answer;
        }
        std::thread::park_timeout(Duration::from_millis(50));
    };
    assert_eq!(
        retried,
        (0, last),
        "new leader {new_leader} rebuilt the producer state and answered the retry as a duplicate"
    );
    let (code, after) = produce_at(&mut client, "idem", idem(bumped, 1, &[b"e"]));
    assert_eq!(code, 0);
    assert!(after > last);

    // The new leader kept the producer state as a follower, from the partition's start: it
    // never read its log for it on the loop (that read, at the first idempotent Produce, held
    // new leaders' loops for seconds under load). Only reads that found no producer (an empty
    // new partition, the metadata partition) appear in its log.
    let log = cluster
        .nodes
        .iter()
        .find(|n| n.id == new_leader)
        .map(|n| std::fs::read_to_string(&n.log).unwrap_or_default())
        .unwrap_or_default();
    let reads: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("producer state read from the log") && !l.contains("producers=0"))
        .collect();
    assert!(
        reads.is_empty(),
        "new leader {new_leader} read producer state from its log: {reads:?}"
    );
}

/// A Produce with a corrupt batch is refused with Kafka's error codes and stores nothing:
/// bad CRC → CORRUPT_MESSAGE, wrong magic → CORRUPT_MESSAGE or INVALID_RECORD, offsets that do
/// not add up (lastOffsetDelta ≠ record count - 1, CRC recomputed so only the offsets are
/// wrong) → INVALID_RECORD or CORRUPT_MESSAGE, over message.max.bytes → MESSAGE_TOO_LARGE.
#[test]
fn corrupt_produce_batches_are_refused_and_nothing_is_stored() {
    const CORRUPT_MESSAGE: i16 = 2;
    const MESSAGE_TOO_LARGE: i16 = 10;
    const INVALID_RECORD: i16 = 87;
    let _serial = serial();
    let cluster = Cluster::start("message.max.bytes=2000\n");
    let mut client = create_topic_and_connect_to_leader(&cluster, "bad-input");

    let mut crc = batch(&[b"crc"]);
    let last = crc.len() - 1;
    crc[last] ^= 0xff;
    assert_eq!(produce_to(&mut client, "bad-input", crc), CORRUPT_MESSAGE);

    let mut magic = batch(&[b"magic"]);
    magic[16] = 1;
    let code = produce_to(&mut client, "bad-input", magic);
    assert!(
        code == CORRUPT_MESSAGE || code == INVALID_RECORD,
        "magic: {code}"
    );

    // Two records, lastOffsetDelta says 5.
    let mut offsets = batch(&[b"one", b"two"]);
    offsets[23..27].copy_from_slice(&5i32.to_be_bytes());
    // CRC32C over attributes..end (byte 21 on), so only the offsets are wrong.
    let crc = crc32c::crc32c(&offsets[21..]);
    offsets[17..21].copy_from_slice(&crc.to_be_bytes());
    let code = produce_to(&mut client, "bad-input", offsets);
    assert!(
        code == CORRUPT_MESSAGE || code == INVALID_RECORD,
        "offsets: {code}"
    );

    let big = vec![b'y'; 3000];
    assert_eq!(
        produce_to(&mut client, "bad-input", batch(&[&big])),
        MESSAGE_TOO_LARGE
    );

    // One good record goes in; reading the partition back finds it alone.
    assert_eq!(produce_to(&mut client, "bad-input", batch(&[b"good"])), 0);
    // Read the partition back from offset 0 to its high-watermark, fetch after fetch.
    let values = read_partition_values(&mut client, "bad-input").unwrap();
    assert_eq!(
        values,
        vec![b"good".to_vec()],
        "refused batches stored nothing"
    );
}
