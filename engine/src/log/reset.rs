//! KIP-630: truncating a log fully so that it starts (and ends) at an offset: what a follower
//! does once it installed a snapshot fetched from the leader (Kafka's
//! `ReplicatedLog.truncateToLatestSnapshot` / `UnifiedLog.truncateFullyAndStartAt`).
//!
//! Order, so that a crash at any point leaves a log the node can recover: every segment file is
//! removed and the folder fsynced, then the leader-epoch-checkpoint is rewritten empty. A crash
//! in between leaves fewer segments (or none); at the next start the node finds its newest
//! snapshot past the log end and truncates fully again. The new active segment's files appear
//! with the first flush that reaches it, so an empty log starting at `offset` has no segment
//! file: the node's start-up rule (start at the newest snapshot when the log ends before it)
//! restores the start offset.

use super::{LogError, PartitionLog, Segment};
use crate::io::Io;

impl PartitionLog {
    /// Drops every record and makes the log start and end at `offset`, durably.
    pub fn truncate_fully_and_start_at<I: Io>(
        &mut self,
        io: &mut I,
        offset: i64,
    ) -> Result<(), LogError> {
        self.check_running()?;
        assert!(offset >= 0, "a log cannot start at {offset}");
        self.wait_for_in_flight(io)?;
        self.generation += 1;
        let removed: Vec<Segment> = self.segments.drain(..).collect();
        for segment in &removed {
            self.delete_segment_files(io, segment)?;
        }
        io.sync_dir(&self.dir)?;
        let region_offset = self.new_segment_region_offset();
        self.push_segment(Segment::new_empty(
            &self.dir,
            offset,
            self.block_size_bytes,
            region_offset,
        ));
        self.log_start_offset = offset;
        self.durable_end_offset = offset;
        self.flush_requested_offset = offset;
        if self.epoch_cache.truncate_from_end(0) || self.epoch_cache_dirty {
            self.persist_epoch_cache(io)?;
        }
        Ok(())
    }
}
