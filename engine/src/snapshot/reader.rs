//! Reading snapshots: validated loading for state machines, raw regions for FetchSnapshot.

use std::os::fd::RawFd;
use std::path::{Path, PathBuf};

use bytes::Bytes;

use crate::batch::control::{
    ControlRecord, ControlRecordType, SNAPSHOT_FOOTER_VERSION, SNAPSHOT_HEADER_VERSION,
    SnapshotHeaderRecord,
};
use crate::batch::{BatchChainValidator, BatchError, BatchIter, Record, RecordBatch};
use crate::io::{FileId, Io, OpenOptions};

use super::encoder::{FORMAT_HEADER_KEY, FORMAT_VERSION_HEADER_KEY, SnapshotFormat};
use super::files;
use super::naming::{self, SnapshotFileName, SnapshotFileState, SnapshotNaming};
use super::{SnapshotError, SnapshotId, StructureError};

/// A snapshot read and validated end to end: every batch's CRC, offsets continuous from 0, every
/// batch stamped with the snapshot's epoch, every record decodable, a SnapshotHeader first and a
/// SnapshotFooter last. Holds the file's bytes; the data batches are zero-copy slices of them.
#[derive(Clone, Debug)]
pub struct SnapshotContents {
    pub snapshot_id: SnapshotId,
    pub path: PathBuf,
    pub size_bytes: u64,
    pub header: SnapshotHeaderRecord,
    /// The state machine's format, from the SnapshotHeader record's headers (`None` for a
    /// snapshot written by another implementation, e.g. Kafka).
    pub format: Option<SnapshotFormat>,
    /// Data records (control records excluded).
    pub records_count: u64,
    /// Control records other than the header and the footer, in order, as (type, value): Kafka
    /// (kraft.version 1) and ringlog put the KRaftVersion and Voters records in force at the
    /// snapshot's end offset in the header's batch (KIP-853).
    pub header_control_records: Vec<(ControlRecordType, Option<Bytes>)>,
    data_batches: Vec<RecordBatch>,
}

impl SnapshotContents {
    /// The state machine's batches, in order (header, footer and other control batches excluded).
    pub fn data_batches(&self) -> &[RecordBatch] {
        &self.data_batches
    }

    /// Every data record, in order. Each already decoded once during validation, so an error
    /// here would mean memory changed under us; it is still reported rather than unwrapped.
    pub fn records(&self) -> impl Iterator<Item = Result<Record, BatchError>> + '_ {
        self.data_batches
            .iter()
            .flat_map(|batch| match batch.records() {
                Ok(records) => either_records(Some(records), None),
                Err(error) => either_records(None, Some(error)),
            })
    }
}

fn either_records(
    records: Option<crate::batch::RecordIter>,
    error: Option<BatchError>,
) -> Box<dyn Iterator<Item = Result<Record, BatchError>>> {
    match (records, error) {
        (Some(records), _) => Box::new(records),
        (None, Some(error)) => Box::new(std::iter::once(Err(error))),
        (None, None) => Box::new(std::iter::empty()),
    }
}

/// Open, read and validate the frozen snapshot at `path`, whose name says `snapshot_id`.
pub fn read_snapshot<I: Io>(
    io: &mut I,
    path: &Path,
    snapshot_id: SnapshotId,
) -> Result<SnapshotContents, SnapshotError> {
    let file = io.open(
        path,
        OpenOptions {
            read_only: true,
            ..Default::default()
        },
    )?;
    let read = io
        .file_size_bytes(file)
        .and_then(|size_bytes| files::read_range(io, file, 0, size_bytes));
    let closed = io.close(file);
    let bytes = read?;
    closed?;
    validate_snapshot_bytes(path, snapshot_id, bytes)
}

/// Validate a snapshot file's bytes (pure). `path` is only used in errors.
pub fn validate_snapshot_bytes(
    path: &Path,
    snapshot_id: SnapshotId,
    bytes: Bytes,
) -> Result<SnapshotContents, SnapshotError> {
    let batch_error = |source: BatchError| SnapshotError::Batch {
        path: path.to_path_buf(),
        source,
    };
    let structure = |position: u64, reason: StructureError| SnapshotError::Structure {
        path: path.to_path_buf(),
        position,
        reason,
    };
    if bytes.is_empty() {
        return Err(structure(0, StructureError::Empty));
    }
    let size_bytes = bytes.len() as u64;
    // Every batch carries the snapshot's epoch: a flipped bit in partitionLeaderEpoch (outside
    // the CRC) is caught here, one in baseOffset by the continuity check.
    let mut chain =
        BatchChainValidator::expecting(0, snapshot_id.epoch).with_max_epoch(snapshot_id.epoch);
    let mut header = None;
    let mut format = None;
    let mut footer_position = None;
    let mut data_batches = Vec::new();
    let mut header_control_records = Vec::new();
    let mut records_count = 0u64;
    let mut iter = BatchIter::new(bytes).peekable();
    let mut index = 0usize;
    while let Some(batch) = iter.next() {
        let batch = batch.map_err(batch_error)?;
        let position = batch.position();
        chain.check(&batch).map_err(batch_error)?;
        let is_first = index == 0;
        let is_last = iter.peek().is_none();
        index += 1;
        if !batch.is_control() {
            if is_first {
                return Err(structure(position, StructureError::FirstBatchNotHeader));
            }
            if is_last {
                return Err(structure(position, StructureError::LastBatchNotFooter));
            }
            let mut count = 0u64;
            for record in batch.records().map_err(batch_error)? {
                record.map_err(batch_error)?;
                count += 1;
            }
            records_count += count;
            data_batches.push(batch);
            continue;
        }
        let controls: Vec<ControlRecord> = batch
            .control_records()
            .map_err(batch_error)?
            .map(|r| r.map(|(_, record)| record))
            .collect::<Result<_, _>>()
            .map_err(batch_error)?;
        // Kafka (kraft.version 1) puts KRaftVersion and Voters records in the header's batch,
        // after the SnapshotHeader; the footer gets a batch of its own. So: the header must be the
        // first record of the first batch, the footer the last record of the last batch, and
        // neither may appear anywhere else.
        if is_first {
            let Some(ControlRecord::SnapshotHeader(h)) = controls.first() else {
                return Err(structure(position, StructureError::FirstBatchNotHeader));
            };
            if h.version > SNAPSHOT_HEADER_VERSION || h.version < 0 {
                return Err(structure(
                    position,
                    StructureError::UnsupportedHeaderVersion(h.version),
                ));
            }
            header = Some(*h);
            format = format_of_header_batch(&batch);
            if is_last {
                return Err(structure(position, StructureError::LastBatchNotFooter));
            }
        }
        if is_last {
            let Some(ControlRecord::SnapshotFooter(f)) = controls.last() else {
                return Err(structure(position, StructureError::LastBatchNotFooter));
            };
            if f.version > SNAPSHOT_FOOTER_VERSION || f.version < 0 {
                return Err(structure(
                    position,
                    StructureError::UnsupportedFooterVersion(f.version),
                ));
            }
            footer_position = Some(position);
        }
        let first_allowed = usize::from(is_first);
        let last_allowed = controls.len() - usize::from(is_last);
        let misplaced = controls.iter().enumerate().any(|(index, c)| {
            let header_or_footer = matches!(
                c,
                ControlRecord::SnapshotHeader(_) | ControlRecord::SnapshotFooter(_)
            );
            header_or_footer && (index >= first_allowed && index < last_allowed)
        });
        if misplaced {
            return Err(structure(position, StructureError::MisplacedControlRecord));
        }
        // Other control records (e.g. Kafka's KRaftVersion and Voters records after the header)
        // are valid in a snapshot but are not the state machine's records: kept apart for the
        // replication layer (KIP-853: the voter set in force at the end offset).
        for control in controls {
            if let ControlRecord::Other { key, value } = control {
                header_control_records.push((key.record_type, value));
            }
        }
    }
    let header = header.ok_or_else(|| structure(0, StructureError::FirstBatchNotHeader))?;
    assert!(
        footer_position.is_some(),
        "the loop returns unless the last batch is a footer"
    );
    Ok(SnapshotContents {
        snapshot_id,
        path: path.to_path_buf(),
        size_bytes,
        header,
        format,
        records_count,
        header_control_records,
        data_batches,
    })
}

/// The format named by the header record's headers, if both are present and well formed.
fn format_of_header_batch(batch: &RecordBatch) -> Option<SnapshotFormat> {
    let record = batch.records().ok()?.next()?.ok()?;
    let mut name = None;
    let mut version = None;
    for header in record.headers().iter() {
        match header.key_str() {
            Some(FORMAT_HEADER_KEY) => {
                name = header
                    .value
                    .as_ref()
                    .and_then(|v| String::from_utf8(v.to_vec()).ok());
            }
            Some(FORMAT_VERSION_HEADER_KEY) => {
                version = header
                    .value
                    .as_ref()
                    .and_then(|v| <[u8; 2]>::try_from(v.as_ref()).ok())
                    .map(i16::from_be_bytes);
            }
            _ => {}
        }
    }
    Some(SnapshotFormat {
        name: name?,
        version: version?,
    })
}

/// A byte range of an open snapshot file, for a zero-copy send (sendfile/splice, or io_uring's
/// zero-copy send) of a FetchSnapshot response's Bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileRegion {
    pub file: FileId,
    /// The OS descriptor when the backend has one (`None` on the memory backend: use
    /// [`RawSnapshotReader::read_region`]).
    pub raw_fd: Option<RawFd>,
    pub position: u64,
    pub len_bytes: u64,
}

/// A frozen snapshot opened read-only for FetchSnapshot: its Size and regions of it. Not
/// validated here (the leader validated it when it was written or loaded; the follower validates
/// the whole file before freezing its copy).
#[derive(Debug)]
pub struct RawSnapshotReader {
    snapshot_id: SnapshotId,
    path: PathBuf,
    file: FileId,
    size_bytes: u64,
    raw_fd: Option<RawFd>,
}

impl RawSnapshotReader {
    /// Open the frozen snapshot `snapshot_id` of the partition (KIP-630 name in `checkpoints/`,
    /// else Kafka's shipped name in the partition folder). SNAPSHOT_NOT_FOUND is
    /// [`SnapshotError::NotFound`].
    pub fn open<I: Io>(
        io: &mut I,
        partition_dir: &Path,
        snapshot_id: SnapshotId,
    ) -> Result<RawSnapshotReader, SnapshotError> {
        if !snapshot_id.is_valid() {
            return Err(SnapshotError::InvalidId { snapshot_id });
        }
        let path = frozen_path(io, partition_dir, snapshot_id)
            .ok_or(SnapshotError::NotFound { snapshot_id })?;
        let file = io.open(
            &path,
            OpenOptions {
                read_only: true,
                ..Default::default()
            },
        )?;
        let size_bytes = match io.file_size_bytes(file) {
            Ok(size) => size,
            Err(error) => {
                let _ = io.close(file);
                return Err(error.into());
            }
        };
        let raw_fd = io.raw_fd(file);
        Ok(RawSnapshotReader {
            snapshot_id,
            path,
            file,
            size_bytes,
            raw_fd,
        })
    }

    pub fn snapshot_id(&self) -> SnapshotId {
        self.snapshot_id
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The snapshot's Size for FetchSnapshot responses.
    pub fn size_bytes(&self) -> u64 {
        self.size_bytes
    }

    /// At most `max_len_bytes` from `position` (fewer at the end of the file; empty at the end).
    /// A position past the size is POSITION_OUT_OF_RANGE.
    pub fn region(&self, position: u64, max_len_bytes: u64) -> Result<FileRegion, SnapshotError> {
        if position > self.size_bytes {
            return Err(SnapshotError::PositionOutOfRange {
                path: self.path.clone(),
                position,
                size_bytes: self.size_bytes,
            });
        }
        Ok(FileRegion {
            file: self.file,
            raw_fd: self.raw_fd,
            position,
            len_bytes: max_len_bytes.min(self.size_bytes - position),
        })
    }

    /// Copy a region into memory (for backends without a descriptor, and for tests).
    pub fn read_region<I: Io>(
        &self,
        io: &mut I,
        region: &FileRegion,
    ) -> Result<Bytes, SnapshotError> {
        assert_eq!(region.file, self.file, "region of another file");
        Ok(files::read_range(
            io,
            self.file,
            region.position,
            region.len_bytes,
        )?)
    }

    /// Close the file; no region of it may be in use (a send in flight) any more.
    pub fn close<I: Io>(self, io: &mut I) -> Result<(), SnapshotError> {
        Ok(io.close(self.file)?)
    }
}

/// Path of the frozen snapshot `snapshot_id`, KIP-630 name first, Kafka's shipped name second.
pub(crate) fn frozen_path<I: Io>(
    io: &mut I,
    partition_dir: &Path,
    snapshot_id: SnapshotId,
) -> Option<PathBuf> {
    [SnapshotNaming::Kip630, SnapshotNaming::KafkaShipped]
        .into_iter()
        .map(|naming| {
            naming::path_of(
                partition_dir,
                &SnapshotFileName {
                    snapshot_id,
                    state: SnapshotFileState::Frozen,
                    naming,
                },
            )
        })
        .find(|path| io.exists(path))
}
