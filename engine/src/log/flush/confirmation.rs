//! The confirmation record (`RLTC`) of a completed flush: written after the flush, in the next
//! flush's submission or alone.
//!
//! It waits for the next flush of its log and joins that flush's submission as a plain write
//! (since 2026-12-05): written alone at once it was a second submission per flush, a system call
//! and a device notification on every replica, which one record at a time paid in commit latency
//! (0.87 of its p50 without it, docs/benchmarks.md). A log whose next flush does not come soon has
//! it written alone ([`PartitionLog::write_confirmation`], by the host after
//! `CONFIRMATION_DELAY_MS`).
//!
//! Alone it is a plain write, not a dsync one (since 2026-12-05). On a disk without FUA (this
//! machine's, most virtual disks) the next flush's dsync write or fdatasync flushes the device
//! cache and carries it to the medium; with FUA the next fdatasync of the segment does (a chain
//! that writes a full block, a seal, a truncation), and `flush_and_wait` and `close` end with
//! one when a record was written as a plain write since. A dsync write alone was a second device
//! cache flush per flush on every replica. Until the record is durable its flush counts as
//! unconfirmed: the window docs/log.md describes, and as before only damage to that flush's
//! bytes after a crash tells the difference.

use super::super::tail_slot::{confirmation_offset, encode_confirmation};
use super::super::{LogError, PartitionLog};
use super::*;
use crate::io::{Completion, Io, Op};

impl PartitionLog {
    /// A completion of the confirmation record in flight, or a foreign one.
    pub(super) fn on_confirmation_completion<I: Io>(
        &mut self,
        io: &mut I,
        completion: Completion,
    ) -> Result<Routed, LogError> {
        let Some(confirming) = self
            .confirming
            .as_mut()
            .filter(|confirming| confirming.op_ids.contains(&completion.op_id))
        else {
            return Ok(Routed::Foreign(completion));
        };
        confirming.completed += 1;
        if let Err(error) = completion.result
            && confirming.failure.is_none()
        {
            let no_space = error.is_no_space();
            confirming.failure = Some((error, no_space));
        }
        if confirming.completed < confirming.op_ids.len() {
            return Ok(Routed::Mine {
                durable_end_offset_advanced_to: None,
            });
        }
        let confirming = self.confirming.take().expect("checked above");
        if let Some((_, true)) = confirming.failure {
            // The record's write met ENOSPC: nothing was damaged. The record is written again with a later flush (until then its flush
            // counts as unconfirmed, the window docs/log.md describes).
            if self.confirmation_pending.is_none() {
                self.confirmation_pending = Some(confirming.pending);
            }
            match self.start_flush_or_wait_for_space(io) {
                Err(error) if error.is_no_space() => {}
                other => other?,
            }
            return Ok(Routed::Mine {
                durable_end_offset_advanced_to: None,
            });
        }
        if let Some((source, _)) = confirming.failure {
            // A failed write (EIO) on the segment file may have dropped other dirty pages too.
            let position = confirming.position;
            self.stopped = Some(format!(
                "{:?} at byte {position}: {source}",
                confirming.path
            ));
            return Err(LogError::WriteFailed {
                path: confirming.path.to_path_buf(),
                position,
                source,
            });
        }
        self.confirmation_unsynced = Some(confirming.file);
        // A flush deferred while this record was in flight (a seal, a new epoch, a new
        // segment's files) starts now, then the next record.
        match self.start_flush_or_wait_for_space(io) {
            Err(error) if error.is_no_space() => {}
            other => other?,
        }
        self.write_confirmation(io);
        Ok(Routed::Mine {
            durable_end_offset_advanced_to: None,
        })
    }

    /// Whether a completed flush's confirmation record waits to be written: it joins the next
    /// flush's submission, or [`PartitionLog::write_confirmation`] writes it alone.
    pub fn confirmation_waiting(&self) -> bool {
        self.confirmation_pending.is_some() && self.confirming.is_none()
    }

    /// Write the waiting confirmation record alone, now (a plain write), if none is in flight
    /// and its segment still takes slots (a truncation or seal since then makes it moot): for a
    /// log whose next flush did not come soon after the last one (the host's
    /// `CONFIRMATION_DELAY_MS`), a blocking path, or the record that waited for one in flight.
    pub fn write_confirmation<I: Io>(&mut self, io: &mut I) {
        if self.confirming.is_some() {
            return;
        }
        let Some(pending) = self.confirmation_pending.take() else {
            return;
        };
        let block = self.block_size_bytes;
        let Some(segment) = self
            .segments
            .iter()
            .find(|segment| segment.base_offset == pending.segment_base_offset)
            .filter(|segment| segment.slot_sequence == pending.sequence && !segment.sealed)
        else {
            return;
        };
        let Some(file) = segment.file else {
            return;
        };
        let path = segment.log_path.clone();
        let position = segment.region_offset + confirmation_offset(block);
        let op_ids = vec![io.submit(Op::Write {
            file,
            offset: position,
            buf: encode_confirmation(pending.sequence, pending.slot_header_crc32c, block),
        })];
        self.confirming = Some(InFlightConfirmation {
            op_ids,
            file,
            completed: 0,
            path,
            position,
            failure: None,
            pending,
        });
    }

    /// Block until the records appended so far are durable (not waiting for the confirmation
    /// record that follows, as an event loop would not).
    pub(crate) fn wait_until_durable<I: Io>(&mut self, io: &mut I) -> Result<(), LogError> {
        while self.durable_end_offset < self.flush_requested_offset && self.awaits_completions() {
            self.wait_for_own_completions(io)?;
        }
        if self.awaits_completions() {
            // The completion that made the records durable queued the confirmation record (or
            // the next flush, carrying it, or that flush's preparation): hand it to the kernel
            // now, so it runs while the caller builds its next appends instead of waiting for
            // the caller's next call.
            io.submit_and_wait(0)?;
        }
        Ok(())
    }
}
