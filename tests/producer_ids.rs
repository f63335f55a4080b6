//! Producer ids unique across the cluster (KIP-730's blocks through the metadata log,
//! net/src/node/producer_ids.rs), on real `ringlog serve` processes: ids handed out by every
//! node, across a kill -9 of the metadata leader and a restart of the whole cluster, never
//! repeat; and every node holds its first block before any producer asks.

use std::collections::HashMap;
use std::time::Duration;

use ringlog_net::client::Client;
use ringlog_net::protocol::Response;

mod quorum;
use quorum::{Quorum, eventually, new_producer_request, serial};

/// COORDINATOR_LOAD_IN_PROGRESS: the node has no block yet (Kafka's answer; clients retry).
const COORDINATOR_LOAD_IN_PROGRESS: i16 = 14;

/// One new producer id from the node at `address`, retried as a client retries (no block yet,
/// a connection lost to a restart).
fn new_producer_id(client: &mut Option<Client>, address: &str) -> i64 {
    eventually(
        Duration::from_secs(30),
        &format!("a producer id from {address}"),
        || {
            if client.is_none() {
                *client = Client::connect(address, Duration::from_secs(2)).ok();
            }
            let request = new_producer_request();
            let Ok(Response::InitProducerId(r)) = client.as_mut()?.request(&request, 4) else {
                *client = None;
                return None;
            };
            match r.error_code {
                0 => {
                    assert_eq!(r.producer_epoch, 0);
                    Some(r.producer_id)
                }
                COORDINATOR_LOAD_IN_PROGRESS => None,
                other => panic!("InitProducerId at {address} answered error {other}"),
            }
        },
    )
}

/// Takes `per_node` ids from every running node, interleaved (one from each in turn, so two
/// nodes hand out ids in the same millisecond), recording who gave which; panics on the first
/// id handed out twice.
fn take_ids(
    quorum: &Quorum,
    nodes: &[i32],
    per_node: usize,
    seen: &mut HashMap<i64, (i32, &'static str)>,
    phase: &'static str,
) {
    let mut clients: Vec<(i32, String, Option<Client>)> = nodes
        .iter()
        .map(|&id| (id, quorum.address(id), None))
        .collect();
    for _ in 0..per_node {
        for (id, address, client) in &mut clients {
            let producer_id = new_producer_id(client, address);
            assert!(producer_id >= 0);
            if let Some(earlier) = seen.insert(producer_id, (*id, phase)) {
                panic!(
                    "producer id {producer_id} handed out by node {id} ({phase}) was already \
                     handed out by node {} ({})\n{}",
                    earlier.0,
                    earlier.1,
                    quorum.dump_logs()
                );
            }
        }
    }
}

/// KIP-730: each node hands out ids from blocks the controller committed to the metadata log.
/// Node 257 is an observer whose id equals node 1's modulo 256 (the old scheme's node bits), so
/// the two once shared an id space. More than one block (1000 ids) per node is taken, so every
/// node moves to a second block; then the metadata leader is killed (kill -9) and a new one
/// allocates, the old one comes back and asks the new one; then the whole cluster restarts.
#[test]
fn producer_ids_never_repeat_across_nodes_and_restarts() {
    let _serial = serial();
    let mut quorum = Quorum::format_with(3, "controller.quorum.observers=257");
    quorum.add_node(257, "controller.quorum.observers=257");
    quorum.start_all();
    let (first_leader, _) = quorum.wait_for_leader(Duration::from_secs(30));
    let all = [1, 2, 3, 257];
    let mut seen = HashMap::new();
    take_ids(&quorum, &all, 1100, &mut seen, "first run");

    quorum.kill(first_leader);
    let survivors: Vec<i32> = all
        .iter()
        .copied()
        .filter(|&id| id != first_leader)
        .collect();
    eventually(Duration::from_secs(30), "a new metadata leader", || {
        let mut client =
            Client::connect(&quorum.address(survivors[0]), Duration::from_secs(1)).ok()?;
        let view = client.describe_quorum().ok()?;
        (view.partition.leader_id >= 0 && view.partition.leader_id != first_leader).then_some(())
    });
    take_ids(&quorum, &survivors, 300, &mut seen, "leader killed");
    quorum.wait_for_ports_released(first_leader);
    quorum.start_node(first_leader);
    quorum.wait_for_leader(Duration::from_secs(30));
    take_ids(&quorum, &all, 300, &mut seen, "old leader back");

    quorum.kill_all();
    for id in all {
        quorum.wait_for_ports_released(id);
    }
    quorum.start_all();
    quorum.wait_for_leader(Duration::from_secs(30));
    take_ids(&quorum, &all, 300, &mut seen, "whole cluster restarted");
    // Every node handed out ids in each phase it ran: 4 * 1100 + 3 * 300 + 4 * 300 + 4 * 300.
    assert_eq!(seen.len(), 4 * 1100 + 3 * 300 + 4 * 300 + 4 * 300);
}

/// With a separate controller listener (`controller.listener.names`), AllocateProducerIds is a
/// quorum API: the nodes ask the controller on its controller listener, and ids still never
/// repeat across nodes.
#[test]
fn producer_id_blocks_are_asked_for_on_the_controller_listener() {
    let _serial = serial();
    let mut quorum = Quorum::format_with_controller_listeners(3, "");
    quorum.start_all();
    quorum.wait_for_leader(Duration::from_secs(30));
    let mut seen = HashMap::new();
    take_ids(&quorum, &[1, 2, 3], 1100, &mut seen, "controller listeners");
    assert_eq!(seen.len(), 3 * 1100);
}

/// A node asks for its first block once it knows the controller, not at the first
/// InitProducerId: once every node has logged its block, each node's first InitProducerId is
/// answered with an id at once, where before 2026-12-07 each node answered its first one
/// COORDINATOR_LOAD_IN_PROGRESS and librdkafka's producers logged a warning and retried.
/// The controller's own block (node 1 leads or not) and the observer's are both checked.
#[test]
fn every_node_holds_a_block_before_its_first_init_producer_id() {
    let _serial = serial();
    let mut quorum = Quorum::format_with(3, "controller.quorum.observers=4");
    quorum.add_node(4, "controller.quorum.observers=4");
    quorum.start_all();
    quorum.wait_for_leader(Duration::from_secs(30));
    for id in [1, 2, 3, 4] {
        let log = quorum.node(id).log.clone();
        eventually(
            Duration::from_secs(30),
            &format!("node {id}'s first producer id block"),
            || {
                let text = std::fs::read_to_string(&log).ok()?;
                text.contains("producer id block received").then_some(())
            },
        );
    }
    let mut seen = HashMap::new();
    for id in [1, 2, 3, 4] {
        let mut client = Client::connect(&quorum.address(id), Duration::from_secs(2)).unwrap();
        let Response::InitProducerId(r) = client.request(&new_producer_request(), 4).unwrap()
        else {
            panic!("not an InitProducerId answer")
        };
        assert_eq!(
            r.error_code,
            0,
            "node {id}'s first InitProducerId\n{}",
            quorum.dump_logs()
        );
        assert!(
            seen.insert(r.producer_id, id).is_none(),
            "id handed out twice"
        );
    }
}
