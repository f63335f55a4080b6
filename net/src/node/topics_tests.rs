//! Topic records, their configs and names (topics.rs).

use super::*;

#[test]
fn topic_records_round_trip_and_reject_junk() {
    let mut record = TopicRecord {
        name: "orders.v1".into(),
        topic_id: Uuid([7; 16]),
        partitions: 3,
        config: TopicConfig::default(),
        replicas: None,
    };
    assert_eq!(
        TopicRecord::decode_value(&record.encode_value()),
        Ok(record.clone())
    );
    record.config = TopicConfig {
        cleanup_policy: CleanupPolicy::Snapshot,
        retention_bytes: 1 << 20,
        retention_ms: -1,
        segment_bytes: Some(65536),
        snapshot_minimum_records: Some(100),
        max_message_bytes: Some(2_000_000),
        compression_type: super::super::topics::TopicCompression::Zstd,
        flush_messages: 10,
        flush_ms: 1000,
        delete_retention_ms: 900,
        min_compaction_lag_ms: 5,
        max_compaction_lag_ms: 3_600_000,
    };
    assert_eq!(
        TopicRecord::decode_value(&record.encode_value()),
        Ok(record)
    );
    for junk in [
        &b""[..],
        b"name=a",
        b"name=a\ttopic_id=zz\tpartitions=1",
        b"name=../x\ttopic_id=00000000000000000000000000000000\tpartitions=1",
        b"name=a\ttopic_id=00000000000000000000000000000000\tpartitions=0",
        b"name=a\ttopic_id=00000000000000000000000000000000\tpartitions=1\tcleanup.policy=shred",
        b"name=a\ttopic_id=00000000000000000000000000000000\tpartitions=1\tflush.ms=-1",
        b"\xff\xfe",
    ] {
        assert!(TopicRecord::decode_value(junk).is_err(), "{junk:?}");
    }
}

#[test]
fn records_of_the_first_format_read_with_default_retention() {
    // Written before retention existed: only cleanup.policy=delete after the partitions.
    let old =
        b"name=t\ttopic_id=0102030405060708090a0b0c0d0e0f10\tpartitions=2\tcleanup.policy=delete";
    let record = TopicRecord::decode_value(old).unwrap();
    assert_eq!(record.partitions, 2);
    assert_eq!(record.config, TopicConfig::default());
    assert_eq!(record.config.retention_ms, DEFAULT_RETENTION_MS);
    assert_eq!(record.config.retention_bytes, -1);
}

fn creatable(name: &str, value: Option<&str>) -> ct_req::CreatableTopicConfig {
    ct_req::CreatableTopicConfig {
        name: name.to_string(),
        value: value.map(str::to_string),
    }
}

#[test]
fn create_configs_are_validated_by_name() {
    let config = TopicConfig::from_create_configs(&[
        creatable("cleanup.policy", Some("snapshot")),
        creatable("retention.bytes", Some("1048576")),
        creatable("retention.ms", Some("-1")),
        creatable("segment.bytes", Some("65536")),
    ])
    .unwrap();
    assert_eq!(config.cleanup_policy, CleanupPolicy::Snapshot);
    assert_eq!(config.retention_bytes, 1_048_576);
    assert_eq!(config.retention_ms, -1);
    assert_eq!(config.segment_bytes, Some(65536));
    // A null value is Kafka's "the default".
    let config = TopicConfig::from_create_configs(&[creatable("retention.ms", None)]).unwrap();
    assert_eq!(config, TopicConfig::default());

    for (name, value) in [
        ("cleanup.policy", Some("compact,snapshot")),
        ("retention.bytes", Some("-2")),
        ("retention.ms", Some("soon")),
        ("segment.bytes", Some("100")),
        ("max.message.bytes", Some("-1")),
        ("flush.ms", Some("-5")),
        ("compression.type", Some("brotli")),
        ("unclean.leader.election.enable", Some("true")),
    ] {
        let error = TopicConfig::from_create_configs(&[creatable(name, value)]).unwrap_err();
        assert!(error.to_string().contains(name), "{error}");
    }
}

#[test]
fn topic_names_follow_kafkas_rule() {
    assert_eq!(validate_topic_name("a-b_c.d9"), Ok(()));
    for bad in ["", ".", "..", "a/b", "__internal", &"x".repeat(250)] {
        assert_eq!(
            validate_topic_name(bad),
            Err(ErrorCode::InvalidTopicException),
            "{bad}"
        );
    }
}

/// A new metadata leader is the controller only once its image applied past its epoch's first
/// record (its LeaderChange): before, a topic committed in an earlier epoch may be missing from
/// its image, and creating it again would replace it (`controller_caught_up`'s table).
#[test]
fn a_new_metadata_leader_acts_as_controller_only_once_caught_up() {
    use super::super::controller::{LogStart, controller_caught_up};
    use ringlog_replication::OffsetAndEpoch;
    let cache = [OffsetAndEpoch::new(0, 1), OffsetAndEpoch::new(7, 3)];
    let from_zero = LogStart {
        offset: 0,
        epoch: 3,
    };
    // No record of epoch 4 appended yet.
    assert!(!controller_caught_up(4, &cache, from_zero, 7));
    // Epoch 3 starts at 7: applied up to 7 (not the LeaderChange itself) is not enough.
    assert!(!controller_caught_up(3, &cache, from_zero, 0));
    assert!(!controller_caught_up(3, &cache, from_zero, 7));
    assert!(controller_caught_up(3, &cache, from_zero, 8));
    assert!(controller_caught_up(1, &cache[..1], from_zero, 1));
    // A snapshot of epoch 3 took every record up to the log end (40): no cache entry is left.
    let emptied = LogStart {
        offset: 40,
        epoch: 3,
    };
    assert!(controller_caught_up(3, &[], emptied, 40));
    assert!(!controller_caught_up(3, &[], emptied, 39));
    assert!(!controller_caught_up(4, &[], emptied, 40));
}

/// A topic's placement rides in its record: each partition's replicas, read back as written;
/// a record without it (every topic before replication factors) means every voter.
#[test]
fn topic_records_carry_each_partitions_replicas() {
    let record = TopicRecord {
        name: "rf1".into(),
        topic_id: Uuid([9; 16]),
        partitions: 3,
        config: TopicConfig::default(),
        replicas: Some(vec![vec![2], vec![3], vec![1]]),
    };
    let decoded = TopicRecord::decode_value(&record.encode_value()).unwrap();
    assert_eq!(decoded, record);
    assert_eq!(decoded.replicas_of(1, &[1, 2, 3]), vec![3]);
    assert_eq!(decoded.replicas_of(3, &[1, 2, 3]), Vec::<i32>::new());
    let old = b"name=t\ttopic_id=0102030405060708090a0b0c0d0e0f10\tpartitions=2";
    let old = TopicRecord::decode_value(old).unwrap();
    assert_eq!(old.replicas, None);
    // A record without placement: every voter, listed from a different one per partition
    // (the first replica leads first).
    assert_eq!(old.replicas_of(0, &[1, 2, 3]), vec![1, 2, 3]);
    assert_eq!(old.replicas_of(1, &[1, 2, 3]), vec![2, 3, 1]);
    let base = "name=t\ttopic_id=0102030405060708090a0b0c0d0e0f10\tpartitions=2\treplicas=";
    for junk in ["1", "1;2;3", "1,1;2", "1;", ";1", "1;-2", "1;x", "1,2;2,"] {
        let text = format!("{base}{junk}");
        assert!(
            TopicRecord::decode_value(text.as_bytes()).is_err(),
            "{junk}"
        );
    }
    assert!(TopicRecord::decode_value(format!("{base}1,2;3").as_bytes()).is_ok());
}
