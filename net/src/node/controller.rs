//! Which node acts as the controller: the leader of `__cluster_metadata-0`, once its topic
//! image holds every record committed before its epoch. Only the controller creates and
//! deletes topics (topics.rs, delete_topics.rs, and `__consumer_offsets` for groups.rs); a
//! leader still catching up answers CreateTopics and DeleteTopics NOT_CONTROLLER and
//! auto-creation LEADER_NOT_AVAILABLE, which clients retry. The group coordinator's twin rule
//! (`applied_past_epoch_start`, for `__consumer_offsets` partitions) lives here too.

/// Whether a leader of `__cluster_metadata-0` in `epoch` has applied (`applied_offset`: the
/// offset after the last record its image applied) every record committed before its epoch.
///
/// A new leader learns what is committed only when a record of its own epoch, the LeaderChange
/// it writes first, commits (KIP-595); until its image has applied past that record it may
/// not know topics that exist. A topic it then created would put a new record (new topic id)
/// under the existing topic's key, which every node applies as the topic replaced: its
/// partitions deleted and started again empty. Seen in tests/kip320.rs after a restart: a
/// client's Metadata with auto-creation reached the new leader before it had applied the
/// topic's record, and the survivor's only copy of the partition was deleted. Kafka's
/// controller likewise becomes active only once it has replayed the log to the committed
/// offset.
///
/// | leader's epoch in its epoch cache | applied past the epoch's first offset | caught up |
/// | --------------------------------- | ------------------------------------- | --------- |
/// | no (nothing appended in it yet)   | -                                     | no        |
/// | yes                               | no                                    | no        |
/// | yes                               | yes                                   | yes       |
/// | cache empty: a snapshot took every record to the log end, the snapshot's epoch is the leader's | applied up to the log start | yes |
///
/// The last row: KIP-630's log start advance drops the cache entry when no record remains
/// (Kafka's truncateFromStart), and the epoch's first record is then below the log start.
/// Without it, a controller whose snapshot reached its log end stopped acting, refused every
/// CreateTopics, so no record came to bring the entry back (the coordinator's twin of this
/// rule in groups.rs hung tests/groups.rs in CI on 2026-12-02).
pub fn controller_caught_up(
    epoch: ringlog_replication::Epoch,
    epoch_cache: &[ringlog_replication::OffsetAndEpoch],
    log_start: LogStart,
    applied_offset: u64,
) -> bool {
    match epoch_cache.iter().rev().find(|entry| entry.epoch == epoch) {
        Some(entry) => applied_offset > entry.offset,
        None => {
            epoch_cache.is_empty() && log_start.epoch == epoch && applied_offset >= log_start.offset
        }
    }
}

/// The log start offset and the epoch of the snapshot there (the epoch of the log's last
/// record when the log holds none).
#[derive(Clone, Copy, Debug)]
pub struct LogStart {
    pub offset: u64,
    pub epoch: ringlog_replication::Epoch,
}

/// Whether a state machine that applied up to `applied` has applied the record that opened the
/// leader's `epoch`, so everything committed before it. The epoch must be the log's last; its
/// start is its epoch-cache entry, or, when a snapshot took every record up to the log end and
/// the cache kept no entry (Kafka's truncateFromStart drops it when no record remains), at or
/// below the log start, which the state machine passed when it took that snapshot. (Before
/// 2026-12-02 that case counted as not caught up: a coordinator whose snapshot reached its log
/// end stopped coordinating, refused every commit as NOT_COORDINATOR, so no record came to
/// bring the entry back: tests/groups.rs committed_offsets_survive_snapshots_and_restarts hung
/// in CI.)
pub(super) fn applied_past_epoch_start(
    log: &ringlog_replication::LogState,
    epoch: u32,
    applied: i64,
) -> bool {
    if log.last_fetched_epoch() != epoch {
        return false;
    }
    match log.epoch_cache().last().filter(|e| e.epoch == epoch) {
        Some(entry) => applied >= entry.offset as i64,
        // The snapshot at the log start ends there: its state applied every record below.
        None => applied + 1 >= log.log_start_offset() as i64,
    }
}

#[cfg(test)]
mod caught_up_tests {
    use super::applied_past_epoch_start;
    use ringlog_replication::{
        ElectionState, LogState, OffsetAndEpoch, RecoveredSnapshots, RecoveredState,
    };

    fn log(start: u64, end: u64, cache: &[(u64, u32)], snapshot_epoch: Option<u32>) -> LogState {
        let state = RecoveredState {
            election: ElectionState::default(),
            log_start_offset: start,
            log_end_offset: end,
            epoch_cache: cache
                .iter()
                .map(|(offset, epoch)| OffsetAndEpoch::new(*offset, *epoch))
                .collect(),
            repair_pending: false,
        };
        let snapshot = snapshot_epoch.map(|epoch| OffsetAndEpoch::new(start, epoch));
        let snapshots = RecoveredSnapshots {
            log_start_snapshot_id: snapshot,
            latest_snapshot_id: snapshot,
        };
        LogState::recovered_with_snapshots(&state, snapshots).expect("a consistent log")
    }

    /// The coordinator's (and controller's) "caught up in my epoch" rule, as a table.
    #[test]
    fn a_leader_is_caught_up_once_it_applied_its_epoch_s_first_record() {
        // Epoch 3 opened at 600: caught up from 600 on.
        let open = log(0, 700, &[(0, 1), (600, 3)], None);
        assert!(!applied_past_epoch_start(&open, 3, 599));
        assert!(applied_past_epoch_start(&open, 3, 600));
        // A leader of epoch 4 whose first record is not in the log yet.
        assert!(!applied_past_epoch_start(&open, 4, 700));
        // A snapshot took every record up to the log end: the cache holds no entry, the log
        // start's snapshot is of epoch 3, and the state machine applied up to it.
        let emptied = log(625, 625, &[], Some(3));
        assert!(applied_past_epoch_start(&emptied, 3, 624));
        assert!(!applied_past_epoch_start(&emptied, 3, 623));
        assert!(!applied_past_epoch_start(&emptied, 4, 624));
    }
}
