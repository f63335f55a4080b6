//! Group commit: at most one data chain in flight per log.
//!
//! A flush covers one segment (the oldest with unflushed bytes or an unwritten seal). Its writes
//! go to ONE file, concurrently. A chain of one write (the usual small flush: the slot carries
//! the partial tail block) is that write with `RWF_DSYNC` ([`Op::WriteDsync`]): durable when it
//! completes, one round trip, no fdatasync worker thread and no event-loop turn in between. A
//! chain of several writes ends with ONE fdatasync of the file, submitted once they all
//! completed: on a device without FUA every dsync write costs its own cache flush, so several
//! dsync writes would cost several flushes where one fdatasync costs one.
//!
//! ```text
//! [write full blocks to the data area] ┐ concurrently  ┐ all completed:  [fdatasync .log]
//! [write slot to the slot region]      │               │  -> the records below the flush's
//! [write pending confirmation record]  ┘               ┘     end are reported durable
//! [write slot to the slot region, dsync]  (alone)      -> durable when it completes
//! ```
//!
//! Why this is safe (docs/log.md, "The torn tail block"): the full blocks go to positions of the
//! data area never written before (or past the durable mark, which recovery never trusts), and
//! the slot goes to the slot position that does *not* hold the newest durable slot (the
//! previous flush completed before this one started). So nothing this flush writes can damage
//! a byte reported durable earlier, whatever tears. Until the chain is durable, any of its
//! writes may be on the medium without the others, or in part; the slot records the CRC32C of its blocks,
//! and recovery trusts a slot only when its blocks match (else the flush never finished:
//! recovery falls back to the previous slot, whose bytes are intact).
//!
//! After the flush completed, a *confirmation record* (`RLTC`, region block 4) naming the new
//! slot is written, off the caller's critical path: in the next flush's chain when that flush
//! starts at once (group commit under load), else alone (one dsync write). Once it is durable,
//! blocks of that flush that no longer match are damage to acknowledged data (refuse to open),
//! not an unfinished flush; and a confirmed slot that is itself damaged refuses to open instead
//! of silently falling back. Between the flush's completion and the confirmation's completion,
//! corruption of the just-acknowledged blocks would be taken for an unfinished flush:
//! docs/log.md lists that limit.
//!
//! A sealing chain (the segment was rolled) is the same chain with the final partial block
//! zero padded and written to the data area itself, and a last slot vouching for it (its mark
//! is where the batches end); the `.index` is written by a second, independent chain. The next
//! segment's file is created only once the seal completed.
//!
//! Completions are matched by `OpId` and the chain carries the log's truncation generation, so
//! a completion from before a truncation can never move the durable offset (openraft's IOId idea).
//!
//! Before a chain's first write, the files it needs (a new epoch's leader-epoch-checkpoint, a new
//! segment's `.log`) are made durable through the ring, never by a blocking sync ([`prepare`]).
//!
//! Here: the chain and its completions; the confirmation record in [`confirmation`]; the files a
//! chain needs first in [`prepare`]; reserving a segment's data area ahead of writes in
//! [`segment_files`].

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::segment::{self, round_down, round_up};
use super::tail_slot::{
    confirmation_offset, encode_confirmation, encode_slot_for_blocks, encoded_slot_header_crc32c,
    slot_offset,
};
use super::{LogError, PartitionLog};
use crate::io::{AlignedBuf, Completion, FileId, Io, IoError, Op, OpId, OpenOptions};

mod confirmation;
mod prepare;
mod segment_files;

pub(crate) use prepare::Preparation;
pub(crate) use segment_files::InFlightReservation;

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
    op_targets: Vec<(Arc<Path>, u64)>,
    /// A chain of several writes ends with one fdatasync of the segment file, submitted once
    /// they all completed (an fdatasync covers only completed writes): one device cache flush
    /// for the chain, where a dsync write each would cost one flush per write on a device
    /// without FUA. A chain of one write is that write with `RWF_DSYNC` and has none.
    fdatasync: Option<(Op, (Arc<Path>, u64))>,
    /// The fdatasync's id once submitted (its completion is no write).
    fdatasync_op: Option<OpId>,
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
    /// The advisory `.index` chain of a seal: its failures are logged, never fatal (recovery
    /// rebuilds the index).
    index_op_ids: Vec<OpId>,
    /// Writes of this chain that met ENOSPC/EDQUOT (or were short), to submit again as they
    /// were: nothing was reported durable over them, so writing the same bytes to the same
    /// positions again is the same chain (`resubmit_stalled_flush`).
    retry: Vec<RetryWrite>,
    /// The first out-of-space error of the chain.
    no_space: Option<IoError>,
    /// Every operation completed, some writes wait in `retry` for space to return.
    stalled: bool,
    /// The segment file, when the previous flush's confirmation record rode on this chain
    /// beside a single dsync write: no fdatasync of the chain covers it.
    rider_unsynced: Option<FileId>,
}

/// A write of a chain to submit again once space may have returned.
#[derive(Debug)]
pub(crate) struct RetryWrite {
    op: Op,
    target: (Arc<Path>, u64),
    block_write: bool,
}

/// A confirmation record being written alone: `[write RLTC record]`, a plain write made durable
/// by a later fdatasync or device cache flush (`flush::confirmation`).
#[derive(Debug)]
pub(crate) struct InFlightConfirmation {
    op_ids: Vec<OpId>,
    file: FileId,
    completed: usize,
    path: Arc<Path>,
    position: u64,
    /// The first failure and whether it is ENOSPC/EDQUOT (then the record is simply written
    /// again later).
    failure: Option<(IoError, bool)>,
    pending: PendingConfirmation,
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
    ///
    /// Out of space ([`LogError::NoSpace`]) the log keeps running and this asks again: the
    /// stalled chain's failed writes are submitted again, or the flush that could not start
    /// starts now.
    pub fn flush<I: Io>(&mut self, io: &mut I) -> Result<(), LogError> {
        self.check_running()?;
        self.flush_requested_offset = self.flush_requested_offset.max(self.log_end_offset());
        if self.in_flight.as_ref().is_some_and(|flight| flight.stalled) {
            self.resubmit_stalled_flush(io);
            return Ok(());
        }
        self.start_flush_or_wait_for_space(io)
    }

    /// Why the log waits for disk space (a flush that could not start or whose writes met
    /// ENOSPC/EDQUOT), until a `flush` gets past it. Nothing below `durable_end_offset` is
    /// affected; what was appended after it stays in memory.
    pub fn waiting_for_space(&self) -> Option<LogError> {
        self.waiting_for_space
            .as_ref()
            .map(|(path, position, errno)| LogError::NoSpace {
                path: path.clone(),
                position: *position,
                source: IoError::new(
                    "write",
                    path,
                    *position,
                    std::io::Error::from_raw_os_error(*errno),
                ),
            })
    }

    /// After a blocking wait: everything asked for is durable, or the log waits for space.
    pub(crate) fn durable_or_waiting_for_space(&self) -> Result<(), LogError> {
        match self.waiting_for_space() {
            Some(error) if self.durable_end_offset < self.flush_requested_offset => Err(error),
            _ => Ok(()),
        }
    }

    fn note_no_space(&mut self, error: &LogError) {
        if let LogError::NoSpace {
            path,
            position,
            source,
        } = error
        {
            let errno = source.raw_os_error().unwrap_or(libc::ENOSPC);
            self.waiting_for_space = Some((path.clone(), *position, errno));
        }
    }

    /// Whether a chain waits, every operation completed, for its failed writes to be submitted
    /// again (out of space).
    pub(crate) fn flush_stalled(&self) -> bool {
        self.in_flight.as_ref().is_some_and(|flight| flight.stalled)
    }

    /// `maybe_start_flush`, noting an out-of-space failure (nothing was written, nothing
    /// stopped) in `waiting_for_space` and returning it as [`LogError::NoSpace`].
    pub(crate) fn start_flush_or_wait_for_space<I: Io>(
        &mut self,
        io: &mut I,
    ) -> Result<(), LogError> {
        match self.maybe_start_flush(io) {
            Ok(()) => {
                if self.in_flight.is_some()
                    || self.preparing.is_some()
                    || self.durable_end_offset >= self.flush_requested_offset
                {
                    self.waiting_for_space = None;
                }
                Ok(())
            }
            Err(error) if error.is_no_space() => {
                let error = error.into_no_space();
                self.note_no_space(&error);
                Err(error)
            }
            Err(error) => Err(error),
        }
    }

    /// Submits the writes of the stalled chain that met ENOSPC again, as they were.
    fn resubmit_stalled_flush<I: Io>(&mut self, io: &mut I) {
        let flight = self.in_flight.as_mut().expect("a stalled chain");
        assert!(
            flight.stalled,
            "only a chain with every operation completed is resubmitted"
        );
        flight.stalled = false;
        flight.no_space = None;
        flight.completed = 0;
        flight.op_ids.clear();
        flight.op_targets.clear();
        flight.index_op_ids.clear();
        flight.block_write = None;
        for retry in std::mem::take(&mut flight.retry) {
            let id = io.submit(retry.op);
            if retry.block_write {
                flight.block_write = Some(id);
            }
            flight.op_ids.push(id);
            flight.op_targets.push(retry.target);
        }
        self.waiting_for_space = None;
    }

    /// Route a completion. Foreign completions come back as [`Routed::Foreign`]. A failed write
    /// stops the log (EIO/ENOSPC are fatal) and is returned as the error.
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
            // Not the chain's: the preparation's, the confirmation record's, the reservation's,
            // or another owner's (which the reservation hands back as foreign).
            let completion = match self.on_preparation_completion(io, completion)? {
                Routed::Foreign(completion) => completion,
                mine => return Ok(mine),
            };
            let completion = match self.on_confirmation_completion(io, completion)? {
                Routed::Foreign(completion) => completion,
                mine => return Ok(mine),
            };
            return Ok(self.on_reservation_completion(completion));
        };
        let slot = flight
            .op_ids
            .iter()
            .position(|id| *id == completion.op_id)
            .expect("filtered above");
        flight.completed += 1;
        let is_index_op = flight.index_op_ids.contains(&completion.op_id);
        let is_write = !is_index_op && flight.fdatasync_op != Some(completion.op_id);
        let mut completion = completion;
        if is_index_op {
            // Advisory: recovery rebuilds and rewrites a missing or short index.
            if let Err(error) = &completion.result {
                tracing::warn!(%error, "writing a sealed segment's index failed; recovery rebuilds it");
            }
            completion.result = Ok(0);
        }
        // A data write that met ENOSPC/EDQUOT, or wrote short (what a full device does to a
        // buffered write), wrote nothing that was reported durable: keep it to submit again,
        // whole, once space may have returned.
        let short = matches!(
            (&completion.result, &completion.buf),
            (Ok(written), Some(buf)) if is_write && *written < buf.len()
        );
        let no_space = match &completion.result {
            Err(error) if is_write && error.is_no_space() => Some(error),
            _ => None,
        };
        if (short || no_space.is_some())
            && flight.failure.is_none()
            && let Some(buf) = completion.buf.take()
        {
            let (path, position) = flight.op_targets[slot].clone();
            let file = self
                .segments
                .iter()
                .find(|segment| segment.base_offset == flight.segment_base_offset)
                .and_then(|segment| segment.file)
                .expect("a segment with a chain in flight has its file open");
            if flight.no_space.is_none() {
                flight.no_space = Some(match completion.result {
                    Err(error) => error,
                    Ok(_) => IoError::new(
                        "write",
                        &path,
                        position,
                        std::io::Error::from_raw_os_error(libc::ENOSPC),
                    ),
                });
            }
            let op = if flight.fdatasync.is_some() {
                Op::Write {
                    file,
                    offset: position,
                    buf,
                }
            } else {
                Op::WriteDsync {
                    file,
                    offset: position,
                    buf,
                }
            };
            flight.retry.push(RetryWrite {
                op,
                target: (path, position),
                block_write: flight.block_write == Some(completion.op_id),
            });
            completion.result = Ok(0);
        }
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
            flight.failure = Some((path.to_path_buf(), position, error));
        }
        if flight.completed < flight.op_ids.len() {
            return Ok(Routed::Mine {
                durable_end_offset_advanced_to: None,
            });
        }
        if flight.failure.is_none() && !flight.retry.is_empty() {
            // Out of space: the chain waits, whole, until `flush` submits its failed writes
            // again. Nothing is durable past `durable_end_offset` and nothing stopped.
            flight.stalled = true;
            let source = flight
                .no_space
                .take()
                .expect("a retried write records its error");
            let (path, position) = flight.retry[0].target.clone();
            let error = LogError::NoSpace {
                path: path.to_path_buf(),
                position,
                source,
            };
            self.note_no_space(&error);
            return Err(error);
        }
        if flight.failure.is_none()
            && let Some((op, target)) = flight.fdatasync.take()
        {
            let id = io.submit(op);
            flight.fdatasync_op = Some(id);
            flight.op_ids.push(id);
            flight.op_targets.push(target);
            return Ok(Routed::Mine {
                durable_end_offset_advanced_to: None,
            });
        }
        let flight = self.in_flight.take().expect("checked above");
        if let Some(index_file) = flight.index_file {
            io.close(index_file)?;
        }
        if let Some((path, position, source)) = flight.failure {
            // A retried write's buffer is dropped with the chain: the log is stopped.
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
        if let Some(file) = flight.rider_unsynced {
            self.confirmation_unsynced = Some(file);
        }
        let advanced = self.apply_completed_flush(flight);
        // The next flush first (the caller may be waiting for it): if one was asked meanwhile,
        // its chain carries this confirmation record (no extra write per flush under load);
        // otherwise the record goes on its own now.
        if confirm.is_some() && self.confirming.is_none() {
            self.confirmation_pending = confirm;
        }
        // Out of space for the next flush: this one completed all the same (its records are
        // durable, `waiting_for_space` says why the next waits).
        match self.start_flush_or_wait_for_space(io) {
            Err(error) if error.is_no_space() => {}
            other => other?,
        }
        if let Some(confirm) = confirm
            && self.confirming.is_some()
        {
            // One record position, never two writes at once: this one follows the one in flight.
            self.confirmation_pending = Some(confirm);
        }
        // Otherwise the record waits for the next flush, whose submission it joins as a plain
        // write: the caller writes it alone ([`PartitionLog::write_confirmation`]) if no flush
        // comes soon (the host after `CONFIRMATION_DELAY_MS`, docs/log.md).
        // After the next chain is on its way: a buffered write, every few MiB (batch_list).
        self.write_batch_lists(io, false);
        Ok(Routed::Mine {
            durable_end_offset_advanced_to: advanced,
        })
    }

    /// Whether an operation of this log may be in flight (a flush's chain, a preparation's, a
    /// confirmation record's): a completion can be this log's only then, so a router offers
    /// completions to such logs alone, and a blocking wait waits while it holds.
    pub fn awaits_completions(&self) -> bool {
        self.in_flight.is_some()
            || self.preparing.is_some()
            || self.confirming.is_some()
            || self.reserving.is_some()
    }

    /// Block until no chain and no confirmation is in flight.
    pub(crate) fn wait_for_in_flight<I: Io>(&mut self, io: &mut I) -> Result<(), LogError> {
        while self.awaits_completions() {
            self.wait_for_own_completions(io)?;
        }
        Ok(())
    }

    /// Blocks until at least one of this log's operations in flight completed and handles it.
    /// Only this log's completions are taken; other owners' stay in the backend for them.
    fn wait_for_own_completions<I: Io>(&mut self, io: &mut I) -> Result<(), LogError> {
        if self.in_flight.as_ref().is_some_and(|flight| flight.stalled) {
            // Nothing of it is in the kernel: ask again (a full disk answers NoSpace again).
            self.resubmit_stalled_flush(io);
        }
        let mut ids: Vec<OpId> = Vec::new();
        if let Some(flight) = &self.in_flight {
            ids.extend(&flight.op_ids);
        }
        if let Some(preparation) = &self.preparing {
            ids.extend(preparation.op_ids());
        }
        if let Some(confirming) = &self.confirming {
            ids.extend(&confirming.op_ids);
        }
        ids.extend(self.reservation_op_id());
        for completion in crate::io::wait_for_any(io, &ids)? {
            let routed = self.on_completion(io, completion)?;
            assert!(
                matches!(routed, Routed::Mine { .. }),
                "a completion taken by its op id belongs to this log"
            );
        }
        Ok(())
    }

    fn apply_completed_flush(&mut self, flight: InFlightFlush) -> Option<i64> {
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
            // The final bytes are in the data area itself now, zero padded, and the last slot
            // says where the batches end.
            segment.seal_durable = true;
            segment.write_tail.clear();
            segment.write_tail_start = segment.size_bytes;
            // Nothing is appended here again, and its final block is written: its chunks go
            // now but for what the tail cache and lagging replicas keep (dropped whole here, a
            // follower still fetching the end of this segment read it from the disk at every
            // roll).
            self.release_cached_chunks();
        }
        // The active segment's written chunks are dropped by its next append instead: freeing
        // one `Bytes` per batch (a thousand per MiB of 1 KiB appends) here cost ~0.1 ms between
        // this chain's completion and the next chain's submission, with the disk idle.
        if flight.generation == self.generation
            && flight.target_next_offset > self.durable_end_offset
        {
            self.durable_end_offset = flight.target_next_offset;
            return Some(self.durable_end_offset);
        }
        None
    }

    pub(crate) fn maybe_start_flush<I: Io>(&mut self, io: &mut I) -> Result<(), LogError> {
        if self.in_flight.is_some()
            || self.preparing.is_some()
            || self.durable_end_offset >= self.flush_requested_offset
        {
            return Ok(());
        }
        let Some(index) = self
            .segments
            .iter()
            .position(|segment| segment.needs_flush())
        else {
            return Ok(());
        };
        if self.confirming.is_some() && self.segments[index].sealed {
            // A seal's slot makes the confirmation in flight moot, and its record position is
            // written once at a time: the seal waits for it (one small round trip, at a roll).
            return Ok(());
        }
        if self.needs_preparation(index) {
            // A new epoch's checkpoint, a new segment's file: made durable through the ring
            // first (`prepare`), whose completion starts the chain.
            return self.start_preparation(io, index);
        }
        self.start_chain(io, index)
    }

    fn start_chain<I: Io>(&mut self, io: &mut I, index: usize) -> Result<(), LogError> {
        let block = self.block_size_bytes;
        let sealing_end = round_up(self.segments[index].size_bytes, block);
        self.reserve_ahead(io, index, sealing_end)?;
        let segment = &mut self.segments[index];
        let file = segment.file.expect("created above");
        let log_path = segment.log_path.clone();
        let end = segment.size_bytes;
        let sealing = segment.sealed;
        let full_end = round_down(end, block);
        let slot_sequence = segment.slot_sequence + 1;
        assert_eq!(
            segment.write_tail_start, segment.written_full_end,
            "no chain in flight: the aligned tail starts where the file's full blocks end"
        );
        let new_written_full_end = if sealing {
            round_up(end, block)
        } else {
            full_end
        };
        // Data never reaches the slot region (it would overwrite the slots that vouch for it).
        assert!(
            new_written_full_end <= segment.region_offset,
            "segment {} data end {new_written_full_end} reaches its slot region at {}",
            segment.base_offset,
            segment.region_offset
        );
        // The slot records where this flush's full blocks start and their CRC32C, so recovery
        // can check that the blocks it vouches for are intact. A seal pads the final block
        // with zeros and writes it to the data area: the slot then vouches for it as a full
        // block, holds no data, and marks the batches' end inside it.
        let flush_start = segment.written_full_end;
        // The blocks' CRC32C was kept as they filled (`WriteTail`): no pass over them here,
        // between the previous chain's completion and this chain's submission.
        let (slot_block_end, partial, blocks): (u64, &[u8], (usize, u32)) = if sealing {
            (
                new_written_full_end,
                &[],
                segment.write_tail.padded_blocks(),
            )
        } else {
            let blocks = segment.write_tail.full_blocks();
            (full_end, &segment.write_tail.as_slice()[blocks.0..], blocks)
        };
        assert_eq!(
            flush_start + blocks.0 as u64,
            slot_block_end,
            "the slot vouches for exactly the blocks this flush writes"
        );
        let slot = encode_slot_for_blocks(
            slot_sequence,
            slot_block_end / block as u64,
            partial,
            block,
            flush_start,
            blocks,
            end,
        );
        let slot_header_crc32c = encoded_slot_header_crc32c(slot.as_slice());

        let mut block_op = None;
        if new_written_full_end > segment.written_full_end {
            // Move the aligned bytes out; keep the partial block (if any) for the next flush.
            let spare = match self.spare_write_buf.take() {
                Some(spare) if spare.align() >= block => spare,
                _ => AlignedBuf::with_capacity_in_huge_pages(block, block),
            };
            let buf = if sealing {
                // Zero padding to the block boundary: the final block goes to a position of the
                // data area never written before, and nothing is appended here again.
                segment.write_tail_start = end;
                segment.write_tail.take_padded(spare)
            } else {
                segment.write_tail_start = full_end;
                segment.write_tail.take_full_blocks(spare)
            };
            debug_assert_eq!(
                segment.written_full_end + buf.len() as u64,
                new_written_full_end
            );
            block_op = Some((
                Op::WriteDsync {
                    file,
                    offset: segment.written_full_end,
                    buf,
                },
                (log_path.clone(), segment.written_full_end),
            ));
        }
        // The writes run concurrently (then one fdatasync, or one dsync write alone). Their
        // order does not matter for safety: nothing is reported durable before the chain is,
        // and before that either write may land without the other.
        let mut ops = Vec::new();
        let mut targets = Vec::new();
        let slot_position = segment.region_offset + slot_offset(slot_sequence, block);
        targets.push((log_path.clone(), slot_position));
        ops.push(Op::WriteDsync {
            file,
            offset: slot_position,
            buf: slot,
        });
        // The previous flush of this segment completed and its confirmation record is not
        // written yet: it rides on this chain. Safe because it names a flush whose
        // blocks and slot are already durable, and its block (region block 4) is neither
        // slot's position nor data, so a torn write there damages nothing acknowledged.
        let rider = if !sealing
            && self.confirming.is_none()
            && let Some(pending) = self.confirmation_pending.take_if(|pending| {
                pending.segment_base_offset == segment.base_offset
                    && pending.sequence == segment.slot_sequence
            }) {
            let position = segment.region_offset + confirmation_offset(block);
            Some((
                Op::Write {
                    file,
                    offset: position,
                    buf: encode_confirmation(pending.sequence, pending.slot_header_crc32c, block),
                },
                (log_path.clone(), position),
            ))
        } else {
            None
        };
        let block_write_index = block_op.as_ref().map(|_| ops.len());
        if let Some((op, target)) = block_op {
            ops.push(op);
            targets.push(target);
        }
        // One write: durable when it completes (RWF_DSYNC), no fdatasync and no loop turn
        // before it. Several: plain writes, then one fdatasync once they all completed.
        let fdatasync = if ops.len() == 1 {
            None
        } else {
            for op in &mut ops {
                if let Op::WriteDsync { .. } = op {
                    let Op::WriteDsync { file, offset, buf } =
                        std::mem::replace(op, Op::Fdatasync { file })
                    else {
                        unreachable!("matched above")
                    };
                    *op = Op::Write { file, offset, buf };
                }
            }
            Some((Op::Fdatasync { file }, (log_path, 0)))
        };
        // The confirmation record rides as a plain write in the same submission, so it costs
        // no system call and no device notification of its own. Behind several writes the
        // chain's fdatasync covers it; beside one dsync write it reaches the medium with a
        // later device cache flush, like a record written alone (`flush::confirmation`).
        let rider_unsynced = match rider {
            Some((op, target)) => {
                ops.push(op);
                targets.push(target);
                fdatasync.is_none().then_some(file)
            }
            None => None,
        };
        let mut op_ids: Vec<OpId> = ops.into_iter().map(|op| io.submit(op)).collect();

        let mut index_file = None;
        let mut index_op_ids = Vec::new();
        if sealing {
            // The index is advisory (recovery rebuilds it): its own chain, in parallel.
            let index_path: Arc<Path> = Arc::from(segment::segment_file_path(
                &self.dir,
                segment.base_offset,
                "index",
            ));
            let index_fd = io.open(
                &index_path,
                OpenOptions {
                    create: true,
                    ..Default::default()
                },
            )?;
            io.set_len(index_fd, 0)?;
            let encoded = segment.index.encode();
            let mut index_ops = Vec::new();
            if !encoded.is_empty() {
                targets.push((index_path.clone(), 0));
                index_ops.push(Op::Write {
                    file: index_fd,
                    offset: 0,
                    buf: AlignedBuf::from_slice(&encoded, block),
                });
            }
            targets.push((index_path, 0));
            index_ops.push(Op::Fdatasync { file: index_fd });
            index_op_ids = io.submit_linked(index_ops);
            op_ids.extend(&index_op_ids);
            index_file = Some(index_fd);
        }
        let block_write = block_write_index.map(|index| op_ids[index]);
        let target_next_offset = segment.next_offset;
        self.in_flight = Some(InFlightFlush {
            generation: self.generation,
            segment_base_offset: self.segments[index].base_offset,
            op_ids,
            op_targets: targets,
            fdatasync,
            fdatasync_op: None,
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
            index_op_ids,
            retry: Vec::new(),
            no_space: None,
            stalled: false,
            rider_unsynced,
        });
        Ok(())
    }
}
