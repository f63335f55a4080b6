//! A segment's in-memory chunks (the appended `Bytes` its recent batches arrived in), and the
//! memory a node's logs share for the tail their lagging replicas still need
//! ([`LaggingTailBudget`], docs/log.md "The tail cache").

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;

/// How many bytes of appended chunks a node's logs may keep in memory, all together, for
/// replicas that have not fetched them yet (`replica.lag.cache.max.bytes`). A log keeps the
/// chunks behind its tail cache that a lagging replica still needs while the node holds fewer
/// than this many bytes of chunks in all (tail caches included), so a follower back from a
/// restart reads them from memory, not from the disk its own writes then share. Cloned by every
/// log that shares it.
#[derive(Clone, Debug)]
pub struct LaggingTailBudget {
    budget_bytes: u64,
    cached_bytes: Arc<AtomicU64>,
}

impl LaggingTailBudget {
    pub fn new(budget_bytes: u64) -> LaggingTailBudget {
        LaggingTailBudget {
            budget_bytes,
            cached_bytes: Arc::new(AtomicU64::new(0)),
        }
    }

    pub fn budget_bytes(&self) -> u64 {
        self.budget_bytes
    }

    /// Bytes of chunks the logs sharing this budget hold now, their tail caches included.
    pub fn cached_bytes(&self) -> u64 {
        self.cached_bytes.load(Ordering::Relaxed)
    }

    /// No more chunks are kept for lagging replicas.
    pub(crate) fn exhausted(&self) -> bool {
        self.cached_bytes() >= self.budget_bytes
    }

    pub(crate) fn same_as(&self, other: &LaggingTailBudget) -> bool {
        Arc::ptr_eq(&self.cached_bytes, &other.cached_bytes)
    }
}

/// Appended bytes kept in memory, starting at a batch boundary.
#[derive(Clone, Debug)]
pub(crate) struct Chunk {
    pub position: u64,
    /// The offset after the chunk's last batch: a replica whose log ends here or beyond has
    /// every record of it.
    pub next_offset: i64,
    pub bytes: Bytes,
}

impl Chunk {
    pub fn end(&self) -> u64 {
        self.position + self.bytes.len() as u64
    }
}

/// A segment's chunks in position order, contiguous up to the segment's end. Once counted
/// against a [`LaggingTailBudget`] every change, and the segment's drop, is counted there.
#[derive(Debug, Default)]
pub(crate) struct Chunks {
    queue: VecDeque<Chunk>,
    bytes: u64,
    counter: Option<Arc<AtomicU64>>,
}

impl Chunks {
    pub fn front(&self) -> Option<&Chunk> {
        self.queue.front()
    }

    /// The chunks' bytes.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// The chunks from the one holding `position` on (binary search: a segment's cache for a
    /// lagging replica holds tens of thousands).
    pub fn starting_at(&self, position: u64) -> impl Iterator<Item = &Chunk> {
        let first = self.queue.partition_point(|chunk| chunk.end() <= position);
        self.queue.range(first..)
    }

    pub fn push_back(&mut self, chunk: Chunk) {
        debug_assert!(
            self.queue
                .back()
                .is_none_or(|last| last.end() == chunk.position),
            "chunks are contiguous"
        );
        self.add(chunk.bytes.len() as u64);
        self.queue.push_back(chunk);
    }

    pub fn pop_front(&mut self) {
        if let Some(chunk) = self.queue.pop_front() {
            self.sub(chunk.bytes.len() as u64);
        }
    }

    pub fn clear(&mut self) {
        self.queue.clear();
        self.sub(self.bytes);
    }

    /// Counts these chunks, and every later change, against `budget` (once; a log shares one
    /// budget for its life).
    pub fn count_against(&mut self, budget: &LaggingTailBudget) {
        if self.counter.is_none() {
            budget.cached_bytes.fetch_add(self.bytes, Ordering::Relaxed);
            self.counter = Some(budget.cached_bytes.clone());
        }
    }

    fn add(&mut self, bytes: u64) {
        self.bytes += bytes;
        if let Some(counter) = &self.counter {
            counter.fetch_add(bytes, Ordering::Relaxed);
        }
    }

    fn sub(&mut self, bytes: u64) {
        self.bytes -= bytes;
        if let Some(counter) = &self.counter {
            counter.fetch_sub(bytes, Ordering::Relaxed);
        }
    }
}

impl Drop for Chunks {
    fn drop(&mut self) {
        self.sub(self.bytes);
    }
}
