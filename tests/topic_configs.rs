//! Kafka topic configs beyond retention, end to end with confluent-kafka against a three-voter
//! quorum of real `ringlog serve` processes (tests/clients/topic_configs.py): a
//! `cleanup.policy=compact` topic refuses keyless records as Kafka does (INVALID_RECORD with
//! RecordErrors) and keeps every keyed one; IncrementalAlterConfigs APPEND / SUBTRACT change the
//! list `cleanup.policy`; `max.message.bytes` is a topic config; `message.format.version` is
//! taken and ignored.

use std::time::Duration;

mod quorum;
use quorum::{Quorum, run_client_script, serial};

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
