//! Offset expiry (Kafka's `offsets.retention.minutes`, KIP-211; docs/groups.md, "Offset
//! expiry"): every `offsets.retention.check.interval.ms` the coordinator looks through the
//! `__consumer_offsets` partitions it leads and appends a tombstone for each offset that
//! expired (`offsets::expired_offset_keys`: a group without members, retention passed since
//! the later of the commit and the moment the group became empty).
//!
//! The decision is the leader's alone and reaches the state only through the log: every
//! replica applies the same tombstones at the same offsets, and a snapshot taken anywhere holds
//! the same offsets. No replica's state machine reads a clock. The times compared are the
//! commit timestamps stored in the commit records (the committing leader's wall clock) and, for
//! the emptying, this coordinator's memory of it.
//!
//! A commit racing an expiry cannot be lost: a partition with a commit (or a deletion)
//! appended and not yet committed is skipped for this round, so a tombstone is only ever
//! appended after every commit its decision saw, and a commit appended after the tombstone
//! simply comes later in the log and wins. A partition whose earlier tombstones are not
//! committed yet is skipped too (no duplicate tombstones).

use bytes::Bytes;

use super::super::NodeError;
use super::super::context::Cx;
use super::group_offsets::append_offset_records;
use super::{GroupsEnv, GroupsState, offsets_state};
use crate::groups::metadata;
use crate::groups::offsets::{self, GroupActivity};

impl GroupsState {
    /// Runs one expiry round if it is due (called from the groups' tick).
    pub(super) fn maybe_expire_offsets(
        &mut self,
        cx: &mut Cx,
        env: GroupsEnv,
        now_ms: u64,
    ) -> Result<(), NodeError> {
        if self.loaded().is_empty() || now_ms < self.next_expiry_check_ms {
            return Ok(());
        }
        self.next_expiry_check_ms = now_ms + cx.config.groups.offsets_retention_check_interval_ms;
        let wall_now_ms = cx.now_wall_ms;
        let retention_ms = cx.config.groups.offsets_retention_ms as i64;
        let loaded: Vec<(i32, ringlog_replication::PartitionId, u32)> = self
            .loaded()
            .iter()
            .map(|(index, (partition, epoch))| (*index, *partition, *epoch))
            .collect();
        for (index, partition, epoch) in loaded {
            if let Some((append_epoch, last_offset)) = self.expiring.get(&partition).copied() {
                let committed = cx
                    .host
                    .store(partition)
                    .is_some_and(|s| s.high_watermark > last_offset);
                if append_epoch == epoch && !committed {
                    continue;
                }
                self.expiring.remove(&partition);
            }
            if self.writes.iter().any(|w| w.touches(partition)) {
                continue;
            }
            let coordinator = &self.coordinator;
            let mut keys = offsets::expired_offset_keys(
                offsets_state(cx.host, partition),
                wall_now_ms,
                retention_ms,
                |group_id| {
                    if coordinator.contains(group_id) {
                        return GroupActivity::Members {
                            subscribed: coordinator.stable_subscription(group_id).cloned(),
                        };
                    }
                    // The coordinator's clock is `now_ms`; the commit timestamps are wall
                    // clock: the emptying is placed on the wall clock by its age.
                    let since_ms = coordinator
                        .emptied_at_ms(group_id)
                        .map(|at| wall_now_ms - now_ms.saturating_sub(at) as i64);
                    GroupActivity::Empty { since_ms }
                },
            );
            // An empty group whose last offsets expire loses its metadata record too (Kafka's
            // group goes Dead): nothing of it is left to restore.
            let state = offsets_state(cx.host, partition);
            let expired: std::collections::BTreeSet<&Bytes> = keys.iter().collect();
            let mut gone = Vec::new();
            for (group_id, record) in metadata::all_group_metadata(state) {
                if !record.members.is_empty() || coordinator.contains(&group_id) {
                    continue;
                }
                let left = offsets::group_offsets(state, &group_id)
                    .into_iter()
                    .any(|o| {
                        offsets::offset_key(&group_id, &o.topic, o.partition)
                            .is_none_or(|key| !expired.contains(&key))
                    });
                if !left && let Some(key) = metadata::group_metadata_key(&group_id) {
                    gone.push(key);
                }
            }
            keys.extend(gone);
            // Forget the emptying of groups whose offsets are all gone.
            let with_offsets: std::collections::BTreeSet<String> =
                offsets::groups_with_offsets(offsets_state(cx.host, partition))
                    .into_iter()
                    .collect();
            self.coordinator
                .retain_emptied(index, |group_id| with_offsets.contains(group_id));
            if keys.is_empty() {
                continue;
            }
            tracing::info!(
                partition = index,
                offsets = keys.len(),
                retention_ms,
                "expiring the committed offsets of groups without members"
            );
            let records: Vec<(Bytes, Option<Bytes>)> =
                keys.into_iter().map(|k| (k, None)).collect();
            match append_offset_records(cx, env, partition, records) {
                Ok(Some(append)) => {
                    self.expiring
                        .insert(partition, (append.leader_epoch, append.last_offset));
                }
                Ok(None) => {}
                // Not the leader any more, or a storage error: the next coordinator (or the
                // next round) decides again.
                Err(code) => {
                    tracing::warn!(partition = index, %code, "offset expiry tombstones not appended")
                }
            }
        }
        Ok(())
    }
}
