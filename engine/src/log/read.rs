//! Reading a log: the batch index (no I/O), and whole batches from memory (the tail cache)
//! or as a region of a segment file, with the kernel asked to read ahead.

use super::*;

/// How far past a file read the log asks the kernel to read ahead ([`PartitionLog::read`]).
const READ_AHEAD_BYTES: u64 = 16 << 20;

/// Where the bytes of a read are: whole batches, starting at the batch holding the asked offset.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReadView {
    /// A zero-copy slice of the in-memory tail.
    Memory(Bytes),
    /// Slices of several appends' chunks of the in-memory tail, in order, by reference: the
    /// read's bytes are their concatenation (a server sends them with one `writev`).
    Chunks(Vec<Bytes>),
    /// A region of a segment file, for sendfile/splice from `reader` (or an `Io` read on the
    /// memory backend, which has no reader).
    File {
        /// The engine's own handle (possibly O_DIRECT): for reads through the `Io`.
        file: FileId,
        /// The segment's kept-open buffered descriptor (`Segment::reader`), the same one for
        /// every read of the segment; a clone keeps the bytes readable after the segment is
        /// deleted or truncated away. `None` on the memory backend.
        reader: Option<FileReader>,
        /// The segment file's path, for logs and errors.
        path: PathBuf,
        position: u64,
        length_bytes: u64,
    },
}

impl ReadView {
    pub fn len_bytes(&self) -> u64 {
        match self {
            ReadView::Memory(bytes) => bytes.len() as u64,
            ReadView::Chunks(chunks) => chunks.iter().map(|chunk| chunk.len() as u64).sum(),
            ReadView::File { length_bytes, .. } => *length_bytes,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len_bytes() == 0
    }
}

impl PartitionLog {
    /// The sparse index's answer for `offset`: (segment base offset, byte position to scan from).
    pub fn index_lookup(&self, offset: i64) -> Option<(i64, u64)> {
        if offset < self.log_start_offset || offset >= self.log_end_offset() {
            return None;
        }
        let segment = &self.segments[self.segment_index_for(offset)];
        let entry = segment.index.lookup(segment.base_offset, offset);
        Some((segment.base_offset, u64::from(entry.position)))
    }

    /// The base offset of the batch holding `offset`, from the in-memory batch index (no I/O);
    /// `None` outside `[log_start_offset, log_end_offset)`. A log start a replica can fetch
    /// from must be a batch boundary: followers append whole batches (DeleteRecords, in net).
    pub fn batch_base_offset(&self, offset: i64) -> Option<i64> {
        if offset < self.log_start_offset || offset >= self.log_end_offset() {
            return None;
        }
        let segment = &self.segments[self.segment_index_for(offset)];
        let index = segment.batch_index_for(offset);
        segment.batches.get(index).map(|batch| batch.base_offset)
    }

    /// ListOffsets by timestamp (KIP-79) over the in-memory batch entries, Kafka's time index
    /// without its file: among the data batches (control batches never answer) whose last
    /// offset is in `[from, below)`, with `Some(target)` the first whose MaxTimestamp is at least
    /// `target`, with `None` the first of those with the largest MaxTimestamp. Returns that
    /// batch's (base offset, MaxTimestamp); the caller reads the one batch to find the record.
    /// No I/O, so a lookup never holds an event loop on the disk.
    pub fn find_batch_by_timestamp(
        &self,
        from: i64,
        below: i64,
        target: Option<i64>,
    ) -> Option<(i64, i64)> {
        // The entries of `segment` whose last offset is in [from, below).
        let in_range = |segment: &Segment| {
            let first = segment.batch_index_for(from);
            let end = segment
                .batches
                .partition_point(|batch| batch.last_offset < below);
            first..end.max(first)
        };
        let mut best: Option<(i64, i64)> = None;
        for segment in &self.segments {
            let range = in_range(segment);
            let Some(last) = segment.batches[range.clone()].last() else {
                continue;
            };
            match target {
                Some(target) => {
                    if last.max_timestamp_so_far < target {
                        continue;
                    }
                    // The first entry whose running maximum reaches the target is the first
                    // data batch at or above it, unless the maximum came from before `from`:
                    // then the batches from there on are looked at one by one.
                    let batches = &segment.batches[range];
                    let start = batches.partition_point(|b| b.max_timestamp_so_far < target);
                    if let Some(found) = batches[start..]
                        .iter()
                        .find(|b| !b.control && b.max_timestamp >= target)
                    {
                        return Some((found.base_offset, found.max_timestamp));
                    }
                }
                None => {
                    let batches = &segment.batches[range.clone()];
                    // From the segment's first entry, the last running maximum is the range's
                    // maximum and the first entry reaching it holds it; a range starting later
                    // (the log start inside the first segment) is looked at one by one.
                    let found = if range.start == 0 {
                        let max = last.max_timestamp_so_far;
                        (max != i64::MIN).then(|| {
                            &batches[batches.partition_point(|b| b.max_timestamp_so_far < max)]
                        })
                    } else {
                        batches.iter().filter(|b| !b.control).reduce(|a, b| {
                            if b.max_timestamp > a.max_timestamp {
                                b
                            } else {
                                a
                            }
                        })
                    };
                    if let Some(found) = found
                        && best.is_none_or(|(_, max)| found.max_timestamp > max)
                    {
                        best = Some((found.base_offset, found.max_timestamp));
                    }
                }
            }
        }
        best
    }

    /// A view of whole batches from the one holding `from_offset`, at most `max_bytes` unless the
    /// first batch alone is larger (it is returned whole, as Kafka does). An empty view at the
    /// log end. Reads may return records not yet durable; bound them by the high-watermark.
    pub fn read<I: Io>(
        &self,
        io: &I,
        from_offset: i64,
        max_bytes: usize,
    ) -> Result<ReadView, LogError> {
        self.read_below(io, from_offset, max_bytes, i64::MAX)
    }

    /// [`PartitionLog::read`] bounded to whole batches whose last offset is below
    /// `end_offset` (a consumer reads below the high-watermark only), decided from the batch
    /// index so a file region never has to be read back to find its committed prefix. An empty
    /// view when the batch holding `from_offset` ends at or above `end_offset`.
    pub fn read_below<I: Io>(
        &self,
        _io: &I,
        from_offset: i64,
        max_bytes: usize,
        end_offset: i64,
    ) -> Result<ReadView, LogError> {
        let log_end_offset = self.log_end_offset();
        if from_offset == log_end_offset {
            return Ok(ReadView::Memory(Bytes::new()));
        }
        if from_offset < self.log_start_offset || from_offset > log_end_offset {
            return Err(LogError::OffsetOutOfRange {
                offset: from_offset,
                log_start_offset: self.log_start_offset,
                log_end_offset,
            });
        }
        let segment = &self.segments[self.segment_index_for(from_offset)];
        let first = segment.batch_index_for(from_offset);
        assert!(
            first < segment.batches.len(),
            "offset {from_offset} below the segment's end has a batch"
        );
        if segment.batches[first].last_offset >= end_offset {
            return Ok(ReadView::Memory(Bytes::new()));
        }
        let start = segment.batches[first].position;
        let limit = start + max_bytes as u64;
        let in_memory = segment
            .chunks
            .front()
            .is_some_and(|chunk| start >= chunk.position);
        // The chunks cover every position from the first one to the segment's end.
        let available_end = if in_memory {
            segment.size_bytes
        } else {
            segment.written_full_end.min(segment.size_bytes)
        };
        let mut end = segment.batch_end(first);
        debug_assert!(end <= available_end, "the first batch is wholly readable");
        let mut index = first + 1;
        while index < segment.batches.len() {
            let next_end = segment.batch_end(index);
            if next_end > available_end
                || next_end > limit
                || segment.batches[index].last_offset >= end_offset
            {
                break;
            }
            end = next_end;
            index += 1;
        }
        if in_memory {
            // A slice of each chunk the answer spans, up to `max_bytes`, by reference (a view of
            // the first chunk alone gave a follower one Produce request's batches per round
            // trip; until 2026-12-07 several were copied into one buffer, each replica fetch's
            // bytes once more on the leader's thread: 7.7 % of a leader's loop under 32 clients
            // x 64 x 1 KiB on 20 partitions, docs/benchmarks.md). One slice is a plain view.
            let mut slices = segment
                .slices_of_chunks(start, end)
                .expect("the chunks hold every byte from the first chunk to the segment end");
            if slices.len() == 1 {
                return Ok(ReadView::Memory(slices.pop().expect("one slice")));
            }
            Ok(ReadView::Chunks(slices))
        } else {
            let file = segment
                .file
                .expect("bytes below written_full_end are in an open file");
            // A reader this far behind reads on sequentially (a follower or observer catching
            // up, a consumer): have the kernel read what follows into the page cache now, so
            // its next read finds the pages cached (sent with `sendfile`) or on their way
            // (the server reads those through its ring); the segment is written with
            // O_DIRECT, so none of it is cached.
            if let Some(reader) = &segment.reader {
                let ahead_end = (end + READ_AHEAD_BYTES).min(segment.written_full_end);
                if ahead_end > end {
                    reader.will_need(end, ahead_end - end);
                }
            }
            Ok(ReadView::File {
                file,
                reader: segment.reader.clone(),
                path: segment::segment_file_path(&self.dir, segment.base_offset, "log"),
                position: start,
                length_bytes: end - start,
            })
        }
    }
}
