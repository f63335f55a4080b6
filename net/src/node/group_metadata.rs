//! Group metadata records through the log (docs/groups.md, "Group metadata records"): after
//! every change the coordinator made, each changed group whose record should differ (it became
//! Stable with an assignment, its members changed while Stable, or it became empty) gets a
//! `GroupMetadataValue` appended to its `__consumer_offsets` partition; a node that becomes the
//! partition's coordinator restores its groups from those records, so a failover keeps the
//! generation, the members and their assignments (a member's next heartbeat or commit is
//! accepted) and DescribeGroups/ListGroups answer as before.
//!
//! Unlike Kafka, the SyncGroup answers do not wait for the record to commit: a coordinator
//! that fails before it does leaves the new one without that generation, and the members
//! rejoin (what happened for every failover before these records existed).

use super::Node;
use super::group_offsets::wall_clock_ms;
use crate::groups::metadata::{self, all_group_metadata};
use ringlog_replication::PartitionId;

impl Node {
    /// Appends the metadata record of every group changed since the last call whose record
    /// differs from the partition's state and from what was last appended.
    pub(super) fn persist_group_metadata(&mut self) {
        let dirty = self.handlers.groups.coordinator.take_dirty();
        if dirty.is_empty() {
            return;
        }
        let now_ms = self.now_ms();
        let wall_now_ms = wall_clock_ms();
        for group_id in dirty {
            let Some((index, wanted)) =
                self.handlers
                    .groups
                    .coordinator
                    .group_metadata(&group_id, now_ms, wall_now_ms)
            else {
                continue;
            };
            let Some(&(partition, _)) = self.handlers.groups.loaded().get(&index) else {
                continue;
            };
            let unchanged = |m: &metadata::GroupMetadata| m.same_group(&wanted);
            // What was last appended decides (it may not be committed yet); else the state.
            let same = match self.handlers.groups.metadata_written.get(&group_id) {
                Some(written) => unchanged(written),
                None => metadata::group_metadata(self.offsets_state(partition), &group_id)
                    .as_ref()
                    .is_some_and(unchanged),
            };
            if same {
                continue;
            }
            let (Some(key), Some(value)) = (
                metadata::group_metadata_key(&group_id),
                metadata::encode_group_metadata(&wanted),
            ) else {
                continue;
            };
            match self.append_offset_records(partition, vec![(key, Some(value))]) {
                Ok(_) => {
                    tracing::debug!(
                        group_id,
                        generation = wanted.generation_id,
                        members = wanted.members.len(),
                        "group metadata appended"
                    );
                    self.handlers
                        .groups
                        .metadata_written
                        .insert(group_id, wanted);
                }
                Err(code) => {
                    tracing::warn!(group_id, %code, "group metadata not appended");
                }
            }
        }
    }

    /// This node just became the coordinator of `__consumer_offsets` partition `index`: its
    /// groups come back from their metadata records.
    pub(super) fn restore_groups(&mut self, index: i32, partition: PartitionId) {
        let now_ms = self.now_ms();
        let wall_now_ms = wall_clock_ms();
        let records = all_group_metadata(self.offsets_state(partition));
        let groups = &mut self.handlers.groups;
        // What an earlier term of this node appended is superseded by the state now.
        groups
            .metadata_written
            .retain(|group_id, _| !records.iter().any(|(g, _)| g == group_id));
        for (group_id, record) in &records {
            groups
                .coordinator
                .restore_group(index, group_id, record, now_ms, wall_now_ms);
        }
        if !records.is_empty() {
            tracing::info!(
                partition = index,
                groups = records.len(),
                "groups restored from their metadata records"
            );
        }
        // Restoring marks the groups changed; their records are what the state holds.
        let _ = groups.coordinator.take_dirty();
    }
}
