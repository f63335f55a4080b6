//! Kafka topic configs beyond retention, and dynamic node configs, end to end with
//! confluent-kafka against a three-voter quorum of real `ringlog serve` processes:
//! - tests/clients/topic_configs.py: a `cleanup.policy=compact` topic refuses keyless records
//!   as Kafka does (INVALID_RECORD with RecordErrors) and keeps every keyed one;
//!   IncrementalAlterConfigs APPEND / SUBTRACT change the list `cleanup.policy`;
//!   `max.message.bytes` is a topic config; `message.format.version` is taken and ignored.
//! - tests/clients/codec_and_node_configs.py: `compression.type` recompresses what producers
//!   send (checked here in the batches the leader serves), the flush and cleaner configs are
//!   taken, validated and described, and dynamic node configs (`message.max.bytes` as the
//!   cluster default, a per-node one) apply at once and survive a restart of every node.

use std::time::Duration;

use ringlog_engine::batch::Compression;

mod quorum;
use quorum::{Quorum, eventually, read_partition_batches, run_client_script, serial};

#[test]
fn compacted_topics_list_policies_and_topic_message_limits_work_with_confluent_kafka() {
    let _serial = serial();
    let mut quorum = Quorum::start(3);
    quorum.wait_for_leader(Duration::from_secs(20));
    let bootstrap = quorum.bootstrap();
    run_client_script(
        &mut quorum,
        &bootstrap,
        "topic_configs.py",
        "cfg",
        Duration::from_secs(240),
        |_, _| None,
    );
}

/// The codecs of `topic`-0's batches as its leader serves them (as stored: a consumer Fetch
/// returns the log's bytes), once it serves at least `records` records (a leader elected
/// after the restart serves nothing until its high-watermark is known again).
fn stored_codecs(quorum: &Quorum, topic: &str, records: i32) -> Vec<(Compression, i32)> {
    eventually(Duration::from_secs(30), "the partition's batches", || {
        let (mut client, _) = quorum.partition_leader(topic)?;
        let batches = read_partition_batches(&mut client, topic).ok()?;
        let codecs: Vec<(Compression, i32)> = batches
            .iter()
            .filter(|b| !b.is_control())
            .map(|b| (b.compression(), b.records_count()))
            .collect();
        (codecs.iter().map(|(_, n)| n).sum::<i32>() >= records).then_some(codecs)
    })
}

/// Waits until `topic`-0's leader describes `name` as `value` (it applied the config change).
fn wait_for_leader_config(quorum: &Quorum, topic: &str, name: &str, value: &str) {
    use ringlog_net::protocol::{Request, Response, describe_configs_request as dc};
    let request = Request::DescribeConfigs(dc::DescribeConfigsRequest {
        resources: vec![dc::DescribeConfigsResource {
            resource_type: 2,
            resource_name: topic.into(),
            configuration_keys: Some(vec![name.into()]),
        }],
        ..Default::default()
    });
    eventually(
        Duration::from_secs(30),
        "the leader to apply the config",
        || {
            let (mut client, _) = quorum.partition_leader(topic)?;
            let Ok(Response::DescribeConfigs(r)) = client.request(&request, 4) else {
                return None;
            };
            let config = r.results.first()?.configs.first()?;
            (config.value.as_deref() == Some(value)).then_some(())
        },
    );
}

#[test]
fn compression_type_recompresses_and_node_configs_change_at_runtime() {
    let _serial = serial();
    let mut quorum = Quorum::start(3);
    quorum.wait_for_leader(Duration::from_secs(20));
    let bootstrap = quorum.bootstrap();
    run_client_script(
        &mut quorum,
        &bootstrap,
        "codec_and_node_configs.py",
        "codec",
        Duration::from_secs(300),
        |quorum, line| {
            if line.trim() == "wait-zstd" {
                wait_for_leader_config(quorum, "codec-lz4", "compression.type", "zstd");
                return Some("applied\n".into());
            }
            if line.trim() == "restart" {
                quorum.kill_all();
                quorum.start_all();
                quorum.wait_for_leader(Duration::from_secs(30));
                return Some("restarted\n".into());
            }
            None
        },
    );
    // 20 records sent uncompressed to the lz4 topic, then 20 with snappy after it became zstd.
    let lz4 = stored_codecs(&quorum, "codec-lz4", 40);
    let count = |codec| -> i32 {
        lz4.iter()
            .filter(|(c, _)| *c == codec)
            .map(|(_, n)| n)
            .sum()
    };
    assert_eq!(
        (count(Compression::Lz4), count(Compression::Zstd)),
        (20, 20),
        "{lz4:?}"
    );
    assert_eq!(
        lz4.len(),
        lz4.iter()
            .filter(|(c, _)| matches!(c, Compression::Lz4 | Compression::Zstd))
            .count()
    );
    // 20 records sent with gzip to the uncompressed topic (and the 30000-byte ones).
    let plain = stored_codecs(&quorum, "codec-plain", 20);
    assert!(
        !plain.is_empty() && plain.iter().all(|(c, _)| *c == Compression::None),
        "{plain:?}"
    );
}
