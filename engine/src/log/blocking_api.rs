//! The log's blocking operations: rare, off the hot path, each waits for any chain in flight
//! first so that its own synchronous I/O cannot swallow one of the chain's completions.

use bytes::Bytes;

use super::blocking;
use super::chunks::Chunk;
use super::segment::{self, Segment, round_down};
use super::tail_slot::{encode_slot, slot_offset};
use super::write_tail::WriteTail;
use super::{LogError, PartitionLog, ReadView};
use crate::io::{Io, Op};

impl PartitionLog {
    /// Flush and block until everything appended so far is durable. Returns the durable end
    /// offset. For tests, tools and the rare blocking paths; the hot path uses `flush` and
    /// `on_completion`.
    pub fn flush_and_wait<I: Io>(&mut self, io: &mut I) -> Result<i64, LogError> {
        self.flush(io)?;
        self.wait_for_in_flight(io)?;
        // The last flush's confirmation record waits for a next flush: write it now.
        self.write_confirmation(io);
        self.wait_for_in_flight(io)?;
        self.sync_confirmation_written_alone(io)?;
        // The next flush could not start for lack of space after this one completed.
        self.durable_or_waiting_for_space()?;
        debug_assert!(self.durable_end_offset >= self.flush_requested_offset);
        Ok(self.durable_end_offset)
    }

    /// Makes a confirmation record written alone since the last call durable: an fdatasync of
    /// its segment file, if that is still open (a seal's fdatasync covered it otherwise). The
    /// record is a plain write (`flush::confirmation`); the blocking paths end with this.
    fn sync_confirmation_written_alone<I: Io>(&mut self, io: &mut I) -> Result<(), LogError> {
        let Some(file) = self.confirmation_unsynced.take() else {
            return Ok(());
        };
        let Some(segment) = self.segments.iter().find(|s| s.file == Some(file)) else {
            return Ok(());
        };
        let path = segment::segment_file_path(&self.dir, segment.base_offset, "log");
        self.run_checked(io, vec![Op::Fdatasync { file }], &path)
    }

    /// Flush and block until everything appended so far is durable, as an event loop sees it:
    /// returns as soon as the flush's fdatasyncs completed, leaving the confirmation record
    /// that follows in flight (routed by `on_completion` or a later blocking call). Returns the
    /// durable end offset.
    pub fn flush_until_durable<I: Io>(&mut self, io: &mut I) -> Result<i64, LogError> {
        self.flush(io)?;
        self.wait_until_durable(io)?;
        self.durable_or_waiting_for_space()?;
        debug_assert!(self.durable_end_offset >= self.flush_requested_offset);
        Ok(self.durable_end_offset)
    }

    /// Remove every record at or after `offset` (a follower whose log diverged, KIP-595), and
    /// make the truncation durable before returning. A batch holding `offset` is removed whole,
    /// so the new log end offset (returned) may be below `offset`.
    ///
    /// Refuses (typed error, nothing changed) to go below `floor`, the high-watermark: records
    /// below it may be committed, and a voter that forgets them can break the quorum's safety.
    pub fn truncate_to<I: Io>(
        &mut self,
        io: &mut I,
        offset: i64,
        floor: i64,
    ) -> Result<i64, LogError> {
        self.check_running()?;
        if offset < floor {
            return Err(LogError::TruncateBelowFloor {
                dir: self.dir.clone(),
                offset,
                floor,
            });
        }
        let log_end_offset = self.log_end_offset();
        if offset >= log_end_offset {
            return Ok(log_end_offset);
        }
        if offset < self.log_start_offset {
            return Err(LogError::OffsetOutOfRange {
                offset,
                log_start_offset: self.log_start_offset,
                log_end_offset,
            });
        }
        let index = self.segment_index_for(offset);
        let (batch, position, new_end_offset) = {
            let segment = &self.segments[index];
            let batch = segment.batch_index_for(offset);
            match segment.batches.get(batch) {
                Some(entry) => (batch, entry.position, entry.base_offset),
                None => (batch, segment.size_bytes, segment.next_offset),
            }
        };
        if new_end_offset < floor {
            return Err(LogError::TruncateBelowFloor {
                dir: self.dir.clone(),
                offset: new_end_offset,
                floor,
            });
        }
        // Everything durable first: the cut below then only ever shortens durable bytes.
        self.flush_and_wait(io)?;
        self.generation += 1;

        // Later segments go first (and durably): a crash must never leave a later segment
        // whose base offset no longer continues the one being cut.
        let removed: Vec<Segment> = self.segments.drain(index + 1..).collect();
        for segment in &removed {
            self.delete_segment_files(io, segment)?;
        }
        if !removed.is_empty() {
            io.sync_dir(&self.dir)?;
        }
        self.cut_segment(io, index, batch, position, new_end_offset)?;

        self.durable_end_offset = new_end_offset;
        self.flush_requested_offset = new_end_offset;
        // The checkpoint on disk may keep the removed epochs until the next chain's preparation
        // writes it (`flush::prepare`), or `close`: recovery rebuilds the cache from the batches
        // and only compares batch lists with the file, and entries past the log end name no
        // batch. Written here, a truncation cost two more syncs on the caller's thread.
        self.epoch_cache_dirty |= self.epoch_cache.truncate_from_end(new_end_offset);
        Ok(new_end_offset)
    }

    /// Move the log start offset (KIP-630: to a snapshot's end offset) and delete every whole
    /// segment below it. Returns the number of segments deleted. The active segment is kept.
    pub fn advance_log_start_offset<I: Io>(
        &mut self,
        io: &mut I,
        offset: i64,
    ) -> Result<usize, LogError> {
        self.check_running()?;
        if offset <= self.log_start_offset {
            return Ok(0);
        }
        let log_end_offset = self.log_end_offset();
        if offset > log_end_offset {
            return Err(LogError::OffsetOutOfRange {
                offset,
                log_start_offset: self.log_start_offset,
                log_end_offset,
            });
        }
        self.wait_for_in_flight(io)?;
        self.log_start_offset = offset;
        let mut deletable = 0;
        while deletable + 1 < self.segments.len()
            && self.segments[deletable + 1].base_offset <= offset
            && self.segments[deletable].seal_durable
        {
            deletable += 1;
        }
        let removed: Vec<Segment> = self.segments.drain(..deletable).collect();
        for segment in &removed {
            self.delete_segment_files(io, segment)?;
        }
        if !removed.is_empty() {
            io.sync_dir(&self.dir)?;
        }
        // As after a truncation: entries below the log start name no batch left; the next
        // chain's preparation or `close` writes the file.
        self.epoch_cache_dirty |= self.epoch_cache.truncate_from_start(offset);
        Ok(removed.len())
    }

    /// Wait for in-flight I/O, flush what is appended (unless the log stopped), write the
    /// active segment's index, close every file.
    pub fn close<I: Io>(mut self, io: &mut I) -> Result<(), LogError> {
        let flushed = if self.stopped.is_none() {
            self.flush_and_wait(io).map(|_| ())
        } else {
            Ok(())
        };
        let waited = self.wait_for_in_flight(io);
        if flushed.is_ok() && waited.is_ok() && self.stopped.is_none() {
            // A truncation or a log start advance since the last chain left the checkpoint to
            // be written: a clean restart compares the batch lists with it.
            if self.epoch_cache_dirty {
                self.persist_epoch_cache(io)?;
            }
            // Everything is durable: a clean restart reads no batch again (batch_list).
            self.write_batch_lists(io, true);
            let active = self.active();
            if active.file.is_some() {
                let path = segment::segment_file_path(&self.dir, active.base_offset, "index");
                let encoded = active.index.encode();
                blocking::write_whole_file(io, &path, &encoded)?;
            }
            let marker = self.dir.join(super::batch_list::CLEAN_SHUTDOWN_FILE);
            blocking::write_whole_file(io, &marker, b"")?;
            io.sync_dir(&self.dir)?;
        }
        for segment in &mut self.segments {
            segment.reader = None;
            if let Some(file) = segment.file.take() {
                io.close(file)?;
            }
        }
        flushed?;
        waited?;
        Ok(())
    }

    /// Materialise a view's bytes (a blocking read for file regions). For tests and tools; a
    /// server sends file regions with sendfile instead.
    pub fn read_view_bytes<I: Io>(
        &mut self,
        io: &mut I,
        view: &ReadView,
    ) -> Result<Bytes, LogError> {
        match view {
            ReadView::Memory(bytes) => Ok(bytes.clone()),
            ReadView::Chunks(chunks) => Ok(Bytes::from(chunks.concat())),
            ReadView::File {
                file,
                position,
                length_bytes,
                ..
            } => {
                // A chain stalled for space has nothing in the kernel, and reads go on while
                // the disk is full: do not ask the disk again here.
                if !self.flush_stalled() {
                    self.wait_for_in_flight(io)?;
                }
                let bytes = blocking::read_range(io, *file, *position, Some(*length_bytes))?;
                Ok(Bytes::from(bytes))
            }
        }
    }

    pub(super) fn delete_segment_files<I: Io>(
        &mut self,
        io: &mut I,
        segment: &Segment,
    ) -> Result<(), LogError> {
        if let Some(file) = segment.file {
            io.close(file)?;
        }
        // The blocks of a written segment are released off this thread (`Io::
        // remove_file_release_later`): freeing them waits for the device's discard where the
        // filesystem discards, ~200 ms per GiB on the event loop (docs/log.md).
        for extension in ["log", "index", "batches"] {
            let path = segment::segment_file_path(&self.dir, segment.base_offset, extension);
            if io.exists(&path) {
                io.remove_file_release_later(&path)?;
            }
        }
        Ok(())
    }

    /// Make segment `index` end at `position` (batch `batch` and later removed), durably, and
    /// make it the active segment again.
    fn cut_segment<I: Io>(
        &mut self,
        io: &mut I,
        index: usize,
        batch: usize,
        position: u64,
        new_end_offset: i64,
    ) -> Result<(), LogError> {
        let block = self.block_size_bytes;
        let block_start = round_down(position, block);
        // The batches that must stay readable from memory: from the first one not wholly in
        // full blocks of the file.
        let segment = &self.segments[index];
        let first_in_memory = (0..batch)
            .find(|&j| segment.batch_end(j) > block_start)
            .unwrap_or(batch);
        let memory_from = segment
            .batches
            .get(first_in_memory)
            .map_or(position, |entry| entry.position.min(position));
        let memory_bytes = match segment.slices_of_chunks(memory_from, position) {
            Some(slices) => slices.concat(),
            None => {
                let file = segment.file.expect("bytes not in memory are in the file");
                blocking::read_range(io, file, memory_from, Some(position - memory_from))?
            }
        };
        if (memory_bytes.len() as u64) < position - memory_from {
            return Err(LogError::Corruption {
                path: segment::segment_file_path(&self.dir, segment.base_offset, "log"),
                position: memory_from + memory_bytes.len() as u64,
                reason: "segment file shorter than its durable bytes while truncating".into(),
            });
        }
        let partial =
            memory_bytes[(block_start.max(memory_from) - memory_from) as usize..].to_vec();
        debug_assert_eq!(
            partial.len() as u64,
            position - block_start.max(memory_from)
        );
        if segment.file.is_some() {
            self.write_durable_end(io, index, position, &partial)?;
        }
        // The list must not name a cut batch once the records after the cut are written.
        self.cut_batch_list(io, index, batch)?;
        let index_path =
            segment::segment_file_path(&self.dir, self.segments[index].base_offset, "index");
        if io.exists(&index_path) {
            io.remove_file(&index_path)?; // stale: rewritten at the next seal or close
        }
        let segment = &mut self.segments[index];
        segment.batches.truncate(batch);
        segment.size_bytes = position;
        segment.next_offset = new_end_offset;
        segment.index.truncate_to_position(position, position);
        segment.written_full_end = block_start;
        segment.flushed_end = position;
        segment.flushed_next_offset = new_end_offset;
        segment.sealed = false;
        segment.seal_durable = false;
        segment.write_tail = WriteTail::from_partial(&partial, block);
        segment.write_tail_start = block_start;
        segment.chunks.clear();
        if memory_from < position {
            segment.chunks.push_back(Chunk {
                position: memory_from,
                next_offset: new_end_offset,
                bytes: Bytes::from(memory_bytes),
            });
        } else {
            // The segments holding chunks stay the newest ones (`release_cached_chunks`):
            // older segments' chunks no longer reach the tail.
            for older in &mut self.segments[..index] {
                older.chunks.clear();
            }
        }
        Ok(())
    }

    /// Durably record that segment `index` ends at `position`, whose partial last block is
    /// `partial`: a new slot whose durable mark is `position`, then an fdatasync. Nothing past
    /// a trusted mark is ever read by recovery, so the bytes past the cut (stale batches, in
    /// full blocks or not) need no removal: the next flushes write over them, each with a slot
    /// vouching (by CRC32C) for exactly the blocks it wrote. Used by truncation and recovery.
    pub(crate) fn write_durable_end<I: Io>(
        &mut self,
        io: &mut I,
        index: usize,
        position: u64,
        partial: &[u8],
    ) -> Result<(), LogError> {
        let block = self.block_size_bytes;
        let block_start = round_down(position, block);
        assert_eq!(
            partial.len() as u64,
            position - block_start,
            "the partial block ends at the cut"
        );
        let segment = &self.segments[index];
        assert!(
            position <= segment.region_offset,
            "a segment's end lies before its slot region"
        );
        let base = segment.base_offset;
        let sequence = segment.slot_sequence + 1;
        let file = segment
            .file
            .expect("a segment with durable bytes has a file");
        // No blocks written with this slot: the flushed range is empty.
        let slot = encode_slot(
            sequence,
            block_start / block as u64,
            partial,
            block,
            block_start,
            &[],
            position,
        );
        let log_path = segment::segment_file_path(&self.dir, base, "log");
        let ops = vec![
            Op::Write {
                file,
                offset: segment.region_offset + slot_offset(sequence, block),
                buf: slot,
            },
            Op::Fdatasync { file },
        ];
        self.run_checked(io, ops, &log_path)?;
        self.segments[index].slot_sequence = sequence;
        Ok(())
    }

    /// Run a small blocking chain; a failed write or fdatasync stops the log.
    pub(super) fn run_checked<I: Io>(
        &mut self,
        io: &mut I,
        ops: Vec<Op>,
        path: &std::path::Path,
    ) -> Result<(), LogError> {
        let offset = ops.first().map_or(0, |op| op.offset());
        for mut completion in blocking::run_ops(io, ops, true)? {
            if let Err(source) = blocking::completion_result(&mut completion) {
                self.stopped = Some(format!("{path:?} at byte {offset}: {source}"));
                return Err(LogError::WriteFailed {
                    path: path.to_path_buf(),
                    position: offset,
                    source,
                });
            }
        }
        Ok(())
    }
}
