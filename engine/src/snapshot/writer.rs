//! Writing a snapshot to `.part` and freezing it into `.checkpoint` (see the module doc of
//! `snapshot` for the sequence and the crash table).
//!
//! Two writers share the same file discipline:
//! - [`SnapshotWriter`]: the local state machine's snapshot, appended in order;
//! - [`RawSnapshotWriter`]: a snapshot fetched with FetchSnapshot, placed at each response's
//!   Position and validated end to end before it is frozen (the bytes came over the network).

use std::path::{Path, PathBuf};

use bytes::Bytes;

use crate::batch::control::ControlRecordType;
use crate::io::{FileId, Io, OpenOptions};

use super::encoder::{SnapshotEncoder, SnapshotFormat, SnapshotRecordSink};
use super::files::{self, parent_dir};
use super::naming::{checkpoint_path, checkpoints_dir, part_path};
use super::reader::{SnapshotContents, validate_snapshot_bytes};
use super::{SnapshotError, SnapshotId};

/// The `.part` file being written, shared by both writers.
#[derive(Debug)]
struct PartFile {
    snapshot_id: SnapshotId,
    part_path: PathBuf,
    checkpoint_path: PathBuf,
    file: FileId,
    size_bytes: u64,
}

impl PartFile {
    /// Opens `.part` for `snapshot_id`; `keep_existing`: keep the bytes already there (a resumed
    /// fetch), else start empty. Refuses when the frozen snapshot already exists: frozen files are
    /// read-only.
    fn open<I: Io>(
        io: &mut I,
        partition_dir: &Path,
        snapshot_id: SnapshotId,
        keep_existing: bool,
    ) -> Result<PartFile, SnapshotError> {
        if !snapshot_id.is_valid() {
            return Err(SnapshotError::InvalidId { snapshot_id });
        }
        let checkpoint_path = checkpoint_path(partition_dir, snapshot_id);
        if io.exists(&checkpoint_path) {
            return Err(SnapshotError::AlreadyExists {
                path: checkpoint_path,
            });
        }
        let dir = checkpoints_dir(partition_dir);
        files::create_dir_durable(io, &dir)?;
        let part_path = part_path(partition_dir, snapshot_id);
        let file = io.open(
            &part_path,
            OpenOptions {
                create: true,
                ..Default::default()
            },
        )?;
        let size_bytes = match (|| {
            if !keep_existing {
                io.set_len(file, 0)?;
            }
            io.file_size_bytes(file)
        })() {
            Ok(size) => size,
            Err(error) => {
                let _ = io.close(file);
                return Err(error.into());
            }
        };
        Ok(PartFile {
            snapshot_id,
            part_path,
            checkpoint_path,
            file,
            size_bytes,
        })
    }

    fn append<I: Io>(&mut self, io: &mut I, data: &[u8]) -> Result<(), SnapshotError> {
        files::write_all_at(io, self.file, &self.part_path, self.size_bytes, data)?;
        self.size_bytes += data.len() as u64;
        Ok(())
    }

    /// Steps 3-5: fdatasync, close, rename, folder fsync. The file is closed whatever happens.
    fn freeze<I: Io>(self, io: &mut I) -> Result<PathBuf, SnapshotError> {
        let synced = files::fdatasync(io, self.file);
        let closed = io.close(self.file);
        synced?;
        closed?;
        io.rename(&self.part_path, &self.checkpoint_path)?;
        io.sync_dir(parent_dir(&self.checkpoint_path))?;
        Ok(self.checkpoint_path)
    }

    /// Close and remove the `.part` file (a failed or abandoned snapshot).
    fn abort<I: Io>(self, io: &mut I) -> Result<(), SnapshotError> {
        io.close(self.file)?;
        io.remove_file(&self.part_path)?;
        io.sync_dir(parent_dir(&self.part_path))?;
        Ok(())
    }
}

/// Writes a locally generated snapshot. Bytes come from a [`SnapshotEncoder`] (or
/// [`SnapshotFileSink`], which drives one).
#[derive(Debug)]
pub struct SnapshotWriter {
    part: PartFile,
}

impl SnapshotWriter {
    /// Step 1: create (or truncate a leftover) `.part` for `snapshot_id`.
    pub fn create<I: Io>(
        io: &mut I,
        partition_dir: &Path,
        snapshot_id: SnapshotId,
    ) -> Result<SnapshotWriter, SnapshotError> {
        Ok(SnapshotWriter {
            part: PartFile::open(io, partition_dir, snapshot_id, false)?,
        })
    }

    pub fn snapshot_id(&self) -> SnapshotId {
        self.part.snapshot_id
    }

    pub fn size_bytes(&self) -> u64 {
        self.part.size_bytes
    }

    pub fn part_path(&self) -> &Path {
        &self.part.part_path
    }

    /// Step 2: append encoded batches.
    pub fn append<I: Io>(&mut self, io: &mut I, data: &[u8]) -> Result<(), SnapshotError> {
        self.part.append(io, data)
    }

    /// Steps 3-5. Returns the frozen path.
    pub fn freeze<I: Io>(self, io: &mut I) -> Result<PathBuf, SnapshotError> {
        self.part.freeze(io)
    }

    pub fn abort<I: Io>(self, io: &mut I) -> Result<(), SnapshotError> {
        self.part.abort(io)
    }
}

/// A [`SnapshotRecordSink`] that encodes records and writes them to a [`SnapshotWriter`] as
/// batches complete, so a state machine's snapshot never sits whole in memory twice. The sink
/// interface cannot fail; the first I/O error is kept and returned by [`SnapshotFileSink::finish`],
/// and every record after it is dropped.
pub struct SnapshotFileSink<'a, I: Io> {
    io: &'a mut I,
    /// `None` only once `finish` took it.
    encoder: Option<SnapshotEncoder>,
    writer: Option<SnapshotWriter>,
    error: Option<SnapshotError>,
    flush_threshold_bytes: usize,
}

impl<'a, I: Io> SnapshotFileSink<'a, I> {
    pub fn create(
        io: &'a mut I,
        partition_dir: &Path,
        snapshot_id: SnapshotId,
        format: &SnapshotFormat,
        last_contained_log_timestamp_ms: i64,
    ) -> Result<SnapshotFileSink<'a, I>, SnapshotError> {
        SnapshotFileSink::create_with_header_records(
            io,
            partition_dir,
            snapshot_id,
            format,
            last_contained_log_timestamp_ms,
            &[],
        )
    }

    /// [`SnapshotFileSink::create`] with control records after the header
    /// ([`SnapshotEncoder::with_header_records`]).
    pub fn create_with_header_records(
        io: &'a mut I,
        partition_dir: &Path,
        snapshot_id: SnapshotId,
        format: &SnapshotFormat,
        last_contained_log_timestamp_ms: i64,
        header_records: &[(ControlRecordType, Bytes)],
    ) -> Result<SnapshotFileSink<'a, I>, SnapshotError> {
        let writer = SnapshotWriter::create(io, partition_dir, snapshot_id)?;
        Ok(SnapshotFileSink {
            io,
            encoder: Some(SnapshotEncoder::with_header_records(
                snapshot_id,
                format,
                last_contained_log_timestamp_ms,
                super::encoder::SNAPSHOT_BATCH_SIZE_BYTES_MAX,
                header_records,
            )),
            writer: Some(writer),
            error: None,
            flush_threshold_bytes: files::IO_CHUNK_BYTES,
        })
    }

    fn flush(&mut self, data: Bytes) {
        if data.is_empty() || self.error.is_some() {
            return;
        }
        let writer = self.writer.as_mut().expect("writer present until finish");
        if let Err(error) = writer.append(self.io, &data) {
            self.error = Some(error);
        }
    }

    /// Footer, fdatasync, rename, folder fsync. On any error the `.part` file is removed.
    pub fn finish(mut self) -> Result<PathBuf, SnapshotError> {
        let rest = self
            .encoder
            .take()
            .expect("encoder present until finish")
            .finish();
        self.flush(rest);
        let writer = self.writer.take().expect("writer present until finish");
        if let Some(error) = self.error.take() {
            let _ = writer.abort(self.io);
            return Err(error);
        }
        writer.freeze(self.io)
    }
}

impl<I: Io> SnapshotRecordSink for SnapshotFileSink<'_, I> {
    fn append_record(&mut self, key: Option<&[u8]>, value: Option<&[u8]>) {
        if self.error.is_some() {
            return;
        }
        let encoder = self.encoder.as_mut().expect("encoder present until finish");
        encoder.append_record(key, value);
        if encoder.encoded_len_bytes() >= self.flush_threshold_bytes {
            let data = encoder.take_encoded();
            self.flush(data);
        }
    }
}

/// Writes a whole snapshot: `produce` appends the state machine's records to the sink; the
/// snapshot is then frozen. Returns the frozen path.
pub fn write_snapshot<I: Io>(
    io: &mut I,
    partition_dir: &Path,
    snapshot_id: SnapshotId,
    format: &SnapshotFormat,
    last_contained_log_timestamp_ms: i64,
    produce: impl FnOnce(&mut dyn SnapshotRecordSink),
) -> Result<PathBuf, SnapshotError> {
    write_snapshot_with_header_records(
        io,
        partition_dir,
        snapshot_id,
        format,
        last_contained_log_timestamp_ms,
        &[],
        produce,
    )
}

/// [`write_snapshot`] with control records after the header (KIP-853: the voter set in force
/// at the snapshot's end offset, see [`SnapshotEncoder::with_header_records`]).
pub fn write_snapshot_with_header_records<I: Io>(
    io: &mut I,
    partition_dir: &Path,
    snapshot_id: SnapshotId,
    format: &SnapshotFormat,
    last_contained_log_timestamp_ms: i64,
    header_records: &[(ControlRecordType, Bytes)],
    produce: impl FnOnce(&mut dyn SnapshotRecordSink),
) -> Result<PathBuf, SnapshotError> {
    let mut sink = SnapshotFileSink::create_with_header_records(
        io,
        partition_dir,
        snapshot_id,
        format,
        last_contained_log_timestamp_ms,
        header_records,
    )?;
    produce(&mut sink);
    sink.finish()
}

/// Writes a snapshot fetched from the leader with FetchSnapshot (KIP-630): each response's bytes
/// go at their Position; once Size bytes arrived, [`RawSnapshotWriter::freeze`] validates every
/// batch and freezes the file the same way as a local snapshot.
#[derive(Debug)]
pub struct RawSnapshotWriter {
    part: PartFile,
    expected_size_bytes: u64,
}

impl RawSnapshotWriter {
    /// Opens `.part` for a snapshot of `size_bytes` (the response's Size). With `resume`, the
    /// bytes of a `.part` left by an earlier attempt are kept and [`RawSnapshotWriter::position`]
    /// says where to fetch from; without, the file starts empty. A resumed file longer than
    /// `size_bytes` cannot be this snapshot and is emptied.
    pub fn create<I: Io>(
        io: &mut I,
        partition_dir: &Path,
        snapshot_id: SnapshotId,
        size_bytes: u64,
        resume: bool,
    ) -> Result<RawSnapshotWriter, SnapshotError> {
        let mut part = PartFile::open(io, partition_dir, snapshot_id, resume)?;
        if part.size_bytes > size_bytes {
            io.set_len(part.file, 0)?;
            part.size_bytes = 0;
        }
        // Make the `.part` entry durable at once, so that after a restart the bytes that reached
        // the disk can be resumed rather than fetched again (a fetch of a large snapshot over a
        // slow link is the expensive part; one folder fsync is not).
        if let Err(error) = io.sync_dir(parent_dir(&part.part_path)) {
            let _ = io.close(part.file);
            return Err(error.into());
        }
        Ok(RawSnapshotWriter {
            part,
            expected_size_bytes: size_bytes,
        })
    }

    pub fn snapshot_id(&self) -> SnapshotId {
        self.part.snapshot_id
    }

    /// The Position the next FetchSnapshot request must ask for: the bytes held so far.
    pub fn position(&self) -> u64 {
        self.part.size_bytes
    }

    pub fn expected_size_bytes(&self) -> u64 {
        self.expected_size_bytes
    }

    /// Every byte of the snapshot has arrived.
    pub fn is_complete(&self) -> bool {
        self.part.size_bytes == self.expected_size_bytes
    }

    /// Places `data` at `position`. The bytes must continue the file exactly (a gap or an overlap
    /// is a typed error: the fetcher lost track, it should re-fetch from [`Self::position`]) and
    /// must not pass the snapshot's Size.
    pub fn write_at<I: Io>(
        &mut self,
        io: &mut I,
        position: u64,
        data: &[u8],
    ) -> Result<(), SnapshotError> {
        if position != self.part.size_bytes {
            return Err(SnapshotError::NotContiguous {
                path: self.part.part_path.clone(),
                position,
                size_bytes: self.part.size_bytes,
            });
        }
        let end = position.saturating_add(data.len() as u64);
        if end > self.expected_size_bytes {
            return Err(SnapshotError::SizeMismatch {
                path: self.part.part_path.clone(),
                size_bytes: end,
                expected_size_bytes: self.expected_size_bytes,
            });
        }
        self.part.append(io, data)
    }

    /// Once Size bytes arrived: fdatasync, read the whole file back and validate every batch
    /// (CRC, offsets, epoch, header first, footer last), then rename and fsync the folder.
    /// On a validation error the `.part` is closed and removed (its bytes cannot become this
    /// snapshot; the fetcher starts again from Position 0) and the error is returned.
    pub fn freeze<I: Io>(self, io: &mut I) -> Result<SnapshotContents, SnapshotError> {
        if !self.is_complete() {
            return Err(SnapshotError::SizeMismatch {
                path: self.part.part_path.clone(),
                size_bytes: self.part.size_bytes,
                expected_size_bytes: self.expected_size_bytes,
            });
        }
        let validated = files::fdatasync(io, self.part.file)
            .map_err(SnapshotError::from)
            .and_then(|()| {
                let bytes = files::read_range(io, self.part.file, 0, self.part.size_bytes)?;
                validate_snapshot_bytes(&self.part.part_path, self.part.snapshot_id, bytes)
            });
        let mut contents = match validated {
            Ok(contents) => contents,
            Err(error) => {
                // The error being returned matters more than a failure to clean up, which
                // recovery at the next start redoes anyway.
                let _ = self.part.abort(io);
                return Err(error);
            }
        };
        contents.path = self.part.freeze(io)?;
        Ok(contents)
    }

    /// Close and remove the `.part` (the fetch is abandoned, e.g. SNAPSHOT_NOT_FOUND).
    pub fn abort<I: Io>(self, io: &mut I) -> Result<(), SnapshotError> {
        self.part.abort(io)
    }
}
