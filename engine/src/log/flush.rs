//! Group commit: at most one data chain in flight per log.
//!
//! A flush covers one segment (the oldest with unflushed bytes or an unwritten seal). An
//! ordinary flush is two *independent* chains submitted together, so the caller waits for one
//! write + fdatasync round trip, not two in a row:
//!
//! ```text
//! [write full blocks to .log] [fdatasync .log]      \  both complete: the records below the
//! [write tail slot to .tail]  [fdatasync .tail]     /   flush's end are reported durable
//! ```
//!
//! Why this is safe (docs/log.md, "The torn tail block"): the full blocks go to positions of the
//! `.log` never written before, and the slot goes to the slot position that does *not* hold the
//! newest durable slot (the previous flush completed before this one started). So nothing this
//! flush writes can damage a byte reported durable earlier, whatever tears. The new slot may
//! reach the disk before its blocks; it records their CRC32C, and recovery trusts a slot only
//! when its blocks match (else the flush never finished: recovery falls back to the previous
//! slot, whose bytes are intact).
//!
//! After the flush completed, a *confirmation record* (`RLTC`, block 4 of `.tail`) naming the
//! new slot is written with its own fdatasync, off the caller's critical path (the next flush
//! does not wait for it). Once it is durable, blocks of that flush that no longer match are
//! damage to acknowledged data (refuse to open), not an unfinished flush; and a confirmed slot
//! that is itself damaged refuses to open instead of silently falling back. Between the flush's
//! completion and the confirmation's fdatasync (one small write round trip), corruption of the
//! just-acknowledged blocks would be taken for an unfinished flush: docs/log.md lists that limit.
//!
//! A sealing chain (the segment was rolled) keeps the strict order: the final partial block,
//! zero padded, to the `.log` file itself (a position never written before) + fdatasync, and only
//! then the slot and the `.index` (a second chain, submitted when the first completed).
//!
//! Completions are matched by `OpId` and the chain carries the log's truncation generation, so
//! a completion from before a truncation can never move the durable offset (openraft's IOId idea).

use std::path::PathBuf;

use super::blocking;
use super::segment::{self, round_down, round_up};
use super::tail_slot::{
    self, confirmation_offset, encode_confirmation, encode_slot, encoded_slot_header_crc32c,
    slot_offset,
};
use super::{LogError, PartitionLog};
use crate::io::{AlignedBuf, Completion, FileId, Io, IoError, Op, OpId, OpenOptions};

/// What [`PartitionLog::on_completion`] made of a completion.
#[derive(Debug)]
pub enum Routed {
    /// Not ours: handed back for its owner.
    Foreign(Completion),
    /// Ours. `Some(offset)` when the durable end offset advanced to `offset`.
    Mine {
        durable_end_offset_advanced_to: Option<i64>,
    },
}

#[derive(Debug)]
pub(crate) struct InFlightFlush {
    generation: u64,
    segment_base_offset: i64,
    op_ids: Vec<OpId>,
    /// (path, file position) of each op, for errors.
    op_targets: Vec<(PathBuf, u64)>,
    /// The second chain (tail slot, index), submitted only once the first (segment write +
    /// fdatasync) completed: the slot must never reach the disk before the blocks it vouches
    /// for, whatever a backend's link semantics at a crash.
    second_stage: Vec<(Op, (PathBuf, u64))>,
    completed: usize,
    failure: Option<(PathBuf, u64, IoError)>,
    target_position: u64,
    target_next_offset: i64,
    new_written_full_end: u64,
    slot_sequence: u64,
    /// The new slot's header CRC32C, for its confirmation record.
    slot_header_crc32c: u32,
    sealing: bool,
    index_file: Option<FileId>,
    /// The segment write, whose buffer comes back for reuse as a later write tail.
    block_write: Option<OpId>,
}

/// A confirmation record being written: `[write RLTC record] [fdatasync .tail]`.
#[derive(Debug)]
pub(crate) struct InFlightConfirmation {
    op_ids: Vec<OpId>,
    completed: usize,
    path: PathBuf,
    failure: Option<IoError>,
}

/// A confirmation waiting for the one in flight (one record position: never two writes at once).
#[derive(Clone, Copy, Debug)]
pub(crate) struct PendingConfirmation {
    segment_base_offset: i64,
    sequence: u64,
    slot_header_crc32c: u32,
}

impl PartitionLog {
    /// Ask for everything appended so far to become durable. Starts a chain now if none is in
    /// flight; otherwise the next chain (started when the current one completes) covers it.
    pub fn flush<I: Io>(&mut self, io: &mut I) -> Result<(), LogError> {
        self.check_running()?;
        self.flush_requested_offset = self.flush_requested_offset.max(self.log_end_offset());
        self.maybe_start_flush(io)
    }

    /// Route a completion. Foreign completions come back as [`Routed::Foreign`]. A failed write
    /// or fdatasync stops the log (EIO/ENOSPC are fatal) and is returned as the error.
    pub fn on_completion<I: Io>(
        &mut self,
        io: &mut I,
        completion: Completion,
    ) -> Result<Routed, LogError> {
        let Some(flight) = self
            .in_flight
            .as_mut()
            .filter(|flight| flight.op_ids.contains(&completion.op_id))
        else {
            return self.on_confirmation_completion(io, completion);
        };
        let slot = flight
            .op_ids
            .iter()
            .position(|id| *id == completion.op_id)
            .expect("filtered above");
        flight.completed += 1;
        if flight.block_write == Some(completion.op_id)
            && let Some(mut buf) = completion.buf
        {
            // Keep the larger of the two spare buffers: steady appends then never allocate
            // (or page-fault) a fresh write tail.
            buf.clear();
            if self
                .spare_write_buf
                .as_ref()
                .is_none_or(|spare| spare.capacity() < buf.capacity())
            {
                self.spare_write_buf = Some(buf);
            }
        }
        if let Err(error) = completion.result
            && flight.failure.is_none()
        {
            let (path, position) = flight.op_targets[slot].clone();
            flight.failure = Some((path, position, error));
        }
        if flight.completed < flight.op_ids.len() {
            return Ok(Routed::Mine {
                durable_end_offset_advanced_to: None,
            });
        }
        if flight.failure.is_none() && !flight.second_stage.is_empty() {
            let (ops, targets): (Vec<Op>, Vec<(PathBuf, u64)>) =
                std::mem::take(&mut flight.second_stage).into_iter().unzip();
            flight.op_ids = io.submit_linked(ops);
            flight.op_targets = targets;
            flight.completed = 0;
            return Ok(Routed::Mine {
                durable_end_offset_advanced_to: None,
            });
        }
        let flight = self.in_flight.take().expect("checked above");
        if let Some(index_file) = flight.index_file {
            io.close(index_file)?;
        }
        if let Some((path, position, source)) = flight.failure {
            self.stopped = Some(format!("{path:?} at byte {position}: {source}"));
            return Err(LogError::WriteFailed {
                path,
                position,
                source,
            });
        }
        let confirm = (!flight.sealing).then_some(PendingConfirmation {
            segment_base_offset: flight.segment_base_offset,
            sequence: flight.slot_sequence,
            slot_header_crc32c: flight.slot_header_crc32c,
        });
        let advanced = self.apply_completed_flush(io, flight)?;
        // The next flush first (the caller may be waiting for it): if one was asked meanwhile,
        // its tail chain carries this confirmation record under its own fdatasync (no extra
        // fdatasync per flush under load); otherwise the record goes on its own now.
        if confirm.is_some() && self.confirming.is_none() {
            self.confirmation_pending = confirm;
        }
        self.maybe_start_flush(io)?;
        if let Some(confirm) = confirm
            && self.confirming.is_some()
        {
            // One record position, never two writes at once: this one follows the one in flight.
            self.confirmation_pending = Some(confirm);
        }
        self.maybe_start_confirmation(io);
        Ok(Routed::Mine {
            durable_end_offset_advanced_to: advanced,
        })
    }

    /// A completion of the confirmation record in flight, or a foreign one.
    fn on_confirmation_completion<I: Io>(
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
            confirming.failure = Some(error);
        }
        if confirming.completed < confirming.op_ids.len() {
            return Ok(Routed::Mine {
                durable_end_offset_advanced_to: None,
            });
        }
        let confirming = self.confirming.take().expect("checked above");
        if let Some(source) = confirming.failure {
            // An fdatasync failure on the tail file may have dropped a slot's dirty pages too.
            let position = confirmation_offset(self.block_size_bytes);
            self.stopped = Some(format!(
                "{:?} at byte {position}: {source}",
                confirming.path
            ));
            return Err(LogError::WriteFailed {
                path: confirming.path,
                position,
                source,
            });
        }
        // A flush deferred while this record was in flight (a seal, a new epoch, a new
        // segment's files) starts now, then the next record.
        self.maybe_start_flush(io)?;
        self.maybe_start_confirmation(io);
        Ok(Routed::Mine {
            durable_end_offset_advanced_to: None,
        })
    }

    /// Write the pending confirmation record if none is in flight and its segment still has
    /// its tail file (a truncation or seal since then makes it moot).
    fn maybe_start_confirmation<I: Io>(&mut self, io: &mut I) {
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
        let Some(tail) = segment.tail_file else {
            return;
        };
        let path = segment::segment_file_path(&self.dir, segment.base_offset, "tail");
        let op_ids = io.submit_linked(vec![
            Op::Write {
                file: tail,
                offset: confirmation_offset(block),
                buf: encode_confirmation(pending.sequence, pending.slot_header_crc32c, block),
            },
            Op::Fdatasync { file: tail },
        ]);
        self.confirming = Some(InFlightConfirmation {
            op_ids,
            completed: 0,
            path,
            failure: None,
        });
    }

    /// Block until the records appended so far are durable (not waiting for the confirmation
    /// record that follows, as an event loop would not).
    pub(crate) fn wait_until_durable<I: Io>(&mut self, io: &mut I) -> Result<(), LogError> {
        let mut ready = Vec::new();
        while self.durable_end_offset < self.flush_requested_offset
            && (self.in_flight.is_some() || self.confirming.is_some())
        {
            io.submit_and_wait(1)?;
            io.drain_completions(&mut ready);
            for completion in ready.drain(..) {
                if let Routed::Foreign(completion) = self.on_completion(io, completion)? {
                    self.foreign.push(completion);
                }
            }
        }
        if self.confirming.is_some() || self.in_flight.is_some() {
            // The completion that made the records durable queued the confirmation record (or
            // the next flush, carrying it): hand it to the kernel now, so it runs while the
            // caller builds its next appends instead of waiting for the caller's next call.
            io.submit_and_wait(0)?;
        }
        Ok(())
    }

    /// Block until no chain and no confirmation is in flight (routing completions, stashing
    /// foreign ones).
    pub(crate) fn wait_for_in_flight<I: Io>(&mut self, io: &mut I) -> Result<(), LogError> {
        let mut ready = Vec::new();
        while self.in_flight.is_some() || self.confirming.is_some() {
            io.submit_and_wait(1)?;
            io.drain_completions(&mut ready);
            for completion in ready.drain(..) {
                if let Routed::Foreign(completion) = self.on_completion(io, completion)? {
                    self.foreign.push(completion);
                }
            }
        }
        Ok(())
    }

    fn apply_completed_flush<I: Io>(
        &mut self,
        io: &mut I,
        flight: InFlightFlush,
    ) -> Result<Option<i64>, LogError> {
        let dir = self.dir.clone();
        let segment = self
            .segments
            .iter_mut()
            .find(|segment| segment.base_offset == flight.segment_base_offset)
            .expect("a segment with a chain in flight is neither truncated nor deleted");
        assert!(
            flight.target_position <= segment.size_bytes,
            "flushed bytes are still in the segment"
        );
        segment.written_full_end = flight.new_written_full_end;
        segment.flushed_end = flight.target_position;
        segment.flushed_next_offset = flight.target_next_offset;
        segment.slot_sequence = flight.slot_sequence;
        if flight.sealing {
            // The final bytes are in the .log file itself now; the tail file is no longer
            // needed (a stale one is ignored for any segment that is not the last).
            segment.seal_durable = true;
            segment.write_tail.clear();
            segment.write_tail_start = segment.size_bytes;
            if let Some(tail) = segment.tail_file.take() {
                io.close(tail)?;
            }
            io.remove_file(&segment::segment_file_path(
                &dir,
                segment.base_offset,
                "tail",
            ))?;
        }
        segment.release_written_chunks();
        if flight.generation == self.generation
            && flight.target_next_offset > self.durable_end_offset
        {
            self.durable_end_offset = flight.target_next_offset;
            return Ok(Some(self.durable_end_offset));
        }
        Ok(None)
    }

    pub(crate) fn maybe_start_flush<I: Io>(&mut self, io: &mut I) -> Result<(), LogError> {
        if self.in_flight.is_some() || self.durable_end_offset >= self.flush_requested_offset {
            return Ok(());
        }
        let Some(index) = self
            .segments
            .iter()
            .position(|segment| segment.needs_flush())
        else {
            return Ok(());
        };
        if self.confirming.is_some()
            && (self.segments[index].sealed
                || self.epoch_cache_dirty
                || self.segments[index].file.is_none())
        {
            // Sealing closes and removes the tail file, and the blocking writes below could
            // swallow the confirmation's completions: none of them while it is in flight. Its
            // completion starts this flush (one small round trip later, and only at a roll or a
            // new epoch).
            return Ok(());
        }
        if self.epoch_cache_dirty {
            // Rare (a new epoch): written before the chain so the blocking write cannot swallow
            // one of our own completions.
            self.persist_epoch_cache(io)?;
        }
        if self.segments[index].file.is_none() {
            self.create_segment_files(io, index)?;
        }
        self.start_chain(io, index)
    }

    /// Create a segment's `.tail` (atomically, with an empty first slot) and then its `.log`
    /// (preallocated), and fsync the folder. `.log` exists ⇒ `.tail` exists, for a new segment.
    fn create_segment_files<I: Io>(&mut self, io: &mut I, index: usize) -> Result<(), LogError> {
        let block = self.block_size_bytes;
        let base = self.segments[index].base_offset;
        let tail_path = segment::segment_file_path(&self.dir, base, "tail");
        let log_path = segment::segment_file_path(&self.dir, base, "log");
        let mut tail_bytes = vec![0u8; tail_slot::tail_file_size_bytes(block) as usize];
        let first_slot = encode_slot(0, 0, &[], block, 0, &[]);
        tail_bytes[..first_slot.len()].copy_from_slice(first_slot.as_slice());
        blocking::write_file_atomically(io, &tail_path, &tail_bytes, &mut self.foreign)?;
        let tail = io.open(
            &tail_path,
            OpenOptions {
                direct: true,
                ..Default::default()
            },
        )?;
        let file = io.open(
            &log_path,
            OpenOptions {
                create: true,
                direct: true,
                ..Default::default()
            },
        )?;
        if self.config.preallocate {
            io.preallocate(file, self.config.segment_size_bytes + block as u64)?;
        }
        io.sync_dir(&self.dir)?;
        let segment = &mut self.segments[index];
        segment.tail_file = Some(tail);
        segment.file = Some(file);
        segment.slot_sequence = 0;
        Ok(())
    }

    fn start_chain<I: Io>(&mut self, io: &mut I, index: usize) -> Result<(), LogError> {
        let block = self.block_size_bytes;
        let dir = self.dir.clone();
        let segment = &mut self.segments[index];
        let file = segment.file.expect("created above");
        let tail = segment
            .tail_file
            .expect("a segment being written has a tail file");
        let log_path = segment::segment_file_path(&dir, segment.base_offset, "log");
        let tail_path = segment::segment_file_path(&dir, segment.base_offset, "tail");
        let end = segment.size_bytes;
        let sealing = segment.sealed;
        let full_end = round_down(end, block);
        let slot_sequence = segment.slot_sequence + 1;
        assert_eq!(
            segment.write_tail_start, segment.written_full_end,
            "no chain in flight: the aligned tail starts where the file's full blocks end"
        );
        let partial =
            &segment.write_tail.as_slice()[(full_end - segment.write_tail_start) as usize..];
        // The slot also records where this flush's full blocks start and their CRC32C, so
        // recovery can check that the blocks it vouches for are intact.
        let flush_start = segment.written_full_end;
        let blocks_len = (full_end - flush_start) as usize;
        let slot = encode_slot(
            slot_sequence,
            full_end / block as u64,
            partial,
            block,
            flush_start,
            &segment.write_tail.as_slice()[..blocks_len],
        );
        let slot_header_crc32c = encoded_slot_header_crc32c(slot.as_slice());

        let mut ops = Vec::new();
        let mut targets = Vec::new();
        let new_written_full_end = if sealing {
            round_up(end, block)
        } else {
            full_end
        };
        if new_written_full_end > segment.written_full_end {
            // Move the aligned bytes out; keep the partial block (if any) for the next flush.
            let keep_from = (full_end - segment.write_tail_start) as usize;
            let replacement = match self.spare_write_buf.take() {
                Some(spare) if spare.align() >= block => spare,
                _ => AlignedBuf::with_capacity(block, block),
            };
            let mut buf = std::mem::replace(&mut segment.write_tail, replacement);
            if sealing {
                // Zero padding to the block boundary: the final block goes to a position of the
                // .log file never written before, and nothing is appended here again.
                let padding = (new_written_full_end - end) as usize;
                buf.extend_from_slice(&vec![0u8; padding]);
                segment.write_tail_start = end;
            } else {
                segment
                    .write_tail
                    .extend_from_slice(&buf.as_slice()[keep_from..]);
                segment.write_tail_start = full_end;
                buf.set_len(keep_from);
            }
            targets.push((log_path.clone(), segment.written_full_end));
            ops.push(Op::Write {
                file,
                offset: segment.written_full_end,
                buf,
            });
            targets.push((log_path.clone(), 0));
            ops.push(Op::Fdatasync { file });
        }
        let mut second_stage = Vec::new();
        let first_stage_len = ops.len();
        targets.push((tail_path.clone(), slot_offset(slot_sequence, block)));
        ops.push(Op::Write {
            file: tail,
            offset: slot_offset(slot_sequence, block),
            buf: slot,
        });
        // The previous flush of this segment completed and its confirmation record is not
        // written yet: it rides on this slot's fdatasync. Safe because it names a flush whose
        // blocks and slot are already durable, and its block (4) is neither slot's position, so
        // a torn write here damages neither the newest durable slot nor anything acknowledged.
        if !sealing
            && self.confirming.is_none()
            && let Some(pending) = self.confirmation_pending.take_if(|pending| {
                pending.segment_base_offset == segment.base_offset
                    && pending.sequence == segment.slot_sequence
            })
        {
            targets.push((tail_path.clone(), confirmation_offset(block)));
            ops.push(Op::Write {
                file: tail,
                offset: confirmation_offset(block),
                buf: encode_confirmation(pending.sequence, pending.slot_header_crc32c, block),
            });
        }
        targets.push((tail_path, 0));
        ops.push(Op::Fdatasync { file: tail });

        let mut index_file = None;
        if sealing {
            let index_path = segment::segment_file_path(&dir, segment.base_offset, "index");
            let index_fd = io.open(
                &index_path,
                OpenOptions {
                    create: true,
                    ..Default::default()
                },
            )?;
            io.set_len(index_fd, 0)?;
            let encoded = segment.index.encode();
            if !encoded.is_empty() {
                targets.push((index_path.clone(), 0));
                ops.push(Op::Write {
                    file: index_fd,
                    offset: 0,
                    buf: AlignedBuf::from_slice(&encoded, block),
                });
            }
            targets.push((index_path, 0));
            ops.push(Op::Fdatasync { file: index_fd });
            index_file = Some(index_fd);
        }
        let op_ids = if sealing && first_stage_len > 0 {
            // Sealing: the slot and the index only once the final block is durable.
            let later_ops = ops.split_off(first_stage_len);
            let later_targets = targets.split_off(first_stage_len);
            second_stage = later_ops.into_iter().zip(later_targets).collect();
            io.submit_linked(ops)
        } else {
            // An ordinary flush: the segment chain and the slot chain run concurrently.
            let slot_ops = ops.split_off(first_stage_len);
            let mut op_ids = if ops.is_empty() {
                Vec::new()
            } else {
                io.submit_linked(ops)
            };
            op_ids.extend(io.submit_linked(slot_ops));
            op_ids
        };
        let block_write = (first_stage_len > 0).then_some(op_ids[0]);
        let target_next_offset = segment.next_offset;
        self.in_flight = Some(InFlightFlush {
            generation: self.generation,
            segment_base_offset: self.segments[index].base_offset,
            op_ids,
            op_targets: targets,
            second_stage,
            completed: 0,
            failure: None,
            target_position: end,
            target_next_offset,
            new_written_full_end,
            slot_sequence,
            slot_header_crc32c,
            sealing,
            index_file,
            block_write,
        });
        Ok(())
    }
}
