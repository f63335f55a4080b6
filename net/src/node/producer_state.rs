//! Idempotent producing (KIP-98's producer state, without transactions): per partition, per
//! producer id, the producer epoch and the last five batches appended (sequence range and
//! offsets), checked before every append on the leader.
//!
//! | incoming batch (same producer id)            | answer                                    |
//! | -------------------------------------------- | ----------------------------------------- |
//! | producer epoch older than the remembered one | INVALID_PRODUCER_EPOCH                    |
//! | newer epoch, base sequence 0                 | appended; the entry restarts at this epoch |
//! | newer epoch, base sequence ≠ 0               | OUT_OF_ORDER_SEQUENCE_NUMBER              |
//! | same sequence range as a remembered batch    | not appended; NONE with that batch's base offset (Kafka's answer to a retried batch) |
//! | base sequence = last sequence + 1            | appended                                  |
//! | anything else (a gap, or an old range)       | OUT_OF_ORDER_SEQUENCE_NUMBER              |
//! | unknown producer id, base sequence 0         | appended (a new producer)                 |
//! | unknown producer id, base sequence ≠ 0       | OUT_OF_ORDER_SEQUENCE_NUMBER              |
//!
//! The state lives only in memory. It is rebuilt from the log's batch headers whenever this
//! node becomes leader of a new epoch (before its first append in that epoch): the Raft leader
//! holds every committed batch, so a producer retrying a batch that the old leader appended
//! gets the duplicate answer, never a second copy.

use std::collections::{HashMap, VecDeque};

/// How many batches per producer are remembered for duplicate detection (Kafka's
/// `ProducerStateEntry.NUM_BATCHES_TO_RETAIN`, and the client's max in-flight requests).
pub const BATCHES_REMEMBERED: usize = 5;

/// A batch's producer fields and where it landed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProducerBatch {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub last_sequence: i32,
    pub base_offset: u64,
    pub last_offset: u64,
}

#[derive(Clone, Debug, Default)]
struct ProducerEntry {
    producer_epoch: i16,
    batches: VecDeque<ProducerBatch>,
}

/// What to do with an incoming batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SequenceCheck {
    /// Append it.
    Append,
    /// Already appended: answer with the remembered batch's offsets.
    Duplicate {
        base_offset: u64,
        last_offset: u64,
    },
    OutOfOrder,
    InvalidProducerEpoch,
}

/// The producer state of one partition.
#[derive(Clone, Debug, Default)]
pub struct ProducerStateTable {
    producers: HashMap<i64, ProducerEntry>,
    /// The leader epoch this table was rebuilt for (`None`: never built).
    pub built_for_epoch: Option<u32>,
}

/// The sequence after `sequence` (sequences wrap from i32::MAX to 0, as Kafka's do).
fn next_sequence(sequence: i32) -> i32 {
    if sequence == i32::MAX {
        0
    } else {
        sequence + 1
    }
}

impl ProducerStateTable {
    /// Checks a batch (offsets not yet known: only its producer fields are read).
    pub fn check(
        &self,
        producer_id: i64,
        producer_epoch: i16,
        base_sequence: i32,
        last_sequence: i32,
    ) -> SequenceCheck {
        let Some(entry) = self.producers.get(&producer_id) else {
            return if base_sequence == 0 {
                SequenceCheck::Append
            } else {
                SequenceCheck::OutOfOrder
            };
        };
        if producer_epoch < entry.producer_epoch {
            return SequenceCheck::InvalidProducerEpoch;
        }
        if producer_epoch > entry.producer_epoch {
            return if base_sequence == 0 {
                SequenceCheck::Append
            } else {
                SequenceCheck::OutOfOrder
            };
        }
        if let Some(dup) = entry
            .batches
            .iter()
            .find(|b| b.base_sequence == base_sequence && b.last_sequence == last_sequence)
        {
            return SequenceCheck::Duplicate {
                base_offset: dup.base_offset,
                last_offset: dup.last_offset,
            };
        }
        match entry.batches.back() {
            Some(last) if next_sequence(last.last_sequence) == base_sequence => {
                SequenceCheck::Append
            }
            None if base_sequence == 0 => SequenceCheck::Append,
            _ => SequenceCheck::OutOfOrder,
        }
    }

    /// Records an appended batch (or one found in the log while rebuilding).
    pub fn record(&mut self, batch: ProducerBatch) {
        let entry = self.producers.entry(batch.producer_id).or_default();
        if batch.producer_epoch != entry.producer_epoch {
            entry.batches.clear();
            entry.producer_epoch = batch.producer_epoch;
        }
        entry.batches.push_back(batch);
        while entry.batches.len() > BATCHES_REMEMBERED {
            entry.batches.pop_front();
        }
    }

    /// Forgets everything (before a rebuild from the log).
    pub fn clear(&mut self) {
        self.producers.clear();
    }

    pub fn producer_count(&self) -> usize {
        self.producers.len()
    }
}

/// Allocates producer ids unique across the cluster without a round trip through the quorum:
/// the wall-clock millisecond (from 2020) in the high bits, the node id and a counter in the
/// low 16. Ids only grow on one node, and two nodes never share one; a node whose clock went
/// back across a restart by more than the ids it handed out could repeat one (documented in
/// docs/clients.md).
#[derive(Debug, Default)]
pub struct ProducerIdAllocator {
    last: i64,
}

const EPOCH_2020_MS: u64 = 1_577_836_800_000;

impl ProducerIdAllocator {
    pub fn next(&mut self, node_id: i32, wall_ms: u64) -> i64 {
        let millis = wall_ms.saturating_sub(EPOCH_2020_MS) as i64;
        let node = i64::from(node_id & 0xff) << 8;
        let candidate = (millis << 16) | node;
        // Same millisecond (or a clock step back): count up in the low byte, carrying into
        // the millisecond bits, so the node's ids stay strictly increasing.
        let next = if candidate > self.last {
            candidate
        } else {
            let counter = (self.last & 0xff) + 1;
            if counter > 0xff {
                (((self.last >> 16) + 1) << 16) | node
            } else {
                (self.last & !0xff) | counter
            }
        };
        self.last = next;
        next
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(epoch: i16, base: i32, last: i32, offset: u64) -> ProducerBatch {
        ProducerBatch {
            producer_id: 7,
            producer_epoch: epoch,
            base_sequence: base,
            last_sequence: last,
            base_offset: offset,
            last_offset: offset + (last - base) as u64,
        }
    }

    #[test]
    fn kip_98_sequence_table() {
        let mut t = ProducerStateTable::default();
        assert_eq!(t.check(7, 0, 3, 4), SequenceCheck::OutOfOrder);
        assert_eq!(t.check(7, 0, 0, 4), SequenceCheck::Append);
        t.record(batch(0, 0, 4, 10));
        // The next in line is appended; a retry of the same range is a duplicate.
        assert_eq!(t.check(7, 0, 5, 9), SequenceCheck::Append);
        assert_eq!(
            t.check(7, 0, 0, 4),
            SequenceCheck::Duplicate {
                base_offset: 10,
                last_offset: 14
            }
        );
        // A gap is out of order.
        assert_eq!(t.check(7, 0, 6, 9), SequenceCheck::OutOfOrder);
        // An older producer epoch is fenced; a newer one restarts at sequence 0.
        t.record(batch(1, 0, 0, 20));
        assert_eq!(t.check(7, 0, 1, 1), SequenceCheck::InvalidProducerEpoch);
        assert_eq!(t.check(7, 2, 3, 3), SequenceCheck::OutOfOrder);
        assert_eq!(t.check(7, 2, 0, 0), SequenceCheck::Append);
    }

    #[test]
    fn only_the_last_five_batches_are_remembered() {
        let mut t = ProducerStateTable::default();
        for i in 0..7 {
            t.record(batch(0, i, i, 100 + i as u64));
        }
        assert!(matches!(
            t.check(7, 0, 6, 6),
            SequenceCheck::Duplicate { .. }
        ));
        assert!(matches!(
            t.check(7, 0, 2, 2),
            SequenceCheck::Duplicate { .. }
        ));
        // Batch 1 is out of the window: it can no longer be told from a reordering.
        assert_eq!(t.check(7, 0, 1, 1), SequenceCheck::OutOfOrder);
        assert_eq!(t.check(7, 0, 7, 7), SequenceCheck::Append);
    }

    #[test]
    fn sequences_wrap_at_i32_max() {
        let mut t = ProducerStateTable::default();
        t.record(batch(0, i32::MAX - 1, i32::MAX, 0));
        assert_eq!(t.check(7, 0, 0, 3), SequenceCheck::Append);
    }

    #[test]
    fn producer_ids_grow_and_never_collide_across_nodes() {
        let mut a = ProducerIdAllocator::default();
        let mut b = ProducerIdAllocator::default();
        let now = 1_800_000_000_000;
        let mut seen = std::collections::HashSet::new();
        for i in 0..600 {
            let wall = now + i / 300;
            assert!(seen.insert(a.next(1, wall)));
            assert!(seen.insert(b.next(2, wall)));
        }
        let mut previous = 0;
        let mut c = ProducerIdAllocator::default();
        for _ in 0..1000 {
            let id = c.next(3, now);
            assert!(id > previous && id > 0);
            previous = id;
        }
    }
}
