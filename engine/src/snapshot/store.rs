//! The snapshots of one partition: listing, recovery at start, the latest valid one, deletion.

use std::path::{Path, PathBuf};

use crate::io::{Io, OpenOptions};

use super::naming::{self, SnapshotFileName, SnapshotFileState, SnapshotNaming, parse_file_name};
use super::reader::{SnapshotContents, read_snapshot};
use super::{SnapshotError, SnapshotId};

/// What to do with a `.part` file found at start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PartPolicy {
    /// Remove it: a local snapshot is simply taken again, a fetch restarts from Position 0.
    Remove,
    /// Keep it and report its size, so a FetchSnapshot can resume at that Position (its bytes
    /// are validated whole before it is ever frozen).
    Keep,
}

/// What recovery does with one snapshot file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecoveryAction {
    /// A frozen snapshot: a candidate for loading (validated when loaded, skipped if corrupt).
    Candidate,
    /// Remove the file and fsync the folder.
    Remove,
    /// Leave the file, report its size.
    KeepAndReport,
}

/// The recovery decision table: every (file state, `.part` policy) pair has exactly one row
/// (a unit test checks it). `.part` files are never loaded, whatever the policy.
pub const RECOVERY_CASES: [(SnapshotFileState, PartPolicy, RecoveryAction); 6] = [
    (
        SnapshotFileState::Frozen,
        PartPolicy::Remove,
        RecoveryAction::Candidate,
    ),
    (
        SnapshotFileState::Frozen,
        PartPolicy::Keep,
        RecoveryAction::Candidate,
    ),
    (
        SnapshotFileState::Partial,
        PartPolicy::Remove,
        RecoveryAction::Remove,
    ),
    (
        SnapshotFileState::Partial,
        PartPolicy::Keep,
        RecoveryAction::KeepAndReport,
    ),
    // A `.deleted` file was on its way out: finish the job.
    (
        SnapshotFileState::Deleted,
        PartPolicy::Remove,
        RecoveryAction::Remove,
    ),
    (
        SnapshotFileState::Deleted,
        PartPolicy::Keep,
        RecoveryAction::Remove,
    ),
];

/// The row of [`RECOVERY_CASES`] for `state` under `policy`.
pub fn recovery_action(state: SnapshotFileState, policy: PartPolicy) -> RecoveryAction {
    RECOVERY_CASES
        .iter()
        .find(|(s, p, _)| *s == state && *p == policy)
        .map(|(_, _, action)| *action)
        .expect("RECOVERY_CASES covers every combination")
}

/// Every snapshot file of a partition, by state. KIP-630 names are looked for in `checkpoints/`,
/// Kafka's shipped names in the partition folder.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SnapshotListing {
    /// Frozen snapshots, ascending by id; where both namings hold the same id, the KIP-630 file.
    pub frozen: Vec<SnapshotFileName>,
    pub partial: Vec<SnapshotFileName>,
    pub deleted: Vec<SnapshotFileName>,
}

impl SnapshotListing {
    /// The newest frozen snapshot's id (not validated).
    pub fn latest_id(&self) -> Option<SnapshotId> {
        self.frozen.last().map(|f| f.snapshot_id)
    }
}

pub fn list_snapshots<I: Io>(
    io: &mut I,
    partition_dir: &Path,
) -> Result<SnapshotListing, SnapshotError> {
    let mut found = Vec::new();
    let checkpoints = naming::checkpoints_dir(partition_dir);
    for (dir, naming) in [
        (checkpoints.as_path(), SnapshotNaming::Kip630),
        (partition_dir, SnapshotNaming::KafkaShipped),
    ] {
        if !io.exists(dir) {
            continue;
        }
        for name in io.list_dir(dir)? {
            if let Some(file) = parse_file_name(&name).filter(|f| f.naming == naming) {
                found.push(file);
            }
        }
    }
    // Kip630 sorts before KafkaShipped, so dedup keeps the KIP-630 file of an id.
    found.sort_by_key(|f| (f.state, f.snapshot_id, f.naming));
    let mut listing = SnapshotListing::default();
    for file in found {
        let list = match file.state {
            SnapshotFileState::Frozen => &mut listing.frozen,
            SnapshotFileState::Partial => &mut listing.partial,
            SnapshotFileState::Deleted => &mut listing.deleted,
        };
        if list
            .last()
            .is_none_or(|last| last.snapshot_id != file.snapshot_id)
        {
            list.push(file);
        }
    }
    Ok(listing)
}

/// What [`recover_snapshot_dir`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    pub removed: Vec<PathBuf>,
    /// `.part` files kept ([`PartPolicy::Keep`]): id, path, bytes held (the Position to resume at).
    pub kept_parts: Vec<(SnapshotId, PathBuf, u64)>,
    /// Frozen snapshots present (not yet validated), ascending.
    pub frozen: Vec<SnapshotId>,
}

/// At start: finish interrupted deletions, remove (or keep) `.part` files, per [`RECOVERY_CASES`].
/// Folders are fsynced after removals, so a second crash does not bring the files back.
pub fn recover_snapshot_dir<I: Io>(
    io: &mut I,
    partition_dir: &Path,
    policy: PartPolicy,
) -> Result<RecoveryReport, SnapshotError> {
    let listing = list_snapshots(io, partition_dir)?;
    let mut report = RecoveryReport::default();
    let mut dirs_to_sync = Vec::new();
    for file in listing
        .partial
        .iter()
        .chain(&listing.deleted)
        .chain(&listing.frozen)
    {
        let path = naming::path_of(partition_dir, file);
        match recovery_action(file.state, policy) {
            RecoveryAction::Candidate => report.frozen.push(file.snapshot_id),
            RecoveryAction::Remove => {
                io.remove_file(&path)?;
                let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
                if !dirs_to_sync.contains(&dir) {
                    dirs_to_sync.push(dir);
                }
                report.removed.push(path);
            }
            RecoveryAction::KeepAndReport => {
                let file_id = io.open(
                    &path,
                    OpenOptions {
                        read_only: true,
                        ..Default::default()
                    },
                )?;
                let size = io.file_size_bytes(file_id);
                io.close(file_id)?;
                report.kept_parts.push((file.snapshot_id, path, size?));
            }
        }
    }
    for dir in dirs_to_sync {
        io.sync_dir(&dir)?;
    }
    Ok(report)
}

/// Frozen snapshots that failed validation, newest first, with why.
pub type SkippedSnapshots = Vec<(SnapshotId, SnapshotError)>;

/// The newest frozen snapshot that validates end to end, plus the newer ones that did not (with
/// their errors, newest first; they are left on disk for an operator to inspect). `.part` and
/// `.deleted` files are never considered.
pub fn latest_valid_snapshot<I: Io>(
    io: &mut I,
    partition_dir: &Path,
) -> Result<(Option<SnapshotContents>, SkippedSnapshots), SnapshotError> {
    let listing = list_snapshots(io, partition_dir)?;
    let mut skipped = Vec::new();
    for file in listing.frozen.iter().rev() {
        let path = naming::path_of(partition_dir, file);
        match read_snapshot(io, &path, file.snapshot_id) {
            Ok(contents) => return Ok((Some(contents), skipped)),
            // A read EIO is treated like corruption (ARCHITECTURE.md): try the next older one.
            Err(error) => skipped.push((file.snapshot_id, error)),
        }
    }
    Ok((None, skipped))
}

/// Delete one snapshot: rename to `.deleted`, fsync the folder, remove, fsync the folder. A
/// crash in between leaves either the `.checkpoint` (still whole) or the `.deleted` (removed by
/// recovery): never a half-deleted file that could be loaded.
pub fn delete_snapshot<I: Io>(
    io: &mut I,
    partition_dir: &Path,
    file: &SnapshotFileName,
) -> Result<(), SnapshotError> {
    let path = naming::path_of(partition_dir, file);
    let deleted = naming::path_of(
        partition_dir,
        &SnapshotFileName {
            state: SnapshotFileState::Deleted,
            ..*file
        },
    );
    let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
    io.rename(&path, &deleted)?;
    io.sync_dir(&dir)?;
    // A state machine's snapshot can be large: its blocks are released off this thread.
    io.remove_file_release_later(&deleted)?;
    io.sync_dir(&dir)?;
    Ok(())
}

/// KIP-630 "When to Delete Snapshots": delete every frozen snapshot older than `snapshot_id`
/// (the caller passes the snapshot at or below the new log begin offset that must be kept).
/// Returns the ids deleted, ascending.
pub fn delete_snapshots_before<I: Io>(
    io: &mut I,
    partition_dir: &Path,
    snapshot_id: SnapshotId,
) -> Result<Vec<SnapshotId>, SnapshotError> {
    let listing = list_snapshots(io, partition_dir)?;
    let mut deleted = Vec::new();
    for file in listing
        .frozen
        .iter()
        .filter(|f| f.snapshot_id < snapshot_id)
    {
        delete_snapshot(io, partition_dir, file)?;
        deleted.push(file.snapshot_id);
    }
    Ok(deleted)
}

#[cfg(test)]
mod tests {
    use super::*;

    // TigerBeetle-style decision table: every combination matches exactly one row.
    #[test]
    fn every_recovery_case_matches_exactly_one_row() {
        for state in [
            SnapshotFileState::Frozen,
            SnapshotFileState::Partial,
            SnapshotFileState::Deleted,
        ] {
            for policy in [PartPolicy::Remove, PartPolicy::Keep] {
                let rows = RECOVERY_CASES
                    .iter()
                    .filter(|(s, p, _)| *s == state && *p == policy)
                    .count();
                assert_eq!(rows, 1, "{state:?} {policy:?}");
            }
        }
        // A .part is never a load candidate.
        for policy in [PartPolicy::Remove, PartPolicy::Keep] {
            assert_ne!(
                recovery_action(SnapshotFileState::Partial, policy),
                RecoveryAction::Candidate
            );
            assert_ne!(
                recovery_action(SnapshotFileState::Deleted, policy),
                RecoveryAction::Candidate
            );
        }
    }
}
