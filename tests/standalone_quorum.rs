//! `ringlog format --standalone` (KIP-853's `kafka-storage format --standalone`) on real
//! `ringlog serve` processes: a first voter bootstraps a quorum of one, which grows to three
//! with `ringlog add-voter` and then survives the loss of its first voter.

mod quorum;

use std::process::{Command, Stdio};
use std::time::Duration;

use ringlog_net::client::Client;
use ringlog_net::protocol::{Request, Response, metadata_request};

use quorum::{Quorum, RINGLOG, eventually, metadata_voters, run_ringlog, serial};

/// The replicas of every partition of `topic` as the node at `address` answers Metadata, once
/// each partition has a leader, in partition order.
fn replicas_of(address: &str, topic: &str) -> Option<Vec<Vec<i32>>> {
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
    let mut partitions = m.topics.first()?.partitions.clone();
    if partitions.is_empty()
        || partitions
            .iter()
            .any(|p| p.error_code != 0 || p.leader_id < 0)
    {
        return None;
    }
    partitions.sort_by_key(|p| p.partition_index);
    Some(
        partitions
            .into_iter()
            .map(|p| {
                let mut replicas = p.replica_nodes;
                replicas.sort_unstable();
                replicas
            })
            .collect(),
    )
}

/// `--standalone` refuses a configuration whose `controller.quorum.voters` names other nodes:
/// they would count in the standalone voter's majorities (and could elect without it).
#[test]
fn standalone_refuses_a_configuration_with_other_voters() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("node-1.properties");
    std::fs::write(
        &config,
        format!(
            "node.id=1\ncontroller.quorum.voters=1@127.0.0.1:{},2@127.0.0.1:{}\n\
             listeners=127.0.0.1:{}\nmetadata.log.dir={}\n",
            quorum::free_port(),
            quorum::free_port(),
            quorum::free_port(),
            dir.path().join("node-1").display()
        ),
    )
    .unwrap();
    let output = Command::new(RINGLOG)
        .args(["format", "--standalone", "--config"])
        .arg(&config)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!output.status.success(), "formatted");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("--standalone"), "{stderr}");
    assert!(!dir.path().join("node-1").join("meta.properties").exists());
}

/// KIP-853: node 1 formatted with `--standalone` leads a quorum of one. Nodes 2 and 3 are
/// formatted as observers (the same `controller.quorum.voters`, listed in
/// `controller.quorum.observers`), catch up, and are added one at a time with `ringlog
/// add-voter`. Every node then knows the voters {1, 2, 3}; a topic created now (default
/// replication factor: the smaller of 3 and the voters in force) is on all three, and a
/// producer and a consumer use it; with node 1 killed, 2 and 3 elect a leader and commit.
#[test]
fn a_standalone_voter_bootstraps_a_quorum_that_grows_with_add_voter() {
    let _serial = serial();
    let observers = "controller.quorum.observers=2,3";
    let mut quorum = Quorum::format_with_args(1, observers, &["--standalone"]);
    quorum.add_node(2, observers);
    quorum.add_node(3, observers);
    quorum.start_all();
    let addresses: Vec<String> = (1..=3).map(|id| quorum.address(id)).collect();
    eventually(Duration::from_secs(20), "node 1 leads alone", || {
        let view = Client::connect(&addresses[0], Duration::from_millis(500))
            .ok()?
            .describe_quorum()
            .ok()?;
        (view.partition.leader_id == 1).then_some(())
    });
    assert_eq!(metadata_voters(&addresses[0]), Some(vec![1]));
    // A topic of the quorum of one: one replica.
    quorum::create_topic_at(&addresses[..1], "at-one-voter", 1, &[]);
    let at_one = eventually(Duration::from_secs(20), "the first topic", || {
        replicas_of(&addresses[0], "at-one-voter")
    });
    assert_eq!(at_one, vec![vec![1]]);

    for id in [2, 3] {
        let id_text = id.to_string();
        let endpoint = addresses[id as usize - 1].clone();
        eventually(
            Duration::from_secs(60),
            &format!("node {id} added as a voter"),
            || {
                run_ringlog(&[
                    "add-voter",
                    "--bootstrap-server",
                    &addresses[0],
                    "--node-id",
                    &id_text,
                    "--endpoint",
                    &endpoint,
                ])
            },
        );
    }
    for address in &addresses {
        eventually(
            Duration::from_secs(30),
            &format!("{address} knows the voters {{1, 2, 3}}"),
            || (metadata_voters(address)? == vec![1, 2, 3]).then_some(()),
        );
    }

    // The grown quorum places new topics on its three voters, and they serve clients.
    quorum::create_topic_at(&addresses, "at-three-voters", 3, &[]);
    let at_three = eventually(Duration::from_secs(30), "the second topic", || {
        replicas_of(&addresses[1], "at-three-voters")
    });
    assert_eq!(at_three, vec![vec![1, 2, 3]; 3]);
    quorum::produce_and_consume_every_partition(&addresses.join(","), "at-three-voters", 3);

    // Three voters, not one: without node 1 the other two elect a leader and commit.
    quorum.kill(1);
    let rest = [addresses[1].clone(), addresses[2].clone()];
    eventually(
        Duration::from_secs(30),
        "a metadata leader among 2 and 3",
        || {
            let (leader, _) = quorum::agreed_leader(&rest, "__cluster_metadata", 0)?;
            (leader != 1).then_some(())
        },
    );
    quorum::create_topic_at(&rest, "without-node-1", 1, &[]);
}
