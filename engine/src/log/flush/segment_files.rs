//! A segment's files: the `.log` created atomically with a valid empty slot, and the data area
//! reserved ahead of writes so a write itself cannot fail with ENOSPC.

use super::super::segment::{self, round_up};
use super::super::tail_slot::{self, encode_slot};
use super::super::{LogError, PartitionLog, blocking};
use crate::io::{AlignedBuf, Io, IoError, Op, OpenOptions};

impl PartitionLog {
    /// Create a segment's `.log` atomically: `<base>.log.tmp` gets its final length (the data
    /// area and the slot region), its data area preallocated, a valid empty slot 0, an fdatasync; then it
    /// is renamed to `<base>.log` and the folder fsynced. So a `.log` always has a valid slot,
    /// and one without any is corruption, never a normal state.
    pub(super) fn create_segment_files<I: Io>(
        &mut self,
        io: &mut I,
        index: usize,
    ) -> Result<(), LogError> {
        let block = self.block_size_bytes;
        let base = self.segments[index].base_offset;
        let region_offset = self.segments[index].region_offset;
        assert!(
            self.segments[index].size_bytes <= region_offset,
            "a new segment's data fits before its slot region"
        );
        let log_path = segment::segment_file_path(&self.dir, base, "log");
        let tmp_path = blocking::tmp_path(&log_path);
        if io.exists(&tmp_path) {
            io.remove_file(&tmp_path)?;
        }
        let options = OpenOptions {
            create: true,
            direct: true,
            ..Default::default()
        };
        let tmp = io.open(&tmp_path, options)?;
        let file_len = region_offset + tail_slot::region_size_bytes(block);
        let mut region = AlignedBuf::zeroed(tail_slot::region_size_bytes(block) as usize, block);
        let first_slot = encode_slot(0, 0, &[], block, 0, &[], 0);
        region.as_mut_slice()[..first_slot.len()].copy_from_slice(first_slot.as_slice());
        // The first stretch of the data area; the flushes reserve the rest as they reach it
        // (`reserve_ahead`). The slot region is written whole just below, so it is allocated.
        let reserved_end = if self.config.preallocate {
            reservation_end(0, self.config.preallocate_ahead_bytes, region_offset, block)
        } else {
            0
        };
        let created = (|| {
            io.set_len(tmp, file_len)?;
            if reserved_end > 0 {
                io.preallocate(tmp, reserved_end)?;
            }
            let ops = vec![
                Op::Write {
                    file: tmp,
                    offset: region_offset,
                    buf: region,
                },
                Op::Fdatasync { file: tmp },
            ];
            for mut completion in blocking::run_ops(io, ops, true)? {
                blocking::completion_result(&mut completion)?;
            }
            Ok::<(), IoError>(())
        })();
        io.close(tmp)?;
        if let Err(source) = created {
            // Only the `.tmp` was touched (the next attempt removes it; recovery too): out of
            // space the log goes on and tries again, any other failure stops it.
            if source.is_no_space() {
                let _ = io.remove_file(&tmp_path);
                return Err(LogError::NoSpace {
                    path: tmp_path,
                    position: source.offset,
                    source,
                });
            }
            self.stopped = Some(format!("{tmp_path:?}: {source}"));
            return Err(LogError::WriteFailed {
                path: tmp_path,
                position: source.offset,
                source,
            });
        }
        io.rename(&tmp_path, &log_path)?;
        io.sync_dir(&self.dir)?;
        let file = io.open(&log_path, OpenOptions::DIRECT)?;
        let reader = match io.open_reader(&log_path) {
            Ok(reader) => reader,
            Err(error) => {
                let _ = io.close(file);
                return Err(error.into());
            }
        };
        let segment = &mut self.segments[index];
        segment.file = Some(file);
        segment.reader = reader;
        segment.slot_sequence = 0;
        segment.reserved_end = reserved_end;
        Ok(())
    }

    /// Reserves the data area ahead of a write that would pass the reservation, so the write
    /// itself cannot fail with ENOSPC (the reservation can, before anything is written).
    pub(super) fn reserve_ahead<I: Io>(
        &mut self,
        io: &mut I,
        index: usize,
        write_end: u64,
    ) -> Result<(), LogError> {
        let block = self.block_size_bytes;
        let ahead = self.config.preallocate_ahead_bytes;
        let segment = &mut self.segments[index];
        if !self.config.preallocate || write_end <= segment.reserved_end {
            return Ok(());
        }
        let file = segment.file.expect("reserved after creation");
        let end = reservation_end(write_end, ahead, segment.region_offset, block);
        let end = match io.preallocate(file, end) {
            Ok(()) => end,
            // Less than `ahead` is left: reserve what this write needs, so the last of the
            // space is used before Produce is refused (a full reservation fails whole).
            Err(error) if error.is_no_space() => {
                let needed = reservation_end(write_end, 0, segment.region_offset, block);
                io.preallocate(file, needed)
                    .map_err(|source| LogError::NoSpace {
                        path: source.path.clone(),
                        position: write_end,
                        source,
                    })?;
                needed
            }
            Err(error) => return Err(error.into()),
        };
        segment.reserved_end = end;
        Ok(())
    }
}

/// Where a reservation covering `write_end` plus `ahead` bytes ends: block aligned, never past
/// the data area (`region_offset`).
fn reservation_end(write_end: u64, ahead: u64, region_offset: u64, block: usize) -> u64 {
    round_up(write_end.saturating_add(ahead), block).min(region_offset)
}
