//! The Rust client library's group member (`net/src/clients/group.rs`, docs/clients.md) and
//! `ringlog consume --group` against a three-voter quorum of real `ringlog serve` processes:
//! the classic protocol's membership (FindCoordinator, JoinGroup with the range assignor run
//! in the leading member, SyncGroup, Heartbeat, LeaveGroup), commits carrying the leader epoch
//! (OffsetCommit v8, OffsetFetch v7), and KIP-320's validation of a committed position before
//! the first fetch from it.
//!
//! Long because each group story runs real members against real nodes end to end (joins,
//! rebalances, commits, failover, truncation); the shared quorum helpers are in tests/quorum.

use std::collections::{BTreeMap, BTreeSet};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ringlog_net::clients::TopicPartition;
use ringlog_net::clients::consumer::{
    Consumer, ConsumerConfig, ConsumerError, ConsumerRecord, OffsetReset,
};
use ringlog_net::clients::group::{CommittedOffset, GroupConsumer, GroupConsumerConfig};
use ringlog_net::clients::producer::{Producer, ProducerConfig};

mod quorum;
use quorum::{Quorum, RINGLOG, agreed_leader, eventually, serial};

/// Three voters with a small `__consumer_offsets` (three partitions, 1 MiB segments) and a
/// short initial rebalance delay.
fn groups_quorum() -> Quorum {
    groups_quorum_with("")
}

fn groups_quorum_with(extra: &str) -> Quorum {
    let mut quorum = Quorum::format_with(
        3,
        &format!(
            "offsets.topic.num.partitions=3\noffsets.topic.segment.bytes=1048576\n\
             group.initial.rebalance.delay.ms=500\n{extra}"
        ),
    );
    quorum.start_all();
    quorum.wait_for_leader(Duration::from_secs(30));
    quorum
}

fn consumer_config(reset: OffsetReset) -> ConsumerConfig {
    ConsumerConfig {
        auto_offset_reset: reset,
        fetch_max_wait_ms: 100,
        default_api_timeout_ms: 30_000,
        ..ConsumerConfig::default()
    }
}

fn group_config(group: &str) -> GroupConsumerConfig {
    GroupConsumerConfig {
        session_timeout_ms: 10_000,
        heartbeat_interval_ms: 300,
        max_poll_interval_ms: 30_000,
        ..GroupConsumerConfig::new(group)
    }
}

/// Produces `values` to `partition` of `topic` (acks=all) and returns their offsets.
fn produce(bootstrap: &str, topic: &str, partition: i32, values: &[String]) -> Vec<i64> {
    let mut producer = Producer::connect(
        bootstrap,
        ProducerConfig {
            acks: -1,
            linger_ms: 0,
            retries: 50,
            ..ProducerConfig::default()
        },
    );
    let tp = TopicPartition::new(topic, partition);
    for value in values {
        producer.send(&tp, None, Some(value.as_bytes())).unwrap();
    }
    producer.flush().unwrap();
    let acks = producer.take_acknowledged();
    assert_eq!(acks.len(), values.len());
    acks.into_iter().map(|a| a.offset).collect()
}

fn value_of(record: &ConsumerRecord) -> String {
    String::from_utf8(record.value.clone().unwrap().to_vec()).unwrap()
}

/// A member polling on its own thread until told to stop, then closing (commit + LeaveGroup).
struct Member {
    stop: Arc<AtomicBool>,
    assignment: Arc<Mutex<(Option<i32>, Vec<TopicPartition>)>>,
    member_id: Arc<Mutex<String>>,
    thread: Option<std::thread::JoinHandle<Result<(), String>>>,
}

type Seen = Arc<Mutex<Vec<(&'static str, ConsumerRecord)>>>;

impl Member {
    fn start(name: &'static str, bootstrap: &str, group: &str, topic: &str, seen: Seen) -> Member {
        Member::start_with(name, bootstrap, group_config(group), topic, seen)
    }

    fn start_with(
        name: &'static str,
        bootstrap: &str,
        config: GroupConsumerConfig,
        topic: &str,
        seen: Seen,
    ) -> Member {
        let stop = Arc::new(AtomicBool::new(false));
        let assignment = Arc::new(Mutex::new((None, Vec::new())));
        let member_id = Arc::new(Mutex::new(String::new()));
        let mut consumer =
            GroupConsumer::connect(bootstrap, consumer_config(OffsetReset::Earliest), config);
        consumer.subscribe([topic.to_string()]);
        let thread = {
            let stop = stop.clone();
            let assignment = assignment.clone();
            let member_id = member_id.clone();
            std::thread::spawn(move || -> Result<(), String> {
                while !stop.load(Ordering::SeqCst) {
                    let records = consumer
                        .poll(Duration::from_millis(200))
                        .map_err(|e| format!("{name}: {e}"))?;
                    *assignment.lock().unwrap() = (consumer.generation_id(), consumer.assignment());
                    *member_id.lock().unwrap() = consumer.member_id().to_string();
                    seen.lock()
                        .unwrap()
                        .extend(records.into_iter().map(|r| (name, r)));
                }
                consumer.close().map_err(|e| format!("{name} close: {e}"))
            })
        };
        Member {
            stop,
            assignment,
            member_id,
            thread: Some(thread),
        }
    }

    fn assignment(&mut self) -> (Option<i32>, Vec<TopicPartition>) {
        if self.thread.as_ref().is_some_and(|t| t.is_finished()) {
            let outcome = self.thread.take().unwrap().join();
            panic!("a member stopped on its own: {outcome:?}");
        }
        self.assignment.lock().unwrap().clone()
    }

    fn member_id(&self) -> String {
        self.member_id.lock().unwrap().clone()
    }

    fn close(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let thread = self.thread.take().expect("closed once");
        thread.join().unwrap().unwrap();
    }
}

impl Drop for Member {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

/// Two Rust members of one group share a four-partition topic two and two (the leading member
/// ran the range assignor); each reads only its partitions. One closes (commits, LeaveGroup):
/// the other is told to rejoin by its heartbeat, takes all four, starts on the other's
/// partitions at the offsets it committed, and every record is read exactly once overall.
#[test]
fn two_rust_members_split_four_partitions_and_one_takes_over() {
    let _serial = serial();
    let quorum = groups_quorum();
    let bootstrap = quorum.bootstrap();
    quorum.create_topic("split", 4, &[]);
    let seen: Seen = Arc::new(Mutex::new(Vec::new()));
    let mut a = Member::start("a", &bootstrap, "split-group", "split", seen.clone());
    let mut b = Member::start("b", &bootstrap, "split-group", "split", seen.clone());

    // KIP-320's range assignor in the leader: 2 + 2, one generation, disjoint.
    let (owned_a, owned_b) = eventually(Duration::from_secs(60), "a 2 + 2 split", || {
        let (generation_a, owned_a) = a.assignment();
        let (generation_b, owned_b) = b.assignment();
        (generation_a.is_some()
            && generation_a == generation_b
            && owned_a.len() == 2
            && owned_b.len() == 2)
            .then_some((owned_a, owned_b))
    });
    let all: BTreeSet<TopicPartition> = owned_a.iter().chain(&owned_b).cloned().collect();
    assert_eq!(all.len(), 4, "{owned_a:?} {owned_b:?}");

    for partition in 0..4 {
        let values: Vec<String> = (0..25).map(|i| format!("one-{partition}-{i}")).collect();
        produce(&bootstrap, "split", partition, &values);
    }
    eventually(
        Duration::from_secs(60),
        "the first 100 records read",
        || (seen.lock().unwrap().len() >= 100).then_some(()),
    );
    for (name, record) in seen.lock().unwrap().iter() {
        let owner = if owned_a.contains(&record.partition) {
            "a"
        } else {
            "b"
        };
        assert_eq!(
            *name,
            owner,
            "{} read by the member that does not own it",
            value_of(record)
        );
    }

    b.close();
    eventually(Duration::from_secs(60), "a takes every partition", || {
        (a.assignment().1.len() == 4).then_some(())
    });
    for partition in 0..4 {
        let values: Vec<String> = (0..25).map(|i| format!("two-{partition}-{i}")).collect();
        produce(&bootstrap, "split", partition, &values);
    }
    eventually(Duration::from_secs(60), "all 200 records read", || {
        (seen.lock().unwrap().len() >= 200).then_some(())
    });
    a.close();

    let seen = seen.lock().unwrap();
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for (_, record) in seen.iter() {
        *counts.entry(value_of(record)).or_default() += 1;
    }
    let twice: Vec<_> = counts.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "read more than once: {twice:?}");
    assert_eq!(counts.len(), 200);
    assert!(
        seen.iter()
            .filter(|(_, r)| value_of(r).starts_with("two-"))
            .all(|(name, _)| *name == "a"),
        "after b left, a reads every partition"
    );
}

/// Runs `ringlog consume --group` until it has printed `max` records; returns its lines
/// (partition, offset, leader epoch, value).
fn consume_in_group(
    bootstrap: &str,
    topic: &str,
    group: &str,
    max: usize,
) -> Vec<(i32, i64, i32, String)> {
    let mut child = Command::new(RINGLOG)
        .args([
            "consume",
            "--bootstrap",
            bootstrap,
            "--topic",
            topic,
            "--group",
            group,
        ])
        .args([
            "--reset",
            "earliest",
            "--print-offsets",
            "--max-records",
            &max.to_string(),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let status = eventually(
        Duration::from_secs(90),
        "ringlog consume --group to end",
        || child.try_wait().unwrap(),
    );
    let output = child.wait_with_output().unwrap();
    let stdout = String::from_utf8(output.stdout).unwrap();
    assert!(
        status.success(),
        "ringlog consume --group: {stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
        .lines()
        .map(|line| {
            let fields: Vec<&str> = line.splitn(4, '\t').collect();
            assert_eq!(fields.len(), 4, "{line}");
            (
                fields[0].parse().unwrap(),
                fields[1].parse().unwrap(),
                fields[2].parse().unwrap(),
                fields[3].to_string(),
            )
        })
        .collect()
}

/// `ringlog consume --group` prints 70 of 120 records of a two-partition topic and exits,
/// having committed the offset after each printed record with that record's leader epoch:
/// OffsetFetch answers exactly that (KIP-320's committed leader epoch). A restarted member of
/// the group prints exactly the other 50.
#[test]
fn a_restarted_member_resumes_exactly_after_its_commit_with_the_leader_epoch() {
    let _serial = serial();
    let quorum = groups_quorum();
    let bootstrap = quorum.bootstrap();
    quorum.create_topic("resume", 2, &[]);
    let mut produced = BTreeSet::new();
    for partition in 0..2 {
        let values: Vec<String> = (0..60).map(|i| format!("{partition}-{i}")).collect();
        produce(&bootstrap, "resume", partition, &values);
        produced.extend(values);
    }

    let first = consume_in_group(&bootstrap, "resume", "resume-group", 70);
    assert_eq!(first.len(), 70);
    let mut expected = BTreeMap::new();
    for (partition, offset, epoch, _) in &first {
        expected.insert(
            TopicPartition::new("resume", *partition),
            CommittedOffset {
                offset: offset + 1,
                leader_epoch: *epoch,
            },
        );
    }
    // A group client outside the group reads the commits (OffsetFetch v7).
    let mut reader = GroupConsumer::connect(
        &bootstrap,
        consumer_config(OffsetReset::None),
        group_config("resume-group"),
    );
    let partitions = [
        TopicPartition::new("resume", 0),
        TopicPartition::new("resume", 1),
    ];
    let committed = reader.committed(&partitions).unwrap();
    assert_eq!(committed, expected);
    assert!(
        committed.values().all(|c| c.leader_epoch >= 0),
        "{committed:?}"
    );

    let second = consume_in_group(&bootstrap, "resume", "resume-group", 50);
    let mut read: Vec<String> = first.iter().chain(&second).map(|r| r.3.clone()).collect();
    read.sort();
    let mut all: Vec<String> = produced.into_iter().collect();
    all.sort();
    assert_eq!(read, all, "every record once across the two members");
}

/// KIP-320, "Consumer Handling": a committed (offset, leader epoch) is validated with
/// OffsetForLeaderEpoch before anything is fetched from it. The partition's log has records in
/// two leader epochs (its leader was killed between them); a position committed in the first
/// epoch beyond where that epoch ends in the log (what a consumer of a leader whose log later
/// diverged would have committed) makes the next member of the group report LogTruncation with
/// the divergence point, instead of reading from the committed offset; with
/// `auto.offset.reset=earliest` it resumes at the divergence point.
#[test]
fn a_committed_position_beyond_its_epoch_is_reported_as_log_truncation() {
    let _serial = serial();
    let mut quorum = groups_quorum();
    let bootstrap = quorum.bootstrap();
    quorum.create_topic("diverge", 1, &[]);
    let first_round: Vec<String> = (0..10).map(|i| format!("first-{i}")).collect();
    produce(&bootstrap, "diverge", 0, &first_round);
    let (leader, first_epoch) = quorum.wait_for_leader_of("diverge", Duration::from_secs(30));
    quorum.kill(leader);
    let survivors: Vec<String> = (1..=3)
        .filter(|id| *id != leader)
        .map(|id| quorum.address(id))
        .collect();
    let (_, second_epoch) =
        eventually(Duration::from_secs(30), "a new leader of diverge-0", || {
            agreed_leader(&survivors, "diverge", 0).filter(|(id, _)| *id != leader)
        });
    assert!(second_epoch > first_epoch);
    let second_round: Vec<String> = (0..10).map(|i| format!("second-{i}")).collect();
    produce(&bootstrap, "diverge", 0, &second_round);
    quorum.start_all();

    // Where each epoch's records are.
    let tp = TopicPartition::new("diverge", 0);
    let mut plain = Consumer::connect(&bootstrap, consumer_config(OffsetReset::None));
    plain.assign([tp.clone()]);
    plain.seek_to_beginning(&tp).unwrap();
    let mut records = Vec::new();
    while records.len() < 20 {
        records.extend(plain.poll(Duration::from_secs(5)).unwrap());
    }
    let last_of_first = records[9].offset;
    let first_of_second = records[10].offset;
    let old_epoch = records[9].leader_epoch;
    assert!(records[10].leader_epoch > old_epoch, "{records:?}");

    // Committed outside group management (generation -1: the group has no member).
    let diverged = CommittedOffset {
        offset: first_of_second + 5,
        leader_epoch: old_epoch,
    };
    let mut committer = GroupConsumer::connect(
        &bootstrap,
        consumer_config(OffsetReset::None),
        group_config("diverge-group"),
    );
    committer.commit_offsets(&[(tp.clone(), diverged)]).unwrap();
    assert_eq!(
        committer.committed(std::slice::from_ref(&tp)).unwrap()[&tp],
        diverged
    );

    let mut member = GroupConsumer::connect(
        &bootstrap,
        consumer_config(OffsetReset::None),
        GroupConsumerConfig {
            enable_auto_commit: false,
            ..group_config("diverge-group")
        },
    );
    member.subscribe(["diverge".to_string()]);
    let error = eventually(Duration::from_secs(60), "a poll to fail", || {
        match member.poll(Duration::from_millis(500)) {
            Ok(records) => {
                assert!(
                    records.is_empty(),
                    "read from a diverged position: {records:?}"
                );
                None
            }
            Err(error) => Some(error),
        }
    });
    let ConsumerError::LogTruncation {
        partition,
        divergence_offset,
    } = error
    else {
        panic!("expected LogTruncation, got {error}");
    };
    assert_eq!(partition, tp);
    assert!(
        divergence_offset > last_of_first && divergence_offset <= first_of_second,
        "the first epoch ends between its last record {last_of_first} and the second's first \
         {first_of_second}: {divergence_offset}"
    );
    member.close().unwrap();

    // With a reset policy the member moves to the divergence point and reads on from there.
    let mut resetting = GroupConsumer::connect(
        &bootstrap,
        consumer_config(OffsetReset::Earliest),
        GroupConsumerConfig {
            enable_auto_commit: false,
            ..group_config("diverge-group")
        },
    );
    resetting.subscribe(["diverge".to_string()]);
    let read = eventually(Duration::from_secs(60), "records after the reset", || {
        let records = resetting.poll(Duration::from_millis(500)).unwrap();
        (!records.is_empty()).then_some(records)
    });
    assert_eq!(read[0].offset, first_of_second, "{read:?}");
    assert_eq!(value_of(&read[0]), "second-0");
    resetting.close().unwrap();
}

/// The node FindCoordinator (v3) names for `group` (other than `not`), asked of every node
/// until one answers.
fn find_coordinator(quorum: &Quorum, group: &str, not: Option<i32>) -> i32 {
    use ringlog_net::client::Client;
    use ringlog_net::protocol::{Request, Response, find_coordinator_request};
    eventually(
        Duration::from_secs(30),
        "a coordinator for the group",
        || {
            quorum.nodes.iter().find_map(|node| {
                let mut client =
                    Client::connect(&quorum.address(node.id), Duration::from_millis(500)).ok()?;
                let request =
                    Request::FindCoordinator(find_coordinator_request::FindCoordinatorRequest {
                        key: group.to_string(),
                        ..Default::default()
                    });
                match client.request(&request, 3) {
                    Ok(Response::FindCoordinator(r))
                        if r.error_code == 0 && Some(r.node_id) != not =>
                    {
                        Some(r.node_id)
                    }
                    _ => None,
                }
            })
        },
    )
}

/// Kafka's background heartbeat (KIP-62): a member whose record handler blocks for three
/// session timeouts (but less than `max.poll.interval.ms`) between two polls keeps its place:
/// its heartbeat thread keeps the session, so all along the coordinator lists it in a Stable
/// group, and afterwards it is in the same generation with the same member id and partitions
/// and reads on. Without the thread the coordinator drops it after `session.timeout.ms` and
/// it joins again as a new member.
#[test]
fn a_member_whose_handler_blocks_past_the_session_timeout_keeps_its_assignment() {
    let _serial = serial();
    let quorum = groups_quorum();
    let bootstrap = quorum.bootstrap();
    let topic = "slow-handler";
    let group = "slow-handler";
    quorum.create_topic(topic, 2, &[]);
    produce(&bootstrap, topic, 0, &["a".to_string(), "b".to_string()]);
    let config = GroupConsumerConfig {
        session_timeout_ms: 6_000,
        heartbeat_interval_ms: 500,
        max_poll_interval_ms: 60_000,
        ..GroupConsumerConfig::new(group)
    };
    let mut member =
        GroupConsumer::connect(&bootstrap, consumer_config(OffsetReset::Earliest), config);
    member.subscribe([topic.to_string()]);
    eventually(Duration::from_secs(30), "the first records", || {
        let records = member.poll(Duration::from_millis(200)).unwrap();
        (!records.is_empty()).then_some(())
    });
    let generation_id = member.generation_id().expect("in a generation");
    let member_id = member.member_id().to_string();
    let mut assignment = member.assignment();
    assignment.sort();
    assert_eq!(assignment.len(), 2, "{assignment:?}");

    // The handler: blocks for 18 s (three session timeouts) without polling; this wait is the
    // slowness under test, not a wait for a condition. All along the coordinator keeps the
    // member.
    let coordinator = find_coordinator(&quorum, group, None);
    let blocked_until = std::time::Instant::now() + Duration::from_secs(18);
    while std::time::Instant::now() < blocked_until {
        if let Some((state, _, members)) = try_describe_group(&quorum, coordinator, group) {
            assert_eq!(state, "Stable", "the group while the handler blocks");
            assert_eq!(
                members.keys().collect::<Vec<_>>(),
                [&member_id],
                "the members while the handler blocks"
            );
        }
        std::thread::sleep(Duration::from_millis(500));
    }

    produce(&bootstrap, topic, 0, &["c".to_string()]);
    let next = eventually(
        Duration::from_secs(30),
        "the record after the block",
        || {
            let records = member.poll(Duration::from_millis(200)).unwrap();
            records.into_iter().find(|r| value_of(r) == "c")
        },
    );
    assert_eq!(next.partition, TopicPartition::new(topic, 0));
    assert_eq!(member.generation_id(), Some(generation_id));
    assert_eq!(member.member_id(), member_id);
    let mut after = member.assignment();
    after.sort();
    assert_eq!(after, assignment);
    member.close().unwrap();
}

/// Offset expiry (`offsets.retention.minutes=1`, checked every 500 ms), KIP-211's rule, through
/// the log. Two groups commit the same offsets at the same moment outside group management:
/// "simple" never has a member and loses its offsets a minute after its commit; "live" has a
/// member heartbeating all that time and keeps them. When the member leaves, the clock of
/// "live" starts: its offsets are still there seconds later (counting from the commit would
/// have expired them at once) and go a minute after the leave. The expiry is tombstones in
/// `__consumer_offsets`: after kill -9 of the coordinator of "live", the new one (another
/// replica, which applied the commit too) has no offset of the group either.
#[test]
fn offsets_of_a_group_without_members_expire_a_retention_after_it_emptied() {
    let _serial = serial();
    let mut quorum =
        groups_quorum_with("offsets.retention.minutes=1\noffsets.retention.check.interval.ms=500");
    let bootstrap = quorum.bootstrap();
    quorum.create_topic("expiry", 1, &[]);
    let values: Vec<String> = (0..5).map(|i| format!("r-{i}")).collect();
    produce(&bootstrap, "expiry", 0, &values);
    let tp = TopicPartition::new("expiry", 0);
    // No epoch: the member seeks to 3 without a validation (that is another test's story).
    let committed = CommittedOffset {
        offset: 3,
        leader_epoch: -1,
    };
    let client = |group: &str| {
        GroupConsumer::connect(
            &bootstrap,
            consumer_config(OffsetReset::Earliest),
            group_config(group),
        )
    };
    let (mut simple, mut live) = (client("simple"), client("live"));
    simple.commit_offsets(&[(tp.clone(), committed)]).unwrap();
    live.commit_offsets(&[(tp.clone(), committed)]).unwrap();
    let committed_at = std::time::Instant::now();
    let has_offsets = |reader: &mut GroupConsumer| {
        !reader
            .committed(std::slice::from_ref(&tp))
            .unwrap()
            .is_empty()
    };
    assert!(has_offsets(&mut simple) && has_offsets(&mut live));

    let seen: Seen = Arc::new(Mutex::new(Vec::new()));
    let mut member = Member::start_with(
        "live",
        &bootstrap,
        GroupConsumerConfig {
            // The member's own commits would refresh the commit timestamp.
            enable_auto_commit: false,
            ..group_config("live")
        },
        "expiry",
        seen.clone(),
    );
    eventually(Duration::from_secs(30), "the member in the group", || {
        member.assignment().0.map(|_| ())
    });

    eventually(
        Duration::from_secs(120),
        "the offsets of simple to expire",
        || (!has_offsets(&mut simple)).then_some(()),
    );
    assert!(committed_at.elapsed() >= Duration::from_secs(60));
    // The member is still in: its group keeps the offsets committed as long ago.
    assert!(
        has_offsets(&mut live),
        "a group with a member keeps its offsets"
    );
    let read = seen.lock().unwrap().clone();
    assert!(
        !read.is_empty() && read.iter().all(|(_, r)| r.offset >= 3),
        "the member starts at the committed offset: {read:?}"
    );

    member.close();
    let left_at = std::time::Instant::now();
    // Several expiry rounds (every 500 ms) run while the offsets are checked for 5 s: the
    // clock of "live" started at the leave, not at the commit over a minute ago.
    while left_at.elapsed() < Duration::from_secs(5) {
        assert!(
            has_offsets(&mut live),
            "expired counting from the commit, not the leave"
        );
    }
    eventually(
        Duration::from_secs(120),
        "the offsets of live to expire",
        || (!has_offsets(&mut live)).then_some(()),
    );
    assert!(left_at.elapsed() >= Duration::from_secs(60));

    // Every replica applied the same tombstones: the next coordinator, another replica of the
    // partition that applied the commit too, has no offset of the group either.
    let coordinator = find_coordinator(&quorum, "live", None);
    quorum.kill(coordinator);
    find_coordinator(&quorum, "live", Some(coordinator));
    assert!(!has_offsets(&mut client("live")));
    quorum.start_all();
}

type Described = (String, String, BTreeMap<String, Vec<u8>>);

/// DescribeGroups (v5) of `group` at node `node`, asked until it answers without error (a new
/// coordinator may still be loading): (state, protocol, member id → assignment).
fn describe_group(quorum: &Quorum, node: i32, group: &str) -> Described {
    eventually(
        Duration::from_secs(30),
        "DescribeGroups without error",
        || try_describe_group(quorum, node, group),
    )
}

fn try_describe_group(quorum: &Quorum, node: i32, group: &str) -> Option<Described> {
    use ringlog_net::client::Client;
    use ringlog_net::protocol::{Request, Response, describe_groups_request};
    let mut client = Client::connect(&quorum.address(node), Duration::from_secs(2)).ok()?;
    let request = Request::DescribeGroups(describe_groups_request::DescribeGroupsRequest {
        groups: vec![group.to_string()],
        include_authorized_operations: false,
    });
    let Ok(Response::DescribeGroups(described)) = client.request(&request, 5) else {
        return None;
    };
    let group = described.groups.first()?;
    if group.error_code != 0 {
        return None;
    }
    let members = group
        .members
        .iter()
        .map(|m| (m.member_id.clone(), m.member_assignment.to_vec()))
        .collect();
    Some((
        group.group_state.clone(),
        group.protocol_data.clone(),
        members,
    ))
}

/// Group metadata records (Kafka's GroupMetadata in `__consumer_offsets`): two Rust members
/// of a Stable group commit every 500 ms; the group's coordinator is killed with kill -9
/// between two commits. The new coordinator (the partition's new leader) restored the group
/// from its record: DescribeGroups answers the same state, protocol, members and assignments,
/// and the members go on heartbeating and committing in the same generation with the same
/// member ids (no rejoin, no rebalance); every record, those produced after the kill too, is
/// read exactly once and the final commits are the end of each partition.
#[test]
fn a_stable_group_keeps_its_generation_across_a_kill_9_of_its_coordinator() {
    let _serial = serial();
    let mut quorum = groups_quorum();
    let bootstrap = quorum.bootstrap();
    quorum.create_topic("failover", 4, &[]);
    let config = GroupConsumerConfig {
        auto_commit_interval_ms: 500,
        ..group_config("failover-group")
    };
    let seen: Seen = Arc::new(Mutex::new(Vec::new()));
    let mut a = Member::start_with("a", &bootstrap, config.clone(), "failover", seen.clone());
    let mut b = Member::start_with("b", &bootstrap, config, "failover", seen.clone());
    let generation = eventually(Duration::from_secs(60), "a 2 + 2 split", || {
        let (generation_a, owned_a) = a.assignment();
        let (generation_b, owned_b) = b.assignment();
        (generation_a.is_some()
            && generation_a == generation_b
            && owned_a.len() == 2
            && owned_b.len() == 2)
            .then_some(generation_a)
    });
    let ids = (a.member_id(), b.member_id());
    for partition in 0..4 {
        let values: Vec<String> = (0..10).map(|i| format!("before-{partition}-{i}")).collect();
        produce(&bootstrap, "failover", partition, &values);
    }
    eventually(Duration::from_secs(60), "the first 40 records read", || {
        (seen.lock().unwrap().len() >= 40).then_some(())
    });
    let coordinator = find_coordinator(&quorum, "failover-group", None);
    let before = describe_group(&quorum, coordinator, "failover-group");
    assert_eq!(before.0, "Stable");
    assert_eq!(before.1, "range");
    let expected_members: BTreeSet<String> = [ids.0.clone(), ids.1.clone()].into();
    assert_eq!(
        before.2.keys().cloned().collect::<BTreeSet<_>>(),
        expected_members
    );

    quorum.kill(coordinator);
    let successor = find_coordinator(&quorum, "failover-group", Some(coordinator));
    assert_eq!(describe_group(&quorum, successor, "failover-group"), before);

    for partition in 0..4 {
        let values: Vec<String> = (0..10).map(|i| format!("after-{partition}-{i}")).collect();
        produce(&bootstrap, "failover", partition, &values);
    }
    eventually(Duration::from_secs(60), "all 80 records read", || {
        (seen.lock().unwrap().len() >= 80).then_some(())
    });
    // Several heartbeats and commits went to the new coordinator meanwhile (every 300 and
    // 500 ms); the members are the same ones in the same generation.
    let committed_after_kill = eventually(
        Duration::from_secs(30),
        "commits at the new coordinator",
        || {
            let mut reader = GroupConsumer::connect(
                &bootstrap,
                consumer_config(OffsetReset::None),
                group_config("failover-group"),
            );
            let partitions: Vec<TopicPartition> =
                (0..4).map(|p| TopicPartition::new("failover", p)).collect();
            let committed = reader.committed(&partitions).ok()?;
            let seen = seen.lock().unwrap();
            let all_read = partitions.iter().all(|tp| {
                let last = seen
                    .iter()
                    .filter(|(_, r)| r.partition == *tp)
                    .map(|(_, r)| r.offset)
                    .max();
                committed.get(tp).map(|c| c.offset) == last.map(|o| o + 1)
            });
            all_read.then_some(committed)
        },
    );
    assert_eq!(committed_after_kill.len(), 4);
    assert_eq!(a.assignment().0, generation, "a rejoined");
    assert_eq!(b.assignment().0, generation, "b rejoined");
    assert_eq!((a.member_id(), b.member_id()), ids, "a member got a new id");
    assert_eq!(describe_group(&quorum, successor, "failover-group"), before);
    a.close();
    b.close();

    let seen = seen.lock().unwrap();
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for (_, record) in seen.iter() {
        *counts.entry(value_of(record)).or_default() += 1;
    }
    assert_eq!(counts.len(), 80);
    assert!(
        counts.values().all(|n| *n == 1),
        "read more than once: {counts:?}"
    );
    quorum.start_all();
}

/// Sends `signal` (STOP, CONT) to node `id`'s process.
fn signal(quorum: &Quorum, id: i32, signal: &str) {
    let status = Command::new("kill")
        .args([&format!("-{signal}"), &quorum.pid(id).to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

/// Kafka's rule for group metadata: the SyncGroup answers that hand out a generation's
/// assignment wait until that generation's record is committed, so a member never works in a
/// generation a later coordinator could not know. With the coordinator's two followers stopped
/// (SIGSTOP) the record cannot commit: the leader's SyncGroup is not answered NONE but fails
/// (COORDINATOR_NOT_AVAILABLE at `offsets.commit.timeout.ms`, or NOT_COORDINATOR once the
/// leader resigns for lack of a majority). With every node running, the answer comes, the
/// coordinator is killed at once, and the next one accepts the member's heartbeat.
#[test]
fn sync_group_is_answered_once_the_generation_is_committed() {
    use ringlog_net::client::Client;
    use ringlog_net::protocol::{
        ErrorCode, Request, Response, heartbeat_request, join_group_request, sync_group_request,
    };
    let _serial = serial();
    let mut quorum = groups_quorum();
    quorum.create_topic("held", 1, &[]);
    let join = |client: &mut Client, group: &str, member_id: &str| {
        let request = Request::JoinGroup(join_group_request::JoinGroupRequest {
            group_id: group.to_string(),
            session_timeout_ms: 10_000,
            rebalance_timeout_ms: 10_000,
            member_id: member_id.to_string(),
            protocol_type: "consumer".to_string(),
            protocols: vec![join_group_request::JoinGroupRequestProtocol {
                name: "range".to_string(),
                metadata: ringlog_net::clients::group::encode_subscription(&["held".to_string()]),
            }],
            ..Default::default()
        });
        let Response::JoinGroup(answer) = client.request(&request, 7).unwrap() else {
            panic!("not a JoinGroup answer");
        };
        answer
    };
    // The group's coordinator (a new one may still be loading: asked until one joins), the
    // JoinGroup answer of the one member (its leader), and the connection.
    let join_as_leader = |quorum: &Quorum, group: &str| {
        eventually(Duration::from_secs(60), "a coordinator that joins", || {
            let coordinator = find_coordinator(quorum, group, None);
            let mut client =
                Client::connect(&quorum.address(coordinator), Duration::from_secs(30)).ok()?;
            let first = join(&mut client, group, "");
            if first.error_code != ErrorCode::MemberIdRequired.code() {
                return None;
            }
            let joined = join(&mut client, group, &first.member_id);
            (joined.error_code == 0 && joined.leader == joined.member_id).then_some((
                coordinator,
                joined,
                client,
            ))
        })
    };
    let sync = |client: &mut Client, group: &str, generation_id: i32, member_id: &str| {
        let request = Request::SyncGroup(sync_group_request::SyncGroupRequest {
            group_id: group.to_string(),
            generation_id,
            member_id: member_id.to_string(),
            assignments: vec![sync_group_request::SyncGroupRequestAssignment {
                member_id: member_id.to_string(),
                assignment: ringlog_net::clients::group::encode_assignment(&[TopicPartition::new(
                    "held", 0,
                )]),
            }],
            ..Default::default()
        });
        let Response::SyncGroup(answer) = client.request(&request, 5).unwrap() else {
            panic!("not a SyncGroup answer");
        };
        answer.error_code
    };

    // The record cannot commit: no assignment is handed out.
    let (coordinator, joined, mut client) = join_as_leader(&quorum, "held-group");
    let others: Vec<i32> = (1..=3).filter(|id| *id != coordinator).collect();
    for id in &others {
        signal(&quorum, *id, "STOP");
    }
    let error = sync(
        &mut client,
        "held-group",
        joined.generation_id,
        &joined.member_id,
    );
    for id in &others {
        signal(&quorum, *id, "CONT");
    }
    assert!(
        error == ErrorCode::CoordinatorNotAvailable.code()
            || error == ErrorCode::NotCoordinator.code(),
        "SyncGroup answered {error} while its generation could not be committed"
    );

    // Every node runs: the answer comes once the record is committed, so the next
    // coordinator knows the generation even if the first dies at once.
    let (coordinator, joined, mut client) = join_as_leader(&quorum, "other-group");
    assert_eq!(
        sync(
            &mut client,
            "other-group",
            joined.generation_id,
            &joined.member_id
        ),
        0
    );
    quorum.kill(coordinator);
    let successor = find_coordinator(&quorum, "other-group", Some(coordinator));
    let heartbeat = Request::Heartbeat(heartbeat_request::HeartbeatRequest {
        group_id: "other-group".to_string(),
        generation_id: joined.generation_id,
        member_id: joined.member_id.clone(),
        group_instance_id: None,
    });
    let error = eventually(Duration::from_secs(30), "a heartbeat answer", || {
        let mut client =
            Client::connect(&quorum.address(successor), Duration::from_secs(2)).ok()?;
        let Ok(Response::Heartbeat(answer)) = client.request(&heartbeat, 4) else {
            return None;
        };
        (answer.error_code != ErrorCode::CoordinatorLoadInProgress.code()
            && answer.error_code != ErrorCode::NotCoordinator.code())
        .then_some(answer.error_code)
    });
    assert_eq!(
        error, 0,
        "the new coordinator refused the generation's heartbeat"
    );
    quorum.start_all();
    assert!(quorum.exited().is_empty(), "{}", quorum.dump_logs());
}
