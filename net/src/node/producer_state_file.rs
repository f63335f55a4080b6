//! The producer-state encoding: a partition's committed producer state (producer_state.rs) at
//! an offset, as the `ProducerState` record every KIP-630 snapshot of a topic partition carries
//! (docs/snapshots.md, "Producer state"), and as the partition folder's `producer-state` file
//! (Kafka's producer-state snapshots, `ProducerStateManager.takeSnapshot`, one file instead of
//! one per segment), which the node saves every 50,000 committed records without fsync
//! ([`write_unsynced`], idempotence.rs) so that a restart reads only the log after it.
//!
//! ```text
//! magic "RLPS" | version u16 = 1 | offset u64 | batch count u32
//! count × ( producer_id i64 | producer_epoch i16 | base_sequence i32 | last_sequence i32
//!           | base_offset u64 | last_offset u64 | max_timestamp i64 )   (42 bytes each, log order)
//! crc32c u32 of everything before it                       (all big-endian)
//! ```
//!
//! `offset` is where the state stands: it holds every producer's remembered batches (up to
//! five, producer_state.rs) among the batches below it. In a snapshot it is the snapshot's end
//! offset; the snapshot is frozen before the log start can move to it, so the state is durable
//! before the batches it was read from go, and it is written with the snapshot (the writer
//! thread for a state machine's, the empty snapshot's write for a cut) rather than with a
//! write and two fsyncs of its own on the event loop, as the file was until 2026-12-03. In the
//! file it is an offset both committed (never truncated away) and durable on this node when the
//! file was saved; unsynced, a crash may leave an older file or a torn one (checksum: not
//! trusted), never one that reads as another state.
//!
//! Read when the partition's producer state is read (start-up, or its first idempotent
//! Produce), from the newer of the two that stands inside the log:
//!
//! | snapshot's state / file (`<topic>-<partition>/producer-state`) | state |
//! | --- | --- |
//! | absent, or bad magic, version, length or checksum (warned) | not trusted |
//! | offset below the log start (a snapshot installed from the leader replaced the log) | not trusted |
//! | offset above the log end (this log lost its unflushed tail) | not trusted |
//! | log start ≤ offset ≤ log end | its batches, then the log from `offset` |
//! | neither trusted | read from the log start |
//!
//! A producer not in the state is unknown, and Kafka accepts an unknown producer's batch at any
//! sequence (producer_state.rs), so a state not trusted never refuses a producer: it only loses
//! the duplicate check of the batches that were removed from the log.

use std::path::{Path, PathBuf};

/// The file's name in the partition folder.
pub const PRODUCER_STATE_FILE: &str = "producer-state";
const MAGIC: &[u8; 4] = b"RLPS";
const VERSION: u16 = 1;
const HEADER_BYTES: usize = 4 + 2 + 8 + 4;
const BATCH_BYTES: usize = 8 + 2 + 4 + 4 + 8 + 8 + 8;
const CRC_BYTES: usize = 4;

/// A batch's producer fields and where it landed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProducerBatch {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub last_sequence: i32,
    pub base_offset: u64,
    pub last_offset: u64,
    /// The batch's MaxTimestamp: when the producer was last seen, for
    /// `producer.id.expiration.ms`.
    pub max_timestamp: i64,
}

/// The state a file holds: the offset it stands at and the remembered batches below it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SavedProducerState {
    pub offset: u64,
    /// In log order.
    pub batches: Vec<ProducerBatch>,
}

#[derive(Debug, thiserror::Error)]
pub enum ProducerStateFileError {
    #[error("producer-state file {path}: {reason}")]
    Corrupt { path: PathBuf, reason: &'static str },
    #[error("producer-state file {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// The file's bytes.
pub fn encode(state: &SavedProducerState) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(HEADER_BYTES + state.batches.len() * BATCH_BYTES + 4);
    bytes.extend_from_slice(MAGIC);
    bytes.extend_from_slice(&VERSION.to_be_bytes());
    bytes.extend_from_slice(&state.offset.to_be_bytes());
    let count = u32::try_from(state.batches.len()).expect("fewer than 2^32 batches");
    bytes.extend_from_slice(&count.to_be_bytes());
    for b in &state.batches {
        bytes.extend_from_slice(&b.producer_id.to_be_bytes());
        bytes.extend_from_slice(&b.producer_epoch.to_be_bytes());
        bytes.extend_from_slice(&b.base_sequence.to_be_bytes());
        bytes.extend_from_slice(&b.last_sequence.to_be_bytes());
        bytes.extend_from_slice(&b.base_offset.to_be_bytes());
        bytes.extend_from_slice(&b.last_offset.to_be_bytes());
        bytes.extend_from_slice(&b.max_timestamp.to_be_bytes());
    }
    let crc = ringlog_engine::crc::crc32c(&bytes);
    bytes.extend_from_slice(&crc.to_be_bytes());
    bytes
}

/// Reads a file's bytes; anything short of a whole, checksummed file is refused (`reason`).
pub fn decode(bytes: &[u8]) -> Result<SavedProducerState, &'static str> {
    if bytes.len() < HEADER_BYTES + CRC_BYTES {
        return Err("shorter than its header");
    }
    let (body, crc) = bytes.split_at(bytes.len() - CRC_BYTES);
    let crc = u32::from_be_bytes(crc.try_into().expect("4 bytes"));
    if ringlog_engine::crc::crc32c(body) != crc {
        return Err("checksum mismatch");
    }
    if &body[..4] != MAGIC {
        return Err("not a producer-state file (magic)");
    }
    let mut at = 4;
    let mut take = |n: usize| {
        let slice = &body[at..at + n];
        at += n;
        slice
    };
    let version = u16::from_be_bytes(take(2).try_into().expect("2 bytes"));
    if version != VERSION {
        return Err("unknown version");
    }
    let offset = u64::from_be_bytes(take(8).try_into().expect("8 bytes"));
    let count = u32::from_be_bytes(take(4).try_into().expect("4 bytes")) as usize;
    if body.len() != HEADER_BYTES + count.saturating_mul(BATCH_BYTES) {
        return Err("length does not match its batch count");
    }
    let mut batches = Vec::with_capacity(count);
    for _ in 0..count {
        let producer_id = i64::from_be_bytes(take(8).try_into().expect("8 bytes"));
        let producer_epoch = i16::from_be_bytes(take(2).try_into().expect("2 bytes"));
        let base_sequence = i32::from_be_bytes(take(4).try_into().expect("4 bytes"));
        let last_sequence = i32::from_be_bytes(take(4).try_into().expect("4 bytes"));
        let base_offset = u64::from_be_bytes(take(8).try_into().expect("8 bytes"));
        let last_offset = u64::from_be_bytes(take(8).try_into().expect("8 bytes"));
        let max_timestamp = i64::from_be_bytes(take(8).try_into().expect("8 bytes"));
        // What the checksum cannot vouch for: a writer's bug. The state is only trusted whole.
        if producer_id < 0
            || base_sequence < 0
            || last_sequence < 0
            || last_offset < base_offset
            || last_offset >= offset
            || batches
                .last()
                .is_some_and(|p: &ProducerBatch| p.last_offset >= base_offset)
        {
            return Err("a batch out of place");
        }
        batches.push(ProducerBatch {
            producer_id,
            producer_epoch,
            base_sequence,
            last_sequence,
            base_offset,
            last_offset,
            max_timestamp,
        });
    }
    Ok(SavedProducerState { offset, batches })
}

/// Writes `state` into partition folder `dir`, durably: a temporary file, fsynced, renamed over
/// the old one, the folder fsynced. Tests write one as a node leaves it (the node itself uses
/// [`write_unsynced`]).
#[cfg(test)]
pub fn write(dir: &Path, state: &SavedProducerState) -> Result<(), ProducerStateFileError> {
    let path = dir.join(PRODUCER_STATE_FILE);
    let part = dir.join(format!("{PRODUCER_STATE_FILE}.part"));
    let io = |source| ProducerStateFileError::Io {
        path: path.clone(),
        source,
    };
    use std::io::Write;
    let bytes = encode(state);
    let mut file = std::fs::File::create(&part).map_err(io)?;
    file.write_all(&bytes).map_err(io)?;
    file.sync_all().map_err(io)?;
    drop(file);
    std::fs::rename(&part, &path).map_err(io)?;
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io)?;
    Ok(())
}

/// Writes `state` into partition folder `dir` without waiting for the disk (the node's periodic
/// save, idempotence.rs): over the old file's bytes, in place, then cut to the new length if it
/// shrank. A crash may leave the old file, the new one, or a mix that fails its checksum (the
/// checksum is the last four bytes, over everything before them) and is not trusted; never a
/// file that reads as another state.
///
/// In place, not a temporary file renamed over the old one as until 2026-12-06: the rename
/// dropped the old file's inode on the event loop, and on a filesystem mounted with `discard`
/// (this machine's ext4) freeing its block waits for the device's discard. Off-CPU samples of
/// a node under a 20-partition load had the loop thread blocked there 121 times in 5 s, in
/// `blkdev_issue_discard` under `rename` (docs/benchmarks.md, "Where the loop blocked").
pub fn write_unsynced(
    dir: &Path,
    state: &SavedProducerState,
) -> Result<(), ProducerStateFileError> {
    use std::os::unix::fs::FileExt;
    let path = dir.join(PRODUCER_STATE_FILE);
    let io = |source| ProducerStateFileError::Io {
        path: path.clone(),
        source,
    };
    let bytes = encode(state);
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(io)?;
    file.write_all_at(&bytes, 0).map_err(io)?;
    if file.metadata().map_err(io)?.len() > bytes.len() as u64 {
        file.set_len(bytes.len() as u64).map_err(io)?;
    }
    Ok(())
}

/// Removes the file of partition folder `dir` (none there is no error): a file the log start
/// passed can never be used again, since the log start only moves up.
pub fn remove(dir: &Path) -> Result<(), ProducerStateFileError> {
    let path = dir.join(PRODUCER_STATE_FILE);
    match std::fs::remove_file(&path) {
        Ok(()) => Ok(()),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(ProducerStateFileError::Io { path, source }),
    }
}

/// Reads the file of partition folder `dir`: `Ok(None)` when there is none.
pub fn read(dir: &Path) -> Result<Option<SavedProducerState>, ProducerStateFileError> {
    let path = dir.join(PRODUCER_STATE_FILE);
    let bytes = match std::fs::read(&path) {
        Ok(bytes) => bytes,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(ProducerStateFileError::Io { path, source }),
    };
    decode(&bytes)
        .map(Some)
        .map_err(|reason| ProducerStateFileError::Corrupt { path, reason })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state() -> SavedProducerState {
        let batch = |producer_id, base_sequence, base_offset| ProducerBatch {
            producer_id,
            producer_epoch: 2,
            base_sequence,
            last_sequence: base_sequence + 4,
            base_offset,
            last_offset: base_offset + 4,
            max_timestamp: 1_800_000_000_000 + base_offset as i64,
        };
        SavedProducerState {
            offset: 100,
            batches: vec![batch(7, 0, 10), batch(9, 0, 15), batch(7, 5, 20)],
        }
    }

    #[test]
    fn a_saved_state_reads_back() {
        let dir = tempfile::tempdir().unwrap();
        assert!(read(dir.path()).unwrap().is_none());
        write(dir.path(), &state()).unwrap();
        assert_eq!(read(dir.path()).unwrap(), Some(state()));
        assert!(!dir.path().join("producer-state.part").exists());
    }

    /// The node's save writes over the same file (its inode stays: no block of an old inode is
    /// freed on the event loop), longer or shorter than before, and reads back exactly.
    #[test]
    fn an_unsynced_save_overwrites_the_file_in_place() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(PRODUCER_STATE_FILE);
        let mut shorter = state();
        shorter.batches.truncate(1);
        write_unsynced(dir.path(), &shorter).unwrap();
        let inode = std::fs::metadata(&path).unwrap().ino();
        write_unsynced(dir.path(), &state()).unwrap();
        assert_eq!(read(dir.path()).unwrap(), Some(state()));
        write_unsynced(dir.path(), &shorter).unwrap();
        assert_eq!(read(dir.path()).unwrap(), Some(shorter.clone()));
        assert_eq!(std::fs::metadata(&path).unwrap().ino(), inode);
        assert_eq!(
            std::fs::metadata(&path).unwrap().len(),
            encode(&shorter).len() as u64
        );
    }

    /// A crash between the in-place write of a shorter state and the cut leaves the new bytes
    /// followed by the old file's tail: never trusted (its last four bytes are the old
    /// checksum, over other bytes).
    #[test]
    fn a_shorter_save_not_yet_cut_is_not_trusted() {
        let mut shorter = state();
        shorter.batches.truncate(1);
        let mut mixed = encode(&state());
        let new = encode(&shorter);
        mixed[..new.len()].copy_from_slice(&new);
        assert_eq!(decode(&mixed), Err("checksum mismatch"));
    }

    /// Every single bit flipped anywhere in the file, and every truncation, is detected: a
    /// corrupt file is never trusted.
    #[test]
    fn every_flipped_bit_and_every_truncation_is_detected() {
        let bytes = encode(&state());
        for bit in 0..bytes.len() * 8 {
            let mut flipped = bytes.clone();
            flipped[bit / 8] ^= 1 << (bit % 8);
            assert!(
                decode(&flipped).is_err(),
                "bit {bit} flipped went unnoticed"
            );
        }
        for len in 0..bytes.len() {
            assert!(
                decode(&bytes[..len]).is_err(),
                "cut at {len} went unnoticed"
            );
        }
        let dir = tempfile::tempdir().unwrap();
        let mut flipped = bytes.clone();
        flipped[HEADER_BYTES + 3] ^= 0x10;
        std::fs::write(dir.path().join(PRODUCER_STATE_FILE), flipped).unwrap();
        assert!(matches!(
            read(dir.path()),
            Err(ProducerStateFileError::Corrupt { .. })
        ));
    }

    /// A well-checksummed file whose batches could not come from a log (a writer's bug) is
    /// refused too.
    #[test]
    fn a_checksummed_file_with_batches_out_of_place_is_refused() {
        let mut bad = state();
        bad.batches.swap(0, 2);
        assert_eq!(decode(&encode(&bad)), Err("a batch out of place"));
        let mut above = state();
        above.offset = 20;
        assert_eq!(decode(&encode(&above)), Err("a batch out of place"));
    }
}
