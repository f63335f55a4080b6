//! The leader-epoch cache and its `leader-epoch-checkpoint` file (KIP-101 / KIP-320).
//!
//! Each entry says "leader epoch E wrote its first record at start offset S". A fetcher that
//! sends `LastFetchedEpoch` is answered with [`LeaderEpochCache::end_offset_for_epoch`], which
//! is how a follower learns where its log diverged from the leader's.
//!
//! The file is Kafka's text format, so operators can read it with the same eyes:
//!
//! ```text
//! 0          <- version
//! 2          <- number of entries
//! 0 0        <- epoch start_offset
//! 3 120
//! ```
//!
//! It is replaced atomically (tmp + fdatasync + rename + folder fsync).
//!
//! Semantics follow Kafka's `LeaderEpochFileCache` exactly (assign, endOffsetFor,
//! truncateFromEnd, truncateFromStart), including the corner the name does not suggest:
//! asking for an epoch *below* the first cached one answers `(requested epoch, start offset of
//! the first epoch)`, so a follower whose history was removed by log-start-offset advances still
//! replicates from the leader's first epoch.

use std::path::Path;

use crate::io::{Io, IoError};
use crate::log::blocking;

/// Kafka's UNDEFINED_EPOCH.
pub const UNDEFINED_EPOCH: i32 = -1;
/// Kafka's UNDEFINED_EPOCH_OFFSET.
pub const UNDEFINED_EPOCH_OFFSET: i64 = -1;
/// Name of the file inside a partition folder.
pub const LEADER_EPOCH_CHECKPOINT_FILE_NAME: &str = "leader-epoch-checkpoint";

const CHECKPOINT_VERSION: u32 = 0;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EpochEntry {
    pub epoch: i32,
    pub start_offset: i64,
}

#[derive(Debug, thiserror::Error)]
pub enum EpochCacheError {
    #[error("invalid leader epoch entry: epoch {epoch}, start offset {start_offset}")]
    InvalidEntry { epoch: i32, start_offset: i64 },
    #[error("malformed leader-epoch-checkpoint {path}: line {line}: {reason}")]
    Malformed {
        path: String,
        line: usize,
        reason: String,
    },
    #[error(transparent)]
    Io(#[from] IoError),
}

/// Epoch → start offset, strictly increasing in both (Kafka's monotonicity invariant).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LeaderEpochCache {
    entries: Vec<EpochEntry>,
}

impl LeaderEpochCache {
    pub fn new() -> Self {
        Self::default()
    }

    /// Build from entries in any order, applying each with [`Self::assign`] (as Kafka does when
    /// it loads a checkpoint).
    pub fn from_entries(entries: &[EpochEntry]) -> Result<Self, EpochCacheError> {
        let mut cache = Self::new();
        for entry in entries {
            cache.assign(entry.epoch, entry.start_offset)?;
        }
        Ok(cache)
    }

    pub fn entries(&self) -> &[EpochEntry] {
        &self.entries
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn latest_entry(&self) -> Option<EpochEntry> {
        self.entries.last().copied()
    }

    pub fn latest_epoch(&self) -> Option<i32> {
        self.entries.last().map(|entry| entry.epoch)
    }

    pub fn earliest_entry(&self) -> Option<EpochEntry> {
        self.entries.first().copied()
    }

    /// Record that `epoch` starts at `start_offset`. Returns whether the cache changed.
    ///
    /// Like Kafka: a no-op if `epoch` is already the latest with a start offset ≤ the given one;
    /// otherwise every entry that would break monotonicity (epoch ≥ the new epoch, or start
    /// offset ≥ the new start offset) is removed first.
    pub fn assign(&mut self, epoch: i32, start_offset: i64) -> Result<bool, EpochCacheError> {
        if epoch < 0 || start_offset < 0 {
            return Err(EpochCacheError::InvalidEntry {
                epoch,
                start_offset,
            });
        }
        if let Some(latest) = self.latest_entry()
            && latest.epoch == epoch
            && start_offset >= latest.start_offset
        {
            return Ok(false);
        }
        while let Some(last) = self.entries.last() {
            if last.epoch >= epoch || last.start_offset >= start_offset {
                self.entries.pop();
            } else {
                break;
            }
        }
        self.entries.push(EpochEntry {
            epoch,
            start_offset,
        });
        Ok(true)
    }

    /// Kafka's `endOffsetFor`: the largest epoch ≤ `requested_epoch` and the offset where it
    /// ended (the start offset of the next larger epoch, or `log_end_offset` for the latest).
    ///
    /// | request | answer |
    /// | --- | --- |
    /// | UNDEFINED_EPOCH (-1) | (-1, -1) |
    /// | the latest epoch | (latest, log_end_offset) |
    /// | above the latest, or the cache is empty | (-1, -1) |
    /// | below the first epoch | (requested, start offset of the first epoch) |
    /// | otherwise | (largest epoch ≤ requested, start offset of the next larger epoch) |
    pub fn end_offset_for_epoch(&self, requested_epoch: i32, log_end_offset: i64) -> (i32, i64) {
        if requested_epoch == UNDEFINED_EPOCH {
            return (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET);
        }
        if self.latest_epoch() == Some(requested_epoch) {
            return (requested_epoch, log_end_offset);
        }
        let Some(higher) = self
            .entries
            .iter()
            .find(|entry| entry.epoch > requested_epoch)
        else {
            return (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET);
        };
        match self
            .entries
            .iter()
            .rev()
            .find(|entry| entry.epoch <= requested_epoch)
        {
            None => (requested_epoch, higher.start_offset),
            Some(floor) => (floor.epoch, higher.start_offset),
        }
    }

    /// The epoch of the record at `offset`, if the cache knows.
    pub fn epoch_for_offset(&self, offset: i64) -> Option<i32> {
        let mut previous = None;
        for entry in &self.entries {
            if entry.start_offset == offset {
                return Some(entry.epoch);
            }
            if entry.start_offset > offset {
                return previous;
            }
            previous = Some(entry.epoch);
        }
        previous
    }

    /// Remove every entry whose start offset is ≥ `end_offset` (the log was truncated to
    /// `end_offset`). Returns whether the cache changed.
    pub fn truncate_from_end(&mut self, end_offset: i64) -> bool {
        let before = self.entries.len();
        if end_offset >= 0
            && self
                .latest_entry()
                .is_some_and(|latest| latest.start_offset >= end_offset)
        {
            self.entries.retain(|entry| entry.start_offset < end_offset);
        }
        self.entries.len() != before
    }

    /// Remove entries that start at or below `start_offset`, keeping the last of them with its
    /// start moved up to `start_offset` (Kafka: "truncateFromStart(6) retains an entry at 6").
    pub fn truncate_from_start(&mut self, start_offset: i64) -> bool {
        let removed = self
            .entries
            .iter()
            .take_while(|entry| entry.start_offset <= start_offset)
            .count();
        if removed == 0 {
            return false;
        }
        let kept_epoch = self.entries[removed - 1].epoch;
        let changed = !(removed == 1 && self.entries[0].start_offset == start_offset);
        self.entries.drain(..removed);
        self.entries.insert(
            0,
            EpochEntry {
                epoch: kept_epoch,
                start_offset,
            },
        );
        changed
    }

    /// Kafka's checkpoint text.
    pub fn encode(&self) -> String {
        let mut text = format!("{CHECKPOINT_VERSION}\n{}\n", self.entries.len());
        for entry in &self.entries {
            text.push_str(&format!("{} {}\n", entry.epoch, entry.start_offset));
        }
        text
    }

    /// Parse Kafka's checkpoint text; `path` only labels errors.
    pub fn decode(text: &str, path: &str) -> Result<Self, EpochCacheError> {
        let malformed = |line: usize, reason: String| EpochCacheError::Malformed {
            path: path.to_string(),
            line,
            reason,
        };
        let mut lines = text
            .lines()
            .enumerate()
            .map(|(index, line)| (index + 1, line.trim()));
        let (_, version) = lines
            .next()
            .ok_or_else(|| malformed(1, "empty file".into()))?;
        if version != CHECKPOINT_VERSION.to_string() {
            return Err(malformed(1, format!("unsupported version {version:?}")));
        }
        let (_, count) = lines
            .next()
            .ok_or_else(|| malformed(2, "missing entry count".into()))?;
        let count: usize = count
            .parse()
            .map_err(|_| malformed(2, format!("bad entry count {count:?}")))?;
        let mut entries = Vec::new();
        for (number, line) in lines {
            if line.is_empty() {
                continue;
            }
            let mut fields = line.split_whitespace();
            let (Some(epoch), Some(offset), None) = (fields.next(), fields.next(), fields.next())
            else {
                return Err(malformed(
                    number,
                    format!("expected `epoch offset`, got {line:?}"),
                ));
            };
            let epoch: i32 = epoch
                .parse()
                .map_err(|_| malformed(number, format!("bad epoch {epoch:?}")))?;
            let start_offset: i64 = offset
                .parse()
                .map_err(|_| malformed(number, format!("bad offset {offset:?}")))?;
            entries.push(EpochEntry {
                epoch,
                start_offset,
            });
        }
        if entries.len() != count {
            return Err(malformed(
                2,
                format!("count says {count}, found {} entries", entries.len()),
            ));
        }
        Self::from_entries(&entries).map_err(|error| malformed(0, error.to_string()))
    }

    /// Load `path`; a missing file is an empty cache.
    pub fn load<I: Io>(io: &mut I, path: &Path) -> Result<Self, EpochCacheError> {
        match blocking::read_whole_file(io, path)? {
            None => Ok(Self::new()),
            Some(bytes) => {
                let text = std::str::from_utf8(&bytes).map_err(|_| EpochCacheError::Malformed {
                    path: path.display().to_string(),
                    line: 0,
                    reason: "not UTF-8".into(),
                })?;
                Self::decode(text, &path.display().to_string())
            }
        }
    }

    /// Replace `path` atomically with this cache.
    pub fn persist<I: Io>(&self, io: &mut I, path: &Path) -> Result<(), EpochCacheError> {
        blocking::write_file_atomically(io, path, self.encode().as_bytes())?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Cache entries as (epoch, start offset) pairs, for readable tables.
    type Entries = &'static [(i32, i64)];

    fn cache(entries: &[(i32, i64)]) -> LeaderEpochCache {
        let entries: Vec<EpochEntry> = entries
            .iter()
            .map(|&(epoch, start_offset)| EpochEntry {
                epoch,
                start_offset,
            })
            .collect();
        LeaderEpochCache::from_entries(&entries).unwrap()
    }

    fn pairs(cache: &LeaderEpochCache) -> Vec<(i32, i64)> {
        cache
            .entries()
            .iter()
            .map(|e| (e.epoch, e.start_offset))
            .collect()
    }

    /// KIP-320: the answers a fetcher gets, row by row, as Kafka's endOffsetFor gives them.
    #[test]
    fn end_offset_for_epoch_table() {
        let log_end_offset = 50;
        // (cache, requested epoch, expected answer)
        let table: &[(Entries, i32, (i32, i64))] = &[
            (&[], 0, (-1, -1)),                          // empty cache
            (&[], -1, (-1, -1)),                         // undefined epoch
            (&[(2, 0), (4, 10), (7, 30)], -1, (-1, -1)), // undefined epoch with entries
            (&[(2, 0), (4, 10), (7, 30)], 7, (7, 50)),   // latest epoch → log end offset
            (&[(2, 0), (4, 10), (7, 30)], 8, (-1, -1)),  // above latest
            (&[(2, 0), (4, 10), (7, 30)], 4, (4, 30)),   // exact, next epoch's start
            (&[(2, 0), (4, 10), (7, 30)], 5, (4, 30)),   // gap: floor epoch 4
            (&[(2, 0), (4, 10), (7, 30)], 6, (4, 30)),
            (&[(2, 0), (4, 10), (7, 30)], 2, (2, 10)),
            (&[(2, 0), (4, 10), (7, 30)], 3, (2, 10)),
            (&[(2, 0), (4, 10), (7, 30)], 1, (1, 0)), // below the first: requested, first start
            (&[(2, 5)], 0, (0, 5)),
            (&[(2, 5)], 2, (2, 50)),
        ];
        for (entries, requested, expected) in table {
            let got = cache(entries).end_offset_for_epoch(*requested, log_end_offset);
            assert_eq!(
                got, *expected,
                "cache {entries:?}, requested epoch {requested}"
            );
        }
    }

    #[test]
    fn assign_table() {
        // (initial, assign (epoch, offset), expected entries, changed)
        let table: &[(Entries, (i32, i64), Entries, bool)] = &[
            (&[], (1, 0), &[(1, 0)], true),
            (&[(1, 0)], (1, 5), &[(1, 0)], false), // same epoch, later offset: no-op
            (&[(1, 5)], (1, 3), &[(1, 3)], true),  // same epoch, earlier offset: replaces
            (&[(1, 0)], (2, 5), &[(1, 0), (2, 5)], true),
            (&[(1, 0), (3, 10)], (2, 12), &[(1, 0), (2, 12)], true), // epoch went back: drop 3
            (&[(1, 0), (3, 10)], (4, 10), &[(1, 0), (4, 10)], true), // same start: drop 3
            (&[(1, 0), (3, 10)], (4, 8), &[(1, 0), (4, 8)], true),
        ];
        for (initial, (epoch, offset), expected, changed) in table {
            let mut c = cache(initial);
            assert_eq!(
                c.assign(*epoch, *offset).unwrap(),
                *changed,
                "{initial:?} + ({epoch},{offset})"
            );
            assert_eq!(pairs(&c), *expected, "{initial:?} + ({epoch},{offset})");
        }
        assert!(LeaderEpochCache::new().assign(-1, 0).is_err());
        assert!(LeaderEpochCache::new().assign(0, -1).is_err());
    }

    #[test]
    fn truncate_from_end_table() {
        let base: Entries = &[(2, 0), (4, 10), (7, 30)];
        let table: &[(i64, Entries)] = &[
            (50, &[(2, 0), (4, 10), (7, 30)]),
            (31, &[(2, 0), (4, 10), (7, 30)]),
            (30, &[(2, 0), (4, 10)]),
            (11, &[(2, 0), (4, 10)]),
            (10, &[(2, 0)]),
            (0, &[]),
            (-1, &[(2, 0), (4, 10), (7, 30)]), // Kafka ignores a negative end offset
        ];
        for (end_offset, expected) in table {
            let mut c = cache(base);
            c.truncate_from_end(*end_offset);
            assert_eq!(pairs(&c), *expected, "truncate_from_end({end_offset})");
        }
    }

    #[test]
    fn truncate_from_start_table() {
        let base: Entries = &[(2, 0), (4, 10), (7, 30)];
        let table: &[(i64, Entries, bool)] = &[
            (0, &[(2, 0), (4, 10), (7, 30)], false),
            (5, &[(2, 5), (4, 10), (7, 30)], true),
            (10, &[(4, 10), (7, 30)], true),
            (29, &[(4, 29), (7, 30)], true),
            (40, &[(7, 40)], true),
        ];
        for (start_offset, expected, changed) in table {
            let mut c = cache(base);
            assert_eq!(
                c.truncate_from_start(*start_offset),
                *changed,
                "{start_offset}"
            );
            assert_eq!(pairs(&c), *expected, "truncate_from_start({start_offset})");
        }
    }

    #[test]
    fn epoch_for_offset_table() {
        let c = cache(&[(2, 5), (4, 10)]);
        let table = [
            (0, None),
            (5, Some(2)),
            (9, Some(2)),
            (10, Some(4)),
            (100, Some(4)),
        ];
        for (offset, expected) in table {
            assert_eq!(c.epoch_for_offset(offset), expected, "offset {offset}");
        }
    }

    #[test]
    fn checkpoint_text_round_trips_and_rejects_garbage() {
        let c = cache(&[(2, 0), (4, 10)]);
        assert_eq!(c.encode(), "0\n2\n2 0\n4 10\n");
        assert_eq!(LeaderEpochCache::decode(&c.encode(), "p").unwrap(), c);
        assert_eq!(
            LeaderEpochCache::decode("0\n0\n", "p").unwrap(),
            LeaderEpochCache::new()
        );
        for garbage in [
            "",
            "1\n0\n",
            "0\n",
            "0\nx\n",
            "0\n2\n1 0\n",
            "0\n1\n1\n",
            "0\n1\na b\n",
            "0\n1\n1 2 3\n",
            "0\n1\n-5 0\n",
        ] {
            let error =
                LeaderEpochCache::decode(garbage, "dir/leader-epoch-checkpoint").unwrap_err();
            assert!(
                error.to_string().contains("leader-epoch-checkpoint"),
                "{garbage:?}: {error}"
            );
        }
    }
}
