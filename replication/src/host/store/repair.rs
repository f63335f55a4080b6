//! A log opened past damaged segments: they are set aside into `damaged/`, the folder marked
//! `repair-pending` until the core has caught up with a leader (docs/node.md, "Storage faults").

use super::*;

/// A partition folder's marker that its log was cut below damaged records at start
/// ([`PartitionStore::open`] with `repair`): until it has caught up with a leader, its core grants
/// no vote and does not stand (`Raft::repair_pending`). Removed once the core says so.
pub const REPAIR_PENDING_FILE_NAME: &str = "repair-pending";
/// Where a repair sets the damaged segment files aside (for an operator to look at; nothing
/// reads them again).
pub const DAMAGED_DIR_NAME: &str = "damaged";

impl PartitionStore {
    /// The core caught up after a repair: the marker goes (durably: a restart before this
    /// keeps the core's caution, which is safe).
    pub fn finish_repair<I: Io>(&mut self, io: &mut I) -> Result<(), StorageError> {
        let path = self.dir.join(REPAIR_PENDING_FILE_NAME);
        io.remove_file(&path).map_err(LogError::from)?;
        io.sync_dir(&self.dir).map_err(LogError::from)?;
        self.repair_pending = false;
        Ok(())
    }
}

/// Opens a partition log; with `repair`, a segment that recovery refuses as damaged
/// (`LogError::Corruption`: acknowledged bytes that no longer read back) is set aside with every
/// later segment, into the folder's `damaged/`, and the log opened again without them: it ends
/// where the intact segments end, and the records after are fetched again from the leader.
/// The folder gets `repair-pending` first, so the core learns it holds less than it may have
/// acknowledged (it grants no vote and does not stand until it has caught up with a leader,
/// `Raft::repair_pending`): a voter that forgot acknowledged records must not help elect a
/// leader that lacks them. Without `repair` (a single replica: no peer holds the records) the
/// damage is refused as before.
pub(super) fn open_repairing<I: Io>(
    io: &mut I,
    dir: &Path,
    log_config: LogConfig,
    repair: bool,
) -> Result<(PartitionLog, ringlog_engine::log::RecoveryReport), StorageError> {
    loop {
        match PartitionLog::open(io, dir, log_config.clone()) {
            Ok(opened) => return Ok(opened),
            Err(LogError::Corruption {
                path,
                position,
                reason,
            }) if repair && segment_base_of(&path).is_some() => {
                let base = segment_base_of(&path).expect("checked");
                tracing::error!(
                    path = %path.display(),
                    position,
                    reason,
                    "damaged segment: it and every later one are set aside in damaged/, and the records are fetched again from the leader"
                );
                mark_repair_pending(io, dir, base)?;
                set_aside_segments_from(io, dir, base)?;
            }
            Err(error) => return Err(error.into()),
        }
    }
}

/// Whether the folder's `checkpoints/` holds a frozen snapshot file (valid or not).
pub(super) fn has_snapshot_files<I: Io>(io: &mut I, dir: &Path) -> bool {
    let checkpoints = ringlog_engine::snapshot::naming::checkpoints_dir(dir);
    io.exists(&checkpoints)
        && io
            .list_dir(&checkpoints)
            .is_ok_and(|names| names.iter().any(|n| n.ends_with(".checkpoint")))
}

/// Moves every file of the folder's `checkpoints/` into `damaged/`, durably.
pub(super) fn set_aside_snapshots<I: Io>(io: &mut I, dir: &Path) -> Result<(), StorageError> {
    let checkpoints = ringlog_engine::snapshot::naming::checkpoints_dir(dir);
    if !io.exists(&checkpoints) {
        return Ok(());
    }
    let names = io.list_dir(&checkpoints).map_err(LogError::from)?;
    set_aside(io, dir, &checkpoints, names)
}

/// Writes `repair-pending` (naming the first offset set aside) unless a repair already did.
pub(super) fn mark_repair_pending<I: Io>(
    io: &mut I,
    dir: &Path,
    offset: u64,
) -> Result<(), StorageError> {
    let marker = dir.join(REPAIR_PENDING_FILE_NAME);
    if !io.exists(&marker) {
        offset_checkpoint::persist(io, &marker, offset)?;
    }
    Ok(())
}

/// Moves the files `names` of folder `from` into the partition folder's `damaged/`, each under
/// a name not taken there yet, and makes both folders durable.
fn set_aside<I: Io>(
    io: &mut I,
    dir: &Path,
    from: &Path,
    names: Vec<String>,
) -> Result<(), StorageError> {
    let damaged = dir.join(DAMAGED_DIR_NAME);
    io.create_dir_all(&damaged).map_err(LogError::from)?;
    for name in names {
        let mut target = damaged.join(&name);
        let mut n = 1;
        while io.exists(&target) {
            target = damaged.join(format!("{name}.{n}"));
            n += 1;
        }
        io.rename(&from.join(&name), &target)
            .map_err(LogError::from)?;
    }
    io.sync_dir(&damaged).map_err(LogError::from)?;
    io.sync_dir(from).map_err(LogError::from)?;
    Ok(())
}

/// The base offset of a segment file's path (`<20 digits>.log`).
fn segment_base_of(path: &Path) -> Option<u64> {
    let name = path.file_name()?.to_str()?;
    let stem = name.strip_suffix(".log")?;
    (stem.len() == 20 && stem.bytes().all(|b| b.is_ascii_digit()))
        .then(|| stem.parse().ok())
        .flatten()
}

/// Moves every segment file (`.log`, `.index`) whose base offset is at least `base` into
/// `damaged/`, durably.
pub(super) fn set_aside_segments_from<I: Io>(
    io: &mut I,
    dir: &Path,
    base: u64,
) -> Result<(), StorageError> {
    let names = io
        .list_dir(dir)
        .map_err(LogError::from)?
        .into_iter()
        .filter(|name| {
            let Some((stem, ext)) = name.split_once('.') else {
                return false;
            };
            (ext == "log" || ext == "index")
                && stem.len() == 20
                && stem.parse::<u64>().is_ok_and(|b| b >= base)
        })
        .collect();
    set_aside(io, dir, dir, names)
}
