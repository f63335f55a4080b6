//! KIP-853 `controller.quorum.bootstrap.servers` on real `ringlog serve` processes: a node that
//! knows no voter, only a server to ask, finds the leader through that server's Fetch answer
//! (its NodeEndpoints give the leader's address), catches up as an observer, is added with
//! `ringlog add-voter`, and then votes in the quorum it learned from its log.

mod quorum;

use std::time::Duration;

use ringlog_net::client::Client;

use quorum::{Quorum, eventually, metadata_voters, run_ringlog as ringlog, serial};

/// The metadata quorum as its leader describes it, asked at any of `addresses`.
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

#[test]
fn a_node_with_only_bootstrap_servers_joins_as_an_observer_and_is_added_as_a_voter() {
    let _serial = serial();
    let mut quorum = Quorum::format_with(3, "controller.quorum.observers=4");
    quorum.start_all();
    let (leader, _) = quorum.wait_for_leader(Duration::from_secs(20));
    let voters: Vec<String> = (1..=3).map(|id| quorum.address(id)).collect();
    // Records in the metadata log for the new node to catch up on.
    quorum::create_topic_at(&voters, "joined", 1, &[]);

    // Node 4 knows one voter that does not lead, and nothing else: no
    // `controller.quorum.voters`. Only the answer of that voter can tell it where the leader is.
    let bootstrap = (1..=3).find(|&id| id != leader).unwrap();
    quorum.add_node(
        4,
        &format!(
            "controller.quorum.voters=\ncontroller.quorum.bootstrap.servers={}",
            quorum.controller_address(bootstrap)
        ),
    );
    quorum.start_node(4);
    let joined = quorum.address(4);

    // The leader lists it as an observer that reached its log end.
    eventually(
        Duration::from_secs(30),
        "node 4 fetching from the leader as a caught-up observer",
        || {
            let p = metadata_quorum_at_leader(&voters)?;
            let observer = p.observers.iter().find(|o| o.replica_id == 4)?;
            let leader_end = p
                .current_voters
                .iter()
                .find(|v| v.replica_id == p.leader_id)?
                .log_end_offset;
            (observer.log_end_offset > 0 && observer.log_end_offset >= leader_end).then_some(())
        },
    );
    let log = std::fs::read_to_string(&quorum.node(4).log).unwrap();
    assert!(
        log.contains("learned a quorum endpoint from an answer"),
        "node 4 dialed the leader at the endpoint an answer gave:\n{log}"
    );

    // `ringlog add-voter` adds it; every node, node 4 included, learns the new voter set from
    // its log (node 4 had none before: it knew no voter).
    eventually(Duration::from_secs(60), "node 4 added", || {
        voters.iter().find_map(|address| {
            ringlog(&[
                "add-voter",
                "--bootstrap-server",
                address,
                "--node-id",
                "4",
                "--endpoint",
                &joined,
            ])
        })
    });
    for address in voters.iter().chain([&joined]) {
        eventually(
            Duration::from_secs(30),
            &format!("{address} knows the voters 1..=4"),
            || (metadata_voters(address)? == [1, 2, 3, 4]).then_some(()),
        );
    }

    // A voter now: with the leader gone, a majority of four needs node 4's vote, and the three
    // left elect a leader.
    let leader = metadata_quorum_at_leader(&voters)
        .expect("a leader")
        .leader_id;
    quorum.kill(leader);
    let others: Vec<String> = (1..=4)
        .filter(|&id| id != leader)
        .map(|id| quorum.address(id))
        .collect();
    eventually(
        Duration::from_secs(30),
        "a new leader elected by the three voters left",
        || {
            let p = metadata_quorum_at_leader(&others)?;
            (p.leader_id != leader).then_some(())
        },
    );
}
