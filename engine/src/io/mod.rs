//! The engine's one door to the disk.
//!
//! Everything the engine reads or writes goes through [`Io`]. Three backends implement it:
//!
//! | backend | module | used for |
//! | --- | --- | --- |
//! | io_uring | `uring` | the real one: O_DIRECT data files, linked write + fdatasync, completions from the CQ |
//! | plain syscalls | `syscall` | hosts where io_uring setup fails (a container's default seccomp profile) |
//! | deterministic memory | `memory` | tests and simulation: page cache vs. durable medium, crashes, torn writes, bit flips, EIO |
//!
//! The shape is completion-based, like io_uring itself: data operations (write, read, fdatasync) are
//! *submitted* and their results arrive later as [`Completion`]s, which the caller drains into its
//! own queue and handles afterwards (no callbacks, so no re-entrancy). That is what lets the
//! partition log run group commit: appends that arrive while a write + fdatasync is in flight
//! accumulate in memory and share the next one. Metadata operations (open, rename, remove,
//! directory fsync, truncate) are rare and off the hot path, so they are synchronous.
//!
//! Offsets, lengths and buffer addresses of writes and reads on a file opened with
//! [`OpenOptions::direct`] must be multiples of [`Io::block_size_bytes`]; [`AlignedBuf`] gives
//! such buffers. Files opened without `direct` (the small metadata files) take any offset.
//!
//! Every error carries the operation, the path and the offset ([`IoError`]).
//!
//! [`open_default_io`] / [`AnyIo`] pick the backend at start-up: io_uring if a ring can be set up
//! and a NOP completes, else the syscall backend with one warning; `RINGLOG_IO=syscall|uring|auto`
//! overrides. `docs/io.md` states the whole contract and the memory backend's crash model.

use std::path::{Path, PathBuf};
use std::sync::Arc;

mod any;
mod buffer;
mod common;
mod group_sync;
pub mod memory;
mod posix;
mod release;
pub mod syscall;
pub mod uring;

pub use any::{AnyIo, BackendChoice, BackendChoiceError, IO_BACKEND_ENV, open_default_io};

pub use buffer::AlignedBuf;
pub use common::TRANSFER_BYTES_MAX;
pub use group_sync::sync_together;
pub use memory::{MemoryConfig, MemoryIo};
pub use posix::{BLOCK_SIZE_BYTES_MIN, discover_block_size_bytes};
pub use syscall::SyscallIo;
pub use uring::UringIo;

/// Blocks until at least one of the operations `ids` has completed and returns the completions
/// of `ids` that are ready (in completion order). Completions of other operations stay in the
/// backend for their owners: an owner waits on the shared ring without taking or stashing
/// anyone else's (completion routing by owner).
///
/// # Panics
/// When none of `ids` can complete any more (nothing of them ready and nothing in flight): the
/// caller waits for an operation it never submitted or already took.
pub fn wait_for_any<I: Io + ?Sized>(io: &mut I, ids: &[OpId]) -> Result<Vec<Completion>, IoError> {
    let mut ours = Vec::new();
    loop {
        io.take_completions(ids, &mut ours);
        if !ours.is_empty() || ids.is_empty() {
            return Ok(ours);
        }
        // Counting what is ready reaps what the kernel posted since the take above, ours
        // included: a ring posts completions at any moment.
        let ready = io.ready_count();
        if io.in_flight() <= ready {
            // Nothing is left in the kernel: ours are ready now, or gone for good.
            io.take_completions(ids, &mut ours);
            assert!(
                !ours.is_empty(),
                "waiting for operations {ids:?} that are not in flight"
            );
            return Ok(ours);
        }
        // One completion more than is ready now: ours, or another owner's, left for it.
        io.submit_and_wait(ready + 1)?;
    }
}

/// Blocks until every operation of `ids` has completed; returns their completions in the order
/// of `ids`, leaving every other completion to its owner (see [`wait_for_any`]).
pub fn wait_for_all<I: Io + ?Sized>(io: &mut I, ids: &[OpId]) -> Result<Vec<Completion>, IoError> {
    let mut slots: Vec<Option<Completion>> = ids.iter().map(|_| None).collect();
    let mut missing: Vec<OpId> = ids.to_vec();
    while !missing.is_empty() {
        for completion in wait_for_any(io, &missing)? {
            let slot = ids
                .iter()
                .position(|id| *id == completion.op_id)
                .expect("only completions of ids are taken");
            missing.retain(|id| *id != completion.op_id);
            slots[slot] = Some(completion);
        }
    }
    Ok(slots
        .into_iter()
        .map(|c| c.expect("every awaited completion arrived"))
        .collect())
}

/// Moves the completions of `ids` out of `ready`, keeping the others in order (the backends'
/// `take_completions`).
pub(crate) fn take_from_ready(
    ready: &mut std::collections::VecDeque<Completion>,
    ids: &[OpId],
    out: &mut Vec<Completion>,
) {
    if ready.iter().all(|c| !ids.contains(&c.op_id)) {
        return;
    }
    let mut kept = std::collections::VecDeque::with_capacity(ready.len());
    for completion in ready.drain(..) {
        if ids.contains(&completion.op_id) {
            out.push(completion);
        } else {
            kept.push_back(completion);
        }
    }
    *ready = kept;
}

/// A file opened through an [`Io`] backend. Ids are never reused within one backend instance,
/// so a completion can never be mistaken for one of a later file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FileId(pub u64);

/// Identity of one submitted data operation, unique within one backend instance and increasing
/// in submission order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OpId(pub u64);

#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct OpenOptions {
    /// Create the file if it does not exist.
    pub create: bool,
    /// Fail if the file exists (with `create`).
    pub create_new: bool,
    /// Open for reading only.
    pub read_only: bool,
    /// Bypass the page cache (O_DIRECT): offsets, lengths and buffers must be block aligned.
    pub direct: bool,
}

impl OpenOptions {
    /// An existing file, read and written with O_DIRECT (a segment's `.log`).
    pub const DIRECT: OpenOptions = OpenOptions {
        create: false,
        create_new: false,
        read_only: false,
        direct: true,
    };
    /// An existing file, read only, with O_DIRECT (a segment's `.log` checked behind the log
    /// that writes it: `PartitionLog::verify_listed`).
    pub const DIRECT_READ_ONLY: OpenOptions = OpenOptions {
        create: false,
        create_new: false,
        read_only: true,
        direct: true,
    };
}

/// A data operation to submit.
#[derive(Debug)]
pub enum Op {
    /// Write `buf.as_slice()` (its whole length) at `offset`.
    Write {
        file: FileId,
        offset: u64,
        buf: AlignedBuf,
    },
    /// Write `buf.as_slice()` at `offset`, durable when it completes: `pwritev2(RWF_DSYNC)`,
    /// as if the file were opened O_DSYNC for this one write (its bytes and the metadata needed
    /// to read them reach the medium before the completion; on O_DIRECT files a FUA write where
    /// the device has one). One operation where `Write` + `Fdatasync` takes two round trips, and
    /// no fdatasync worker thread in between; it says nothing of any *other* write.
    WriteDsync {
        file: FileId,
        offset: u64,
        buf: AlignedBuf,
    },
    /// Read up to `len` bytes at `offset` into a fresh buffer, returned in the completion.
    Read {
        file: FileId,
        offset: u64,
        len: usize,
    },
    /// Make every completed write to `file` durable (data and the size needed to read it). On a
    /// directory handle ([`Io::open_dir`]): make its entries (creations, renames, removals)
    /// durable, a full fsync, since a directory's fdatasync need not cover them.
    Fdatasync { file: FileId },
    /// Reserve the file's blocks in `[offset, offset + len_bytes)` without changing its size
    /// (`fallocate(FALLOC_FL_KEEP_SIZE)`), so a later write there cannot fail for space; the
    /// same as [`Io::preallocate`], but off the caller's thread (on io_uring a worker runs it).
    /// Completes with 0. A filesystem without fallocate answers EOPNOTSUPP.
    Fallocate {
        file: FileId,
        offset: u64,
        len_bytes: u64,
    },
}

/// The result of one data operation.
#[derive(Debug)]
pub struct Completion {
    pub op_id: OpId,
    /// Bytes written or read (0 for fdatasync), or the error with its context.
    pub result: Result<usize, IoError>,
    /// The buffer of a write (given back for reuse, also when it failed) or of a successful read
    /// (holding `result` bytes); `None` for fdatasync and for a failed read.
    pub buf: Option<AlignedBuf>,
}

/// Which operation failed, on which path, at which offset.
#[derive(Debug, thiserror::Error)]
#[error("{operation} {path} at offset {offset}: {source}")]
pub struct IoError {
    pub operation: &'static str,
    pub path: PathBuf,
    pub offset: u64,
    #[source]
    pub source: std::io::Error,
}

/// A buffered read-only descriptor of a file, opened once by its owner ([`Io::open_reader`])
/// and shared by every read of it: a clone outlives its owner (a segment deleted or truncated
/// away while a reply holding a clone is queued), and the bytes stay readable until the last
/// clone is dropped. Two readers are equal when they are the same descriptor.
#[derive(Clone, Debug)]
pub struct FileReader(Arc<std::fs::File>);

impl FileReader {
    pub fn new(file: std::fs::File) -> Self {
        FileReader(Arc::new(file))
    }

    /// Opens `path` read-only and buffered.
    pub fn open(path: &Path) -> Result<Self, IoError> {
        std::fs::File::open(path)
            .map(FileReader::new)
            .map_err(|e| IoError::new("open_reader", path, 0, e))
    }

    /// The shared descriptor.
    pub fn file(&self) -> &Arc<std::fs::File> {
        &self.0
    }

    /// Asks the kernel to start reading `[position, position + len_bytes)` into the page cache
    /// now, without waiting for it (`posix_fadvise(POSIX_FADV_WILLNEED)`), so a later `sendfile`
    /// or `pread` of it finds the pages there. Best effort: a refusal changes nothing but speed.
    pub fn will_need(&self, position: u64, len_bytes: u64) {
        use std::os::fd::AsRawFd;
        // SAFETY: a plain advisory call on a descriptor this reader keeps open.
        unsafe {
            libc::posix_fadvise(
                self.0.as_raw_fd(),
                position as libc::off_t,
                len_bytes as libc::off_t,
                libc::POSIX_FADV_WILLNEED,
            );
        }
    }

    /// Reads up to `len_bytes` at `position` with `pread` (the page cache); fewer at the end of
    /// the file. `path` only names the file in an error.
    pub fn read_at(
        &self,
        path: &Path,
        position: u64,
        len_bytes: usize,
    ) -> Result<Vec<u8>, IoError> {
        posix::read_at(&self.0, path, position, len_bytes)
    }
}

impl PartialEq for FileReader {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for FileReader {}

impl std::os::fd::AsFd for FileReader {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.0.as_fd()
    }
}

impl IoError {
    pub fn new(operation: &'static str, path: &Path, offset: u64, source: std::io::Error) -> Self {
        IoError {
            operation,
            path: path.to_path_buf(),
            offset,
            source,
        }
    }

    /// The raw OS error number, if any (EIO, ENOSPC, ...).
    pub fn raw_os_error(&self) -> Option<i32> {
        self.source.raw_os_error()
    }

    /// Whether the device or the user's quota is out of space (ENOSPC, EDQUOT): a condition
    /// that ends when space returns, unlike EIO.
    pub fn is_no_space(&self) -> bool {
        matches!(self.raw_os_error(), Some(libc::ENOSPC | libc::EDQUOT))
    }
}

/// The engine's I/O: synchronous metadata calls, asynchronous data operations.
pub trait Io {
    /// Alignment (bytes) for O_DIRECT offsets, lengths and buffers on this backend's device.
    fn block_size_bytes(&self) -> usize;

    // --- metadata, synchronous -------------------------------------------------------------
    fn open(&mut self, path: &Path, options: OpenOptions) -> Result<FileId, IoError>;
    /// Close a file. Every operation submitted on it must have completed first.
    fn close(&mut self, file: FileId) -> Result<(), IoError>;
    /// Current size of the file in bytes (what a reader would see now, not what is durable).
    fn file_size_bytes(&mut self, file: FileId) -> Result<u64, IoError>;
    /// Truncate or extend (with zeros). Durable only after the next fdatasync of the file.
    fn set_len(&mut self, file: FileId, len_bytes: u64) -> Result<(), IoError>;
    /// Reserve space (fallocate, keeping the size) so appends do not fail with ENOSPC later.
    fn preallocate(&mut self, file: FileId, len_bytes: u64) -> Result<(), IoError>;
    fn create_dir_all(&mut self, path: &Path) -> Result<(), IoError>;
    /// Names (not paths) of the entries of a directory, sorted.
    fn list_dir(&mut self, path: &Path) -> Result<Vec<String>, IoError>;
    fn exists(&mut self, path: &Path) -> bool;
    /// Atomic rename. Durable only after `sync_dir` of the parent(s). The real backends
    /// release a file `to` replaced on a background thread (`release.rs`), as
    /// [`Io::remove_file_release_later`] does.
    fn rename(&mut self, from: &Path, to: &Path) -> Result<(), IoError>;
    /// Remove a file. Durable only after `sync_dir` of the parent.
    fn remove_file(&mut self, path: &Path) -> Result<(), IoError>;
    /// Remove a file as [`Io::remove_file`] does (its name is gone when this returns; durable
    /// after `sync_dir`), leaving the release of its blocks to a background thread a moment
    /// later (`release.rs`): on a filesystem that discards freed blocks as it frees them, a
    /// written 1 GiB segment held its remover ~200 ms. For large files removed on the event
    /// loop. The memory backend removes at once.
    fn remove_file_release_later(&mut self, path: &Path) -> Result<(), IoError> {
        self.remove_file(path)
    }
    /// fsync a directory: makes creations, renames and removals in it durable.
    fn sync_dir(&mut self, path: &Path) -> Result<(), IoError>;
    /// Open a directory so that an [`Op::Fdatasync`] on it, submitted like any data operation,
    /// makes its entries durable (what [`Io::sync_dir`] does, without blocking the caller).
    /// Only `Fdatasync` and `close` apply to the handle.
    fn open_dir(&mut self, path: &Path) -> Result<FileId, IoError>;
    /// The OS file descriptor, for zero-copy sends (sendfile/splice); `None` on the memory backend.
    fn raw_fd(&self, file: FileId) -> Option<std::os::fd::RawFd>;

    // --- data, asynchronous ----------------------------------------------------------------
    /// Queue a data operation. It may start at once or at the next [`Io::submit_and_wait`].
    /// Operations on one file complete in any order unless the caller waits in between;
    /// an `Fdatasync` covers the writes that *completed* before it started, so the caller
    /// submits it after the writes it must cover have completed, or relies on a backend's
    /// ordering guarantee (io_uring's IOSQE_IO_LINK, which `submit_linked` offers).
    fn submit(&mut self, op: Op) -> OpId;
    /// Queue a chain: each operation starts only after the previous one completed successfully;
    /// if one fails, the rest complete with an error (ECANCELED). One write + fdatasync is the
    /// group commit's chain.
    fn submit_linked(&mut self, ops: Vec<Op>) -> Vec<OpId>;
    /// Push queued operations to the kernel and block until at least `min_completions`
    /// completions are ready to drain (0: do not block). The minimum is capped at
    /// [`Io::in_flight`], so asking for more than was submitted never hangs.
    fn submit_and_wait(&mut self, min_completions: usize) -> Result<(), IoError>;
    /// Move every ready completion to `out`, in completion order.
    fn drain_completions(&mut self, out: &mut Vec<Completion>);
    /// Number of submitted operations whose completion has not been drained yet.
    fn in_flight(&self) -> usize;
    /// Move the ready completions of the operations `ids` to `out`, in completion order. Every
    /// other ready completion stays where it is, for its owner's `drain_completions` or its own
    /// `take_completions`: several owners share one ring, and none takes another's completions.
    fn take_completions(&mut self, ids: &[OpId], out: &mut Vec<Completion>);
    /// Completions ready to drain or take (including what the kernel has posted meanwhile).
    fn ready_count(&mut self) -> usize;

    /// Reads up to `len_bytes` at `position` of the file at `path` through a buffered descriptor
    /// of its own, opened and closed here: for ranges the caller knows are written (below a
    /// segment's written end), read while that file's writes and fdatasyncs are still in
    /// flight, without waiting for them. Returns fewer bytes at the end of the file. The real
    /// backends use a plain `pread` (the page cache), the memory backend its own operations.
    fn read_buffered_at(
        &mut self,
        path: &Path,
        position: u64,
        len_bytes: usize,
    ) -> Result<Vec<u8>, IoError> {
        let file = self.open(
            path,
            OpenOptions {
                read_only: true,
                ..OpenOptions::default()
            },
        )?;
        let id = self.submit(Op::Read {
            file,
            offset: position,
            len: len_bytes,
        });
        let waited = wait_for_all(self, &[id]);
        let closed = self.close(file);
        let mut completion = waited?.pop().expect("one completion per operation");
        closed?;
        let read = completion.result?;
        let mut bytes = completion
            .buf
            .take()
            .map(|b| b.as_slice().to_vec())
            .unwrap_or_default();
        bytes.truncate(read.min(len_bytes));
        Ok(bytes)
    }

    /// Writes `data` at `position` of the file at `path` (created if missing) through a
    /// buffered descriptor of its own, opened and closed here; returns once the kernel holds the
    /// bytes. Not durable (no fsync) and no completion to route: for advisory files written on
    /// the side of the ring's work (a segment's batch list, docs/log.md "Recovery"). The real
    /// backends use a plain `pwrite` (the page cache), the memory backend its own operations
    /// (unsynced: a crash may lose or tear them).
    fn write_buffered_at(
        &mut self,
        path: &Path,
        position: u64,
        data: &[u8],
    ) -> Result<(), IoError> {
        let file = self.open(
            path,
            OpenOptions {
                create: true,
                ..OpenOptions::default()
            },
        )?;
        let id = self.submit(Op::Write {
            file,
            offset: position,
            buf: AlignedBuf::from_slice(data, self.block_size_bytes()),
        });
        let waited = wait_for_all(self, &[id]);
        let closed = self.close(file);
        let completion = waited?.pop().expect("one completion per operation");
        closed?;
        completion.result.map(|_| ())
    }

    /// Opens a buffered (never O_DIRECT), read-only descriptor of the file at `path` for its
    /// owner to keep open and share: a segment's reader, from which the runtime sends regions
    /// with sendfile/splice (which cannot read an O_DIRECT descriptor at unaligned positions)
    /// and reads written ranges with `pread`, without opening the path again per read. A clone
    /// held by a reply still queued keeps a deleted or truncated-away file's bytes readable.
    /// `None` where the file is no OS file (the memory backend); the reader then reads through
    /// [`Io::read_buffered_at`]. Only the real backends open one.
    fn open_reader(&mut self, path: &Path) -> Result<Option<FileReader>, IoError> {
        let _ = path;
        Ok(None)
    }

    // --- readiness, for an event loop ------------------------------------------------------
    /// A file descriptor that becomes readable when a completion may be ready to drain, so an
    /// event loop waits on it (with its sockets and timers) instead of polling the ring on a
    /// timer. io_uring: an eventfd registered with the ring, which the kernel signals for every
    /// completion it posts. `None`: this backend runs its operations inside `submit_and_wait`,
    /// so every completion is ready when that call returns and there is nothing to wait for.
    fn readiness_fd(&self) -> Option<std::os::fd::RawFd> {
        None
    }
    /// Gives back the buffer of a completed read for the backend's next read to fill: a
    /// sequential reader (recovery's scan of a segment) then touches the same memory chunk after
    /// chunk, where a fresh zeroed buffer per read cost a page fault per 4 KiB and a memset.
    /// Backends may ignore it.
    fn recycle_read_buf(&mut self, _buf: AlignedBuf) {}
    /// Consumes the readiness fd's pending signal. Call it before draining: a completion posted
    /// after this call signals the fd again, so none is missed.
    fn clear_readiness(&mut self) {}
}
