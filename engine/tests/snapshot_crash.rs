//! KIP-630 snapshot durability on the memory backend: a crash after every step of writing and
//! freezing a snapshot (with torn writes and random writeback) recovers to the old or the new
//! snapshot, never a mix and never a `.part`; bit flips anywhere in a snapshot are detected.

#[macro_use]
mod io_forward;
use std::path::{Path, PathBuf};

use ringlog_engine::io::memory::{FaultConfig, SimRng};
use ringlog_engine::io::{
    Completion, FileId, Io, IoError, MemoryConfig, MemoryIo, Op, OpId, OpenOptions,
};
use ringlog_engine::snapshot::{
    PartPolicy, RawSnapshotReader, RawSnapshotWriter, SnapshotContents, SnapshotFormat, SnapshotId,
    delete_snapshots_before, latest_valid_snapshot, list_snapshots, naming, recover_snapshot_dir,
    write_snapshot,
};

const DIR: &str = "/data/__cluster_metadata-0";
const OLD: SnapshotId = SnapshotId {
    end_offset: 100,
    epoch: 1,
};
const NEW: SnapshotId = SnapshotId {
    end_offset: 200,
    epoch: 2,
};

/// Passes operations to a `MemoryIo` until its budget of effectful calls runs out, then fails
/// every call: the process died at that point. Counting every call (open, rename, sync_dir,
/// each submitted write and fdatasync, ...) puts a crash point after every step.
struct DyingIo {
    inner: MemoryIo,
    budget: usize,
    calls: usize,
    dead_completions: Vec<Completion>,
    next_dead_op: u64,
}

impl DyingIo {
    fn new(inner: MemoryIo, budget: usize) -> DyingIo {
        DyingIo {
            inner,
            budget,
            calls: 0,
            dead_completions: Vec::new(),
            next_dead_op: u64::MAX / 2,
        }
    }

    /// Count a call; `false` once the process is dead.
    fn alive(&mut self) -> bool {
        self.calls += 1;
        self.calls <= self.budget
    }

    fn dead(operation: &'static str, path: &Path) -> IoError {
        IoError::new(
            operation,
            path,
            0,
            std::io::Error::from_raw_os_error(libc_eio()),
        )
    }

    fn dead_completion(&mut self, op: Op) -> OpId {
        let op_id = OpId(self.next_dead_op);
        self.next_dead_op += 1;
        let buf = match op {
            Op::Write { buf, .. } => Some(buf),
            _ => None,
        };
        self.dead_completions.push(Completion {
            op_id,
            result: Err(DyingIo::dead("dead", Path::new(DIR))),
            buf,
        });
        op_id
    }
}

fn libc_eio() -> i32 {
    5
}

impl Io for DyingIo {
    // `close` is forwarded even when dead: it has no durability effect, and the backend must
    // not leak.
    forward_io!(inner; block_size_bytes, close, file_size_bytes, preallocate, list_dir, exists, raw_fd);
    fn open(&mut self, path: &Path, options: OpenOptions) -> Result<FileId, IoError> {
        if !self.alive() {
            return Err(DyingIo::dead("open", path));
        }
        self.inner.open(path, options)
    }
    fn set_len(&mut self, file: FileId, len_bytes: u64) -> Result<(), IoError> {
        if !self.alive() {
            return Err(DyingIo::dead("set_len", Path::new(DIR)));
        }
        self.inner.set_len(file, len_bytes)
    }
    fn create_dir_all(&mut self, path: &Path) -> Result<(), IoError> {
        if !self.alive() {
            return Err(DyingIo::dead("create_dir_all", path));
        }
        self.inner.create_dir_all(path)
    }
    fn rename(&mut self, from: &Path, to: &Path) -> Result<(), IoError> {
        if !self.alive() {
            return Err(DyingIo::dead("rename", from));
        }
        self.inner.rename(from, to)
    }
    fn remove_file(&mut self, path: &Path) -> Result<(), IoError> {
        if !self.alive() {
            return Err(DyingIo::dead("remove_file", path));
        }
        self.inner.remove_file(path)
    }
    fn sync_dir(&mut self, path: &Path) -> Result<(), IoError> {
        if !self.alive() {
            return Err(DyingIo::dead("sync_dir", path));
        }
        self.inner.sync_dir(path)
    }
    fn open_dir(&mut self, path: &Path) -> Result<FileId, IoError> {
        if !self.alive() {
            return Err(DyingIo::dead("open_dir", path));
        }
        self.inner.open_dir(path)
    }
    fn submit(&mut self, op: Op) -> OpId {
        if !self.alive() {
            return self.dead_completion(op);
        }
        self.inner.submit(op)
    }
    fn submit_linked(&mut self, ops: Vec<Op>) -> Vec<OpId> {
        ops.into_iter().map(|op| self.submit(op)).collect()
    }
    fn submit_and_wait(&mut self, min_completions: usize) -> Result<(), IoError> {
        if !self.dead_completions.is_empty() {
            return Ok(());
        }
        self.inner.submit_and_wait(min_completions)
    }
    fn drain_completions(&mut self, out: &mut Vec<Completion>) {
        out.append(&mut self.dead_completions);
        self.inner.drain_completions(out)
    }
    fn take_completions(&mut self, ids: &[OpId], out: &mut Vec<Completion>) {
        let (ours, others): (Vec<Completion>, Vec<Completion>) = self
            .dead_completions
            .drain(..)
            .partition(|c| ids.contains(&c.op_id));
        self.dead_completions = others;
        out.extend(ours);
        self.inner.take_completions(ids, out)
    }
    fn ready_count(&mut self) -> usize {
        self.dead_completions.len() + self.inner.ready_count()
    }
    fn in_flight(&self) -> usize {
        self.inner.in_flight() + self.dead_completions.len()
    }
}

fn format() -> SnapshotFormat {
    SnapshotFormat {
        name: "crash-test".into(),
        version: 0,
    }
}

/// Records of a snapshot: ~600 KB, so a torn write can cut inside any of several batches.
fn state(id: SnapshotId) -> Vec<(Vec<u8>, Vec<u8>)> {
    (0..1_500u32)
        .map(|i| {
            (
                format!("key-{i:05}").into_bytes(),
                vec![id.epoch as u8; 400 + (i as usize % 7)],
            )
        })
        .collect()
}

fn write_state<I: Io>(
    io: &mut I,
    id: SnapshotId,
) -> Result<PathBuf, ringlog_engine::snapshot::SnapshotError> {
    let records = state(id);
    write_snapshot(io, Path::new(DIR), id, &format(), 0, |sink| {
        for (key, value) in &records {
            sink.append_record(Some(key), Some(value));
        }
    })
}

fn records_of(contents: &SnapshotContents) -> Vec<(Vec<u8>, Vec<u8>)> {
    contents
        .records()
        .map(|r| {
            let r = r.unwrap();
            (r.key().unwrap().to_vec(), r.value().unwrap().to_vec())
        })
        .collect()
}

fn disk_with_old_snapshot(seed: u64) -> MemoryIo {
    let mut io = MemoryIo::new(MemoryConfig {
        seed,
        faults: FaultConfig {
            tear_probability: 0.7,
            writeback_probability: 0.5,
            ..FaultConfig::default()
        },
        ..MemoryConfig::default()
    });
    write_state(&mut io, OLD).unwrap();
    io
}

/// After the crash: restart, recover, load. The loaded snapshot must be exactly OLD's or
/// exactly `new_id`'s state, from a `.checkpoint`, with nothing skipped and no `.part` left.
fn check_recovery(io: &mut MemoryIo, allowed: &[SnapshotId]) -> SnapshotId {
    recover_snapshot_dir(io, Path::new(DIR), PartPolicy::Remove).unwrap();
    let listing = list_snapshots(io, Path::new(DIR)).unwrap();
    assert!(
        listing.partial.is_empty() && listing.deleted.is_empty(),
        "{listing:?}"
    );
    let (contents, skipped) = latest_valid_snapshot(io, Path::new(DIR)).unwrap();
    assert!(
        skipped.is_empty(),
        "a frozen snapshot failed validation: {:?}",
        skipped[0].1.to_string()
    );
    let contents = contents.expect("the old snapshot at least survives");
    assert!(
        allowed.contains(&contents.snapshot_id),
        "{:?}",
        contents.snapshot_id
    );
    assert!(contents.path.to_str().unwrap().ends_with(".checkpoint"));
    assert_eq!(
        records_of(&contents),
        state(contents.snapshot_id),
        "never a mix"
    );
    contents.snapshot_id
}

/// Count the effectful calls of a full, crash-free run.
fn calls_of(run: impl Fn(&mut DyingIo)) -> usize {
    let mut io = DyingIo::new(disk_with_old_snapshot(0), usize::MAX);
    run(&mut io);
    io.calls
}

fn crash_at_every_call(run: impl Fn(&mut DyingIo), allowed: &[SnapshotId], completed: SnapshotId) {
    let total = calls_of(&run);
    assert!(total >= 5, "the sequence has its steps: {total}");
    let mut outcomes = std::collections::BTreeSet::new();
    for budget in 0..=total {
        for seed in 0..4u64 {
            let mut io = DyingIo::new(disk_with_old_snapshot(seed), budget);
            run(&mut io);
            let mut disk = io.inner;
            disk.crash_with(&mut SimRng::new(seed * 1_000 + budget as u64));
            let loaded = check_recovery(&mut disk, allowed);
            if budget == total {
                assert_eq!(loaded, completed, "a completed sequence is durable");
            }
            outcomes.insert(loaded);
        }
    }
    assert_eq!(
        outcomes.len(),
        allowed.len(),
        "both outcomes are reachable: {outcomes:?}"
    );
}

// KIP-630 write + freeze: the crash table in engine/src/snapshot/mod.rs, step by step.
#[test]
fn crash_at_every_step_of_a_local_snapshot_leaves_old_or_new() {
    crash_at_every_call(
        |io| {
            let _ = write_state(io, NEW);
        },
        &[OLD, NEW],
        NEW,
    );
}

// KIP-630 FetchSnapshot: chunks at their Position, validated, frozen the same way.
#[test]
fn crash_at_every_step_of_a_fetched_snapshot_leaves_old_or_new() {
    let mut leader = MemoryIo::with_seed(99);
    write_state(&mut leader, NEW).unwrap();
    let bytes = leader
        .visible_bytes(&naming::checkpoint_path(Path::new(DIR), NEW))
        .unwrap();
    let reader = RawSnapshotReader::open(&mut leader, Path::new(DIR), NEW).unwrap();
    assert_eq!(reader.size_bytes(), bytes.len() as u64);
    reader.close(&mut leader).unwrap();
    crash_at_every_call(
        |io| {
            let Ok(mut writer) =
                RawSnapshotWriter::create(io, Path::new(DIR), NEW, bytes.len() as u64, false)
            else {
                return;
            };
            for chunk in bytes.chunks(100_000) {
                let position = writer.position();
                if writer.write_at(io, position, chunk).is_err() {
                    return;
                }
            }
            let _ = writer.freeze(io);
        },
        &[OLD, NEW],
        NEW,
    );
}

// KIP-630 deletion: rename to .deleted, fsync, remove, fsync. The newer snapshot is kept; the
// older one is either whole or gone, never loadable half-deleted.
#[test]
fn crash_at_every_step_of_a_deletion_never_loses_the_kept_snapshot() {
    let total = {
        let mut io = DyingIo::new(disk_with_old_snapshot(0), usize::MAX);
        write_state(&mut io.inner, NEW).unwrap();
        delete_snapshots_before(&mut io, Path::new(DIR), NEW).unwrap();
        io.calls
    };
    for budget in 0..=total {
        for seed in 0..4u64 {
            let mut disk = disk_with_old_snapshot(seed);
            write_state(&mut disk, NEW).unwrap();
            let mut io = DyingIo::new(disk, budget);
            let _ = delete_snapshots_before(&mut io, Path::new(DIR), NEW);
            let mut disk = io.inner;
            disk.crash_with(&mut SimRng::new(seed + budget as u64));
            assert_eq!(check_recovery(&mut disk, &[NEW]), NEW);
            let frozen: Vec<_> = list_snapshots(&mut disk, Path::new(DIR)).unwrap().frozen;
            assert!(!frozen.is_empty() && frozen.len() <= 2);
            if budget == total {
                assert_eq!(frozen.len(), 1, "a completed deletion is durable");
            }
        }
    }
}

// Every bit of a snapshot file is covered: a flip anywhere is a CRC or structure error naming
// the file and the byte position of the damaged batch, and the snapshot is not loaded.
#[test]
fn a_bit_flip_anywhere_is_detected_at_load() {
    let mut io = MemoryIo::with_seed(7);
    let records: Vec<(Vec<u8>, Vec<u8>)> = (0..40u8).map(|i| (vec![b'k', i], vec![i; 8])).collect();
    let path = write_snapshot(&mut io, Path::new(DIR), NEW, &format(), 0, |sink| {
        for (key, value) in &records {
            sink.append_record(Some(key), Some(value));
        }
    })
    .unwrap();
    let size = io.durable_bytes(&path).unwrap().len() as u64;
    let disk = io.snapshot();
    for byte in 0..size {
        for bit in 0..8u8 {
            let mut damaged = MemoryIo::from_snapshot(&disk, MemoryConfig::default());
            damaged.flip_bit(&path, byte, bit).unwrap();
            let (contents, skipped) = latest_valid_snapshot(&mut damaged, Path::new(DIR)).unwrap();
            assert!(
                contents.is_none(),
                "flip of bit {bit} at byte {byte} went unnoticed"
            );
            let error = &skipped[0].1;
            assert!(error.is_corruption(), "byte {byte} bit {bit}: {error}");
            let position = error.position().expect("corruption names a byte position");
            assert!(
                position <= byte,
                "byte {byte} bit {bit}: reported at {position}: {error}"
            );
            assert!(
                error.to_string().contains(path.to_str().unwrap()),
                "{error}"
            );
        }
    }
}
