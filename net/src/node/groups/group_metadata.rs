//! Group metadata records through the log (docs/groups.md, "Group metadata records"): after
//! every change the coordinator made, each changed group whose record should differ (it became
//! Stable with an assignment, its members changed while Stable, or it became empty) gets a
//! `GroupMetadataValue` appended to its `__consumer_offsets` partition; a node that becomes the
//! partition's coordinator restores its groups from those records, so a failover keeps the
//! generation, the members and their assignments (a member's next heartbeat or commit is
//! accepted) and DescribeGroups/ListGroups answer as before.
//!
//! As in Kafka, the SyncGroup answers that hand out a new assignment wait until the record is
//! committed (`deliver_sync_answers`), so no member works in a generation a later coordinator
//! could not know; a record whose epoch is lost fails them NOT_COORDINATOR, one not committed
//! within `offsets.commit.timeout.ms` COORDINATOR_NOT_AVAILABLE, and the members rejoin.

use super::super::NodeError;
use super::super::context::Cx;
use super::group_offsets::append_offset_records;
use super::{GroupsEnv, GroupsState, offsets_state};
use crate::groups::metadata::{self, all_group_metadata};
use crate::groups::{Outbox, Reply, SyncResult};
use crate::protocol::ErrorCode;
use ringlog_engine::io::AnyIo;
use ringlog_replication::PartitionId;
use ringlog_replication::host::Host;

impl GroupsState {
    /// Appends the metadata record of every group changed since the last call whose record
    /// differs from the partition's state and from what was last appended. Returns the
    /// appends, by group.
    pub(super) fn persist_group_metadata(
        &mut self,
        cx: &mut Cx,
        env: GroupsEnv,
    ) -> Vec<(String, MetadataAppend)> {
        let mut appended = Vec::new();
        let dirty = self.coordinator.take_dirty();
        if dirty.is_empty() {
            return appended;
        }
        let now_ms = cx.now_ms;
        let wall_now_ms = cx.now_wall_ms;
        for group_id in dirty {
            let Some((index, wanted)) =
                self.coordinator
                    .group_metadata(&group_id, now_ms, wall_now_ms)
            else {
                continue;
            };
            let Some(&(partition, _)) = self.loaded().get(&index) else {
                continue;
            };
            let unchanged = |m: &metadata::GroupMetadata| m.same_group(&wanted);
            // What was last appended decides (it may not be committed yet); else the state.
            let same = match self.metadata_written.get(&group_id) {
                Some(written) => unchanged(written),
                None => metadata::group_metadata(offsets_state(cx.host, partition), &group_id)
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
            match append_offset_records(cx, env, partition, vec![(key, Some(value))]) {
                Ok(append) => {
                    tracing::debug!(
                        group_id,
                        generation = wanted.generation_id,
                        members = wanted.members.len(),
                        "group metadata appended"
                    );
                    self.metadata_written.insert(group_id.clone(), wanted);
                    if let Some(append) = append {
                        appended.push((
                            group_id,
                            MetadataAppend {
                                partition,
                                leader_epoch: append.leader_epoch,
                                last_offset: append.last_offset,
                            },
                        ));
                    }
                }
                Err(code) => {
                    tracing::warn!(group_id, %code, "group metadata not appended");
                }
            }
        }
        appended
    }

    /// SyncGroup answers of a generation wait, as Kafka's do, until its metadata record is
    /// committed: a member told its assignment can then count on any later coordinator
    /// knowing its generation. `out` holds the coordinator's answers to one SyncGroup.
    pub(super) fn deliver_sync_answers(
        &mut self,
        cx: &Cx,
        group_id: &str,
        out: Outbox,
        appended: &[(String, MetadataAppend)],
    ) -> Result<(), NodeError> {
        let Some((_, append)) = appended.iter().find(|(g, _)| g == group_id) else {
            return self.deliver_group_outbox(out);
        };
        let (held, now): (Outbox, Outbox) = out
            .into_iter()
            .partition(|(_, reply)| matches!(reply, Reply::Sync(r) if r.error.is_none()));
        self.deliver_group_outbox(now)?;
        if !held.is_empty() {
            let deadline_ms = cx.now_ms + cx.config.groups.offsets_commit_timeout_ms;
            self.held_syncs.push(HeldSyncs {
                append: *append,
                deadline_ms,
                out: held,
            });
        }
        self.release_held_syncs(cx.host, None)
    }

    /// Answers the held SyncGroups whose record committed; those whose record's epoch was
    /// lost get NOT_COORDINATOR, and at `expired_at_ms` those past their deadline
    /// COORDINATOR_NOT_AVAILABLE (Kafka's answers to a failed group store); the members rejoin.
    pub(super) fn release_held_syncs(
        &mut self,
        host: &Host<AnyIo>,
        expired_at_ms: Option<u64>,
    ) -> Result<(), NodeError> {
        let held = std::mem::take(&mut self.held_syncs);
        for sync in held {
            let append = sync.append;
            let outcome = match host.raft(append.partition) {
                Some(r) if r.is_leader() && r.epoch() == append.leader_epoch => host
                    .store(append.partition)
                    .filter(|s| s.high_watermark > append.last_offset)
                    .map(|_| ErrorCode::None),
                _ => Some(ErrorCode::NotCoordinator),
            };
            let outcome = outcome.or_else(|| {
                expired_at_ms
                    .filter(|now| sync.deadline_ms <= *now)
                    .map(|_| ErrorCode::CoordinatorNotAvailable)
            });
            match outcome {
                None => self.held_syncs.push(sync),
                Some(ErrorCode::None) => self.deliver_group_outbox(sync.out)?,
                Some(error) => {
                    let failed = sync
                        .out
                        .into_iter()
                        .map(|(token, _)| (token, Reply::Sync(SyncResult::error(error))))
                        .collect();
                    self.deliver_group_outbox(failed)?;
                }
            }
        }
        Ok(())
    }

    /// Shutdown: every held SyncGroup is answered NOT_COORDINATOR.
    pub(super) fn fail_held_syncs(&mut self) -> Result<(), NodeError> {
        for sync in std::mem::take(&mut self.held_syncs) {
            let failed = sync
                .out
                .into_iter()
                .map(|(token, _)| {
                    (
                        token,
                        Reply::Sync(SyncResult::error(ErrorCode::NotCoordinator)),
                    )
                })
                .collect();
            self.deliver_group_outbox(failed)?;
        }
        Ok(())
    }

    /// This node just became the coordinator of `__consumer_offsets` partition `index`: its
    /// groups come back from their metadata records.
    pub(super) fn restore_groups(
        &mut self,
        host: &Host<AnyIo>,
        now_ms: u64,
        wall_now_ms: i64,
        index: i32,
        partition: PartitionId,
    ) {
        let records = all_group_metadata(offsets_state(host, partition));
        // What an earlier term of this node appended is superseded by the state now.
        self.metadata_written
            .retain(|group_id, _| !records.iter().any(|(g, _)| g == group_id));
        for (group_id, record) in &records {
            self.coordinator
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
        let _ = self.coordinator.take_dirty();
    }
}

/// A group metadata record appended and not yet known committed.
#[derive(Clone, Copy, Debug)]
pub(super) struct MetadataAppend {
    partition: PartitionId,
    leader_epoch: u32,
    last_offset: u64,
}

/// SyncGroup answers waiting for their generation's record.
pub(super) struct HeldSyncs {
    append: MetadataAppend,
    pub(super) deadline_ms: u64,
    out: Outbox,
}
