//! KIP-630 on real processes: a three-voter quorum with a low snapshot threshold takes
//! snapshots of a `cleanup.policy=snapshot` topic and moves its log start; a follower whose
//! disk is wiped (re-formatted) rejoins through FetchSnapshot and then holds every committed
//! record. Topics survive snapshots of `__cluster_metadata-0`: a topic whose record lies below
//! every node's metadata log start comes back after a full restart, and a wiped node learns it
//! from the fetched snapshot. (Clients cannot write `__cluster_metadata`: the metadata log is
//! filled with topic records, by creating and deleting topics.)
//!
//! Free ports on 127.0.0.1, data in a temp folder, every child killed on drop; waits poll a
//! condition up to a deadline, never a fixed time.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use bytes::Bytes;
use ringlog_engine::batch::RecordBatchBuilder;
use ringlog_net::client::{Client, QuorumView};
use ringlog_net::protocol::{
    ErrorCode, Request, Response, create_topics_request, delete_topics_request, metadata_request,
    produce_request,
};

mod quorum;
use quorum::{
    RINGLOG, checkpoints, eventually, free_port, log_tails, read_partition_values, segment_bases,
    serial,
};

const CLUSTER_ID: &str = "MkU3OEVBNTcwNTJENDM2Qg";
/// The snapshotted topic the first tests produce to.
const TOPIC: &str = "kv";
const PARTITION_DIR: &str = "kv-0";
const METADATA_DIR: &str = "__cluster_metadata-0";

struct Quorum {
    dir: tempfile::TempDir,
    ports: Vec<u16>,
    children: Vec<Option<Child>>,
}

impl Quorum {
    fn start(extra: &str) -> Quorum {
        let dir = tempfile::tempdir().unwrap();
        let ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
        let voters = ports
            .iter()
            .enumerate()
            .map(|(i, port)| format!("{}@127.0.0.1:{port}", i + 1))
            .collect::<Vec<_>>()
            .join(",");
        let mut quorum = Quorum {
            dir,
            ports,
            children: vec![None, None, None],
        };
        for id in 1..=3 {
            let text = format!(
                "node.id={id}\ncontroller.quorum.voters={voters}\nlisteners=127.0.0.1:{}\n\
                 metadata.log.dir={}\ncontroller.quorum.election.timeout.ms=300\n\
                 controller.quorum.election.backoff.max.ms=200\ncontroller.quorum.fetch.timeout.ms=600\n\
                 controller.quorum.request.timeout.ms=500\ncontroller.quorum.fetch.max.wait.ms=100\n{extra}",
                quorum.ports[id - 1],
                quorum.data(id as i32).display()
            );
            std::fs::write(quorum.config(id as i32), text).unwrap();
            quorum.format(id as i32);
            quorum.start_node(id as i32);
        }
        quorum
    }

    fn config(&self, id: i32) -> PathBuf {
        self.dir.path().join(format!("node-{id}.properties"))
    }

    fn data(&self, id: i32) -> PathBuf {
        self.dir.path().join(format!("node-{id}"))
    }

    fn partition_dir(&self, id: i32) -> PathBuf {
        self.data(id).join(PARTITION_DIR)
    }

    fn metadata_dir(&self, id: i32) -> PathBuf {
        self.data(id).join(METADATA_DIR)
    }

    fn format(&self, id: i32) {
        let status = Command::new(RINGLOG)
            .args(["format", "--cluster-id", CLUSTER_ID, "--config"])
            .arg(self.config(id))
            .stdout(Stdio::null())
            .status()
            .unwrap();
        assert!(status.success(), "format node {id}");
    }

    fn start_node(&mut self, id: i32) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join(format!("node-{id}.log")))
            .unwrap();
        let child = Command::new(RINGLOG)
            .arg("serve")
            .arg("--config")
            .arg(self.config(id))
            .env("RUST_LOG", "info")
            .env("NO_COLOR", "1")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        self.children[id as usize - 1] = Some(child);
    }

    fn kill(&mut self, id: i32) {
        if let Some(mut child) = self.children[id as usize - 1].take() {
            child.kill().unwrap();
            child.wait().unwrap();
        }
    }

    fn address(&self, id: i32) -> String {
        format!("127.0.0.1:{}", self.ports[id as usize - 1])
    }

    /// DescribeQuorum of `topic`-0 at node `id`.
    fn describe(&self, id: i32, topic: &str) -> Option<QuorumView> {
        Client::connect(&self.address(id), Duration::from_millis(300))
            .ok()?
            .describe_quorum_of(topic, 0)
            .ok()
    }

    /// The leader of `__cluster_metadata-0` as the first running node reports it, once that
    /// leader describes the quorum.
    fn leader(&self, running: &[i32]) -> Option<i32> {
        self.leader_of("__cluster_metadata", running)
    }

    /// The leader of `topic`-0 as the first running node reports it, once that leader
    /// describes the partition.
    fn leader_of(&self, topic: &str, running: &[i32]) -> Option<i32> {
        let view = self.describe(*running.first()?, topic)?;
        let leader = view.partition.leader_id;
        if !(1..=3).contains(&leader) {
            return None;
        }
        let led = self.describe(leader, topic)?;
        (led.partition.error_code == 0).then_some(leader)
    }

    /// Produces batches `from..from + count` of 50 records each, acks=all, to `TOPIC`-0 at
    /// whichever node leads it (a batch refused by a node that stopped leading is sent again
    /// to the new leader).
    fn produce(&self, from: usize, count: usize) {
        for i in from..from + count {
            let mut builder = RecordBatchBuilder::new(0);
            for r in 0..50 {
                // Keys from a small set: the key-value state machine has overwrites to snapshot.
                let key = format!("key-{}", (i * 50 + r) % 97);
                let value = format!("value-{i}-{r}-padding-padding");
                builder.append(0, Some(key.as_bytes()), Some(value.as_bytes()), &[]);
            }
            let batch: Bytes = builder.build().into_bytes();
            eventually(
                Duration::from_secs(15),
                &format!("batch {i} acknowledged"),
                || {
                    let leader = self.leader_of(TOPIC, &self.running())?;
                    let mut client =
                        Client::connect(&self.address(leader), Duration::from_secs(2)).ok()?;
                    let answer = client.produce(TOPIC, 0, batch.clone(), -1, 10_000).ok()??;
                    (answer.error_code == 0).then_some(())
                },
            );
        }
    }

    fn running(&self) -> Vec<i32> {
        (1..=3)
            .filter(|&id| self.children[id as usize - 1].is_some())
            .collect()
    }

    fn dump_logs(&self) -> String {
        let logs: Vec<(i32, PathBuf)> = (1..=3)
            .map(|id| (id, self.dir.path().join(format!("node-{id}.log"))))
            .collect();
        log_tails(logs.iter().map(|(id, log)| (*id, log.as_path())), 20)
    }
}

impl Drop for Quorum {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("{}", self.dump_logs());
        }
        for child in self.children.iter_mut().flatten() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A snapshot every 400 committed records, 64 KiB segments, and replicas counted lagging after
/// 1 s: the log start moves within a test's few hundred records.
const SNAPSHOT_OFTEN: &str = "controller.snapshot.minimum.records=400\n\
     metadata.log.max.record.bytes.between.snapshots=1\n\
     metadata.log.segment.bytes=65536\nmax.replication.lag.ms=1000\n";

/// KIP-630: snapshots bound the log, and a replica that lost everything rejoins through
/// FetchSnapshot: its log then starts at the snapshot's end offset, and it catches up on
/// every committed record after it.
#[test]
fn a_wiped_follower_rejoins_through_fetch_snapshot() {
    let _serial = serial();
    let mut quorum = Quorum::start(SNAPSHOT_OFTEN);
    create_topic(&quorum, TOPIC, &[("cleanup.policy", "snapshot")]);
    quorum.produce(0, 60);
    // The leader may have changed meanwhile (short timeouts on a busy machine).
    let leader = eventually(Duration::from_secs(10), "a leader", || {
        quorum.leader_of(TOPIC, &[1, 2, 3])
    });
    eventually(Duration::from_secs(10), "a snapshot on the leader", || {
        (!checkpoints(&quorum.partition_dir(leader)).is_empty()).then_some(())
    });

    // Stop a follower, let the leader move on without it, then wipe its disk.
    let follower = (1..=3).find(|&id| id != leader).unwrap();
    quorum.kill(follower);
    quorum.produce(60, 120);
    let leader = eventually(Duration::from_secs(10), "a leader", || {
        quorum.leader_of(TOPIC, &quorum.running())
    });
    let leader_dir = quorum.partition_dir(leader);
    eventually(
        Duration::from_secs(15),
        "the leader's log start to pass its first segment",
        || {
            let bases = segment_bases(&leader_dir);
            (bases.first().is_some_and(|&b| b > 0)).then_some(())
        },
    );
    std::fs::remove_dir_all(quorum.data(follower)).unwrap();
    quorum.format(follower);
    quorum.start_node(follower);
    quorum.produce(180, 10);
    let leader = eventually(Duration::from_secs(10), "a leader", || {
        quorum.leader_of(TOPIC, &quorum.running())
    });

    // It rejoined through FetchSnapshot: a snapshot file, and a log starting at its end.
    let follower_dir = quorum.partition_dir(follower);
    let installed = eventually(
        Duration::from_secs(20),
        "a fetched snapshot on the wiped follower",
        || checkpoints(&follower_dir).first().copied(),
    );
    assert!(installed > 0);
    eventually(
        Duration::from_secs(10),
        "the follower's log to start at the snapshot's end offset",
        || {
            // The wiped follower never held a record below the fetched snapshot, so its first
            // segment starts at that snapshot's end: above 0, at or below the snapshots it
            // holds now (it may have taken its own since and deleted the fetched one).
            let first = *segment_bases(&follower_dir).first()?;
            (first > 0 && first <= installed).then_some(())
        },
    );
    // And it holds every committed record: its log end matches the leader's.
    eventually(
        Duration::from_secs(20),
        "the follower's log end to reach the leader's",
        || {
            let view = quorum.describe(leader, TOPIC)?;
            let voters = &view.partition.current_voters;
            let leader_end = voters
                .iter()
                .find(|v| v.replica_id == leader)?
                .log_end_offset;
            let follower_end = voters
                .iter()
                .find(|v| v.replica_id == follower)?
                .log_end_offset;
            (leader_end > installed as i64 && follower_end == leader_end).then_some(())
        },
    );
}

/// KIP-630 zero copy: the leader sends FetchSnapshot bytes as a region of the frozen snapshot
/// file (sendfile). Fetched in small chunks by our client, they decode to the file's exact
/// bytes, and the response's Size is the file's size.
#[test]
fn fetch_snapshot_chunks_sent_from_the_file_are_its_exact_bytes() {
    let _serial = serial();
    use ringlog_engine::snapshot::SnapshotFileState;
    use ringlog_engine::snapshot::naming::parse_file_name;
    use ringlog_net::protocol::{FetchSnapshotRequest, fetch_snapshot_request};

    let quorum = Quorum::start(
        "controller.snapshot.minimum.records=400\n\
         metadata.log.max.record.bytes.between.snapshots=1\n",
    );
    create_topic(&quorum, TOPIC, &[("cleanup.policy", "snapshot")]);
    quorum.produce(0, 20);
    let leader = eventually(Duration::from_secs(10), "a leader", || {
        quorum.leader_of(TOPIC, &[1, 2, 3])
    });
    let path = eventually(Duration::from_secs(10), "a snapshot on the leader", || {
        let end = *checkpoints(&quorum.partition_dir(leader)).last()?;
        std::fs::read_dir(quorum.partition_dir(leader).join("checkpoints"))
            .ok()?
            .filter_map(|e| Some(e.ok()?.path()))
            .find(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .and_then(parse_file_name)
                    .is_some_and(|f| {
                        f.snapshot_id.end_offset == end as i64
                            && matches!(f.state, SnapshotFileState::Frozen)
                    })
            })
    });
    let file_bytes = std::fs::read(&path).unwrap();
    let name = parse_file_name(path.file_name().unwrap().to_str().unwrap()).unwrap();
    let follower = (1..=3).find(|&id| id != leader).unwrap();
    // Odd-sized chunks so region boundaries fall inside batches.
    const CHUNK_BYTES: i32 = 1237;
    let mut fetched = Vec::new();
    let mut client = Client::connect(&quorum.address(leader), Duration::from_secs(2)).unwrap();
    // The frozen file shows in the folder a moment before the leader's core is told of it (at
    // its next pump); until then it answers SNAPSHOT_NOT_FOUND, as to a replica asking for a
    // snapshot it never announced. A real follower only asks for an announced one.
    // FetchSnapshot of the file from `position`, as the follower, in the leader's epoch.
    let fetch_from = |client: &mut Client, position: usize| {
        let epoch = quorum.describe(leader, TOPIC)?.partition.leader_epoch;
        let request = Request::FetchSnapshot(FetchSnapshotRequest {
            cluster_id: Some(CLUSTER_ID.to_string()),
            replica_id: follower,
            max_bytes: CHUNK_BYTES,
            topics: vec![fetch_snapshot_request::TopicSnapshot {
                name: TOPIC.into(),
                partitions: vec![fetch_snapshot_request::PartitionSnapshot {
                    partition: 0,
                    current_leader_epoch: epoch,
                    snapshot_id: fetch_snapshot_request::SnapshotId {
                        end_offset: name.snapshot_id.end_offset,
                        epoch: name.snapshot_id.epoch,
                    },
                    position: position as i64,
                    ..Default::default()
                }],
            }],
        });
        match client.request(&request, 0).ok()? {
            Response::FetchSnapshot(response) => Some(response),
            other => panic!("not a FetchSnapshot response: {other:?}"),
        }
    };
    eventually(
        Duration::from_secs(10),
        "the leader knowing its snapshot",
        || {
            let response = fetch_from(&mut client, 0)?;
            (response.topics[0].partitions[0].error_code != ErrorCode::SnapshotNotFound.code())
                .then_some(())
        },
    );
    loop {
        let response = fetch_from(&mut client, fetched.len()).expect("a FetchSnapshot answer");
        let part = &response.topics[0].partitions[0];
        assert_eq!(
            (response.error_code, part.error_code),
            (0, 0),
            "{response:?}"
        );
        assert_eq!(part.size, file_bytes.len() as i64);
        assert_eq!(part.position, fetched.len() as i64);
        let bytes = part.unaligned_records.as_bytes().unwrap();
        assert!(bytes.len() <= CHUNK_BYTES as usize);
        if bytes.is_empty() {
            break;
        }
        fetched.extend_from_slice(bytes);
    }
    assert_eq!(fetched.len(), file_bytes.len());
    assert!(fetched == file_bytes, "fetched bytes differ from the file");
}

// ---- topics survive snapshots ------------------------------------------------------------------

/// Creates `topic` (one partition, `configs` as key/value pairs) through CreateTopics at
/// whichever node is the controller.
fn create_topic(quorum: &Quorum, topic: &str, configs: &[(&str, &str)]) {
    eventually(Duration::from_secs(20), "the topic created", || {
        let leader = quorum.leader(&quorum.running())?;
        let mut client = Client::connect(&quorum.address(leader), Duration::from_secs(2)).ok()?;
        let request = Request::CreateTopics(create_topics_request::CreateTopicsRequest {
            topics: vec![create_topics_request::CreatableTopic {
                name: topic.into(),
                num_partitions: 1,
                replication_factor: 3,
                configs: configs
                    .iter()
                    .map(|(key, value)| create_topics_request::CreatableTopicConfig {
                        name: (*key).into(),
                        value: Some((*value).into()),
                    })
                    .collect(),
                ..Default::default()
            }],
            timeout_ms: 5000,
            validate_only: false,
        });
        let Ok(Response::CreateTopics(r)) = client.request(&request, 7) else {
            return None;
        };
        (r.topics[0].error_code == 0).then_some(())
    })
}

/// Fills `__cluster_metadata-0` with the node's own records until every node's metadata log
/// starts past its first segment (a snapshot covers it and it was deleted): rounds of one
/// CreateTopics of a few topics with long names (about 550 bytes of topic record each) and one
/// DeleteTopics of them (a tombstone each). A few partitions at a time: a hundred new Raft
/// groups at once on two cores made the metadata leader itself unstable. (Names of 200
/// characters, not Kafka's 249: a deleted partition's folder is renamed to
/// `<topic>-<n>.<topic id>-delete`, which is past the file system's 255 bytes for longer
/// names, and the node exits on that error.)
fn fill_metadata_log(quorum: &Quorum) {
    const TOPICS_PER_ROUND: usize = 5;
    for round in 0.. {
        let started_past_first_segment = (1..=3).all(|id| {
            segment_bases(&quorum.metadata_dir(id))
                .first()
                .is_some_and(|&base| base > 0)
        });
        if started_past_first_segment {
            return;
        }
        assert!(
            round < 200,
            "the metadata log never moved past its first segment"
        );
        let names: Vec<String> = (0..TOPICS_PER_ROUND)
            .map(|k| format!("filler-{round:03}-{k}-{}", "x".repeat(187)))
            .collect();
        assert!(names.iter().all(|n| n.len() == 200));
        let create = Request::CreateTopics(create_topics_request::CreateTopicsRequest {
            topics: names
                .iter()
                .map(|name| create_topics_request::CreatableTopic {
                    name: name.clone(),
                    num_partitions: 1,
                    replication_factor: 3,
                    ..Default::default()
                })
                .collect(),
            timeout_ms: 10_000,
            validate_only: false,
        });
        let delete = Request::DeleteTopics(delete_topics_request::DeleteTopicsRequest {
            topic_names: names,
            timeout_ms: 10_000,
            ..Default::default()
        });
        for (what, request, version) in [("created", &create, 7), ("deleted", &delete, 5)] {
            eventually(
                Duration::from_secs(30),
                &format!("filler topics of round {round} {what}"),
                || {
                    let leader = quorum.leader(&quorum.running())?;
                    let mut client =
                        Client::connect(&quorum.address(leader), Duration::from_secs(2)).ok()?;
                    let codes: Vec<i16> = match client.request(request, version).ok()? {
                        Response::CreateTopics(r) => {
                            r.topics.iter().map(|t| t.error_code).collect()
                        }
                        Response::DeleteTopics(r) => {
                            r.responses.iter().map(|t| t.error_code).collect()
                        }
                        _ => return None,
                    };
                    // A retry after a timed-out answer finds some done already
                    // (TOPIC_ALREADY_EXISTS, UNKNOWN_TOPIC_OR_PARTITION): none is left to do.
                    codes.iter().all(|c| [0, 3, 36].contains(c)).then_some(())
                },
            );
        }
    }
}

/// The leader of `topic`-0 as node `asked` names it in Metadata, once that leader is reachable.
fn topic_leader(quorum: &Quorum, asked: i32, topic: &str) -> Option<Client> {
    let mut client = Client::connect(&quorum.address(asked), Duration::from_millis(500)).ok()?;
    let request = Request::Metadata(metadata_request::MetadataRequest {
        topics: Some(vec![metadata_request::MetadataRequestTopic {
            name: Some(topic.into()),
            ..Default::default()
        }]),
        ..Default::default()
    });
    let Ok(Response::Metadata(m)) = client.request(&request, 12) else {
        return None;
    };
    let p = m.topics.first()?.partitions.first()?;
    if m.topics[0].error_code != 0 || p.error_code != 0 {
        return None;
    }
    let b = m.brokers.iter().find(|b| b.node_id == p.leader_id)?;
    Client::connect(
        &format!("{}:{}", b.host, b.port),
        Duration::from_millis(500),
    )
    .ok()
}

/// Produces one record `value` to `topic`-0 (acks=all) through its leader.
fn produce_to_topic(quorum: &Quorum, topic: &str, value: &str) {
    let mut builder = RecordBatchBuilder::new(0);
    builder.append(0, None, Some(value.as_bytes()), &[]);
    let records: Bytes = builder.build().into_bytes();
    eventually(
        Duration::from_secs(20),
        &format!("{value} produced"),
        || {
            let asked = *quorum.running().first()?;
            let mut leader = topic_leader(quorum, asked, topic)?;
            let request = Request::Produce(produce_request::ProduceRequest {
                acks: -1,
                timeout_ms: 5000,
                topic_data: vec![produce_request::TopicProduceData {
                    name: topic.into(),
                    partition_data: vec![produce_request::PartitionProduceData {
                        index: 0,
                        records: Some(records.clone()),
                    }],
                    ..Default::default()
                }],
                ..Default::default()
            });
            let Ok(Response::Produce(r)) = leader.request(&request, 9) else {
                return None;
            };
            (r.responses[0].partition_responses[0].error_code == 0).then_some(())
        },
    );
}

/// Every value of `topic`-0 up to its high-watermark, read through its leader.
fn consume_topic(quorum: &Quorum, topic: &str) -> Option<Vec<String>> {
    let asked = *quorum.running().first()?;
    let mut leader = topic_leader(quorum, asked, topic)?;
    let values = read_partition_values(&mut leader, topic).ok()?;
    values
        .into_iter()
        .map(|v| String::from_utf8(v).ok())
        .collect()
}

/// [`SNAPSHOT_OFTEN`] with a snapshot every 20 records: the metadata log grows by topic records
/// only, a few hundred bytes each.
const METADATA_SNAPSHOT_OFTEN: &str = "controller.snapshot.minimum.records=20\n\
     metadata.log.max.record.bytes.between.snapshots=1\n\
     metadata.log.segment.bytes=65536\nmax.replication.lag.ms=1000\n";

/// Topic records are keyed by topic name, so the metadata snapshot keeps the topic: once every
/// node's metadata log starts past the topic's record, a full restart brings the topic back
/// (from the snapshot), and a wiped node learns it through FetchSnapshot.
#[test]
fn topics_survive_snapshots_restarts_and_fetch_snapshot() {
    let _serial = serial();
    let mut quorum = Quorum::start(METADATA_SNAPSHOT_OFTEN);
    eventually(Duration::from_secs(10), "a leader", || {
        quorum.leader(&[1, 2, 3])
    });
    create_topic(&quorum, "orders", &[]);
    produce_to_topic(&quorum, "orders", "before-snapshot");
    fill_metadata_log(&quorum);
    for id in 1..=3 {
        let dir = quorum.metadata_dir(id);
        eventually(
            Duration::from_secs(20),
            &format!("node {id}'s metadata log start past the topic record"),
            || {
                let first = *segment_bases(&dir).first()?;
                (first > 0 && !checkpoints(&dir).is_empty()).then_some(())
            },
        );
    }

    // Every node restarts with the topic record only in its snapshot.
    for id in 1..=3 {
        quorum.kill(id);
    }
    for id in 1..=3 {
        quorum.start_node(id);
    }
    produce_to_topic(&quorum, "orders", "after-restart");
    let values = eventually(Duration::from_secs(20), "orders consumed", || {
        consume_topic(&quorum, "orders")
    });
    assert_eq!(values, ["before-snapshot", "after-restart"]);

    // A wiped node (not the metadata leader) learns the topic from the fetched snapshot.
    let leader = eventually(Duration::from_secs(10), "a leader", || {
        quorum.leader(&quorum.running())
    });
    let wiped = (1..=3).find(|&id| id != leader).unwrap();
    quorum.kill(wiped);
    std::fs::remove_dir_all(quorum.data(wiped)).unwrap();
    quorum.format(wiped);
    quorum.start_node(wiped);
    let wiped_dir = quorum.metadata_dir(wiped);
    eventually(
        Duration::from_secs(20),
        "a fetched snapshot on the wiped node",
        || checkpoints(&wiped_dir).first().copied(),
    );
    eventually(
        Duration::from_secs(20),
        "the wiped node to serve the topic's metadata",
        || topic_leader(&quorum, wiped, "orders"),
    );
    assert!(quorum.data(wiped).join("orders-0").is_dir());
    produce_to_topic(&quorum, "orders", "after-wipe");
    let values = eventually(Duration::from_secs(20), "orders consumed", || {
        consume_topic(&quorum, "orders")
    });
    assert_eq!(values, ["before-snapshot", "after-restart", "after-wipe"]);
}
