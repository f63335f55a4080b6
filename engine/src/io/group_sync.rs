//! Group sync: the fdatasyncs of several files submitted together, made durable by one
//! `syncfs(2)` of their filesystem and one device cache flush after it, on a thread of the
//! io_uring backend (docs/io.md, "Group sync").
//!
//! Linux has no fdatasync of several files in one call, and each partition of a node keeps its
//! own segment files, so with many partitions every flush paid its own fdatasync: on ext4
//! without a journal each one writes its file's inode and flushes the device cache, one io-wq
//! worker each. `syncfs` writes every dirty inode of the filesystem in one pass and flushes the
//! device once. On ext4 without a journal that flush is issued *before* `syncfs` waits for the
//! inode blocks it wrote (`sync_filesystem`: `sync_fs(sb, 1)` then `sync_blockdev`), so an
//! fdatasync of one of the files follows it: its own cache flush covers those blocks.
//!
//! A batch is only ever what the caller asked for: each op's completion means what an
//! fdatasync of its file would mean, since the sync started after the op was submitted (the
//! caller submits an fdatasync only after the writes it covers have completed).
//!
//! Only files on ext4 join a group (`group_device`, checked when the backend is handed the
//! fdatasync), and a group is files of one device; any other file's fdatasync goes to the
//! ring as before. Every file of a group whose `syncfs` or flush fails gets its own fdatasync,
//! so an error is reported for the file it belongs to and a fault stays in its partition.
//!
//! `syncfs` writes back *everything* dirty on the filesystem, other programs' buffered writes
//! included. The thread reads the kernel's dirty and writeback page counts (`/proc/meminfo`)
//! every 10 ms, between batches or after one; above `DIRTY_LIMIT_BYTES` the backend
//! sends the fdatasyncs to the ring one by one instead, so a commit never waits for someone
//! else's gigabytes. After a second without a batch the thread stops looking (no wake-ups on an
//! idle node) and the counts count as unknown: the next fdatasyncs go to the ring, and the
//! backend asks the thread to look again.

use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// `statfs` magic of the one filesystem whose fdatasyncs are grouped: ext4, where `syncfs`
/// writes back every dirty inode and an fdatasync of a clean file still flushes the device
/// cache, and where grouping measured faster (with and without a journal). XFS is left out:
/// its fdatasyncs already share log forces, and a group measured 0.93-0.95 of the records/s
/// there (docs/benchmarks.md, "Group sync").
const EXT4_SUPER_MAGIC: i64 = 0xEF53;

/// Above this much dirty or under-writeback page cache (the whole machine's), a `syncfs` could
/// wait for other programs' writes: fdatasyncs go to the ring one by one. A `syncfs` writes what
/// is dirty at ~1 GB/s here, so 8 MiB bounds what one batch can wait for someone else to ~8 ms
/// (with a build writing 25-45 MB of dirty pages beside it, a probe's `syncfs` p90 was 3 ms).
/// A node's own buffered writes (batch lists, quorum state) stay far below it.
pub const DIRTY_LIMIT_BYTES: u64 = 8 << 20;

/// How often the thread looks at the dirty page counts: between batches, and after a batch
/// when the last look is older (reading `/proc/meminfo` after every batch was ~1.3 % of a
/// voter's CPU with 100 partitions).
const DIRTY_CHECK_INTERVAL: Duration = Duration::from_millis(10);

/// Idle checks before the thread stops looking until it is asked again (one second).
const IDLE_CHECKS: u32 = 100;

/// One fdatasync waiting for a group: the backend's op id and the file's descriptor (open
/// until the op completes: `close` asserts nothing is in flight on it).
pub(super) type Request = (u64, RawFd);

/// What happened to one request: 0 or the errno of its fdatasync.
pub(super) type Outcome = (u64, i32);

#[derive(Default)]
struct Done {
    outcomes: Vec<Outcome>,
    batches_done: u64,
}

/// The backend's side: requests not yet sent, at most one batch on the thread.
pub(super) struct GroupSync {
    pending: Vec<Request>,
    busy: bool,
    batches_sent: u64,
    to_thread: Option<Sender<Vec<Request>>>,
    done: Arc<(Mutex<Done>, Condvar)>,
    /// Set by the thread: little enough is dirty for a `syncfs` to be cheap. False while the
    /// thread is not looking (idle).
    syncfs_cheap: Arc<AtomicBool>,
    /// An empty batch (a request to look at the counts again) is on its way to the thread.
    look_asked: Arc<AtomicBool>,
    /// Batches that `syncfs` made durable (each of two or more fdatasyncs), for tests and logs.
    grouped: Arc<AtomicU64>,
    thread: Option<JoinHandle<()>>,
}

impl GroupSync {
    /// `wake` is signalled (8 bytes written) after every batch, like the ring's readiness fd.
    pub(super) fn start(wake: OwnedFd, dirty_limit_bytes: u64) -> std::io::Result<Self> {
        let (to_thread, requests) = channel();
        let done = Arc::new((Mutex::new(Done::default()), Condvar::new()));
        let syncfs_cheap = Arc::new(AtomicBool::new(little_dirty(dirty_limit_bytes)));
        let look_asked = Arc::new(AtomicBool::new(false));
        let grouped = Arc::new(AtomicU64::new(0));
        let thread = {
            let shared = Shared {
                done: Arc::clone(&done),
                syncfs_cheap: Arc::clone(&syncfs_cheap),
                look_asked: Arc::clone(&look_asked),
                grouped: Arc::clone(&grouped),
                dirty_limit_bytes,
            };
            std::thread::Builder::new()
                .name("ringlog-sync".into())
                .spawn(move || run(requests, shared, wake))?
        };
        Ok(GroupSync {
            pending: Vec::new(),
            busy: false,
            batches_sent: 0,
            to_thread: Some(to_thread),
            done,
            syncfs_cheap,
            look_asked,
            grouped,
            thread: Some(thread),
        })
    }

    /// Batches made durable by one `syncfs` so far.
    pub(super) fn grouped_batches(&self) -> u64 {
        self.grouped.load(Ordering::Relaxed)
    }

    pub(super) fn add(&mut self, request: Request) {
        self.pending.push(request);
    }

    pub(super) fn busy(&self) -> bool {
        self.busy
    }

    /// Starts the next batch if none is on the thread. Hands the requests back for the ring
    /// instead when there is only one (an fdatasync alone gains nothing from a group) or when
    /// too much is dirty for a cheap `syncfs`.
    pub(super) fn kick(&mut self) -> Vec<Request> {
        if self.busy || self.pending.is_empty() {
            return Vec::new();
        }
        let cheap = self.syncfs_cheap.load(Ordering::Relaxed);
        if self.pending.len() == 1 || !cheap {
            if !cheap && !self.look_asked.swap(true, Ordering::Relaxed) {
                // Not looking (idle) or too much dirty: ask for a fresh look, once.
                self.send(Vec::new());
            }
            return std::mem::take(&mut self.pending);
        }
        let batch = std::mem::take(&mut self.pending);
        self.busy = true;
        self.batches_sent += 1;
        self.send(batch);
        Vec::new()
    }

    fn send(&self, batch: Vec<Request>) {
        self.to_thread
            .as_ref()
            .expect("the thread runs until drop")
            .send(batch)
            .expect("the sync thread outlives the backend's sender");
    }

    /// The outcomes of finished batches; the next batch may start.
    pub(super) fn collect(&mut self) -> Vec<Outcome> {
        let (lock, _) = &*self.done;
        let mut done = lock
            .lock()
            .expect("the sync thread never panics holding it");
        if done.batches_done == self.batches_sent {
            self.busy = false;
        }
        std::mem::take(&mut done.outcomes)
    }

    /// Blocks until the batch on the thread is done (for the backend's blocking waits).
    pub(super) fn wait_batch(&mut self) {
        let (lock, finished) = &*self.done;
        let mut done = lock
            .lock()
            .expect("the sync thread never panics holding it");
        while done.batches_done != self.batches_sent {
            done = finished
                .wait_timeout(done, Duration::from_millis(100))
                .expect("the sync thread never panics holding it")
                .0;
        }
    }
}

impl Drop for GroupSync {
    fn drop(&mut self) {
        // Closing the channel ends the thread after the batch it holds.
        self.to_thread.take();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The thread's ends of what it shares with the backend.
struct Shared {
    done: Arc<(Mutex<Done>, Condvar)>,
    syncfs_cheap: Arc<AtomicBool>,
    look_asked: Arc<AtomicBool>,
    grouped: Arc<AtomicU64>,
    dirty_limit_bytes: u64,
}

fn run(requests: Receiver<Vec<Request>>, shared: Shared, wake: OwnedFd) {
    let Shared {
        done,
        syncfs_cheap,
        look_asked,
        grouped,
        dirty_limit_bytes,
    } = shared;
    let mut idle_checks = 0;
    let mut looked_at = Instant::now();
    let look = || {
        syncfs_cheap.store(little_dirty(dirty_limit_bytes), Ordering::Relaxed);
        Instant::now()
    };
    loop {
        let received = if idle_checks < IDLE_CHECKS {
            requests.recv_timeout(DIRTY_CHECK_INTERVAL)
        } else {
            // Idle: stop looking, and say so, until the backend asks again.
            syncfs_cheap.store(false, Ordering::Relaxed);
            requests.recv().map_err(|_| RecvTimeoutError::Disconnected)
        };
        let batch = match received {
            Ok(batch) => batch,
            Err(RecvTimeoutError::Timeout) => {
                idle_checks += 1;
                looked_at = look();
                continue;
            }
            Err(RecvTimeoutError::Disconnected) => return,
        };
        idle_checks = 0;
        if batch.is_empty() {
            // A request to look again.
            look_asked.store(false, Ordering::Relaxed);
            looked_at = look();
            continue;
        }
        let (outcomes, synced) = sync_batch(&batch);
        if synced {
            grouped.fetch_add(1, Ordering::Relaxed);
        }
        if looked_at.elapsed() >= DIRTY_CHECK_INTERVAL {
            looked_at = look();
        }
        let (lock, finished) = &*done;
        {
            let mut done = lock.lock().expect("nothing panics holding it");
            done.outcomes.extend(outcomes);
            done.batches_done += 1;
        }
        finished.notify_all();
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a u64 on the stack to our own eventfd; a full counter
        // (EAGAIN) still leaves it readable, which is all the reader needs.
        unsafe {
            libc::write(
                wake.as_raw_fd(),
                (&one as *const u64).cast(),
                std::mem::size_of::<u64>(),
            );
        }
    }
}

/// Every request's outcome, and whether a `syncfs` made any of them durable: files of one
/// device by `syncfs` and one fdatasync after it, every file of a group that failed (or alone
/// on its device) by its own fdatasync.
pub(super) fn sync_batch(batch: &[Request]) -> (Vec<Outcome>, bool) {
    let mut outcomes = Vec::with_capacity(batch.len());
    let mut groups: Vec<(Option<u64>, Vec<Request>)> = Vec::new();
    for &(id, fd) in batch {
        // Checked when the request was made; a descriptor that cannot be looked at now
        // (closed: a bug elsewhere) gets its own fdatasync and its error.
        let device = group_device(fd);
        match groups
            .iter_mut()
            .find(|(d, _)| device.is_some() && *d == device)
        {
            Some((_, members)) => members.push((id, fd)),
            None => groups.push((device, vec![(id, fd)])),
        }
    }
    let mut any_synced = false;
    for (_, members) in groups {
        let fd = members[0].1;
        let synced = members.len() > 1 && syncfs(fd) == 0 && fdatasync(fd) == 0;
        any_synced |= synced;
        for (id, member_fd) in members {
            let result = if synced { 0 } else { fdatasync(member_fd) };
            outcomes.push((id, result));
        }
    }
    (outcomes, any_synced)
}

/// Makes the files and folders `fds` durable together, for a caller with a thread of its own
/// that creates many at once (a node's new partition folders, net/src/node/folder_prep.rs):
/// one `syncfs` and one fdatasync per ext4 device, as a group's batch is, while the machine's
/// dirty page cache is below [`DIRTY_LIMIT_BYTES`]; else, and on any other filesystem, one
/// fdatasync each. Returns each descriptor's outcome in order: 0 or the errno.
pub fn sync_together(fds: &[RawFd]) -> Vec<i32> {
    if !little_dirty(DIRTY_LIMIT_BYTES) {
        return fds.iter().map(|&fd| fdatasync(fd)).collect();
    }
    let batch: Vec<Request> = fds
        .iter()
        .enumerate()
        .map(|(index, &fd)| (index as u64, fd))
        .collect();
    let (mut outcomes, _) = sync_batch(&batch);
    outcomes.sort_unstable_by_key(|&(index, _)| index);
    outcomes.into_iter().map(|(_, result)| result).collect()
}

/// Whether the machine's dirty and under-writeback page cache is below `limit_bytes` (false if
/// `/proc/meminfo` cannot be read: then nothing is grouped).
fn little_dirty(limit_bytes: u64) -> bool {
    let Ok(text) = std::fs::read_to_string("/proc/meminfo") else {
        return false;
    };
    let mut total_kib = 0u64;
    for line in text.lines() {
        if let Some(rest) = line
            .strip_prefix("Dirty:")
            .or_else(|| line.strip_prefix("Writeback:"))
        {
            let kib = rest.trim().trim_end_matches("kB").trim();
            match kib.parse::<u64>() {
                Ok(kib) => total_kib += kib,
                Err(_) => return false,
            }
        }
    }
    total_kib.saturating_mul(1024) < limit_bytes
}

/// The device of a file on ext4, or `None` (any other filesystem, or an error).
pub(super) fn group_device(fd: RawFd) -> Option<u64> {
    // SAFETY: fstatfs/fstat write into zeroed structs on the stack; `fd` is open (see Request).
    let mut fs: libc::statfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstatfs(fd, &mut fs) } != 0 {
        return None;
    }
    let magic = fs.f_type as i64;
    if magic != EXT4_SUPER_MAGIC {
        return None;
    }
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstat(fd, &mut st) } != 0 {
        return None;
    }
    Some(st.st_dev)
}

fn syncfs(fd: RawFd) -> i32 {
    // SAFETY: plain syscall on an open descriptor.
    retry_eintr(|| unsafe { libc::syncfs(fd) })
}

fn fdatasync(fd: RawFd) -> i32 {
    // SAFETY: plain syscall on an open descriptor.
    retry_eintr(|| unsafe { libc::fdatasync(fd) })
}

/// 0, or the errno of the call, which is retried while interrupted.
fn retry_eintr(mut call: impl FnMut() -> libc::c_int) -> i32 {
    loop {
        if call() == 0 {
            return 0;
        }
        let e = std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO);
        if e != libc::EINTR {
            return e;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    #[test]
    fn a_descriptor_that_fails_fails_alone() {
        // Two files on the build's filesystem and a descriptor that is not open: the bad one
        // gets its own fdatasync and its own error, the others succeed (grouped on ext4).
        let dir = std::env::temp_dir().join(format!("ringlog-group-sync-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("folder");
        let a = std::fs::File::create(dir.join("a")).expect("a");
        let b = std::fs::File::create(dir.join("b")).expect("b");
        let batch = [(1, a.as_raw_fd()), (2, -1), (3, b.as_raw_fd())];
        let (mut outcomes, _) = sync_batch(&batch);
        outcomes.sort();
        assert_eq!(outcomes, vec![(1, 0), (2, libc::EBADF), (3, 0)]);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_dirty_limit_reads_the_kernels_counts() {
        assert!(little_dirty(u64::MAX), "nothing is above the largest limit");
        assert!(!little_dirty(0), "nothing is below zero bytes");
    }
}
