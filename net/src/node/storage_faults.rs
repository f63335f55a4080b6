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

use ringlog_engine::io::AnyIo;
use ringlog_replication::PartitionId;
use ringlog_replication::host::Host;

use super::NodeError;
use super::convert::PartitionTable;

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

/// A partition the host took offline: its id, (topic, index) and error.
pub(super) type NewlyOffline = (PartitionId, (String, i32), String);

/// Partitions this node took offline, by (topic, index), with the error.
#[derive(Debug, Default)]
pub(super) struct OfflinePartitions {
    pub(super) by_name: std::collections::BTreeMap<(String, i32), String>,
    seen: BTreeSet<PartitionId>,
}

impl OfflinePartitions {
    /// The partitions the host took offline since the last call, with their (topic, index)
    /// and error, marked seen: the node forgets each everywhere it keeps it and then
    /// [`OfflinePartitions::record`]s it. The metadata partition going offline is an error: every
    /// topic, config and group lives in it, so without it the node cannot serve.
    pub(super) fn take_new(
        &mut self,
        host: &Host<AnyIo>,
        table: &PartitionTable,
    ) -> Result<Vec<NewlyOffline>, NodeError> {
        if host.offline_partitions().len() == self.seen.len() {
            return Ok(Vec::new());
        }
        let mut new = Vec::new();
        for (id, offline) in host.offline_partitions() {
            if !self.seen.insert(*id) {
                continue;
            }
            let hosted = table.get(*id);
            if hosted.topic == super::convert::METADATA_TOPIC {
                return Err(NodeError::Runtime(std::io::Error::other(format!(
                    "the metadata partition went offline: {}",
                    offline.error
                ))));
            }
            new.push((
                *id,
                (hosted.topic.clone(), hosted.index),
                offline.error.clone(),
            ));
        }
        Ok(new)
    }

    /// Reports `topic`-`index` offline from now on (Metadata, metrics).
    pub(super) fn record(&mut self, name: (String, i32), error: String) {
        self.by_name.insert(name, error);
    }

    /// The error of an offline partition of this node, if `topic`-`index` is one.
    pub(super) fn error_of(&self, topic: &str, index: i32) -> Option<&str> {
        self.by_name
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
