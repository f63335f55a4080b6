//! A leader killed with -9 is replaced without waiting for its followers' fetch timeout: its
//! sockets close with the process, the followers' fetches fail at once, and they stand after a
//! short random backoff, granting each other's pre-votes (replication/src/raft/fetch.rs). With
//! a fetch timeout of two minutes, a new leader of the metadata partition is still elected well
//! inside the test's patience; before, nothing happened until the timeout.

use std::time::Duration;

use ringlog_net::client::Client;

mod quorum;
use quorum::{Quorum, eventually, serial};

/// The leader and epoch that every node of `ids` reports for the metadata partition, if they
/// agree on one.
fn agreed(quorum: &Quorum, ids: &[i32]) -> Option<(i32, i32)> {
    let mut seen = None;
    for id in ids {
        let view = Client::connect(&quorum.address(*id), Duration::from_millis(300))
            .ok()?
            .describe_quorum()
            .ok()?;
        let now = (view.partition.leader_id, view.partition.leader_epoch);
        if now.0 < 0 || seen.is_some_and(|s| s != now) {
            return None;
        }
        seen = Some(now);
    }
    seen
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
