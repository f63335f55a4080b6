//! Splitting a buffer of concatenated batches (a segment, a fetch response's records) into
//! zero-copy [`RecordBatch`]es.
//!
//! The last batch being cut short is reported as [`BatchError::Truncated`], distinct from every
//! corruption error, so that recovery can tell a torn final write (truncate it) from a bad batch
//! (never truncate there). A batch is only called truncated when every field that the bytes
//! present can show is consistent: its length is within bounds and its magic byte, if present,
//! is 2.

use bytes::Bytes;

use super::header::{self, Frame};
use super::{BatchError, DEFAULT_MAX_BATCH_SIZE_BYTES, RecordBatch};

/// Iterator over the batches of a buffer. Yields each valid batch; the first error ends it.
#[derive(Clone, Debug)]
pub struct BatchIter {
    buf: Bytes,
    cursor: usize,
    base_position: u64,
    max_size_bytes: usize,
    /// Check each batch's CRC32C (off only for bytes validated before: `already_validated`).
    check_crc: bool,
    done: bool,
}

/// The batches of `buf`, with [`DEFAULT_MAX_BATCH_SIZE_BYTES`] as the size limit.
pub fn batches(buf: &Bytes) -> BatchIter {
    BatchIter::new(buf.clone())
}

impl BatchIter {
    pub fn new(buf: Bytes) -> BatchIter {
        BatchIter {
            buf,
            cursor: 0,
            base_position: 0,
            max_size_bytes: DEFAULT_MAX_BATCH_SIZE_BYTES,
            check_crc: true,
            done: false,
        }
    }

    /// Frames the batches without checking their CRC32C again: for bytes this process has
    /// already validated, such as a follower's fetched records once the log appended them
    /// (`PartitionLog::append_as_follower` checks every batch). Checking them a second time cost
    /// a follower catching up 5.6 % of its CPU.
    pub fn already_validated(mut self) -> BatchIter {
        self.check_crc = false;
        self
    }

    /// A batch claiming more than `max_size_bytes` is reported as `Oversize`.
    pub fn with_max_batch_size_bytes(mut self, max_size_bytes: usize) -> BatchIter {
        self.max_size_bytes = max_size_bytes;
        self
    }

    /// Where `buf` starts in the file or stream it came from; added to every reported position.
    pub fn with_base_position(mut self, base_position: u64) -> BatchIter {
        self.base_position = base_position;
        self
    }

    /// Bytes consumed by the batches yielded so far: after an error, the position (relative to
    /// the buffer) of the batch that failed.
    pub fn valid_bytes(&self) -> usize {
        self.cursor
    }

    fn next_batch(&mut self) -> Result<RecordBatch, BatchError> {
        let position = self.base_position + self.cursor as u64;
        let rest = &self.buf[self.cursor..];
        let size_bytes = if self.check_crc {
            validate_front_batch(rest, position, self.max_size_bytes)?
        } else {
            front_batch_size(rest, position, self.max_size_bytes)?
        };
        let bytes = self.buf.slice(self.cursor..self.cursor + size_bytes);
        self.cursor += size_bytes;
        Ok(RecordBatch::from_validated(bytes, position))
    }
}

impl Iterator for BatchIter {
    type Item = Result<RecordBatch, BatchError>;

    fn next(&mut self) -> Option<Result<RecordBatch, BatchError>> {
        if self.done || self.cursor == self.buf.len() {
            return None;
        }
        let result = self.next_batch();
        if result.is_err() {
            self.done = true;
        }
        Some(result)
    }
}

impl std::iter::FusedIterator for BatchIter {}

/// Frame and CRC-check the batch at the front of `buf` (found at `position` of its file or
/// stream), returning its size: what [`BatchIter`] checks per batch, on a plain slice, for a caller
/// that must not make a `Bytes` per batch (the log's append path, and its stamping in place).
pub(crate) fn validate_front_batch(
    buf: &[u8],
    position: u64,
    max_size_bytes: usize,
) -> Result<usize, BatchError> {
    let size_bytes = front_batch_size(buf, position, max_size_bytes)?;
    header::check_crc_and_counts(&buf[..size_bytes], position)?;
    Ok(size_bytes)
}

/// [`validate_front_batch`] without the CRC, for batches whose CRC was checked when they
/// arrived (a leader's append of a validated Produce: each batch's CRC is computed once). The
/// frame and the header's counts are still checked.
pub(crate) fn frame_front_batch(
    buf: &[u8],
    position: u64,
    max_size_bytes: usize,
) -> Result<usize, BatchError> {
    let size_bytes = front_batch_size(buf, position, max_size_bytes)?;
    header::check_counts(&buf[..size_bytes], position)?;
    debug_assert!(
        header::check_crc_and_counts(&buf[..size_bytes], position).is_ok(),
        "a batch appended as CRC-checked has a bad CRC"
    );
    Ok(size_bytes)
}

/// The size of the whole batch at the front of `buf`, its frame checked (magic, length).
fn front_batch_size(buf: &[u8], position: u64, max_size_bytes: usize) -> Result<usize, BatchError> {
    match header::check_frame(buf, position, max_size_bytes)? {
        Frame::Complete { size_bytes } => Ok(size_bytes),
        Frame::Short { needed, available } => Err(BatchError::Truncated {
            position,
            needed,
            available,
        }),
    }
}

/// The first whole, CRC-valid batch that starts at or after byte `from` of `buf`, if any.
///
/// For recovery after an error: a valid batch after the bad one means the damage is interior
/// corruption (never truncate there), none means the bad bytes are the log's tail. Also the way
/// to tell a torn tail from a flipped bit in the last-but-N batch's length field, which makes it
/// look truncated. Each position is first checked for magic 2 and a plausible length, so the
/// CRC runs only on candidates. A batch embedded in some record's value would also be found:
/// that errs on the side of calling damage interior, which loses nothing.
pub fn find_next_valid_batch(
    buf: &Bytes,
    from: usize,
    max_size_bytes: usize,
) -> Option<RecordBatch> {
    (from..buf.len()).find_map(|start| {
        let rest = &buf[start..];
        match header::check_frame(rest, start as u64, max_size_bytes) {
            Ok(Frame::Complete { size_bytes }) if rest.len() > 16 => {
                let bytes = buf.slice(start..start + size_bytes);
                header::check_crc_and_counts(&bytes, start as u64).ok()?;
                Some(RecordBatch::from_validated(bytes, start as u64))
            }
            _ => None,
        }
    })
}
