//! Opening a partition log: scan every segment (after a clean close, only the batches its batch
//! list does not name: module `batch_list`), decide what each segment's end means, and make the
//! outcome durable before the first append.
//!
//! ## Before the table, per segment
//!
//! Every segment file ends with its slot region (`tail_slot`: the file's last 5 blocks). A file
//! whose length cannot hold one, or whose region holds no valid slot, refuses to open (path and
//! offset): a `.log` is created atomically with a valid slot, so that is never a normal state.
//! The *trusted* slot is chosen: the newest valid one if the full blocks its flush wrote match
//! the CRC32C it records; else, in the last segment, if no confirmation record names it, its
//! flush never finished (its slot landed, its blocks did not all) and the previous slot is
//! trusted, whose flush completed before the newest started. A sealed segment never falls back
//! (its seal completed before a later segment existed), and its trusted slot must vouch for the
//! final block in the data area. A confirmed flush whose blocks no longer match, or a
//! confirmation naming a slot newer than any valid one, refuses.
//!
//! The trusted slot's *durable mark* is the authority on where the segment's batches end:
//! recovery reads the data area only up to it (plus the newest slot's blocks, to check their
//! CRC32C), overlays the slot's copy of the partial last block, and scans `[0, mark)` (frame,
//! CRC, offset continuity, epochs never backwards). Nothing past the trusted mark was ever
//! acknowledged, so nothing there is read, kept or resurrected: a stale batch past a cut and the
//! bytes of an unfinished flush are alike ignored.
//!
//! ## Inputs of the decision
//!
//! - **scan_end**: whether the scan of `[0, mark)` reaches the mark (`AtMark`) or stops
//!   before it (`BelowMark`: a bad or incomplete batch, or zeros, where the mark says durable
//!   batches are).
//! - **newest_flush**: `Finished` when the trusted slot is the newest, `Unfinished` when the
//!   newest slot's flush never finished and recovery fell back to the previous slot (the
//!   unfinished flush's bytes past the mark are dropped).
//! - **below_floor**: whether the log would end below the caller's floor (the high-watermark).
//!
//! ## The table (`RECOVERY_CASES`; every situation matches exactly one row, tested)
//!
//! | # | scan end | newest flush | below floor | action |
//! |---|----------|--------------|-------------|--------|
//! | 1 | AtMark | Finished | any | keep: the batches end at the durable mark |
//! | 2 | BelowMark | any | any | refuse: acknowledged bytes below the durable mark are damaged |
//! | 3 | AtMark | Unfinished | no | truncate: drop the unfinished flush past the durable mark |
//! | 4 | AtMark | Unfinished | yes | refuse: below the floor |
//!
//! After the table: the last segment's end is made durable by a new slot with the recovered
//! mark (overwriting an unfinished flush's slot, so it can never be trusted later), indexes
//! that are missing or disagree are rewritten, the leader-epoch-checkpoint is rebuilt from the
//! batches' epochs if it disagrees, and leftover `*.tmp` files, old-format `.tail` files and
//! orphan `.index` files are removed.

mod image;
mod listed;
mod table;

use std::path::{Path, PathBuf};

use bytes::Bytes;

use super::batch_list;
use super::blocking;
use super::chunks::Chunk;
use super::index::SparseIndex;
use super::segment::{self, Segment, round_down, round_up};
use super::tail_slot;
use super::write_tail::WriteTail;
use super::{LogConfig, LogError, PartitionLog};
use crate::epoch_cache::{EpochCacheError, LEADER_EPOCH_CHECKPOINT_FILE_NAME, LeaderEpochCache};
use crate::io::{Io, OpenOptions};
use image::{FlushBlocks, Scan, SegmentImage, read_for_recovery, scan_segment};
use listed::listed_batches;
pub use table::*;

/// What recovery found and did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    pub segments_scanned: usize,
    pub batches_recovered: usize,
    pub log_start_offset: i64,
    pub log_end_offset: i64,
    /// The durable mark of the last segment (its trusted slot).
    pub durable_mark: Option<DurableMarkFound>,
    /// An unfinished flush that was dropped (never below the floor).
    pub truncated: Option<TornTailTruncation>,
    /// Segments (base offsets) whose `.index` was missing, damaged or wrong and was rewritten.
    pub indexes_rebuilt: Vec<i64>,
    pub epoch_checkpoint_rewritten: bool,
    /// Leftover files removed (`*.tmp`, old-format `.tail`, orphan `.index`).
    pub files_removed: Vec<String>,
    /// The newest slot's flush had not finished (its blocks are not all there and it
    /// was never confirmed): recovery used the previous slot. The slot's sequence.
    pub unfinished_flush_slot: Option<u64>,
    /// Batches taken from the segments' batch lists instead of read and checked again
    /// (`batches_recovered` counts them too): only after a clean close.
    pub batches_from_list: usize,
    /// The log was closed cleanly (its `clean-shutdown` marker was there).
    pub clean_shutdown: bool,
    /// After a crash with [`LogConfig::defer_listed_check_after_crash`]: per segment, the
    /// listed batches taken without reading them, to be checked by
    /// [`PartitionLog::verify_listed`] (counted in `batches_from_list` too).
    pub unverified: Vec<UnverifiedBatches>,
}

/// Batches of one segment that recovery took from its batch list after a crash without reading
/// them: `[0, end)` of the segment file, all in its data area (below the partial last block the
/// slot holds). They were durable when listed (a list names only flushed batches); what is not
/// known is whether they still read back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnverifiedBatches {
    pub(crate) path: PathBuf,
    pub(crate) base_offset: i64,
    /// The epoch of the batch before the segment's first (the previous segment's last).
    pub(crate) previous_epoch: i32,
    pub(crate) listed: Vec<batch_list::ListedBatch>,
}

impl UnverifiedBatches {
    /// The segment file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The segment's base offset.
    pub fn base_offset(&self) -> i64 {
        self.base_offset
    }

    /// Where the listed batches end in the file.
    pub fn end_position(&self) -> u64 {
        self.listed.last().map_or(0, batch_list::ListedBatch::end)
    }

    /// The offset after the last listed batch.
    pub fn end_offset(&self) -> i64 {
        self.listed
            .last()
            .map_or(self.base_offset, |batch| batch.last_offset + 1)
    }

    /// How many batches.
    pub fn batches(&self) -> usize {
        self.listed.len()
    }
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
    /// Non-zero bytes dropped after `position` (what the unfinished flush had written).
    pub bytes_discarded: u64,
    pub row: u8,
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
        let existing_depth = dir
            .ancestors()
            .take_while(|ancestor| !ancestor.as_os_str().is_empty())
            .position(|ancestor| io.exists(ancestor));
        io.create_dir_all(dir)?;
        let mut report = RecoveryReport::default();
        // Closed cleanly: the batch lists stand in for reading (module batch_list). The
        // marker goes first, durably (with the folder's sync below): whatever happens from
        // here on is not a clean close.
        let marker = dir.join(batch_list::CLEAN_SHUTDOWN_FILE);
        report.clean_shutdown = io.exists(&marker);
        if report.clean_shutdown {
            io.remove_file(&marker)?;
        }
        // The folder itself, and each folder created now, must survive a crash: the folder
        // and its parent are synced (the folder may be one an earlier run created and died
        // before syncing), and from there up to the first ancestor that existed before this
        // call (it holds the topmost new folder's entry). Until 2026-12-06 every ancestor up to
        // `/` was synced, and the folder once more after the marker's removal: nine fsyncs per
        // partition opened at a node's start in a folder seven levels deep, two now (`strace
        // -c`, docs/log.md "Recovery").
        // A folder its caller has just made durable (`LogConfig::folder_durable_before_open`)
        // needs neither sync: a new topic partition's, one flush for many folders since
        // 2026-12-07 where these were two per partition.
        let last_depth = existing_depth.unwrap_or(usize::MAX).max(1);
        for (depth, ancestor) in dir.ancestors().enumerate() {
            if ancestor.as_os_str().is_empty()
                || depth > last_depth
                || (config.folder_durable_before_open && existing_depth == Some(0))
            {
                break;
            }
            io.sync_dir(ancestor)?;
        }
        let names = io.list_dir(dir)?;
        let mut bases: Vec<i64> = names
            .iter()
            .filter_map(|name| segment::parse_segment_file_name(name, "log"))
            .collect();
        bases.sort_unstable();
        for name in &names {
            // `.tail`: the slots' file of the layout before the slot region moved into the
            // `.log` itself; never trusted now.
            let old_tail = segment::parse_segment_file_name(name, "tail").is_some();
            let orphan = ["index", "batches"].iter().any(|extension| {
                segment::parse_segment_file_name(name, extension)
                    .is_some_and(|base| !bases.contains(&base))
            });
            if name.ends_with(".tmp") || orphan || old_tail {
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
            preparing: None,
            confirming: None,
            reserving: None,
            reservation_refused: None,
            confirmation_pending: None,
            confirmation_unsynced: None,
            spare_write_buf: None,
            append_metas: Vec::new(),
            flush_requested_offset: 0,
            generation: 0,
            stopped: None,
            waiting_for_space: None,
            lagging: None,
        };
        let mut expected_next: Option<i64> = None;
        let mut last_epoch = crate::batch::NO_PARTITION_LEADER_EPOCH;
        // The leader-epoch-checkpoint as found: a batch list's epochs must agree with it.
        let checkpoint_found =
            LeaderEpochCache::load(io, &dir.join(LEADER_EPOCH_CHECKPOINT_FILE_NAME)).ok();
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
            let file = io.open(&log_path, OpenOptions::DIRECT)?;
            report.segments_scanned += 1;
            let corruption = |position: u64, reason: String| LogError::Corruption {
                path: log_path.clone(),
                position,
                reason,
            };

            // The slot region: the file's last 5 blocks.
            let file_len = io.file_size_bytes(file)?;
            let region_offset = tail_slot::region_offset_of_file(file_len, block).ok_or_else(|| {
                corruption(
                    file_len,
                    format!("a segment file of {file_len} bytes has no slot region of 5 blocks of {block} bytes"),
                )
            })?;
            let region = read_for_recovery(
                io,
                file,
                &log_path,
                region_offset,
                tail_slot::region_size_bytes(block),
            )?;
            let slots = tail_slot::valid_slots_newest_first(&region, block);
            let confirmation = tail_slot::decode_confirmation(&region, block);
            let Some(newest) = slots.first() else {
                return Err(corruption(
                    region_offset,
                    "the slot region holds no valid slot".into(),
                ));
            };
            if let Some(confirmed) = confirmation
                && confirmed.sequence > newest.sequence
            {
                // That slot's flush completed (the record is written only after), so a
                // missing slot is damage to acknowledged bytes, not a torn write.
                return Err(corruption(
                    region_offset + tail_slot::slot_offset(confirmed.sequence, block),
                    format!(
                        "slot {} was confirmed durable but is damaged",
                        confirmed.sequence
                    ),
                ));
            }
            for slot in &slots {
                if slot.covered_end(block) > region_offset {
                    return Err(corruption(
                        region_offset + tail_slot::slot_offset(slot.sequence, block),
                        format!(
                            "slot {} covers up to byte {}, past the slot region at {region_offset}",
                            slot.sequence,
                            slot.covered_end(block)
                        ),
                    ));
                }
            }
            // The data area up to the furthest block a valid slot vouches for: the trusted
            // mark's bytes, and the newest flush's blocks to check against its CRC32C. Only the
            // slots' flushes are read here (`flushes`); the batches below the mark are scanned
            // chunk by chunk further down, never the whole segment in memory at once.
            let read_end = slots
                .iter()
                .map(|slot| slot.block_start(block))
                .max()
                .unwrap_or(0);
            let flushes_start = round_down(
                slots
                    .iter()
                    .map(|slot| slot.flush_start_position)
                    .min()
                    .unwrap_or(0)
                    .min(read_end),
                block,
            );
            let mut flushes =
                read_for_recovery(io, file, &log_path, flushes_start, read_end - flushes_start)?;
            flushes.resize((read_end - flushes_start) as usize, 0);
            let flushes = FlushBlocks {
                start: flushes_start,
                bytes: flushes,
            };

            let mut newest_flush = NewestFlush::Finished;
            let slot = if flushes.present(newest, block) {
                newest.clone()
            } else if role == SegmentRole::Last
                && let Some(previous) = slots.get(1)
                && !newest.confirmed_by(confirmation)
            {
                newest_flush = NewestFlush::Unfinished;
                report.unfinished_flush_slot = Some(newest.sequence);
                previous.clone()
            } else {
                newest.clone()
            };
            let mark = slot.durable_mark();
            let damaged_last_flush = (!flushes.present(&slot, block)).then(|| {
                (
                    slot.flush_start_position,
                    format!(
                        "the blocks of the last flush [{}, {}) do not match the CRC32C recorded in slot {}",
                        slot.flush_start_position,
                        slot.block_start(block),
                        slot.sequence
                    ),
                )
            });
            if role == SegmentRole::Sealed && !slot.data.is_empty() {
                // A seal writes its final block to the data area and a slot without data;
                // reads of a sealed segment come from the data area.
                return Err(corruption(
                    region_offset + tail_slot::slot_offset(slot.sequence, block),
                    format!(
                        "the last slot ({}) of a sealed segment holds a partial block instead of vouching for its final block",
                        slot.sequence
                    ),
                ));
            }
            let bytes_discarded = if newest_flush == NewestFlush::Unfinished {
                let from = (mark.saturating_sub(flushes.start) as usize).min(flushes.bytes.len());
                flushes.bytes[from..]
                    .iter()
                    .filter(|byte| **byte != 0)
                    .count() as u64
            } else {
                0
            };
            // The slot's copy of the partial block lies over the data area (append-only bytes:
            // it agrees with whatever full block later reached the data area), and the image
            // ends at the mark: nothing past it was acknowledged.
            let image = SegmentImage {
                file,
                path: &log_path,
                file_end: read_end,
                len: mark.min(read_end.max(slot.covered_end(block))),
                overlay_start: slot.block_start(block),
                overlay: &slot.data,
            };
            if role == SegmentRole::Last {
                report.durable_mark = Some(DurableMarkFound {
                    segment_base_offset: base,
                    slot_sequence: slot.sequence,
                    position: mark,
                });
            }

            // The segment's batch list: read in place of the batches it names after a clean
            // close, checked against them after a crash (module batch_list).
            let (mut listed, list_records) = listed_batches(
                io,
                dir,
                base,
                last_epoch,
                &image,
                checkpoint_found.as_ref(),
                &log.config,
            )?;
            let deferred = !report.clean_shutdown && log.config.defer_listed_check_after_crash;
            if deferred && !image.overlay.is_empty() {
                // The background check reads the data area alone: the listed batches that
                // reach into the partial last block (the slot's copy) are scanned here.
                let below = listed
                    .iter()
                    .take_while(|batch| batch.end() <= image.overlay_start)
                    .count();
                listed.truncate(below);
            }
            if deferred && !listed.is_empty() {
                report.unverified.push(UnverifiedBatches {
                    path: log_path.clone(),
                    base_offset: base,
                    previous_epoch: last_epoch,
                    listed: listed.clone(),
                });
            }
            let scan = if report.clean_shutdown || deferred {
                report.batches_from_list += listed.len();
                scan_segment(
                    io,
                    &image,
                    Scan::after(&listed, base, last_epoch),
                    &log.config,
                )?
            } else {
                // After a crash every batch is read and checked; the list is kept as far as
                // it names what was read.
                let scan =
                    scan_segment(io, &image, Scan::after(&[], base, last_epoch), &log.config)?;
                listed.truncate(batch_list::agreeing_prefix(&listed, &scan.entries));
                scan
            };
            if let Some((flush_start, reason)) = damaged_last_flush {
                // Name the first damaged batch when the scan finds it inside those blocks.
                let position = if scan.valid_end < mark && scan.valid_end >= flush_start {
                    scan.valid_end
                } else {
                    flush_start
                };
                return Err(corruption(position, reason));
            }
            let situation = RecoverySituation {
                scan_end: if scan.valid_end == mark {
                    ScanEnd::AtMark
                } else {
                    ScanEnd::BelowMark
                },
                newest_flush,
                below_floor: scan.next_offset < high_watermark_floor,
            };
            let case = decide(&situation);
            match case.action {
                RecoveryAction::Keep => {}
                RecoveryAction::TruncateTornTail => {
                    report.truncated = Some(TornTailTruncation {
                        segment_base_offset: base,
                        position: scan.valid_end,
                        log_end_offset: scan.next_offset,
                        bytes_discarded,
                        row: case.row,
                    });
                }
                RecoveryAction::RefuseInteriorCorruption => {
                    return Err(corruption(
                        scan.valid_end,
                        format!(
                            "{} (recovery row {}): valid batches end at byte {} but the durable mark is {mark}: {}",
                            case.why, case.row, scan.valid_end, scan.stop_reason
                        ),
                    ));
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
            let mut segment = Segment::new_empty(dir, base, block, region_offset);
            for (entry, size_bytes) in &scan.entries {
                segment.index.on_batch_appended(
                    base,
                    entry.base_offset,
                    entry.position,
                    *size_bytes,
                    log.config.index_interval_bytes,
                );
                segment.batches.push(*entry);
                if entry.epoch >= 0 {
                    log.epoch_cache
                        .assign(entry.epoch, entry.base_offset)
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
            segment.reader = io.open_reader(&log_path)?;
            segment.slot_sequence = slot.sequence;
            let valid_end = scan.valid_end;
            let mut tail_partial = Vec::new();
            match role {
                SegmentRole::Sealed => {
                    segment.sealed = true;
                    segment.seal_durable = true;
                    segment.written_full_end = round_up(valid_end, block);
                }
                SegmentRole::Last => {
                    let block_start = round_down(valid_end, block);
                    let first_in_memory =
                        (0..segment.batches.len()).find(|&j| segment.batch_end(j) > block_start);
                    // The bytes kept in memory: the partial last block, and the batches that end
                    // in it from their start.
                    let from = first_in_memory
                        .map_or(block_start, |first| segment.batches[first].position)
                        .min(block_start);
                    let mut kept = Vec::with_capacity((valid_end - from) as usize);
                    image.append(io, from, valid_end, &mut kept)?;
                    let kept = Bytes::from(kept);
                    let at = |position: u64| (position - from) as usize;
                    segment.written_full_end = block_start;
                    segment.write_tail_start = block_start;
                    segment.write_tail = WriteTail::from_partial(&kept[at(block_start)..], block);
                    if let Some(first) = first_in_memory {
                        let position = segment.batches[first].position;
                        segment.chunks.push_back(Chunk {
                            position,
                            next_offset: segment.next_offset,
                            bytes: kept.slice(at(position)..),
                        });
                    }
                    tail_partial = kept[at(block_start)..].to_vec();
                }
            }
            rebuild_index_if_needed(io, dir, &segment, &mut report)?;
            log.segments.push(segment);
            let index = log.segments.len() - 1;
            log.segments[index].batch_list_written = listed.len();
            if list_records > listed.len() {
                // Records past what was used: cut durably, so none of them ever follows a
                // record written from now on.
                log.cut_batch_list(io, index, listed.len())?;
            }
            expected_next = Some(scan.next_offset);
            last_epoch = scan.last_epoch;

            if role == SegmentRole::Last {
                // Make the recovered end durable with a new slot (also after a drop: it
                // overwrites the unfinished flush's slot).
                let index = log.segments.len() - 1;
                let partial = std::mem::take(&mut tail_partial);
                log.write_durable_end(io, index, valid_end, &partial)?;
            }
        }
        if log.segments.is_empty() {
            let region_offset = log.new_segment_region_offset();
            log.segments
                .push(Segment::new_empty(&log.dir, 0, block, region_offset));
        }
        log.log_start_offset = log.segments[0].base_offset;
        log.durable_end_offset = log.log_end_offset();
        log.flush_requested_offset = log.durable_end_offset;

        // The leader-epoch-checkpoint: rebuilt from the batches, rewritten if it disagrees.
        let checkpoint_path = dir.join(LEADER_EPOCH_CHECKPOINT_FILE_NAME);
        let on_disk = LeaderEpochCache::load(io, &checkpoint_path);
        let agrees = matches!(&on_disk, Ok(cache) if *cache == log.epoch_cache);
        let file_exists = io.exists(&checkpoint_path);
        if !agrees && (file_exists || !log.epoch_cache.is_empty()) {
            match log.epoch_cache.persist(io, &checkpoint_path) {
                Ok(()) => report.epoch_checkpoint_rewritten = true,
                // A node restarted on a full disk still opens: the cache in memory is right
                // (rebuilt from the batches), and the next flush writes the file first.
                Err(EpochCacheError::Io(source)) if source.is_no_space() => {
                    tracing::warn!(dir = %dir.display(), %source, "no space to rewrite the leader-epoch-checkpoint; the next flush writes it");
                    log.epoch_cache_dirty = true;
                }
                Err(source) => {
                    return Err(LogError::EpochCache {
                        dir: dir.to_path_buf(),
                        source,
                    });
                }
            }
        }
        report.log_start_offset = log.log_start_offset;
        report.log_end_offset = log.log_end_offset();
        Ok((log, report))
    }
}

impl PartitionLog {
    /// Makes the next open of the (closed) log in `dir` read and check every batch of the
    /// segment at `base_offset`, whatever its batch list says: the segment's list and the
    /// clean-shutdown marker go, durably (the other segments' lists are then taken as after a
    /// crash). For damage found by [`PartitionLog::verify_listed`]: the
    /// open then refuses the segment (`LogError::Corruption`), as it would have without the
    /// lists.
    pub fn check_at_next_open<I: Io>(
        io: &mut I,
        dir: &Path,
        base_offset: i64,
    ) -> Result<(), LogError> {
        for path in [
            dir.join(batch_list::CLEAN_SHUTDOWN_FILE),
            batch_list::path(dir, base_offset),
        ] {
            if io.exists(&path) {
                io.remove_file(&path)?;
            }
        }
        io.sync_dir(dir)?;
        Ok(())
    }

    /// Reads and checks the batches recovery took from a batch list without reading them
    /// ([`RecoveryReport::unverified`]): frame, CRC32C, offsets continuing from the segment's
    /// base, epochs never backwards, and each batch where and what its list record says. Opens
    /// the segment file itself (read only), so it may run on another thread with an `Io` of its
    /// own while the log serves; the bytes it reads are durable and never rewritten while the
    /// log holds them (a cut below them, or the segment's deletion, makes the result moot:
    /// the caller checks the log still holds them). Damage is `LogError::Corruption` naming the
    /// first batch that does not read back.
    pub fn verify_listed<I: Io>(
        io: &mut I,
        unverified: &UnverifiedBatches,
        config: &LogConfig,
    ) -> Result<(), LogError> {
        let end = unverified.end_position();
        let file = io.open(&unverified.path, OpenOptions::DIRECT_READ_ONLY)?;
        let image = SegmentImage {
            file,
            path: &unverified.path,
            file_end: end,
            len: end,
            overlay_start: end,
            overlay: &[],
        };
        let scanned = scan_segment(
            io,
            &image,
            Scan::after(&[], unverified.base_offset, unverified.previous_epoch),
            config,
        );
        let closed = io.close(file);
        let scan = scanned?;
        closed?;
        let agreeing = batch_list::agreeing_prefix(&unverified.listed, &scan.entries);
        if agreeing == unverified.listed.len() {
            return Ok(());
        }
        let position = unverified.listed[agreeing].position;
        let reason = if scan.entries.len() > agreeing {
            format!(
                "the batch at byte {position} is not the one the batch list names (offsets {}..={})",
                unverified.listed[agreeing].base_offset, unverified.listed[agreeing].last_offset
            )
        } else {
            format!(
                "acknowledged bytes below the durable mark are damaged (checked after a crash, behind the start): {}",
                scan.stop_reason
            )
        };
        Err(LogError::Corruption {
            path: unverified.path.clone(),
            position,
            reason,
        })
    }
}

/// Compare the `.index` file with the entries rebuilt from the scan; rewrite it if it differs.
fn rebuild_index_if_needed<I: Io>(
    io: &mut I,
    dir: &Path,
    segment: &Segment,
    report: &mut RecoveryReport,
) -> Result<(), LogError> {
    let path: PathBuf = segment::segment_file_path(dir, segment.base_offset, "index");
    let expected = segment.index.encode();
    let on_disk = blocking::read_whole_file(io, &path).ok().flatten();
    let agrees = on_disk
        .as_deref()
        .and_then(SparseIndex::decode_entries)
        .is_some_and(|entries| entries == segment.index.entries);
    if !agrees {
        match blocking::write_whole_file(io, &path, &expected) {
            Ok(()) => report.indexes_rebuilt.push(segment.base_offset),
            // Advisory: a node restarted on a full disk opens without it (the entries are in
            // memory; the next open or the segment's seal writes it).
            Err(error) if error.is_no_space() => {
                tracing::warn!(path = %path.display(), %error, "no space to rewrite the index");
            }
            Err(error) => return Err(error.into()),
        }
    }
    Ok(())
}
