//! Consumer groups (the classic protocol, docs/groups.md) through unmodified Kafka clients
//! against a three-voter quorum of real `ringlog serve` processes, driven by
//! tests/clients/groups.py (scripts/test-all.sh installs confluent-kafka 2.16.1 and
//! kafka-python 3.0.12).
//!
//! `__consumer_offsets` is created by the controller when the first client looks for a
//! coordinator, with three partitions here (`offsets.topic.num.partitions`) so the groups of a
//! test land on different leaders; commits go through the Raft log of the group's partition
//! and are answered once committed.

use std::time::Duration;

use ringlog_net::client::Client;
use ringlog_net::protocol::{Request, Response, find_coordinator_request};

mod quorum;
use quorum::{Quorum, eventually, run_client_script, serial};

/// Three voters with a small `__consumer_offsets` (three partitions, 1 MiB segments).
fn groups_quorum() -> Quorum {
    let mut quorum = Quorum::format_with(
        3,
        "offsets.topic.num.partitions=3\noffsets.topic.segment.bytes=1048576",
    );
    quorum.start_all();
    quorum.wait_for_leader(Duration::from_secs(30));
    quorum
}

fn run(quorum: &mut Quorum, mode: &str) {
    let bootstrap = quorum.bootstrap();
    run_client_script(
        quorum,
        &bootstrap,
        "groups.py",
        mode,
        Duration::from_secs(240),
        |_, line| {
            eprintln!("{line}");
            None
        },
    );
    assert!(
        quorum.exited().is_empty(),
        "a node exited:\n{}",
        quorum.dump_logs()
    );
}

/// A confluent-kafka consumer with a group id reads part of a topic, commits synchronously
/// (OffsetCommit v9 with CommittedLeaderEpoch, KIP-320) and closes; `committed()` answers the
/// offsets with their leader epochs (OffsetFetch v9). A second consumer of the group starts
/// exactly after the commit, and together they read every record once.
#[test]
fn confluent_group_resumes_exactly_after_its_commit() {
    let _serial = serial();
    let mut quorum = groups_quorum();
    run(&mut quorum, "resume");
}

/// Two confluent-kafka members of one group split a four-partition topic two and two
/// (JoinGroup, SyncGroup with the leader's range assignment); when one closes (LeaveGroup) the
/// other takes all four over and reads the rest once, from the offsets committed on revoke.
#[test]
fn two_members_split_four_partitions_and_one_takes_over() {
    let _serial = serial();
    let mut quorum = groups_quorum();
    run(&mut quorum, "split");
}

/// kafka-python's KafkaConsumer(group_id=...): subscribe, read, commit, close, and a new
/// consumer of the group resumes after the commit.
#[test]
fn kafka_python_group_resumes_after_its_commit() {
    let _serial = serial();
    let mut quorum = groups_quorum();
    run(&mut quorum, "kafka-python");
}

/// `kcat -G` (Debian's librdkafka 2.0.2): a balanced consumer reads part of a topic and
/// commits as it closes; the next one reads exactly the rest.
#[test]
fn kcat_group_consumer_resumes_after_its_commit() {
    let _serial = serial();
    let mut quorum = groups_quorum();
    run(&mut quorum, "kcat");
}

/// confluent-kafka's AdminClient: ListGroups (every broker), DescribeGroups (state, assignor,
/// member assignment), OffsetFetch, DeleteGroups refused while a member is in
/// (NON_EMPTY_GROUP), OffsetCommit outside group management once it is empty, DeleteGroups.
#[test]
fn the_admin_client_lists_describes_alters_and_deletes_a_group() {
    let _serial = serial();
    let mut quorum = groups_quorum();
    run(&mut quorum, "admin");
}

/// The coordinator of a group (the leader of its `__consumer_offsets` partition) is killed
/// with kill -9 right after a commit was acknowledged: the new leader of that partition serves
/// every committed offset with its epoch, and a new consumer resumes there.
#[test]
fn committed_offsets_survive_a_kill_9_of_the_coordinator() {
    let _serial = serial();
    let mut quorum = groups_quorum();
    let bootstrap = quorum.bootstrap();
    let mut killed = None;
    run_client_script(
        &mut quorum,
        &bootstrap,
        "groups.py",
        "failover",
        Duration::from_secs(240),
        |quorum, line| {
            eprintln!("{line}");
            let group = line.strip_prefix("COMMITTED ")?;
            let coordinator = find_coordinator(quorum, group, None);
            quorum.kill(coordinator);
            killed = Some(coordinator);
            Some("killed\n".to_string())
        },
    );
    let killed = killed.expect("the script committed");
    // The partition's new leader is the group's coordinator now.
    find_coordinator(&quorum, "failover-group", Some(killed));
    quorum.start_all();
    assert!(quorum.exited().is_empty(), "{}", quorum.dump_logs());
}

/// The node FindCoordinator (v3) names for `group` (other than `not`), asked of every live
/// node until one answers.
fn find_coordinator(quorum: &Quorum, group: &str, not: Option<i32>) -> i32 {
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

/// The group APIs at the wire, with Kafka's error codes: advertised in ApiVersions; the
/// coordinator is the leader of the group's `__consumer_offsets` partition (created on the
/// first FindCoordinator) and every other node says NOT_COORDINATOR; commits outside group
/// management (generation -1) are stored and read back with their leader epoch (OffsetFetch v5
/// and v8); bad commits are refused per partition; the internal topic cannot be produced to or
/// deleted; DescribeGroups, ListGroups, OffsetDelete and DeleteGroups see offset-only groups.
#[test]
fn group_requests_get_kafkas_answers_at_the_wire() {
    use ringlog_net::protocol::{
        ApiKey, ApiVersionsRequest, delete_groups_request, delete_topics_request,
        describe_groups_request, join_group_request, list_groups_request, offset_commit_request,
        offset_delete_request, offset_fetch_request,
    };
    let _serial = serial();
    let mut quorum = groups_quorum();
    quorum.create_topic("events", 2, &[]);
    let connect = |id: i32| Client::connect(&quorum.address(id), Duration::from_secs(2)).unwrap();

    let Response::ApiVersions(versions) = connect(1)
        .request(&Request::ApiVersions(ApiVersionsRequest::default()), 3)
        .unwrap()
    else {
        panic!("not an ApiVersions answer")
    };
    for api in [
        ApiKey::FindCoordinator,
        ApiKey::JoinGroup,
        ApiKey::SyncGroup,
        ApiKey::Heartbeat,
        ApiKey::LeaveGroup,
        ApiKey::OffsetCommit,
        ApiKey::OffsetFetch,
        ApiKey::ListGroups,
        ApiKey::DescribeGroups,
        ApiKey::DeleteGroups,
        ApiKey::OffsetDelete,
    ] {
        let advertised = versions.api_keys.iter().find(|v| v.api_key == api.key());
        assert_eq!(
            advertised.map(|v| (v.min_version, v.max_version)),
            Some((api.versions().min, api.versions().max)),
            "{api:?}"
        );
    }

    let group = "wire-group";
    let coordinator = find_coordinator(&quorum, group, None);
    let other = quorum
        .nodes
        .iter()
        .map(|n| n.id)
        .find(|id| *id != coordinator)
        .unwrap();
    let commit = |partitions: Vec<(&str, i32, i64, Option<String>)>| {
        Request::OffsetCommit(offset_commit_request::OffsetCommitRequest {
            group_id: group.into(),
            generation_id_or_member_epoch: -1,
            topics: partitions
                .into_iter()
                .map(|(topic, partition, offset, metadata)| {
                    offset_commit_request::OffsetCommitRequestTopic {
                        name: topic.into(),
                        partitions: vec![offset_commit_request::OffsetCommitRequestPartition {
                            partition_index: partition,
                            committed_offset: offset,
                            committed_leader_epoch: 4,
                            committed_metadata: metadata,
                        }],
                    }
                })
                .collect(),
            ..Default::default()
        })
    };
    let codes = |response: Response| -> Vec<i16> {
        let Response::OffsetCommit(r) = response else {
            panic!("not an OffsetCommit answer")
        };
        r.topics
            .iter()
            .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
            .collect()
    };
    // 16: NOT_COORDINATOR on a node that does not lead the group's partition.
    let refused = connect(other)
        .request(&commit(vec![("events", 0, 5, None)]), 9)
        .unwrap();
    assert_eq!(codes(refused), vec![16]);
    // The coordinator: stored once committed; 3 UNKNOWN_TOPIC_OR_PARTITION for a partition
    // that does not exist, 12 OFFSET_METADATA_TOO_LARGE past offset.metadata.max.bytes.
    let answer = eventually(Duration::from_secs(20), "the coordinator loaded", || {
        let answer = codes(
            connect(coordinator)
                .request(
                    &commit(vec![
                        ("events", 1, 42, Some("m".into())),
                        ("events", 7, 1, None),
                        ("nothing", 0, 1, None),
                        ("events", 0, 1, Some("x".repeat(4097))),
                    ]),
                    9,
                )
                .unwrap(),
        );
        // 14: COORDINATOR_LOAD_IN_PROGRESS until its first record of the epoch is applied.
        (answer[0] != 14).then_some(answer)
    });
    assert_eq!(answer, vec![0, 3, 3, 12]);

    let fetch_v5 = Request::OffsetFetch(offset_fetch_request::OffsetFetchRequest {
        group_id: group.into(),
        topics: None,
        ..Default::default()
    });
    let Response::OffsetFetch(fetched) = connect(coordinator).request(&fetch_v5, 5).unwrap() else {
        panic!("not an OffsetFetch answer")
    };
    assert_eq!(fetched.error_code, 0);
    let partitions: Vec<(String, i32, i64, i32, Option<String>)> = fetched
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(|p| {
                (
                    t.name.clone(),
                    p.partition_index,
                    p.committed_offset,
                    p.committed_leader_epoch,
                    p.metadata.clone(),
                )
            })
        })
        .collect();
    assert_eq!(
        partitions,
        vec![("events".to_string(), 1, 42, 4, Some("m".to_string()))]
    );
    let fetch_v8 = Request::OffsetFetch(offset_fetch_request::OffsetFetchRequest {
        groups: vec![offset_fetch_request::OffsetFetchRequestGroup {
            group_id: group.into(),
            topics: Some(vec![offset_fetch_request::OffsetFetchRequestTopics {
                name: "events".into(),
                partition_indexes: vec![0, 1],
            }]),
            ..Default::default()
        }],
        ..Default::default()
    });
    let Response::OffsetFetch(fetched) = connect(coordinator).request(&fetch_v8, 8).unwrap() else {
        panic!("not an OffsetFetch answer")
    };
    let got: Vec<(i32, i64, i32)> = fetched.groups[0].topics[0]
        .partitions
        .iter()
        .map(|p| {
            (
                p.partition_index,
                p.committed_offset,
                p.committed_leader_epoch,
            )
        })
        .collect();
    assert_eq!(got, vec![(0, -1, -1), (1, 42, 4)], "no commit: offset -1");

    // 26: INVALID_SESSION_TIMEOUT below group.min.session.timeout.ms.
    let join = Request::JoinGroup(join_group_request::JoinGroupRequest {
        group_id: group.into(),
        session_timeout_ms: 1_000,
        rebalance_timeout_ms: 1_000,
        protocol_type: "consumer".into(),
        protocols: vec![join_group_request::JoinGroupRequestProtocol {
            name: "range".into(),
            metadata: Default::default(),
        }],
        ..Default::default()
    });
    let Response::JoinGroup(joined) = connect(coordinator).request(&join, 5).unwrap() else {
        panic!("not a JoinGroup answer")
    };
    assert_eq!(joined.error_code, 26);

    // The internal topic is the coordinator's: 17 INVALID_TOPIC_EXCEPTION for a Produce and a
    // DeleteTopics.
    let (leader, _) = quorum.partition_leader("__consumer_offsets").unwrap();
    let mut leader = leader;
    let (code, _) = quorum::produce_to(&mut leader, "__consumer_offsets", 0, quorum::batch_of("x"));
    assert_eq!(code, 17);
    let delete_topic = Request::DeleteTopics(delete_topics_request::DeleteTopicsRequest {
        topic_names: vec!["__consumer_offsets".into()],
        timeout_ms: 5_000,
        ..Default::default()
    });
    let (controller, _) = quorum.wait_for_leader(Duration::from_secs(10));
    let Response::DeleteTopics(deleted) = connect(controller).request(&delete_topic, 5).unwrap()
    else {
        panic!("not a DeleteTopics answer")
    };
    assert_eq!(deleted.responses[0].error_code, 17);

    // A group with offsets only: Empty in DescribeGroups and ListGroups; an unknown one Dead.
    let describe = Request::DescribeGroups(describe_groups_request::DescribeGroupsRequest {
        groups: vec![group.into(), "no-such-group".into()],
        ..Default::default()
    });
    let Response::DescribeGroups(described) = connect(coordinator).request(&describe, 5).unwrap()
    else {
        panic!("not a DescribeGroups answer")
    };
    let states: Vec<(i16, &str)> = described
        .groups
        .iter()
        .map(|g| (g.error_code, g.group_state.as_str()))
        .collect();
    assert!(
        states[0] == (0, "Empty") && (states[1] == (0, "Dead") || states[1].0 == 16),
        "{states:?}"
    );
    let Response::ListGroups(listed) = connect(coordinator)
        .request(
            &Request::ListGroups(list_groups_request::ListGroupsRequest::default()),
            4,
        )
        .unwrap()
    else {
        panic!("not a ListGroups answer")
    };
    assert!(
        listed
            .groups
            .iter()
            .any(|g| g.group_id == group && g.group_state == "Empty"),
        "{listed:?}"
    );

    // OffsetDelete of the one committed partition, then DeleteGroups: nothing is left, and a
    // second DeleteGroups is 69 GROUP_ID_NOT_FOUND.
    let offset_delete = Request::OffsetDelete(offset_delete_request::OffsetDeleteRequest {
        group_id: group.into(),
        topics: vec![offset_delete_request::OffsetDeleteRequestTopic {
            name: "events".into(),
            partitions: vec![offset_delete_request::OffsetDeleteRequestPartition {
                partition_index: 1,
            }],
        }],
    });
    let Response::OffsetDelete(offset_deleted) =
        connect(coordinator).request(&offset_delete, 0).unwrap()
    else {
        panic!("not an OffsetDelete answer")
    };
    assert_eq!(offset_deleted.error_code, 0);
    assert_eq!(offset_deleted.topics[0].partitions[0].error_code, 0);
    // DeleteGroups removes every offset of the group (tombstones through the log), and a
    // second one is 69 GROUP_ID_NOT_FOUND.
    let again = commit(vec![("events", 0, 7, None)]);
    assert_eq!(
        codes(connect(coordinator).request(&again, 9).unwrap()),
        vec![0]
    );
    let delete_groups = Request::DeleteGroups(delete_groups_request::DeleteGroupsRequest {
        groups_names: vec![group.into()],
    });
    let delete = |quorum: &Quorum| {
        let mut client =
            Client::connect(&quorum.address(coordinator), Duration::from_secs(2)).unwrap();
        let Response::DeleteGroups(r) = client.request(&delete_groups, 2).unwrap() else {
            panic!("not a DeleteGroups answer")
        };
        r.results[0].error_code
    };
    assert_eq!(delete(&quorum), 0);
    let Response::OffsetFetch(fetched) = connect(coordinator).request(&fetch_v5, 5).unwrap() else {
        panic!("not an OffsetFetch answer")
    };
    assert!(fetched.topics.is_empty(), "{fetched:?}");
    assert_eq!(delete(&quorum), 69);
    assert!(quorum.exited().is_empty(), "{}", quorum.dump_logs());
}

/// KIP-630 for the committed offsets: `__consumer_offsets` is a snapshot topic, so its state
/// (one record per committed partition) is snapshotted by the node's policy (here every 50
/// records), its log start moves behind the snapshots and whole segments go. The offsets are
/// then served from snapshot plus log: by a new coordinator after a kill -9 of the old one, and
/// after a kill -9 of every node.
#[test]
fn committed_offsets_survive_snapshots_and_restarts() {
    use ringlog_net::protocol::{offset_commit_request as oc, offset_fetch_request as of};
    let _serial = serial();
    let mut quorum = Quorum::format_with(
        3,
        "offsets.topic.num.partitions=1\noffsets.topic.segment.bytes=65536\n\
         controller.snapshot.minimum.records=50\n\
         metadata.log.max.record.bytes.between.snapshots=1\nmax.replication.lag.ms=1000",
    );
    quorum.start_all();
    quorum.wait_for_leader(Duration::from_secs(30));
    quorum.create_topic("events", 4, &[]);
    let group = "snapshot-group";
    let commit = |round: i64| {
        Request::OffsetCommit(oc::OffsetCommitRequest {
            group_id: group.into(),
            generation_id_or_member_epoch: -1,
            topics: vec![oc::OffsetCommitRequestTopic {
                name: "events".into(),
                partitions: (0..4)
                    .map(|p| oc::OffsetCommitRequestPartition {
                        partition_index: p,
                        committed_offset: round * 10 + i64::from(p),
                        committed_leader_epoch: (round % 7) as i32,
                        committed_metadata: Some(format!("round {round}")),
                    })
                    .collect(),
            }],
            ..Default::default()
        })
    };
    // 400 rounds of four records: about 110 KB, two 64 KiB segments, eight snapshots' worth.
    const ROUNDS: i64 = 400;
    let mut coordinator = find_coordinator(&quorum, group, None);
    let mut client = Client::connect(&quorum.address(coordinator), Duration::from_secs(2)).unwrap();
    for round in 0..ROUNDS {
        eventually(Duration::from_secs(20), "a commit", || {
            match client.request(&commit(round), 9) {
                Ok(Response::OffsetCommit(r))
                    if r.topics[0].partitions.iter().all(|p| p.error_code == 0) =>
                {
                    Some(())
                }
                _ => {
                    // Loading, or the coordinator moved: ask again.
                    coordinator = find_coordinator(&quorum, group, None);
                    client = Client::connect(&quorum.address(coordinator), Duration::from_secs(2))
                        .ok()?;
                    None
                }
            }
        });
    }
    let expected: Vec<(i32, i64, i32, Option<String>)> = (0..4)
        .map(|p| {
            let round = ROUNDS - 1;
            (
                p,
                round * 10 + i64::from(p),
                (round % 7) as i32,
                Some(format!("round {round}")),
            )
        })
        .collect();
    let partition_dir = quorum.data_dir(coordinator).join("__consumer_offsets-0");
    eventually(
        Duration::from_secs(30),
        "snapshots and a moved log start",
        || {
            let snapshots = quorum::checkpoints(&partition_dir);
            let first_segment = quorum::segment_bases(&partition_dir).first().copied()?;
            (!snapshots.is_empty() && first_segment > 0).then_some(())
        },
    );

    let fetch = Request::OffsetFetch(of::OffsetFetchRequest {
        groups: vec![of::OffsetFetchRequestGroup {
            group_id: group.into(),
            topics: None,
            ..Default::default()
        }],
        ..Default::default()
    });
    // The node serving every offset: asked again at each try, since under load the
    // partition's leader may move meanwhile.
    let served = |quorum: &Quorum, not: Option<i32>| {
        eventually(
            Duration::from_secs(60),
            "every committed offset served",
            || {
                let node = find_coordinator(quorum, group, not);
                let mut client =
                    Client::connect(&quorum.address(node), Duration::from_secs(2)).ok()?;
                let Ok(Response::OffsetFetch(r)) = client.request(&fetch, 8) else {
                    return None;
                };
                let group = r.groups.first().filter(|g| g.error_code == 0)?;
                let got: Vec<(i32, i64, i32, Option<String>)> = group
                    .topics
                    .iter()
                    .flat_map(|t| t.partitions.iter())
                    .map(|p| {
                        let epoch = p.committed_leader_epoch;
                        (
                            p.partition_index,
                            p.committed_offset,
                            epoch,
                            p.metadata.clone(),
                        )
                    })
                    .collect();
                (got == expected).then_some(node)
            },
        )
    };
    let coordinator = served(&quorum, None);

    // kill -9 of the coordinator: the partition's new leader serves them all.
    quorum.kill(coordinator);
    served(&quorum, Some(coordinator));
    // kill -9 of every node: each rebuilds the state from its newest snapshot and the log.
    quorum.start_all();
    quorum.kill_all();
    quorum.start_all();
    quorum.wait_for_leader(Duration::from_secs(30));
    served(&quorum, None);
    assert!(quorum.exited().is_empty(), "{}", quorum.dump_logs());
}
