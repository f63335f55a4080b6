//! ListOffsets by timestamp over the log's in-memory batch entries
//! (`PartitionLog::find_batch_by_timestamp`): the same answers as reading every batch, across
//! segment rolls, control batches, bounds inside the log (a batch counts when its last offset
//! is in `[from, below)`), and a reopen (recovery rebuilds the
//! entries from the files).

mod log_support;

use std::path::Path;

use bytes::BytesMut;
use log_support::small_config;
use proptest::prelude::*;
use ringlog_engine::batch::RecordBatchBuilder;
use ringlog_engine::io::MemoryIo;
use ringlog_engine::log::PartitionLog;

/// One batch of `records` records, each with `timestamp`, plus 600 value bytes so a few dozen
/// batches roll the 64 KiB segments of `small_config`.
fn batch(records: usize, timestamps: &[i64], control: bool) -> BytesMut {
    let mut builder = RecordBatchBuilder::new(0).with_control(control);
    for record in 0..records {
        let value = vec![record as u8; 600];
        builder.append(
            timestamps[record % timestamps.len()],
            None,
            Some(&value),
            &[],
        );
    }
    BytesMut::from(&builder.build().as_bytes()[..])
}

/// (base offset, last offset, max timestamp, control) of every batch appended.
type Model = Vec<(i64, i64, i64, bool)>;

/// What reading every batch in order answers.
fn expected(model: &Model, from: i64, below: i64, target: Option<i64>) -> Option<(i64, i64)> {
    let candidates = model
        .iter()
        .filter(|(_, last, _, control)| *last >= from && *last < below && !control);
    match target {
        Some(target) => candidates
            .filter(|(_, _, max, _)| *max >= target)
            .map(|(base, _, max, _)| (*base, *max))
            .next(),
        None => candidates.fold(None, |best: Option<(i64, i64)>, (base, _, max, _)| {
            if best.is_none_or(|(_, b)| *max > b) {
                Some((*base, *max))
            } else {
                best
            }
        }),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn lookups_match_reading_every_batch(
        batches in proptest::collection::vec(
            (1usize..4, proptest::collection::vec(0i64..1_000, 1..4), prop::bool::weighted(0.15)),
            1..120,
        ),
        queries in proptest::collection::vec((0i64..400, 0i64..400, prop::option::of(-5i64..1_100)), 20),
    ) {
        let mut io = MemoryIo::with_seed(7);
        let dir = Path::new("/data/t-0");
        let (mut log, _) = PartitionLog::open(&mut io, dir, small_config()).unwrap();
        let mut model: Model = Vec::new();
        for (records, timestamps, control) in &batches {
            let appended = log.append_as_leader(batch(*records, timestamps, *control), 1).unwrap();
            let max = *timestamps[..(*records).min(timestamps.len())].iter().max().unwrap();
            model.push((appended.base_offset, appended.last_offset, max, *control));
        }
        let end = log.log_end_offset();
        let check = |log: &PartitionLog| -> Result<(), TestCaseError> {
            for (a, b, target) in &queries {
                let (from, below) = (a.min(b) % (end + 1), a.max(b) % (end + 2));
                prop_assert_eq!(
                    log.find_batch_by_timestamp(from, below, *target),
                    expected(&model, from, below, *target),
                    "from {} below {} target {:?}", from, below, target
                );
            }
            Ok(())
        };
        check(&log)?;
        log.flush_and_wait(&mut io).unwrap();
        log.close(&mut io).unwrap();
        let (log, _) = PartitionLog::open(&mut io, dir, small_config()).unwrap();
        check(&log)?;
    }
}
