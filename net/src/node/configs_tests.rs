//! DescribeConfigs, IncrementalAlterConfigs and AlterConfigs of topics (configs.rs).

use super::*;

fn set(name: &str, value: &str) -> ia_req::AlterableConfig {
    ia_req::AlterableConfig {
        name: name.into(),
        config_operation: OP_SET,
        value: Some(value.into()),
    }
}

#[test]
fn retention_alterations_apply_and_delete_returns_to_the_default() {
    let current = TopicConfig::default();
    let altered = altered_topic_config(
        &current,
        &[
            set("retention.ms", "60000"),
            set("retention.bytes", "1048576"),
        ],
    )
    .unwrap();
    assert_eq!(altered.retention_ms, 60_000);
    assert_eq!(altered.retention_bytes, 1_048_576);
    let deleted = altered_topic_config(
        &altered,
        &[ia_req::AlterableConfig {
            name: "retention.ms".into(),
            config_operation: OP_DELETE,
            value: None,
        }],
    )
    .unwrap();
    assert_eq!(deleted.retention_ms, DEFAULT_RETENTION_MS);
    assert_eq!(deleted.retention_bytes, 1_048_576);
}

#[test]
fn legacy_alter_configs_resets_what_it_leaves_out() {
    let legacy = ac_req::AlterConfigsResource {
        resource_type: RESOURCE_TOPIC,
        resource_name: "t".into(),
        configs: vec![ac_req::AlterableConfig {
            name: "retention.ms".into(),
            value: Some("1000".into()),
        }],
    };
    let current = TopicConfig {
        retention_bytes: 1 << 20,
        ..TopicConfig::default()
    };
    let altered =
        altered_topic_config(&current, &incremental_from_legacy(&legacy).configs).unwrap();
    assert_eq!(altered.retention_ms, 1000);
    assert_eq!(altered.retention_bytes, -1, "left out: back to the default");
}

#[test]
fn what_cannot_change_at_runtime_is_refused_by_name() {
    let current = TopicConfig::default();
    let refused = |alterations: &[ia_req::AlterableConfig]| {
        altered_topic_config(&current, alterations).unwrap_err()
    };
    assert!(matches!(
        refused(&[set("cleanup.policy", "compact,snapshot")]),
        AlterConfigsError::Config(_)
    ));
    assert!(matches!(
        refused(&[set("segment.bytes", "1024")]),
        AlterConfigsError::Config(_)
    ));
    assert!(matches!(
        refused(&[set("max.message.bytes", "-5")]),
        AlterConfigsError::Config(_)
    ));
    assert!(matches!(
        refused(&[set("retention.ms", "soon")]),
        AlterConfigsError::Config(_)
    ));
    assert_eq!(
        refused(&[set("retention.ms", "1"), set("retention.ms", "2")]),
        AlterConfigsError::Duplicate("retention.ms".into())
    );
    let append = ia_req::AlterableConfig {
        name: "retention.ms".into(),
        config_operation: OP_APPEND,
        value: Some("1".into()),
    };
    assert!(matches!(
        refused(&[append]),
        AlterConfigsError::Operation { operation: 2, .. }
    ));
    // Setting a config to the value it has is no change, and allowed.
    assert!(altered_topic_config(&current, &[set("cleanup.policy", "delete")]).is_ok());
}

#[test]
fn max_message_bytes_is_a_topic_config_and_message_format_version_is_ignored() {
    let current = TopicConfig::default();
    let altered = altered_topic_config(
        &current,
        &[
            set("max.message.bytes", "2000000"),
            set("message.format.version", "0.10.0.0"),
        ],
    )
    .unwrap();
    assert_eq!(altered.max_message_bytes, Some(2_000_000));
    assert_eq!(
        TopicConfig {
            max_message_bytes: None,
            ..altered
        },
        current,
        "message.format.version changes nothing"
    );
    assert!(altered_topic_config(&current, &[set("message.format.version", "3.0-IV1")]).is_ok());
    assert!(matches!(
        altered_topic_config(&current, &[set("message.format.version", "newest")]),
        Err(AlterConfigsError::Config(_))
    ));
    // Left out of a legacy AlterConfigs, it returns to the node's message.max.bytes.
    let legacy = incremental_from_legacy(&ac_req::AlterConfigsResource {
        resource_type: RESOURCE_TOPIC,
        resource_name: "t".into(),
        configs: Vec::new(),
    });
    assert_eq!(
        altered_topic_config(&altered, &legacy.configs)
            .unwrap()
            .max_message_bytes,
        None
    );
}

#[test]
fn cleanup_policy_is_a_list_that_append_and_subtract_change() {
    let list_op = |operation, value: &str| ia_req::AlterableConfig {
        name: "cleanup.policy".into(),
        config_operation: operation,
        value: Some(value.into()),
    };
    let delete = TopicConfig::default();
    // librdkafka's 0011: APPEND compact to the default, then SUBTRACT it again.
    let both = altered_topic_config(&delete, &[list_op(OP_APPEND, "compact")]).unwrap();
    assert_eq!(both.cleanup_policy, CleanupPolicy::CompactDelete);
    assert_eq!(both.cleanup_policy.as_str(), "compact,delete");
    assert!(both.cleanup_policy.requires_keys() && both.cleanup_policy.deletes());
    let back = altered_topic_config(&both, &[list_op(OP_SUBTRACT, "compact")]).unwrap();
    assert_eq!(back.cleanup_policy, CleanupPolicy::Delete);
    let compact = altered_topic_config(&both, &[list_op(OP_SUBTRACT, "delete")]).unwrap();
    assert_eq!(compact.cleanup_policy, CleanupPolicy::Compact);
    assert!(!compact.cleanup_policy.deletes());
    // Appending what is there, or subtracting what is not, changes nothing.
    let same = altered_topic_config(&both, &[list_op(OP_APPEND, "delete")]).unwrap();
    assert_eq!(same.cleanup_policy, CleanupPolicy::CompactDelete);
    let same = altered_topic_config(&delete, &[list_op(OP_SUBTRACT, "compact")]).unwrap();
    assert_eq!(same.cleanup_policy, CleanupPolicy::Delete);
    assert_eq!(
        altered_topic_config(&compact, &[list_op(OP_SUBTRACT, "compact")]),
        Err(AlterConfigsError::EmptyList("cleanup.policy".into()))
    );
    assert!(matches!(
        altered_topic_config(&delete, &[list_op(OP_APPEND, "snapshot")]),
        Err(AlterConfigsError::Config(_))
    ));
    assert!(matches!(
        altered_topic_config(&delete, &[list_op(OP_APPEND, "shred")]),
        Err(AlterConfigsError::Config(_))
    ));
    // SET takes the list in any order, with spaces.
    let set_both = altered_topic_config(&delete, &[set("cleanup.policy", "delete, compact")]);
    assert_eq!(
        set_both.unwrap().cleanup_policy,
        CleanupPolicy::CompactDelete
    );
}

#[test]
fn cleanup_policy_and_segment_bytes_change_and_delete_returns_them_to_the_default() {
    let current = TopicConfig::default();
    let altered = altered_topic_config(
        &current,
        &[
            set("cleanup.policy", "snapshot"),
            set("segment.bytes", "1048576"),
        ],
    )
    .unwrap();
    assert_eq!(altered.cleanup_policy, CleanupPolicy::Snapshot);
    assert_eq!(altered.segment_bytes, Some(1_048_576));
    let with_minimum =
        altered_topic_config(&altered, &[set("snapshot.minimum.records", "10")]).unwrap();
    let delete = ia_req::AlterableConfig {
        name: "cleanup.policy".into(),
        config_operation: OP_DELETE,
        value: None,
    };
    // Back to delete, but snapshot.minimum.records applies to snapshot topics only.
    assert!(matches!(
        altered_topic_config(&with_minimum, std::slice::from_ref(&delete)),
        Err(AlterConfigsError::Config(_))
    ));
    let back = altered_topic_config(
        &with_minimum,
        &[
            delete,
            ia_req::AlterableConfig {
                name: "snapshot.minimum.records".into(),
                config_operation: OP_DELETE,
                value: None,
            },
        ],
    )
    .unwrap();
    assert_eq!(back.cleanup_policy, CleanupPolicy::Delete);
    assert_eq!(back.snapshot_minimum_records, None);
    assert_eq!(back.segment_bytes, Some(1_048_576));
}

#[test]
fn sources_tell_topic_settings_from_defaults_and_node_settings() {
    let config = TopicConfig {
        retention_ms: 1000,
        ..TopicConfig::default()
    };
    let node = NodeTopicDefaults {
        segment_bytes: (1 << 20, true),
        message_max_bytes: (1 << 20, SOURCE_DEFAULT),
        snapshot_minimum_records: (16_384, false),
    };
    let described = describe_topic_configs(&config, &node);
    let source = |name| described.iter().find(|c| c.name == name).unwrap().source;
    assert_eq!(source("retention.ms"), SOURCE_TOPIC);
    assert_eq!(source("retention.bytes"), SOURCE_DEFAULT);
    assert_eq!(source("cleanup.policy"), SOURCE_DEFAULT);
    assert_eq!(source("segment.bytes"), SOURCE_STATIC_BROKER);
    assert_eq!(source("max.message.bytes"), SOURCE_DEFAULT);
    assert_eq!(source("snapshot.minimum.records"), SOURCE_DEFAULT);
}

#[test]
fn snapshot_minimum_records_applies_to_snapshot_topics_only() {
    let delete = TopicConfig::default();
    assert!(matches!(
        altered_topic_config(&delete, &[set("snapshot.minimum.records", "10")]),
        Err(AlterConfigsError::Config(_))
    ));
    let snapshot = TopicConfig {
        cleanup_policy: CleanupPolicy::Snapshot,
        ..TopicConfig::default()
    };
    let altered =
        altered_topic_config(&snapshot, &[set("snapshot.minimum.records", "10")]).unwrap();
    assert_eq!(altered.snapshot_minimum_records, Some(10));
    assert!(matches!(
        altered_topic_config(&snapshot, &[set("snapshot.minimum.records", "0")]),
        Err(AlterConfigsError::Config(_))
    ));
}
