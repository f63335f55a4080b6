//! Opening a partition log: scan every segment, decide what each damaged tail means, and make
//! the outcome durable before the first append.
//!
//! ## Inputs of the decision, per segment
//!
//! - **role**: `Sealed` (a later segment exists, so this one was completely durable before the
//!   later one was created) or `Last`.
//! - **mark**: `Known` when the last segment has a `.tail` file: its *trusted* slot gives the
//!   *durable mark*. The slot and its flush's full blocks are written concurrently, so the
//!   trusted slot is the newest valid one if the blocks it records match their CRC32C, else (its
//!   flush never finished, and no confirmation record names it) the previous slot, whose flush
//!   completed before the newest started. Every byte below the mark is on the disk; bytes past
//!   it belong to at most one unfinished flush. A confirmed flush whose blocks no longer match,
//!   or a confirmation naming a slot newer than any valid one, refuses before the table.
//!   `Unknown` otherwise (a sealed segment, or a last segment whose `.tail` is gone, e.g. after
//!   a seal).
//! - **stop**: how the batch scan (frame, CRC, offset continuity, epoch order) ended: `Clean`
//!   (end of file, or only zero bytes after the last batch), `Incomplete` (the last batch runs
//!   past the end of the data) or `Invalid` (bad length, magic, CRC, offsets or epoch).
//! - **position**: whether the valid prefix ends `Below` the durable mark or `AtOrAbove` it
//!   (always `AtOrAbove` for an unknown mark).
//! - **valid_after**: whether a valid batch exists after the point where the scan stopped.
//! - **below_floor**: whether cutting at the end of the valid prefix would go below the caller's
//!   floor (the high-watermark).
//!
//! ## The table (`RECOVERY_CASES`; every situation matches exactly one row, tested)
//!
//! | # | role | mark | stop | position | valid after | below floor | action |
//! |---|------|------|------|----------|-------------|-------------|--------|
//! | 1 | any | any | Clean | AtOrAbove | any | any | keep: clean end |
//! | 2 | any | any | any | Below | any | any | refuse: acknowledged bytes below the durable mark are damaged |
//! | 3 | Sealed | any | Incomplete, Invalid | AtOrAbove | any | any | refuse: interior corruption in a sealed segment |
//! | 4 | Last | Known | Incomplete, Invalid | AtOrAbove | any | no | truncate: an unfinished flush past the durable mark (a torn multi-block write may leave holes, so a valid batch after it proves nothing) |
//! | 5 | Last | Known | Incomplete, Invalid | AtOrAbove | any | yes | refuse: below the floor |
//! | 6 | Last | Unknown | Incomplete, Invalid | AtOrAbove | yes | any | refuse: a bad batch followed by a valid one is interior corruption |
//! | 7 | Last | Unknown | Incomplete, Invalid | AtOrAbove | no | no | truncate: torn final write |
//! | 8 | Last | Unknown | Incomplete, Invalid | AtOrAbove | no | yes | refuse: below the floor |
//!
//! Before the table: a segment whose base offset does not continue the previous segment's end,
//! a `.tail` file without any valid slot, blocks of the last flush that no longer match the CRC
//! in its slot, or a read error (EIO is corruption) refuses to open
//! with the path. After it: the last segment's end is made durable in the tail-slot way (a new
//! slot holding the partial last block, then the `.log` cut at the block boundary), indexes that
//! are missing or disagree are rewritten, the leader-epoch-checkpoint is rebuilt from the
//! batches' epochs if it disagrees, and leftover `*.tmp` and orphan files are removed.

use std::path::{Path, PathBuf};

use bytes::Bytes;

use super::blocking;
use super::index::SparseIndex;
use super::segment::{self, BatchEntry, Chunk, Segment, round_down, round_up};
use super::tail_slot;
use super::{LogConfig, LogError, PartitionLog};
use crate::batch::{BatchChainValidator, BatchIter, RecordBatch};
use crate::epoch_cache::{LEADER_EPOCH_CHECKPOINT_FILE_NAME, LeaderEpochCache};
use crate::io::{AlignedBuf, Completion, FileId, Io, OpenOptions};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SegmentRole {
    Sealed,
    Last,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DurableMark {
    Known,
    Unknown,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScanStop {
    Clean,
    Incomplete,
    Invalid,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MarkPosition {
    Below,
    AtOrAbove,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecoveryAction {
    Keep,
    TruncateTornTail,
    RefuseInteriorCorruption,
    RefuseBelowFloor,
}

/// One situation, as measured on a segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecoverySituation {
    pub role: SegmentRole,
    pub mark: DurableMark,
    pub stop: ScanStop,
    pub position: MarkPosition,
    pub valid_after: bool,
    pub below_floor: bool,
}

/// One row: each field lists the values it matches.
#[derive(Debug)]
pub struct RecoveryCase {
    pub row: u8,
    pub role: &'static [SegmentRole],
    pub mark: &'static [DurableMark],
    pub stop: &'static [ScanStop],
    pub position: &'static [MarkPosition],
    pub valid_after: &'static [bool],
    pub below_floor: &'static [bool],
    pub action: RecoveryAction,
    pub why: &'static str,
}

use DurableMark::{Known, Unknown};
use MarkPosition::{AtOrAbove, Below};
use RecoveryAction::{Keep, RefuseBelowFloor, RefuseInteriorCorruption, TruncateTornTail};
use ScanStop::{Clean, Incomplete, Invalid};
use SegmentRole::{Last, Sealed};

const ANY_ROLE: &[SegmentRole] = &[Sealed, Last];
const ANY_MARK: &[DurableMark] = &[Known, Unknown];
const ANY_STOP: &[ScanStop] = &[Clean, Incomplete, Invalid];
const DAMAGED: &[ScanStop] = &[Incomplete, Invalid];
const ANY_BOOL: &[bool] = &[false, true];

#[rustfmt::skip]
pub const RECOVERY_CASES: &[RecoveryCase] = &[
    RecoveryCase { row: 1, role: ANY_ROLE, mark: ANY_MARK, stop: &[Clean], position: &[AtOrAbove], valid_after: ANY_BOOL, below_floor: ANY_BOOL, action: Keep, why: "clean end" },
    RecoveryCase { row: 2, role: ANY_ROLE, mark: ANY_MARK, stop: ANY_STOP, position: &[Below], valid_after: ANY_BOOL, below_floor: ANY_BOOL, action: RefuseInteriorCorruption, why: "bytes below the durable mark (acknowledged) are damaged or missing" },
    RecoveryCase { row: 3, role: &[Sealed], mark: ANY_MARK, stop: DAMAGED, position: &[AtOrAbove], valid_after: ANY_BOOL, below_floor: ANY_BOOL, action: RefuseInteriorCorruption, why: "a sealed segment is damaged (it was durable before the next segment existed)" },
    RecoveryCase { row: 4, role: &[Last], mark: &[Known], stop: DAMAGED, position: &[AtOrAbove], valid_after: ANY_BOOL, below_floor: &[false], action: TruncateTornTail, why: "an unfinished flush past the durable mark" },
    RecoveryCase { row: 5, role: &[Last], mark: &[Known], stop: DAMAGED, position: &[AtOrAbove], valid_after: ANY_BOOL, below_floor: &[true], action: RefuseBelowFloor, why: "the torn tail starts below the high-watermark floor" },
    RecoveryCase { row: 6, role: &[Last], mark: &[Unknown], stop: DAMAGED, position: &[AtOrAbove], valid_after: &[true], below_floor: ANY_BOOL, action: RefuseInteriorCorruption, why: "a bad batch followed by a valid batch is interior corruption" },
    RecoveryCase { row: 7, role: &[Last], mark: &[Unknown], stop: DAMAGED, position: &[AtOrAbove], valid_after: &[false], below_floor: &[false], action: TruncateTornTail, why: "a torn final write" },
    RecoveryCase { row: 8, role: &[Last], mark: &[Unknown], stop: DAMAGED, position: &[AtOrAbove], valid_after: &[false], below_floor: &[true], action: RefuseBelowFloor, why: "the torn tail starts below the high-watermark floor" },
];

impl RecoveryCase {
    pub fn matches(&self, situation: &RecoverySituation) -> bool {
        self.role.contains(&situation.role)
            && self.mark.contains(&situation.mark)
            && self.stop.contains(&situation.stop)
            && self.position.contains(&situation.position)
            && self.valid_after.contains(&situation.valid_after)
            && self.below_floor.contains(&situation.below_floor)
    }
}

/// The row for a situation (the table is exhaustive and disjoint: see the tests).
pub fn decide(situation: &RecoverySituation) -> &'static RecoveryCase {
    let mut matching = RECOVERY_CASES.iter().filter(|case| case.matches(situation));
    let case = matching
        .next()
        .expect("the recovery table covers every situation");
    debug_assert!(
        matching.next().is_none(),
        "the recovery table rows are disjoint"
    );
    case
}

/// What recovery found and did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    pub segments_scanned: usize,
    pub batches_recovered: usize,
    pub log_start_offset: i64,
    pub log_end_offset: i64,
    /// The durable mark of the last segment's tail file, if it had one.
    pub durable_mark: Option<DurableMarkFound>,
    /// A torn tail that was cut (never below the floor).
    pub truncated: Option<TornTailTruncation>,
    /// Segments (base offsets) whose `.index` was missing, damaged or wrong and was rewritten.
    pub indexes_rebuilt: Vec<i64>,
    pub epoch_checkpoint_rewritten: bool,
    /// Leftover files removed (`*.tmp`, stale or orphan `.tail`/`.index`).
    pub files_removed: Vec<String>,
    /// The newest tail slot's flush had not finished (its blocks are not all there and it
    /// was never confirmed): recovery used the previous slot. The slot's sequence.
    pub unfinished_flush_slot: Option<u64>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DurableMarkFound {
    pub segment_base_offset: i64,
    pub slot_sequence: u64,
    pub position: u64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TornTailTruncation {
    pub segment_base_offset: i64,
    /// Where the segment now ends.
    pub position: u64,
    /// The log end offset after the cut.
    pub log_end_offset: i64,
    /// Non-zero bytes dropped after `position`.
    pub bytes_discarded: u64,
    pub row: u8,
}

/// The result of scanning one segment image.
struct Scan {
    entries: Vec<(BatchEntry, i32, u64)>,
    valid_end: u64,
    next_offset: i64,
    last_epoch: i32,
    stop: ScanStop,
    stop_position: u64,
    stop_reason: String,
}

impl PartitionLog {
    /// Open (creating the folder if needed) and recover the log in `dir`. Never truncates below
    /// nothing: see [`PartitionLog::open_with_floor`] to protect a known high-watermark.
    pub fn open<I: Io>(
        io: &mut I,
        dir: &Path,
        config: LogConfig,
    ) -> Result<(PartitionLog, RecoveryReport), LogError> {
        Self::open_with_floor(io, dir, config, i64::MIN)
    }

    /// Open and recover, refusing (with [`LogError::TruncateBelowFloor`]) any recovery cut
    /// below `high_watermark_floor`.
    pub fn open_with_floor<I: Io>(
        io: &mut I,
        dir: &Path,
        config: LogConfig,
        high_watermark_floor: i64,
    ) -> Result<(PartitionLog, RecoveryReport), LogError> {
        assert!(
            config.segment_size_bytes >= 1 && config.segment_size_bytes <= (i32::MAX as u64),
            "segment_size_bytes must be in 1..=2^31-1 (index positions are 32-bit)"
        );
        let block = io.block_size_bytes();
        io.create_dir_all(dir)?;
        // The folder itself (and any parent just created) must survive a crash too.
        for ancestor in dir.ancestors() {
            if ancestor.as_os_str().is_empty() {
                break;
            }
            io.sync_dir(ancestor)?;
        }
        let mut report = RecoveryReport::default();
        let mut foreign: Vec<Completion> = Vec::new();
        let names = io.list_dir(dir)?;
        let mut bases: Vec<i64> = names
            .iter()
            .filter_map(|name| segment::parse_segment_file_name(name, "log"))
            .collect();
        bases.sort_unstable();
        for name in &names {
            let orphan = ["tail", "index"].iter().any(|extension| {
                segment::parse_segment_file_name(name, extension)
                    .is_some_and(|base| !bases.contains(&base))
            });
            if name.ends_with(".tmp") || orphan {
                io.remove_file(&dir.join(name))?;
                report.files_removed.push(name.clone());
            }
        }

        let mut log = PartitionLog {
            dir: dir.to_path_buf(),
            config,
            block_size_bytes: block,
            segments: Vec::new(),
            log_start_offset: 0,
            durable_end_offset: 0,
            epoch_cache: LeaderEpochCache::new(),
            epoch_cache_dirty: false,
            in_flight: None,
            confirming: None,
            confirmation_pending: None,
            spare_write_buf: None,
            flush_requested_offset: 0,
            generation: 0,
            stopped: None,
            foreign: Vec::new(),
        };
        let mut expected_next: Option<i64> = None;
        let mut last_epoch = crate::batch::NO_PARTITION_LEADER_EPOCH;
        for (position_in_list, &base) in bases.iter().enumerate() {
            let role = if position_in_list + 1 == bases.len() {
                SegmentRole::Last
            } else {
                SegmentRole::Sealed
            };
            let log_path = segment::segment_file_path(dir, base, "log");
            if let Some(expected) = expected_next
                && base != expected
            {
                return Err(LogError::Corruption {
                    path: log_path,
                    position: 0,
                    reason: format!(
                        "segment base offset {base} does not continue the previous segment's end offset {expected}"
                    ),
                });
            }
            let file = io.open(
                &log_path,
                OpenOptions {
                    direct: true,
                    ..Default::default()
                },
            )?;
            let mut image = read_for_recovery(io, file, &log_path, &mut foreign)?;
            report.segments_scanned += 1;

            // The durable mark (last segment only) and the overlay of its tail slot.
            let tail_path = segment::segment_file_path(dir, base, "tail");
            let mut tail_file: Option<FileId> = None;
            let mut mark = None;
            let mut slot_sequence = 0;
            let mut damaged_last_flush: Option<(u64, String)> = None;
            if io.exists(&tail_path) {
                if role == SegmentRole::Sealed {
                    io.remove_file(&tail_path)?;
                    report.files_removed.push(format!("{base:020}.tail"));
                } else {
                    let tail = io.open(
                        &tail_path,
                        OpenOptions {
                            direct: true,
                            ..Default::default()
                        },
                    )?;
                    let tail_bytes = read_for_recovery(io, tail, &tail_path, &mut foreign)?;
                    let slots = tail_slot::valid_slots_newest_first(&tail_bytes, block);
                    let confirmation = tail_slot::decode_confirmation(&tail_bytes, block);
                    let Some(newest) = slots.first() else {
                        return Err(LogError::Corruption {
                            path: tail_path,
                            position: 0,
                            reason: "tail file holds no valid slot".into(),
                        });
                    };
                    if let Some(confirmed) = confirmation
                        && confirmed.sequence > newest.sequence
                    {
                        // That slot's flush completed (the record is written only after), so a
                        // missing slot is damage to acknowledged bytes, not a torn write.
                        return Err(LogError::Corruption {
                            path: tail_path,
                            position: tail_slot::slot_offset(confirmed.sequence, block),
                            reason: format!(
                                "tail slot {} was confirmed durable but is damaged",
                                confirmed.sequence
                            ),
                        });
                    }
                    // Which slot to trust (docs/log.md, decision before the table):
                    //  - the newest, if the blocks its flush wrote are intact;
                    //  - else, if its flush was confirmed complete, the blocks are damaged
                    //    acknowledged data: refuse (below);
                    //  - else its flush never finished (its slot landed, its blocks did not all):
                    //    the previous slot, whose flush completed before this one started.
                    let slot = if newest.flushed_blocks_present(&image, block) {
                        newest.clone()
                    } else if let Some(previous) = slots.get(1)
                        && !newest.confirmed_by(confirmation)
                    {
                        report.unfinished_flush_slot = Some(newest.sequence);
                        previous.clone()
                    } else {
                        newest.clone()
                    };
                    // The trusted slot's flush completed (or this check just chose it), so
                    // blocks that no longer match its CRC are damaged acknowledged data.
                    if !slot.flushed_blocks_present(&image, block) {
                        damaged_last_flush = Some((
                            slot.flush_start_position,
                            format!(
                                "the blocks of the last flush [{}, {}) do not match the CRC32C recorded in tail slot {}",
                                slot.flush_start_position,
                                slot.block_start(block),
                                slot.sequence
                            ),
                        ));
                    }
                    let start = (slot.block_index as usize).saturating_mul(block);
                    let mark_position = slot.durable_mark(block);
                    if mark_position > log.config.segment_size_bytes + block as u64 {
                        return Err(LogError::Corruption {
                            path: tail_path,
                            position: tail_slot::slot_offset(slot.sequence, block),
                            reason: format!(
                                "durable mark {mark_position} lies past any segment size"
                            ),
                        });
                    }
                    if image.len() < start + slot.data.len() {
                        image.resize(start + slot.data.len(), 0);
                    }
                    image[start..start + slot.data.len()].copy_from_slice(&slot.data);
                    if report.unfinished_flush_slot.is_some() {
                        // Nothing past the previous slot's mark was acknowledged, and the blocks
                        // the unfinished flush wrote (its first one holds the bytes just repaired
                        // from the slot) may be torn in the file: end the segment at the mark, so
                        // the repaired block stays in the slot and memory, never read from the file.
                        image.truncate(mark_position as usize);
                    }
                    report.durable_mark = Some(DurableMarkFound {
                        segment_base_offset: base,
                        slot_sequence: slot.sequence,
                        position: mark_position,
                    });
                    mark = Some(mark_position);
                    slot_sequence = slot.sequence;
                    tail_file = Some(tail);
                }
            }

            let image = Bytes::from(image);
            let scan = scan_segment(&image, base, last_epoch, &log.config);
            if let Some((flush_start, reason)) = damaged_last_flush {
                // Name the first damaged batch when the scan finds it inside those blocks.
                let position = if scan.stop != ScanStop::Clean && scan.stop_position >= flush_start
                {
                    scan.stop_position
                } else {
                    flush_start
                };
                return Err(LogError::Corruption {
                    path: log_path,
                    position,
                    reason,
                });
            }
            let valid_after = scan.stop != ScanStop::Clean
                && has_valid_batch_after(
                    &image,
                    scan.stop_position + 1,
                    log.config.max_batch_size_bytes,
                );
            let situation = RecoverySituation {
                role,
                mark: if mark.is_some() {
                    DurableMark::Known
                } else {
                    DurableMark::Unknown
                },
                stop: scan.stop,
                position: if scan.valid_end < mark.unwrap_or(0) {
                    MarkPosition::Below
                } else {
                    MarkPosition::AtOrAbove
                },
                valid_after,
                below_floor: scan.next_offset < high_watermark_floor,
            };
            let case = decide(&situation);
            match case.action {
                RecoveryAction::Keep => {}
                RecoveryAction::TruncateTornTail => {
                    let bytes_discarded = image[scan.valid_end as usize..]
                        .iter()
                        .filter(|byte| **byte != 0)
                        .count() as u64;
                    report.truncated = Some(TornTailTruncation {
                        segment_base_offset: base,
                        position: scan.valid_end,
                        log_end_offset: scan.next_offset,
                        bytes_discarded,
                        row: case.row,
                    });
                }
                RecoveryAction::RefuseInteriorCorruption => {
                    let (position, detail) = if situation.position == MarkPosition::Below {
                        (
                            scan.valid_end,
                            format!(
                                "valid batches end at byte {} but the durable mark is {}",
                                scan.valid_end,
                                mark.unwrap_or(0)
                            ),
                        )
                    } else {
                        (scan.stop_position, scan.stop_reason.clone())
                    };
                    return Err(LogError::Corruption {
                        path: log_path,
                        position,
                        reason: format!("{} (recovery row {}): {detail}", case.why, case.row),
                    });
                }
                RecoveryAction::RefuseBelowFloor => {
                    return Err(LogError::TruncateBelowFloor {
                        dir: dir.to_path_buf(),
                        offset: scan.next_offset,
                        floor: high_watermark_floor,
                    });
                }
            }

            // Build the in-memory segment from the valid prefix.
            let mut segment = Segment::new_empty(base, block);
            for (entry, epoch, size_bytes) in &scan.entries {
                segment.index.on_batch_appended(
                    base,
                    entry.base_offset,
                    entry.position,
                    *size_bytes,
                    log.config.index_interval_bytes,
                );
                segment.batches.push(*entry);
                if *epoch >= 0 {
                    log.epoch_cache
                        .assign(*epoch, entry.base_offset)
                        .map_err(|source| LogError::EpochCache {
                            dir: dir.to_path_buf(),
                            source,
                        })?;
                }
            }
            report.batches_recovered += scan.entries.len();
            segment.size_bytes = scan.valid_end;
            segment.next_offset = scan.next_offset;
            segment.flushed_end = scan.valid_end;
            segment.flushed_next_offset = scan.next_offset;
            segment.file = Some(file);
            segment.tail_file = tail_file;
            segment.slot_sequence = slot_sequence;
            let valid_end = scan.valid_end;
            match role {
                SegmentRole::Sealed => {
                    segment.sealed = true;
                    segment.seal_durable = true;
                    segment.written_full_end = round_up(valid_end, block);
                }
                SegmentRole::Last => {
                    let block_start = round_down(valid_end, block);
                    segment.written_full_end = block_start;
                    segment.write_tail_start = block_start;
                    segment.write_tail = AlignedBuf::from_slice(
                        &image[block_start as usize..valid_end as usize],
                        block,
                    );
                    let first_in_memory =
                        (0..segment.batches.len()).find(|&j| segment.batch_end(j) > block_start);
                    if let Some(first) = first_in_memory {
                        let from = segment.batches[first].position;
                        segment.chunks.push_back(Chunk {
                            position: from,
                            bytes: image.slice(from as usize..valid_end as usize),
                        });
                    }
                }
            }
            rebuild_index_if_needed(io, dir, &segment, &mut report, &mut foreign)?;
            log.segments.push(segment);
            expected_next = Some(scan.next_offset);
            last_epoch = scan.last_epoch;

            if role == SegmentRole::Last {
                // Make the recovered end durable the tail-slot way (also after a cut).
                let index = log.segments.len() - 1;
                let block_start = round_down(valid_end, block) as usize;
                let partial = image[block_start..valid_end as usize].to_vec();
                log.foreign.append(&mut foreign);
                log.write_durable_end(io, index, valid_end, &partial)?;
            }
        }
        if log.segments.is_empty() {
            log.segments.push(Segment::new_empty(0, block));
        }
        log.log_start_offset = log.segments[0].base_offset;
        log.durable_end_offset = log.log_end_offset();
        log.flush_requested_offset = log.durable_end_offset;

        // The leader-epoch-checkpoint: rebuilt from the batches, rewritten if it disagrees.
        let checkpoint_path = dir.join(LEADER_EPOCH_CHECKPOINT_FILE_NAME);
        let on_disk = LeaderEpochCache::load(io, &checkpoint_path, &mut log.foreign);
        let agrees = matches!(&on_disk, Ok(cache) if *cache == log.epoch_cache);
        let file_exists = io.exists(&checkpoint_path);
        if !agrees && (file_exists || !log.epoch_cache.is_empty()) {
            log.epoch_cache
                .persist(io, &checkpoint_path, &mut log.foreign)
                .map_err(|source| LogError::EpochCache {
                    dir: dir.to_path_buf(),
                    source,
                })?;
            report.epoch_checkpoint_rewritten = true;
        }
        log.foreign.append(&mut foreign);
        report.log_start_offset = log.log_start_offset;
        report.log_end_offset = log.log_end_offset();
        Ok((log, report))
    }
}

/// Read a whole file for recovery; a read error (EIO) is corruption of that file.
fn read_for_recovery<I: Io>(
    io: &mut I,
    file: FileId,
    path: &Path,
    foreign: &mut Vec<Completion>,
) -> Result<Vec<u8>, LogError> {
    blocking::read_range(io, file, 0, None, foreign).map_err(|error| LogError::Corruption {
        path: path.to_path_buf(),
        position: error.offset,
        reason: format!("read failed: {error}"),
    })
}

/// Scan batches from the start of a segment image, checking frame, CRC, offset continuity from
/// the segment's base offset and epoch order.
fn scan_segment(image: &Bytes, base_offset: i64, previous_epoch: i32, config: &LogConfig) -> Scan {
    let mut chain = BatchChainValidator::expecting(base_offset, previous_epoch);
    let mut scan = Scan {
        entries: Vec::new(),
        valid_end: 0,
        next_offset: base_offset,
        last_epoch: previous_epoch,
        stop: ScanStop::Clean,
        stop_position: image.len() as u64,
        stop_reason: String::new(),
    };
    let mut batches =
        BatchIter::new(image.clone()).with_max_batch_size_bytes(config.max_batch_size_bytes);
    loop {
        let position = scan.valid_end;
        let problem = match batches.next() {
            None => break,
            Some(Err(error)) => {
                if image[position as usize..].iter().all(|byte| *byte == 0) {
                    break; // zero padding or preallocated space: a clean end
                }
                Some((
                    if error.is_truncated() {
                        ScanStop::Incomplete
                    } else {
                        ScanStop::Invalid
                    },
                    error.to_string(),
                ))
            }
            Some(Ok(batch)) => {
                if let Err(error) = chain.check(&batch) {
                    Some((ScanStop::Invalid, error.to_string()))
                } else if batch.last_offset() - base_offset > i64::from(u32::MAX)
                    || batch.position() + batch.size_bytes() as u64
                        > config.segment_size_bytes + 4096
                {
                    Some((
                        ScanStop::Invalid,
                        "batch does not fit in a segment (offset or size)".to_string(),
                    ))
                } else {
                    scan.entries.push((
                        BatchEntry {
                            base_offset: batch.base_offset(),
                            last_offset: batch.last_offset(),
                            position,
                        },
                        batch.partition_leader_epoch(),
                        batch.size_bytes() as u64,
                    ));
                    scan.valid_end = position + batch.size_bytes() as u64;
                    scan.next_offset = batch.next_offset();
                    scan.last_epoch = batch.partition_leader_epoch();
                    None
                }
            }
        };
        if let Some((stop, reason)) = problem {
            scan.stop = stop;
            scan.stop_position = position;
            scan.stop_reason = reason;
            break;
        }
    }
    scan
}

/// Whether any valid batch (frame + CRC) starts at or after `from`.
fn has_valid_batch_after(image: &Bytes, from: u64, max_batch_size_bytes: usize) -> bool {
    let overhead = crate::batch::RECORD_BATCH_OVERHEAD;
    let len = image.len();
    let mut position = from as usize;
    while position + overhead <= len {
        let batch_length =
            i32::from_be_bytes(image[position + 8..position + 12].try_into().unwrap());
        let magic = image[position + 16] as i8;
        if magic == crate::batch::MAGIC_V2
            && batch_length >= (overhead - crate::batch::LOG_OVERHEAD) as i32
        {
            let size = crate::batch::LOG_OVERHEAD + batch_length as usize;
            if size <= max_batch_size_bytes
                && position + size <= len
                && RecordBatch::parse_at(
                    image.slice(position..position + size),
                    position as u64,
                    max_batch_size_bytes,
                )
                .is_ok()
            {
                return true;
            }
        }
        position += 1;
    }
    false
}

/// Compare the `.index` file with the entries rebuilt from the scan; rewrite it if it differs.
fn rebuild_index_if_needed<I: Io>(
    io: &mut I,
    dir: &Path,
    segment: &Segment,
    report: &mut RecoveryReport,
    foreign: &mut Vec<Completion>,
) -> Result<(), LogError> {
    let path: PathBuf = segment::segment_file_path(dir, segment.base_offset, "index");
    let expected = segment.index.encode();
    let on_disk = blocking::read_whole_file(io, &path, foreign).ok().flatten();
    let agrees = on_disk
        .as_deref()
        .and_then(SparseIndex::decode_entries)
        .is_some_and(|entries| entries == segment.index.entries);
    if !agrees {
        blocking::write_whole_file(io, &path, &expected, foreign)?;
        report.indexes_rebuilt.push(segment.base_offset);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// TigerBeetle style: every combination of inputs matches exactly one row.
    #[test]
    fn every_situation_matches_exactly_one_row() {
        let mut seen_rows = std::collections::BTreeSet::new();
        for role in [Sealed, Last] {
            for mark in [Known, Unknown] {
                for stop in [Clean, Incomplete, Invalid] {
                    for position in [Below, AtOrAbove] {
                        for valid_after in [false, true] {
                            for below_floor in [false, true] {
                                let situation = RecoverySituation {
                                    role,
                                    mark,
                                    stop,
                                    position,
                                    valid_after,
                                    below_floor,
                                };
                                let rows: Vec<u8> = RECOVERY_CASES
                                    .iter()
                                    .filter(|c| c.matches(&situation))
                                    .map(|c| c.row)
                                    .collect();
                                assert_eq!(rows.len(), 1, "{situation:?} matches rows {rows:?}");
                                seen_rows.insert(rows[0]);
                            }
                        }
                    }
                }
            }
        }
        assert_eq!(
            seen_rows.len(),
            RECOVERY_CASES.len(),
            "every row is reachable"
        );
    }

    #[test]
    fn the_rules_that_matter() {
        let base = RecoverySituation {
            role: Last,
            mark: Unknown,
            stop: Invalid,
            position: AtOrAbove,
            valid_after: true,
            below_floor: false,
        };
        assert_eq!(
            decide(&base).action,
            RefuseInteriorCorruption,
            "bad then valid: never truncate"
        );
        assert_eq!(
            decide(&RecoverySituation {
                valid_after: false,
                ..base
            })
            .action,
            TruncateTornTail
        );
        assert_eq!(
            decide(&RecoverySituation {
                valid_after: false,
                below_floor: true,
                ..base
            })
            .action,
            RefuseBelowFloor
        );
        assert_eq!(
            decide(&RecoverySituation {
                mark: Known,
                ..base
            })
            .action,
            TruncateTornTail,
            "past the mark: unfinished flush"
        );
        assert_eq!(
            decide(&RecoverySituation {
                mark: Known,
                position: Below,
                ..base
            })
            .action,
            RefuseInteriorCorruption
        );
        assert_eq!(
            decide(&RecoverySituation {
                role: Sealed,
                valid_after: false,
                ..base
            })
            .action,
            RefuseInteriorCorruption
        );
        assert_eq!(
            decide(&RecoverySituation {
                stop: Clean,
                ..base
            })
            .action,
            Keep
        );
    }
}
