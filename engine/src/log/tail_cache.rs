//! The tail cache: written batches kept in memory for reads just behind the durable end
//! (`LogConfig::tail_cache_bytes`), and behind it for replicas that lag, within a budget the
//! node's logs share (docs/log.md "The tail cache").

use super::*;

/// What a log keeps for its lagging replicas: the chunks a replica whose log ends at
/// `from_offset` has not fetched, while `budget` allows.
#[derive(Debug)]
pub(super) struct LaggingReplicas {
    budget: LaggingTailBudget,
    from_offset: Option<i64>,
}

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

    /// Keeps, behind the tail cache, the chunks holding offsets at or past `from_offset` (the
    /// least log end of the replicas fetching from this log; `None`: none lags) while the logs
    /// sharing `budget` hold fewer bytes of chunks than it allows. A leader's host sets it as
    /// its followers' fetches arrive: a follower back from a restart then reads what it missed
    /// from memory, not from the disk its own writes share on one machine, and the leader's
    /// loop does not read the disk for it. Dropped in log order (the oldest first) when the
    /// budget is spent or the replicas have fetched them. A log shares one budget for its life;
    /// from the first call its chunks are counted there.
    pub fn keep_for_lagging_replicas(
        &mut self,
        budget: &LaggingTailBudget,
        from_offset: Option<i64>,
    ) {
        match &mut self.lagging {
            Some(lagging) => {
                assert!(
                    lagging.budget.same_as(budget),
                    "a log shares one lagging-tail budget"
                );
                if lagging.from_offset == from_offset {
                    return;
                }
                let releases = match (lagging.from_offset, from_offset) {
                    (_, None) => true,
                    (Some(before), Some(now)) => now > before,
                    (None, Some(_)) => false,
                };
                lagging.from_offset = from_offset;
                if releases {
                    self.release_cached_chunks();
                }
            }
            None => {
                for segment in &mut self.segments {
                    segment.chunks.count_against(budget);
                }
                self.lagging = Some(LaggingReplicas {
                    budget: budget.clone(),
                    from_offset,
                });
                self.release_cached_chunks();
            }
        }
    }

    /// Adds a new segment at the end, its chunks counted against the log's budget.
    pub(super) fn push_segment(&mut self, mut segment: Segment) {
        if let Some(lagging) = &self.lagging {
            segment.chunks.count_against(&lagging.budget);
        }
        self.segments.push(segment);
    }

    /// Bytes of chunks this log keeps in memory (all its segments').
    pub fn cached_bytes(&self) -> u64 {
        self.segments.iter().map(|s| s.chunks.bytes()).sum()
    }

    /// Drops, oldest first, the chunks a completed flush put in the file that are more than
    /// `tail_cache_bytes` behind what was written (over the log's segments) and that no lagging
    /// replica keeps ([`PartitionLog::keep_for_lagging_replicas`]). What stays is a suffix of
    /// the log: the segments holding chunks are the newest ones (the active one may hold none
    /// yet).
    pub(super) fn release_cached_chunks(&mut self) {
        let tail_cache_bytes = self.config.tail_cache_bytes;
        let keeping = self
            .lagging
            .as_ref()
            .and_then(|lagging| Some((lagging.from_offset?, &lagging.budget)));
        let segments = &mut self.segments;
        let newest = segments.len() - 1;
        let mut first = newest;
        while first > 0 && !segments[first - 1].chunks.is_empty() {
            first -= 1;
        }
        let written = |segment: &Segment| segment.written_full_end.min(segment.size_bytes);
        // Bytes written after the segment at hand, in newer segments.
        let mut written_after: u64 = segments[first + 1..].iter().map(written).sum();
        for (index, segment) in segments[first..].iter_mut().enumerate() {
            if index > 0 {
                written_after -= written(segment);
            }
            let keep_from =
                written(segment).saturating_sub(tail_cache_bytes.saturating_sub(written_after));
            while let Some(front) = segment.chunks.front() {
                let kept = front.end() > keep_from
                    || keeping.is_some_and(|(from_offset, budget)| {
                        front.next_offset > from_offset && !budget.exhausted()
                    });
                if kept {
                    return;
                }
                segment.chunks.pop_front();
            }
        }
    }
}
