//! What a read of a partition hands the runtime: bytes in memory, or a range of a file to
//! send without a userspace copy.

use super::*;

/// Bytes of a log or a snapshot for a response: in memory (the log's unflushed tail, or bytes
/// read), or a range of a file for the runtime to send without a userspace copy (from the
/// range's kept-open reader, whose clone keeps the bytes readable after a truncation or a
/// deletion until they are sent).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Records {
    Memory(Bytes),
    /// Slices of the log's in-memory tail, in order, by reference: their concatenation is
    /// the read (`ReadView::Chunks`), sent with one `writev` rather than copied into one
    /// buffer.
    Chunks(Vec<Bytes>),
    File(FileRange),
}

/// A range of a file on disk.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileRange {
    /// The file's path, for logs and errors (the bytes come from `reader`).
    pub path: PathBuf,
    /// The buffered read-only descriptor its owner keeps open (a segment's, or the snapshot
    /// the host serves), for sendfile; `None` on the memory backend, whose bytes the runtime
    /// reads through [`super::Host::read_file_range`].
    pub reader: Option<FileReader>,
    pub position: u64,
    pub length: u32,
}

impl FileRange {
    /// The range's bytes: from the reader with `pread` when there is one, else through the
    /// backend (the memory backend has no OS file).
    pub(crate) fn read<I: Io>(&self, io: &mut I) -> Result<Vec<u8>, ringlog_engine::io::IoError> {
        match &self.reader {
            Some(reader) => reader.read_at(&self.path, self.position, self.length as usize),
            None => io.read_buffered_at(&self.path, self.position, self.length as usize),
        }
    }
}

impl PartitionStore {
    /// Whole batches from `offset`, at most `max_bytes` (at least one batch), materialised.
    pub fn read<I: Io>(
        &mut self,
        io: &mut I,
        offset: u64,
        max_bytes: u32,
    ) -> Result<Bytes, StorageError> {
        if offset >= self.log.log_end_offset() as u64 || max_bytes == 0 {
            return Ok(Bytes::new());
        }
        let view = self.log.read(io, offset as i64, max_bytes as usize)?;
        if let ReadView::File {
            path,
            reader,
            position,
            length_bytes,
            ..
        } = &view
        {
            // A region below the segment's written end is complete on disk: read it with
            // `pread` on the segment's kept-open reader (through the backend on the memory
            // one, which has none). The engine's `read_view_bytes` first waits for the flush
            // in flight, which stalled the event loop on an fdatasync for every metadata scan
            // of the produce path (docs/benchmarks.md).
            let read = match reader {
                Some(reader) => reader.read_at(path, *position, *length_bytes as usize),
                None => io.read_buffered_at(path, *position, *length_bytes as usize),
            };
            if let Ok(bytes) = read
                && bytes.len() as u64 == *length_bytes
            {
                return Ok(Bytes::from(bytes));
            }
        }
        Ok(self.log.read_view_bytes(io, &view)?)
    }

    /// Whole batches from `offset` whose last offset is below `end_offset`, at most `max_bytes`
    /// (at least one batch), for a send without a userspace copy: the in-memory tail as a
    /// `Bytes` slice, a written segment range as a [`FileRange`] carrying the segment's
    /// kept-open buffered reader, which the runtime sends from with `sendfile(2)` from the page
    /// cache (the engine's own descriptor may be O_DIRECT, which sendfile cannot read at
    /// unaligned positions). The range's clone of the reader keeps a deleted or truncated-away
    /// segment's bytes readable while the reply is queued.
    pub fn read_region<I: Io>(
        &mut self,
        io: &mut I,
        offset: u64,
        max_bytes: u32,
        end_offset: u64,
    ) -> Result<Records, StorageError> {
        if offset >= self.log.log_end_offset() as u64 || offset >= end_offset || max_bytes == 0 {
            return Ok(Records::Memory(Bytes::new()));
        }
        let end_offset = i64::try_from(end_offset).unwrap_or(i64::MAX);
        let view = self
            .log
            .read_below(io, offset as i64, max_bytes as usize, end_offset)?;
        match view {
            ReadView::Memory(bytes) => Ok(Records::Memory(bytes)),
            ReadView::Chunks(chunks) => Ok(Records::Chunks(chunks)),
            ReadView::File {
                path,
                reader,
                position,
                length_bytes,
                ..
            } => {
                let length =
                    u32::try_from(length_bytes).map_err(|_| StorageError::Inconsistent {
                        path: path.display().to_string(),
                        reason: format!("a read of {length_bytes} bytes does not fit one response"),
                    })?;
                Ok(Records::File(FileRange {
                    path,
                    reader,
                    position,
                    length,
                }))
            }
        }
    }
}
