//! Storage faults kept to their partition (issue 17, docs/node.md "Storage faults"): out of
//! space a flush waits and `retry_flushes` asks again; any other storage error takes the
//! partition offline.

use std::collections::BTreeMap;
use std::path::PathBuf;

use ringlog_engine::io::Io;

use super::{Host, PartitionStore, StorageError};
use crate::types::PartitionId;

/// A partition taken offline by a storage error (Kafka's offline log directory, per partition).
#[derive(Clone, Debug)]
pub struct OfflinePartition {
    pub dir: PathBuf,
    pub error: String,
}

impl<I: Io> Host<I> {
    /// Takes a partition offline after a storage error: its core stops (it neither votes,
    /// leads nor acknowledges any more; the other replicas elect without it), its files are
    /// closed, and the error is kept for Metadata and metrics. A restart recovers its files.
    pub(super) fn take_offline(&mut self, id: PartitionId, error: &StorageError) {
        tracing::error!(partition = id, %error, "storage error: the partition goes offline");
        if let Some(dir) = self.remove_partition(id) {
            self.offline.insert(
                id,
                OfflinePartition {
                    dir,
                    error: error.to_string(),
                },
            );
        }
    }

    /// Bytes of appended batches the node's logs keep in memory: each leader's tail cache and
    /// what its lagging voters have not fetched ([`HostConfig::lagging_tail_budget_bytes`]).
    pub fn tail_cache_bytes(&self) -> u64 {
        self.lagging_tail.cached_bytes()
    }

    /// Partitions taken offline by a storage error.
    pub fn offline_partitions(&self) -> &BTreeMap<PartitionId, OfflinePartition> {
        &self.offline
    }

    /// Partitions whose flush waits for disk space (ENOSPC, EDQUOT).
    pub fn partitions_waiting_for_space(&self) -> Vec<PartitionId> {
        self.stores
            .iter()
            .filter(|(_, store)| store.waiting_for_space())
            .map(|(id, _)| *id)
            .collect()
    }

    /// Whether `partition`'s flush waits for disk space.
    pub fn waiting_for_space(&self, partition: PartitionId) -> bool {
        self.stores
            .get(&partition)
            .is_some_and(PartitionStore::waiting_for_space)
    }

    /// Asks every partition that waits for disk space to flush again (space may have
    /// returned): a flush that could not start starts, a chain whose writes met ENOSPC submits
    /// them again. Returns how many were asked; whether they got through shows once their
    /// completions are routed ([`Host::pump`], then [`Host::partitions_waiting_for_space`]).
    /// The runtime calls it on a bounded backoff of its own clock, never in a loop.
    pub fn retry_flushes(&mut self) -> usize {
        let waiting = self.partitions_waiting_for_space();
        for partition in &waiting {
            let store = self.stores.get_mut(partition).expect("listed above");
            match store.retry_waiting_for_space(&mut self.io) {
                Ok(()) => {}
                Err(error) if error.is_no_space() => {}
                Err(error) => self.take_offline(*partition, &error),
            }
        }
        // A retried flush carries its log's waiting confirmation record.
        self.confirmations.fresh.extend(&waiting);
        self.durability_news.extend(&waiting);
        waiting.len()
    }
}
