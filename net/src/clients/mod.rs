//! Kafka clients of ringlog, in the library so the CLI, the tests and `perf` share them:
//! a KIP-320 consumer ([`consumer`]) and a batching producer ([`producer`]), both blocking,
//! both talking to the nodes through one [`transport::Transport`] (real connections by node
//! id, or an in-process fake in unit tests).

pub mod assignor;
pub mod consumer;
#[cfg(test)]
mod consumer_tests;
pub mod full_state;
#[cfg(test)]
mod full_state_tests;
pub mod group;
pub mod heartbeat;
pub mod producer;
pub mod transport;

/// A partition of a topic, as clients name it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TopicPartition {
    pub topic: String,
    pub partition: i32,
}

impl TopicPartition {
    pub fn new(topic: impl Into<String>, partition: i32) -> TopicPartition {
        TopicPartition {
            topic: topic.into(),
            partition,
        }
    }
}

impl std::fmt::Display for TopicPartition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}-{}", self.topic, self.partition)
    }
}
