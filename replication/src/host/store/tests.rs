//! PartitionStore on real files (syscall backend).

use super::*;
use ringlog_engine::batch::RecordBatchBuilder;
use ringlog_engine::io::{AnyIo, SyscallIo};

fn open(io: &mut AnyIo, dir: &Path) -> PartitionStore {
    let (store, _) =
        PartitionStore::open(io, dir, LogConfig::default(), "cluster", &[1], false, false)
            .expect("open");
    store
}

/// A partition opened while another log's flush is in flight (a topic created while the
/// metadata partition fetches): the blocking reads of the opening take only their own
/// completions, so the other log's stay in the ring and its flush still completes. Seen
/// before routing by owner: the quorum-state read dropped them, the metadata partition
/// waited for its flush forever and never fetched again, and a restarted node kept a
/// deleted topic (tests/topics_admin.rs).
#[test]
fn completions_of_another_log_survive_a_partition_opening() {
    let folder = tempfile::tempdir().unwrap();
    let mut io = AnyIo::Syscall(SyscallIo::new());
    // Partition b exists with a quorum-state file, so reopening it reads through the ring.
    let mut b = open(&mut io, &folder.path().join("b"));
    b.write_quorum_state(&mut io, ElectionState::default())
        .unwrap();
    b.finish_quorum_state(&mut io).unwrap();
    drop(b);

    let mut a = open(&mut io, &folder.path().join("a"));
    let mut builder = RecordBatchBuilder::new(0);
    builder.append(1, None, Some(b"v"), &[]);
    a.append_as_leader(&[builder.build().into_bytes()], 1)
        .unwrap();
    a.log.flush(&mut io).unwrap();
    let _b = open(&mut io, &folder.path().join("b"));
    assert!(io.ready_count() > 0, "reopening b ran a's queued flush");

    for _ in 0..16 {
        let mut ready = Vec::new();
        io.submit_and_wait(0).unwrap();
        io.drain_completions(&mut ready);
        assert!(route_completions(&mut io, &mut [(0, &mut a)], ready).is_empty());
        if a.log.durable_end_offset() == 1 {
            return;
        }
    }
    panic!("a's flush never completed: its completions were lost");
}

/// The log's tail cache follows the replica's role: a leader answers its followers' reads
/// of what it has just flushed from memory, a follower keeps nothing it is not asked for.
#[test]
fn only_a_leading_replica_keeps_the_tail_cache() {
    let folder = tempfile::tempdir().unwrap();
    let mut io = AnyIo::Syscall(SyscallIo::new());
    let mut store = open(&mut io, &folder.path().join("p"));
    let append_and_flush = |store: &mut PartitionStore, io: &mut AnyIo, i: u64| {
        let mut builder = RecordBatchBuilder::new(0);
        builder.append(1, None, Some(&[i as u8; 3000]), &[]);
        store
            .append_as_leader(&[builder.build().into_bytes()], 1)
            .unwrap();
        store.log.flush_and_wait(io).unwrap();
    };
    let in_memory = |store: &PartitionStore, io: &AnyIo| {
        !matches!(
            store.log.read(io, 5, 1 << 20).unwrap(),
            ringlog_engine::log::ReadView::File { .. }
        )
    };
    store.set_leading(true);
    for i in 0..10 {
        append_and_flush(&mut store, &mut io, i);
    }
    assert!(
        in_memory(&store, &io),
        "a leader reads its flushed tail from memory"
    );
    store.set_leading(false);
    assert!(!in_memory(&store, &io), "a follower dropped it");
    for i in 10..20 {
        append_and_flush(&mut store, &mut io, i);
    }
    assert!(!in_memory(&store, &io), "and keeps none of what it writes");
}
