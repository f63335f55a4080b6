//! A segment's data area reserved ahead of writes, so a write itself cannot fail with ENOSPC.
//! (The `.log` is created, with a valid empty slot, by the chain's preparation: `prepare`.)
//!
//! The reservation runs ahead of the writes by `LogConfig::preallocate_ahead_bytes`. Once a
//! chain's writes reach the second half of what is reserved, the next stretch is reserved
//! through the ring (`Op::Fallocate`, run by an io_uring worker), so the chain that needs it
//! finds it done: the caller's thread never waits for the block allocator, nor for the direct
//! writes in flight on the file, which ext4's fallocate drains first (until 2026-12-07 every
//! reservation was a synchronous `fallocate` on the event loop, 1-2 ms each where the
//! allocator read block bitmaps: docs/benchmarks.md, "Where the loop blocked"). A chain whose
//! write passes the reservation before that completes (a write larger than half of `ahead`,
//! a failed or refused reservation in the background) reserves synchronously as before, and
//! only that path reports a failure: a full disk refuses it whole, and the log then waits for
//! space (`flush`).

use super::super::segment::round_up;
use super::super::{LogError, PartitionLog};
use super::Routed;
use crate::io::{Completion, Io, Op, OpId};

/// A reservation ahead in flight through the ring (module doc).
#[derive(Debug)]
pub(crate) struct InFlightReservation {
    op_id: OpId,
    segment_base_offset: i64,
    /// Where the data area will be reserved up to once it completes.
    end: u64,
}

impl PartitionLog {
    /// Reserves the data area ahead of a write that would pass the reservation, so the write
    /// itself cannot fail with ENOSPC (the reservation can, before anything is written), and
    /// reserves the next stretch in the background once the write reaches the second half of
    /// the reservation (module doc).
    pub(super) fn reserve_ahead<I: Io>(
        &mut self,
        io: &mut I,
        index: usize,
        write_end: u64,
    ) -> Result<(), LogError> {
        if !self.config.preallocate {
            return Ok(());
        }
        if write_end > self.segments[index].reserved_end {
            self.reserve_now(io, index, write_end)?;
        }
        self.reserve_in_background(io, index, write_end);
        Ok(())
    }

    fn reserve_now<I: Io>(
        &mut self,
        io: &mut I,
        index: usize,
        write_end: u64,
    ) -> Result<(), LogError> {
        let block = self.block_size_bytes;
        let ahead = self.config.preallocate_ahead_bytes;
        let segment = &mut self.segments[index];
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
        segment.reserved_end = segment.reserved_end.max(end);
        Ok(())
    }

    /// Submits the reservation of the next `ahead` bytes once `write_end` is in the second half
    /// of segment `index`'s reservation: one at a time, and not again for a segment whose
    /// reservation in the background failed until the synchronous path has reserved more.
    fn reserve_in_background<I: Io>(&mut self, io: &mut I, index: usize, write_end: u64) {
        if self.reserving.is_some() {
            return;
        }
        let block = self.block_size_bytes;
        let ahead = self.config.preallocate_ahead_bytes;
        let segment = &self.segments[index];
        let Some(file) = segment.file else {
            return;
        };
        let reserved_end = segment.reserved_end;
        if self.reservation_refused == Some((segment.base_offset, reserved_end))
            || reserved_end.saturating_sub(write_end) > ahead / 2
        {
            return;
        }
        let end = reservation_end(write_end, ahead, segment.region_offset, block);
        if end <= reserved_end {
            // The whole data area is reserved.
            return;
        }
        let op_id = io.submit(Op::Fallocate {
            file,
            offset: reserved_end,
            len_bytes: end - reserved_end,
        });
        self.reserving = Some(InFlightReservation {
            op_id,
            segment_base_offset: segment.base_offset,
            end,
        });
    }

    /// A completion of the reservation in flight, or a foreign one. A failure only means the
    /// chain that needs the space reserves it synchronously, and reports what that meets.
    pub(super) fn on_reservation_completion(&mut self, completion: Completion) -> Routed {
        if self
            .reserving
            .as_ref()
            .is_none_or(|reserving| reserving.op_id != completion.op_id)
        {
            return Routed::Foreign(completion);
        }
        let reserving = self.reserving.take().expect("checked above");
        // A filesystem without fallocate: `Io::preallocate` counts that as reserved too.
        let reserved = match &completion.result {
            Ok(_) => true,
            Err(error) => error.raw_os_error() == Some(libc::EOPNOTSUPP),
        };
        if let Some(segment) = self
            .segments
            .iter_mut()
            .find(|segment| segment.base_offset == reserving.segment_base_offset)
        {
            if reserved {
                segment.reserved_end = segment.reserved_end.max(reserving.end);
            } else {
                self.reservation_refused = Some((segment.base_offset, segment.reserved_end));
            }
        }
        Routed::Mine {
            durable_end_offset_advanced_to: None,
        }
    }

    /// The reservation in flight, for a blocking wait.
    pub(super) fn reservation_op_id(&self) -> Option<OpId> {
        self.reserving.as_ref().map(|reserving| reserving.op_id)
    }
}

/// Where a reservation covering `write_end` plus `ahead` bytes ends: block aligned, never past
/// the data area (`region_offset`).
pub(super) fn reservation_end(write_end: u64, ahead: u64, region_offset: u64, block: usize) -> u64 {
    round_up(write_end.saturating_add(ahead), block).min(region_offset)
}
