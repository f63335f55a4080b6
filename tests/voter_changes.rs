//! KIP-853 voter changes on real `ringlog serve` processes: a voter whose disk is lost for good
//! is replaced by a fresh node without downtime and without losing an acknowledged record,
//! with the operator's commands (`ringlog add-voter`, `ringlog remove-voter`,
//! `ringlog describe-quorum`).
//!
//! Long because each scenario needs its whole quorum life (format, start, load, kill, replace,
//! restart) written out; the helpers are in tests/quorum.

mod quorum;

use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ringlog_net::client::Client;
use ringlog_net::protocol::{Request, Response, Uuid, update_raft_voter_request};

use quorum::{Quorum, RINGLOG, batch_of, eventually, read_partition_values, serial};

const TOPIC: &str = "replaced";

use quorum::{metadata_voters as voters_known_by, run_ringlog as ringlog};

/// An acks=all Produce of one record to `TOPIC`-0: its error code, `None` if the connection
/// failed.
fn try_produce(client: &mut Client, value: &str) -> Option<i16> {
    Some(
        client
            .produce(TOPIC, 0, batch_of(value), -1, 10_000)
            .ok()??
            .error_code,
    )
}

/// Produces one-record batches (acks=all) to `TOPIC`-0 until `stop`, at whichever node leads
/// it, and records each value the leader acknowledged.
fn producer(addresses: Vec<String>, stop: Arc<AtomicBool>, acknowledged: Arc<Mutex<Vec<String>>>) {
    let mut next = 0u64;
    let mut client: Option<Client> = None;
    while !stop.load(Ordering::Relaxed) {
        if client.is_none() {
            // Any live node names the leader (a dead one does not answer).
            client = addresses.iter().find_map(|address| {
                let (leader, _) = quorum::agreed_leader(std::slice::from_ref(address), TOPIC, 0)?;
                let address = addresses.get(usize::try_from(leader - 1).ok()?)?;
                Client::connect(address, Duration::from_millis(500)).ok()
            });
            if client.is_none() {
                // No leader known yet: ask again (the pause is between two probes).
                std::thread::park_timeout(Duration::from_millis(20));
                continue;
            }
        }
        let value = format!("v-{next}");
        next += 1;
        match try_produce(client.as_mut().expect("connected above"), &value) {
            Some(0) => acknowledged.lock().unwrap().push(value),
            // Not the leader any more, a timeout, or a broken connection: find the leader again
            // (the value may or may not be in the log; only acknowledged ones are checked).
            _ => client = None,
        }
    }
}

/// Starts the load; returns its stop switch, the acknowledged values and its thread.
fn start_load(
    addresses: &[String],
) -> (
    Arc<AtomicBool>,
    Arc<Mutex<Vec<String>>>,
    std::thread::JoinHandle<()>,
) {
    let stop = Arc::new(AtomicBool::new(false));
    let acknowledged = Arc::new(Mutex::new(Vec::new()));
    let thread = {
        let (addresses, stop, acknowledged) =
            (addresses.to_vec(), stop.clone(), acknowledged.clone());
        std::thread::spawn(move || producer(addresses, stop, acknowledged))
    };
    (stop, acknowledged, thread)
}

/// Waits until the load has `more` acknowledged records beyond what it has now.
fn wait_for_load(acknowledged: &Mutex<Vec<String>>, more: usize, what: &str) {
    let target = acknowledged.lock().unwrap().len() + more;
    eventually(Duration::from_secs(30), what, || {
        (acknowledged.lock().unwrap().len() >= target).then_some(())
    });
}

/// Every acknowledged value is in `TOPIC`-0, read from its leader (which the nodes at `live`
/// agree on; `by_id[id - 1]` is node id's address) up to its high-watermark. A leader elected a
/// moment ago serves only what its own epoch has committed so far, so the read is repeated
/// until it holds them all; past the deadline, the missing ones are named.
fn assert_nothing_lost(by_id: &[String], live: &[String], acknowledged: &[String]) {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let read = quorum::agreed_leader(live, TOPIC, 0).and_then(|(leader, _)| {
            let address = by_id.get(usize::try_from(leader - 1).ok()?)?;
            let mut client = Client::connect(address, Duration::from_secs(1)).ok()?;
            read_partition_values(&mut client, TOPIC).ok()
        });
        if let Some(values) = read {
            let values: std::collections::HashSet<String> = values
                .into_iter()
                .map(|v| String::from_utf8(v).unwrap())
                .collect();
            let missing: Vec<&String> = acknowledged
                .iter()
                .filter(|v| !values.contains(*v))
                .collect();
            if missing.is_empty() {
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "acknowledged but lost: {missing:?}"
            );
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the topic could not be read"
        );
        // The pause between two reads, not a wait standing in for the condition.
        std::thread::park_timeout(Duration::from_millis(20));
    }
}

/// KIP-853, the ordinary case of a metadata quorum that runs for years: voter 3's disk is lost
/// for good. A fresh node 4 (not in `controller.quorum.voters`, so an observer) is formatted and
/// started, catches up, is added with `ringlog add-voter`, and the dead voter is removed with
/// `ringlog remove-voter`, all under acks=all produce load. Every acknowledged record is still
/// there, and every live node's voter set is {1, 2, 4}.
#[test]
fn a_lost_voter_is_replaced_under_load_without_losing_records() {
    let _serial = serial();
    let mut quorum = Quorum::format_with(3, "controller.quorum.observers=4");
    quorum.start_all();
    quorum.wait_for_leader(Duration::from_secs(20));
    quorum.create_topic(TOPIC, 1, &[]);
    quorum.wait_for_leader_of(TOPIC, Duration::from_secs(20));

    // Node 4 exists from here on (formatted, not started): the producer knows its address by
    // position, nodes 1..=4.
    quorum.add_node(4, "controller.quorum.observers=4");
    let addresses: Vec<String> = (1..=4).map(|id| quorum.address(id)).collect();
    let (stop, acknowledged, load) = start_load(&addresses[..3]);
    wait_for_load(&acknowledged, 5, "records acknowledged before the loss");

    // Voter 3 is lost for good: kill -9 and its data folder deleted.
    quorum.kill(3);
    std::fs::remove_dir_all(quorum.data_dir(3)).unwrap();

    // KIP-853: a node that has not caught up as an observer (here: not even started) is not
    // added; the leader answers REQUEST_TIMED_OUT, to be retried.
    let refused = eventually(Duration::from_secs(30), "an answer from the leader", || {
        let output = Command::new(RINGLOG)
            .args([
                "add-voter",
                "--bootstrap-server",
                &addresses[0],
                "--node-id",
                "4",
            ])
            .args(["--endpoint", &addresses[3]])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        assert!(!output.status.success(), "node 4 added before it ran");
        // An error code from a leader (not a connection to a dead one).
        (stderr.contains("add voter 4:") && !stderr.contains("os error")).then_some(stderr)
    });
    assert!(refused.contains("REQUEST_TIMED_OUT"), "{refused}");

    // The fresh node joins as an observer and catches up; the leader adds it once it has.
    quorum.start_node(4);
    let endpoint = addresses[3].clone();
    eventually(Duration::from_secs(60), "node 4 added as a voter", || {
        ringlog(&[
            "add-voter",
            "--bootstrap-server",
            &addresses[0],
            "--node-id",
            "4",
            "--endpoint",
            &endpoint,
        ])
        .or_else(|| {
            ringlog(&[
                "add-voter",
                "--bootstrap-server",
                &addresses[1],
                "--node-id",
                "4",
                "--endpoint",
                &endpoint,
            ])
        })
    });
    eventually(Duration::from_secs(60), "node 3 removed", || {
        ringlog(&[
            "remove-voter",
            "--bootstrap-server",
            &addresses[0],
            "--node-id",
            "3",
        ])
        .or_else(|| {
            ringlog(&[
                "remove-voter",
                "--bootstrap-server",
                &addresses[1],
                "--node-id",
                "3",
            ])
        })
    });

    // Every live node acts on the new voter set (it is in its log).
    for id in [1, 2, 4] {
        let address = quorum.address(id);
        eventually(
            Duration::from_secs(30),
            &format!("node {id} knows the voters {{1, 2, 4}}"),
            || (voters_known_by(&address)? == vec![1, 2, 4]).then_some(()),
        );
    }
    // Node 4's raft-metrics call it what it now is for the metadata partition: a voter (its
    // configuration still lists it as an observer).
    let metrics_port = quorum.node(4).metrics_port;
    eventually(
        Duration::from_secs(30),
        "node 4 reported as a voter",
        || {
            let samples = quorum::scrape_metrics(metrics_port)?;
            let state = |name: &str| {
                samples
                .get(&format!(
                    "kafka_server_raft_metrics_current_state{{partition=\"__cluster_metadata-0\",state=\"{name}\"}}"
                ))
                .copied()
            };
            (state("follower") == Some(1.0) || state("leader") == Some(1.0)).then_some(())
        },
    );
    // describe-quorum shows the new set with node 4's endpoint.
    let described = eventually(Duration::from_secs(30), "describe-quorum", || {
        ringlog(&["describe-quorum", "--bootstrap", &addresses[0]])
    });
    assert!(
        described.contains("CurrentVoters:          [1,2,4]"),
        "{described}"
    );
    assert!(
        described.contains(&format!("CONTROLLER://{endpoint}")),
        "{described}"
    );

    // The load goes on after the change; then no acknowledged record is lost.
    wait_for_load(&acknowledged, 5, "records acknowledged after the change");
    stop.store(true, Ordering::Relaxed);
    load.join().unwrap();
    let acknowledged = acknowledged.lock().unwrap().clone();
    assert_nothing_lost(&addresses, &addresses[..2], &acknowledged);

    // A restart of every live node (kill -9): each rebuilds the set {1, 2, 4} from its log,
    // though node 4's configuration still calls it an observer and 3 a voter; the three elect a
    // leader and commit.
    quorum.kill_all();
    for id in [1, 2, 4] {
        quorum.start_node(id);
    }
    for id in [1, 2, 4] {
        let address = quorum.address(id);
        eventually(
            Duration::from_secs(30),
            &format!("node {id} knows the voters {{1, 2, 4}} after its restart"),
            || (voters_known_by(&address)? == vec![1, 2, 4]).then_some(()),
        );
    }
    let live = [
        addresses[0].clone(),
        addresses[1].clone(),
        addresses[3].clone(),
    ];
    eventually(
        Duration::from_secs(30),
        "a metadata leader after the restart",
        || quorum::agreed_leader(&live, "__cluster_metadata", 0),
    );
    quorum.create_topic("after-the-restart", 1, &[]);
    assert_nothing_lost(&addresses, &addresses[..2], &acknowledged);

    // New topics are placed on the voter set in force, not on `controller.quorum.voters`:
    // every partition of a topic created now (the default factor, 3) is on 1, 2 and 4, none on
    // the removed 3, and a producer and a consumer use them.
    quorum.create_topic(PLACED, 3, &[]);
    let placed = eventually(
        Duration::from_secs(30),
        "the new topic's partitions with leaders",
        || leaders_and_replicas(&addresses[0], PLACED),
    );
    assert_eq!(placed.len(), 3);
    for (index, (leader, replicas)) in placed.iter().enumerate() {
        let mut sorted = replicas.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, vec![1, 2, 4], "partition {index}'s replicas");
        assert_ne!(*leader, 3, "partition {index}'s leader");
    }
    let live_bootstrap = live.join(",");
    quorum::produce_and_consume_every_partition(&live_bootstrap, PLACED, 3);
}

const PLACED: &str = "placed-after-the-replacement";

/// Every partition of `topic` as the node at `address` answers Metadata, once each has a
/// leader: (leader, replicas) in partition order.
fn leaders_and_replicas(address: &str, topic: &str) -> Option<Vec<(i32, Vec<i32>)>> {
    use ringlog_net::protocol::metadata_request;
    let mut client = Client::connect(address, Duration::from_millis(500)).ok()?;
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
    let partitions = &m.topics.first()?.partitions;
    (!partitions.is_empty()
        && partitions
            .iter()
            .all(|p| p.error_code == 0 && p.leader_id >= 1))
    .then(|| {
        let mut by_index: Vec<(i32, i32, Vec<i32>)> = partitions
            .iter()
            .map(|p| (p.partition_index, p.leader_id, p.replica_nodes.clone()))
            .collect();
        by_index.sort_unstable();
        by_index
            .into_iter()
            .map(|(_, leader, replicas)| (leader, replicas))
            .collect()
    })
}

/// The stderr of a `ringlog` run that must fail.
fn ringlog_fails(args: &[&str]) -> String {
    let output = Command::new(RINGLOG)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        !output.status.success(),
        "ringlog {} succeeded",
        args.join(" ")
    );
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// KIP-595: a leader that removes itself keeps leading until the removal is committed, then
/// resigns; the others elect a leader among themselves, and no acknowledged record is lost.
/// Before that, the refusals KIP-853 names: a voter added twice is DUPLICATE_VOTER, an unknown
/// one VOTER_NOT_FOUND, and a node that does not lead answers NOT_LEADER_OR_FOLLOWER.
#[test]
fn removing_the_leader_makes_it_resign_without_losing_records() {
    let _serial = serial();
    let mut quorum = Quorum::format(3);
    quorum.start_all();
    let (leader, _) = quorum.wait_for_leader(Duration::from_secs(20));
    quorum.create_topic(TOPIC, 1, &[]);
    quorum.wait_for_leader_of(TOPIC, Duration::from_secs(20));
    let addresses: Vec<String> = (1..=3).map(|id| quorum.address(id)).collect();

    let error = ringlog_fails(&[
        "add-voter",
        "--bootstrap-server",
        &addresses[0],
        "--node-id",
        "2",
        "--endpoint",
        &addresses[1],
    ]);
    assert!(error.contains("DUPLICATE_VOTER"), "{error}");
    let error = ringlog_fails(&[
        "remove-voter",
        "--bootstrap-server",
        &addresses[0],
        "--node-id",
        "9",
    ]);
    assert!(error.contains("VOTER_NOT_FOUND"), "{error}");
    let follower = if leader == 1 { 2 } else { 1 };
    let mut client = Client::connect(&quorum.address(follower), Duration::from_secs(2)).unwrap();
    let cluster_id = client.cluster_id().unwrap();
    let (code, _) = client
        .remove_raft_voter(&cluster_id, leader, [0; 16])
        .unwrap();
    assert_eq!(
        code,
        ringlog_net::protocol::ErrorCode::NotLeaderOrFollower.code(),
        "a follower refuses"
    );
    let mut at_leader = Client::connect(&quorum.address(leader), Duration::from_secs(2)).unwrap();
    let (code, _) = at_leader
        .remove_raft_voter("another-cluster", follower, [0; 16])
        .unwrap();
    assert_eq!(
        code,
        ringlog_net::protocol::ErrorCode::InconsistentClusterId.code(),
        "another cluster's request"
    );

    // UpdateRaftVoter: voter 2 names its directory id and listener; DescribeQuorum shows them.
    // (Its own: a voter set naming another disk for node 2 would make it an observer, KIP-853.)
    let directory_id = disk_of(&quorum, 2);
    let update = Request::UpdateRaftVoter(update_raft_voter_request::UpdateRaftVoterRequest {
        cluster_id: Some(cluster_id.clone()),
        current_leader_epoch: -1,
        voter_id: 2,
        voter_directory_id: Uuid(directory_id),
        listeners: vec![update_raft_voter_request::Listener {
            name: "CONTROLLER".into(),
            host: "127.0.0.1".into(),
            port: quorum.node(2).port,
        }],
        k_raft_version_feature: update_raft_voter_request::KRaftVersionFeature {
            min_supported_version: 0,
            max_supported_version: 1,
        },
    });
    let Response::UpdateRaftVoter(answer) = at_leader.request(&update, 0).unwrap() else {
        panic!("not an UpdateRaftVoter answer")
    };
    assert_eq!(answer.error_code, 0, "UpdateRaftVoter");
    let described = at_leader.describe_quorum().unwrap();
    let voter_2 = described
        .partition
        .current_voters
        .iter()
        .find(|r| r.replica_id == 2)
        .expect("voter 2");
    assert_eq!(voter_2.replica_directory_id, Uuid(directory_id));

    let (stop, acknowledged, load) = start_load(&addresses);
    wait_for_load(&acknowledged, 5, "records acknowledged before the removal");
    let leader_id = leader.to_string();
    ringlog(&[
        "remove-voter",
        "--bootstrap-server",
        &quorum.address(leader),
        "--node-id",
        &leader_id,
    ])
    .expect("the leader removes itself");

    let rest: Vec<i32> = (1..=3).filter(|&id| id != leader).collect();
    for id in 1..=3 {
        let address = quorum.address(id);
        eventually(
            Duration::from_secs(30),
            &format!("node {id} knows the voters {rest:?}"),
            || (voters_known_by(&address)? == rest).then_some(()),
        );
    }
    // A new leader among the remaining voters; the removed one follows it as an observer.
    let new_leader = eventually(Duration::from_secs(30), "a leader among the rest", || {
        let view = Client::connect(&quorum.address(rest[0]), Duration::from_millis(500))
            .ok()?
            .describe_quorum()
            .ok()?;
        rest.contains(&view.partition.leader_id)
            .then_some(view.partition.leader_id)
    });
    assert_ne!(new_leader, leader);
    // The metadata quorum of the rest commits: a topic can be created.
    quorum.create_topic("after-the-removal", 1, &[]);

    wait_for_load(&acknowledged, 5, "records acknowledged after the removal");
    stop.store(true, Ordering::Relaxed);
    load.join().unwrap();
    let acknowledged = acknowledged.lock().unwrap().clone();
    assert_nothing_lost(&addresses, &addresses, &acknowledged);
}

/// `ringlog dev --spares 2`, run as a user runs it: nodes 1..=3 voters, 4 an observer, 5 and 6
/// spare observers. Killed (with its nodes, PR_SET_PDEATHSIG) when dropped.
struct DevRun {
    child: std::process::Child,
    data_dir: std::path::PathBuf,
}

impl DevRun {
    fn start(data_dir: &std::path::Path, base_port: u16) -> DevRun {
        let child = Command::new(RINGLOG)
            .arg("dev")
            .arg("--data-dir")
            .arg(data_dir)
            .args(["--base-port", &base_port.to_string()])
            .args([
                "--segment-bytes",
                "1048576",
                "--no-restart",
                "--spares",
                "2",
            ])
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(data_dir.with_extension("stdout")).unwrap())
            .stderr(std::fs::File::create(data_dir.with_extension("stderr")).unwrap())
            .spawn()
            .unwrap();
        DevRun {
            child,
            data_dir: data_dir.to_path_buf(),
        }
    }
}

impl Drop for DevRun {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let logs: Vec<(i32, std::path::PathBuf)> = (1..=6)
                .map(|id| (id, self.data_dir.join(format!("node-{id}.log"))))
                .collect();
            eprintln!(
                "--- dev stdout ---\n{}\n{}",
                std::fs::read_to_string(self.data_dir.with_extension("stdout")).unwrap_or_default(),
                quorum::log_tails(logs.iter().map(|(id, log)| (*id, log.as_path())), 20)
            );
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `count` consecutive free ports; the first.
fn consecutive_free_ports(count: u16) -> u16 {
    loop {
        let base = quorum::free_port();
        if (1..count).all(|step| quorum::free_port() == base + step) {
            return base;
        }
    }
}

/// Runs `ringlog <command> --bootstrap-server <any of addresses> <args>` until one node's
/// leader accepts it (a change in flight or a leader just elected answers a retriable error).
fn change_voters(addresses: &[String], command: &str, args: &[&str], what: &str) {
    eventually(Duration::from_secs(60), what, || {
        addresses.iter().find_map(|address| {
            let mut full = vec![command, "--bootstrap-server", address.as_str()];
            full.extend_from_slice(args);
            ringlog(&full)
        })
    });
}

/// Every node at `addresses` shows `voters` as the metadata quorum's voter set in force.
fn every_node_knows(addresses: &[String], voters: &[i32]) {
    for address in addresses {
        eventually(
            Duration::from_secs(30),
            &format!("{address} knows the voters {voters:?}"),
            || (voters_known_by(address)? == voters).then_some(()),
        );
    }
}

/// Issue 19: `ringlog dev --spares 2` grows to five voters and shrinks back to three, one
/// voter at a time (KIP-853: one change in flight, committed before the next), under acks=all
/// load; the shrink removes the current leader, which resigns once its removal is committed
/// (KIP-595). After each change, describe-quorum on every node (voters, the observer and the
/// spares alike) shows the new set, and no acknowledged record is lost.
#[test]
fn dev_grows_to_five_voters_and_shrinks_back_under_load() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().join("dev");
    // Six client listeners, then six controller listeners (the quorum's).
    let base_port = consecutive_free_ports(12);
    let _dev = DevRun::start(&data_dir, base_port);
    let addresses: Vec<String> = (0..6u16)
        .map(|i| format!("127.0.0.1:{}", base_port + i))
        .collect();
    let controller_addresses: Vec<String> = (6..12u16)
        .map(|i| format!("127.0.0.1:{}", base_port + i))
        .collect();
    every_node_knows(&addresses, &[1, 2, 3]);
    // Each spare's properties file is there for `ringlog serve --config`, as the others are.
    for id in 5..=6 {
        let text = std::fs::read_to_string(data_dir.join(format!("node-{id}.properties")))
            .expect("a spare's properties");
        assert!(text.contains(&format!("node.id={id}\n")), "{text}");
        assert!(text.contains("controller.quorum.observers=4,5,6"), "{text}");
    }
    quorum::create_topic_at(&addresses[..3], TOPIC, 1, &[]);
    eventually(Duration::from_secs(30), "a leader of the topic", || {
        quorum::agreed_leader(&addresses[..3], TOPIC, 0)
    });
    let (stop, acknowledged, load) = start_load(&addresses);
    wait_for_load(&acknowledged, 5, "records acknowledged at three voters");

    // Grow: 5, then 6 (each a committed change before the next).
    let mut voters = vec![1, 2, 3];
    for id in [5, 6] {
        let endpoint = controller_addresses[id as usize - 1].clone();
        let id_text = id.to_string();
        change_voters(
            &addresses,
            "add-voter",
            &["--node-id", &id_text, "--endpoint", &endpoint],
            &format!("node {id} added"),
        );
        voters.push(id);
        every_node_knows(&addresses, &voters);
        wait_for_load(
            &acknowledged,
            5,
            &format!("records acknowledged at {voters:?}"),
        );
    }
    assert_eq!(voters, vec![1, 2, 3, 5, 6]);

    // Shrink: the current leader first (it resigns), then one more.
    let leader = eventually(Duration::from_secs(30), "the metadata leader", || {
        let view = Client::connect(&addresses[0], Duration::from_millis(500))
            .ok()?
            .describe_quorum()
            .ok()?;
        voters
            .contains(&view.partition.leader_id)
            .then_some(view.partition.leader_id)
    });
    let second = *voters.iter().rev().find(|id| **id != leader).unwrap();
    for id in [leader, second] {
        let id_text = id.to_string();
        change_voters(
            &addresses,
            "remove-voter",
            &["--node-id", &id_text],
            &format!("node {id} removed"),
        );
        voters.retain(|v| *v != id);
        every_node_knows(&addresses, &voters);
        wait_for_load(
            &acknowledged,
            5,
            &format!("records acknowledged at {voters:?}"),
        );
    }
    assert_eq!(voters.len(), 3);
    // The removed leader resigned: the leader is one of the three.
    let view = eventually(Duration::from_secs(30), "a leader among the three", || {
        let view = Client::connect(
            &addresses[voters[0] as usize - 1],
            Duration::from_millis(500),
        )
        .ok()?
        .describe_quorum()
        .ok()?;
        voters.contains(&view.partition.leader_id).then_some(view)
    });
    assert_ne!(view.partition.leader_id, leader);
    quorum::create_topic_at(&addresses, "after-the-shrink", 1, &[]);

    stop.store(true, Ordering::Relaxed);
    load.join().unwrap();
    let acknowledged = acknowledged.lock().unwrap().clone();
    assert_nothing_lost(&addresses, &addresses[..3], &acknowledged);
}

/// The metadata quorum as its leader describes it, asked at each of `addresses` in turn:
/// `None` while none of them leads.
fn metadata_quorum_at_leader(
    addresses: &[String],
) -> Option<ringlog_net::protocol::describe_quorum_response::PartitionData> {
    addresses.iter().find_map(|address| {
        let view = Client::connect(address, Duration::from_millis(500))
            .ok()?
            .describe_quorum()
            .ok()?;
        (view.partition.error_code == 0 && view.partition.leader_id >= 0).then_some(view.partition)
    })
}

/// The directory id `ringlog format` wrote into node `id`'s `meta.properties`.
fn disk_of(quorum: &Quorum, id: i32) -> [u8; 16] {
    ringlog_net::meta_properties::MetaProperties::read(&quorum.data_dir(id))
        .unwrap()
        .directory_id
        .expect("ringlog format writes a directory.id")
}

/// KIP-853: a voter is its node id *and* its disk. A voter's data folder is deleted and
/// formatted again under the same node id (a new `directory.id`): the leader lists that node as
/// an observer with its new directory id, beside the voter with the old one, and it counts
/// neither toward the high-watermark nor in elections (with one more voter stopped, the two
/// real voters left of four are no majority: the leader resigns and nobody is elected). Once
/// it is removed and added again, its new disk is the voter: the leader is killed, and the
/// three left, the replaced node among them, elect a leader and commit a new topic.
#[test]
fn a_voter_on_a_replaced_disk_is_an_observer_until_it_is_added_again() {
    let _serial = serial();
    let mut quorum = Quorum::format_with(3, "controller.quorum.observers=4");
    quorum.add_node(4, "controller.quorum.observers=4");
    quorum.start_all();
    quorum.wait_for_leader(Duration::from_secs(20));
    let addresses: Vec<String> = (1..=4).map(|id| quorum.address(id)).collect();
    let address_of = |id: i32| addresses[id as usize - 1].clone();

    // The voter set goes into the log (Kafka's kraft.version 1) with node 4's addition; then
    // each voter has the leader record its directory id (UpdateRaftVoter, own_endpoint.rs).
    change_voters(
        &addresses,
        "add-voter",
        &["--node-id", "4", "--endpoint", &addresses[3]],
        "node 4 added",
    );
    let disks: Vec<[u8; 16]> = (1..=4).map(|id| disk_of(&quorum, id)).collect();
    eventually(
        Duration::from_secs(30),
        "every voter's directory id in the voter set",
        || {
            let p = metadata_quorum_at_leader(&addresses)?;
            let recorded: Vec<(i32, [u8; 16])> = p
                .current_voters
                .iter()
                .map(|v| (v.replica_id, v.replica_directory_id.0))
                .collect();
            let expected: Vec<(i32, [u8; 16])> = (1..=4).zip(disks.iter().copied()).collect();
            (recorded == expected).then_some(())
        },
    );

    // KIP-853: the first voter set in the log follows a KRaftVersionRecord (kraft.version 1),
    // as `ringlog dump --print-records` of the leader's metadata log shows.
    let leader = metadata_quorum_at_leader(&addresses)
        .expect("a leader")
        .leader_id;
    let segment = quorum
        .data_dir(leader)
        .join("__cluster_metadata-0")
        .join(format!("{:020}.log", 0));
    let dumped = ringlog(&["dump", segment.to_str().unwrap(), "--print-records"]).expect("dump");
    let controls: Vec<&str> = dumped
        .lines()
        .filter(|l| l.contains("control: KRaft"))
        .collect();
    assert!(
        controls.len() >= 2
            && controls[0].contains("KRaftVersion kraft.version: 1")
            && controls[1].contains("KRaftVoters voters: [1 (directory"),
        "{dumped}"
    );

    // The disk replaced is that of a configured voter that does not lead, while a configured
    // voter leads: a fresh disk finds the leader only through `controller.quorum.voters` (its
    // empty log does not name node 4's endpoint yet).
    let mut leader = metadata_quorum_at_leader(&addresses)
        .expect("a leader")
        .leader_id;
    if leader == 4 {
        quorum.kill(4);
        leader = eventually(Duration::from_secs(30), "a leader among 1..=3", || {
            Some(metadata_quorum_at_leader(&addresses[..3])?.leader_id)
        });
        quorum.start_node(4);
    }
    let replaced = (1..=3).find(|&id| id != leader).unwrap();
    let old_disk = disks[replaced as usize - 1];

    // Its data folder is deleted and formatted again under the same node id; it starts.
    quorum.kill(replaced);
    quorum.wipe(replaced);
    let new_disk = disk_of(&quorum, replaced);
    assert_ne!(new_disk, old_disk);
    quorum.start_node(replaced);
    let described = eventually(
        Duration::from_secs(30),
        "the replaced node fetching as an observer with its new directory id",
        || {
            let p = metadata_quorum_at_leader(&addresses)?;
            let voter = p.current_voters.iter().find(|v| v.replica_id == replaced)?;
            let observer = p.observers.iter().find(|o| o.replica_id == replaced)?;
            (voter.replica_directory_id.0 == old_disk
                && observer.replica_directory_id.0 == new_disk
                && observer.log_end_offset >= 0)
                .then_some(p)
        },
    );
    // `ringlog describe-quorum` shows it the same way.
    let leader_address = address_of(described.leader_id);
    let text = eventually(Duration::from_secs(10), "describe-quorum", || {
        ringlog(&["describe-quorum", "--bootstrap", &leader_address])
    });
    let new_disk_text = ringlog_net::meta_properties::uuid_text(&new_disk);
    assert!(
        text.lines()
            .skip_while(|l| !l.starts_with("ObserverId"))
            .any(|l| l.starts_with(&format!("{replaced} ")) && l.contains(&new_disk_text)),
        "{text}"
    );

    // With another voter stopped, leader plus one voter are two of four: the replaced node
    // does not make the third, so the leader resigns (check quorum) and nobody is elected.
    let stopped = (1..=4)
        .find(|&id| id != described.leader_id && id != replaced)
        .unwrap();
    quorum.kill(stopped);
    let live: Vec<String> = (1..=4)
        .filter(|&id| id != stopped)
        .map(address_of)
        .collect();
    eventually(
        Duration::from_secs(30),
        "the leader resigned: the replaced disk is not the voter",
        || metadata_quorum_at_leader(&live).is_none().then_some(()),
    );

    // Back to three real voters; the node is removed and added again with its new disk.
    quorum.start_node(stopped);
    eventually(Duration::from_secs(30), "a metadata leader again", || {
        metadata_quorum_at_leader(&addresses)
    });
    let replaced_id = replaced.to_string();
    change_voters(
        &addresses,
        "remove-voter",
        &["--node-id", &replaced_id],
        "the old disk's voter removed",
    );
    let replaced_address = address_of(replaced);
    change_voters(
        &addresses,
        "add-voter",
        &["--node-id", &replaced_id, "--endpoint", &replaced_address],
        "the replaced node added again",
    );
    let p = eventually(
        Duration::from_secs(30),
        "the voter recorded with its new directory id",
        || {
            let p = metadata_quorum_at_leader(&addresses)?;
            let voter = p.current_voters.iter().find(|v| v.replica_id == replaced)?;
            (voter.replica_directory_id.0 == new_disk).then_some(p)
        },
    );

    // Now it counts: the leader is killed (if the replaced node leads already, another voter
    // goes), and the three voters left, the replaced node among them, elect and commit.
    let stopped = if p.leader_id == replaced {
        (1..=4).find(|&id| id != replaced).unwrap()
    } else {
        p.leader_id
    };
    quorum.kill(stopped);
    let live: Vec<String> = (1..=4)
        .filter(|&id| id != stopped)
        .map(address_of)
        .collect();
    eventually(
        Duration::from_secs(30),
        "a metadata leader among three voters, the replaced node among them",
        || quorum::agreed_leader(&live, "__cluster_metadata", 0),
    );
    quorum::create_topic_at(&live, "after-the-new-disk", 1, &[]);
}
