//! New topic partitions' folders, made on a `folder-prep` thread ahead of their starts.
//!
//! A partition's start on the loop created its folder and `partition.metadata` and synced the
//! file, the folder and its parent: three fsyncs, each a flush of the device's cache, blocking
//! the loop. A topic of a hundred partitions so cost every node three hundred flushes, and with
//! the files' own writes they queued before the commits of the partitions already under load:
//! a producer at 40,000 records/s saw its latency reach 0.3-0.6 s while no loop turn held the
//! thread past 25 ms (docs/benchmarks.md, "New partitions' folders off the loop").
//!
//! Now the loop asks for the folders of the starts it has queued (`Node::ask_folders_ahead`,
//! up to the first queued stop or sweep, which may remove folders of the same names); the
//! thread creates every folder it was asked for and not found there, then makes them all
//! durable together ([`ringlog_engine::io::sync_together`]: on ext4 one `syncfs` and one
//! fdatasync while little is dirty), and reports each. A start whose folder was asked for waits
//! for its report; a folder made here opens without the log's own syncs of it
//! (`LogConfig::folder_durable_before_open`). A folder that was already there (a restart, an
//! older topic of the same name, a damaged `partition.metadata`), or that the thread could not
//! make, is left to the start as before (`partition_dirs::prepare_partition_dir`), which
//! reports any error where it always did.

use std::collections::{HashMap, HashSet};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::mpsc;

use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

use super::NodeError;
use super::lazy_thread::LazyThread;
use super::partition_dirs::create_partition_dir_unsynced;
use crate::protocol::wire::Uuid;

/// At most this many folders are made durable by one sync, so the first starts need not wait
/// for a thousand-partition topic's every folder.
const FOLDERS_PER_SYNC: usize = 128;

/// One folder to make.
struct Job {
    dir: PathBuf,
    topic_id: Uuid,
    created_below_offset: u64,
}

/// What the thread did with one folder.
#[derive(Debug)]
pub struct FolderPrepared {
    pub(super) dir: PathBuf,
    pub(super) outcome: Outcome,
}

#[derive(Debug, PartialEq, Eq)]
pub(super) enum Outcome {
    /// Created with its `partition.metadata`, and durable.
    Made,
    /// A folder of that name was there: the start decides what it is.
    WasThere,
    /// Creating or syncing failed (the start tries again itself and reports the error).
    Failed(String),
}

/// The thread, and the folders asked for and not started yet.
pub(super) struct FolderPrep {
    thread: LazyThread<Job, FolderPrepared>,
    /// Asked for, not reported yet.
    asked: HashSet<PathBuf>,
    /// Reported, not taken by a start yet: whether it was made here.
    reported: HashMap<PathBuf, bool>,
}

impl FolderPrep {
    pub(super) fn new() -> (FolderPrep, UnboundedReceiver<FolderPrepared>) {
        let (done, reports) = unbounded_channel();
        (
            FolderPrep {
                thread: LazyThread::new("folder-prep", prepare, done),
                asked: HashSet::new(),
                reported: HashMap::new(),
            },
            reports,
        )
    }

    /// Asks for `dir` unless it was asked for already; the thread starts with the first.
    pub(super) fn ask(
        &mut self,
        dir: &Path,
        topic_id: Uuid,
        created_below_offset: u64,
    ) -> Result<(), NodeError> {
        if self.knows(dir) {
            return Ok(());
        }
        self.thread.send(Job {
            dir: dir.to_path_buf(),
            topic_id,
            created_below_offset,
        })?;
        self.asked.insert(dir.to_path_buf());
        Ok(())
    }

    /// Whether `dir` was asked for and not taken by its start yet.
    pub(super) fn knows(&self, dir: &Path) -> bool {
        self.asked.contains(dir) || self.reported.contains_key(dir)
    }

    /// Whether the start of `dir` waits for the thread's report.
    pub(super) fn waiting(&self, dir: &Path) -> bool {
        self.asked.contains(dir)
    }

    /// The thread's report of one folder.
    pub(super) fn on_prepared(&mut self, prepared: FolderPrepared) {
        if !self.asked.remove(&prepared.dir) {
            return;
        }
        if let Outcome::Failed(error) = &prepared.outcome {
            tracing::warn!(dir = %prepared.dir.display(), error, "partition folder not made ahead; its start makes it");
        }
        self.reported
            .insert(prepared.dir, prepared.outcome == Outcome::Made);
    }

    /// Taken by the start of `dir`: whether the thread made the folder (new and durable).
    pub(super) fn take(&mut self, dir: &Path) -> bool {
        self.reported.remove(dir).unwrap_or(false)
    }
}

/// The thread: takes what is asked, up to `FOLDERS_PER_SYNC` at a time, creates those not
/// there, makes them durable together, and reports each. Ends when the node drops its sender.
fn prepare(jobs: mpsc::Receiver<Job>, done: UnboundedSender<FolderPrepared>) {
    while let Ok(first) = jobs.recv() {
        let batch: Vec<Job> = std::iter::once(first)
            .chain(jobs.try_iter().take(FOLDERS_PER_SYNC - 1))
            .collect();
        for prepared in prepare_batch(batch) {
            if done.send(prepared).is_err() {
                return;
            }
        }
    }
}

/// Creates the batch's folders and syncs what it created: each file and folder, then each
/// parent once (its entries of the new folders).
fn prepare_batch(batch: Vec<Job>) -> Vec<FolderPrepared> {
    let mut reports = Vec::with_capacity(batch.len());
    // Per created folder: its report's index, and its file and folder, open for the sync.
    let mut created: Vec<(usize, std::fs::File, std::fs::File)> = Vec::new();
    let mut parents: Vec<PathBuf> = Vec::new();
    for job in batch {
        let outcome =
            match create_partition_dir_unsynced(&job.dir, job.topic_id, job.created_below_offset) {
                Ok((file, folder)) => {
                    created.push((reports.len(), file, folder));
                    let parent = job.dir.parent().unwrap_or(Path::new(".")).to_path_buf();
                    if !parents.contains(&parent) {
                        parents.push(parent);
                    }
                    Outcome::Made
                }
                Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {
                    Outcome::WasThere
                }
                Err(error) => Outcome::Failed(error.to_string()),
            };
        reports.push(FolderPrepared {
            dir: job.dir,
            outcome,
        });
    }
    if created.is_empty() {
        return reports;
    }
    let opened_parents: Vec<std::io::Result<std::fs::File>> =
        parents.iter().map(std::fs::File::open).collect();
    let mut fds = Vec::with_capacity(2 * created.len() + parents.len());
    for (_, file, folder) in &created {
        fds.push(file.as_raw_fd());
        fds.push(folder.as_raw_fd());
    }
    for parent in opened_parents.iter().flatten() {
        fds.push(parent.as_raw_fd());
    }
    let results = ringlog_engine::io::sync_together(&fds);
    // A parent that could not be opened or synced leaves every folder of this batch
    // unconfirmed: their starts sync them again themselves.
    let parents_synced = opened_parents.iter().all(|p| p.is_ok())
        && results[2 * created.len()..].iter().all(|&r| r == 0);
    for (n, (index, _, _)) in created.iter().enumerate() {
        let errno = [results[2 * n], results[2 * n + 1]]
            .into_iter()
            .find(|&r| r != 0);
        reports[*index].outcome = match errno {
            None if parents_synced => Outcome::Made,
            None => Outcome::Failed("the parent folder could not be synced".into()),
            Some(errno) => Outcome::Failed(std::io::Error::from_raw_os_error(errno).to_string()),
        };
    }
    reports
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(dir: &Path) -> Job {
        Job {
            dir: dir.to_path_buf(),
            topic_id: Uuid([7; 16]),
            created_below_offset: 42,
        }
    }

    #[test]
    fn a_batch_makes_the_missing_folders_and_leaves_those_there() {
        let root = tempfile::tempdir().unwrap();
        let there = root.path().join("t-0");
        std::fs::create_dir(&there).unwrap();
        let new = [root.path().join("t-1"), root.path().join("t-2")];
        let reports = prepare_batch(vec![job(&there), job(&new[0]), job(&new[1])]);
        assert_eq!(reports.len(), 3);
        assert_eq!(reports[0].outcome, Outcome::WasThere);
        for (report, dir) in reports[1..].iter().zip(&new) {
            assert_eq!(report.dir, *dir);
            assert_eq!(report.outcome, Outcome::Made);
            assert_eq!(
                super::super::partition_dirs::folder_topic_id(dir),
                Some(Uuid([7; 16]))
            );
        }
        assert!(!there.join("partition.metadata").exists());
    }

    #[test]
    fn a_folder_whose_parent_is_missing_is_left_to_its_start() {
        let root = tempfile::tempdir().unwrap();
        let reports = prepare_batch(vec![job(&root.path().join("gone").join("t-0"))]);
        assert!(matches!(reports[0].outcome, Outcome::Failed(_)));
    }

    #[test]
    fn a_start_waits_for_its_report_and_takes_it_once() {
        let root = tempfile::tempdir().unwrap();
        let (mut prep, mut reports) = FolderPrep::new();
        let dir = root.path().join("t-0");
        prep.ask(&dir, Uuid([7; 16]), 1).unwrap();
        prep.ask(&dir, Uuid([7; 16]), 1).unwrap();
        assert!(prep.waiting(&dir));
        let report = reports.blocking_recv().expect("the thread reports");
        assert_eq!(report.outcome, Outcome::Made);
        prep.on_prepared(report);
        assert!(!prep.waiting(&dir));
        assert!(prep.take(&dir), "made by the thread");
        assert!(!prep.take(&dir), "taken once");
        // Asked again once there (a restart of the partition): left to the start.
        prep.ask(&dir, Uuid([7; 16]), 1).unwrap();
        prep.on_prepared(reports.blocking_recv().unwrap());
        assert!(!prep.take(&dir));
        assert!(reports.try_recv().is_err(), "one report per ask");
    }
}
