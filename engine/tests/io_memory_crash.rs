//! The memory backend's crash model: what survives power loss, what tears, what faults do.
//! These are the guarantees the log's crash tests rely on, so each is pinned here.

use std::path::{Path, PathBuf};

use ringlog_engine::io::memory::{FaultConfig, FaultKind, FaultTrigger, SimRng};
use ringlog_engine::io::{
    AlignedBuf, Completion, FileId, Io, MemoryConfig, MemoryIo, Op, OpenOptions,
};

const CREATE: OpenOptions = OpenOptions {
    create: true,
    create_new: false,
    read_only: false,
    direct: false,
};
const EXISTING: OpenOptions = OpenOptions {
    create: false,
    create_new: false,
    read_only: false,
    direct: false,
};

fn dir() -> PathBuf {
    PathBuf::from("/data/topic-0")
}

fn file_path() -> PathBuf {
    dir().join("00000000000000000000.log")
}

fn io_with(seed: u64, faults: FaultConfig) -> MemoryIo {
    MemoryIo::new(MemoryConfig {
        seed,
        faults,
        ..MemoryConfig::default()
    })
}

/// A durable directory tree /data/topic-0 (every level synced in its parent).
fn durable_dir(io: &mut MemoryIo) {
    io.create_dir_all(&dir()).expect("mkdir");
    for d in ["/", "/data", "/data/topic-0"] {
        io.sync_dir(Path::new(d)).expect("sync dir");
    }
}

/// Create the log file and make its directory entry durable.
fn durable_file(io: &mut MemoryIo) -> FileId {
    durable_dir(io);
    let file = io.open(&file_path(), CREATE).expect("create");
    io.sync_dir(&dir()).expect("sync dir");
    file
}

fn wait_all(io: &mut MemoryIo, expected: usize) -> Vec<Completion> {
    let mut out = Vec::new();
    while out.len() < expected {
        io.submit_and_wait(expected - out.len()).expect("wait");
        io.drain_completions(&mut out);
    }
    out
}

fn write_op(file: FileId, offset: u64, data: &[u8]) -> Op {
    Op::Write {
        file,
        offset,
        buf: AlignedBuf::from_slice(data, 4096),
    }
}

/// Write then fdatasync as one linked chain, and check both succeeded.
fn write_synced(io: &mut MemoryIo, file: FileId, offset: u64, data: &[u8]) {
    io.submit_linked(vec![write_op(file, offset, data), Op::Fdatasync { file }]);
    for c in wait_all(io, 2) {
        c.result.expect("write + fdatasync");
    }
}

fn write_unsynced(io: &mut MemoryIo, file: FileId, offset: u64, data: &[u8]) {
    io.submit(write_op(file, offset, data));
    wait_all(io, 1).pop().expect("one").result.expect("write");
}

#[test]
fn unsynced_data_is_lost_synced_data_is_kept() {
    let mut io = MemoryIo::with_seed(1);
    let file = durable_file(&mut io);
    write_synced(&mut io, file, 0, b"acknowledged");
    write_unsynced(&mut io, file, 12, b"-not-yet");
    assert_eq!(
        io.visible_bytes(&file_path()).expect("visible"),
        b"acknowledged-not-yet"
    );
    let report = io.crash();
    assert!(
        report.torn_writes.is_empty(),
        "no tear without tear probability"
    );
    assert_eq!(
        io.durable_bytes(&file_path()).expect("file survives"),
        b"acknowledged"
    );
    let file = io.open(&file_path(), EXISTING).expect("reopen after crash");
    assert_eq!(io.file_size_bytes(file).expect("size"), 12);
}

#[test]
fn a_completed_dsync_write_is_kept_and_carries_no_other_write() {
    // RWF_DSYNC makes its own bytes durable, as if followed by an fdatasync of that range, and
    // nothing else: an earlier plain write elsewhere in the file is still lost.
    let mut io = MemoryIo::with_seed(3);
    let file = durable_file(&mut io);
    write_synced(&mut io, file, 0, b"synced......");
    write_unsynced(&mut io, file, 0, b"PLAIN");
    io.submit(Op::WriteDsync {
        file,
        offset: 12,
        buf: AlignedBuf::from_slice(b"+dsync", 4096),
    });
    wait_all(&mut io, 1)
        .pop()
        .expect("one")
        .result
        .expect("dsync write");
    assert_eq!(
        io.visible_bytes(&file_path()).expect("visible"),
        b"PLAINd......+dsync"
    );
    io.crash();
    assert_eq!(
        io.durable_bytes(&file_path()).expect("file survives"),
        b"synced......+dsync"
    );
}

#[test]
fn crash_closes_files_and_drops_undrained_completions() {
    let mut io = MemoryIo::with_seed(1);
    let file = durable_file(&mut io);
    io.submit(write_op(file, 0, b"queued"));
    let report = io.crash();
    assert_eq!(report.lost_operations, 1);
    assert_eq!(io.in_flight(), 0);
    assert_eq!(
        io.file_size_bytes(file)
            .expect_err("stale handle")
            .raw_os_error(),
        Some(libc::EBADF)
    );
}

#[test]
fn fdatasync_covers_set_len_only_when_synced() {
    let mut io = MemoryIo::with_seed(1);
    let file = durable_file(&mut io);
    write_synced(&mut io, file, 0, b"0123456789");
    io.set_len(file, 4).expect("truncate");
    io.crash();
    assert_eq!(
        io.durable_bytes(&file_path()).expect("file"),
        b"0123456789",
        "an unsynced truncate is undone"
    );
    let file = io.open(&file_path(), EXISTING).expect("reopen");
    io.set_len(file, 4).expect("truncate");
    io.set_len(file, 6).expect("extend");
    io.submit(Op::Fdatasync { file });
    wait_all(&mut io, 1)
        .pop()
        .expect("one")
        .result
        .expect("fdatasync");
    io.crash();
    assert_eq!(
        io.durable_bytes(&file_path()).expect("file"),
        b"0123\0\0",
        "a synced truncate + extend persists"
    );
}

#[test]
fn a_synced_file_whose_directory_entry_was_never_synced_disappears() {
    let mut io = MemoryIo::with_seed(1);
    durable_dir(&mut io);
    let file = io.open(&file_path(), CREATE).expect("create");
    write_synced(&mut io, file, 0, b"data");
    io.crash();
    assert!(
        !io.exists(&file_path()),
        "fsync of the file does not make its name durable"
    );
    assert!(io.durable_files().is_empty());
}

#[test]
fn a_directory_whose_parent_was_never_synced_disappears_with_its_files() {
    let mut io = MemoryIo::with_seed(1);
    io.create_dir_all(&dir()).expect("mkdir");
    let file = io.open(&file_path(), CREATE).expect("create");
    write_synced(&mut io, file, 0, b"data");
    io.sync_dir(&dir()).expect("sync the leaf only");
    io.crash();
    assert!(!io.exists(Path::new("/data")));
}

#[test]
fn an_unsynced_rename_is_undone_and_a_synced_one_persists() {
    let mut io = MemoryIo::with_seed(1);
    durable_dir(&mut io);
    let part = dir().join("quorum-state.tmp");
    let target = dir().join("quorum-state");
    let f = io.open(&part, CREATE).expect("create");
    write_synced(&mut io, f, 0, b"epoch=2");
    io.close(f).expect("close");
    io.sync_dir(&dir()).expect("sync");
    io.rename(&part, &target).expect("rename");
    io.crash();
    assert!(
        io.exists(&part) && !io.exists(&target),
        "the rename was not durable"
    );

    io.rename(&part, &target).expect("rename");
    io.sync_dir(&dir()).expect("sync");
    io.crash();
    assert!(!io.exists(&part));
    assert_eq!(io.durable_bytes(&target).expect("target"), b"epoch=2");
}

#[test]
fn a_directory_handle_s_fdatasync_makes_a_rename_durable() {
    let mut io = MemoryIo::with_seed(1);
    durable_dir(&mut io);
    let part = dir().join("quorum-state.tmp");
    let target = dir().join("quorum-state");
    let f = io.open(&part, CREATE).expect("create");
    write_synced(&mut io, f, 0, b"epoch=3");
    io.close(f).expect("close");
    io.rename(&part, &target).expect("rename");
    let handle = io.open_dir(&dir()).expect("open_dir");
    let id = io.submit(Op::Fdatasync { file: handle });
    let done = ringlog_engine::io::wait_for_all(&mut io, &[id]).expect("wait");
    assert!(done[0].result.is_ok());
    io.close(handle).expect("close");
    io.crash();
    assert!(!io.exists(&part));
    assert_eq!(io.durable_bytes(&target).expect("target"), b"epoch=3");
}

#[test]
fn an_unsynced_remove_comes_back() {
    let mut io = MemoryIo::with_seed(1);
    let file = durable_file(&mut io);
    write_synced(&mut io, file, 0, b"segment");
    io.close(file).expect("close");
    io.remove_file(&file_path()).expect("remove");
    assert!(!io.exists(&file_path()));
    io.crash();
    assert_eq!(io.durable_bytes(&file_path()).expect("back"), b"segment");
    io.remove_file(&file_path()).expect("remove");
    io.sync_dir(&dir()).expect("sync");
    io.crash();
    assert!(!io.exists(&file_path()));
}

#[test]
fn tearing_cuts_the_last_unsynced_write_at_arbitrary_bytes() {
    let synced = vec![0xAAu8; 100];
    let torn = vec![0xBBu8; 1000];
    let mut cuts = std::collections::BTreeSet::new();
    for seed in 0..200 {
        let mut io = io_with(
            seed,
            FaultConfig {
                tear_probability: 1.0,
                ..FaultConfig::default()
            },
        );
        let file = durable_file(&mut io);
        write_synced(&mut io, file, 0, &synced);
        write_unsynced(&mut io, file, 100, &torn);
        let report = io.crash();
        assert_eq!(report.torn_writes.len(), 1);
        let tear = &report.torn_writes[0];
        assert_eq!(
            (tear.path.as_path(), tear.offset, tear.len_bytes),
            (file_path().as_path(), 100, 1000)
        );
        assert!(tear.applied_bytes < 1000, "a tear is a strict prefix");
        let durable = io.durable_bytes(&file_path()).expect("file");
        assert_eq!(&durable[..100], &synced[..], "synced bytes are untouched");
        assert_eq!(
            &durable[100..],
            &torn[..tear.applied_bytes],
            "exactly the prefix landed"
        );
        cuts.insert(tear.applied_bytes);
    }
    assert!(
        cuts.len() > 100,
        "cuts spread over many byte positions: {}",
        cuts.len()
    );
    assert!(
        cuts.iter().any(|c| c % 512 != 0),
        "cuts fall inside sectors, not only on boundaries"
    );
}

#[test]
fn only_the_newest_unsynced_write_tears_older_ones_vanish_or_land_whole() {
    for seed in 0..50 {
        let faults = FaultConfig {
            tear_probability: 1.0,
            writeback_probability: 0.5,
            ..FaultConfig::default()
        };
        let mut io = io_with(seed, faults);
        let file = durable_file(&mut io);
        write_unsynced(&mut io, file, 0, &[1u8; 64]);
        write_unsynced(&mut io, file, 64, &[2u8; 64]);
        let report = io.crash();
        let durable = io.durable_bytes(&file_path()).expect("file");
        let first = report.torn_writes.iter().find(|t| t.offset == 0);
        if let Some(first) = first {
            assert_eq!(
                first.applied_bytes, 64,
                "an older write lands whole (writeback) or not at all"
            );
            assert_eq!(&durable[..64], &[1u8; 64]);
        }
        let second = report
            .torn_writes
            .iter()
            .find(|t| t.offset == 64)
            .expect("tear probability 1");
        assert!(second.applied_bytes < 64);
        assert_eq!(
            durable.len(),
            if second.applied_bytes > 0 {
                64 + second.applied_bytes
            } else {
                first.map_or(0, |_| 64)
            }
        );
    }
}

#[test]
fn a_write_still_queued_at_the_crash_can_tear() {
    let mut io = io_with(
        3,
        FaultConfig {
            tear_probability: 1.0,
            ..FaultConfig::default()
        },
    );
    let file = durable_file(&mut io);
    io.submit(write_op(file, 0, &[7u8; 4096]));
    let report = io.crash();
    assert_eq!(report.torn_writes.len(), 1);
    let applied = report.torn_writes[0].applied_bytes;
    assert_eq!(
        io.durable_bytes(&file_path()).expect("file"),
        vec![7u8; applied]
    );
}

/// A chain still queued at the crash: its operations after an fdatasync never started (the
/// kernel starts a linked operation once the one before completed), so only the writes before
/// it may land.
#[test]
fn a_queued_chain_s_write_after_its_fdatasync_never_lands() {
    for seed in 0..50 {
        let mut io = io_with(
            seed,
            FaultConfig {
                tear_probability: 0.5,
                tear_every_unsynced_write: true,
                writeback_probability: 0.5,
                ..FaultConfig::default()
            },
        );
        let file = durable_file(&mut io);
        io.submit_linked(vec![
            write_op(file, 0, &[1u8; 4096]),
            Op::Fdatasync { file },
            write_op(file, 4096, &[2u8; 4096]),
            Op::Fdatasync { file },
        ]);
        let report = io.crash();
        assert!(
            report.torn_writes.iter().all(|t| t.offset == 0),
            "seed {seed}: {report:?}"
        );
        let durable = io.durable_bytes(&file_path()).expect("file");
        assert!(
            durable.len() <= 4096,
            "seed {seed}: {} bytes",
            durable.len()
        );
    }
}

#[test]
fn a_flipped_bit_is_visible_before_and_after_a_crash() {
    let mut io = MemoryIo::with_seed(1);
    let file = durable_file(&mut io);
    write_synced(&mut io, file, 0, &[0u8; 16]);
    io.flip_bit(&file_path(), 5, 3).expect("flip");
    let mut expected = vec![0u8; 16];
    expected[5] = 1 << 3;
    assert_eq!(
        io.visible_bytes(&file_path()).expect("visible"),
        expected,
        "a clean page shows the flip"
    );
    io.crash();
    assert_eq!(io.durable_bytes(&file_path()).expect("durable"), expected);
    assert_eq!(
        io.flip_bit(&file_path(), 16, 0)
            .expect_err("past the end")
            .raw_os_error(),
        Some(libc::EINVAL)
    );
    assert_eq!(
        io.flip_bit(&file_path(), 0, 8)
            .expect_err("bad bit")
            .raw_os_error(),
        Some(libc::EINVAL)
    );

    let (path, offset, bit) = io.flip_random_bit().expect("a file with bytes exists");
    assert_eq!(path, file_path());
    let durable = io.durable_bytes(&file_path()).expect("durable");
    let differs: Vec<usize> = (0..16).filter(|&i| durable[i] != expected[i]).collect();
    if offset == 5 && bit == 3 {
        assert!(
            differs.is_empty(),
            "flipping the same bit twice restores it"
        );
    } else {
        assert_eq!(differs, vec![offset as usize]);
        assert_eq!(
            durable[offset as usize] ^ expected[offset as usize],
            1 << bit
        );
    }
}

/// Run a fault-heavy scenario and return everything observable.
/// (op id, bytes or errno) of every completion, the crash report, the durable file.
type ScenarioOutcome = (
    Vec<(u64, Result<usize, i32>)>,
    ringlog_engine::io::memory::CrashReport,
    Vec<u8>,
);

fn scenario(seed: u64) -> ScenarioOutcome {
    let faults = FaultConfig {
        tear_probability: 0.7,
        writeback_probability: 0.3,
        write_eio_probability: 0.1,
        fsync_eio_probability: 0.1,
        reorder_completions: true,
        delay_probability: 0.3,
        ..FaultConfig::default()
    };
    let mut io = io_with(seed, faults);
    let file = durable_file(&mut io);
    let mut results = Vec::new();
    for round in 0..20u64 {
        io.submit(write_op(file, round * 10, &[round as u8; 10]));
        if round % 3 == 0 {
            io.submit(Op::Fdatasync { file });
        }
        io.submit_and_wait(1).expect("wait");
        let mut out = Vec::new();
        io.drain_completions(&mut out);
        results.extend(out.into_iter().map(|c| {
            (
                c.op_id.0,
                c.result.map_err(|e| e.raw_os_error().unwrap_or(-1)),
            )
        }));
    }
    let report = io.crash();
    (
        results,
        report,
        io.durable_bytes(&file_path()).expect("file"),
    )
}

#[test]
fn same_seed_same_outcome() {
    assert_eq!(scenario(42), scenario(42));
    let distinct: std::collections::BTreeSet<Vec<u8>> =
        (0..10).map(|seed| scenario(seed).2).collect();
    assert!(
        distinct.len() > 1,
        "different seeds explore different outcomes"
    );
}

#[test]
fn injected_write_and_read_errors_carry_path_and_offset() {
    let mut io = MemoryIo::with_seed(1);
    let file = durable_file(&mut io);
    io.add_fault(FaultTrigger::once_at(FaultKind::WriteEio, file_path()));
    io.submit(write_op(file, 8, b"lost"));
    let failed = wait_all(&mut io, 1).pop().expect("one");
    let e = failed.result.expect_err("injected EIO");
    assert_eq!(
        (e.raw_os_error(), e.path.as_path(), e.offset),
        (Some(libc::EIO), file_path().as_path(), 8)
    );
    assert_eq!(failed.buf.expect("buffer back").as_slice(), b"lost");
    assert_eq!(
        io.file_size_bytes(file).expect("size"),
        0,
        "a failed write writes nothing"
    );
    write_unsynced(&mut io, file, 0, &[9u8; 8192]);

    // A bad sector at byte 5000: every read covering it fails, others do not.
    io.add_fault(FaultTrigger::always_at(
        FaultKind::ReadEio,
        file_path(),
        5000,
    ));
    for _ in 0..2 {
        io.submit(Op::Read {
            file,
            offset: 4096,
            len: 4096,
        });
        let c = wait_all(&mut io, 1).pop().expect("one");
        assert_eq!(
            c.result.expect_err("bad sector").raw_os_error(),
            Some(libc::EIO)
        );
    }
    io.submit(Op::Read {
        file,
        offset: 0,
        len: 4096,
    });
    assert_eq!(
        wait_all(&mut io, 1)
            .pop()
            .expect("one")
            .result
            .expect("good sector"),
        4096
    );

    io.add_fault(FaultTrigger::once(FaultKind::WriteEnospc));
    io.submit(write_op(file, 0, b"x"));
    let c = wait_all(&mut io, 1).pop().expect("one");
    assert_eq!(
        c.result.expect_err("ENOSPC").raw_os_error(),
        Some(libc::ENOSPC)
    );
}

#[test]
fn a_failed_fdatasync_makes_nothing_durable_and_cancels_nothing_before_it() {
    let mut io = MemoryIo::with_seed(1);
    let file = durable_file(&mut io);
    io.add_fault(FaultTrigger::once(FaultKind::FsyncEio));
    let ids = io.submit_linked(vec![write_op(file, 0, b"group"), Op::Fdatasync { file }]);
    let out = wait_all(&mut io, 2);
    assert_eq!(
        out.iter()
            .find(|c| c.op_id == ids[0])
            .expect("write")
            .result
            .as_ref()
            .expect("write ok"),
        &5
    );
    let sync = out.iter().find(|c| c.op_id == ids[1]).expect("fdatasync");
    assert_eq!(
        sync.result.as_ref().expect_err("EIO").raw_os_error(),
        Some(libc::EIO)
    );
    io.crash();
    assert_eq!(io.durable_bytes(&file_path()).expect("file"), b"");
}

#[test]
fn probabilistic_enospc_fails_every_write() {
    let mut io = io_with(
        5,
        FaultConfig {
            write_enospc_probability: 1.0,
            ..FaultConfig::default()
        },
    );
    let file = durable_file(&mut io);
    for offset in 0..5 {
        io.submit(write_op(file, offset, b"y"));
    }
    for c in wait_all(&mut io, 5) {
        assert_eq!(
            c.result.expect_err("ENOSPC").raw_os_error(),
            Some(libc::ENOSPC)
        );
    }
}

#[test]
fn delayed_completions_catch_a_caller_that_does_not_wait() {
    let mut io = io_with(
        1,
        FaultConfig {
            delay_probability: 1.0,
            ..FaultConfig::default()
        },
    );
    let file = durable_file(&mut io);
    io.submit(write_op(file, 0, b"a"));
    io.submit(write_op(file, 1, b"b"));
    io.submit_and_wait(0).expect("no wait");
    let mut out = Vec::new();
    io.drain_completions(&mut out);
    assert!(
        out.is_empty(),
        "with every op delayed, nothing completes unless waited for"
    );
    io.submit_and_wait(1).expect("wait one");
    io.drain_completions(&mut out);
    assert_eq!(
        out.len(),
        1,
        "FIFO: the first op completes, the second stays delayed"
    );
    assert_eq!(io.in_flight(), 1);
    io.submit_and_wait(1).expect("wait one");
    io.drain_completions(&mut out);
    assert_eq!(out.len(), 2);
}

#[test]
fn reordering_catches_an_unlinked_fdatasync_but_never_a_linked_one() {
    let mut lost_unlinked = 0;
    for seed in 0..64 {
        for linked in [false, true] {
            let mut io = io_with(
                seed,
                FaultConfig {
                    reorder_completions: true,
                    ..FaultConfig::default()
                },
            );
            let file = durable_file(&mut io);
            let ops = vec![write_op(file, 0, b"record"), Op::Fdatasync { file }];
            if linked {
                io.submit_linked(ops);
            } else {
                for op in ops {
                    io.submit(op);
                }
            }
            for c in wait_all(&mut io, 2) {
                c.result.expect("ok");
            }
            io.crash();
            let durable = io.durable_bytes(&file_path()).expect("file");
            if linked {
                assert_eq!(durable, b"record", "seed {seed}: a linked chain is durable");
            } else if durable.is_empty() {
                lost_unlinked += 1;
            }
        }
    }
    assert!(
        lost_unlinked > 0,
        "reordering must expose an fdatasync submitted before its write completed"
    );
}

#[test]
fn snapshot_and_restore_the_durable_state() {
    let mut io = MemoryIo::with_seed(1);
    let file = durable_file(&mut io);
    write_synced(&mut io, file, 0, b"v1");
    write_unsynced(&mut io, file, 2, b"-dirty");
    let snapshot = io.snapshot();
    write_synced(&mut io, file, 0, b"v2");
    assert_eq!(io.durable_bytes(&file_path()).expect("file"), b"v2-dirty");
    io.restore(&snapshot);
    assert_eq!(
        io.durable_bytes(&file_path()).expect("file"),
        b"v1",
        "the snapshot holds only durable state"
    );
    assert_eq!(io.visible_bytes(&file_path()).expect("file"), b"v1");
    let twin = MemoryIo::from_snapshot(&snapshot, MemoryConfig::default());
    assert_eq!(twin.durable_files(), vec![file_path()]);
    assert_eq!(twin.durable_bytes(&file_path()).expect("file"), b"v1");
}

#[test]
fn crash_with_an_external_rng_is_deterministic() {
    let run = |seed| {
        let mut io = io_with(
            0,
            FaultConfig {
                tear_probability: 1.0,
                ..FaultConfig::default()
            },
        );
        let file = durable_file(&mut io);
        write_unsynced(&mut io, file, 0, &[3u8; 777]);
        io.crash_with(&mut SimRng::new(seed))
            .torn_writes
            .iter()
            .map(|t| t.applied_bytes)
            .collect::<Vec<_>>()
    };
    assert_eq!(run(11), run(11));
    assert!(
        (0..8)
            .map(run)
            .collect::<std::collections::BTreeSet<_>>()
            .len()
            > 1
    );
}

#[test]
fn close_with_an_operation_in_flight_is_refused() {
    let mut io = MemoryIo::with_seed(1);
    let file = durable_file(&mut io);
    io.submit(write_op(file, 0, b"in flight"));
    let refused = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| io.close(file)));
    assert!(
        refused.is_err(),
        "closing a file with a queued operation is a bug the backend asserts on"
    );
}

#[test]
fn after_a_failed_fdatasync_a_retry_succeeds_but_the_data_is_not_durable() {
    // Linux drops the dirty pages a failed writeback covered ("fsyncgate"); retrying fsync then
    // reports success. The model does the same, so only "fsync EIO is fatal" survives a crash.
    let mut io = MemoryIo::with_seed(1);
    let file = durable_file(&mut io);
    write_synced(&mut io, file, 0, b"old-data");
    write_unsynced(&mut io, file, 0, b"NEW!");
    write_unsynced(&mut io, file, 8, b"+tail");
    io.add_fault(FaultTrigger::once(FaultKind::FsyncEio));
    io.submit(Op::Fdatasync { file });
    let failed = wait_all(&mut io, 1).pop().expect("one");
    assert_eq!(
        failed.result.expect_err("EIO").raw_os_error(),
        Some(libc::EIO)
    );
    io.submit(Op::Fdatasync { file });
    wait_all(&mut io, 1)
        .pop()
        .expect("one")
        .result
        .expect("the retry reports success");
    assert_eq!(
        io.visible_bytes(&file_path()).expect("visible"),
        b"NEW!data+tail",
        "the cache still shows it"
    );
    io.crash();
    assert_eq!(
        io.durable_bytes(&file_path()).expect("durable"),
        b"old-data\0\0\0\0\0",
        "the overwrite never reached the medium and the extension is zeros"
    );
}
