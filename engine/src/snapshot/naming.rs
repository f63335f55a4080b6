//! Snapshot file names: the KIP-630 form we write, and Kafka's shipped form we also recognise.
//!
//! | form | where | example (end offset 5120793, epoch 2) | written? |
//! | --- | --- | --- | --- |
//! | KIP-630 | `<partition>/checkpoints/` | `00000000000005120793-00000000000000000002.checkpoint` | yes |
//! | Kafka as shipped | `<partition>/` | `00000000000005120793-0000000002.checkpoint` | never, only read |
//!
//! Each `.checkpoint` may carry a suffix saying what is happening to it: `.part` while it is
//! being written or fetched, `.deleted` while it is being removed. Anything else in the folder
//! (other extensions, other digit counts, signs, overflowing numbers) is not a snapshot.

use std::path::{Path, PathBuf};

use super::SnapshotId;

/// The folder, inside a partition's folder, that holds KIP-630 snapshots.
pub const CHECKPOINTS_DIR: &str = "checkpoints";
pub const CHECKPOINT_SUFFIX: &str = ".checkpoint";
pub const PART_SUFFIX: &str = ".checkpoint.part";
pub const DELETED_SUFFIX: &str = ".checkpoint.deleted";

const OFFSET_DIGITS: usize = 20;
const KIP_EPOCH_DIGITS: usize = 20;
const KAFKA_EPOCH_DIGITS: usize = 10;

/// What a snapshot file is doing, from its suffix.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SnapshotFileState {
    /// `.checkpoint`: frozen, complete (until validated, only *claimed* complete).
    Frozen,
    /// `.checkpoint.part`: being written or fetched; never loaded.
    Partial,
    /// `.checkpoint.deleted`: being removed; never loaded.
    Deleted,
}

/// Which naming convention a file name follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SnapshotNaming {
    /// `<20 digits>-<20 digits>` in `checkpoints/`: the KIP-630 text, what ringlog writes.
    Kip630,
    /// `<20 digits>-<10 digits>` in the partition folder: what Kafka ships.
    KafkaShipped,
}

/// A parsed snapshot file name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SnapshotFileName {
    pub snapshot_id: SnapshotId,
    pub state: SnapshotFileState,
    pub naming: SnapshotNaming,
}

/// The KIP-630 base name (`<end offset>-<epoch>`, no extension) of `id`.
///
/// # Panics
/// If `id` has a negative field: such an id never names a file (callers validate wire ids
/// with [`SnapshotId::is_valid`] first).
pub fn base_name(id: SnapshotId) -> String {
    assert!(id.is_valid(), "snapshot id {id:?} cannot name a file");
    format!("{:020}-{:020}", id.end_offset, id.epoch)
}

/// `checkpoints/<end offset>-<epoch>.checkpoint` under `partition_dir`.
pub fn checkpoint_path(partition_dir: &Path, id: SnapshotId) -> PathBuf {
    checkpoints_dir(partition_dir).join(format!("{}{CHECKPOINT_SUFFIX}", base_name(id)))
}

/// `checkpoints/<end offset>-<epoch>.checkpoint.part` under `partition_dir`.
pub fn part_path(partition_dir: &Path, id: SnapshotId) -> PathBuf {
    checkpoints_dir(partition_dir).join(format!("{}{PART_SUFFIX}", base_name(id)))
}

/// `checkpoints/<end offset>-<epoch>.checkpoint.deleted` under `partition_dir`.
pub fn deleted_path(partition_dir: &Path, id: SnapshotId) -> PathBuf {
    checkpoints_dir(partition_dir).join(format!("{}{DELETED_SUFFIX}", base_name(id)))
}

pub fn checkpoints_dir(partition_dir: &Path) -> PathBuf {
    partition_dir.join(CHECKPOINTS_DIR)
}

/// The path of `file` in the folder it was found in (KIP-630 names live in `checkpoints/`,
/// Kafka's shipped names in the partition folder itself).
pub fn path_of(partition_dir: &Path, file: &SnapshotFileName) -> PathBuf {
    let suffix = match file.state {
        SnapshotFileState::Frozen => CHECKPOINT_SUFFIX,
        SnapshotFileState::Partial => PART_SUFFIX,
        SnapshotFileState::Deleted => DELETED_SUFFIX,
    };
    match file.naming {
        SnapshotNaming::Kip630 => {
            checkpoints_dir(partition_dir).join(format!("{}{suffix}", base_name(file.snapshot_id)))
        }
        SnapshotNaming::KafkaShipped => partition_dir.join(format!(
            "{:020}-{:010}{suffix}",
            file.snapshot_id.end_offset, file.snapshot_id.epoch
        )),
    }
}

/// Parse a file name (not a path). `None` for anything that is not a snapshot file.
///
/// ```
/// use ringlog_engine::snapshot::{SnapshotId, naming::{parse_file_name, SnapshotNaming, SnapshotFileState}};
/// let kip = parse_file_name("00000000000005120793-00000000000000000002.checkpoint").unwrap();
/// assert_eq!(kip.snapshot_id, SnapshotId { end_offset: 5120793, epoch: 2 });
/// assert_eq!(kip.naming, SnapshotNaming::Kip630);
/// let kafka = parse_file_name("00000000000005120793-0000000002.checkpoint.part").unwrap();
/// assert_eq!((kafka.naming, kafka.state), (SnapshotNaming::KafkaShipped, SnapshotFileState::Partial));
/// assert!(parse_file_name("00000000000005120793.log").is_none());
/// ```
pub fn parse_file_name(name: &str) -> Option<SnapshotFileName> {
    // Longest suffix first: ".checkpoint" is a prefix of the other two.
    let (stem, state) = if let Some(stem) = name.strip_suffix(PART_SUFFIX) {
        (stem, SnapshotFileState::Partial)
    } else if let Some(stem) = name.strip_suffix(DELETED_SUFFIX) {
        (stem, SnapshotFileState::Deleted)
    } else {
        (
            name.strip_suffix(CHECKPOINT_SUFFIX)?,
            SnapshotFileState::Frozen,
        )
    };
    let (offset_digits, epoch_digits) = stem.split_once('-')?;
    if offset_digits.len() != OFFSET_DIGITS {
        return None;
    }
    let naming = match epoch_digits.len() {
        KIP_EPOCH_DIGITS => SnapshotNaming::Kip630,
        KAFKA_EPOCH_DIGITS => SnapshotNaming::KafkaShipped,
        _ => return None,
    };
    let end_offset = parse_digits(offset_digits)?;
    let epoch = i32::try_from(parse_digits(epoch_digits)?).ok()?;
    Some(SnapshotFileName {
        snapshot_id: SnapshotId { end_offset, epoch },
        state,
        naming,
    })
}

/// Only ASCII digits (no sign, no spaces), fitting an i64.
fn parse_digits(digits: &str) -> Option<i64> {
    if !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse::<i64>().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kip_names_round_trip() {
        let id = SnapshotId {
            end_offset: 5_120_793,
            epoch: 2,
        };
        let path = checkpoint_path(Path::new("/d/__cluster_metadata-0"), id);
        assert_eq!(
            path,
            Path::new(
                "/d/__cluster_metadata-0/checkpoints/00000000000005120793-00000000000000000002.checkpoint"
            )
        );
        let name = path.file_name().unwrap().to_str().unwrap();
        let parsed = parse_file_name(name).unwrap();
        assert_eq!(parsed.snapshot_id, id);
        assert_eq!(parsed.state, SnapshotFileState::Frozen);
        assert_eq!(path_of(Path::new("/d/__cluster_metadata-0"), &parsed), path);
        for (path, state) in [
            (part_path(Path::new("/p"), id), SnapshotFileState::Partial),
            (
                deleted_path(Path::new("/p"), id),
                SnapshotFileState::Deleted,
            ),
        ] {
            let parsed = parse_file_name(path.file_name().unwrap().to_str().unwrap()).unwrap();
            assert_eq!((parsed.snapshot_id, parsed.state), (id, state));
            assert_eq!(path_of(Path::new("/p"), &parsed), path);
        }
    }

    #[test]
    fn kafka_shipped_names_are_recognised_in_the_partition_folder() {
        let parsed = parse_file_name("00000000000000000100-0000000007.checkpoint").unwrap();
        assert_eq!(
            parsed.snapshot_id,
            SnapshotId {
                end_offset: 100,
                epoch: 7
            }
        );
        assert_eq!(parsed.naming, SnapshotNaming::KafkaShipped);
        assert_eq!(
            path_of(Path::new("/p"), &parsed),
            Path::new("/p/00000000000000000100-0000000007.checkpoint")
        );
    }

    #[test]
    fn other_names_are_not_snapshots() {
        for name in [
            "00000000000000000000.log",
            "00000000000000000100-0000000007.snapshot",
            "0000000000000000100-00000000000000000007.checkpoint",
            "00000000000000000100-000000007.checkpoint",
            "+0000000000000000100-00000000000000000007.checkpoint",
            "00000000000000000100-+0000000000000000007.checkpoint",
            "99999999999999999999-00000000000000000007.checkpoint",
            "00000000000000000100-00000000009999999999.checkpoint",
            "00000000000000000100_00000000000000000007.checkpoint",
            "00000000000000000100-00000000000000000007.checkpoint.tmp",
            "leader-epoch-checkpoint",
            ".checkpoint",
        ] {
            assert_eq!(parse_file_name(name), None, "{name}");
        }
    }
}
