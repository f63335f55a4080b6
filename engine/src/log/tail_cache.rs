//! The tail cache: written batches kept in memory for reads just behind the durable end
//! (`LogConfig::tail_cache_bytes`, docs/log.md "The tail cache").

use super::*;

impl PartitionLog {
    /// Changes how many written bytes stay in memory (`LogConfig::tail_cache_bytes`); a smaller
    /// budget drops the chunks beyond it now. A host keeps the cache only where reads of the
    /// recent tail come: on a partition's leader, which its followers fetch from.
    pub fn set_tail_cache_bytes(&mut self, tail_cache_bytes: u64) {
        let shrinks = tail_cache_bytes < self.config.tail_cache_bytes;
        self.config.tail_cache_bytes = tail_cache_bytes;
        if shrinks {
            self.release_cached_chunks();
        }
    }

    /// Drops the chunks a completed flush put in the file once they are more than
    /// `tail_cache_bytes` behind what was written; the segment sealed before the active one
    /// keeps what the active one leaves of that budget.
    pub(super) fn release_cached_chunks(&mut self) {
        let tail_cache_bytes = self.config.tail_cache_bytes;
        if let [.., previous, active] = &mut self.segments[..]
            && !previous.chunks.is_empty()
        {
            previous
                .release_written_chunks(tail_cache_bytes.saturating_sub(active.written_full_end));
        }
        let active = self.segments.last_mut().expect("active segment");
        active.release_written_chunks(tail_cache_bytes);
    }
}
