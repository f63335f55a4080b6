//! The deterministic in-memory backend: a simulated filesystem with a page cache and a medium.
//!
//! Crash model (see also `docs/io.md`):
//!
//! | state | survives [`MemoryIo::crash`]? |
//! | --- | --- |
//! | bytes of a write followed by a completed `Fdatasync` of the file | yes |
//! | bytes of a completed `WriteDsync` (only its own range; the file grows to its end) | yes |
//! | bytes of a write not yet covered by a completed `Fdatasync` | no, unless writeback (probability) let it through in full, or it is the file's newest such write (any such write with `tear_every_unsynced_write`) and is *torn*: a prefix cut at any byte lands |
//! | bytes of a write still queued in a chain after an `Fdatasync` of that chain | no: a linked operation starts only once the one before it completed |
//! | `set_len` followed by a completed `Fdatasync` | yes |
//! | a created, renamed or removed directory entry, before `sync_dir` of its parent | no: the create disappears, the rename is undone, the removed file comes back |
//! | a file whose data was synced but whose directory entry never was | no (unreachable from the root) |
//!
//! Data operations do nothing until [`Io::submit_and_wait`]: then the queued submissions (single
//! operations or whole linked chains) run, in order or shuffled (`reorder_completions`), and once the
//! caller's minimum is met each remaining one may be held back (`delay_probability`). Everything random
//! comes from one seeded [`SimRng`], so one seed replays one history.
//!
//! Files opened with `direct` enforce the O_DIRECT alignment rule: an unaligned offset, length or
//! buffer completes with EINVAL, so the log's alignment bugs show up here first.

mod fault;
mod fs;

use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};

pub use fault::{FaultConfig, FaultKind, FaultTrigger, SimRng};
pub use fs::TornWrite;

use self::fs::{CrashCandidate, Fs, InodeId, components, normalize};
use super::common::{
    UNKNOWN_FILE_PATH, check_direct_alignment, check_transfer_len, errno, failed_completion,
};
use super::{AlignedBuf, Completion, FileId, Io, IoError, Op, OpId, OpenOptions};

/// The largest file the memory backend will grow (a huge offset is a caller bug, reported as EFBIG
/// rather than an allocation that takes the test process down).
pub const MEMORY_FILE_SIZE_BYTES_MAX: u64 = 1 << 32;

/// Whether [`MemoryIo::execute`]'s write makes its own range durable.
enum OpKind {
    WriteDsync,
    Other,
}

/// Construction parameters of a [`MemoryIo`].
#[derive(Clone, Debug, PartialEq)]
pub struct MemoryConfig {
    pub seed: u64,
    pub block_size_bytes: usize,
    pub faults: FaultConfig,
}

impl Default for MemoryConfig {
    fn default() -> Self {
        MemoryConfig {
            seed: 0,
            block_size_bytes: 4096,
            faults: FaultConfig::default(),
        }
    }
}

/// The durable state of a [`MemoryIo`], to clone a disk or to restart from it.
#[derive(Clone, Debug)]
pub struct MemorySnapshot {
    fs: Fs,
}

/// What a crash did besides dropping unsynced state.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CrashReport {
    /// Writes that reached the medium in part (torn) or in full (writeback) although unsynced.
    pub torn_writes: Vec<TornWrite>,
    /// Submitted operations that had not completed (their completions are lost with the process).
    pub lost_operations: usize,
}

pub struct MemoryIo {
    fs: Fs,
    config: MemoryConfig,
    rng: SimRng,
    files: BTreeMap<FileId, OpenFile>,
    next_file_id: u64,
    next_op_id: u64,
    /// Submitted, not yet run: single operations and linked chains, in submission order.
    queued: VecDeque<Vec<(OpId, Op)>>,
    ready: VecDeque<Completion>,
    triggers: Vec<FaultTrigger>,
}

struct OpenFile {
    inode: InodeId,
    path: PathBuf,
    direct: bool,
    read_only: bool,
}

impl MemoryIo {
    pub fn new(config: MemoryConfig) -> Self {
        assert!(
            config.block_size_bytes.is_power_of_two(),
            "block size must be a power of two"
        );
        let rng = SimRng::new(config.seed);
        MemoryIo {
            fs: Fs::new(),
            config,
            rng,
            files: BTreeMap::new(),
            next_file_id: 1,
            next_op_id: 1,
            queued: VecDeque::new(),
            ready: VecDeque::new(),
            triggers: Vec::new(),
        }
    }

    /// A perfect disk (no faults) with the given seed.
    pub fn with_seed(seed: u64) -> Self {
        MemoryIo::new(MemoryConfig {
            seed,
            ..MemoryConfig::default()
        })
    }

    /// Restart from a durable state (a fresh process on the same disk).
    pub fn from_snapshot(snapshot: &MemorySnapshot, config: MemoryConfig) -> Self {
        let mut io = MemoryIo::new(config);
        io.fs = snapshot.fs.clone();
        io
    }

    pub fn config(&self) -> &MemoryConfig {
        &self.config
    }

    /// Change fault probabilities mid-test (e.g. start failing fsyncs after setup).
    pub fn set_faults(&mut self, faults: FaultConfig) {
        self.config.faults = faults;
    }

    /// Add a targeted fault; paths are matched in normalised form.
    pub fn add_fault(&mut self, mut trigger: FaultTrigger) {
        trigger.path = trigger.path.map(|p| normalize(&p));
        self.triggers.push(trigger);
    }

    pub fn clear_faults(&mut self) {
        self.triggers.clear();
    }

    /// Power loss, with the backend's own PRNG deciding tears and writeback.
    pub fn crash(&mut self) -> CrashReport {
        let mut rng = self.rng.fork();
        self.crash_with(&mut rng)
    }

    /// Power loss: every open file is closed, every queued or undrained operation is lost, and the
    /// filesystem falls back to its durable state, with tears and writeback drawn from `rng`.
    pub fn crash_with(&mut self, rng: &mut SimRng) -> CrashReport {
        let mut candidates = Vec::new();
        for inode_id in self.fs.inodes.keys().copied().collect::<Vec<_>>() {
            let Some(file) = self.fs.file(inode_id) else {
                continue;
            };
            for write in &file.unsynced_writes {
                candidates.push(CrashCandidate {
                    inode: inode_id,
                    path: self.path_hint(inode_id),
                    offset: write.offset,
                    data: write.data.clone(),
                });
            }
        }
        // Writes still queued were in flight at power loss: they may land (torn) too, after the
        // completed ones of the same file. Not those of a chain after its first fdatasync: the
        // kernel starts a linked operation only once the one before completed, and that
        // fdatasync never did (since 2026-12-07; before, a chain's write after its fdatasync
        // could land while the write the fdatasync covered tore, which no kernel does).
        let mut lost_operations = self.ready.len();
        for unit in &self.queued {
            let mut started = true;
            for (_, op) in unit {
                lost_operations += 1;
                if !started {
                    continue;
                }
                if matches!(op, Op::Fdatasync { .. }) {
                    started = false;
                }
                if let Op::Write { file, offset, buf } | Op::WriteDsync { file, offset, buf } = op
                    && let Some(open) = self.files.get(file)
                    && !open.read_only
                {
                    candidates.push(CrashCandidate {
                        inode: open.inode,
                        path: open.path.clone(),
                        offset: *offset,
                        data: buf.as_slice().to_vec(),
                    });
                }
            }
        }
        // Keep each file's candidates in order, files in inode order: deterministic for a seed.
        candidates.sort_by_key(|c| c.inode);
        let faults = &self.config.faults;
        let torn_writes = self.fs.crash(
            candidates,
            rng,
            faults.tear_probability,
            faults.writeback_probability,
            faults.tear_every_unsynced_write,
        );
        self.files.clear();
        self.queued.clear();
        self.ready.clear();
        CrashReport {
            torn_writes,
            lost_operations,
        }
    }

    /// The durable state now (what a crash without tears would leave).
    pub fn snapshot(&self) -> MemorySnapshot {
        let mut fs = self.fs.clone();
        fs.crash(Vec::new(), &mut SimRng::new(0), 0.0, 0.0, false);
        MemorySnapshot { fs }
    }

    /// Replace the whole disk with `snapshot`, as after a crash: open files and operations are gone.
    pub fn restore(&mut self, snapshot: &MemorySnapshot) {
        self.fs = snapshot.fs.clone();
        self.files.clear();
        self.queued.clear();
        self.ready.clear();
    }

    /// Paths of every file a crash now would keep, sorted.
    pub fn durable_files(&self) -> Vec<PathBuf> {
        self.fs.file_paths(true)
    }

    /// Paths of every file visible now, sorted.
    pub fn visible_files(&self) -> Vec<PathBuf> {
        self.fs.file_paths(false)
    }

    /// The bytes a crash now would keep for `path` (following durable entries), before any tear.
    pub fn durable_bytes(&self, path: &Path) -> Option<Vec<u8>> {
        let inode = self.fs.lookup(&components(path), true)?;
        self.fs.file(inode).map(|f| f.durable.clone())
    }

    /// The bytes a reader sees now at `path`.
    pub fn visible_bytes(&self, path: &Path) -> Option<Vec<u8>> {
        let inode = self.fs.lookup(&components(path), false)?;
        self.fs.file(inode).map(|f| f.visible.clone())
    }

    /// Media corruption: flip bit `bit` (0..8) of byte `byte_offset` of the durable file at `path`.
    /// The visible byte flips too where it still equals the medium (a clean page, as if re-read);
    /// a dirty page keeps the caller's data and will overwrite the flip at the next fdatasync.
    pub fn flip_bit(&mut self, path: &Path, byte_offset: u64, bit: u8) -> Result<(), IoError> {
        let err = |code| IoError::new("flip_bit", path, byte_offset, errno(code));
        if bit >= 8 {
            return Err(err(libc::EINVAL));
        }
        let inode = self
            .fs
            .lookup(&components(path), true)
            .ok_or_else(|| err(libc::ENOENT))?;
        let file = self.fs.file_mut(inode).ok_or_else(|| err(libc::EISDIR))?;
        let at = usize::try_from(byte_offset).map_err(|_| err(libc::EINVAL))?;
        let durable_byte = *file.durable.get(at).ok_or_else(|| err(libc::EINVAL))?;
        file.durable[at] ^= 1 << bit;
        if file.visible.get(at) == Some(&durable_byte) {
            file.visible[at] ^= 1 << bit;
        }
        Ok(())
    }

    /// Flip one random bit of one random non-empty durable file (drawn from the backend's PRNG,
    /// files weighted by size). Returns where, or `None` if no durable file has a byte.
    pub fn flip_random_bit(&mut self) -> Option<(PathBuf, u64, u8)> {
        let files: Vec<(PathBuf, u64)> = self
            .durable_files()
            .into_iter()
            .filter_map(|p| self.durable_bytes(&p).map(|b| (p, b.len() as u64)))
            .filter(|(_, len)| *len > 0)
            .collect();
        let total: u64 = files.iter().map(|(_, len)| len).sum();
        if total == 0 {
            return None;
        }
        let mut pick = self.rng.below(total);
        let bit = self.rng.below(8) as u8;
        for (path, len) in files {
            if pick < len {
                self.flip_bit(&path, pick, bit)
                    .expect("offset is inside a durable file");
                return Some((path, pick, bit));
            }
            pick -= len;
        }
        unreachable!("pick < total")
    }

    /// A path that reaches `inode` now (visible first, else durable), for reports.
    fn path_hint(&self, inode: InodeId) -> PathBuf {
        for durable in [false, true] {
            for path in self.fs.file_paths(durable) {
                if self.fs.lookup(&components(&path), durable) == Some(inode) {
                    return path;
                }
            }
        }
        self.files
            .values()
            .find(|f| f.inode == inode)
            .map(|f| f.path.clone())
            .unwrap_or_else(|| PathBuf::from(UNKNOWN_FILE_PATH))
    }

    fn allocate_op_id(&mut self) -> OpId {
        let id = OpId(self.next_op_id);
        self.next_op_id += 1;
        id
    }

    fn open_file(&self, file: FileId, operation: &'static str) -> Result<&OpenFile, IoError> {
        self.files.get(&file).ok_or_else(|| {
            IoError::new(
                operation,
                Path::new(UNKNOWN_FILE_PATH),
                0,
                errno(libc::EBADF),
            )
        })
    }

    /// Consume a matching one-shot trigger or draw the fault's probability.
    fn fault_fires(&mut self, kind: FaultKind, path: &Path, offset: u64, len_bytes: usize) -> bool {
        if let Some(trigger) = self
            .triggers
            .iter_mut()
            .find(|t| t.matches(kind, path, offset, len_bytes))
        {
            if let Some(times) = trigger.times.as_mut() {
                *times -= 1;
            }
            self.triggers.retain(|t| t.times != Some(0));
            return true;
        }
        let faults = &self.config.faults;
        let p = match kind {
            FaultKind::ReadEio => faults.read_eio_probability,
            FaultKind::WriteEio => faults.write_eio_probability,
            FaultKind::WriteEnospc => faults.write_enospc_probability,
            FaultKind::FsyncEio => faults.fsync_eio_probability,
        };
        self.rng.chance(p)
    }

    /// Run one operation against the filesystem now.
    fn execute(&mut self, op_id: OpId, op: Op) -> Completion {
        let (inode, path, direct, read_only) = match self.open_file(op.file(), op.operation_name())
        {
            Ok(f) => (f.inode, f.path.clone(), f.direct, f.read_only),
            Err(e) => return failed_completion(op_id, op, Path::new(UNKNOWN_FILE_PATH), e.source),
        };
        if direct && let Err(e) = check_direct_alignment(&op, self.config.block_size_bytes) {
            return failed_completion(op_id, op, &path, e);
        }
        if let Err(e) = check_transfer_len(&op) {
            return failed_completion(op_id, op, &path, e);
        }
        let end = op.offset().checked_add(op.len_bytes() as u64);
        if end.is_none_or(|end| end > MEMORY_FILE_SIZE_BYTES_MAX) {
            return failed_completion(op_id, op, &path, errno(libc::EFBIG));
        }
        if read_only && op.is_write() {
            return failed_completion(op_id, op, &path, errno(libc::EBADF));
        }
        if self.fs.is_dir(inode) {
            // A directory handle (`open_dir`): its fdatasync makes its entries durable.
            return match op {
                Op::Fdatasync { .. } if self.fault_fires(FaultKind::FsyncEio, &path, 0, 0) => {
                    failed_completion(op_id, op, &path, errno(libc::EIO))
                }
                Op::Fdatasync { .. } => match self.fs.sync_dir_inode(inode) {
                    Ok(()) => Completion {
                        op_id,
                        result: Ok(0),
                        buf: None,
                    },
                    Err(e) => failed_completion(op_id, op, &path, e),
                },
                _ => failed_completion(op_id, op, &path, errno(libc::EISDIR)),
            };
        }
        let op_kind = if matches!(op, Op::WriteDsync { .. }) {
            OpKind::WriteDsync
        } else {
            OpKind::Other
        };
        match op {
            Op::Write { offset, buf, .. } | Op::WriteDsync { offset, buf, .. } => {
                let dsync = matches!(op_kind, OpKind::WriteDsync);
                for kind in [FaultKind::WriteEio, FaultKind::WriteEnospc] {
                    if self.fault_fires(kind, &path, offset, buf.len()) {
                        let operation = if dsync { "write (dsync)" } else { "write" };
                        let error = IoError::new(operation, &path, offset, errno(kind.errno()));
                        return Completion {
                            op_id,
                            result: Err(error),
                            buf: Some(buf),
                        };
                    }
                }
                let file = self.fs.file_mut(inode).expect("open files are file inodes");
                if dsync {
                    file.write_durable(offset, buf.as_slice());
                } else {
                    file.write_visible(offset, buf.as_slice());
                }
                Completion {
                    op_id,
                    result: Ok(buf.len()),
                    buf: Some(buf),
                }
            }
            Op::Read { offset, len, .. } => {
                if self.fault_fires(FaultKind::ReadEio, &path, offset, len) {
                    let error = IoError::new("read", &path, offset, errno(libc::EIO));
                    return Completion {
                        op_id,
                        result: Err(error),
                        buf: None,
                    };
                }
                let file = self.fs.file(inode).expect("open files are file inodes");
                let start = (offset as usize).min(file.visible.len());
                let end = start.saturating_add(len).min(file.visible.len());
                let mut buf = AlignedBuf::with_capacity(len, self.config.block_size_bytes);
                buf.extend_from_slice(&file.visible[start..end]);
                Completion {
                    op_id,
                    result: Ok(end - start),
                    buf: Some(buf),
                }
            }
            // As `preallocate`: the simulated medium never runs out of space unless a fault
            // says so, and the size stays.
            Op::Fallocate {
                offset, len_bytes, ..
            } => {
                let len = usize::try_from(len_bytes).unwrap_or(usize::MAX);
                if self.fault_fires(FaultKind::WriteEnospc, &path, offset, len) {
                    let error = IoError::new("fallocate", &path, offset, errno(libc::ENOSPC));
                    return Completion {
                        op_id,
                        result: Err(error),
                        buf: None,
                    };
                }
                Completion {
                    op_id,
                    result: Ok(0),
                    buf: None,
                }
            }
            Op::Fdatasync { .. } => {
                if self.fault_fires(FaultKind::FsyncEio, &path, 0, 0) {
                    // Linux marks the dirty pages clean after a failed writeback ("fsyncgate"): a
                    // retried fdatasync succeeds without making them durable. Model exactly that,
                    // so only a caller that treats fsync EIO as fatal passes the crash tests.
                    self.fs
                        .file_mut(inode)
                        .expect("open files are file inodes")
                        .forget_dirty_writes();
                    let error = IoError::new("fdatasync", &path, 0, errno(libc::EIO));
                    return Completion {
                        op_id,
                        result: Err(error),
                        buf: None,
                    };
                }
                self.fs
                    .file_mut(inode)
                    .expect("open files are file inodes")
                    .sync();
                Completion {
                    op_id,
                    result: Ok(0),
                    buf: None,
                }
            }
        }
    }

    /// Run one submission: a single operation or a linked chain, which stops at the first failure
    /// and cancels the rest (io_uring's IOSQE_IO_LINK semantics).
    fn run_unit(&mut self, unit: Vec<(OpId, Op)>) {
        let mut failed = false;
        for (op_id, op) in unit {
            let completion = if failed {
                let path = self
                    .open_file(op.file(), "")
                    .map(|f| f.path.clone())
                    .unwrap_or_else(|_| UNKNOWN_FILE_PATH.into());
                failed_completion(op_id, op, &path, errno(libc::ECANCELED))
            } else {
                let expected = op.len_bytes();
                let is_data = !matches!(op, Op::Fdatasync { .. });
                let completion = self.execute(op_id, op);
                // A short transfer breaks a chain, as in io_uring.
                failed = match &completion.result {
                    Err(_) => true,
                    Ok(n) => is_data && *n != expected,
                };
                completion
            };
            self.ready.push_back(completion);
        }
    }

    fn check_path(&self, operation: &'static str, path: &Path) -> Result<Vec<String>, IoError> {
        let names = components(path);
        if names.is_empty()
            && operation != "sync_dir"
            && operation != "list_dir"
            && operation != "create_dir_all"
        {
            return Err(IoError::new(operation, path, 0, errno(libc::EINVAL)));
        }
        Ok(names)
    }
}

impl Io for MemoryIo {
    fn block_size_bytes(&self) -> usize {
        self.config.block_size_bytes
    }

    fn open(&mut self, path: &Path, options: OpenOptions) -> Result<FileId, IoError> {
        let err = |code| IoError::new("open", path, 0, errno(code));
        let names = self.check_path("open", path)?;
        let create = options.create || options.create_new;
        if create && options.read_only {
            // std::fs refuses create without write access; keep every backend the same.
            return Err(err(libc::EINVAL));
        }
        let (parent, name) = self
            .fs
            .parent_of(&names)
            .map_err(|e| IoError::new("open", path, 0, e))?;
        let inode = match self.fs.lookup(&names, false) {
            Some(_) if options.create_new => return Err(err(libc::EEXIST)),
            Some(inode) if self.fs.is_dir(inode) => return Err(err(libc::EISDIR)),
            Some(inode) => inode,
            None if create => self.fs.new_file(parent, name),
            None => return Err(err(libc::ENOENT)),
        };
        let id = FileId(self.next_file_id);
        self.next_file_id += 1;
        let open = OpenFile {
            inode,
            path: normalize(path),
            direct: options.direct,
            read_only: options.read_only,
        };
        self.files.insert(id, open);
        Ok(id)
    }

    fn close(&mut self, file: FileId) -> Result<(), IoError> {
        let queued_on_file = self
            .queued
            .iter()
            .flatten()
            .filter(|(_, op)| op.file() == file)
            .count();
        assert_eq!(
            queued_on_file, 0,
            "close({file:?}) with {queued_on_file} operations still in flight"
        );
        self.files.remove(&file).map(|_| ()).ok_or_else(|| {
            IoError::new("close", Path::new(UNKNOWN_FILE_PATH), 0, errno(libc::EBADF))
        })
    }

    fn file_size_bytes(&mut self, file: FileId) -> Result<u64, IoError> {
        let open = self.open_file(file, "file_size")?;
        let Some(data) = self.fs.file(open.inode) else {
            return Err(IoError::new(
                "file_size",
                &open.path,
                0,
                errno(libc::EISDIR),
            ));
        };
        Ok(data.visible.len() as u64)
    }

    fn set_len(&mut self, file: FileId, len_bytes: u64) -> Result<(), IoError> {
        let open = self.open_file(file, "set_len")?;
        let (inode, path) = (open.inode, open.path.clone());
        if open.read_only {
            return Err(IoError::new(
                "set_len",
                &path,
                len_bytes,
                errno(libc::EINVAL),
            ));
        }
        if len_bytes > MEMORY_FILE_SIZE_BYTES_MAX {
            return Err(IoError::new(
                "set_len",
                &path,
                len_bytes,
                errno(libc::EFBIG),
            ));
        }
        self.fs
            .file_mut(inode)
            .expect("file inode")
            .set_len_visible(len_bytes as usize);
        Ok(())
    }

    fn preallocate(&mut self, file: FileId, len_bytes: u64) -> Result<(), IoError> {
        let open = self.open_file(file, "preallocate")?;
        if open.read_only {
            return Err(IoError::new(
                "preallocate",
                &open.path.clone(),
                len_bytes,
                errno(libc::EBADF),
            ));
        }
        if len_bytes > MEMORY_FILE_SIZE_BYTES_MAX {
            return Err(IoError::new(
                "preallocate",
                &open.path.clone(),
                len_bytes,
                errno(libc::EFBIG),
            ));
        }
        // The simulated medium never runs out of space unless a fault says so (a `WriteEnospc`
        // trigger or probability covers reservations too: a full disk refuses both); the size
        // stays.
        let path = open.path.clone();
        if self.fault_fires(FaultKind::WriteEnospc, &path, 0, len_bytes as usize) {
            return Err(IoError::new(
                "preallocate",
                &path,
                len_bytes,
                errno(libc::ENOSPC),
            ));
        }
        Ok(())
    }

    fn create_dir_all(&mut self, path: &Path) -> Result<(), IoError> {
        let names = self.check_path("create_dir_all", path)?;
        self.fs
            .create_dir_all(&names)
            .map_err(|e| IoError::new("create_dir_all", path, 0, e))
    }

    fn list_dir(&mut self, path: &Path) -> Result<Vec<String>, IoError> {
        let names = self.check_path("list_dir", path)?;
        self.fs
            .list_dir(&names)
            .map_err(|e| IoError::new("list_dir", path, 0, e))
    }

    fn exists(&mut self, path: &Path) -> bool {
        self.fs.lookup(&components(path), false).is_some()
    }

    fn rename(&mut self, from: &Path, to: &Path) -> Result<(), IoError> {
        let from_names = self.check_path("rename", from)?;
        let to_names = self.check_path("rename", to)?;
        self.fs
            .rename(&from_names, &to_names)
            .map_err(|e| IoError::new("rename", from, 0, e))
    }

    fn remove_file(&mut self, path: &Path) -> Result<(), IoError> {
        let names = self.check_path("remove_file", path)?;
        self.fs
            .remove_file(&names)
            .map_err(|e| IoError::new("remove_file", path, 0, e))
    }

    fn sync_dir(&mut self, path: &Path) -> Result<(), IoError> {
        let names = self.check_path("sync_dir", path)?;
        self.fs
            .sync_dir(&names)
            .map_err(|e| IoError::new("sync_dir", path, 0, e))
    }

    fn open_dir(&mut self, path: &Path) -> Result<FileId, IoError> {
        let names = self.check_path("sync_dir", path)?;
        let inode = self
            .fs
            .lookup(&names, false)
            .ok_or_else(|| IoError::new("open_dir", path, 0, errno(libc::ENOENT)))?;
        if !self.fs.is_dir(inode) {
            return Err(IoError::new("open_dir", path, 0, errno(libc::ENOTDIR)));
        }
        let id = FileId(self.next_file_id);
        self.next_file_id += 1;
        let open = OpenFile {
            inode,
            path: normalize(path),
            direct: false,
            read_only: true,
        };
        self.files.insert(id, open);
        Ok(id)
    }

    fn raw_fd(&self, _file: FileId) -> Option<std::os::fd::RawFd> {
        None
    }

    fn submit(&mut self, op: Op) -> OpId {
        let op_id = self.allocate_op_id();
        self.queued.push_back(vec![(op_id, op)]);
        op_id
    }

    fn submit_linked(&mut self, ops: Vec<Op>) -> Vec<OpId> {
        let unit: Vec<(OpId, Op)> = ops
            .into_iter()
            .map(|op| (self.allocate_op_id(), op))
            .collect();
        let ids = unit.iter().map(|(id, _)| *id).collect();
        if !unit.is_empty() {
            self.queued.push_back(unit);
        }
        ids
    }

    fn submit_and_wait(&mut self, min_completions: usize) -> Result<(), IoError> {
        let target = min_completions.min(self.in_flight());
        let mut units: Vec<Vec<(OpId, Op)>> = self.queued.drain(..).collect();
        if self.config.faults.reorder_completions {
            // Fisher-Yates with the seeded PRNG: a chain moves as one piece, never split.
            for i in (1..units.len()).rev() {
                let j = self.rng.below(i as u64 + 1) as usize;
                units.swap(i, j);
            }
        }
        let mut held_back = VecDeque::new();
        for unit in units {
            let minimum_met = self.ready.len() >= target;
            let hold = !held_back.is_empty() && !self.config.faults.reorder_completions
                || minimum_met && self.rng.chance(self.config.faults.delay_probability);
            if hold {
                // Without reordering, holding one back holds every later one too (FIFO stays FIFO).
                held_back.push_back(unit);
            } else {
                self.run_unit(unit);
            }
        }
        self.queued = held_back;
        debug_assert!(self.ready.len() >= target);
        Ok(())
    }

    fn drain_completions(&mut self, out: &mut Vec<Completion>) {
        out.extend(self.ready.drain(..));
    }

    fn take_completions(&mut self, ids: &[OpId], out: &mut Vec<Completion>) {
        crate::io::take_from_ready(&mut self.ready, ids, out);
    }

    fn ready_count(&mut self) -> usize {
        self.ready.len()
    }

    fn in_flight(&self) -> usize {
        self.ready.len() + self.queued.iter().map(Vec::len).sum::<usize>()
    }
}
