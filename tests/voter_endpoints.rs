//! KIP-853 UpdateRaftVoter sent by the voters themselves, on real `ringlog serve` processes: a
//! voter that comes back at another address tells the leader, and every node finds it there;
//! once the voter set is in the log each voter has its directory id recorded (own_endpoint.rs).

mod quorum;

use std::time::Duration;

use ringlog_net::client::Client;
use ringlog_net::meta_properties::MetaProperties;
use ringlog_net::protocol::{Request, Response, Uuid, create_topics_request, metadata_request};

use quorum::{Quorum, batch_of, eventually, serial};

const MOVED: &str = "on-one-and-three";

/// CreateTopics `name` with one partition placed on `replicas` (the client's own assignment),
/// at whichever node is the controller.
fn create_topic_on(quorum: &Quorum, name: &str, replicas: &[i32]) {
    let request = Request::CreateTopics(create_topics_request::CreateTopicsRequest {
        topics: vec![create_topics_request::CreatableTopic {
            name: name.into(),
            num_partitions: -1,
            replication_factor: -1,
            assignments: vec![create_topics_request::CreatableReplicaAssignment {
                partition_index: 0,
                broker_ids: replicas.to_vec(),
            }],
            ..Default::default()
        }],
        timeout_ms: 5000,
        validate_only: false,
    });
    eventually(Duration::from_secs(30), "the topic created", || {
        quorum.nodes.iter().find_map(|node| {
            let mut client =
                Client::connect(&quorum.address(node.id), Duration::from_secs(1)).ok()?;
            let Ok(Response::CreateTopics(r)) = client.request(&request, 7) else {
                return None;
            };
            (r.topics[0].error_code == 0).then_some(())
        })
    });
}

/// Node `id`'s address as the node at `address` knows it: its DescribeQuorum endpoint and
/// its Metadata broker entry.
fn addresses_of(address: &str, id: i32) -> Option<(String, String)> {
    let mut client = Client::connect(address, Duration::from_millis(500)).ok()?;
    let view = client.describe_quorum().ok()?;
    let described = view
        .endpoints
        .iter()
        .find(|(node, _)| *node == id)?
        .1
        .clone();
    let request = Request::Metadata(metadata_request::MetadataRequest {
        topics: Some(Vec::new()),
        ..Default::default()
    });
    let Ok(Response::Metadata(m)) = client.request(&request, 12) else {
        return None;
    };
    let broker = m.brokers.iter().find(|b| b.node_id == id)?;
    Some((described, format!("{}:{}", broker.host, broker.port)))
}

/// KIP-853: voter 3 stops and comes back listening on another port, while the other nodes'
/// `controller.quorum.voters` still name the old one. At its start it finds its endpoint in the
/// voter set is not its listener and sends UpdateRaftVoter to the leader; the new endpoint is
/// committed, and every node shows it (DescribeQuorum) and sends clients there (Metadata).
/// Nodes dial it there too: a partition on voters 1 and 3 only, whose node 1 then restarts,
/// can elect and commit only if node 1 reaches node 3 (its Vote or BeginQuorumEpoch to 3, or
/// its Fetch from 3 as leader): an acks=all produce to it succeeds.
#[test]
fn a_voter_that_moved_address_tells_the_leader_and_is_found_there() {
    let _serial = serial();
    let mut quorum = Quorum::format(3);
    quorum.start_all();
    quorum.wait_for_leader(Duration::from_secs(20));
    create_topic_on(&quorum, MOVED, &[1, 3]);
    let on_one_and_three = |quorum: &Quorum| [quorum.address(1), quorum.address(3)];
    eventually(Duration::from_secs(30), "a leader of the topic", || {
        quorum::agreed_leader(&on_one_and_three(&quorum), MOVED, 0)
    });

    let old_address = quorum.address(3);
    quorum.kill(3);
    let port = quorum.move_listener(3);
    quorum.start_node(3);
    let new_address = format!("127.0.0.1:{port}");
    assert_ne!(new_address, old_address);
    for id in 1..=3 {
        let at = quorum.address(id);
        let expected = (new_address.clone(), new_address.clone());
        eventually(
            Duration::from_secs(30),
            &format!("node {id} knows node 3 at {new_address}"),
            || (addresses_of(&at, 3)? == expected).then_some(()),
        );
    }

    // Node 1 restarts: the partition on {1, 3} elects and commits only if 1 reaches 3 at its
    // new address (1's configuration still names the old one).
    quorum.kill(1);
    quorum.wait_for_ports_released(1);
    quorum.start_node(1);
    let code = eventually(
        Duration::from_secs(60),
        "an acks=all produce to the partition on 1 and 3",
        || {
            let (leader, _) = quorum::agreed_leader(&on_one_and_three(&quorum), MOVED, 0)?;
            let mut client =
                Client::connect(&quorum.address(leader), Duration::from_secs(1)).ok()?;
            let answer = client
                .produce(MOVED, 0, batch_of("after the move"), -1, 10_000)
                .ok()??;
            (answer.error_code == 0).then_some(answer.error_code)
        },
    );
    assert_eq!(code, 0);
    // The metadata quorum commits too: a topic is created.
    quorum.create_topic("after-the-move", 1, &[]);

    // KIP-853 directory ids: the voter set is in the log now (kraft.version 1), so each voter
    // has the leader record its `meta.properties` `directory.id` too (formatted with one).
    for id in 1..=3 {
        let directory_id = MetaProperties::read(&quorum.data_dir(id))
            .unwrap()
            .directory_id
            .expect("format writes directory.id");
        assert_ne!(directory_id, [0; 16]);
        eventually(
            Duration::from_secs(30),
            &format!("voter {id}'s directory id in the voter set"),
            || {
                // The leader describes its voters (with their directory ids).
                let (leader, _) = quorum::agreed_leader(
                    &[quorum.address(2), quorum.address(3)],
                    "__cluster_metadata",
                    0,
                )?;
                let view = Client::connect(&quorum.address(leader), Duration::from_millis(500))
                    .ok()?
                    .describe_quorum()
                    .ok()?;
                view.partition
                    .current_voters
                    .iter()
                    .any(|v| v.replica_id == id && v.replica_directory_id == Uuid(directory_id))
                    .then_some(())
            },
        );
    }
}
