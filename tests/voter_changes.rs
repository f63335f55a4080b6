//! KIP-853 voter changes on real `ringlog serve` processes: a voter whose disk is lost for good
//! is replaced by a fresh node without downtime and without losing an acknowledged record,
//! with the operator's commands (`ringlog add-voter`, `ringlog remove-voter`,
//! `ringlog describe-quorum`).

mod quorum;

use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ringlog_net::node::client::Client;

use quorum::{
    Quorum, RINGLOG, batch_of, eventually, produce_to, read_partition_values, serial,
};

const TOPIC: &str = "replaced";

/// Runs `ringlog` with `args`; `Some(stdout)` when it exits 0.
fn ringlog(args: &[&str]) -> Option<String> {
    let output = Command::new(RINGLOG)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    if !output.status.success() {
        eprintln!(
            "ringlog {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        );
        return None;
    }
    Some(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// The metadata quorum's voter ids as node `address` knows them (DescribeQuorum v2's Nodes:
/// the voter set in force in its own log, KIP-853).
fn voters_known_by(address: &str) -> Option<Vec<i32>> {
    let view = Client::connect(address, Duration::from_millis(500))
        .ok()?
        .describe_quorum()
        .ok()?;
    let mut ids: Vec<i32> = view.nodes.iter().map(|n| n.node_id).collect();
    ids.sort_unstable();
    Some(ids)
}

/// Produces one-record batches (acks=all) to `TOPIC`-0 until `stop`, at whichever node leads
/// it; returns the values the leader acknowledged.
fn producer(quorum_addresses: Vec<String>, stop: Arc<AtomicBool>) -> Vec<String> {
    let mut acknowledged = Vec::new();
    let mut next = 0u64;
    let mut client: Option<Client> = None;
    while !stop.load(Ordering::Relaxed) {
        if client.is_none() {
            client = quorum_addresses.iter().find_map(|address| {
                let (leader, _) = quorum::agreed_leader(
                    std::slice::from_ref(address),
                    TOPIC,
                    0,
                )?;
                let index = usize::try_from(leader - 1).ok()?;
                let leader_address = quorum_addresses.get(index)?;
                Client::connect(leader_address, Duration::from_millis(500)).ok()
            });
            if client.is_none() {
                // No leader known yet: ask again (the pause is between two probes).
                std::thread::park_timeout(Duration::from_millis(20));
                continue;
            }
        }
        let value = format!("v-{next}");
        let answer = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            produce_to(client.as_mut().unwrap(), TOPIC, 0, batch_of(&value))
        }));
        match answer {
            Ok((0, _)) => {
                acknowledged.push(value);
                next += 1;
            }
            // Not the leader any more, a timeout, or a broken connection: find the leader again
            // and send the next value (an unacknowledged one may or may not be in the log).
            _ => {
                client = None;
                next += 1;
            }
        }
    }
    acknowledged
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
    let stop = Arc::new(AtomicBool::new(false));
    let load = {
        let (addresses, stop) = (addresses[..3].to_vec(), stop.clone());
        std::thread::spawn(move || producer(addresses, stop))
    };

    // Voter 3 is lost for good: kill -9 and its data folder deleted.
    quorum.kill(3);
    std::fs::remove_dir_all(quorum.data_dir(3)).unwrap();

    // The fresh node joins as an observer and catches up; the leader adds it once it has
    // (until then it answers REQUEST_TIMED_OUT: VoterNotCaughtUp).
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

    // The quorum still commits: keep the load going a little longer, then stop it.
    eventually(Duration::from_secs(30), "a record committed after the change", || {
        let (leader, _) = quorum::agreed_leader(&addresses[..2], TOPIC, 0)?;
        let mut client = Client::connect(&quorum.address(leader), Duration::from_secs(1)).ok()?;
        (produce_to(&mut client, TOPIC, 0, batch_of("after")).0 == 0).then_some(())
    });
    stop.store(true, Ordering::Relaxed);
    let acknowledged = load.join().unwrap();
    assert!(
        acknowledged.len() > 10,
        "the load produced only {} records",
        acknowledged.len()
    );

    // KIP-595: no acknowledged record is lost.
    let values = eventually(Duration::from_secs(30), "the topic read back", || {
        let (leader, _) = quorum::agreed_leader(&addresses[..2], TOPIC, 0)?;
        let mut client = Client::connect(&quorum.address(leader), Duration::from_secs(1)).ok()?;
        read_partition_values(&mut client, TOPIC).ok()
    });
    let values: std::collections::HashSet<String> = values
        .into_iter()
        .map(|v| String::from_utf8(v).unwrap())
        .collect();
    let missing: Vec<&String> = acknowledged.iter().filter(|v| !values.contains(*v)).collect();
    assert!(missing.is_empty(), "acknowledged but lost: {missing:?}");
}
