//! The plain-syscall backend: pread/pwrite/fdatasync, for hosts where io_uring is blocked.
//!
//! Submissions queue up and run, synchronously and in submission order, at the next
//! [`Io::submit_and_wait`]; their completions wait in a queue for [`Io::drain_completions`]. Doing
//! nothing at `submit` keeps this backend's observable behaviour the same as io_uring's: a caller
//! that forgets to call `submit_and_wait` sees nothing complete on either.

use std::collections::VecDeque;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::Path;

use super::common::{
    UNKNOWN_FILE_PATH, check_direct_alignment, check_transfer_len, errno, failed_completion,
    take_read_buf,
};
use super::posix::{self, BLOCK_SIZE_BYTES_MIN, PosixFiles};
use super::{AlignedBuf, Completion, FileId, FileReader, Io, IoError, Op, OpId, OpenOptions};

pub struct SyscallIo {
    files: PosixFiles,
    block_size_bytes: usize,
    next_op_id: u64,
    /// Submitted, not yet run: single operations and linked chains.
    queued: VecDeque<Vec<(OpId, Op)>>,
    ready: VecDeque<Completion>,
    /// A completed read's buffer given back (`Io::recycle_read_buf`) for the next read.
    spare_read_buf: Option<AlignedBuf>,
}

impl SyscallIo {
    /// A backend aligning O_DIRECT I/O to 4096 bytes (safe on common devices).
    pub fn new() -> Self {
        Self::with_block_size(BLOCK_SIZE_BYTES_MIN)
    }

    /// A backend whose alignment is discovered from the device holding `data_dir`.
    pub fn for_dir(data_dir: &Path) -> Self {
        Self::with_block_size(posix::discover_block_size_bytes(data_dir))
    }

    pub fn with_block_size(block_size_bytes: usize) -> Self {
        assert!(
            block_size_bytes.is_power_of_two(),
            "block size must be a power of two"
        );
        SyscallIo {
            files: PosixFiles::new(),
            block_size_bytes,
            next_op_id: 1,
            queued: VecDeque::new(),
            ready: VecDeque::new(),
            spare_read_buf: None,
        }
    }

    fn allocate_op_id(&mut self) -> OpId {
        let id = OpId(self.next_op_id);
        self.next_op_id += 1;
        id
    }

    fn enqueue(&mut self, unit: Vec<(OpId, Op)>) {
        for (_, op) in &unit {
            if let Some(f) = self.files.get_mut(op.file()) {
                f.in_flight += 1;
            }
        }
        self.queued.push_back(unit);
    }

    /// Run one operation with one syscall (retrying EINTR). A short count is returned as is.
    fn execute(&mut self, op_id: OpId, op: Op) -> Completion {
        let Some(entry) = self.files.get_mut(op.file()) else {
            return failed_completion(op_id, op, Path::new(UNKNOWN_FILE_PATH), errno(libc::EBADF));
        };
        entry.in_flight -= 1;
        let entry = self.files.get(op.file(), "").expect("looked up above");
        if entry.direct
            && let Err(e) = check_direct_alignment(&op, self.block_size_bytes)
        {
            return failed_completion(op_id, op, &entry.path, e);
        }
        if let Err(e) = check_transfer_len(&op) {
            return failed_completion(op_id, op, &entry.path, e);
        }
        if entry.read_only && op.is_write() {
            return failed_completion(op_id, op, &entry.path, errno(libc::EBADF));
        }
        let operation = op.operation_name();
        let offset = op.offset();
        let (result, buf) = match op {
            Op::Write { offset, buf, .. } => (
                retry_eintr(|| entry.file.write_at(buf.as_slice(), offset)),
                Some(buf),
            ),
            Op::WriteDsync { offset, buf, .. } => (
                retry_eintr(|| pwrite_dsync(&entry.file, buf.as_slice(), offset)),
                Some(buf),
            ),
            Op::Read { offset, len, .. } => {
                let mut buf = take_read_buf(&mut self.spare_read_buf, len, self.block_size_bytes);
                let result = retry_eintr(|| entry.file.read_at(buf.as_mut_slice(), offset));
                let buf = result.as_ref().ok().map(|&n| {
                    buf.set_len(n);
                    buf
                });
                (result, buf)
            }
            // A directory's entries need a full fsync.
            Op::Fdatasync { .. } if entry.directory => {
                (retry_eintr(|| entry.file.sync_all().map(|()| 0)), None)
            }
            Op::Fdatasync { .. } => (retry_eintr(|| entry.file.sync_data().map(|()| 0)), None),
            Op::Fallocate {
                offset, len_bytes, ..
            } => (
                super::posix::fallocate_keep_size(&entry.file, offset, len_bytes).map(|()| 0),
                None,
            ),
        };
        let result = result.map_err(|e| IoError::new(operation, &entry.path, offset, e));
        Completion { op_id, result, buf }
    }

    /// Run a single operation or a chain; a chain stops at the first error or short transfer and
    /// cancels the rest, as io_uring's IOSQE_IO_LINK does.
    fn run_unit(&mut self, unit: Vec<(OpId, Op)>) {
        let mut failed = false;
        for (op_id, op) in unit {
            let completion = if failed {
                if let Some(f) = self.files.get_mut(op.file()) {
                    f.in_flight -= 1;
                }
                let path = self
                    .files
                    .get(op.file(), "")
                    .map(|f| f.path.clone())
                    .unwrap_or_else(|_| UNKNOWN_FILE_PATH.into());
                failed_completion(op_id, op, &path, errno(libc::ECANCELED))
            } else {
                let expected = op.len_bytes();
                let is_data = !matches!(op, Op::Fdatasync { .. });
                let completion = self.execute(op_id, op);
                failed = match &completion.result {
                    Err(_) => true,
                    Ok(n) => is_data && *n != expected,
                };
                completion
            };
            self.ready.push_back(completion);
        }
    }
}

impl Default for SyscallIo {
    fn default() -> Self {
        Self::new()
    }
}

fn retry_eintr(mut call: impl FnMut() -> std::io::Result<usize>) -> std::io::Result<usize> {
    loop {
        match call() {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            other => return other,
        }
    }
}

impl Io for SyscallIo {
    fn block_size_bytes(&self) -> usize {
        self.block_size_bytes
    }

    fn open(&mut self, path: &Path, options: OpenOptions) -> Result<FileId, IoError> {
        self.files.open(path, options)
    }

    fn close(&mut self, file: FileId) -> Result<(), IoError> {
        self.files.close(file)
    }

    fn file_size_bytes(&mut self, file: FileId) -> Result<u64, IoError> {
        self.files.file_size_bytes(file)
    }

    fn set_len(&mut self, file: FileId, len_bytes: u64) -> Result<(), IoError> {
        self.files.set_len(file, len_bytes)
    }

    fn preallocate(&mut self, file: FileId, len_bytes: u64) -> Result<(), IoError> {
        self.files.preallocate(file, len_bytes)
    }

    fn create_dir_all(&mut self, path: &Path) -> Result<(), IoError> {
        posix::create_dir_all(path)
    }

    fn list_dir(&mut self, path: &Path) -> Result<Vec<String>, IoError> {
        posix::list_dir(path)
    }

    fn exists(&mut self, path: &Path) -> bool {
        posix::exists(path)
    }

    fn rename(&mut self, from: &Path, to: &Path) -> Result<(), IoError> {
        super::release::rename_release_later(from, to)
    }

    fn remove_file(&mut self, path: &Path) -> Result<(), IoError> {
        posix::remove_file(path)
    }

    fn remove_file_release_later(&mut self, path: &Path) -> Result<(), IoError> {
        super::release::remove_file_release_later(path)
    }

    fn sync_dir(&mut self, path: &Path) -> Result<(), IoError> {
        posix::sync_dir(path)
    }

    fn open_dir(&mut self, path: &Path) -> Result<FileId, IoError> {
        self.files.open_dir(path)
    }

    fn write_buffered_at(
        &mut self,
        path: &Path,
        position: u64,
        data: &[u8],
    ) -> Result<(), IoError> {
        posix::write_buffered_at(path, position, data)
    }

    fn read_buffered_at(
        &mut self,
        path: &Path,
        position: u64,
        len_bytes: usize,
    ) -> Result<Vec<u8>, IoError> {
        posix::read_buffered_at(path, position, len_bytes)
    }

    fn open_reader(&mut self, path: &Path) -> Result<Option<FileReader>, IoError> {
        FileReader::open(path).map(Some)
    }

    fn raw_fd(&self, file: FileId) -> Option<std::os::fd::RawFd> {
        self.files
            .get(file, "raw_fd")
            .ok()
            .map(|f| f.file.as_raw_fd())
    }

    fn submit(&mut self, op: Op) -> OpId {
        let op_id = self.allocate_op_id();
        self.enqueue(vec![(op_id, op)]);
        op_id
    }

    fn submit_linked(&mut self, ops: Vec<Op>) -> Vec<OpId> {
        let unit: Vec<(OpId, Op)> = ops
            .into_iter()
            .map(|op| (self.allocate_op_id(), op))
            .collect();
        let ids = unit.iter().map(|(id, _)| *id).collect();
        if !unit.is_empty() {
            self.enqueue(unit);
        }
        ids
    }

    fn submit_and_wait(&mut self, _min_completions: usize) -> Result<(), IoError> {
        // Everything queued runs now, so any minimum up to `in_flight()` is met on return.
        while let Some(unit) = self.queued.pop_front() {
            self.run_unit(unit);
        }
        debug_assert!(self.files.is_empty_of_in_flight());
        Ok(())
    }

    fn drain_completions(&mut self, out: &mut Vec<Completion>) {
        out.extend(self.ready.drain(..));
    }

    fn take_completions(&mut self, ids: &[OpId], out: &mut Vec<Completion>) {
        super::take_from_ready(&mut self.ready, ids, out);
    }

    fn recycle_read_buf(&mut self, buf: AlignedBuf) {
        self.spare_read_buf = Some(buf);
    }

    fn ready_count(&mut self) -> usize {
        self.ready.len()
    }

    fn in_flight(&self) -> usize {
        self.ready.len() + self.queued.iter().map(Vec::len).sum::<usize>()
    }
}

/// `pwritev2(…, RWF_DSYNC)`: one write, durable when it returns (as on an O_DSYNC file).
fn pwrite_dsync(file: &std::fs::File, bytes: &[u8], offset: u64) -> std::io::Result<usize> {
    let iov = libc::iovec {
        iov_base: bytes.as_ptr() as *mut libc::c_void,
        iov_len: bytes.len(),
    };
    let offset = libc::off_t::try_from(offset).map_err(|_| errno(libc::EFBIG))?;
    // SAFETY: one iovec over a live slice, a valid fd owned by `file`.
    let n = unsafe { libc::pwritev2(file.as_raw_fd(), &iov, 1, offset, libc::RWF_DSYNC) };
    if n < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}
