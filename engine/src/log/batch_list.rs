//! A segment's batch list (`<base>.batches`): recovery's checkpoint of what it already knows.
//!
//! Recovery used to read and check every byte of every segment, so a restart took as long as
//! reading the whole log: under a fault run (four producers at acks=all, one node killed every
//! few seconds) a restarted node spent 4-13 s reading 3 GB before it served, the next fault
//! then took a second node down, and the quorum stopped (docs/benchmarks.md, "Under faults").
//! Kafka answers the same problem with its recovery point; here each segment keeps the list of
//! its durable batches beside it, and recovery reads only the batches the list does not name.
//!
//! One record per batch, at `index · 48` of the file (little endian):
//!
//! ```text
//! 0  base_offset i64   8 last_offset i64   16 position u64   24 max_timestamp i64
//! 32 size_bytes u32    36 epoch i32        40 flags u8 (bit 0: control), 3 zero bytes
//! 44 CRC32C of (segment base offset, record index, bytes 0..44)
//! ```
//!
//! The list is advisory and never fsynced while it grows: it is written (buffered, no
//! completion to wait for) after a flush made its batches durable, once at least
//! `LogConfig::batch_list_interval_bytes` more are durable, whole at a seal, and whole when the
//! log closes. A crash may lose or tear any of it. Recovery takes the longest prefix of records
//! that are intact (CRC), contiguous (positions, offsets), with epochs never going backwards,
//! inside the trusted durable mark and agreeing with the leader-epoch-checkpoint (fsynced
//! before any batch of a new epoch is flushed), then reads the last listed batch from the data
//! area and compares it with its record. When the log cut (truncation, recovery's drop of an
//! unfinished flush), the list is cut to the batches kept, durably, before any new record is
//! written, so a list never names a batch of a history that was cut.
//!
//! **When the list replaces reading.** Only after a clean close (`close` leaves the
//! `clean-shutdown` marker, fsynced; the next open removes it, durably, before anything else:
//! Kafka's `.kafka_cleanshutdown`). After a crash (kill -9, power loss) every batch is read and
//! its CRC checked again, as before the list existed, and the list is kept as far as it agrees
//! with what was read: a bit flipped in acknowledged data while the node was down is still
//! found when it starts (the bit-flip sweep, tests/bitflip_sweep.rs, kills its follower). What a
//! clean restart gives up: a bit flipped in a listed batch while the node was stopped cleanly is
//! not found when the log opens; it still is by every reader that checks CRCs (a follower
//! appending it, a consumer), as in Kafka, which reads nothing of a cleanly closed log either.

use std::path::{Path, PathBuf};

use super::segment::{self, BatchEntry};

/// The marker a clean close leaves in the log's folder (module doc).
pub(crate) const CLEAN_SHUTDOWN_FILE: &str = "clean-shutdown";

/// Bytes per record.
pub(crate) const RECORD_BYTES: usize = 48;
const CONTROL: u8 = 1;

/// `<dir>/<base>.batches`.
pub(crate) fn path(dir: &Path, base_offset: i64) -> PathBuf {
    segment::segment_file_path(dir, base_offset, "batches")
}

/// One listed batch: its entry, size and partition leader epoch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ListedBatch {
    pub base_offset: i64,
    pub last_offset: i64,
    pub position: u64,
    pub max_timestamp: i64,
    pub size_bytes: u32,
    pub epoch: i32,
    pub control: bool,
}

impl ListedBatch {
    /// The record of a batch the segment holds: its entry and size.
    pub fn of(entry: &BatchEntry, size_bytes: u64) -> ListedBatch {
        ListedBatch {
            base_offset: entry.base_offset,
            last_offset: entry.last_offset,
            position: entry.position,
            max_timestamp: entry.max_timestamp,
            size_bytes: size_bytes as u32,
            epoch: entry.epoch,
            control: entry.control,
        }
    }

    pub fn end(&self) -> u64 {
        self.position + u64::from(self.size_bytes)
    }
}

fn record_crc(segment_base_offset: i64, index: usize, body: &[u8]) -> u32 {
    let crc = crate::crc::crc32c(&segment_base_offset.to_le_bytes());
    let crc = crate::crc::crc32c_append(crc, &(index as u64).to_le_bytes());
    crate::crc::crc32c_append(crc, body)
}

/// Append the records of `batches`, the first being record `first_index`, to `out`.
pub(crate) fn encode(
    segment_base_offset: i64,
    first_index: usize,
    batches: impl Iterator<Item = ListedBatch>,
    out: &mut Vec<u8>,
) {
    for (i, batch) in batches.enumerate() {
        let start = out.len();
        out.extend_from_slice(&batch.base_offset.to_le_bytes());
        out.extend_from_slice(&batch.last_offset.to_le_bytes());
        out.extend_from_slice(&batch.position.to_le_bytes());
        out.extend_from_slice(&batch.max_timestamp.to_le_bytes());
        out.extend_from_slice(&batch.size_bytes.to_le_bytes());
        out.extend_from_slice(&batch.epoch.to_le_bytes());
        out.extend_from_slice(&[if batch.control { CONTROL } else { 0 }, 0, 0, 0]);
        let crc = record_crc(segment_base_offset, first_index + i, &out[start..]);
        out.extend_from_slice(&crc.to_le_bytes());
    }
}

/// The intact records at the front of `bytes` (stops at the first torn, damaged or zeroed one).
pub(crate) fn decode_prefix(segment_base_offset: i64, bytes: &[u8]) -> Vec<ListedBatch> {
    let mut out = Vec::new();
    for (index, record) in bytes.chunks_exact(RECORD_BYTES).enumerate() {
        let body = &record[..44];
        let crc = u32::from_le_bytes(record[44..48].try_into().expect("4 bytes"));
        if crc != record_crc(segment_base_offset, index, body) || record[41..44] != [0, 0, 0] {
            break;
        }
        let i64_at = |at: usize| i64::from_le_bytes(body[at..at + 8].try_into().expect("8 bytes"));
        out.push(ListedBatch {
            base_offset: i64_at(0),
            last_offset: i64_at(8),
            position: u64::from_le_bytes(body[16..24].try_into().expect("8 bytes")),
            max_timestamp: i64_at(24),
            size_bytes: u32::from_le_bytes(body[32..36].try_into().expect("4 bytes")),
            epoch: i32::from_le_bytes(body[36..40].try_into().expect("4 bytes")),
            control: body[40] & CONTROL != 0,
        });
    }
    out
}

/// The longest prefix of `listed` that can describe the segment starting at `base_offset`:
/// contiguous from position 0 and `base_offset`, epochs never below `previous_epoch` or going
/// backwards, offsets within a segment's 32-bit relative range, ending at or before `mark`.
pub(crate) fn consistent_prefix(
    listed: &[ListedBatch],
    base_offset: i64,
    previous_epoch: i32,
    mark: u64,
) -> usize {
    let mut position = 0u64;
    let mut next_offset = base_offset;
    let mut epoch = previous_epoch;
    for (i, batch) in listed.iter().enumerate() {
        let fits = batch.position == position
            && batch.base_offset == next_offset
            && batch.last_offset >= batch.base_offset
            && batch.last_offset - base_offset <= i64::from(u32::MAX)
            && batch.size_bytes > 0
            && batch.end() <= mark
            && batch.epoch >= epoch;
        if !fits {
            return i;
        }
        position = batch.end();
        next_offset = batch.last_offset + 1;
        epoch = batch.epoch;
    }
    listed.len()
}

/// How many of `listed` name exactly the batches a scan found (`entries`, each with its size),
/// from the segment's start.
pub(crate) fn agreeing_prefix(listed: &[ListedBatch], entries: &[(BatchEntry, u64)]) -> usize {
    listed
        .iter()
        .zip(entries)
        .take_while(|(listed, (entry, size_bytes))| **listed == ListedBatch::of(entry, *size_bytes))
        .count()
}

/// The listed batches as the segment's in-memory entries.
pub(crate) fn entries(listed: &[ListedBatch]) -> Vec<BatchEntry> {
    let mut out: Vec<BatchEntry> = Vec::with_capacity(listed.len());
    for batch in listed {
        let entry = BatchEntry::after(
            out.last(),
            batch.base_offset,
            batch.last_offset,
            batch.position,
            batch.max_timestamp,
            batch.control,
            batch.epoch,
        );
        out.push(entry);
    }
    out
}

impl super::PartitionLog {
    /// Write the records of batches made durable since each segment's last write, where at
    /// least `batch_list_interval_bytes` are new, the segment's seal is durable, or `all` (the
    /// log is closing). Advisory: a failed write is logged and tried again with the next flush.
    pub(crate) fn write_batch_lists<I: crate::io::Io>(&mut self, io: &mut I, all: bool) {
        let interval = if all {
            0
        } else {
            self.config.batch_list_interval_bytes
        };
        // Newest first: after every flush only the segments whose list is not whole yet (the
        // active one, one just sealed) are looked at, not a long tail of older ones; a close
        // looks at all.
        for segment in self.segments.iter_mut().rev() {
            if !all && segment.seal_durable && segment.batch_list_written == segment.batches.len() {
                break;
            }
            if segment.file.is_none() {
                continue;
            }
            let durable = segment
                .batches
                .partition_point(|entry| entry.position < segment.flushed_end);
            // A batch straddling the durable end is not durable yet.
            let durable = if durable > 0 && segment.batch_end(durable - 1) > segment.flushed_end {
                durable - 1
            } else {
                durable
            };
            let written = segment.batch_list_written;
            if durable <= written {
                continue;
            }
            let from = segment.batches[written].position;
            let to = segment.batch_end(durable - 1);
            let whole = segment.seal_durable && durable == segment.batches.len();
            if !whole && to - from < interval {
                continue;
            }
            let listed = (written..durable).map(|j| {
                let entry = &segment.batches[j];
                ListedBatch::of(entry, segment.batch_end(j) - entry.position)
            });
            let mut bytes = Vec::with_capacity((durable - written) * RECORD_BYTES);
            encode(segment.base_offset, written, listed, &mut bytes);
            let list_path = path(&self.dir, segment.base_offset);
            match io.write_buffered_at(&list_path, (written * RECORD_BYTES) as u64, &bytes) {
                Ok(()) => segment.batch_list_written = durable,
                Err(error) => {
                    tracing::warn!(path = %list_path.display(), %error, "could not write a segment's batch list (advisory)");
                }
            }
        }
    }

    /// Cut segment `index`'s batch list to its first `kept` records, durably, before any
    /// record of a new history is written after them (module doc).
    pub(crate) fn cut_batch_list<I: crate::io::Io>(
        &mut self,
        io: &mut I,
        index: usize,
        kept: usize,
    ) -> Result<(), super::LogError> {
        let segment = &mut self.segments[index];
        let list_path = path(&self.dir, segment.base_offset);
        segment.batch_list_written = segment.batch_list_written.min(kept);
        if !io.exists(&list_path) {
            return Ok(());
        }
        let file = io.open(&list_path, crate::io::OpenOptions::default())?;
        let result = (|| {
            io.set_len(file, (kept * RECORD_BYTES) as u64)?;
            let mut done =
                super::blocking::run_ops(io, vec![crate::io::Op::Fdatasync { file }], false)?;
            super::blocking::completion_result(&mut done[0]).map(|_| ())
        })();
        let closed = io.close(file);
        result?;
        closed?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(base: i64, last: i64, position: u64, size: u32, epoch: i32) -> ListedBatch {
        ListedBatch {
            base_offset: base,
            last_offset: last,
            position,
            max_timestamp: base * 10,
            size_bytes: size,
            epoch,
            control: base == 0,
        }
    }

    #[test]
    fn records_round_trip_and_stop_at_damage() {
        let batches = [batch(100, 104, 0, 80, 1), batch(105, 105, 80, 70, 1)];
        let mut bytes = Vec::new();
        encode(100, 0, batches.iter().copied(), &mut bytes);
        assert_eq!(bytes.len(), 2 * RECORD_BYTES);
        assert_eq!(decode_prefix(100, &bytes), batches);
        // Another segment's list, or a record at another index, does not decode.
        assert!(decode_prefix(200, &bytes).is_empty());
        let mut shifted = vec![0u8; RECORD_BYTES];
        shifted.extend_from_slice(&bytes[..RECORD_BYTES]);
        assert!(decode_prefix(100, &shifted).is_empty());
        // A flipped bit or a torn record ends the prefix there.
        let mut flipped = bytes.clone();
        flipped[RECORD_BYTES + 3] ^= 0x10;
        assert_eq!(decode_prefix(100, &flipped), batches[..1]);
        assert_eq!(
            decode_prefix(100, &bytes[..RECORD_BYTES + 20]),
            batches[..1]
        );
    }

    #[test]
    fn only_a_contiguous_prefix_inside_the_mark_is_used() {
        let good = [
            batch(0, 4, 0, 80, 1),
            batch(5, 9, 80, 80, 1),
            batch(10, 10, 160, 60, 2),
        ];
        assert_eq!(consistent_prefix(&good, 0, -1, 220), 3);
        assert_eq!(consistent_prefix(&good, 0, -1, 219), 2, "past the mark");
        assert_eq!(
            consistent_prefix(&good, 1, -1, 220),
            0,
            "another base offset"
        );
        assert_eq!(
            consistent_prefix(&good, 0, 2, 220),
            0,
            "epoch below the previous segment's"
        );
        let mut gap = good;
        gap[1].position = 81;
        assert_eq!(consistent_prefix(&gap, 0, -1, 220), 1);
        let mut offsets = good;
        offsets[2].base_offset = 11;
        assert_eq!(consistent_prefix(&offsets, 0, -1, 220), 2);
        let mut backwards = good;
        backwards[2].epoch = 0;
        assert_eq!(consistent_prefix(&backwards, 0, -1, 220), 2);
    }
}
