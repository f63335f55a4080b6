//! What a chain needs before its first write, made durable through the ring: the
//! leader-epoch-checkpoint holding a new epoch (before any batch of that epoch is flushed, so a
//! batch list's epochs can be checked against it, docs/log.md "The batch list and a clean
//! close"), and a new segment's `.log` (created whole with a valid empty slot, then renamed).
//!
//! Both are atomic replacements (a `.tmp` written and fdatasynced, renamed, the folder fsynced).
//! Done synchronously they cost the caller three or four syncs per partition at each new epoch
//! and each roll; a node taking over many partitions at once (a new topic's elections, a
//! failover) held its event loop 54-122 ms for 100 of them (docs/benchmarks.md). Here the syncs
//! go through the ring like a flush, the two files share one folder fsync, and the cheap
//! metadata calls (open, set_len, fallocate, rename) stay synchronous:
//!
//! ```text
//!  maybe_start_flush ─► [SyncingFiles: checkpoint .tmp write + fdatasync (linked),
//!                                      segment .tmp slot-region write + fdatasync (linked)]
//!                            │ all complete
//!                            ▼ rename each .tmp over its file (metadata, no sync)
//!                       [SyncingFolder: fsync of the partition folder]
//!                            │ completes
//!                            ▼ the segment's file opened; the chain starts (`start_chain`)
//! ```
//!
//! The chain waits for the whole preparation, so no byte of a new epoch reaches a segment before
//! the checkpoint naming that epoch is durable, and no data reaches a `.log` whose name is not
//! (the same order the synchronous steps kept). Appends go on meanwhile, into memory. A failure
//! out of space removes the `.tmp` files and leaves the log waiting for space (`flush` starts the
//! preparation again); any other failure stops the log.

use std::path::PathBuf;

use super::super::segment;
use super::super::tail_slot::{self, encode_slot};
use super::super::{LogError, PartitionLog, blocking};
use super::Routed;
use crate::io::{AlignedBuf, Completion, FileId, Io, IoError, Op, OpId, OpenOptions};

/// A preparation in flight (module doc).
#[derive(Debug)]
pub(crate) struct Preparation {
    stage: Stage,
    /// The operations of the current stage not completed yet.
    pending: Vec<OpId>,
    /// The checkpoint's `.tmp`, while it is written.
    checkpoint: Option<TmpFile>,
    /// The new segment's `.tmp`, while it is written.
    segment: Option<NewSegment>,
    /// The folder's handle, while its fsync runs.
    folder: Option<FileId>,
    /// The first failure.
    failure: Option<IoError>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    SyncingFiles,
    SyncingFolder,
}

#[derive(Debug)]
struct TmpFile {
    file: Option<FileId>,
    tmp_path: PathBuf,
    path: PathBuf,
}

#[derive(Debug)]
struct NewSegment {
    base_offset: i64,
    tmp: TmpFile,
    reserved_end: u64,
}

impl Preparation {
    pub(crate) fn op_ids(&self) -> &[OpId] {
        &self.pending
    }

    fn close_tmp_files<I: Io>(&mut self, io: &mut I) -> Result<(), IoError> {
        let mut result = Ok(());
        let tmps = self
            .checkpoint
            .iter_mut()
            .chain(self.segment.iter_mut().map(|segment| &mut segment.tmp));
        for tmp in tmps {
            if let Some(file) = tmp.file.take()
                && let Err(error) = io.close(file)
                && result.is_ok()
            {
                result = Err(error);
            }
        }
        result
    }
}

impl PartitionLog {
    /// Whether the chain for segment `index` needs a preparation first.
    pub(super) fn needs_preparation(&self, index: usize) -> bool {
        self.epoch_cache_dirty || self.segments[index].file.is_none()
    }

    /// Starts the preparation of segment `index`'s chain (module doc). Nothing is submitted if
    /// a synchronous step fails: the `.tmp` files opened so far are closed (and the segment's
    /// removed), and the error is returned as the synchronous steps returned it.
    pub(super) fn start_preparation<I: Io>(
        &mut self,
        io: &mut I,
        index: usize,
    ) -> Result<(), LogError> {
        assert!(self.preparing.is_none() && self.in_flight.is_none());
        let mut segment = None;
        if self.segments[index].file.is_none() {
            segment = Some(self.open_segment_tmp(io, index)?);
        }
        let mut checkpoint = None;
        if self.epoch_cache_dirty {
            let path = self.epoch_checkpoint_path();
            let tmp_path = blocking::tmp_path(&path);
            match blocking::open_emptied(io, &tmp_path) {
                Ok(file) => {
                    checkpoint = Some(TmpFile {
                        file: Some(file),
                        tmp_path,
                        path,
                    })
                }
                Err(source) => {
                    if let Some(mut segment) = segment {
                        if let Some(file) = segment.tmp.file.take() {
                            let _ = io.close(file);
                        }
                        let _ = io.remove_file(&segment.tmp.tmp_path);
                    }
                    return Err(LogError::EpochCache {
                        dir: self.dir.clone(),
                        source: source.into(),
                    });
                }
            }
        }
        let mut pending = Vec::new();
        if let Some(new) = &segment {
            let block = self.block_size_bytes;
            let file = new.tmp.file.expect("opened above");
            let region_offset = self.segments[index].region_offset;
            let mut region =
                AlignedBuf::zeroed(tail_slot::region_size_bytes(block) as usize, block);
            let first_slot = encode_slot(0, 0, &[], block, 0, &[], 0);
            region.as_mut_slice()[..first_slot.len()].copy_from_slice(first_slot.as_slice());
            pending.extend(io.submit_linked(vec![
                Op::Write {
                    file,
                    offset: region_offset,
                    buf: region,
                },
                Op::Fdatasync { file },
            ]));
        }
        if let Some(tmp) = &checkpoint {
            let file = tmp.file.expect("opened above");
            let encoded = self.epoch_cache.encode();
            pending.extend(blocking::submit_write_and_sync(
                io,
                file,
                encoded.as_bytes(),
            ));
            // The cache as of now is on its way; a change from here on makes it dirty again
            // (and a failure below restores the flag).
            self.epoch_cache_dirty = false;
        }
        self.preparing = Some(Preparation {
            stage: Stage::SyncingFiles,
            pending,
            checkpoint,
            segment,
            folder: None,
            failure: None,
        });
        Ok(())
    }

    /// Routes a completion of the preparation in flight, if it is one of its operations.
    pub(super) fn on_preparation_completion<I: Io>(
        &mut self,
        io: &mut I,
        completion: Completion,
    ) -> Result<Routed, LogError> {
        let Some(preparation) = self
            .preparing
            .as_mut()
            .filter(|preparation| preparation.pending.contains(&completion.op_id))
        else {
            return Ok(Routed::Foreign(completion));
        };
        preparation.pending.retain(|id| *id != completion.op_id);
        let short = matches!(
            (&completion.result, &completion.buf),
            (Ok(written), Some(buf)) if *written < buf.len()
        );
        if preparation.failure.is_none() {
            match completion.result {
                Err(error) => preparation.failure = Some(error),
                Ok(_) if short => {
                    // What a full device does to a buffered write.
                    preparation.failure = Some(IoError::new(
                        "write",
                        &self.dir,
                        0,
                        std::io::Error::from_raw_os_error(libc::ENOSPC),
                    ))
                }
                Ok(_) => {}
            }
        }
        if !preparation.pending.is_empty() {
            return Ok(Routed::Mine {
                durable_end_offset_advanced_to: None,
            });
        }
        match preparation.stage {
            Stage::SyncingFiles => self.files_synced(io)?,
            Stage::SyncingFolder => self.folder_synced(io)?,
        }
        Ok(Routed::Mine {
            durable_end_offset_advanced_to: None,
        })
    }

    /// Both `.tmp` files are written and synced (or one failed): rename them and fsync the
    /// folder.
    fn files_synced<I: Io>(&mut self, io: &mut I) -> Result<(), LogError> {
        let preparation = self.preparing.as_mut().expect("a preparation in flight");
        let closed = preparation.close_tmp_files(io);
        let failure = preparation.failure.take().or(closed.err());
        if let Some(source) = failure {
            let preparation = self.preparing.take().expect("checked above");
            return Err(self.preparation_failed(io, preparation, source));
        }
        let renamed = (|| {
            if let Some(tmp) = &preparation.checkpoint {
                io.rename(&tmp.tmp_path, &tmp.path)?;
            }
            if let Some(new) = &preparation.segment {
                io.rename(&new.tmp.tmp_path, &new.tmp.path)?;
            }
            io.open_dir(&self.dir)
        })();
        match renamed {
            Ok(folder) => {
                preparation.folder = Some(folder);
                preparation.stage = Stage::SyncingFolder;
                preparation.pending = vec![io.submit(Op::Fdatasync { file: folder })];
                Ok(())
            }
            Err(source) => {
                let preparation = self.preparing.take().expect("checked above");
                Err(self.preparation_failed(io, preparation, source))
            }
        }
    }

    /// The renames are durable: the new segment's file is opened for the chain, which starts.
    fn folder_synced<I: Io>(&mut self, io: &mut I) -> Result<(), LogError> {
        let mut preparation = self.preparing.take().expect("a preparation in flight");
        let folder = preparation.folder.take().expect("synced above");
        let closed = io.close(folder);
        if let Some(source) = preparation.failure.take().or(closed.err()) {
            return Err(self.stop_on(source));
        }
        if let Some(new) = preparation.segment {
            let file = io
                .open(&new.tmp.path, OpenOptions::DIRECT)
                .map_err(|source| self.stop_on(source))?;
            let reader = match io.open_reader(&new.tmp.path) {
                Ok(reader) => reader,
                Err(source) => {
                    let _ = io.close(file);
                    return Err(self.stop_on(source));
                }
            };
            let segment = self
                .segments
                .iter_mut()
                .find(|segment| segment.base_offset == new.base_offset)
                .expect("a segment being created is neither truncated nor deleted (both wait)");
            segment.file = Some(file);
            segment.reader = reader;
            segment.slot_sequence = 0;
            segment.reserved_end = new.reserved_end;
        }
        // Out of space for the chain: `waiting_for_space` says so and `flush` asks again.
        match self.start_flush_or_wait_for_space(io) {
            Err(error) if error.is_no_space() => Ok(()),
            other => other,
        }
    }

    /// A preparation's write, sync or rename failed: out of space the `.tmp` files are removed
    /// and the log waits for space (nothing was renamed); anything else stops it.
    fn preparation_failed<I: Io>(
        &mut self,
        io: &mut I,
        mut preparation: Preparation,
        source: IoError,
    ) -> LogError {
        let _ = preparation.close_tmp_files(io);
        if let Some(folder) = preparation.folder.take() {
            let _ = io.close(folder);
        }
        if preparation.checkpoint.is_some() {
            self.epoch_cache_dirty = true;
        }
        if !source.is_no_space() {
            return self.stop_on(source);
        }
        for tmp in preparation
            .checkpoint
            .iter()
            .chain(preparation.segment.iter().map(|segment| &segment.tmp))
        {
            let _ = io.remove_file(&tmp.tmp_path);
        }
        let error = LogError::NoSpace {
            path: source.path.clone(),
            position: source.offset,
            source,
        };
        self.note_no_space(&error);
        error
    }

    fn stop_on(&mut self, source: IoError) -> LogError {
        self.stopped = Some(format!("{:?}: {source}", source.path));
        LogError::WriteFailed {
            path: source.path.clone(),
            position: source.offset,
            source,
        }
    }

    /// The synchronous steps of a new segment's `.tmp`: created at its final length (the data
    /// area and the slot region) with the first stretch of its data area reserved. Out of space
    /// the `.tmp` is removed and the log waits; any other failure stops it.
    fn open_segment_tmp<I: Io>(
        &mut self,
        io: &mut I,
        index: usize,
    ) -> Result<NewSegment, LogError> {
        let block = self.block_size_bytes;
        let base_offset = self.segments[index].base_offset;
        let region_offset = self.segments[index].region_offset;
        assert!(
            self.segments[index].size_bytes <= region_offset,
            "a new segment's data fits before its slot region"
        );
        let log_path = segment::segment_file_path(&self.dir, base_offset, "log");
        let tmp_path = blocking::tmp_path(&log_path);
        if io.exists(&tmp_path) {
            io.remove_file(&tmp_path)?;
        }
        let options = OpenOptions {
            create: true,
            direct: true,
            ..Default::default()
        };
        let file = io.open(&tmp_path, options)?;
        let file_len = region_offset + tail_slot::region_size_bytes(block);
        // The first stretch of the data area; the flushes reserve the rest as they reach it
        // (`reserve_ahead`). The slot region is written whole, so it is allocated.
        let reserved_end = if self.config.preallocate {
            super::segment_files::reservation_end(
                0,
                self.config.preallocate_ahead_bytes,
                region_offset,
                block,
            )
        } else {
            0
        };
        let sized = io.set_len(file, file_len).and_then(|()| {
            if reserved_end > 0 {
                io.preallocate(file, reserved_end)
            } else {
                Ok(())
            }
        });
        if let Err(source) = sized {
            let _ = io.close(file);
            if source.is_no_space() {
                let _ = io.remove_file(&tmp_path);
                return Err(LogError::NoSpace {
                    path: tmp_path,
                    position: source.offset,
                    source,
                });
            }
            return Err(self.stop_on(source));
        }
        Ok(NewSegment {
            base_offset,
            tmp: TmpFile {
                file: Some(file),
                tmp_path,
                path: log_path,
            },
            reserved_end,
        })
    }
}
