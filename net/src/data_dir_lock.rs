//! One process per data folder. A node (and `ringlog unclean-recover`) holds an exclusive
//! `flock(2)` on `<metadata.log.dir>/.lock` from before it opens any log until it exits, as
//! Kafka's brokers lock each log folder. A second process on the same folder would recover the
//! logs under the first (cutting a tail it is writing, removing a `.part` snapshot it is
//! filling) and then write the same files: it is refused before it touches anything.
//!
//! The kernel drops the lock when the process ends, kill -9 included, so a restart never finds
//! a stale one. The file holds the holder's pid, for the refusal's message only.

use std::io::Write;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

pub const FILE_NAME: &str = ".lock";

#[derive(Debug, thiserror::Error)]
pub enum DataDirLockError {
    #[error(
        "{dir} is in use by another process{holder}: a node or unclean-recover already runs on \
         this folder; stop it first",
        dir = .dir.display()
    )]
    InUse { dir: PathBuf, holder: String },
    #[error("{path}: {source}", path = .path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// The held lock; dropping it (or the process ending) releases it.
#[derive(Debug)]
pub struct DataDirLock {
    /// `None` where the lock could not be taken and the node runs unguarded.
    _file: Option<std::fs::File>,
}

impl DataDirLock {
    /// [`DataDirLock::acquire`], retried for up to `wait` while another process holds the lock:
    /// a node started right after `kill -9` of its predecessor may find it still exiting (the
    /// signal is delivered, the process not yet gone), as its listener waits for the address.
    /// A live holder is still refused, after the wait.
    pub fn acquire_waiting(
        dir: &Path,
        wait: std::time::Duration,
    ) -> Result<DataDirLock, DataDirLockError> {
        crate::server::retry_while_held(
            wait,
            || DataDirLock::acquire(dir),
            |error| matches!(error, DataDirLockError::InUse { .. }),
            |error| {
                tracing::warn!(dir = %dir.display(), %error, "waiting up to {} ms for the holder to exit", wait.as_millis());
            },
        )
    }

    /// Takes the lock of `dir` (which must exist), or says who holds it.
    pub fn acquire(dir: &Path) -> Result<DataDirLock, DataDirLockError> {
        let path = dir.join(FILE_NAME);
        let io_error = |source| DataDirLockError::Io {
            path: path.clone(),
            source,
        };
        let opened = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path);
        let mut file = match opened {
            Ok(file) => file,
            // The first start after an upgrade creates the file: on a full disk that may fail,
            // and a full disk must not keep the node from starting (it serves reads, and
            // writes wait for space: docs/node.md "Storage faults").
            Err(error) if error.raw_os_error() == Some(libc::ENOSPC) => {
                return Ok(DataDirLock::unguarded(&path, &error));
            }
            Err(error) => return Err(io_error(error)),
        };
        // SAFETY: flock on a descriptor this function owns; LOCK_NB never blocks.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            let error = std::io::Error::last_os_error();
            if error.raw_os_error() == Some(libc::EWOULDBLOCK) {
                let holder = std::fs::read_to_string(&path)
                    .ok()
                    .and_then(|text| text.trim().parse::<u32>().ok())
                    .map(|pid| format!(" (pid {pid})"))
                    .unwrap_or_default();
                return Err(DataDirLockError::InUse {
                    dir: dir.to_path_buf(),
                    holder,
                });
            }
            // A filesystem without locks (an NFS mount without its lock service, some FUSE
            // filesystems): the node still runs there, unguarded, as it did before the lock.
            if matches!(
                error.raw_os_error(),
                Some(libc::ENOLCK | libc::EOPNOTSUPP | libc::ENOSYS | libc::EINVAL)
            ) {
                return Ok(DataDirLock::unguarded(&path, &error));
            }
            return Err(io_error(error));
        }
        // Best effort and not synced: the pid only names the holder in another process's
        // refusal, and a full disk must not keep the node from starting.
        if file.set_len(0).is_ok() {
            let _ = write!(file, "{}", std::process::id());
        }
        Ok(DataDirLock { _file: Some(file) })
    }

    /// No lock, said once: the node runs as it did before there was one.
    fn unguarded(path: &Path, error: &std::io::Error) -> DataDirLock {
        tracing::warn!(path = %path.display(), %error, "the data folder cannot be locked here; nothing stops a second process on it");
        DataDirLock { _file: None }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A second lock of the same folder is refused, naming this process, while the first is
    /// held, and granted once it is dropped. (flock locks belong to the open file description,
    /// so two opens in one process conflict as two processes do.)
    #[test]
    fn a_held_folder_is_refused_until_released() {
        let dir = tempfile::tempdir().unwrap();
        let first = DataDirLock::acquire(dir.path()).unwrap();
        match DataDirLock::acquire(dir.path()) {
            Err(DataDirLockError::InUse { holder, .. }) => {
                assert_eq!(holder, format!(" (pid {})", std::process::id()));
            }
            other => panic!("expected InUse, got {other:?}"),
        }
        drop(first);
        DataDirLock::acquire(dir.path()).unwrap();
    }

    /// A holder that keeps the lock through the wait is refused after it; once it is gone the
    /// waiting acquire takes the lock.
    #[test]
    fn a_holder_that_stays_is_refused_after_the_wait() {
        let dir = tempfile::tempdir().unwrap();
        let first = DataDirLock::acquire(dir.path()).unwrap();
        let wait = std::time::Duration::from_millis(200);
        assert!(matches!(
            DataDirLock::acquire_waiting(dir.path(), wait),
            Err(DataDirLockError::InUse { .. })
        ));
        drop(first);
        DataDirLock::acquire_waiting(dir.path(), wait).unwrap();
    }

    /// A folder where not even the lock file can be created (no inode left: the first start
    /// after an upgrade on a full disk) still starts, unguarded. Mounts a tmpfs of two inodes,
    /// so it runs as root, as tests/disk_full.rs does; a failed mount fails the test.
    #[test]
    fn a_full_disk_does_not_keep_the_node_from_starting() {
        let parent = tempfile::tempdir().unwrap();
        let mount = parent.path().join("disk");
        std::fs::create_dir(&mount).unwrap();
        let output = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=1m,nr_inodes=2", "tmpfs"])
            .arg(&mount)
            .output()
            .expect("running mount(8)");
        assert!(
            output.status.success(),
            "this test mounts a tmpfs and must run as root: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        struct Unmount<'a>(&'a Path);
        impl Drop for Unmount<'_> {
            fn drop(&mut self) {
                let _ = std::process::Command::new("umount")
                    .arg("-l")
                    .arg(self.0)
                    .status();
            }
        }
        let _unmount = Unmount(&mount);
        // The root takes one inode, the filler the other.
        std::fs::write(mount.join("filler"), b"x").unwrap();
        let error = std::fs::write(mount.join("probe"), b"x").unwrap_err();
        assert_eq!(error.raw_os_error(), Some(libc::ENOSPC), "{error}");
        let lock = DataDirLock::acquire(&mount).unwrap();
        assert!(lock._file.is_none());
    }

    #[test]
    fn a_missing_folder_is_an_io_error() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("absent");
        assert!(matches!(
            DataDirLock::acquire(&missing),
            Err(DataDirLockError::Io { .. })
        ));
    }
}
