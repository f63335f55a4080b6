//! A consumer that read up to the old leader's high-watermark keeps reading after a leader
//! change, with real `ringlog serve` processes.
//!
//! KIP-595: a new leader's high-watermark may sit below the old leader's until it commits a
//! record of its own epoch; a restarted node's starts at its log start. Kafka answers a consumer
//! fetch with OFFSET_OUT_OF_RANGE only below the log start or past the log END offset; an offset
//! between the high-watermark and the log end gets an empty answer and waits in the long poll.
//!
//! The window is made deterministic, not hoped for: every voter holds every record, all three
//! are killed, and one comes back alone. It cannot elect a leader, so its high-watermark stays
//! at its log start while its log still ends past the consumer's position, for as long as the
//! test likes. Then the others come back, a leader commits, and the parked position is read.
//!
//! The records are in a topic of their own (clients cannot write `__cluster_metadata`). A node
//! that comes back alone knows no commit of the metadata log either, so it learns the topic
//! from its metadata snapshot: the quorum snapshots its metadata after every record here.

use std::time::{Duration, Instant};

use ringlog_engine::batch::BatchIter;
use ringlog_net::client::{Client, fetched_records};
use ringlog_net::protocol::{Response, fetch_response};

mod quorum;
use quorum::{Quorum, checkpoints, eventually, high_watermark, read_partition_batches, serial};

const TOPIC: &str = "failover";
const METADATA_PARTITION: &str = "__cluster_metadata-0";
const OFFSET_OUT_OF_RANGE: i16 = 1;

/// Consumer Fetch v12 (replica id -1, no epochs) of `TOPIC`-0 at `offset`.
fn fetch_at(client: &mut Client, offset: i64, max_wait_ms: i32) -> fetch_response::PartitionData {
    let request = quorum::consumer_fetch_request(TOPIC, offset, max_wait_ms);
    let Response::Fetch(response) = client.request(&request, 12).expect("Fetch answered") else {
        panic!("not a Fetch answer");
    };
    response.responses[0].partitions[0].clone()
}

/// (offset, value) of every data record in a fetch answer, and the offset after its last batch.
fn read_answer(data: &fetch_response::PartitionData) -> (Vec<(i64, String)>, Option<i64>) {
    let mut out = Vec::new();
    let mut next_offset = None;
    for batch in BatchIter::new(fetched_records(data)) {
        let batch = batch.expect("a whole batch");
        next_offset = Some(batch.next_offset());
        if batch.is_control() {
            continue;
        }
        for record in batch.records().expect("records") {
            let record = record.expect("record");
            let value = String::from_utf8_lossy(record.value().map(|v| &v[..]).unwrap_or_default())
                .into_owned();
            out.push((record.offset(), value));
        }
    }
    (out, next_offset)
}

fn records_of(data: &fetch_response::PartitionData) -> Vec<(i64, String)> {
    read_answer(data).0
}

#[test]
fn a_fetch_between_high_watermark_and_log_end_waits_instead_of_out_of_range() {
    let _serial = serial();
    let mut quorum = Quorum::format_with(
        3,
        "controller.snapshot.minimum.records=1\n\
         metadata.log.max.record.bytes.between.snapshots=1",
    );
    quorum.start_all();
    let (metadata_leader, _) = quorum.wait_for_leader(Duration::from_secs(20));
    quorum.create_topic(TOPIC, 1, &[]);
    let (leader, _) = quorum.wait_for_leader_of(TOPIC, Duration::from_secs(20));
    quorum.produce(TOPIC, leader, 10, "record");
    // Every node's metadata snapshot holds the topic's record (committed below this).
    let topic_committed =
        high_watermark(quorum.node(metadata_leader), METADATA_PARTITION).expect("a scrape");
    for node in &quorum.nodes {
        let dir = quorum.data_dir(node.id).join(METADATA_PARTITION);
        eventually(
            Duration::from_secs(10),
            &format!("node {} to snapshot the topic's record", node.id),
            || {
                let end = *checkpoints(&dir).last()?;
                (end >= topic_committed as u64).then_some(())
            },
        );
    }

    // Every voter holds every committed record (the leader's view of their durable log ends).
    let committed: Vec<(i64, String)> = {
        let mut client = Client::connect(&quorum.address(leader), Duration::from_secs(2)).unwrap();
        let batches = read_partition_batches(&mut client, TOPIC).unwrap();
        batches
            .iter()
            .filter(|b| !b.is_control())
            .flat_map(|b| {
                b.records().unwrap().map(|r| {
                    let r = r.unwrap();
                    let value =
                        String::from_utf8_lossy(r.value().map(|v| &v[..]).unwrap_or_default());
                    (r.offset(), value.into_owned())
                })
            })
            .collect()
    };
    assert_eq!(committed.len(), 10);
    let old_high_watermark = committed.last().unwrap().0 + 1;
    eventually(Duration::from_secs(10), "every voter holds the log", || {
        let view = Client::connect(&quorum.address(leader), Duration::from_secs(1))
            .ok()?
            .describe_quorum_of(TOPIC, 0)
            .ok()?;
        view.partition
            .current_voters
            .iter()
            .all(|r| r.log_end_offset >= old_high_watermark)
            .then_some(())
    });

    // The consumer has read the first five records from the old leader.
    let (position, _) = committed[5].clone();

    quorum.kill_all();
    let alone = if leader == 1 { 2 } else { 1 };
    quorum.start_node(alone);
    // A request answered, not only a connection accepted: the killed process's listening socket
    // may outlive it for a moment (the node waits for the address to be freed). The topic's
    // partition runs once the node has loaded its metadata snapshot.
    let mut client = eventually(Duration::from_secs(10), "the node hosts the topic", || {
        let mut client = Client::connect(&quorum.address(alone), Duration::from_secs(2)).ok()?;
        let view = client.describe_quorum_of(TOPIC, 0).ok()?;
        (view.partition.error_code != 3).then_some(client)
    });

    // Alone, the node knows no commit: its high-watermark is its log start, below the position,
    // and its log still ends past it.
    let data = fetch_at(&mut client, position, 0);
    assert_eq!(
        data.error_code, 0,
        "a fetch at {position} (high-watermark {}, log end >= {old_high_watermark}) must not be out of range",
        data.high_watermark
    );
    assert!(data.high_watermark < position, "{data:?}");
    assert!(
        records_of(&data).is_empty(),
        "nothing above the high-watermark"
    );

    // In the long poll the fetch waits its max wait and then answers empty, without an error.
    let asked = Instant::now();
    let data = fetch_at(&mut client, position, 300);
    assert_eq!(data.error_code, 0);
    assert!(records_of(&data).is_empty());
    assert!(
        asked.elapsed() >= Duration::from_millis(250),
        "the fetch waited in the long poll ({:?})",
        asked.elapsed()
    );

    // Past the log end is still out of range.
    let beyond = fetch_at(&mut client, old_high_watermark + 1000, 0);
    assert_eq!(beyond.error_code, OFFSET_OUT_OF_RANGE);

    // The others come back; a leader commits; the consumer reads on from its position, nothing
    // skipped.
    quorum.start_all();
    let mut read = Vec::new();
    let mut next = position;
    eventually(
        Duration::from_secs(30),
        "the records after the position",
        || {
            let data = fetch_at(&mut client, next, 500);
            assert_eq!(data.error_code, 0, "fetch at {next}: {data:?}");
            let (records, next_offset) = read_answer(&data);
            read.extend(records.into_iter().filter(|(offset, _)| *offset >= next));
            next = next_offset.map_or(next, |n| n.max(next));
            (next >= old_high_watermark).then_some(())
        },
    );
    assert_eq!(read, committed[5..].to_vec());
}
