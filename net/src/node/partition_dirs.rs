//! Topic partitions' folders on disk: what deleting a topic leaves there, and how a restart
//! cleans it up (delete_topics.rs says what deleting a topic does; topic_image.rs starts and
//! stops the partitions).
//!
//! A restart mid-way must not bring the topic back. Every partition folder holds a
//! `partition.metadata` file (Kafka's name) with the topic id and the metadata offset below
//! which the topic's record was applied when the folder was made:
//!
//! ```text
//! version: 0
//! topic_id: <32 hex digits>
//! created.below.metadata.offset: <n>
//! ```
//!
//! On start a node only opens the folders of the topics in its image, so a deleted topic is
//! never started again. What is left on disk is cleaned up as the metadata log is applied:
//!
//! | found on disk                                 | when                                        | action                 |
//! | --------------------------------------------- | ------------------------------------------- | ---------------------- |
//! | a `…-delete` folder                           | first apply after start                     | removed                |
//! | a folder with another id than the image's     | the image's topic of that name starts       | renamed, removed, new  |
//! | a folder whose id is in no image topic        | applied offset ≥ its `created.below` offset | renamed, removed       |
//! | a folder whose id is in no image topic        | applied offset < its `created.below` offset | kept (not replayed yet)|
//! | a folder without `partition.metadata`         | its topic starts                            | file written (adopted) |
//!
//! The third row is what makes a crash between the tombstone's commit and the rename safe: the
//! folder's topic was created below `created.below`, so once the state has applied that far and
//! still lacks the topic, the topic was deleted (ids are never reused). A folder of a topic
//! created after the newest snapshot is kept until the log replay passes its creation.

use std::path::{Path, PathBuf};

use ringlog_engine::io::AnyIo;
use ringlog_replication::host::Host;

use super::NodeError;
use crate::protocol::wire::Uuid;

/// Kafka's per-partition file naming the topic id (we add the creation bound).
const PARTITION_METADATA_FILE: &str = "partition.metadata";
/// Kafka's suffix of a folder waiting to be removed.
const DELETE_SUFFIX: &str = "-delete";

/// Folders found at start that belong to no running partition, kept until the metadata log
/// has been applied far enough to know whether their topic still exists.
#[derive(Debug, Default)]
pub(super) struct Leftovers {
    candidates: Vec<Candidate>,
}

#[derive(Debug)]
struct Candidate {
    dir: PathBuf,
    topic_id: Uuid,
    created_below_offset: u64,
}

/// What a `partition.metadata` file says.
#[derive(Debug, PartialEq, Eq)]
struct PartitionMetadata {
    topic_id: Uuid,
    created_below_offset: u64,
}

fn hex(id: Uuid) -> String {
    id.0.iter().map(|b| format!("{b:02x}")).collect()
}

fn parse_hex_id(text: &str) -> Option<Uuid> {
    if text.len() != 32 || !text.is_ascii() {
        return None;
    }
    let mut id = [0u8; 16];
    for (i, byte) in id.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&text[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(Uuid(id))
}

impl PartitionMetadata {
    /// Kafka's two lines, ringlog's creation offset, and a CRC32C of the lines above it (a
    /// flipped bit must not name another topic: the folder would be taken for a deleted
    /// topic's and removed).
    fn encode(&self) -> String {
        let body = format!(
            "version: 0\ntopic_id: {}\ncreated.below.metadata.offset: {}\n",
            hex(self.topic_id),
            self.created_below_offset
        );
        let crc = ringlog_engine::crc::crc32c(body.as_bytes());
        format!("{body}crc32c: {crc}\n")
    }

    /// `None` for a file that does not parse or whose checksum does not match; a file without
    /// the checksum line (written before 2026-12-03) is read as it is.
    fn decode(text: &str) -> Option<PartitionMetadata> {
        let text = match text.find("crc32c:") {
            None => text,
            Some(at) => {
                let (body, line) = text.split_at(at);
                let crc: u32 = line
                    .strip_prefix("crc32c: ")?
                    .strip_suffix('\n')?
                    .parse()
                    .ok()?;
                if ringlog_engine::crc::crc32c(body.as_bytes()) != crc {
                    return None;
                }
                body
            }
        };
        let mut topic_id = None;
        let mut created_below_offset = None;
        for line in text.lines() {
            match line.split_once(':').map(|(k, v)| (k.trim(), v.trim())) {
                Some(("version", "0")) => {}
                Some(("topic_id", v)) => topic_id = parse_hex_id(v),
                Some(("created.below.metadata.offset", v)) => created_below_offset = v.parse().ok(),
                _ => return None,
            }
        }
        Some(PartitionMetadata {
            topic_id: topic_id?,
            created_below_offset: created_below_offset?,
        })
    }

    fn read(dir: &Path) -> Option<PartitionMetadata> {
        let text = std::fs::read_to_string(dir.join(PARTITION_METADATA_FILE)).ok()?;
        PartitionMetadata::decode(&text)
    }

    /// tmp + fsync + rename, so a crash leaves the old file or the new one; the folder is
    /// synced after the rename when `sync_folder` (a folder just created leaves it to the
    /// log's recovery, which syncs the folder and its parent next: `prepare_partition_dir`).
    fn write(&self, dir: &Path, sync_folder: bool) -> std::io::Result<()> {
        use std::io::Write;
        let tmp = dir.join(format!("{PARTITION_METADATA_FILE}.tmp"));
        let mut file = std::fs::File::create(&tmp)?;
        file.write_all(self.encode().as_bytes())?;
        file.sync_all()?;
        std::fs::rename(&tmp, dir.join(PARTITION_METADATA_FILE))?;
        if sync_folder {
            std::fs::File::open(dir)?.sync_all()?;
        }
        Ok(())
    }
}

/// Creates a new partition folder `dir` (its parent exists) with its `partition.metadata`,
/// leaving both to be made durable by the caller, which syncs many folders at once
/// (folder_prep.rs). Returns the file and the folder, open, for that sync; an `AlreadyExists`
/// error if the folder is there (then `prepare_partition_dir` decides what it is).
pub(super) fn create_partition_dir_unsynced(
    dir: &Path,
    topic_id: Uuid,
    created_below_offset: u64,
) -> std::io::Result<(std::fs::File, std::fs::File)> {
    use std::io::Write;
    std::fs::create_dir(dir)?;
    let mut file = std::fs::File::create(dir.join(PARTITION_METADATA_FILE))?;
    file.write_all(
        PartitionMetadata {
            topic_id,
            created_below_offset,
        }
        .encode()
        .as_bytes(),
    )?;
    Ok((file, std::fs::File::open(dir)?))
}

/// The topic id a partition folder's `partition.metadata` names, if readable.
pub(super) fn folder_topic_id(dir: &Path) -> Option<Uuid> {
    PartitionMetadata::read(dir).map(|m| m.topic_id)
}

/// The name a partition folder `name` (`<topic>-<partition>`) takes while it waits to be
/// removed: `<topic>-<partition>.<topic id>-delete`, with the topic cut so that the whole stays
/// within 255 bytes, the longest file name Linux allows (a 249-character topic, Kafka's limit,
/// would overflow it by 36 bytes). Kafka's `LocalLog.logDeleteDirName` cuts the same way; the
/// partition and the topic id keep names apart.
fn doomed_name(name: &str, topic_id: Uuid) -> String {
    const NAME_MAX_BYTES: usize = 255;
    let tail = format!(".{}{DELETE_SUFFIX}", hex(topic_id));
    let (topic, suffix) = match name.rsplit_once('-') {
        Some((topic, partition)) => (topic, format!("-{partition}{tail}")),
        None => (name, tail),
    };
    let mut keep = NAME_MAX_BYTES.saturating_sub(suffix.len()).min(topic.len());
    while !topic.is_char_boundary(keep) {
        keep -= 1;
    }
    format!("{}{suffix}", &topic[..keep])
}

/// Renames `dir` to `<name>.<topic id>-delete` (the parent fsynced, so a restart never sees
/// the old name again) and removes it on a background thread: a big partition's files must
/// not stall the event loop. A crash before the removal ends leaves a `-delete` folder that the
/// next start removes.
pub(super) fn remove_partition_dir(dir: &Path, topic_id: Uuid) -> std::io::Result<()> {
    let Some(name) = dir.file_name().and_then(|n| n.to_str()) else {
        return Ok(());
    };
    let parent = dir.parent().unwrap_or(Path::new("."));
    let doomed = parent.join(doomed_name(name, topic_id));
    if doomed.exists() {
        std::fs::remove_dir_all(&doomed)?;
    }
    std::fs::rename(dir, &doomed)?;
    std::fs::File::open(parent)?.sync_all()?;
    tracing::info!(dir = %dir.display(), "partition folder renamed for deletion");
    std::thread::spawn(move || {
        if let Err(error) = std::fs::remove_dir_all(&doomed) {
            tracing::warn!(%error, dir = %doomed.display(), "removing a deleted partition");
        }
    });
    Ok(())
}

/// Makes `dir` ready for a partition of the topic `topic_id` (see the module's table);
/// `created_below_offset` is the topic image's applied offset, written into the folder's
/// `partition.metadata`.
pub(super) fn prepare_partition_dir(
    host: &mut Host<AnyIo>,
    dir: &Path,
    topic_id: Uuid,
    created_below_offset: u64,
) -> Result<(), NodeError> {
    if dir.exists() {
        match PartitionMetadata::read(dir) {
            Some(found) if found.topic_id == topic_id => return Ok(()),
            Some(found) => {
                // An older topic of the same name: the image holds a newer one, so the old
                // one was deleted.
                tracing::warn!(dir = %dir.display(), "folder of a deleted topic of this name");
                host.discard_preopened(Some(dir));
                remove_partition_dir(dir, found.topic_id).map_err(NodeError::Runtime)?;
            }
            None if dir.join(PARTITION_METADATA_FILE).exists() => {
                // Damaged (its checksum does not match): the folder has this topic
                // partition's name, and a deleted topic's folder is renamed before the
                // topic goes, so it is this topic's. Written again from the image below.
                tracing::warn!(
                    dir = %dir.display(),
                    "damaged {PARTITION_METADATA_FILE}: written again from the metadata image"
                );
            }
            None => {}
        }
    }
    // A folder created here is made durable by the log's recovery, which the partition's
    // start runs next (`Host::add_partition`: no preopened store can exist for a folder that
    // did not): it syncs the folder and its parent (`PartitionLog::open`). Until 2026-12-06
    // this function synced both first as well, five fsyncs per new partition where three do.
    // A crash before then leaves the folder without its `partition.metadata`, or no folder,
    // and the next start writes them again from the image (the `None` case above).
    let created = !dir.exists();
    std::fs::create_dir_all(dir).map_err(NodeError::Runtime)?;
    PartitionMetadata {
        topic_id,
        created_below_offset,
    }
    .write(dir, !created)
    .map_err(NodeError::Runtime)
}

/// Removes the leftovers of earlier runs in `metadata_log_dir` (see the module's table): at
/// the first apply after start (`swept` still `None`) the `-delete` folders and the list of
/// unclaimed partition folders, then each unclaimed folder once the applied metadata
/// (`applied`, the topic image's applied offset) passed its creation.
pub(super) fn sweep_leftovers(
    swept: &mut Option<Leftovers>,
    host: &mut Host<AnyIo>,
    metadata_log_dir: &Path,
    applied: u64,
) -> Result<(), NodeError> {
    if swept.is_none() {
        let mut leftovers = Leftovers::default();
        let running: Vec<PathBuf> = host.stores().map(|(_, s)| s.dir.clone()).collect();
        let entries = std::fs::read_dir(metadata_log_dir).map_err(NodeError::Runtime)?;
        for entry in entries.flatten() {
            let path = entry.path();
            if !path.is_dir() || running.contains(&path) {
                continue;
            }
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.ends_with(DELETE_SUFFIX) {
                tracing::info!(dir = %path.display(), "removing a folder left by a deletion");
                std::fs::remove_dir_all(&path).map_err(NodeError::Runtime)?;
            } else if let Some(found) = PartitionMetadata::read(&path) {
                leftovers.candidates.push(Candidate {
                    dir: path,
                    topic_id: found.topic_id,
                    created_below_offset: found.created_below_offset,
                });
            }
        }
        *swept = Some(leftovers);
    }
    let running: Vec<PathBuf> = host.stores().map(|(_, s)| s.dir.clone()).collect();
    let Some(leftovers) = swept.as_mut() else {
        return Ok(());
    };
    let mut doomed = Vec::new();
    leftovers.candidates.retain(|c| {
        if running.contains(&c.dir) {
            return false;
        }
        if applied >= c.created_below_offset {
            doomed.push((c.dir.clone(), c.topic_id));
            return false;
        }
        true
    });
    for (dir, topic_id) in doomed {
        tracing::warn!(dir = %dir.display(), "folder of a topic deleted while this node was away");
        host.discard_preopened(Some(&dir));
        remove_partition_dir(&dir, topic_id).map_err(NodeError::Runtime)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_metadata_round_trips_and_rejects_junk() {
        let m = PartitionMetadata {
            topic_id: Uuid([0xab; 16]),
            created_below_offset: 42,
        };
        assert_eq!(PartitionMetadata::decode(&m.encode()), Some(m));
        for junk in [
            "",
            "version: 0\ntopic_id: xyz\ncreated.below.metadata.offset: 1\n",
            "version: 1\ntopic_id: abababababababababababababababab\ncreated.below.metadata.offset: 1\n",
            "version: 0\ntopic_id: abababababababababababababababab\n",
        ] {
            assert_eq!(PartitionMetadata::decode(junk), None, "{junk:?}");
        }
        // Every bit flipped is caught: none reads as another topic (or offset).
        let good = PartitionMetadata {
            topic_id: Uuid([0xab; 16]),
            created_below_offset: 42,
        }
        .encode()
        .into_bytes();
        for byte in 0..good.len() {
            for bit in 0..8 {
                let mut flipped = good.clone();
                flipped[byte] ^= 1 << bit;
                if let Ok(text) = std::str::from_utf8(&flipped) {
                    assert_eq!(
                        PartitionMetadata::decode(text),
                        None,
                        "byte {byte} bit {bit}: {text:?}"
                    );
                }
            }
        }
    }

    /// A topic of Kafka's longest name (249 characters) is deleted like any other: before,
    /// its folder's rename failed with ENAMETOOLONG and the node exited on it, so one
    /// DeleteTopics from any client stopped every node.
    #[test]
    fn a_folder_of_the_longest_topic_name_is_removed_too() {
        let id = Uuid([2; 16]);
        assert_eq!(doomed_name("t-0", id), format!("t-0.{}-delete", hex(id)));
        let topic = "x".repeat(249);
        let names: Vec<String> = [0, 1, 12345]
            .iter()
            .map(|p| doomed_name(&format!("{topic}-{p}"), id))
            .collect();
        for name in &names {
            assert!(name.len() <= 255, "{} bytes", name.len());
            assert!(name.ends_with(DELETE_SUFFIX));
        }
        assert_ne!(names[0], names[1], "partitions stay apart");
        let parent = std::env::temp_dir().join(format!("ringlog-long-{}", std::process::id()));
        let dir = parent.join(format!("{topic}-0"));
        std::fs::create_dir_all(&dir).unwrap();
        remove_partition_dir(&dir, id).unwrap();
        assert!(!dir.exists());
        let _ = std::fs::remove_dir_all(&parent);
    }

    #[test]
    fn a_removed_folder_is_renamed_at_once() {
        let parent = std::env::temp_dir().join(format!("ringlog-del-{}", std::process::id()));
        let dir = parent.join("t-0");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("00000000000000000000.log"), b"x").unwrap();
        remove_partition_dir(&dir, Uuid([1; 16])).unwrap();
        // The old name is gone before the call returns (the removal itself is in the
        // background): a restart can never open it again.
        assert!(!dir.exists());
        let _ = std::fs::remove_dir_all(&parent);
    }
}
