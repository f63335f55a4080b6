//! Real-file plumbing shared by the syscall and io_uring backends: the open-file table, metadata
//! calls (rare and off the hot path, so plain synchronous syscalls in both), and block-size discovery.

use std::collections::HashMap;
use std::ffi::CString;
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use super::common::{UNKNOWN_FILE_PATH, errno};
use super::{FileId, IoError, OpenOptions};

/// The smallest alignment we ever use for O_DIRECT: 4096 is safe on every common device, even
/// where the logical block size is 512 (aligning more than needed only costs a little padding).
pub const BLOCK_SIZE_BYTES_MIN: usize = 4096;

/// The largest alignment we accept from discovery; anything larger is a misreport.
const BLOCK_SIZE_BYTES_MAX: usize = 64 * 1024;

pub(crate) struct PosixFile {
    pub file: std::fs::File,
    pub path: PathBuf,
    /// The caller asked for O_DIRECT: the alignment rule applies even after a buffered fallback.
    pub direct: bool,
    pub read_only: bool,
    /// Opened with `open_dir`: its fdatasync is a full fsync (a directory's entries).
    pub directory: bool,
    /// Data operations submitted and not yet completed; `close` asserts it is zero, because closing
    /// the descriptor while the kernel still uses it could make it hit a reused descriptor.
    pub in_flight: usize,
    /// The io_uring backend's group sync: the file's device if its fdatasyncs may be grouped,
    /// looked up at its first fdatasync (`None` until then).
    pub group_device: Option<Option<u64>>,
}

pub(crate) struct PosixFiles {
    files: HashMap<FileId, PosixFile>,
    next_file_id: u64,
    warned_direct_fallback: bool,
}

impl PosixFiles {
    pub fn new() -> Self {
        PosixFiles {
            files: HashMap::new(),
            next_file_id: 1,
            warned_direct_fallback: false,
        }
    }

    pub fn open(&mut self, path: &Path, options: OpenOptions) -> Result<FileId, IoError> {
        let create = options.create || options.create_new;
        if create && options.read_only {
            return Err(IoError::new("open", path, 0, errno(libc::EINVAL)));
        }
        let open_with = |direct: bool| {
            let mut o = std::fs::OpenOptions::new();
            o.read(true).write(!options.read_only);
            if options.create_new {
                o.create_new(true);
            } else if options.create {
                o.create(true);
            }
            o.custom_flags(if direct {
                libc::O_DIRECT | libc::O_CLOEXEC
            } else {
                libc::O_CLOEXEC
            });
            o.open(path)
        };
        let file = match open_with(options.direct) {
            Err(e) if options.direct && e.raw_os_error() == Some(libc::EINVAL) => {
                // tmpfs and some FUSE filesystems refuse O_DIRECT. Buffered I/O plus fdatasync keeps
                // the durability contract; only the page-cache bypass is lost. Say so once.
                if !self.warned_direct_fallback {
                    self.warned_direct_fallback = true;
                    tracing::warn!(path = %path.display(), "filesystem refuses O_DIRECT; using buffered I/O for direct files");
                }
                // A create_new that failed on O_DIRECT may still have created the file.
                let mut retry = options;
                if options.create_new && path.exists() {
                    retry.create_new = false;
                    retry.create = true;
                }
                let mut o = std::fs::OpenOptions::new();
                o.read(true).write(!options.read_only).custom_flags(libc::O_CLOEXEC);
                if retry.create_new {
                    o.create_new(true);
                } else if retry.create {
                    o.create(true);
                }
                o.open(path)
            }
            other => other,
        }
        .map_err(|e| IoError::new("open", path, 0, e))?;
        let id = FileId(self.next_file_id);
        self.next_file_id += 1;
        let entry = PosixFile {
            file,
            path: path.to_path_buf(),
            direct: options.direct,
            read_only: options.read_only,
            directory: false,
            in_flight: 0,
            group_device: None,
        };
        self.files.insert(id, entry);
        Ok(id)
    }

    pub fn open_dir(&mut self, path: &Path) -> Result<FileId, IoError> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECTORY | libc::O_CLOEXEC)
            .open(path)
            .map_err(|e| IoError::new("open_dir", path, 0, e))?;
        let id = FileId(self.next_file_id);
        self.next_file_id += 1;
        let entry = PosixFile {
            file,
            path: path.to_path_buf(),
            direct: false,
            read_only: true,
            directory: true,
            in_flight: 0,
            group_device: None,
        };
        self.files.insert(id, entry);
        Ok(id)
    }

    pub fn get(&self, file: FileId, operation: &'static str) -> Result<&PosixFile, IoError> {
        self.files.get(&file).ok_or_else(|| {
            IoError::new(
                operation,
                Path::new(UNKNOWN_FILE_PATH),
                0,
                errno(libc::EBADF),
            )
        })
    }

    pub fn get_mut(&mut self, file: FileId) -> Option<&mut PosixFile> {
        self.files.get_mut(&file)
    }

    pub fn close(&mut self, file: FileId) -> Result<(), IoError> {
        let entry = self.get(file, "close")?;
        assert_eq!(
            entry.in_flight,
            0,
            "close({}) with {} operations still in flight: the kernel may still use its descriptor",
            entry.path.display(),
            entry.in_flight
        );
        self.files.remove(&file);
        Ok(())
    }

    pub fn is_empty_of_in_flight(&self) -> bool {
        self.files.values().all(|f| f.in_flight == 0)
    }

    pub fn file_size_bytes(&self, file: FileId) -> Result<u64, IoError> {
        let entry = self.get(file, "file_size")?;
        entry
            .file
            .metadata()
            .map(|m| m.len())
            .map_err(|e| IoError::new("file_size", &entry.path, 0, e))
    }

    pub fn set_len(&self, file: FileId, len_bytes: u64) -> Result<(), IoError> {
        let entry = self.get(file, "set_len")?;
        if entry.read_only {
            return Err(IoError::new(
                "set_len",
                &entry.path,
                len_bytes,
                errno(libc::EINVAL),
            ));
        }
        entry
            .file
            .set_len(len_bytes)
            .map_err(|e| IoError::new("set_len", &entry.path, len_bytes, e))
    }

    pub fn preallocate(&self, file: FileId, len_bytes: u64) -> Result<(), IoError> {
        let entry = self.get(file, "preallocate")?;
        let err = |e| IoError::new("preallocate", &entry.path, len_bytes, e);
        if entry.read_only {
            return Err(err(errno(libc::EBADF)));
        }
        let len = libc::off_t::try_from(len_bytes).map_err(|_| err(errno(libc::EFBIG)))?;
        if len == 0 {
            return Ok(());
        }
        match fallocate_keep_size(&entry.file, 0, len_bytes) {
            Ok(()) => Ok(()),
            // Reservation is an optimisation; a filesystem without fallocate still works.
            Err(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) => Ok(()),
            Err(e) => Err(err(e)),
        }
    }
}

pub(crate) fn create_dir_all(path: &Path) -> Result<(), IoError> {
    std::fs::create_dir_all(path).map_err(|e| IoError::new("create_dir_all", path, 0, e))
}

pub(crate) fn list_dir(path: &Path) -> Result<Vec<String>, IoError> {
    let err = |e| IoError::new("list_dir", path, 0, e);
    let mut names = Vec::new();
    for entry in std::fs::read_dir(path).map_err(err)? {
        names.push(
            entry
                .map_err(err)?
                .file_name()
                .to_string_lossy()
                .into_owned(),
        );
    }
    names.sort();
    Ok(names)
}

pub(crate) fn exists(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok()
}

pub(crate) fn remove_file(path: &Path) -> Result<(), IoError> {
    std::fs::remove_file(path).map_err(|e| IoError::new("remove_file", path, 0, e))
}

pub(crate) fn sync_dir(path: &Path) -> Result<(), IoError> {
    let err = |e| IoError::new("sync_dir", path, 0, e);
    let dir = std::fs::File::open(path).map_err(err)?;
    dir.sync_all().map_err(err)
}

/// The O_DIRECT alignment for files under `path`: the largest of 4096, the filesystem's reported
/// DIO alignments (statx STATX_DIOALIGN, Linux 6.1+) and the backing device's logical block size
/// (/sys/dev/block/MAJ:MIN, or its parent for a partition). Anything unreadable is skipped.
pub fn discover_block_size_bytes(path: &Path) -> usize {
    let mut best = BLOCK_SIZE_BYTES_MIN;
    let mut consider = |value: u64| {
        if let Ok(v) = usize::try_from(value)
            && v.is_power_of_two()
            && v <= BLOCK_SIZE_BYTES_MAX
        {
            best = best.max(v);
        }
    };
    let Ok(c_path) = CString::new(path.as_os_str().as_bytes()) else {
        return best;
    };
    // SAFETY: `statx` is plain old data; all-zero is a valid value.
    let mut stx: libc::statx = unsafe { std::mem::zeroed() };
    // SAFETY: `c_path` is NUL-terminated and outlives the call; `stx` is a valid out-pointer.
    let rc = unsafe {
        libc::statx(
            libc::AT_FDCWD,
            c_path.as_ptr(),
            0,
            libc::STATX_BASIC_STATS | libc::STATX_DIOALIGN,
            &mut stx,
        )
    };
    if rc != 0 {
        return best;
    }
    if stx.stx_mask & libc::STATX_DIOALIGN != 0 {
        consider(u64::from(stx.stx_dio_offset_align));
        consider(u64::from(stx.stx_dio_mem_align));
    }
    let device = format!("/sys/dev/block/{}:{}", stx.stx_dev_major, stx.stx_dev_minor);
    for candidate in [
        format!("{device}/queue/logical_block_size"),
        format!("{device}/../queue/logical_block_size"),
    ] {
        if let Ok(text) = std::fs::read_to_string(&candidate)
            && let Ok(value) = text.trim().parse::<u64>()
        {
            consider(value);
            break;
        }
    }
    best
}

/// `Io::read_buffered_at` for the real backends: a plain positional read through a buffered
/// descriptor opened here for this one read (the page cache), never through the ring.
pub(crate) fn read_buffered_at(
    path: &Path,
    position: u64,
    len_bytes: usize,
) -> Result<Vec<u8>, IoError> {
    let file = std::fs::File::open(path)
        .map_err(|e| IoError::new("read_buffered_at", path, position, e))?;
    read_at(&file, path, position, len_bytes)
}

/// `Io::write_buffered_at` for the real backends: `pwrite` on a buffered descriptor of its own.
pub(crate) fn write_buffered_at(path: &Path, position: u64, data: &[u8]) -> Result<(), IoError> {
    use std::os::unix::fs::FileExt;
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(|e| IoError::new("write_buffered_at", path, position, e))?;
    file.write_all_at(data, position)
        .map_err(|e| IoError::new("write_buffered_at", path, position, e))
}

/// Up to `len_bytes` at `position` of `file` with `pread`, retried on EINTR and on short reads
/// until the end of the file. `path` names the file in an error.
pub(crate) fn read_at(
    file: &std::fs::File,
    path: &Path,
    position: u64,
    len_bytes: usize,
) -> Result<Vec<u8>, IoError> {
    use std::os::unix::fs::FileExt;
    let mut bytes = vec![0u8; len_bytes];
    let mut filled = 0;
    while filled < len_bytes {
        match file.read_at(&mut bytes[filled..], position + filled as u64) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(IoError::new("read_buffered_at", path, position, e)),
        }
    }
    bytes.truncate(filled);
    Ok(bytes)
}

/// `fallocate(FALLOC_FL_KEEP_SIZE)` of `[offset, offset + len_bytes)`, retried on EINTR: the
/// blocks are reserved, the size stays.
pub(crate) fn fallocate_keep_size(
    file: &std::fs::File,
    offset: u64,
    len_bytes: u64,
) -> std::io::Result<()> {
    let offset = libc::off_t::try_from(offset).map_err(|_| errno(libc::EFBIG))?;
    let len = libc::off_t::try_from(len_bytes).map_err(|_| errno(libc::EFBIG))?;
    loop {
        // SAFETY: the descriptor is owned by `file`, open for the whole call; fallocate touches
        // no user memory.
        let rc =
            unsafe { libc::fallocate(file.as_raw_fd(), libc::FALLOC_FL_KEEP_SIZE, offset, len) };
        if rc == 0 {
            return Ok(());
        }
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EINTR) {
            return Err(e);
        }
    }
}
