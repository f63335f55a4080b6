//! Repair from a peer, on real `ringlog serve` processes: a follower whose stopped files hold a
//! flipped bit inside a sealed segment (acknowledged records that no longer read back) starts,
//! sets that segment and the later ones aside in `damaged/`, fetches the records again from its
//! leader, and ends with the same batches as the leader; it keeps serving its other partitions
//! meanwhile (the metadata partition here). Until it has caught up it grants no vote
//! (replication/src/raft/repair.rs; the rule itself is unit-tested there).

use std::time::Duration;

use ringlog_engine::batch::RecordBatchBuilder;

mod quorum;
use quorum::{Quorum, dumped_batches, eventually, produce_to, segment_bases, serial};

#[test]
fn a_follower_with_a_flipped_bit_in_a_sealed_segment_repairs_from_its_leader() {
    let _serial = serial();
    let mut quorum = Quorum::start(3);
    quorum.wait_for_leader(Duration::from_secs(30));
    let topic = "repaired";
    quorum.create_topic(topic, 1, &[("segment.bytes", "1048576")]);
    quorum.wait_for_leader_of(topic, Duration::from_secs(30));
    let (mut client, leader) = eventually(Duration::from_secs(20), "the topic's leader", || {
        quorum.partition_leader(topic)
    });
    // About 3 MiB acknowledged by all three (acks=all): three or four 1 MiB segments.
    for batch in 0..30 {
        let mut builder = RecordBatchBuilder::new(0);
        for i in 0..100 {
            builder.append(
                i,
                None,
                Some(format!("{batch}-{i}-{}", "x".repeat(1000)).as_bytes()),
                &[],
            );
        }
        let (code, _) = produce_to(&mut client, topic, 0, builder.build().into_bytes());
        assert_eq!(code, 0, "batch {batch}");
    }
    let follower = (1..=3).find(|id| *id != leader).unwrap();
    let dir = quorum.data_dir(follower).join(format!("{topic}-0"));
    let leader_dir = quorum.data_dir(leader).join(format!("{topic}-0"));
    eventually(
        Duration::from_secs(30),
        "the follower's sealed segments",
        || (segment_bases(&dir).len() >= 3).then_some(()),
    );

    // kill -9, then one bit flipped in the middle of the first (sealed) segment's batches.
    quorum.kill(follower);
    let first = dir.join(format!("{:020}.log", 0));
    let mut bytes = std::fs::read(&first).unwrap();
    bytes[300_000] ^= 0x10;
    std::fs::write(&first, &bytes).unwrap();

    quorum.start_node(follower);
    eventually(
        Duration::from_secs(30),
        "the damaged segments set aside",
        || {
            let damaged = std::fs::read_dir(dir.join("damaged")).ok()?;
            damaged
                .flatten()
                .any(|e| e.file_name() == "00000000000000000000.log")
                .then_some(())
        },
    );
    // The records come back from the leader; the marker goes once durable to its
    // high-watermark.
    eventually(Duration::from_secs(60), "the repair to finish", || {
        (!dir.join("repair-pending").exists() && segment_bases(&dir).first() == Some(&0))
            .then_some(())
    });
    assert!(
        quorum.exited().is_empty(),
        "a node exited: {:?}",
        quorum.exited()
    );
    // The metadata partition went on meanwhile: a topic created now is served.
    quorum.create_topic("after-repair", 1, &[]);
    quorum.wait_for_leader_of("after-repair", Duration::from_secs(30));

    // Stopped, the follower's log holds the leader's batches, every one.
    quorum.kill_all();
    let repaired = dumped_batches(&dir);
    let expected = dumped_batches(&leader_dir);
    assert!(expected.len() >= 30, "{expected:?}");
    assert_eq!(repaired, expected);
}
