//! Which node acts as the controller: the leader of `__cluster_metadata-0`, once its topic
//! image holds every record committed before its epoch. Only the controller creates and
//! deletes topics (topics.rs, delete_topics.rs, and `__consumer_offsets` for groups.rs); a
//! leader still catching up answers CreateTopics and DeleteTopics NOT_CONTROLLER and
//! auto-creation LEADER_NOT_AVAILABLE, which clients retry.

use super::Node;

impl Node {
    /// Whether this node acts as the controller: it leads `__cluster_metadata-0` and its topic
    /// image has applied every record committed before its epoch ([`controller_caught_up`]).
    pub(super) fn controller_active(&self) -> bool {
        let raft = self.metadata_raft();
        raft.is_leader()
            && controller_caught_up(
                raft.epoch(),
                raft.log().epoch_cache(),
                LogStart {
                    offset: raft.log().log_start_offset(),
                    epoch: raft.log().last_fetched_epoch(),
                },
                self.handlers.topics.applied_offset,
            )
    }
}

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
