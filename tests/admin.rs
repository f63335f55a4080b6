//! The admin surface of issue 18 end to end: confluent-kafka's and kafka-python's admin clients
//! against a three-voter quorum of real `ringlog serve` processes (tests/clients/admin_surface.py),
//! then the nodes themselves asked with our own client.
//!
//! - DescribeConfigs / IncrementalAlterConfigs: a topic config altered through any node (a node
//!   that is not the controller forwards it) is a metadata record: every node describes the new
//!   value, and after a restart of all nodes too. What cannot change at runtime is refused.
//! - DeleteRecords: the leader's log start moves, consumers start at the new low watermark, the
//!   followers' log starts follow (a follower that becomes leader answers the same earliest).
//! - CreatePartitions: the new partitions start on every node and are produced to and consumed.
//! - DescribeCluster: the cluster id, the controller and every node.

use std::collections::BTreeMap;
use std::time::Duration;

use ringlog_net::client::Client;
use ringlog_net::protocol::{
    Request, Response, delete_records_request as dr_req, describe_cluster_request as dcl_req,
    describe_configs_request as dc_req, incremental_alter_configs_request as ia_req,
    list_offsets_request as lo_req,
};

mod quorum;
use quorum::{
    CLUSTER_ID, Quorum, checkpoints, eventually, run_client_script, scrape_metrics, segment_bases,
    serial,
};

/// Runs admin_surface.py in `mode` and returns every line it printed.
fn run_mode_lines(quorum: &mut Quorum, mode: &str) -> Vec<String> {
    let bootstrap = quorum.bootstrap();
    let mut lines = Vec::new();
    run_client_script(
        quorum,
        &bootstrap,
        "admin_surface.py",
        mode,
        Duration::from_secs(240),
        |_, l| {
            lines.push(l.to_string());
            None
        },
    );
    lines
}

/// The second word of the line starting with `result`.
fn word_after(lines: &[String], result: &str) -> String {
    lines
        .iter()
        .find(|l| l.starts_with(&format!("{result} ")))
        .and_then(|l| l.split_whitespace().nth(1))
        .unwrap_or_else(|| panic!("no {result} line in {lines:?}"))
        .to_string()
}

/// Runs admin_surface.py in `mode` and returns the line starting with `result` it printed.
fn run_mode(quorum: &mut Quorum, mode: &str, result: &str) -> String {
    let lines = run_mode_lines(quorum, mode);
    lines
        .iter()
        .find(|l| l.starts_with(result))
        .cloned()
        .unwrap_or_else(|| panic!("admin_surface.py {mode} printed no {result} line"))
}

/// A topic's configs (name → value) as node `id` describes them.
fn topic_configs_at(quorum: &Quorum, id: i32, topic: &str) -> Option<BTreeMap<String, String>> {
    let mut client = Client::connect(&quorum.address(id), Duration::from_millis(500)).ok()?;
    let request = Request::DescribeConfigs(dc_req::DescribeConfigsRequest {
        resources: vec![dc_req::DescribeConfigsResource {
            resource_type: 2,
            resource_name: topic.to_string(),
            configuration_keys: None,
        }],
        ..Default::default()
    });
    let Ok(Response::DescribeConfigs(response)) = client.request(&request, 4) else {
        return None;
    };
    let result = response.results.into_iter().next()?;
    (result.error_code == 0).then(|| {
        result
            .configs
            .into_iter()
            .map(|c| (c.name, c.value.unwrap_or_default()))
            .collect()
    })
}

/// Every node describes `topic`'s `name` as `value`.
fn every_node_describes(quorum: &Quorum, topic: &str, name: &str, value: &str) {
    for node in &quorum.nodes {
        eventually(
            Duration::from_secs(30),
            &format!("node {} to describe {name}={value}", node.id),
            || {
                let configs = topic_configs_at(quorum, node.id, topic)?;
                (configs.get(name).map(String::as_str) == Some(value)).then_some(())
            },
        );
    }
}

/// The controller as node `id`'s DescribeCluster names it.
fn controller_at(quorum: &Quorum, id: i32) -> Option<i32> {
    let mut client = Client::connect(&quorum.address(id), Duration::from_millis(500)).ok()?;
    let request = Request::DescribeCluster(dcl_req::DescribeClusterRequest {
        endpoint_type: 1,
        ..Default::default()
    });
    let Ok(Response::DescribeCluster(r)) = client.request(&request, 1) else {
        return None;
    };
    (r.error_code == 0 && r.controller_id >= 0).then_some(r.controller_id)
}

/// KIP-style configs through real clients; the record of an alteration reaches every node,
/// through a forwarding node too, and survives a restart of all nodes; a snapshot topic's
/// `snapshot.minimum.records` decides when its replicas snapshot.
#[test]
fn altered_topic_configs_are_described_by_every_node_and_survive_restart() {
    let _serial = serial();
    let mut quorum = Quorum::start(3);
    quorum.wait_for_leader(Duration::from_secs(30));
    let lines = run_mode_lines(&mut quorum, "configs");
    let topic = word_after(&lines, "ALTERED");
    let snapshot_topic = word_after(&lines, "SNAPSHOT_TOPIC");
    every_node_describes(&quorum, &topic, "retention.ms", "3600000");
    every_node_describes(&quorum, &topic, "retention.bytes", "1048576");
    // KIP-630's snapshot.minimum.records of a snapshot topic: 40 records, a minimum of 10
    // (the node's is 16384), and every replica takes a snapshot.
    every_node_describes(&quorum, &snapshot_topic, "snapshot.minimum.records", "10");
    for node in &quorum.nodes {
        let dir = quorum.data_dir(node.id).join(format!("{snapshot_topic}-0"));
        eventually(
            Duration::from_secs(30),
            &format!("a snapshot of {snapshot_topic}-0 on node {}", node.id),
            || (!checkpoints(&dir).is_empty()).then_some(()),
        );
    }

    // Through a node that is not the controller: it forwards the request and relays the
    // controller's answer.
    let controller = eventually(Duration::from_secs(20), "a controller", || {
        controller_at(&quorum, 1)
    });
    let other = (1..=3).find(|id| *id != controller).unwrap();
    let request = Request::IncrementalAlterConfigs(ia_req::IncrementalAlterConfigsRequest {
        resources: vec![ia_req::AlterConfigsResource {
            resource_type: 2,
            resource_name: topic.clone(),
            configs: vec![ia_req::AlterableConfig {
                name: "retention.ms".into(),
                config_operation: 0,
                value: Some("7200000".into()),
            }],
        }],
        validate_only: false,
    });
    let mut client = Client::connect(&quorum.address(other), Duration::from_secs(2)).unwrap();
    match client.request(&request, 1).unwrap() {
        Response::IncrementalAlterConfigs(r) => {
            assert_eq!(r.responses.len(), 1);
            assert_eq!(r.responses[0].error_code, 0, "{:?}", r.responses[0]);
        }
        other => panic!("answered {other:?}"),
    }
    every_node_describes(&quorum, &topic, "retention.ms", "7200000");

    // The alteration is in the metadata log: every node has it again after a restart.
    quorum.kill_all();
    quorum.start_all();
    quorum.wait_for_leader(Duration::from_secs(30));
    every_node_describes(&quorum, &topic, "retention.ms", "7200000");
    every_node_describes(&quorum, &topic, "retention.bytes", "1048576");
    every_node_describes(&quorum, &snapshot_topic, "snapshot.minimum.records", "10");
    assert!(quorum.exited().is_empty(), "{}", quorum.dump_logs());
}

/// The earliest offset of `topic`-0 as node `id` answers it (ListOffsets -2), if it leads.
fn earliest_at(quorum: &Quorum, id: i32, topic: &str) -> Option<i64> {
    let mut client = Client::connect(&quorum.address(id), Duration::from_millis(500)).ok()?;
    let request = Request::ListOffsets(lo_req::ListOffsetsRequest {
        replica_id: -1,
        topics: vec![lo_req::ListOffsetsTopic {
            name: topic.to_string(),
            partitions: vec![lo_req::ListOffsetsPartition {
                partition_index: 0,
                timestamp: -2,
                ..Default::default()
            }],
        }],
        ..Default::default()
    });
    let Ok(Response::ListOffsets(r)) = client.request(&request, 7) else {
        return None;
    };
    let p = r.topics.first()?.partitions.first()?;
    (p.error_code == 0).then_some(p.offset)
}

/// A node's `snapshots-<what>-total` for `partition`, if it serves metrics.
fn snapshots_total(quorum: &Quorum, id: i32, what: &str, partition: &str) -> Option<f64> {
    let samples = scrape_metrics(quorum.node(id).metrics_port)?;
    let name =
        format!("kafka_server_raft_metrics_snapshots_{what}_total{{partition=\"{partition}\"}}");
    samples.get(&name).copied()
}

/// DeleteRecords moves the leader's log start (clients then start at the new low watermark),
/// each follower records the same cut (an empty KIP-630 snapshot at 60, counted in
/// `snapshots-generated-total`) and its log start follows, so a follower that becomes leader
/// answers earliest = 60; a follower asked answers NOT_LEADER_OR_FOLLOWER; a follower that lost
/// its disk comes back through the leader's snapshot (`snapshots-fetched-total`).
#[test]
fn delete_records_moves_the_log_start_of_the_leader_and_the_followers() {
    let _serial = serial();
    let mut quorum = Quorum::start(3);
    quorum.wait_for_leader(Duration::from_secs(30));
    let line = run_mode(&mut quorum, "delete_records", "DELETED");
    let topic = line.split_whitespace().nth(1).unwrap().to_string();
    for node in &quorum.nodes {
        let dir = quorum.data_dir(node.id).join(format!("{topic}-0"));
        eventually(
            Duration::from_secs(30),
            &format!("node {}'s log to start at 60", node.id),
            || (checkpoints(&dir).last() == Some(&60)).then_some(()),
        );
    }
    let partition = format!("{topic}-0");
    for node in &quorum.nodes {
        eventually(
            Duration::from_secs(10),
            &format!("node {}'s snapshots-generated-total", node.id),
            || {
                let generated = snapshots_total(&quorum, node.id, "generated", &partition)?;
                (generated >= 1.0).then_some(())
            },
        );
    }
    let (leader, _) = quorum.wait_for_leader_of(&topic, Duration::from_secs(20));
    let follower = (1..=3).find(|id| *id != leader).unwrap();
    let request = Request::DeleteRecords(dr_req::DeleteRecordsRequest {
        topics: vec![dr_req::DeleteRecordsTopic {
            name: topic.clone(),
            partitions: vec![dr_req::DeleteRecordsPartition {
                partition_index: 0,
                offset: 70,
            }],
        }],
        timeout_ms: 5000,
    });
    let mut client = Client::connect(&quorum.address(follower), Duration::from_secs(2)).unwrap();
    match client.request(&request, 2).unwrap() {
        Response::DeleteRecords(r) => {
            assert_eq!(r.topics[0].partitions[0].error_code, 6, "{r:?}");
        }
        other => panic!("answered {other:?}"),
    }

    // A follower that lost its disk fetches the leader's snapshot at 60 and starts there.
    quorum.kill(follower);
    quorum.wipe(follower);
    quorum.start_node(follower);
    let dir = quorum.data_dir(follower).join(&partition);
    eventually(
        Duration::from_secs(30),
        "the wiped follower to fetch the snapshot at 60",
        || {
            let fetched = snapshots_total(&quorum, follower, "fetched", &partition)?;
            (fetched >= 1.0 && checkpoints(&dir).first() == Some(&60)).then_some(())
        },
    );

    // The leader goes; whichever follower takes over starts its log at 60 too.
    quorum.kill(leader);
    let survivors: Vec<i32> = (1..=3).filter(|id| *id != leader).collect();
    let earliest = eventually(Duration::from_secs(30), "a new leader's earliest", || {
        survivors
            .iter()
            .find_map(|id| earliest_at(&quorum, *id, &topic))
    });
    assert_eq!(earliest, 60);
}

/// KIP-630 on a `cleanup.policy=snapshot` topic (tests/clients/admin_surface.py checks the
/// answers): DeleteRecords at the high-watermark snapshots the state machine there and the log
/// starts at the snapshot; every replica's log follows (each generates its own snapshot at the
/// leader's log start, nothing having been committed since), so a new leader after a kill of
/// the old one answers the same earliest offset.
#[test]
fn delete_records_on_a_snapshot_topic_cuts_at_a_snapshot_of_its_state() {
    let _serial = serial();
    let mut quorum = Quorum::start(3);
    quorum.wait_for_leader(Duration::from_secs(30));
    let line = run_mode(&mut quorum, "delete_records_snapshot", "SNAPSHOT_DELETED");
    let mut words = line.split_whitespace().skip(1);
    let topic = words.next().unwrap().to_string();
    let high: u64 = words.next().unwrap().parse().unwrap();
    for node in &quorum.nodes {
        let dir = quorum.data_dir(node.id).join(format!("{topic}-0"));
        eventually(
            Duration::from_secs(30),
            &format!("node {}'s snapshot at {high}", node.id),
            || (checkpoints(&dir).last() == Some(&high)).then_some(()),
        );
    }
    let (leader, _) = quorum.wait_for_leader_of(&topic, Duration::from_secs(20));
    eventually(Duration::from_secs(20), "the leader's earliest", || {
        (earliest_at(&quorum, leader, &topic)? == high as i64).then_some(())
    });
    quorum.kill(leader);
    let survivors: Vec<i32> = (1..=3).filter(|id| *id != leader).collect();
    let earliest = eventually(Duration::from_secs(30), "a new leader's earliest", || {
        survivors
            .iter()
            .find_map(|id| earliest_at(&quorum, *id, &topic))
    });
    assert_eq!(earliest, high as i64);
}

/// `segment.bytes` and `cleanup.policy` altered after creation (admin_surface.py's
/// alter_log_configs and alter_back_to_delete check the answers): the records reach every
/// node, and each change takes effect on every replica: the log rolls at the new segment size
/// (segments in every replica's folder), a delete topic turned snapshot snapshots its state
/// machine (checkpoints in every folder), and turned back to delete it is cut by retention
/// again (the script waits for the earliest offset to pass its records).
#[test]
fn segment_bytes_and_cleanup_policy_change_after_creation_on_every_node() {
    let _serial = serial();
    let mut quorum = Quorum::start(3);
    quorum.wait_for_leader(Duration::from_secs(30));
    let lines = run_mode_lines(&mut quorum, "alter_log_configs");
    let topic = word_after(&lines, "SEGMENT_BYTES");
    every_node_describes(&quorum, &topic, "segment.bytes", "65536");
    for node in &quorum.nodes {
        let dir = quorum.data_dir(node.id).join(format!("{topic}-0"));
        // 100 records of 4 kB at 64 KiB a segment (at the node's 1 MiB: one segment).
        eventually(
            Duration::from_secs(30),
            &format!("node {}'s log in 64 KiB segments", node.id),
            || (segment_bases(&dir).len() >= 4).then_some(()),
        );
        // A delete topic keeps no snapshot (no retention or DeleteRecords cut here).
        assert!(checkpoints(&dir).is_empty(), "node {}", node.id);
    }
    let lines = run_mode_lines(&mut quorum, "alter_to_snapshot");
    assert_eq!(word_after(&lines, "SNAPSHOT_POLICY"), topic);
    every_node_describes(&quorum, &topic, "cleanup.policy", "snapshot");
    for node in &quorum.nodes {
        let dir = quorum.data_dir(node.id).join(format!("{topic}-0"));
        // The state machine runs and snapshots every 10 records (a delete topic: never).
        eventually(
            Duration::from_secs(30),
            &format!("a snapshot of {topic}-0 on node {}", node.id),
            || (!checkpoints(&dir).is_empty()).then_some(()),
        );
    }
    let lines = run_mode_lines(&mut quorum, "alter_back_to_delete");
    assert_eq!(word_after(&lines, "DELETE_POLICY"), topic);
    every_node_describes(&quorum, &topic, "cleanup.policy", "delete");
    every_node_describes(&quorum, &topic, "snapshot.minimum.records", "16384");
    assert!(quorum.exited().is_empty(), "{}", quorum.dump_logs());
}

/// CreatePartitions: the new partitions start on every node (their folders), and clients
/// produce to and consume from them (the script checks that).
#[test]
fn create_partitions_starts_the_new_partitions_on_every_node() {
    let _serial = serial();
    let mut quorum = Quorum::start(3);
    quorum.wait_for_leader(Duration::from_secs(30));
    let line = run_mode(&mut quorum, "create_partitions", "GROWN");
    let topic = line.split_whitespace().nth(1).unwrap().to_string();
    for node in &quorum.nodes {
        for index in 0..4 {
            let dir = quorum.data_dir(node.id).join(format!("{topic}-{index}"));
            eventually(
                Duration::from_secs(20),
                &format!("{} on node {}", dir.display(), node.id),
                || dir.is_dir().then_some(()),
            );
        }
    }
    assert!(quorum.exited().is_empty(), "{}", quorum.dump_logs());
}

/// DescribeCluster names this cluster's id (the one `ringlog format` wrote), a controller every
/// node agrees on, and the three nodes.
#[test]
fn describe_cluster_names_the_cluster_the_controller_and_every_node() {
    let _serial = serial();
    let mut quorum = Quorum::start(3);
    quorum.wait_for_leader(Duration::from_secs(30));
    let line = run_mode(&mut quorum, "describe_cluster", "CLUSTER");
    assert_eq!(line.split_whitespace().nth(1), Some(CLUSTER_ID));
    let controllers: Vec<i32> = (1..=3)
        .map(|id| {
            eventually(Duration::from_secs(20), "a controller", || {
                controller_at(&quorum, id)
            })
        })
        .collect();
    assert!(
        controllers.iter().all(|c| *c == controllers[0]),
        "{controllers:?}"
    );
}

/// A forwarded admin request whose controller never answers: the controller is stopped with
/// SIGSTOP after a first forwarded request connected the lane to it, so that connection stays
/// open and the forwarding node's lane never fails the request. After `controller.socket.timeout.ms` the node closes the client's connection (as
/// when no controller is known) instead of holding it until the client gives up; before, the
/// client's read timed out with the connection still open.
#[test]
fn a_forwarded_request_to_a_stopped_controller_closes_the_client_s_connection() {
    use ringlog_net::client::ClientError;
    use ringlog_net::protocol::create_partitions_request as cp_req;
    let _serial = serial();
    let mut quorum = Quorum::format_with(3, "controller.socket.timeout.ms=1000\n");
    quorum.start_all();
    let (controller, _) = quorum.wait_for_leader(Duration::from_secs(15));
    quorum.create_topic("grown", 1, &[]);
    let other = (1..=3).find(|id| *id != controller).unwrap();
    let mut client = Client::connect(&quorum.address(other), Duration::from_secs(20)).unwrap();
    // CreatePartitions on a node that is not the controller is forwarded to it. The first one
    // is answered, so the forwarding node's lane to the controller is connected (a lane that
    // must connect to a stopped process fails its handshake within its connect timeout).
    let grow_to = |count: i32| {
        Request::CreatePartitions(cp_req::CreatePartitionsRequest {
            topics: vec![cp_req::CreatePartitionsTopic {
                name: "grown".into(),
                count,
                assignments: None,
            }],
            timeout_ms: 60_000,
            validate_only: false,
        })
    };
    match client.request(&grow_to(2), 3) {
        Ok(Response::CreatePartitions(r)) => assert_eq!(r.results[0].error_code, 0, "{r:?}"),
        other => panic!("CreatePartitions forwarded: {other:?}"),
    }
    let pid = quorum.pid(controller) as i32;
    // SAFETY: signals to a child process this test started.
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    let answer = client.request(&grow_to(3), 3);
    unsafe { libc::kill(pid, libc::SIGCONT) };
    match answer {
        Err(ClientError::Io { source, .. })
            if source.kind() == std::io::ErrorKind::UnexpectedEof => {}
        other => panic!(
            "expected the connection closed, got {other:?}\n{}",
            quorum.dump_logs()
        ),
    }
}

/// DeleteRecords at an offset inside a batch (what librdkafka's 0081 asks: offset 50 of one
/// 100-record batch): the answer, ListOffsets' earliest and Fetch's LogStartOffset are the asked
/// offset, as in Kafka, not the batch's first offset; a Fetch below it is OFFSET_OUT_OF_RANGE and
/// a Fetch from it returns the batch (the client skips the records below). Every replica writes
/// it down before the answer, so a new leader and a restarted quorum answer the same.
#[test]
fn delete_records_inside_a_batch_cuts_at_the_asked_offset_on_every_replica() {
    use ringlog_engine::batch::{BatchIter, RecordBatchBuilder};
    let _serial = serial();
    let mut quorum = Quorum::start(3);
    quorum.wait_for_leader(Duration::from_secs(30));
    let topic = "mid-batch";
    quorum.create_topic(topic, 1, &[]);
    quorum.wait_for_leader_of(topic, Duration::from_secs(30));
    let (mut client, leader) = eventually(Duration::from_secs(20), "the topic's leader", || {
        quorum.partition_leader(topic)
    });
    let batch_of = |count: usize| {
        let mut builder = RecordBatchBuilder::new(0);
        for i in 0..count {
            builder.append(i as i64, None, Some(format!("r{i}").as_bytes()), &[]);
        }
        builder.build().into_bytes()
    };
    let (code, base) = quorum::produce_to(&mut client, topic, 0, batch_of(100));
    assert_eq!(code, 0);
    let (code, _) = quorum::produce_to(&mut client, topic, 0, batch_of(10));
    assert_eq!(code, 0);
    let cut = base + 50;

    assert_eq!(
        quorum::delete_records(&mut client, topic, cut, 20_000),
        (0, cut)
    );
    assert_eq!(earliest_at(&quorum, leader, topic), Some(cut));

    let fetch_at = |client: &mut Client, offset: i64| {
        let request = quorum::consumer_fetch_request(topic, offset, 0);
        let Response::Fetch(f) = client.request(&request, 12).unwrap() else {
            panic!("not a Fetch answer");
        };
        f.responses[0].partitions[0].clone()
    };
    let below = fetch_at(&mut client, cut - 1);
    assert_eq!(below.error_code, 1, "a fetch below the cut: {below:?}");
    let from = fetch_at(&mut client, cut);
    assert_eq!((from.error_code, from.log_start_offset), (0, cut));
    let first = BatchIter::new(ringlog_net::client::fetched_records(&from))
        .next()
        .expect("a batch")
        .unwrap();
    assert_eq!(
        (first.base_offset(), first.next_offset()),
        (base, base + 100)
    );

    // Every replica wrote it down before the answer.
    for node in &quorum.nodes {
        let file = quorum
            .data_dir(node.id)
            .join(format!("{topic}-0"))
            .join("log-start-offset-checkpoint");
        let text = std::fs::read_to_string(&file)
            .unwrap_or_else(|e| panic!("node {}: {}: {e}", node.id, file.display()));
        assert_eq!(
            text.lines().nth(1),
            Some(cut.to_string().as_str()),
            "node {}",
            node.id
        );
    }

    // A new leader answers the same earliest offset, and so does the quorum after kill -9 of all.
    quorum.kill(leader);
    let survivors: Vec<i32> = (1..=3).filter(|id| *id != leader).collect();
    let earliest = eventually(Duration::from_secs(30), "a new leader's earliest", || {
        survivors
            .iter()
            .find_map(|id| earliest_at(&quorum, *id, topic))
    });
    assert_eq!(earliest, cut);
    quorum.kill_all();
    quorum.start_all();
    let earliest = eventually(
        Duration::from_secs(60),
        "the restarted leader's earliest",
        || (1..=3).find_map(|id| earliest_at(&quorum, id, topic)),
    );
    assert_eq!(earliest, cut);
}
