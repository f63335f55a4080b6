//! The io_uring backend: data operations as SQEs, completions from the CQ.
//!
//! - One ring (256 SQ entries by default). Every data operation becomes one SQE whose `user_data`
//!   is its [`OpId`]; a linked chain sets IOSQE_IO_LINK on every SQE but the last, so a group
//!   commit's write → fdatasync is one chain the kernel runs in order.
//! - Buffers belong to the backend while the kernel may touch them: a write's buffer and a read's
//!   fresh buffer sit in `in_flight` keyed by OpId (moving an `AlignedBuf` never moves its heap
//!   bytes), and come back in [`Completion::buf`].
//! - CQEs are drained into `ready` and handed out only by [`Io::drain_completions`]; the backend
//!   never calls back into the caller while it walks the ring.
//! - A full SQ parks submissions in `overflow` (whole chains together: a chain split across two
//!   `io_uring_enter` calls would lose its link) until `submit_and_wait` makes room.
//! - `submit_and_wait` retries EINTR, and on EBUSY/EAGAIN (CQ overflow backlog) reaps and retries.
//!   A standalone operation whose CQE is -EAGAIN/-EINTR is submitted again; one inside a chain is
//!   reported, because resubmitting it alone would break the chain's order.
//! - Short reads and writes are returned as counts; the caller decides (the kernel cancels the
//!   rest of a chain after a short transfer).
//! - An eventfd registered with the ring ([`Io::readiness_fd`]) is signalled by the kernel for
//!   every CQE, so the node's event loop sleeps until a completion arrives instead of polling.
//! - Metadata operations are plain syscalls (`posix`).
//! - `close` asserts the file has nothing in flight, and dropping the backend waits for every
//!   operation in the kernel before freeing the buffers it writes into.

use std::collections::{HashMap, VecDeque};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::Path;

use io_uring::{IoUring, opcode, squeue, types};

use super::common::{
    UNKNOWN_FILE_PATH, check_direct_alignment, check_transfer_len, errno, failed_completion,
    take_read_buf,
};
use super::group_sync::GroupSync;
use super::posix::{self, BLOCK_SIZE_BYTES_MIN, PosixFiles};
use super::{AlignedBuf, Completion, FileId, FileReader, Io, IoError, Op, OpId, OpenOptions};

/// Submission queue entries of the ring; the CQ gets twice as many (the kernel default).
pub const RING_ENTRIES: u32 = 256;

/// The path named in errors of the ring itself (not of one file).
const RING_PATH: &str = "<io_uring>";

pub struct UringIo {
    ring: IoUring,
    files: PosixFiles,
    block_size_bytes: usize,
    next_op_id: u64,
    /// Every operation submitted to the backend and not yet completed, with the buffer it owns.
    in_flight: HashMap<u64, InFlight>,
    /// Chains (or single SQEs) waiting for room in the SQ, in submission order.
    overflow: VecDeque<Vec<squeue::Entry>>,
    ready: VecDeque<Completion>,
    /// The eventfd registered with the ring (declared after `ring`, so it closes after it).
    readiness: OwnedFd,
    /// A completed read's buffer given back (`Io::recycle_read_buf`) for the next read.
    spare_read_buf: Option<AlignedBuf>,
    /// Standalone fdatasyncs submitted together go to one `syncfs` on a thread
    /// (group_sync.rs); `None` when off.
    group_sync: Option<GroupSync>,
    /// Operations of `in_flight` held by `group_sync` (never in the kernel's ring).
    group_ops: usize,
}

struct InFlight {
    op: Op,
    /// The buffer a read fills (writes keep theirs inside `op`).
    read_buf: Option<AlignedBuf>,
    linked: bool,
    /// Held by `group_sync`, not the ring.
    group: bool,
}

impl UringIo {
    /// Set up a ring and check that it works (a NOP must complete): in containers whose seccomp
    /// profile blocks io_uring, setup fails with EPERM or ENOSYS, or the NOP never completes.
    pub fn new() -> std::io::Result<Self> {
        Self::with_block_size(BLOCK_SIZE_BYTES_MIN)
    }

    /// As [`UringIo::new`], with the alignment discovered from the device holding `data_dir`.
    pub fn for_dir(data_dir: &Path) -> std::io::Result<Self> {
        Self::with_block_size(posix::discover_block_size_bytes(data_dir))
    }

    pub fn with_block_size(block_size_bytes: usize) -> std::io::Result<Self> {
        let group_sync = group_sync_from_env().then_some(super::group_sync::DIRTY_LIMIT_BYTES);
        Self::with_options(block_size_bytes, group_sync)
    }

    /// As [`UringIo::with_block_size`], whatever the environment says: group sync off (`None`)
    /// or on, grouping only while the machine's dirty page cache is below the given bytes
    /// (group_sync.rs; `u64::MAX` always groups).
    pub fn with_options(block_size_bytes: usize, group_sync: Option<u64>) -> std::io::Result<Self> {
        assert!(
            block_size_bytes.is_power_of_two(),
            "block size must be a power of two"
        );
        let mut ring = IoUring::new(RING_ENTRIES)?;
        probe_nop(&mut ring)?;
        // SAFETY: eventfd returns a new descriptor that nothing else owns, or -1.
        let raw = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if raw < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: `raw` is a fresh, valid descriptor (checked above) owned by nobody else.
        let readiness = unsafe { OwnedFd::from_raw_fd(raw) };
        ring.submitter().register_eventfd(readiness.as_raw_fd())?;
        let group_sync = match group_sync {
            Some(dirty_limit_bytes) => {
                Some(GroupSync::start(readiness.try_clone()?, dirty_limit_bytes)?)
            }
            None => None,
        };
        Ok(UringIo {
            ring,
            files: PosixFiles::new(),
            block_size_bytes,
            next_op_id: 1,
            in_flight: HashMap::new(),
            overflow: VecDeque::new(),
            ready: VecDeque::new(),
            readiness,
            spare_read_buf: None,
            group_sync,
            group_ops: 0,
        })
    }

    fn allocate_op_id(&mut self) -> OpId {
        let id = OpId(self.next_op_id);
        self.next_op_id += 1;
        id
    }

    /// Check an operation before it reaches the kernel; the error completes it at once.
    fn validate(&self, op: &Op) -> Result<(), (std::path::PathBuf, std::io::Error)> {
        let entry = self
            .files
            .get(op.file(), op.operation_name())
            .map_err(|e| (e.path, e.source))?;
        if entry.read_only && op.is_write() {
            return Err((entry.path.clone(), errno(libc::EBADF)));
        }
        if entry.direct {
            check_direct_alignment(op, self.block_size_bytes)
                .map_err(|e| (entry.path.clone(), e))?;
        }
        check_transfer_len(op).map_err(|e| (entry.path.clone(), e))?;
        Ok(())
    }

    /// Record the operation as in flight and build its SQE. The buffer is moved into `in_flight`
    /// first and the SQE points at its heap bytes, which stay put until the CQE is reaped.
    fn prepare(&mut self, op_id: OpId, op: Op, linked: bool, link_next: bool) -> squeue::Entry {
        let file = self.files.get_mut(op.file()).expect("validated");
        file.in_flight += 1;
        let fd = types::Fd(file.file.as_raw_fd());
        let directory = file.directory;
        let mut flight = InFlight {
            op,
            read_buf: None,
            linked,
            group: false,
        };
        let entry = match &mut flight.op {
            Op::Write { offset, buf, .. } => opcode::Write::new(fd, buf.as_ptr(), buf.len() as u32)
                .offset(*offset)
                .build(),
            Op::WriteDsync { offset, buf, .. } => {
                opcode::Write::new(fd, buf.as_ptr(), buf.len() as u32)
                    .offset(*offset)
                    .rw_flags(libc::RWF_DSYNC)
                    .build()
            }
            Op::Read { offset, len, .. } => {
                let mut buf = take_read_buf(&mut self.spare_read_buf, *len, self.block_size_bytes);
                let entry = opcode::Read::new(fd, buf.as_mut_ptr(), *len as u32)
                    .offset(*offset)
                    .build();
                flight.read_buf = Some(buf);
                entry
            }
            // A directory's entries need a full fsync.
            Op::Fdatasync { .. } if directory => opcode::Fsync::new(fd).build(),
            Op::Fdatasync { .. } => opcode::Fsync::new(fd)
                .flags(types::FsyncFlags::DATASYNC)
                .build(),
            // Always run by an io_uring worker: the submitting thread does not wait for the
            // block allocator (nor for direct I/O in flight on the inode, which fallocate
            // drains first).
            Op::Fallocate {
                offset, len_bytes, ..
            } => opcode::Fallocate::new(fd, *len_bytes)
                .offset(*offset)
                .mode(libc::FALLOC_FL_KEEP_SIZE)
                .build(),
        };
        let previous = self.in_flight.insert(op_id.0, flight);
        assert!(previous.is_none(), "op id {op_id:?} reused while in flight");
        let entry = entry.user_data(op_id.0);
        if link_next {
            entry.flags(squeue::Flags::IO_LINK)
        } else {
            entry
        }
    }

    /// Queue SQEs as one unit: straight into the SQ if it has room and nothing is parked ahead,
    /// otherwise behind the parked ones (order of submission is kept).
    fn enqueue(&mut self, entries: Vec<squeue::Entry>) {
        if entries.is_empty() {
            return;
        }
        if self.overflow.is_empty() && self.push_unit(&entries) {
            return;
        }
        self.overflow.push_back(entries);
    }

    fn push_unit(&mut self, entries: &[squeue::Entry]) -> bool {
        let mut sq = self.ring.submission();
        if sq.capacity() - sq.len() < entries.len() {
            return false;
        }
        // SAFETY: every SQE points into a buffer held in `self.in_flight` (or none, for fsync),
        // which is not freed or touched until its CQE is reaped; the fd stays open because `close`
        // asserts nothing is in flight on it and `Drop` waits for the kernel.
        unsafe { sq.push_multiple(entries) }.is_ok()
    }

    /// Move parked units into the SQ while they fit.
    fn fill_from_overflow(&mut self) {
        while let Some(unit) = self.overflow.front() {
            let unit = unit.clone();
            if !self.push_unit(&unit) {
                break;
            }
            self.overflow.pop_front();
        }
    }

    /// Batches of fdatasyncs made durable by one `syncfs` so far (group_sync.rs).
    pub fn grouped_syncs(&self) -> u64 {
        self.group_sync
            .as_ref()
            .map_or(0, GroupSync::grouped_batches)
    }

    /// Hands a standalone fdatasync to the group sync instead of the ring. Refused (the op comes
    /// back) when group sync is off, for a directory (whose entries need a full fsync), and for
    /// a file on a filesystem other than ext4.
    fn offer_to_group(&mut self, op_id: OpId, op: Op) -> Result<(), Op> {
        let Some(group) = &mut self.group_sync else {
            return Err(op);
        };
        let Op::Fdatasync { file } = op else {
            return Err(op);
        };
        let entry = self.files.get_mut(file).expect("validated");
        if entry.directory {
            return Err(op);
        }
        let fd = entry.file.as_raw_fd();
        if entry
            .group_device
            .get_or_insert_with(|| super::group_sync::group_device(fd))
            .is_none()
        {
            return Err(op);
        }
        entry.in_flight += 1;
        group.add((op_id.0, fd));
        self.group_ops += 1;
        let previous = self.in_flight.insert(
            op_id.0,
            InFlight {
                op,
                read_buf: None,
                linked: false,
                group: true,
            },
        );
        assert!(previous.is_none(), "op id {op_id:?} reused while in flight");
        Ok(())
    }

    /// Starts the group sync's next batch; what it hands back goes to the ring one by one.
    fn kick_group(&mut self) {
        let Some(group) = &mut self.group_sync else {
            return;
        };
        for (id, _) in group.kick() {
            let (flight, _) = self.take_group_op(id);
            let entry = self.prepare(OpId(id), flight.op, false, false);
            self.enqueue(vec![entry]);
        }
    }

    /// Takes a group sync op out of `in_flight` (and its file's count); returns it and its
    /// file's path.
    fn take_group_op(&mut self, id: u64) -> (InFlight, std::path::PathBuf) {
        self.group_ops -= 1;
        let flight = self.in_flight.remove(&id).expect("a group op is in flight");
        assert!(flight.group, "only the group sync's own ops");
        let file = self
            .files
            .get_mut(flight.op.file())
            .expect("a file with operations in flight stays open");
        file.in_flight -= 1;
        (flight, file.path.clone())
    }

    /// Moves the group sync's finished fdatasyncs into `ready` and starts its next batch.
    fn reap_group(&mut self) {
        let Some(group) = &mut self.group_sync else {
            return;
        };
        for (id, error) in group.collect() {
            let (flight, path) = self.take_group_op(id);
            let result = if error == 0 {
                Ok(0)
            } else {
                Err(IoError::new(
                    flight.op.operation_name(),
                    &path,
                    flight.op.offset(),
                    errno(error),
                ))
            };
            self.ready.push_back(Completion {
                op_id: OpId(id),
                result,
                buf: None,
            });
        }
        self.kick_group();
    }

    /// Move every available CQE into `ready` (or back into the ring, for a retryable standalone op).
    fn reap(&mut self) {
        self.reap_group();
        let cqes: Vec<(u64, i32)> = self
            .ring
            .completion()
            .map(|cqe| (cqe.user_data(), cqe.result()))
            .collect();
        for (user_data, result) in cqes {
            let flight = self
                .in_flight
                .remove(&user_data)
                .expect("a CQE for an operation we submitted");
            let file_id = flight.op.file();
            let file = self
                .files
                .get_mut(file_id)
                .expect("a file with operations in flight stays open");
            file.in_flight -= 1;
            let path = file.path.clone();
            let retryable = result == -libc::EAGAIN || result == -libc::EINTR;
            if retryable && !flight.linked {
                let op_id = OpId(user_data);
                let entry = self.prepare(op_id, flight.op, false, false);
                self.enqueue(vec![entry]);
                continue;
            }
            let op_id = OpId(user_data);
            let operation = flight.op.operation_name();
            let offset = flight.op.offset();
            let outcome = if result < 0 {
                Err(IoError::new(operation, &path, offset, errno(-result)))
            } else {
                Ok(result as usize)
            };
            let buf = match flight.op {
                Op::Write { buf, .. } | Op::WriteDsync { buf, .. } => Some(buf),
                Op::Read { .. } => {
                    // A failed read hands back no buffer, like the other backends.
                    let mut buf = flight.read_buf.expect("reads own a buffer");
                    outcome.as_ref().ok().map(|&n| {
                        buf.set_len(n);
                        buf
                    })
                }
                Op::Fdatasync { .. } | Op::Fallocate { .. } => None,
            };
            self.ready.push_back(Completion {
                op_id,
                result: outcome,
                buf,
            });
        }
    }

    /// One `io_uring_enter`: submit what is in the SQ and wait for `want` CQEs. Returns false if
    /// the call was interrupted or pushed back (the caller loops), true if it went through.
    fn enter(&mut self, want: usize) -> Result<bool, IoError> {
        match self.ring.submit_and_wait(want) {
            Ok(_) => Ok(true),
            Err(e) => match e.raw_os_error() {
                Some(libc::EINTR) => Ok(false),
                Some(libc::EBUSY) | Some(libc::EAGAIN) => {
                    // The kernel holds CQEs it could not post: make room by reaping.
                    self.reap();
                    Ok(false)
                }
                _ => Err(IoError::new("submit_and_wait", Path::new(RING_PATH), 0, e)),
            },
        }
    }
}

/// The environment variable that turns group sync off (`off`); on by default.
pub const GROUP_SYNC_ENV: &str = "RINGLOG_GROUP_SYNC";

/// Whether `RINGLOG_GROUP_SYNC` leaves group sync on (anything but `off`, `0` or `false`).
fn group_sync_from_env() -> bool {
    match std::env::var(GROUP_SYNC_ENV) {
        Ok(text) => !matches!(
            text.trim().to_ascii_lowercase().as_str(),
            "off" | "0" | "false"
        ),
        Err(_) => true,
    }
}

/// Submit one NOP and wait for it: proves the ring works end to end.
fn probe_nop(ring: &mut IoUring) -> std::io::Result<()> {
    const PROBE_USER_DATA: u64 = u64::MAX;
    let nop = opcode::Nop::new().build().user_data(PROBE_USER_DATA);
    // SAFETY: a NOP references no memory.
    unsafe { ring.submission().push(&nop) }
        .map_err(|_| std::io::Error::other("fresh ring has a full SQ"))?;
    loop {
        match ring.submit_and_wait(1) {
            Ok(_) => break,
            Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
            Err(e) => return Err(e),
        }
    }
    let cqe = ring
        .completion()
        .next()
        .ok_or_else(|| std::io::Error::other("io_uring NOP did not complete"))?;
    if cqe.user_data() != PROBE_USER_DATA || cqe.result() < 0 {
        return Err(std::io::Error::from_raw_os_error(-cqe.result().min(-1)));
    }
    Ok(())
}

impl Io for UringIo {
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
        match self.validate(&op) {
            Err((path, e)) => self.ready.push_back(failed_completion(op_id, op, &path, e)),
            Ok(()) => {
                if let Err(op) = self.offer_to_group(op_id, op) {
                    let entry = self.prepare(op_id, op, false, false);
                    self.enqueue(vec![entry]);
                }
            }
        }
        op_id
    }

    fn submit_linked(&mut self, ops: Vec<Op>) -> Vec<OpId> {
        let ids: Vec<OpId> = ops.iter().map(|_| self.allocate_op_id()).collect();
        // The valid prefix goes to the kernel as one chain; the first invalid op fails at once and
        // everything after it is cancelled, as the kernel would have done had it failed there.
        let valid_prefix = ops
            .iter()
            .position(|op| self.validate(op).is_err())
            .unwrap_or(ops.len());
        let valid_prefix = if valid_prefix > RING_ENTRIES as usize {
            0
        } else {
            valid_prefix
        };
        let mut entries = Vec::with_capacity(valid_prefix);
        let mut failure = None;
        for (index, (op_id, op)) in ids.iter().copied().zip(ops).enumerate() {
            if index < valid_prefix {
                let link_next = index + 1 < valid_prefix;
                entries.push(self.prepare(op_id, op, true, link_next));
            } else if failure.is_none() {
                let (path, e) = self.validate(&op).err().unwrap_or_else(|| {
                    // Only reached for a chain longer than the ring: it can never be one chain.
                    let path = self.files.get(op.file(), "").map(|f| f.path.clone());
                    (
                        path.unwrap_or_else(|_| UNKNOWN_FILE_PATH.into()),
                        errno(libc::EINVAL),
                    )
                });
                failure = Some(path.clone());
                self.ready.push_back(failed_completion(op_id, op, &path, e));
            } else {
                let path = self
                    .files
                    .get(op.file(), "")
                    .map(|f| f.path.clone())
                    .unwrap_or_else(|_| UNKNOWN_FILE_PATH.into());
                self.ready
                    .push_back(failed_completion(op_id, op, &path, errno(libc::ECANCELED)));
            }
        }
        self.enqueue(entries);
        ids
    }

    fn submit_and_wait(&mut self, min_completions: usize) -> Result<(), IoError> {
        let target = min_completions.min(self.in_flight());
        loop {
            self.kick_group();
            self.fill_from_overflow();
            let missing = target.saturating_sub(self.ready.len());
            // While units are parked, only submit (never block): they need the SQ room that the
            // submission frees. `want` never exceeds what is in the kernel, so this cannot hang.
            let in_kernel = self.in_flight.len()
                - self.group_ops
                - self.overflow.iter().map(Vec::len).sum::<usize>();
            let want = if self.overflow.is_empty() {
                missing.min(in_kernel)
            } else {
                0
            };
            let went_through = self.enter(want)?;
            if want == 0
                && missing > 0
                && let Some(group) = &mut self.group_sync
                && group.busy()
            {
                // What is missing can only come from the group sync's batch.
                group.wait_batch();
            }
            self.reap();
            if went_through
                && self.overflow.is_empty()
                && self.ready.len() >= target
                && self.ring.submission().is_empty()
            {
                return Ok(());
            }
        }
    }

    fn drain_completions(&mut self, out: &mut Vec<Completion>) {
        self.reap();
        out.extend(self.ready.drain(..));
    }

    fn take_completions(&mut self, ids: &[OpId], out: &mut Vec<Completion>) {
        self.reap();
        super::take_from_ready(&mut self.ready, ids, out);
    }

    fn ready_count(&mut self) -> usize {
        self.reap();
        self.ready.len()
    }

    fn in_flight(&self) -> usize {
        self.ready.len() + self.in_flight.len()
    }

    fn readiness_fd(&self) -> Option<RawFd> {
        Some(self.readiness.as_raw_fd())
    }

    fn recycle_read_buf(&mut self, buf: AlignedBuf) {
        self.spare_read_buf = Some(buf);
    }

    fn clear_readiness(&mut self) {
        let mut count = 0u64;
        // SAFETY: reads 8 bytes into a u64 on the stack from our own non-blocking eventfd.
        // EAGAIN (nothing signalled) is the only expected failure and means there is nothing to
        // clear.
        unsafe {
            libc::read(
                self.readiness.as_raw_fd(),
                (&mut count as *mut u64).cast(),
                std::mem::size_of::<u64>(),
            );
        }
    }
}

impl Drop for UringIo {
    fn drop(&mut self) {
        // The sync thread finishes its batch (the files are still open) and ends; the group's
        // operations own no buffer.
        self.group_sync.take();
        self.in_flight.retain(|_, flight| !flight.group);
        // Parked units never reached the kernel: their buffers can go.
        let parked: Vec<u64> = self
            .overflow
            .drain(..)
            .flatten()
            .map(|e| e.get_user_data())
            .collect();
        for user_data in parked {
            self.in_flight.remove(&user_data);
        }
        // The kernel may still write into read buffers or read from write buffers: wait for it.
        while !self.in_flight.is_empty() {
            let in_kernel = self.in_flight.len();
            if self.enter(in_kernel).is_err() {
                // A ring that cannot be entered any more: leak the buffers rather than free memory
                // the kernel might still touch.
                for (_, flight) in self.in_flight.drain() {
                    std::mem::forget(flight);
                }
                return;
            }
            self.reap();
        }
    }
}
