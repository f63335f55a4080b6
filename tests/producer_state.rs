//! Producer state that outlives the batches it came from (net/src/node/producer_state_file.rs),
//! on real `ringlog serve` processes: after DeleteRecords removed every batch of an idempotent
//! producer and every node restarted, the producer is still known (a retry of its last batch is
//! answered as a duplicate, a gap is out of order) and a confluent-kafka producer carries on
//! with no error and no duplicate.

use std::time::Duration;

use bytes::Bytes;
use ringlog_engine::batch::{BatchIter, RecordBatchBuilder};
use ringlog_net::client::{Client, fetched_records};
use ringlog_net::protocol::{
    Request, Response, delete_records_request as dr_req, init_producer_id_request,
    list_offsets_request as lo_req,
};

mod quorum;
use quorum::{
    Quorum, checkpoints, consumer_fetch_request, eventually, produce_to, run_client_script,
    segment_bases, serial,
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
        let request = Request::InitProducerId(init_producer_id_request::InitProducerIdRequest {
            transactional_id: None,
            transaction_timeout_ms: -1,
            producer_id: -1,
            producer_epoch: -1,
            ..Default::default()
        });
        let Response::InitProducerId(r) = client.request(&request, 4).unwrap() else {
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
/// generates a snapshot of its state machine on every replica (the snapshot writer's path
/// saves the producer state, not the empty snapshot's).
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

    let request = Request::DeleteRecords(dr_req::DeleteRecordsRequest {
        topics: vec![dr_req::DeleteRecordsTopic {
            name: topic.to_string(),
            partitions: vec![dr_req::DeleteRecordsPartition {
                partition_index: 0,
                offset: -1,
            }],
        }],
        timeout_ms: 10_000,
    });
    match client.request(&request, 2).unwrap() {
        Response::DeleteRecords(r) => {
            let p = &r.topics[0].partitions[0];
            assert_eq!((p.error_code, p.low_watermark), (0, end), "{r:?}");
        }
        other => panic!("answered {other:?}"),
    }
    // Every replica cut its log at the end (an empty snapshot there), saved the state first,
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
        assert!(dir.join("producer-state").exists(), "node {}", node.id);
    }

    quorum.kill_all();
    for node in [1, 2, 3] {
        quorum.wait_for_ports_released(node);
    }
    quorum.start_all();
    let mut client = leader_client(&quorum, topic);
    // Produce is answered by the leader once its epoch is committed: retried until then.
    let retry = eventually(Duration::from_secs(30), "the retry answered", || {
        let answer = produce_to(&mut client, topic, 0, idempotent_batch(producer_id, 5, 5));
        (answer.0 == 0).then_some(answer)
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
