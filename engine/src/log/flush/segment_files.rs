//! A segment's data area reserved ahead of writes, so a write itself cannot fail with ENOSPC.
//! (The `.log` is created, with a valid empty slot, by the chain's preparation: `prepare`.)

use super::super::segment::round_up;
use super::super::{LogError, PartitionLog};
use crate::io::Io;

impl PartitionLog {
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
pub(super) fn reservation_end(write_end: u64, ahead: u64, region_offset: u64, block: usize) -> u64 {
    round_up(write_end.saturating_add(ahead), block).min(region_offset)
}
