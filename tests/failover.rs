//! A leader killed with -9 is replaced without waiting for its followers' fetch timeout: its
//! sockets close with the process, the followers' fetches fail at once, and they stand after a
//! short random backoff, granting each other's pre-votes (replication/src/raft/fetch.rs). With
//! a fetch timeout of two minutes, a new leader of the metadata partition is still elected well
//! inside the test's patience; before, nothing happened until the timeout.

use std::time::Duration;

mod quorum;
use quorum::{Quorum, agreed_leader, eventually, serial};

/// The metadata partition's leader and epoch, if every node of `ids` names the same one.
fn agreed(quorum: &Quorum, ids: &[i32]) -> Option<(i32, i32)> {
    let addresses: Vec<String> = ids.iter().map(|id| quorum.address(*id)).collect();
    agreed_leader(&addresses, "__cluster_metadata", 0)
}

#[test]
fn a_killed_leader_is_replaced_before_its_followers_fetch_timeout() {
    let _serial = serial();
    let mut quorum = Quorum::format_with(3, "controller.quorum.fetch.timeout.ms=120000\n");
    quorum.start_all();
    let (leader, epoch) = quorum.wait_for_leader(Duration::from_secs(30));
    quorum.kill(leader);
    let survivors: Vec<i32> = (1..=3).filter(|id| *id != leader).collect();
    let (new_leader, new_epoch) = eventually(
        Duration::from_secs(40),
        "a new leader while the fetch timeout (120 s) is far off",
        || agreed(&quorum, &survivors).filter(|(id, e)| *id != leader && *e > epoch),
    );
    assert!(survivors.contains(&new_leader));
    assert!(new_epoch > epoch);
    // The old leader comes back as a follower of the new one.
    quorum.start_node(leader);
    eventually(Duration::from_secs(30), "the old leader follows", || {
        agreed(&quorum, &[1, 2, 3]).filter(|(id, _)| *id == new_leader)
    });
}

/// The whole quorum killed at once, its former leader started first: its EndQuorumEpoch meets
/// peers not yet listening, and the host answers the core's lost request BROKER_NOT_AVAILABLE,
/// so it sends it again after the retry backoff (net/src/node/quorum_rpc/peer_answers.rs, `peer_failed`)
/// and the others, once up, elect at once. With the request, fetch and election timeouts at
/// two minutes, nothing else would move the quorum within the test's patience: before, the
/// lost EndQuorumEpoch waited for the request timeout.
#[test]
fn a_quorum_killed_at_once_elects_when_its_restarted_leader_reaches_the_others() {
    let _serial = serial();
    let mut quorum = Quorum::format(3);
    quorum.start_all();
    let (leader, epoch) = quorum.wait_for_leader(Duration::from_secs(30));
    quorum.kill_all();
    for id in 1..=3 {
        quorum.set_config(
            id,
            "controller.quorum.fetch.timeout.ms=120000\n\
             controller.quorum.request.timeout.ms=120000\n\
             controller.quorum.election.timeout.ms=120000",
        );
    }
    // Its resignation goes out at its first turn, to peers that are down: the others start
    // once its log shows a lane to them failing (the lanes log that at debug level).
    let log = quorum.node(leader).log.clone();
    let earlier = std::fs::metadata(&log).map_or(0, |m| m.len() as usize);
    quorum.env.push((
        "RUST_LOG".into(),
        "info,ringlog_net::node::transport=debug".into(),
    ));
    quorum.start_node(leader);
    eventually(
        Duration::from_secs(10),
        "a lane of the former leader failing",
        || {
            let text = std::fs::read(&log).ok()?;
            String::from_utf8_lossy(text.get(earlier..)?)
                .contains("peer unreachable")
                .then_some(())
        },
    );
    quorum.start_all();
    let (new_leader, new_epoch) = eventually(
        Duration::from_secs(40),
        "a new leader while every timeout (120 s) is far off",
        || agreed(&quorum, &[1, 2, 3]).filter(|(_, e)| *e > epoch),
    );
    assert!((1..=3).contains(&new_leader));
    assert!(new_epoch > epoch);
}
