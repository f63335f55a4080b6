//! Releasing removed and replaced files' blocks off the caller's thread.
//!
//! Unlinking a file frees its blocks when its inode goes, and on a filesystem that discards
//! freed blocks as it frees them (ext4 mounted with `discard`, as this project's test machines
//! are) the caller waits for the device's discard: `rm` of a written 1 GiB file took 195 ms
//! there, against 7 ms for one whose blocks were only reserved (2026-12-06). A segment deleted
//! behind the log start or by retention was such a file, removed on the event loop.
//!
//! [`remove_file_release_later`] opens the file first (an `O_PATH` descriptor, which holds its
//! inode and reads nothing), removes the name, and hands the descriptor to one background
//! thread that closes it [`RELEASE_DELAY`] later: the name is gone when the call returns, as
//! with a plain unlink (so a crash or a restart sees exactly what it would have seen), and the
//! inode goes with that close, on that thread. The delay outlasts the readers of the file the
//! caller still drops after the call (a deleted segment's own reader, a reply being sent from
//! it): whoever closes the last descriptor frees the blocks. [`rename_release_later`] does the
//! same for the file a rename replaces.

use std::collections::VecDeque;
use std::fs::File;
use std::path::Path;
use std::sync::Mutex;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::time::{Duration, Instant};

use super::IoError;

/// How long a removed file's descriptor is held before it is closed.
pub(crate) const RELEASE_DELAY: Duration = Duration::from_secs(2);

/// The releasing thread's queue, started at the first removal.
static RELEASER: Mutex<Option<Sender<(Instant, File)>>> = Mutex::new(None);

/// Removes `path` now and releases its blocks on the releasing thread (see the module doc). If
/// the file cannot be opened first (it is gone, or not ours to open), this is a plain unlink.
pub(crate) fn remove_file_release_later(path: &Path) -> Result<(), IoError> {
    releasing(path, || {
        std::fs::remove_file(path).map_err(|e| IoError::new("remove_file", path, 0, e))
    })
}

/// Renames `from` to `to` as `rename(2)` does; a file `to` named before is released on the
/// releasing thread instead of by the rename (the quorum-state file and the
/// leader-epoch-checkpoint are replaced so at every new epoch, many partitions in one turn
/// after a failover).
pub(crate) fn rename_release_later(from: &Path, to: &Path) -> Result<(), IoError> {
    releasing(to, || {
        std::fs::rename(from, to).map_err(|e| IoError::new("rename", from, 0, e))
    })
}

/// Runs `unlink`, which removes the name `path` (a removal, a rename over it), holding the
/// file it named; once the name is gone the releasing thread gets the file. A failed `unlink`
/// drops the hold here, which releases nothing: the name still holds the file.
fn releasing(path: &Path, unlink: impl FnOnce() -> Result<(), IoError>) -> Result<(), IoError> {
    let held = hold(path);
    unlink()?;
    if let Some(file) = held {
        hand_over(file);
    }
    Ok(())
}

/// An `O_PATH` descriptor of the file at `path` (it holds the inode, reads nothing), if there
/// is one.
fn hold(path: &Path) -> Option<File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH | libc::O_NOFOLLOW)
        .open(path)
        .ok()
}

/// Queues `file` to be closed on the releasing thread after [`RELEASE_DELAY`]; closes it here
/// if the thread cannot be started.
fn hand_over(file: File) {
    let mut releaser = RELEASER
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let mut item = (Instant::now() + RELEASE_DELAY, file);
    if let Some(tx) = releaser.as_ref() {
        match tx.send(item) {
            Ok(()) => return,
            Err(returned) => item = returned.0,
        }
    }
    let (tx, rx) = channel();
    let started = std::thread::Builder::new()
        .name("file-release".into())
        .spawn(move || release(rx));
    if started.is_ok() && tx.send(item).is_ok() {
        *releaser = Some(tx);
    }
    // Otherwise `item` was dropped above or in `send`'s error: closed here, as an unlink would.
}

/// The releasing thread: closes each descriptor once its time has come, oldest first.
fn release(rx: Receiver<(Instant, File)>) {
    let mut held: VecDeque<(Instant, File)> = VecDeque::new();
    loop {
        let now = Instant::now();
        while held.front().is_some_and(|(due, _)| *due <= now) {
            held.pop_front();
        }
        let received = match held.front() {
            Some((due, _)) => rx.recv_timeout(due.saturating_duration_since(now)),
            None => rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
        };
        match received {
            Ok(item) => held.push_back(item),
            Err(RecvTimeoutError::Timeout) => {}
            // Every sender is gone (never, while the static holds one): release the rest.
            Err(RecvTimeoutError::Disconnected) => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    /// Whether a descriptor of this process holds the removed file once named `path`
    /// (`/proc/self/fd` names it `<path> (deleted)`).
    fn held_removed(path: &Path) -> bool {
        let removed = format!("{} (deleted)", path.display());
        std::fs::read_dir("/proc/self/fd")
            .unwrap()
            .flatten()
            .any(|fd| std::fs::read_link(fd.path()).is_ok_and(|t| t.to_string_lossy() == removed))
    }

    /// The name is gone at once; the inode lives on (its blocks still allocated) until the
    /// releasing thread closes the held descriptor, which frees them. (`/proc/self/fd` names a
    /// descriptor of a removed file `<path> (deleted)`.)
    #[test]
    fn a_removed_file_s_name_goes_at_once_and_its_blocks_later() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("segment.log");
        std::fs::write(&path, vec![7u8; 1 << 20]).unwrap();
        // A second descriptor, as a reader the caller still holds would be: the inode's link
        // count drops to 0 at the unlink while the held descriptors keep it.
        let reader = File::open(&path).unwrap();
        remove_file_release_later(&path).unwrap();
        assert_eq!(reader.metadata().unwrap().nlink(), 0);
        drop(reader);
        // The releasing thread's descriptor still holds the inode, then closes it.
        assert!(held_removed(&path), "a descriptor holds the removed file");
        assert!(
            !path.exists(),
            "the name is removed before the call returns"
        );
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        let deadline = Instant::now() + RELEASE_DELAY + Duration::from_secs(5);
        while held_removed(&path) {
            assert!(
                Instant::now() < deadline,
                "the removed file was never released"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        // A file replaced by a rename is released the same way.
        let old = dir.path().join("quorum-state");
        let new = dir.path().join("quorum-state.tmp");
        std::fs::write(&old, b"old").unwrap();
        std::fs::write(&new, b"new").unwrap();
        rename_release_later(&new, &old).unwrap();
        assert!(held_removed(&old), "a descriptor holds the replaced file");
        assert_eq!(std::fs::read(&old).unwrap(), b"new");
        assert!(!new.exists());
        // A rename with nothing to replace, and one that fails, hold nothing.
        rename_release_later(&old, &new).unwrap();
        assert!(rename_release_later(&old, &new).is_err());
        // A name that is not there is an error, as for a plain unlink.
        assert!(remove_file_release_later(&dir.path().join("gone")).is_err());
    }
}
