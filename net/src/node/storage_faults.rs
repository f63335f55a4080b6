//! A storage fault stays in its partition (issue 17; docs/node.md, "Storage faults").
//!
//! | fault | the partition | Produce to it | reads, Metadata, other partitions |
//! | --- | --- | --- | --- |
//! | ENOSPC, EDQUOT | waits for space: appended records stay in memory, not durable | KAFKA_STORAGE_ERROR (56), also for requests waiting on it | go on |
//! | any other write or fdatasync error (EIO) | offline: its core stops, files closed | KAFKA_STORAGE_ERROR | Metadata reports it (KAFKA_STORAGE_ERROR, this node in `offline_replicas`); the others go on |
//!
//! The host decides which (`Host::pump`, `Host::execute`); this file is the runtime's side:
//! the backoff on which it asks a partition waiting for space to flush again (its own clock:
//! the host and the core have none), and forgetting an offline partition everywhere the node
//! keeps it.

use std::collections::BTreeSet;

use ringlog_replication::PartitionId;

use super::{Node, NodeError};
use crate::protocol::ErrorCode;

/// The first retry of a flush waiting for space, after the disk refused it.
pub(super) const SPACE_RETRY_INITIAL_MS: u64 = 100;
/// The longest wait between two retries (the delay doubles up to it): space freed by an
/// operator is used within this long.
pub(super) const SPACE_RETRY_MAX_MS: u64 = 2_000;

/// When to ask the partitions waiting for space to flush again.
#[derive(Debug)]
pub(super) struct SpaceRetry {
    /// The next retry, while some partition waits.
    next_at_ms: Option<u64>,
    delay_ms: u64,
}

impl Default for SpaceRetry {
    fn default() -> Self {
        SpaceRetry {
            next_at_ms: None,
            delay_ms: SPACE_RETRY_INITIAL_MS,
        }
    }
}

impl SpaceRetry {
    /// Whether to retry now, given whether a partition waits; schedules the next one (doubling
    /// the delay while the disk stays full, back to the first delay once nothing waits).
    pub(super) fn due(&mut self, waiting: bool, now_ms: u64) -> bool {
        if !waiting {
            *self = SpaceRetry::default();
            return false;
        }
        match self.next_at_ms {
            None => {
                self.next_at_ms = Some(now_ms + self.delay_ms);
                false
            }
            Some(at) if now_ms >= at => {
                self.delay_ms = (self.delay_ms * 2).min(SPACE_RETRY_MAX_MS);
                self.next_at_ms = Some(now_ms + self.delay_ms);
                true
            }
            Some(_) => false,
        }
    }

    /// The loop's next wake-up for a retry, if one is scheduled.
    pub(super) fn deadline_ms(&self) -> Option<u64> {
        self.next_at_ms
    }
}

/// Partitions this node took offline, by (topic, index), with the error.
#[derive(Debug, Default)]
pub(super) struct OfflinePartitions {
    pub(super) by_name: std::collections::BTreeMap<(String, i32), String>,
    seen: BTreeSet<PartitionId>,
}

impl Node {
    /// Runs the retry of flushes waiting for space when it is due, and takes in the partitions
    /// the host took offline. Returns the retry's deadline, for the loop's sleep.
    pub(super) fn watch_storage_faults(&mut self, now_ms: u64) -> Result<Option<u64>, NodeError> {
        let waiting = self.host.partitions_waiting_for_space();
        if self.space_retry.due(!waiting.is_empty(), now_ms) {
            let asked = self.host.retry_flushes();
            tracing::debug!(
                asked,
                "asking the partitions waiting for space to flush again"
            );
        }
        // Requests waiting on a partition that waits for space are answered now rather than
        // at their timeout (their records may still become durable and committed later, as
        // after any error following an append; an idempotent producer's retry is answered as
        // the duplicate it is).
        for partition in &waiting {
            self.handlers.produces.fail_partition(
                &cx!(self),
                *partition,
                ErrorCode::KafkaStorageError,
            )?;
        }
        self.adopt_offline_partitions()?;
        self.observer.observe_storage_faults(
            self.offline.by_name.len(),
            self.host.partitions_waiting_for_space().len(),
        );
        Ok(self.space_retry.deadline_ms())
    }

    /// Forgets every partition the host took offline since the last call: its requests are
    /// answered KAFKA_STORAGE_ERROR, lookups skip it, Metadata reports it offline. Called after
    /// every host call (`deliver`), before anything looks the partition up again.
    pub(super) fn adopt_offline_partitions(&mut self) -> Result<(), NodeError> {
        if self.host.offline_partitions().len() == self.offline.seen.len() {
            return Ok(());
        }
        let new: Vec<(PartitionId, String)> = self
            .host
            .offline_partitions()
            .iter()
            .filter(|(id, _)| !self.offline.seen.contains(id))
            .map(|(id, offline)| (*id, offline.error.clone()))
            .collect();
        for (id, error) in new {
            self.offline.seen.insert(id);
            let hosted = self.table.get(id).clone();
            if hosted.topic == super::convert::METADATA_TOPIC {
                // Every topic, config and group lives in it: without it the node cannot serve.
                return Err(NodeError::Runtime(std::io::Error::other(format!(
                    "the metadata partition went offline: {error}"
                ))));
            }
            self.forget_partition(id, ErrorCode::KafkaStorageError)?;
            self.offline
                .by_name
                .insert((hosted.topic.clone(), hosted.index), error);
        }
        Ok(())
    }

    /// The error of an offline partition of this node, if `topic`-`index` is one.
    pub(super) fn offline_partition_error(&self, topic: &str, index: i32) -> Option<&str> {
        self.offline
            .by_name
            .get(&(topic.to_string(), index))
            .map(String::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The retry of a flush waiting for space runs on a bounded backoff: first after 100 ms,
    /// the delay doubling to 2 s while the disk stays full, never twice in one instant, and
    /// back to 100 ms once nothing waits.
    #[test]
    fn space_retries_back_off_to_a_bound_and_reset_when_nothing_waits() {
        let mut retry = SpaceRetry::default();
        assert!(!retry.due(false, 0));
        assert_eq!(retry.deadline_ms(), None, "nothing waits: no wake-up");
        assert!(!retry.due(true, 1_000), "the first retry waits");
        assert_eq!(retry.deadline_ms(), Some(1_000 + SPACE_RETRY_INITIAL_MS));
        assert!(!retry.due(true, 1_099));
        let mut now = 1_100;
        let mut delays = Vec::new();
        for _ in 0..8 {
            assert!(retry.due(true, now));
            assert!(!retry.due(true, now), "not twice at one instant");
            let next = retry.deadline_ms().unwrap();
            delays.push(next - now);
            now = next;
        }
        assert_eq!(delays, [200, 400, 800, 1600, 2000, 2000, 2000, 2000]);
        assert!(!retry.due(false, now));
        assert!(!retry.due(true, now));
        assert_eq!(retry.deadline_ms(), Some(now + SPACE_RETRY_INITIAL_MS));
    }
}
