//! The check behind the start: after a crash, a topic partition's log opens from its segments'
//! batch lists as after a clean close (`LogConfig::defer_listed_check_after_crash`), so a
//! restart takes the time of its lists and unlisted tails, not of its log (reading 1.9 GB of
//! logs held a restarted node 4-6 s before it served, docs/benchmarks.md). The batches taken
//! unread are read and checked here, on a `listed-check` thread with its own plain-syscall
//! backend, one segment at a time, while the partition serves; damage found is repaired as at
//! a start (docs/node.md, "Storage faults"): the runtime restarts the partition with that
//! segment read at open, which sets it aside and fetches the records again from the leader.
//!
//! The metadata partition keeps the check at open: the node's topics, configs and voters come
//! from it, and its segments are small.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::mpsc;

use ringlog_engine::io::SyscallIo;
use ringlog_engine::log::{LogConfig, LogError, PartitionLog, UnverifiedBatches};
use ringlog_replication::PartitionId;
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

use super::NodeError;
use super::lazy_thread::LazyThread;

/// How much the check reads at a time: a commit's write or fdatasync queued behind one of its
/// reads waits for at most this much (an open reads 8 MiB at a time).
const CHECK_READ_BYTES: u64 = 1 << 20;

/// One segment's listed batches to read and check.
struct Job {
    partition: PartitionId,
    truncations: u64,
    batches: UnverifiedBatches,
    config: LogConfig,
}

/// What the thread found of one segment.
#[derive(Debug)]
pub struct ListedChecked {
    pub(super) partition: PartitionId,
    pub(super) truncations: u64,
    pub(super) batches: UnverifiedBatches,
    pub(super) result: Result<(), LogError>,
}

/// What the loop does with a report ([`ListedChecks::on_checked`]).
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Verdict {
    /// Nothing to do (a partition restarted or stopped since, or segments still to check).
    Nothing,
    /// Every listed batch of the partition read back.
    AllReadBack { dir: PathBuf },
    /// A listed batch did not read back (or could not be read): restart the partition with
    /// the segment at `base_offset` read at open.
    Damaged { base_offset: i64, reason: String },
}

/// The thread and what it still has to check, per partition.
pub(super) struct ListedChecks {
    thread: LazyThread<Job, ListedChecked>,
    /// Per partition: how many segments are still to report, and its folder. A partition
    /// that stops is forgotten, and a restart is a new `PartitionId` (`PartitionTable::add`
    /// never reuses one), so a report of a partition not here is moot.
    pending: BTreeMap<PartitionId, (usize, PathBuf)>,
}

impl ListedChecks {
    pub(super) fn new() -> (ListedChecks, UnboundedReceiver<ListedChecked>) {
        let (done, reports) = unbounded_channel();
        (
            ListedChecks {
                thread: LazyThread::new("listed-check", check_jobs, done),
                pending: BTreeMap::new(),
            },
            reports,
        )
    }

    /// Queues a started partition's unread batches (`Host::take_unverified`); the thread is
    /// started with the first.
    pub(super) fn submit(
        &mut self,
        partition: PartitionId,
        dir: PathBuf,
        truncations: u64,
        unverified: Vec<UnverifiedBatches>,
        config: &LogConfig,
    ) -> Result<(), NodeError> {
        debug_assert!(
            !self.pending.contains_key(&partition),
            "partition {partition} started twice"
        );
        if unverified.is_empty() {
            return Ok(());
        }
        let segments = unverified.len();
        let batches: usize = unverified.iter().map(UnverifiedBatches::batches).sum();
        tracing::info!(
            partition,
            dir = %dir.display(),
            segments,
            batches,
            "listed batches taken unread after a crash: checking them behind the start"
        );
        self.pending.insert(partition, (segments, dir.clone()));
        let config = LogConfig {
            recovery_read_bytes: CHECK_READ_BYTES,
            ..config.clone()
        };
        for batches in unverified {
            let job = Job {
                partition,
                truncations,
                batches,
                config: config.clone(),
            };
            self.thread.send(job)?;
        }
        Ok(())
    }

    /// The partition stopped (deleted, taken offline, restarted): its reports are moot.
    pub(super) fn forget(&mut self, partition: PartitionId) {
        self.pending.remove(&partition);
    }

    /// A report from the thread. `still_held` says whether the partition's log still holds the
    /// batches checked (`Host::still_holds`): damage to batches cut or removed since is moot.
    pub(super) fn on_checked(
        &mut self,
        checked: &ListedChecked,
        still_held: impl FnOnce() -> bool,
    ) -> Verdict {
        let Some((remaining, dir)) = self.pending.get_mut(&checked.partition) else {
            return Verdict::Nothing;
        };
        if let Err(error) = &checked.result
            && still_held()
        {
            self.pending.remove(&checked.partition);
            return Verdict::Damaged {
                base_offset: checked.batches.base_offset(),
                reason: error.to_string(),
            };
        }
        // Read back, or moot (cut or removed since).
        *remaining -= 1;
        if *remaining > 0 {
            return Verdict::Nothing;
        }
        let dir = dir.clone();
        self.pending.remove(&checked.partition);
        if checked.result.is_ok() {
            Verdict::AllReadBack { dir }
        } else {
            Verdict::Nothing
        }
    }
}

/// The `listed-check` thread: each segment's listed batches read (O_DIRECT, `CHECK_READ_BYTES`
/// at a time, in the idle I/O class) and checked, in the order queued, each result reported.
fn check_jobs(jobs: mpsc::Receiver<Job>, done: UnboundedSender<ListedChecked>) {
    lower_io_priority();
    let mut io: Option<SyscallIo> = None;
    while let Ok(job) = jobs.recv() {
        let io = io.get_or_insert_with(|| {
            SyscallIo::for_dir(
                job.batches
                    .path()
                    .parent()
                    .unwrap_or(std::path::Path::new(".")),
            )
        });
        let result = PartitionLog::verify_listed(io, &job.batches, &job.config);
        let checked = ListedChecked {
            partition: job.partition,
            truncations: job.truncations,
            batches: job.batches,
            result,
        };
        if done.send(checked).is_err() {
            // The loop is gone: the node is stopping.
            return;
        }
    }
}

/// Puts this thread's disk reads in the idle I/O class (`ioprio_set`): the check reads whole
/// logs, and must not take the disk from the commits' writes and fdatasyncs. In fault runs
/// at full speed it did: a topic's creation (50 partitions' files synced on the loop) held the
/// loop 0.5-1.5 s while checks read beside it. Schedulers without classes (`none`) ignore it;
/// mq-deadline and BFQ serve idle reads when nothing else waits, mq-deadline at the latest after
/// its aging time (10 s by default), so the check still ends. A refusal is only logged.
fn lower_io_priority() {
    const IOPRIO_WHO_PROCESS: libc::c_long = 1;
    const IOPRIO_CLASS_IDLE: libc::c_long = 3;
    const IOPRIO_CLASS_SHIFT: libc::c_long = 13;
    // SAFETY: ioprio_set takes three integers and touches no memory of ours; `0` is the
    // calling thread.
    let result = unsafe {
        libc::syscall(
            libc::SYS_ioprio_set,
            IOPRIO_WHO_PROCESS,
            0 as libc::c_long,
            IOPRIO_CLASS_IDLE << IOPRIO_CLASS_SHIFT,
        )
    };
    if result != 0 {
        tracing::warn!(
            error = %std::io::Error::last_os_error(),
            "listed-check: the idle I/O class was refused; checking at the normal priority"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ringlog_engine::batch::RecordBatchBuilder;

    fn config() -> LogConfig {
        LogConfig {
            segment_size_bytes: 16 * 1024,
            batch_list_interval_bytes: 1024,
            defer_listed_check_after_crash: true,
            ..LogConfig::default()
        }
    }

    /// A log of a few segments in `dir`, left as a crash leaves it, opened again deferring:
    /// what its recovery took unread.
    fn crashed_log(dir: &std::path::Path) -> Vec<UnverifiedBatches> {
        let mut io = SyscallIo::for_dir(dir);
        let (mut log, _) = PartitionLog::open(&mut io, dir, config()).unwrap();
        for seed in 0..60u64 {
            let mut builder = RecordBatchBuilder::new(0);
            builder.append(0, None, Some(&[seed as u8; 700]), &[]);
            log.append_as_leader(builder.build().into_bytes().into(), 1)
                .unwrap();
            log.flush_and_wait(&mut io).unwrap();
        }
        drop(log);
        let (_, report) = PartitionLog::open(&mut io, dir, config()).unwrap();
        assert!(report.unverified.len() >= 2, "{report:?}");
        report.unverified
    }

    fn next(reports: &mut UnboundedReceiver<ListedChecked>) -> ListedChecked {
        reports.blocking_recv().expect("the thread reports")
    }

    #[test]
    fn every_segment_read_back_is_one_verdict_and_a_restart_makes_older_reports_moot() {
        let dir = tempfile::tempdir().unwrap();
        let unverified = crashed_log(dir.path());
        let segments = unverified.len();
        let (mut checks, mut reports) = ListedChecks::new();
        checks
            .submit(7, dir.path().into(), 0, unverified.clone(), &config())
            .unwrap();
        for segment in 0..segments {
            let checked = next(&mut reports);
            assert!(checked.result.is_ok(), "{checked:?}");
            let verdict = checks.on_checked(&checked, || panic!("asked only on damage"));
            if segment + 1 < segments {
                assert_eq!(verdict, Verdict::Nothing);
            } else {
                assert_eq!(
                    verdict,
                    Verdict::AllReadBack {
                        dir: dir.path().into()
                    }
                );
            }
        }
        // Restarted before the first start's reports came (as the node restarts a partition:
        // forgotten, then started under a new id): those are moot.
        checks
            .submit(8, dir.path().into(), 0, unverified.clone(), &config())
            .unwrap();
        let stale = next(&mut reports);
        checks.forget(8);
        checks
            .submit(9, dir.path().into(), 0, unverified, &config())
            .unwrap();
        assert_eq!(checks.on_checked(&stale, || true), Verdict::Nothing);
        // A stopped partition's reports too.
        checks.forget(9);
        let forgotten = next(&mut reports);
        assert_eq!(checks.on_checked(&forgotten, || true), Verdict::Nothing);
    }

    #[test]
    fn a_flipped_bit_is_damage_while_the_log_still_holds_the_batch_and_moot_after() {
        let dir = tempfile::tempdir().unwrap();
        let unverified = crashed_log(dir.path());
        let first = unverified[0].clone();
        let mut bytes = std::fs::read(first.path()).unwrap();
        bytes[1000] ^= 0x04;
        std::fs::write(first.path(), bytes).unwrap();
        let (mut checks, mut reports) = ListedChecks::new();
        checks
            .submit(3, dir.path().into(), 5, vec![first.clone()], &config())
            .unwrap();
        let checked = next(&mut reports);
        assert!(
            checked.result.is_err(),
            "the flip was read back: {checked:?}"
        );
        assert_eq!(checked.truncations, 5);
        // Cut or removed since: nothing to repair.
        assert_eq!(checks.on_checked(&checked, || false), Verdict::Nothing);
        checks
            .submit(3, dir.path().into(), 5, vec![first.clone()], &config())
            .unwrap();
        let checked = next(&mut reports);
        match checks.on_checked(&checked, || true) {
            Verdict::Damaged { base_offset, .. } => assert_eq!(base_offset, first.base_offset()),
            other => panic!("not damage: {other:?}"),
        }
    }
}
