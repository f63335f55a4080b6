//! A quorum on the plain-syscall storage backend, the fallback for hosts where io_uring is
//! blocked (`RINGLOG_IO=syscall`, docs/io.md). That backend runs its operations inside
//! `submit_and_wait` and has no readiness fd, so the event loop pumps it again at once instead of
//! sleeping on the ring (docs/node.md, "The event loop"). Every other node test runs on io_uring
//! where the machine allows it; a change to how the loop starts storage operations that works
//! only with a readiness fd would leave this quorum without a leader (a version measured on
//! 2026-12-04 did, and this test failed on it).

mod quorum;

use std::time::Duration;

use quorum::{Quorum, batch_of, eventually, read_partition_values, serial};

#[test]
fn a_quorum_on_the_syscall_backend_commits_and_keeps_its_records_across_kill_9() {
    let _serial = serial();
    let mut quorum = Quorum::format(3);
    quorum.env.push(("RINGLOG_IO".into(), "syscall".into()));
    quorum.start_all();
    quorum.wait_for_leader(Duration::from_secs(20));
    quorum.create_topic("plain", 1, &[]);
    let (leader, _) = quorum.wait_for_leader_of("plain", Duration::from_secs(20));
    quorum.produce("plain", leader, 20, "before");
    for node in &quorum.nodes {
        let log = std::fs::read_to_string(&node.log).unwrap();
        assert!(
            log.contains("io=\"syscall\"") || log.contains("io=syscall"),
            "node {} did not run on the syscall backend:\n{log}",
            node.id
        );
    }

    // Acknowledged records were durable on a majority: they survive kill -9 of every node.
    quorum.kill_all();
    quorum.start_all();
    quorum.wait_for_leader_of("plain", Duration::from_secs(30));
    for i in 0..5 {
        // A new leader answers NOT_LEADER_OR_FOLLOWER until its epoch's first record commits.
        eventually(Duration::from_secs(20), "an acknowledged produce", || {
            let (mut client, _) = quorum.partition_leader("plain")?;
            let answer = client
                .produce("plain", 0, batch_of(&format!("after-{i}")), -1, 10_000)
                .ok()??;
            (answer.error_code == 0).then_some(())
        });
    }
    let values = eventually(Duration::from_secs(20), "the records back", || {
        let (mut client, _) = quorum.partition_leader("plain")?;
        read_partition_values(&mut client, "plain").ok()
    });
    let expected: Vec<Vec<u8>> = (0..20)
        .map(|i| format!("before-{i}").into_bytes())
        .chain((0..5).map(|i| format!("after-{i}").into_bytes()))
        .collect();
    assert_eq!(values, expected, "{}", quorum.dump_logs());
}
