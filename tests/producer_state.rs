//! Producer state that outlives the batches it came from (carried by KIP-630 snapshots,
//! docs/snapshots.md "Producer state"), on real `ringlog serve` processes: after DeleteRecords
//! removed every batch of an idempotent producer and every node restarted, the producer is
//! still known (a retry of its last batch is
//! answered as a duplicate, a gap is out of order) and a confluent-kafka producer carries on
//! with no error and no duplicate; a follower that installed a snapshot fetched from its leader
//! knows the producers the snapshot replaced (the snapshot carries their state) and, once it
//! leads, answers a retry as a duplicate.

use std::time::Duration;

use bytes::Bytes;
use ringlog_engine::batch::{BatchIter, RecordBatchBuilder};
use ringlog_net::client::{Client, fetched_records};
use ringlog_net::protocol::{Request, Response, list_offsets_request as lo_req};

mod quorum;
use quorum::{
    Quorum, agreed_leader, checkpoints, consumer_fetch_request, eventually, high_watermark,
    new_producer_request, produce_to, run_client_script, segment_bases, serial,
};

const OUT_OF_ORDER_SEQUENCE_NUMBER: i16 = 45;
const COORDINATOR_LOAD_IN_PROGRESS: i16 = 14;

/// A batch of `count` records from producer `producer_id` (epoch 0) starting at `sequence`,
/// stamped now (as a client stamps them: `producer.id.expiration.ms` goes by the batches'
/// timestamps).
fn idempotent_batch(producer_id: i64, sequence: i32, count: usize) -> Bytes {
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let mut builder = RecordBatchBuilder::new(0).with_producer(producer_id, 0, sequence);
    for i in 0..count {
        builder.append(
            now_ms,
            None,
            Some(format!("s{}", sequence as usize + i).as_bytes()),
            &[],
        );
    }
    builder.build().into_bytes()
}

/// A new producer id from `client`, retried while the node gets its first block.
fn new_producer_id(client: &mut Client) -> i64 {
    eventually(Duration::from_secs(20), "a producer id", || {
        let Response::InitProducerId(r) = client.request(&new_producer_request(), 4).unwrap()
        else {
            panic!("not an InitProducerId answer")
        };
        match r.error_code {
            0 => Some(r.producer_id),
            COORDINATOR_LOAD_IN_PROGRESS => None,
            other => panic!("InitProducerId answered {other}"),
        }
    })
}

/// A client of `topic`-0's leader once every node agrees on it.
fn leader_client(quorum: &Quorum, topic: &str) -> Client {
    let (leader, _) = quorum.wait_for_leader_of(topic, Duration::from_secs(30));
    Client::connect(&quorum.address(leader), Duration::from_secs(2)).unwrap()
}

/// The log start of `topic`-0 (ListOffsets earliest at its leader `client`).
fn earliest(client: &mut Client, topic: &str) -> i64 {
    let request = Request::ListOffsets(lo_req::ListOffsetsRequest {
        replica_id: -1,
        topics: vec![lo_req::ListOffsetsTopic {
            name: topic.to_string(),
            partitions: vec![lo_req::ListOffsetsPartition {
                partition_index: 0,
                timestamp: -2,
                ..Default::default()
            }],
        }],
        ..Default::default()
    });
    let Response::ListOffsets(r) = client.request(&request, 7).unwrap() else {
        panic!("not a ListOffsets answer")
    };
    let p = &r.topics[0].partitions[0];
    assert_eq!(p.error_code, 0, "{r:?}");
    p.offset
}

/// The producer id of each batch the newest snapshot of partition folder `dir` carries in its
/// `ProducerState` record (docs/snapshots.md); the snapshot must end at `end_offset`.
fn producers_in_snapshot(dir: &std::path::Path, end_offset: u64) -> Vec<i64> {
    let mut io = ringlog_engine::io::SyscallIo::new();
    let (contents, _) = ringlog_engine::snapshot::latest_valid_snapshot(&mut io, dir).unwrap();
    let contents = contents.expect("a snapshot");
    assert_eq!(contents.snapshot_id.end_offset, end_offset as i64);
    let value = ringlog_replication::host::snapshots::producer_state_of_snapshot(&contents)
        .expect("a ProducerState record");
    let state = ringlog_net::node::producer_state_file::decode(&value).unwrap();
    assert_eq!(state.offset, end_offset);
    state.batches.iter().map(|b| b.producer_id).collect()
}

/// (base sequence, base offset) of every data batch of `topic`-0 from `offset` to the
/// high-watermark, read with consumer Fetches at the leader `client`.
fn producer_batches_from(client: &mut Client, topic: &str, mut offset: i64) -> Vec<(i32, i64)> {
    let mut batches = Vec::new();
    loop {
        let Response::Fetch(f) = client
            .request(&consumer_fetch_request(topic, offset, 0), 12)
            .unwrap()
        else {
            panic!("not a Fetch answer")
        };
        let data = &f.responses[0].partitions[0];
        assert_eq!(data.error_code, 0, "Fetch at {offset}");
        if offset >= data.high_watermark {
            return batches;
        }
        for batch in BatchIter::new(fetched_records(data)) {
            let batch = batch.unwrap();
            offset = batch.next_offset();
            if !batch.is_control() {
                batches.push((batch.header().base_sequence(), batch.base_offset()));
            }
        }
    }
}

/// KIP-360's producer state kept across a log start move and a restart: two batches, then
/// DeleteRecords up to the high-watermark (every batch of the producer removed, on every
/// replica), then every node kill -9'd and restarted. The producer is still known: its retry of
/// the last batch is answered with the batch's original offset and not stored again, a batch
/// after a gap is OUT_OF_ORDER_SEQUENCE_NUMBER (an unknown producer is taken at any
/// sequence), and the next batch in line is appended.
#[test]
fn a_producer_whose_batches_were_deleted_stays_known_across_a_restart() {
    producer_known_after_delete_records_and_a_restart("delete");
}

/// The same on a `cleanup.policy=snapshot` topic, whose DeleteRecords at the high-watermark
/// generates a snapshot of its state machine on every replica (the snapshot writer thread
/// writes the producer state, not the empty snapshot's path).
#[test]
fn a_producer_whose_batches_a_snapshot_replaced_stays_known_across_a_restart() {
    producer_known_after_delete_records_and_a_restart("snapshot");
}

fn producer_known_after_delete_records_and_a_restart(cleanup_policy: &str) {
    let _serial = serial();
    let mut quorum = Quorum::start(3);
    quorum.wait_for_leader(Duration::from_secs(30));
    let topic = "kept";
    // Small segments, so the producer's batches are in a segment that the cut deletes: a
    // restart then cannot read them back from a segment still on disk below the log start.
    quorum.create_topic(
        topic,
        1,
        &[
            ("segment.bytes", "65536"),
            ("cleanup.policy", cleanup_policy),
        ],
    );
    let mut client = leader_client(&quorum, topic);
    let producer_id = new_producer_id(&mut client);
    // A new topic's first record is at offset 0 (no LeaderChange into an empty log), but the
    // offsets are read from the answers, not assumed.
    let (code, first) = produce_to(&mut client, topic, 0, idempotent_batch(producer_id, 0, 5));
    assert_eq!(code, 0);
    assert_eq!(
        produce_to(&mut client, topic, 0, idempotent_batch(producer_id, 5, 5)),
        (0, first + 5)
    );
    // Plain records after them, enough to roll the first segment.
    let mut end = first + 10;
    for _ in 0..12 {
        let mut filler = RecordBatchBuilder::new(0);
        filler.append(0, None, Some(&[b'f'; 8000]), &[]);
        let (code, at) = produce_to(&mut client, topic, 0, filler.build().into_bytes());
        assert_eq!(code, 0);
        end = at + 1;
    }

    assert_eq!(
        quorum::delete_records(&mut client, topic, -1, 10_000),
        (0, end)
    );
    // Every replica cut its log at the end (a snapshot there, carrying the producer state)
    // and deleted the segment that held the producer's batches.
    for node in &quorum.nodes {
        let dir = quorum.data_dir(node.id).join(format!("{topic}-0"));
        eventually(
            Duration::from_secs(30),
            &format!(
                "node {}'s log to start at {end} without the first segment",
                node.id
            ),
            || {
                let cut = checkpoints(&dir).last() == Some(&(end as u64));
                let gone = segment_bases(&dir)
                    .first()
                    .is_some_and(|&base| base > first as u64 + 9);
                (cut && gone).then_some(())
            },
        );
        assert_eq!(
            producers_in_snapshot(&dir, end as u64),
            vec![producer_id; 2],
            "node {}: the snapshot at the cut carries the producer's two batches",
            node.id
        );
    }

    quorum.kill_all();
    for node in [1, 2, 3] {
        quorum.wait_for_ports_released(node);
    }
    quorum.start_all();
    // Produce is answered by the leader once its epoch is committed: retried until then, at
    // whichever node leads by then. The nodes first agree on the leader their quorum-state
    // names, which comes back Resigned and tells the others so (EndQuorumEpoch), so the
    // leadership may move once more after the restart.
    let (mut client, retry) = eventually(Duration::from_secs(30), "the retry answered", || {
        let mut client = leader_client(&quorum, topic);
        let answer = produce_to(&mut client, topic, 0, idempotent_batch(producer_id, 5, 5));
        (answer.0 == 0).then_some((client, answer))
    });
    assert_eq!(
        retry,
        (0, first + 5),
        "a retry of a deleted batch is a duplicate, answered with its offset"
    );
    assert_eq!(earliest(&mut client, topic), end);
    assert_eq!(
        produce_to(&mut client, topic, 0, idempotent_batch(producer_id, 12, 1)).0,
        OUT_OF_ORDER_SEQUENCE_NUMBER,
        "the producer is known: a gap is out of order"
    );
    let (code, at) = produce_to(&mut client, topic, 0, idempotent_batch(producer_id, 10, 1));
    assert_eq!(code, 0);
    // After the cut: the new leader's control record, then sequence 10 alone (the retry
    // appended nothing).
    assert_eq!(
        producer_batches_from(&mut client, topic, end),
        vec![(10, at)]
    );
}

/// KIP-630 with KIP-360's producer state: a follower down while an idempotent producer writes
/// two batches and DeleteRecords cuts the log past them comes back behind the leader's log
/// start, so it installs the leader's snapshot (FetchSnapshot) instead of fetching the
/// batches. The snapshot carries the producer state at its end offset: once that follower
/// leads, the producer's retry of its second batch is answered with the batch's original
/// offset and not stored again, a gap is out of order, and the next batch in line follows.
/// Before snapshots carried the state, the follower did not know the producer and stored the
/// retry a second time.
#[test]
fn a_follower_that_installed_a_snapshot_answers_a_retry_as_a_duplicate_once_it_leads() {
    retry_at_a_follower_rebuilt_from_a_snapshot("delete");
}

/// The same on a `cleanup.policy=snapshot` topic, whose snapshot is its state machine's,
/// written on the leader's snapshot-writer thread.
#[test]
fn a_follower_that_installed_a_state_machine_snapshot_answers_a_retry_as_a_duplicate() {
    retry_at_a_follower_rebuilt_from_a_snapshot("snapshot");
}

fn retry_at_a_follower_rebuilt_from_a_snapshot(cleanup_policy: &str) {
    let _serial = serial();
    // A replica down for a second no longer holds the leader's log start back.
    let mut quorum = Quorum::format_with(3, "max.replication.lag.ms=1000");
    quorum.start_all();
    quorum.wait_for_leader(Duration::from_secs(30));
    let topic = "moved";
    let partition = format!("{topic}-0");
    quorum.create_topic(
        topic,
        1,
        &[
            ("segment.bytes", "65536"),
            ("cleanup.policy", cleanup_policy),
        ],
    );
    let (leader, _) = quorum.wait_for_leader_of(topic, Duration::from_secs(30));
    let behind = (1..=3).find(|id| *id != leader).unwrap();
    quorum.kill(behind);

    let mut client = Client::connect(&quorum.address(leader), Duration::from_secs(2)).unwrap();
    let producer_id = new_producer_id(&mut client);
    let (code, first) = produce_to(&mut client, topic, 0, idempotent_batch(producer_id, 0, 5));
    assert_eq!(code, 0);
    assert_eq!(
        produce_to(&mut client, topic, 0, idempotent_batch(producer_id, 5, 5)),
        (0, first + 5)
    );
    // Plain records after them, enough to roll the first segment.
    let mut end = first + 10;
    for _ in 0..12 {
        let mut filler = RecordBatchBuilder::new(0);
        filler.append(0, None, Some(&[b'f'; 8000]), &[]);
        let (code, at) = produce_to(&mut client, topic, 0, filler.build().into_bytes());
        assert_eq!(code, 0);
        end = at + 1;
    }
    assert_eq!(
        quorum::delete_records(&mut client, topic, -1, 20_000),
        (0, end)
    );
    let leader_dir = quorum.data_dir(leader).join(&partition);
    eventually(
        Duration::from_secs(30),
        "the leader's log to start at the cut without the producer's segment",
        || {
            let cut = checkpoints(&leader_dir).last() == Some(&(end as u64));
            let gone = segment_bases(&leader_dir)
                .first()
                .is_some_and(|&base| base > first as u64 + 9);
            (cut && gone).then_some(())
        },
    );

    // The replica that was down ends below the leader's log start: it installs the snapshot.
    quorum.start_node(behind);
    let behind_dir = quorum.data_dir(behind).join(&partition);
    eventually(
        Duration::from_secs(60),
        "the replica behind to install the leader's snapshot",
        || {
            // Its own log held nothing past the leader's first records: a snapshot at the
            // cut and no segment below it can only come from the leader's snapshot.
            let installed = checkpoints(&behind_dir).contains(&(end as u64))
                && segment_bases(&behind_dir)
                    .iter()
                    .all(|&base| base >= end as u64);
            installed.then_some(())
        },
    );
    eventually(
        Duration::from_secs(30),
        "the replica behind to catch up",
        || (high_watermark(quorum.node(behind), &partition)? >= end).then_some(()),
    );

    // Leadership moves to it: the others are kill -9'd in turn (one of the two down at a
    // time, brought back before the next) until it is the one elected.
    let mut down = leader;
    quorum.kill(down);
    for round in 0.. {
        assert!(round < 20, "the rebuilt replica never led");
        let running: Vec<String> = [1, 2, 3]
            .into_iter()
            .filter(|id| *id != down)
            .map(|id| quorum.address(id))
            .collect();
        let (elected, _) = eventually(Duration::from_secs(30), "a new leader", || {
            agreed_leader(&running, topic, 0).filter(|(id, _)| *id != down)
        });
        if elected == behind {
            break;
        }
        quorum.wait_for_ports_released(down);
        quorum.start_node(down);
        eventually(
            Duration::from_secs(30),
            "the restarted node to catch up",
            || {
                let theirs = high_watermark(quorum.node(elected), &partition)?;
                let ours = high_watermark(quorum.node(down), &partition)?;
                (ours >= theirs).then_some(())
            },
        );
        quorum.kill(elected);
        down = elected;
    }

    let mut client = Client::connect(&quorum.address(behind), Duration::from_secs(2)).unwrap();
    // Produce is answered by the new leader once its epoch is committed: retried until then.
    let retry = eventually(Duration::from_secs(30), "the retry answered", || {
        let answer = produce_to(&mut client, topic, 0, idempotent_batch(producer_id, 5, 5));
        (answer.0 == 0).then_some(answer)
    });
    assert_eq!(
        retry,
        (0, first + 5),
        "a retry of a batch the installed snapshot replaced is a duplicate, answered with its offset"
    );
    assert_eq!(earliest(&mut client, topic), end);
    assert_eq!(
        produce_to(&mut client, topic, 0, idempotent_batch(producer_id, 12, 1)).0,
        OUT_OF_ORDER_SEQUENCE_NUMBER,
        "the producer is known: a gap is out of order"
    );
    let (code, at) = produce_to(&mut client, topic, 0, idempotent_batch(producer_id, 10, 1));
    assert_eq!(code, 0);
    // After the cut: the leaders' control records, then sequence 10 alone (the retry
    // appended nothing).
    assert_eq!(
        producer_batches_from(&mut client, topic, end),
        vec![(10, at)]
    );
}

/// confluent-kafka with `enable.idempotence=true`: 500 records acknowledged, DeleteRecords
/// removes all of them, every node is killed and restarted, and the same producer sends 500
/// more: no error, every offset once, nothing duplicated (tests/clients/producer_state.py).
#[test]
fn confluent_kafka_idempotent_producer_goes_on_after_delete_records_and_a_restart() {
    let _serial = serial();
    let mut quorum = Quorum::start(3);
    quorum.wait_for_leader(Duration::from_secs(30));
    let bootstrap = quorum.bootstrap();
    let mut restarted = false;
    run_client_script(
        &mut quorum,
        &bootstrap,
        "producer_state.py",
        "producer-state",
        Duration::from_secs(240),
        |quorum, line| {
            if line.trim() != "RESTART" {
                return None;
            }
            quorum.kill_all();
            for node in [1, 2, 3] {
                quorum.wait_for_ports_released(node);
            }
            quorum.start_all();
            quorum.wait_for_leader(Duration::from_secs(30));
            restarted = true;
            Some("restarted\n".into())
        },
    );
    assert!(restarted, "the script never asked for the restart");
}

/// Kafka's `producer.id.expiration.ms`: a producer not seen for that long is forgotten, and
/// its next batch, whatever its sequence, is taken as an unknown producer's. Before it
/// expires, the same batch is out of order.
#[test]
fn a_producer_not_seen_for_the_expiration_time_is_forgotten() {
    let _serial = serial();
    let mut quorum = Quorum::format_with(3, "producer.id.expiration.ms=2000");
    quorum.start_all();
    quorum.wait_for_leader(Duration::from_secs(30));
    let topic = "expiring";
    quorum.create_topic(topic, 1, &[]);
    let mut client = leader_client(&quorum, topic);
    let producer_id = new_producer_id(&mut client);
    assert_eq!(
        produce_to(&mut client, topic, 0, idempotent_batch(producer_id, 0, 5)).0,
        0
    );
    assert_eq!(
        produce_to(&mut client, topic, 0, idempotent_batch(producer_id, 7, 1)).0,
        OUT_OF_ORDER_SEQUENCE_NUMBER,
        "known: a gap is out of order"
    );
    // Each probe is either refused (still known) or appended (forgotten).
    let at = eventually(Duration::from_secs(20), "the producer to expire", || {
        let (code, at) = produce_to(&mut client, topic, 0, idempotent_batch(producer_id, 7, 1));
        match code {
            0 => Some(at),
            OUT_OF_ORDER_SEQUENCE_NUMBER => None,
            other => panic!("Produce answered {other}"),
        }
    });
    assert!(at > 0);
}
