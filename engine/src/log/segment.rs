//! One segment's in-memory state: where its batches are, what is in its file, what is durable.
//!
//! Positions inside a segment (block size B):
//!
//! ```text
//! 0 ........ written_full_end ........ flushed_end ..... size_bytes
//! |  full blocks in the .log file  |  partial block: in a slot of the region + memory |
//! |<-------------- durable (flush completed) ------------->|  not yet flushed  |
//! ```
//!
//! `written_full_end` is a multiple of B (a sealed segment's final, zero-padded block excepted):
//! full blocks are written to the `.log` file once and never again. The bytes from
//! `written_full_end` to `size_bytes` live in `write_tail` (an aligned buffer, ready for O_DIRECT);
//! the bytes of recent batches also live in `chunks` (the appended `Bytes`, zero-copy) so reads
//! of the tail never touch the disk.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;

use super::chunks::Chunks;
use super::index::SparseIndex;
use super::write_tail::WriteTail;
use crate::io::{FileId, FileReader};

/// One batch's place in its segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct BatchEntry {
    pub base_offset: i64,
    pub last_offset: i64,
    pub position: u64,
    /// The batch header's MaxTimestamp: ListOffsets by timestamp searches these in memory
    /// (`PartitionLog::find_batch_by_timestamp`) instead of reading the log.
    pub max_timestamp: i64,
    /// A control batch (Raft's LeaderChange, a VotersRecord): never a timestamp answer.
    pub control: bool,
    /// The batch's PartitionLeaderEpoch (in what would otherwise be padding): the segment's
    /// batch list records it (`batch_list`).
    pub epoch: i32,
    /// The largest MaxTimestamp of the segment's data batches up to and including this one
    /// (`i64::MIN` before the first): non-decreasing along the segment, so a timestamp lookup
    /// skips a segment at its last entry and binary-searches inside one, as Kafka's time
    /// index does.
    pub max_timestamp_so_far: i64,
}

// Every batch of the log has one in memory: docs/log.md names this size.
const _: () = assert!(std::mem::size_of::<BatchEntry>() == 48);

impl BatchEntry {
    /// The entry after `previous` in its segment (`None` for the segment's first), with
    /// `max_timestamp_so_far` carried on.
    pub fn after(
        previous: Option<&BatchEntry>,
        base_offset: i64,
        last_offset: i64,
        position: u64,
        max_timestamp: i64,
        control: bool,
        epoch: i32,
    ) -> BatchEntry {
        let before = previous.map_or(i64::MIN, |p| p.max_timestamp_so_far);
        BatchEntry {
            base_offset,
            last_offset,
            position,
            max_timestamp,
            control,
            epoch,
            max_timestamp_so_far: if control {
                before
            } else {
                before.max(max_timestamp)
            },
        }
    }
}

#[derive(Debug)]
pub(crate) struct Segment {
    pub base_offset: i64,
    /// The `.log` file's path, made once (flushes name it in their errors; a path built per
    /// flush was a handful of allocations each).
    pub log_path: Arc<Path>,
    /// The offset the next batch appended here gets.
    pub next_offset: i64,
    pub size_bytes: u64,
    pub batches: Vec<BatchEntry>,
    pub index: SparseIndex,
    pub file: Option<FileId>,
    /// A buffered read-only descriptor of the same file (`Io::open_reader`), opened with `file`
    /// and dropped with the segment: every `ReadView::File` of the segment carries a clone.
    /// `None` before the file exists and on the memory backend.
    pub reader: Option<FileReader>,
    /// Where the file's slot region starts (`tail_slot`): the data capacity of this segment.
    /// Fixed when the file is created (from the configured segment size then) and read back
    /// from the file's length by recovery, so a later configuration cannot move it.
    pub region_offset: u64,
    pub written_full_end: u64,
    /// Everything before this position is durable (a flush completed over it).
    pub flushed_end: u64,
    /// The log offset at `flushed_end`.
    pub flushed_next_offset: i64,
    /// No more appends go here (a newer segment exists).
    pub sealed: bool,
    /// The final bytes were written to the `.log` file itself and made durable.
    pub seal_durable: bool,
    /// Bytes `[write_tail_start, size_bytes)`, block aligned for the next O_DIRECT write.
    /// `write_tail_start` runs ahead of `written_full_end` while a chain writing the full
    /// blocks is in flight.
    pub write_tail: WriteTail,
    pub write_tail_start: u64,
    pub chunks: Chunks,
    /// Sequence number of the newest slot written to the segment's slot region.
    pub slot_sequence: u64,
    /// The data area below this is reserved on disk (`LogConfig::preallocate`); 0 for a segment
    /// opened by recovery, whose next flush reserves again.
    pub reserved_end: u64,
    /// Records of `batches` the segment's batch list file holds (`batch_list`): the next write
    /// starts at this record.
    pub batch_list_written: usize,
}

impl Segment {
    pub fn new_empty(
        dir: &Path,
        base_offset: i64,
        block_size_bytes: usize,
        region_offset: u64,
    ) -> Segment {
        Segment {
            base_offset,
            log_path: Arc::from(segment_file_path(dir, base_offset, "log")),
            next_offset: base_offset,
            size_bytes: 0,
            batches: Vec::new(),
            index: SparseIndex::default(),
            file: None,
            reader: None,
            region_offset,
            written_full_end: 0,
            flushed_end: 0,
            flushed_next_offset: base_offset,
            sealed: false,
            seal_durable: false,
            write_tail: WriteTail::new(block_size_bytes),
            write_tail_start: 0,
            chunks: Chunks::default(),
            slot_sequence: 0,
            reserved_end: 0,
            batch_list_written: 0,
        }
    }

    /// Whether a flush has work here: unflushed bytes, or a seal not yet written.
    pub fn needs_flush(&self) -> bool {
        self.flushed_end < self.size_bytes || (self.sealed && !self.seal_durable)
    }

    /// End position of batch `index`.
    pub fn batch_end(&self, index: usize) -> u64 {
        self.batches
            .get(index + 1)
            .map_or(self.size_bytes, |next| next.position)
    }

    /// Index of the batch holding `offset` (the first whose last offset is ≥ it).
    pub fn batch_index_for(&self, offset: i64) -> usize {
        self.batches
            .partition_point(|batch| batch.last_offset < offset)
    }

    /// `[from, to)` as slices of the in-memory chunks (by reference, in order), if they hold
    /// all of it.
    pub fn slices_of_chunks(&self, from: u64, to: u64) -> Option<Vec<Bytes>> {
        let first = self.chunks.front()?;
        if from < first.position || to > self.size_bytes {
            return None;
        }
        let mut out = Vec::new();
        let mut covered = 0;
        for chunk in self.chunks.starting_at(from) {
            if chunk.position >= to {
                break;
            }
            let start = from.max(chunk.position);
            let end = to.min(chunk.end());
            if start < end {
                out.push(
                    chunk
                        .bytes
                        .slice((start - chunk.position) as usize..(end - chunk.position) as usize),
                );
                covered += end - start;
            }
        }
        (covered == to - from).then_some(out)
    }
}

/// `<dir>/<20-digit base offset>.<extension>`, Kafka's naming.
pub(crate) fn segment_file_path(dir: &Path, base_offset: i64, extension: &str) -> PathBuf {
    dir.join(format!("{base_offset:020}.{extension}"))
}

/// The base offset of a `<20 digits>.<extension>` file name.
pub(crate) fn parse_segment_file_name(name: &str, extension: &str) -> Option<i64> {
    let stem = name.strip_suffix(extension)?.strip_suffix('.')?;
    if stem.len() != 20 || !stem.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    stem.parse().ok()
}

pub(crate) fn round_up(value: u64, block_size_bytes: usize) -> u64 {
    value.div_ceil(block_size_bytes as u64) * block_size_bytes as u64
}

pub(crate) fn round_down(value: u64, block_size_bytes: usize) -> u64 {
    value / block_size_bytes as u64 * block_size_bytes as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafka_file_names() {
        let path = segment_file_path(Path::new("/d"), 5120793, "log");
        assert_eq!(path, Path::new("/d/00000000000005120793.log"));
        assert_eq!(
            parse_segment_file_name("00000000000005120793.log", "log"),
            Some(5120793)
        );
        assert_eq!(
            parse_segment_file_name("00000000000005120793.index", "log"),
            None
        );
        assert_eq!(parse_segment_file_name("5120793.log", "log"), None);
        assert_eq!(
            parse_segment_file_name("0000000000000512079x.log", "log"),
            None
        );
        assert_eq!(
            parse_segment_file_name("99999999999999999999.log", "log"),
            None
        );
    }
}
