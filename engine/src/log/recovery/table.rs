//! The recovery table (module doc of `recovery`): the inputs measured on a segment, the rows,
//! and the one row each situation matches.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SegmentRole {
    Sealed,
    Last,
}

/// How the scan of `[0, durable mark)` ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScanEnd {
    AtMark,
    BelowMark,
}

/// Whether the trusted slot is the newest (its flush finished) or the previous one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NewestFlush {
    Finished,
    Unfinished,
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
    pub scan_end: ScanEnd,
    pub newest_flush: NewestFlush,
    pub below_floor: bool,
}

/// One row: each field lists the values it matches.
#[derive(Debug)]
pub struct RecoveryCase {
    pub row: u8,
    pub scan_end: &'static [ScanEnd],
    pub newest_flush: &'static [NewestFlush],
    pub below_floor: &'static [bool],
    pub action: RecoveryAction,
    pub why: &'static str,
}

use NewestFlush::{Finished, Unfinished};
use RecoveryAction::{Keep, RefuseBelowFloor, RefuseInteriorCorruption, TruncateTornTail};
use ScanEnd::{AtMark, BelowMark};

const ANY_FLUSH: &[NewestFlush] = &[Finished, Unfinished];
const ANY_BOOL: &[bool] = &[false, true];

#[rustfmt::skip]
pub const RECOVERY_CASES: &[RecoveryCase] = &[
    RecoveryCase { row: 1, scan_end: &[AtMark], newest_flush: &[Finished], below_floor: ANY_BOOL, action: Keep, why: "the batches end at the durable mark" },
    RecoveryCase { row: 2, scan_end: &[BelowMark], newest_flush: ANY_FLUSH, below_floor: ANY_BOOL, action: RefuseInteriorCorruption, why: "bytes below the durable mark (acknowledged) are damaged or missing" },
    RecoveryCase { row: 3, scan_end: &[AtMark], newest_flush: &[Unfinished], below_floor: &[false], action: TruncateTornTail, why: "an unfinished flush past the durable mark is dropped" },
    RecoveryCase { row: 4, scan_end: &[AtMark], newest_flush: &[Unfinished], below_floor: &[true], action: RefuseBelowFloor, why: "dropping the unfinished flush leaves the log below the high-watermark floor" },
];

impl RecoveryCase {
    pub fn matches(&self, situation: &RecoverySituation) -> bool {
        self.scan_end.contains(&situation.scan_end)
            && self.newest_flush.contains(&situation.newest_flush)
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

#[cfg(test)]
mod tests {
    use super::*;

    /// TigerBeetle style: every combination of inputs matches exactly one row.
    #[test]
    fn every_situation_matches_exactly_one_row() {
        let mut seen_rows = std::collections::BTreeSet::new();
        for scan_end in [AtMark, BelowMark] {
            for newest_flush in [Finished, Unfinished] {
                for below_floor in [false, true] {
                    let situation = RecoverySituation {
                        scan_end,
                        newest_flush,
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
        assert_eq!(
            seen_rows.len(),
            RECOVERY_CASES.len(),
            "every row is reachable"
        );
    }

    #[test]
    fn the_rules_that_matter() {
        let base = RecoverySituation {
            scan_end: AtMark,
            newest_flush: Finished,
            below_floor: false,
        };
        assert_eq!(decide(&base).action, Keep);
        assert_eq!(
            decide(&RecoverySituation {
                below_floor: true,
                ..base
            })
            .action,
            Keep,
            "nothing is cut: a log that ends below the floor is not made shorter"
        );
        assert_eq!(
            decide(&RecoverySituation {
                scan_end: BelowMark,
                ..base
            })
            .action,
            RefuseInteriorCorruption,
            "damage below the mark is never truncated, even at the end"
        );
        assert_eq!(
            decide(&RecoverySituation {
                scan_end: BelowMark,
                newest_flush: Unfinished,
                ..base
            })
            .action,
            RefuseInteriorCorruption
        );
        assert_eq!(
            decide(&RecoverySituation {
                newest_flush: Unfinished,
                ..base
            })
            .action,
            TruncateTornTail,
            "past the mark: unfinished flush"
        );
        assert_eq!(
            decide(&RecoverySituation {
                newest_flush: Unfinished,
                below_floor: true,
                ..base
            })
            .action,
            RefuseBelowFloor
        );
    }
}
