//! Each segment keeps one buffered read-only descriptor open (`Io::open_reader`), and every file
//! region read from it carries that same descriptor: the runtime sends from it with sendfile
//! instead of opening the path again per answer. A clone outlives the segment (deleted below a
//! new log start, truncated away, closed), so a reply still queued sends the bytes it was given.
//! The memory backend has no OS file and gives no reader.

mod log_support;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use log_support::*;
use ringlog_engine::io::{FileReader, Io, MemoryIo, SyscallIo, UringIo};
use ringlog_engine::log::{LogConfig, PartitionLog, ReadView};

fn config() -> LogConfig {
    LogConfig {
        segment_size_bytes: 64 * 1024,
        index_interval_bytes: 4096,
        // Every read of a written batch is a file region here (the tail cache would answer
        // the newest sealed segment's from memory: engine/tests/log_tail_cache.rs).
        tail_cache_bytes: 0,
        ..LogConfig::default()
    }
}

/// 120 batches of about 2.5 KiB each, flushed: several sealed segments.
fn filled_log<I: Io>(io: &mut I, dir: &Path) -> (PartitionLog, Vec<Bytes>) {
    let (mut log, _) = PartitionLog::open(io, dir, config()).unwrap();
    let mut appended = Vec::new();
    for i in 0..120u64 {
        let batch = batch_bytes(1, 2500, i);
        appended.push(batch.clone().freeze());
        log.append_as_leader(batch, 1).unwrap();
    }
    let end = log.log_end_offset();
    assert_eq!(log.flush_and_wait(io).unwrap(), end);
    assert!(
        log.segment_base_offsets().len() >= 4,
        "rolled: {:?}",
        log.segment_base_offsets()
    );
    (log, appended)
}

/// The reader, path, position and length of a file view.
fn file_view(view: &ReadView) -> (Option<FileReader>, PathBuf, u64, usize) {
    match view {
        ReadView::File {
            reader,
            path,
            position,
            length_bytes,
            ..
        } => (
            reader.clone(),
            path.clone(),
            *position,
            *length_bytes as usize,
        ),
        ReadView::Memory(_) | ReadView::Chunks(_) => {
            panic!("a sealed segment is read from its file")
        }
    }
}

/// One batch of the read at `offset` (at most one batch: `max_bytes` 1), through the reader.
fn read_one<I: Io>(log: &PartitionLog, io: &I, offset: i64) -> (FileReader, PathBuf, Vec<u8>) {
    let (reader, path, position, length) = file_view(&log.read(io, offset, 1).unwrap());
    let reader = reader.expect("a real backend keeps a reader per segment");
    let bytes = reader.read_at(&path, position, length).unwrap();
    assert_eq!(bytes.len(), length, "the region is wholly on disk");
    (reader, path, bytes)
}

/// Same records as appended; only baseOffset and partitionLeaderEpoch (outside the CRC) were
/// stamped.
fn assert_is_batch(bytes: &[u8], original: &[u8]) {
    assert_eq!(bytes.len(), original.len());
    assert_eq!(&bytes[8..12], &original[8..12]);
    assert_eq!(&bytes[16..], &original[16..]);
}

fn scenario<I: Io>(io: &mut I, dir: &Path) {
    let (mut log, appended) = filled_log(io, dir);
    let bases = log.segment_base_offsets();

    // Two reads of one region: the same kept-open descriptor, holding the batch's bytes.
    let first = log.read(io, 0, 1).unwrap();
    let second = log.read(io, 0, 1).unwrap();
    let (reader_a, path, position, length) = file_view(&first);
    let (reader_b, ..) = file_view(&second);
    let (reader_a, reader_b) = (reader_a.unwrap(), reader_b.unwrap());
    assert!(Arc::ptr_eq(reader_a.file(), reader_b.file()));
    assert_eq!(reader_a, reader_b);
    assert_eq!(path, dir.join(format!("{:020}.log", bases[0])));
    let bytes = reader_a.read_at(&path, position, length).unwrap();
    assert_is_batch(&bytes, &appended[0]);
    assert_eq!(bytes, log.read_view_bytes(io, &first).unwrap());
    // Another batch of the same segment: still that descriptor; another segment: its own.
    let (same_segment, _, later) = read_one(&log, io, 1);
    assert!(Arc::ptr_eq(same_segment.file(), reader_a.file()));
    assert_is_batch(&later, &appended[1]);
    let (other_segment, ..) = read_one(&log, io, bases[1]);
    assert!(!Arc::ptr_eq(other_segment.file(), reader_a.file()));
    drop((reader_b, same_segment, other_segment, first, second));

    // Deletion below a new log start: the segment's own reader goes with it, a clone held (a
    // queued reply) still reads the deleted file's bytes.
    let kept = reader_a;
    assert_eq!(
        Arc::strong_count(kept.file()),
        2,
        "the segment and this clone"
    );
    assert!(log.advance_log_start_offset(io, bases[1]).unwrap() >= 1);
    assert!(!path.exists(), "{path:?} deleted");
    assert_eq!(
        Arc::strong_count(kept.file()),
        1,
        "dropped with the segment"
    );
    assert_eq!(kept.read_at(&path, position, length).unwrap(), bytes);

    // Truncation that removes later segments: the same.
    let bases = log.segment_base_offsets();
    assert!(bases.len() >= 4, "{bases:?}");
    let last_sealed = bases[bases.len() - 2];
    let (kept, truncated_path, truncated_bytes) = read_one(&log, io, last_sealed);
    let (_, _, truncated_position, truncated_length) =
        file_view(&log.read(io, last_sealed, 1).unwrap());
    assert_is_batch(&truncated_bytes, &appended[last_sealed as usize]);
    // Cuts the second segment: the first stays sealed, every later one goes.
    log.truncate_to(io, bases[1] + 1, 0).unwrap();
    assert!(!truncated_path.exists(), "{truncated_path:?} removed");
    assert_eq!(
        Arc::strong_count(kept.file()),
        1,
        "dropped with the segment"
    );
    assert_eq!(
        kept.read_at(&truncated_path, truncated_position, truncated_length)
            .unwrap(),
        truncated_bytes
    );

    // Closing the log drops the readers it kept.
    let (kept, ..) = read_one(&log, io, log.log_start_offset());
    assert_eq!(Arc::strong_count(kept.file()), 2);
    log.close(io).unwrap();
    assert_eq!(Arc::strong_count(kept.file()), 1, "dropped at close");

    // Reopened: recovery opens a reader per segment again.
    let (log, _) = PartitionLog::open(io, dir, config()).unwrap();
    let (reopened, _, bytes) = read_one(&log, io, log.log_start_offset());
    assert!(!Arc::ptr_eq(reopened.file(), kept.file()));
    assert_is_batch(&bytes, &appended[log.log_start_offset() as usize]);
    log.close(io).unwrap();
}

#[test]
fn syscall_backend_segments_keep_one_reader() {
    let dir = tempfile::tempdir().unwrap();
    let mut io = SyscallIo::for_dir(dir.path());
    scenario(&mut io, &dir.path().join("metadata-0"));
}

#[test]
fn io_uring_backend_segments_keep_one_reader() {
    let dir = tempfile::tempdir().unwrap();
    let mut io = match UringIo::for_dir(dir.path()) {
        Ok(io) => io,
        // Same rule as the io backend tests: only a host that forbids io_uring skips it.
        Err(e) if matches!(e.raw_os_error(), Some(libc::EPERM) | Some(libc::ENOSYS)) => {
            eprintln!("io_uring is not permitted on this host ({e}); skipped");
            return;
        }
        Err(e) => panic!("io_uring setup failed: {e}"),
    };
    scenario(&mut io, &dir.path().join("metadata-0"));
}

#[test]
fn memory_backend_gives_no_reader() {
    let mut io = MemoryIo::with_seed(7);
    let dir = Path::new("/data/metadata-0");
    let (mut log, appended) = filled_log(&mut io, dir);
    let view = log.read(&io, 0, 1).unwrap();
    let (reader, ..) = file_view(&view);
    assert!(reader.is_none(), "no OS file behind the memory backend");
    assert!(
        io.open_reader(&dir.join(format!("{:020}.log", 0)))
            .unwrap()
            .is_none()
    );
    // The bytes are still readable through the `Io`.
    assert_is_batch(&log.read_view_bytes(&mut io, &view).unwrap(), &appended[0]);
    log.close(&mut io).unwrap();
}
