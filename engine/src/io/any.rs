//! Choosing the backend at start-up: io_uring where the host allows it, plain syscalls otherwise.
//!
//! Rule: try io_uring (ring setup plus a NOP that must complete). If that fails (EPERM or ENOSYS
//! under a container's default seccomp profile, an old kernel, `io_uring_disabled` set), log one
//! warning and use the syscall backend. `RINGLOG_IO=syscall|uring|auto` overrides the rule
//! (`uring` refuses to fall back, so a test that means to exercise io_uring cannot silently not).
//!
//! [`AnyIo`] is an enum rather than a `Box<dyn Io>` so the hot path is a predictable match, not an
//! indirect call.

use std::path::Path;

use super::syscall::SyscallIo;
use super::uring::UringIo;
use super::{AlignedBuf, Completion, FileId, FileReader, Io, IoError, Op, OpId, OpenOptions};

/// The environment variable that overrides the backend choice.
pub const IO_BACKEND_ENV: &str = "RINGLOG_IO";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackendChoice {
    /// io_uring if it works here, else syscalls.
    Auto,
    Uring,
    Syscall,
}

impl std::str::FromStr for BackendChoice {
    type Err = BackendChoiceError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text.trim().to_ascii_lowercase().as_str() {
            "" | "auto" => Ok(BackendChoice::Auto),
            "uring" | "io_uring" => Ok(BackendChoice::Uring),
            "syscall" => Ok(BackendChoice::Syscall),
            _ => Err(BackendChoiceError::UnknownChoice(text.to_string())),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum BackendChoiceError {
    #[error("{IO_BACKEND_ENV}={0:?} is not one of: syscall, uring, auto")]
    UnknownChoice(String),
    #[error("io_uring was required but its setup failed: {0}")]
    UringUnavailable(#[source] std::io::Error),
}

/// One of the two real backends.
#[allow(
    clippy::large_enum_variant,
    reason = "one per process; a Box would put an indirection back on every call"
)]
pub enum AnyIo {
    Uring(UringIo),
    Syscall(SyscallIo),
}

impl AnyIo {
    /// Open the backend `choice` asks for; `data_dir` (if given) is where block size is discovered.
    pub fn open(
        choice: BackendChoice,
        data_dir: Option<&Path>,
    ) -> Result<AnyIo, BackendChoiceError> {
        let uring = || match data_dir {
            Some(dir) => UringIo::for_dir(dir),
            None => UringIo::new(),
        };
        let syscall = || match data_dir {
            Some(dir) => SyscallIo::for_dir(dir),
            None => SyscallIo::new(),
        };
        match choice {
            BackendChoice::Syscall => Ok(AnyIo::Syscall(syscall())),
            BackendChoice::Uring => uring()
                .map(AnyIo::Uring)
                .map_err(BackendChoiceError::UringUnavailable),
            BackendChoice::Auto => match uring() {
                Ok(io) => Ok(AnyIo::Uring(io)),
                Err(e) => {
                    tracing::warn!(error = %e, "io_uring unavailable; using the plain-syscall I/O backend");
                    Ok(AnyIo::Syscall(syscall()))
                }
            },
        }
    }

    /// Open the backend named by `RINGLOG_IO` (unset: auto).
    pub fn from_env(data_dir: Option<&Path>) -> Result<AnyIo, BackendChoiceError> {
        let choice = match std::env::var(IO_BACKEND_ENV) {
            Ok(text) => text.parse()?,
            Err(std::env::VarError::NotPresent) => BackendChoice::Auto,
            Err(std::env::VarError::NotUnicode(text)) => {
                return Err(BackendChoiceError::UnknownChoice(
                    text.to_string_lossy().into_owned(),
                ));
            }
        };
        AnyIo::open(choice, data_dir)
    }

    /// "uring" or "syscall", for logs and `describe` output.
    pub fn backend_name(&self) -> &'static str {
        match self {
            AnyIo::Uring(_) => "uring",
            AnyIo::Syscall(_) => "syscall",
        }
    }
}

/// The backend for this host, honouring `RINGLOG_IO`, with 4096-byte alignment.
pub fn open_default_io() -> Result<AnyIo, BackendChoiceError> {
    AnyIo::from_env(None)
}

macro_rules! delegate {
    ($self:ident, $io:ident => $call:expr) => {
        match $self {
            AnyIo::Uring($io) => $call,
            AnyIo::Syscall($io) => $call,
        }
    };
}

impl Io for AnyIo {
    fn block_size_bytes(&self) -> usize {
        delegate!(self, io => io.block_size_bytes())
    }
    fn open(&mut self, path: &Path, options: OpenOptions) -> Result<FileId, IoError> {
        delegate!(self, io => io.open(path, options))
    }
    fn close(&mut self, file: FileId) -> Result<(), IoError> {
        delegate!(self, io => io.close(file))
    }
    fn file_size_bytes(&mut self, file: FileId) -> Result<u64, IoError> {
        delegate!(self, io => io.file_size_bytes(file))
    }
    fn set_len(&mut self, file: FileId, len_bytes: u64) -> Result<(), IoError> {
        delegate!(self, io => io.set_len(file, len_bytes))
    }
    fn preallocate(&mut self, file: FileId, len_bytes: u64) -> Result<(), IoError> {
        delegate!(self, io => io.preallocate(file, len_bytes))
    }
    fn create_dir_all(&mut self, path: &Path) -> Result<(), IoError> {
        delegate!(self, io => io.create_dir_all(path))
    }
    fn list_dir(&mut self, path: &Path) -> Result<Vec<String>, IoError> {
        delegate!(self, io => io.list_dir(path))
    }
    fn exists(&mut self, path: &Path) -> bool {
        delegate!(self, io => io.exists(path))
    }
    fn rename(&mut self, from: &Path, to: &Path) -> Result<(), IoError> {
        delegate!(self, io => io.rename(from, to))
    }
    fn remove_file(&mut self, path: &Path) -> Result<(), IoError> {
        delegate!(self, io => io.remove_file(path))
    }
    fn remove_file_release_later(&mut self, path: &Path) -> Result<(), IoError> {
        delegate!(self, io => io.remove_file_release_later(path))
    }
    fn sync_dir(&mut self, path: &Path) -> Result<(), IoError> {
        delegate!(self, io => io.sync_dir(path))
    }
    fn open_dir(&mut self, path: &Path) -> Result<FileId, IoError> {
        delegate!(self, io => io.open_dir(path))
    }
    fn read_buffered_at(
        &mut self,
        path: &Path,
        position: u64,
        len_bytes: usize,
    ) -> Result<Vec<u8>, IoError> {
        delegate!(self, io => io.read_buffered_at(path, position, len_bytes))
    }
    fn open_reader(&mut self, path: &Path) -> Result<Option<FileReader>, IoError> {
        delegate!(self, io => io.open_reader(path))
    }
    fn raw_fd(&self, file: FileId) -> Option<std::os::fd::RawFd> {
        delegate!(self, io => io.raw_fd(file))
    }
    fn readiness_fd(&self) -> Option<std::os::fd::RawFd> {
        delegate!(self, io => io.readiness_fd())
    }
    fn clear_readiness(&mut self) {
        delegate!(self, io => io.clear_readiness())
    }
    fn write_buffered_at(
        &mut self,
        path: &Path,
        position: u64,
        data: &[u8],
    ) -> Result<(), IoError> {
        delegate!(self, io => io.write_buffered_at(path, position, data))
    }
    fn recycle_read_buf(&mut self, buf: AlignedBuf) {
        delegate!(self, io => io.recycle_read_buf(buf))
    }
    fn submit(&mut self, op: Op) -> OpId {
        delegate!(self, io => io.submit(op))
    }
    fn submit_linked(&mut self, ops: Vec<Op>) -> Vec<OpId> {
        delegate!(self, io => io.submit_linked(ops))
    }
    fn submit_and_wait(&mut self, min_completions: usize) -> Result<(), IoError> {
        delegate!(self, io => io.submit_and_wait(min_completions))
    }
    fn drain_completions(&mut self, out: &mut Vec<Completion>) {
        delegate!(self, io => io.drain_completions(out))
    }
    fn take_completions(&mut self, ids: &[OpId], out: &mut Vec<Completion>) {
        delegate!(self, io => io.take_completions(ids, out))
    }
    fn ready_count(&mut self) -> usize {
        delegate!(self, io => io.ready_count())
    }
    fn in_flight(&self) -> usize {
        delegate!(self, io => io.in_flight())
    }
}
