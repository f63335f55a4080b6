//! What recovery reads of a segment: the blocks of the slots' flushes (to check their CRC32C),
//! and the image up to the durable mark, scanned a chunk at a time (docs/log.md, "Recovery").

use std::path::Path;

use super::super::batch_list;
use super::super::blocking;
use super::super::segment::{BatchEntry, round_down, round_up};
use super::super::tail_slot;
use super::super::{LogConfig, LogError};
use crate::batch::split::validate_front_batch;
use crate::batch::{BatchChainValidator, BatchError, RecordBatchHeader};
use crate::io::{FileId, Io, IoError, Op};

/// The result of scanning one segment image.
pub(super) struct Scan {
    pub(super) base_offset: i64,
    /// Each batch with its size in bytes.
    pub(super) entries: Vec<(BatchEntry, u64)>,
    pub(super) valid_end: u64,
    pub(super) next_offset: i64,
    pub(super) last_epoch: i32,
    /// Why the scan stopped before the end of the image (empty when it reached it).
    pub(super) stop_reason: String,
}

/// Read `[offset, offset + len)` of a segment for recovery; a read error (EIO) is corruption
/// of that file.
pub(super) fn read_for_recovery<I: Io>(
    io: &mut I,
    file: FileId,
    path: &Path,
    offset: u64,
    len: u64,
) -> Result<Vec<u8>, LogError> {
    blocking::read_range(io, file, offset, Some(len)).map_err(|error| LogError::Corruption {
        path: path.to_path_buf(),
        position: error.offset,
        reason: format!("read failed: {error}"),
    })
}

/// The blocks the slots' flushes wrote, `[start, start + bytes.len())` of the segment, read to
/// check each slot's CRC32C of them.
pub(super) struct FlushBlocks {
    pub(super) start: u64,
    pub(super) bytes: Vec<u8>,
}

impl FlushBlocks {
    pub(super) fn present(&self, slot: &tail_slot::TailSlot, block_size_bytes: usize) -> bool {
        slot.flushed_blocks_present(&self.bytes, self.start, block_size_bytes)
    }
}

/// A segment as recovery reads it: the data area up to `file_end`, zeros past it, the trusted
/// slot's copy of the partial block (`overlay`) laid over at `overlay_start`, and nothing at or
/// past `len` (the durable mark).
pub(super) struct SegmentImage<'a> {
    pub(super) file: FileId,
    pub(super) path: &'a Path,
    pub(super) file_end: u64,
    pub(super) len: u64,
    pub(super) overlay_start: u64,
    pub(super) overlay: &'a [u8],
}

impl SegmentImage<'_> {
    /// Append the image's bytes `[from, to)` (within `len`) to `out`.
    pub(super) fn append<I: Io>(
        &self,
        io: &mut I,
        from: u64,
        to: u64,
        out: &mut Vec<u8>,
    ) -> Result<(), LogError> {
        assert!(
            from <= to && to <= self.len,
            "recovery reads inside the image"
        );
        let appended_at = out.len();
        let file_to = to.min(self.file_end);
        if from < file_to {
            let block = io.block_size_bytes();
            let aligned_from = round_down(from, block);
            let aligned_to = round_up(file_to, block);
            let mut completions = blocking::run_ops(
                io,
                vec![Op::Read {
                    file: self.file,
                    offset: aligned_from,
                    len: (aligned_to - aligned_from) as usize,
                }],
                false,
            )
            .map_err(|error| self.read_failed(error))?;
            let mut completion = completions.pop().expect("one completion per op");
            let read = blocking::completion_result(&mut completion)
                .map_err(|error| self.read_failed(error))?;
            if let Some(buf) = completion.buf {
                let data = &buf.as_slice()[..read.min(buf.len())];
                let skip = (from - aligned_from) as usize;
                let want = (file_to - from) as usize;
                let have = data.len().saturating_sub(skip).min(want);
                out.extend_from_slice(&data[skip.min(data.len())..skip.min(data.len()) + have]);
                io.recycle_read_buf(buf);
            }
        }
        // Past the file's part (a short read, or the image running past it): zeros, as the
        // slot's copy of the partial block then says.
        out.resize(appended_at + (to - from) as usize, 0);
        let overlay_end = self.overlay_start + self.overlay.len() as u64;
        let (lo, hi) = (from.max(self.overlay_start), to.min(overlay_end));
        if lo < hi {
            out[appended_at + (lo - from) as usize..appended_at + (hi - from) as usize]
                .copy_from_slice(
                    &self.overlay
                        [(lo - self.overlay_start) as usize..(hi - self.overlay_start) as usize],
                );
        }
        Ok(())
    }

    /// A read error (EIO) is corruption of this file.
    fn read_failed(&self, error: IoError) -> LogError {
        LogError::Corruption {
            path: self.path.to_path_buf(),
            position: error.offset,
            reason: format!("read failed: {error}"),
        }
    }
}

impl Scan {
    /// A scan of the segment starting at `base_offset` that has got past the `listed` batches.
    pub(super) fn after(
        listed: &[batch_list::ListedBatch],
        base_offset: i64,
        previous_epoch: i32,
    ) -> Scan {
        let entries = batch_list::entries(listed);
        Scan {
            base_offset,
            entries: entries
                .into_iter()
                .zip(listed)
                .map(|(entry, batch)| (entry, u64::from(batch.size_bytes)))
                .collect(),
            valid_end: listed.last().map_or(0, batch_list::ListedBatch::end),
            next_offset: listed
                .last()
                .map_or(base_offset, |batch| batch.last_offset + 1),
            last_epoch: listed.last().map_or(previous_epoch, |batch| batch.epoch),
            stop_reason: String::new(),
        }
    }
}

/// Scan batches of a segment image (which ends at the durable mark) from where `start` ends (the
/// segment's start, or its last listed batch), checking frame, CRC, offset continuity and epoch
/// order. The image is
/// read `config.recovery_read_bytes` at a time into one reused buffer (the read buffer goes back
/// to the backend, `Io::recycle_read_buf`); a batch cut by a chunk's end is carried into the next.
pub(super) fn scan_segment<I: Io>(
    io: &mut I,
    image: &SegmentImage<'_>,
    start: Scan,
    config: &LogConfig,
) -> Result<Scan, LogError> {
    let mut scan = start;
    let base_offset = scan.base_offset;
    let mut chain = BatchChainValidator::expecting(scan.next_offset, scan.last_epoch);
    // The image's bytes `[window_start, window_start + window.len())`.
    let mut window: Vec<u8> = Vec::new();
    let mut window_start = scan.valid_end;
    let mut read_to = scan.valid_end;
    loop {
        if read_to < image.len {
            let to = (read_to + config.recovery_read_bytes.max(1)).min(image.len);
            image.append(io, read_to, to, &mut window)?;
            read_to = to;
        }
        let all_read = read_to == image.len;
        let mut cursor = 0usize;
        while cursor < window.len() {
            let position = window_start + cursor as u64;
            let rest = &window[cursor..];
            let problem = match validate_front_batch(rest, position, config.max_batch_size_bytes) {
                // The batch continues in the next chunk.
                Err(BatchError::Truncated { .. } | BatchError::ShortBuffer { .. }) if !all_read => {
                    break;
                }
                Err(error) => Some(error.to_string()),
                Ok(size_bytes) => {
                    let header = RecordBatchHeader::view(&rest[..size_bytes]);
                    if let Err(error) = chain.check_header(header, position) {
                        Some(error.to_string())
                    } else if header.last_offset() - base_offset > i64::from(u32::MAX) {
                        Some("batch offset does not fit a segment's 32-bit relative offsets".into())
                    } else {
                        scan.entries.push((
                            BatchEntry::after(
                                scan.entries.last().map(|(entry, _)| entry),
                                header.base_offset(),
                                header.last_offset(),
                                position,
                                header.max_timestamp(),
                                header.is_control(),
                                header.partition_leader_epoch(),
                            ),
                            size_bytes as u64,
                        ));
                        scan.valid_end = position + size_bytes as u64;
                        scan.next_offset = header.last_offset().wrapping_add(1);
                        scan.last_epoch = header.partition_leader_epoch();
                        cursor += size_bytes;
                        None
                    }
                }
            };
            if let Some(reason) = problem {
                scan.stop_reason = reason;
                return Ok(scan);
            }
        }
        if all_read {
            return Ok(scan);
        }
        window.drain(..cursor);
        window_start += cursor as u64;
    }
}
