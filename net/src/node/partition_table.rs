//! The partitions a node hosts, by [`PartitionId`]: the table every wire request is mapped
//! through (convert.rs re-exports it under its old path).

use ringlog_replication::PartitionId;

use crate::protocol::wire::Uuid;
use crate::protocol::{METADATA_TOPIC, METADATA_TOPIC_ID};

/// One hosted partition: its topic, index and (for Fetch v13+) topic id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostedPartition {
    pub topic: String,
    pub topic_id: Uuid,
    pub index: i32,
}

/// The partitions of this node, in [`PartitionId`] order (the id is the position). A removed
/// partition (its topic deleted) keeps its position, so ids are never reused, but lookups and
/// `ids` skip it: a message still in flight for it cannot reach a recreated namesake.
#[derive(Clone, Debug, Default)]
pub struct PartitionTable {
    partitions: Vec<HostedPartition>,
    removed: std::collections::BTreeSet<PartitionId>,
}

impl PartitionTable {
    /// The table of a node that hosts only `__cluster_metadata-0`.
    pub fn metadata_only() -> Self {
        PartitionTable {
            partitions: vec![HostedPartition {
                topic: METADATA_TOPIC.to_string(),
                topic_id: METADATA_TOPIC_ID,
                index: 0,
            }],
            removed: Default::default(),
        }
    }

    /// Hides a partition whose topic was deleted (see the type's doc).
    pub fn remove(&mut self, id: PartitionId) {
        assert!(
            (id as usize) < self.partitions.len(),
            "partition {id} unknown"
        );
        self.removed.insert(id);
    }

    /// Adds a partition (a topic created at run time); returns its id, the next position.
    pub fn add(&mut self, partition: HostedPartition) -> PartitionId {
        assert!(
            self.find(&partition.topic, partition.index).is_none(),
            "{}-{} is already hosted",
            partition.topic,
            partition.index
        );
        self.partitions.push(partition);
        (self.partitions.len() - 1) as PartitionId
    }

    pub fn ids(&self) -> impl Iterator<Item = PartitionId> + '_ {
        (0..self.partitions.len())
            .map(|i| i as PartitionId)
            .filter(|id| !self.removed.contains(id))
    }

    pub fn get(&self, id: PartitionId) -> &HostedPartition {
        &self.partitions[id as usize]
    }

    /// The partition's folder name in the data folder (Kafka's `<topic>-<partition>`).
    pub fn dir_name(&self, id: PartitionId) -> String {
        let p = self.get(id);
        format!("{}-{}", p.topic, p.index)
    }

    pub fn find(&self, topic: &str, index: i32) -> Option<PartitionId> {
        self.partitions
            .iter()
            .enumerate()
            .position(|(i, p)| {
                p.topic == topic && p.index == index && !self.removed.contains(&(i as PartitionId))
            })
            .map(|i| i as PartitionId)
    }

    pub fn find_by_id(&self, topic_id: Uuid, index: i32) -> Option<PartitionId> {
        self.partitions
            .iter()
            .enumerate()
            .position(|(i, p)| {
                p.topic_id == topic_id
                    && p.index == index
                    && !self.removed.contains(&(i as PartitionId))
            })
            .map(|i| i as PartitionId)
    }
}
