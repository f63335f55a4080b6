//! `ringlog produce`: each stdin line as one record, to a topic that is made to exist first.
//!
//! The default topic is [`DEFAULT_TOPIC`] (`consume` reads the same one by default), so that
//! `ringlog produce` and `ringlog consume` on a new cluster simply work, as Kafka's quickstart
//! does with `quickstart-events`. It used to be `__cluster_metadata`: clients wrote the node's
//! own state (issue 17), which the node now refuses. A missing topic is created the way a Kafka
//! producer creates it: its Metadata request allows auto-creation, which the cluster honours
//! when `auto.create.topics.enable` is true (the default; `num.partitions` partitions). When
//! the cluster does not create topics, or the topic is internal, the command stops before it
//! reads stdin, naming the topic and what to do.

use std::io::{BufRead, Write};
use std::time::{Duration, Instant};

use ringlog_net::clients::TopicPartition;
use ringlog_net::clients::producer::{Producer, ProducerConfig};
use ringlog_net::clients::transport::{Connections, fetch_metadata_with};
use ringlog_net::protocol::ErrorCode;

/// The topic `ringlog produce` and `ringlog consume` use without `--topic`.
pub const DEFAULT_TOPIC: &str = "quickstart-events";

/// How long `produce` waits for a created topic's partition to elect its leader.
const TOPIC_READY_TIMEOUT: Duration = Duration::from_secs(30);
/// The pause between two Metadata requests while it waits.
const TOPIC_READY_POLL: Duration = Duration::from_millis(100);

pub fn produce(
    bootstrap: &str,
    partition: TopicPartition,
    config: ProducerConfig,
) -> Result<(), String> {
    ensure_topic(bootstrap, &partition)?;
    let mut producer = Producer::connect(bootstrap, config);
    // stdin is read on its own thread so that a lingering batch leaves on time even while
    // no new line arrives.
    let (lines_tx, lines) = std::sync::mpsc::channel::<std::io::Result<String>>();
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines() {
            if lines_tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut stdout = std::io::stdout();
    let mut print = |producer: &mut Producer| -> Result<(), String> {
        for ack in producer.take_acknowledged() {
            if ack.offset >= 0 {
                writeln!(stdout, "offset {}", ack.offset).map_err(|e| e.to_string())?;
            }
        }
        Ok(())
    };
    loop {
        let wait = producer
            .next_due()
            .map_or(Duration::from_secs(3600), |due| {
                due.saturating_duration_since(Instant::now())
            });
        match lines.recv_timeout(wait) {
            Ok(line) => {
                let line = line.map_err(|e| e.to_string())?;
                producer
                    .send(&partition, None, Some(line.as_bytes()))
                    .map_err(|e| e.to_string())?;
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                producer.send_due().map_err(|e| e.to_string())?;
            }
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
        }
        print(&mut producer)?;
    }
    producer.flush().map_err(|e| e.to_string())?;
    print(&mut producer)
}

/// Waits until `partition` exists and has a leader, asking the cluster to create its topic if
/// missing; a clear error when it is internal, cannot be created or has no such partition.
fn ensure_topic(bootstrap: &str, partition: &TopicPartition) -> Result<(), String> {
    let topic = &partition.topic;
    if partition.partition < 0 {
        return Err(format!(
            "--partition {}: a partition index is at least 0",
            partition.partition
        ));
    }
    if topic.starts_with("__") {
        return Err(format!(
            "{topic} is an internal topic: only the nodes write it (topics change through \
             CreateTopics and DeleteTopics); produce to another --topic"
        ));
    }
    let deadline = Instant::now() + TOPIC_READY_TIMEOUT;
    let mut connections = Connections::new(bootstrap, Duration::from_secs(5));
    loop {
        let last = match fetch_metadata_with(&mut connections, std::slice::from_ref(topic), true) {
            Err(error) => format!("Metadata: {error}"),
            Ok(metadata) => {
                let topic_error = metadata
                    .errors
                    .get(&TopicPartition::new(topic.clone(), -1))
                    .copied();
                let partitions = metadata
                    .partitions
                    .keys()
                    .filter(|tp| tp.topic == *topic)
                    .count();
                match topic_error {
                    Some(ErrorCode::UnknownTopicOrPartition) => {
                        return Err(format!(
                            "topic {topic} does not exist and the cluster does not create \
                             topics on first use (auto.create.topics.enable=false): create it \
                             first (CreateTopics, e.g. kafka-topics.sh --create) or pick \
                             another --topic"
                        ));
                    }
                    Some(ErrorCode::InvalidTopicException) => {
                        return Err(format!("{topic:?} is not a valid topic name"));
                    }
                    Some(code) if code != ErrorCode::LeaderNotAvailable => {
                        return Err(format!("topic {topic}: {code:?}"));
                    }
                    _ if partitions > 0 && partition.partition >= partitions as i32 => {
                        return Err(format!(
                            "topic {topic} has {partitions} partition(s): there is no \
                             partition {}",
                            partition.partition
                        ));
                    }
                    _ => match metadata.partitions.get(partition) {
                        Some(leader) if leader.leader_id.is_some() => return Ok(()),
                        _ => format!("{partition} has no leader yet"),
                    },
                }
            }
        };
        if Instant::now() >= deadline {
            return Err(format!(
                "{partition} was not ready within {} s: {last}",
                TOPIC_READY_TIMEOUT.as_secs()
            ));
        }
        // The pause between two Metadata requests of a bounded wait.
        std::thread::sleep(TOPIC_READY_POLL);
    }
}
