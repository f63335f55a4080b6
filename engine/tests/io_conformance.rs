//! The I/O conformance suite: every backend (memory, plain syscalls, io_uring) must behave the same
//! through the `Io` trait, so the log tested on the memory backend behaves the same in production.

use std::path::{Path, PathBuf};

use ringlog_engine::io::{AlignedBuf, Completion, FileId, Io, Op, OpId, OpenOptions};

const CREATE: OpenOptions = OpenOptions {
    create: true,
    create_new: false,
    read_only: false,
    direct: false,
};
const CREATE_DIRECT: OpenOptions = OpenOptions {
    create: true,
    create_new: false,
    read_only: false,
    direct: true,
};
const CREATE_NEW: OpenOptions = OpenOptions {
    create: false,
    create_new: true,
    read_only: false,
    direct: false,
};
const EXISTING: OpenOptions = OpenOptions {
    create: false,
    create_new: false,
    read_only: false,
    direct: false,
};
const READ_ONLY: OpenOptions = OpenOptions {
    create: false,
    create_new: false,
    read_only: true,
    direct: false,
};

/// The directory a test works in: a real temp dir for the real backends, a path for memory.
struct Root {
    _tmp: Option<tempfile::TempDir>,
    path: PathBuf,
}

fn real_root() -> Root {
    let tmp = tempfile::tempdir().expect("temp dir");
    let path = tmp.path().to_path_buf();
    Root {
        _tmp: Some(tmp),
        path,
    }
}

fn memory_root(io: &mut impl Io) -> Root {
    let path = PathBuf::from("/data");
    io.create_dir_all(&path).expect("mkdir");
    Root { _tmp: None, path }
}

/// Submit, wait for everything, and return the completions in completion order.
fn run(io: &mut impl Io, ops: Vec<Op>, linked: bool) -> (Vec<OpId>, Vec<Completion>) {
    let ids = if linked {
        io.submit_linked(ops)
    } else {
        ops.into_iter().map(|op| io.submit(op)).collect()
    };
    let mut out = Vec::new();
    while out.len() < ids.len() {
        io.submit_and_wait(ids.len() - out.len())
            .expect("submit_and_wait");
        io.drain_completions(&mut out);
    }
    assert_eq!(io.in_flight(), 0);
    (ids, out)
}

fn run_one(io: &mut impl Io, op: Op) -> Completion {
    let (_, mut out) = run(io, vec![op], false);
    out.pop().expect("one completion")
}

fn block_buf(io: &impl Io, blocks: usize, fill: u8) -> AlignedBuf {
    let block = io.block_size_bytes();
    let mut buf = AlignedBuf::with_capacity(blocks * block, block);
    buf.extend_from_slice(&vec![fill; blocks * block]);
    buf
}

fn errno_of(c: &Completion) -> Option<i32> {
    c.result.as_ref().err().and_then(|e| e.raw_os_error())
}

fn write(io: &mut impl Io, file: FileId, offset: u64, data: &[u8]) {
    let c = run_one(
        io,
        Op::Write {
            file,
            offset,
            buf: AlignedBuf::from_slice(data, io.block_size_bytes()),
        },
    );
    assert_eq!(c.result.expect("write"), data.len());
}

fn read(io: &mut impl Io, file: FileId, offset: u64, len: usize) -> Vec<u8> {
    let c = run_one(io, Op::Read { file, offset, len });
    let n = c.result.expect("read");
    let buf = c.buf.expect("a read returns its buffer");
    assert_eq!(buf.len(), n);
    buf.as_slice().to_vec()
}

fn open_create_semantics(io: &mut impl Io, root: &Path) {
    let path = root.join("a.log");
    let missing = io
        .open(&path, EXISTING)
        .expect_err("opening a missing file without create fails");
    assert_eq!(missing.raw_os_error(), Some(libc::ENOENT));
    assert_eq!(missing.path, path);
    assert_eq!(missing.operation, "open");
    assert!(!io.exists(&path));

    let file = io.open(&path, CREATE).expect("create");
    assert!(io.exists(&path));
    assert_eq!(io.file_size_bytes(file).expect("size"), 0);
    let again = io
        .open(&path, CREATE)
        .expect("create opens an existing file");
    assert_ne!(file, again, "file ids are never reused");
    let exclusive = io
        .open(&path, CREATE_NEW)
        .expect_err("create_new on an existing file fails");
    assert_eq!(exclusive.raw_os_error(), Some(libc::EEXIST));
    let fresh = io
        .open(&root.join("b.log"), CREATE_NEW)
        .expect("create_new on a new file");

    write(io, file, 0, b"hello");
    let reader = io.open(&path, READ_ONLY).expect("read only");
    assert_eq!(read(io, reader, 0, 5), b"hello");
    let c = run_one(
        io,
        Op::Write {
            file: reader,
            offset: 0,
            buf: AlignedBuf::from_slice(b"x", 8),
        },
    );
    assert_eq!(
        errno_of(&c),
        Some(libc::EBADF),
        "writes to a read-only file fail"
    );
    let create_ro = OpenOptions {
        create: true,
        read_only: true,
        ..OpenOptions::default()
    };
    assert_eq!(
        io.open(&root.join("c.log"), create_ro)
            .expect_err("create + read_only")
            .raw_os_error(),
        Some(libc::EINVAL)
    );
    assert!(
        io.open(root, EXISTING).is_err(),
        "a directory is not a data file"
    );

    for f in [file, again, fresh, reader] {
        io.close(f).expect("close");
    }
    assert_eq!(
        io.close(file).expect_err("double close").raw_os_error(),
        Some(libc::EBADF)
    );
}

fn write_read_round_trip_direct(io: &mut impl Io, root: &Path) {
    let block = io.block_size_bytes();
    let file = io
        .open(&root.join("seg.log"), CREATE_DIRECT)
        .expect("open direct");
    let mut buf = block_buf(io, 2, 0);
    for (i, b) in buf.as_mut_slice().iter_mut().enumerate() {
        *b = (i % 251) as u8;
    }
    let expected = buf.as_slice().to_vec();
    let c = run_one(
        io,
        Op::Write {
            file,
            offset: block as u64,
            buf,
        },
    );
    assert_eq!(c.result.expect("write"), 2 * block);
    assert_eq!(
        c.buf.expect("write buffer comes back").as_slice(),
        &expected[..]
    );
    assert_eq!(io.file_size_bytes(file).expect("size"), 3 * block as u64);
    assert_eq!(read(io, file, block as u64, 2 * block), expected);
    assert_eq!(
        read(io, file, 0, block),
        vec![0u8; block],
        "the hole before the write reads as zeros"
    );
    let c = run_one(io, Op::Fdatasync { file });
    assert_eq!(c.result.expect("fdatasync"), 0);
    io.close(file).expect("close");
}

/// A dsync write on a direct file (the log's flush): written like a plain write, buffer back,
/// readable, the file grown to its end; and on a read-only handle refused like one.
fn write_dsync_round_trip_direct(io: &mut impl Io, root: &Path) {
    let block = io.block_size_bytes();
    let path = root.join("dsync.log");
    let file = io.open(&path, CREATE_DIRECT).expect("open direct");
    let buf = block_buf(io, 1, 0x5a);
    let c = run_one(
        io,
        Op::WriteDsync {
            file,
            offset: 2 * block as u64,
            buf,
        },
    );
    assert_eq!(c.result.expect("dsync write"), block);
    assert_eq!(
        c.buf.expect("write buffer comes back").as_slice(),
        &vec![0x5a; block][..]
    );
    assert_eq!(io.file_size_bytes(file).expect("size"), 3 * block as u64);
    assert_eq!(read(io, file, 2 * block as u64, block), vec![0x5a; block]);
    io.close(file).expect("close");
    let read_only = io
        .open(
            &path,
            OpenOptions {
                read_only: true,
                ..Default::default()
            },
        )
        .expect("open read-only");
    let buf = block_buf(io, 1, 1);
    let c = run_one(
        io,
        Op::WriteDsync {
            file: read_only,
            offset: 0,
            buf,
        },
    );
    assert_eq!(errno_of(&c), Some(libc::EBADF), "{c:?}");
    io.close(read_only).expect("close");
}

fn short_read_at_eof(io: &mut impl Io, root: &Path) {
    let block = io.block_size_bytes();
    let file = io.open(&root.join("meta"), CREATE).expect("open");
    let data: Vec<u8> = (0..block + 100).map(|i| i as u8).collect();
    write(io, file, 0, &data);
    assert_eq!(
        read(io, file, 0, 2 * block),
        data,
        "a read past EOF returns what exists"
    );
    assert_eq!(
        read(io, file, block as u64 + 100, block),
        Vec::<u8>::new(),
        "a read at EOF returns 0 bytes"
    );
    assert_eq!(
        read(io, file, 10 * block as u64, 7),
        Vec::<u8>::new(),
        "a read past EOF returns 0 bytes"
    );
    io.close(file).expect("close");
}

/// A read buffer given back (`recycle_read_buf`) may be filled again: every read still returns
/// exactly the file's bytes, and a short read never hands out what the buffer held before.
fn recycled_read_buffers(io: &mut impl Io, root: &Path) {
    let block = io.block_size_bytes();
    let file = io.open(&root.join("recycled"), CREATE).expect("open");
    let first: Vec<u8> = (0..4 * block).map(|i| (i % 251) as u8 + 1).collect();
    write(io, file, 0, &first);
    for (offset, len, expected) in [
        (0, 4 * block, first.clone()),
        (block as u64, 2 * block, first[block..3 * block].to_vec()),
        // Past the end: 0 bytes, not the recycled buffer's old contents.
        (4 * block as u64, block, Vec::new()),
        (2 * block as u64, 4 * block, first[2 * block..].to_vec()),
    ] {
        let c = run_one(io, Op::Read { file, offset, len });
        let n = c.result.expect("read");
        let buf = c.buf.expect("a read returns its buffer");
        assert_eq!(buf.len(), n);
        assert_eq!(buf.as_slice(), &expected[..], "read {len} at {offset}");
        io.recycle_read_buf(buf);
    }
    io.close(file).expect("close");
}

fn set_len_and_preallocate(io: &mut impl Io, root: &Path) {
    let file = io.open(&root.join("sized"), CREATE).expect("open");
    write(io, file, 0, b"0123456789");
    io.set_len(file, 4).expect("truncate");
    assert_eq!(io.file_size_bytes(file).expect("size"), 4);
    assert_eq!(read(io, file, 0, 100), b"0123");
    io.set_len(file, 8).expect("extend");
    assert_eq!(
        read(io, file, 0, 100),
        b"0123\0\0\0\0",
        "extension reads as zeros"
    );
    io.preallocate(file, 1 << 20).expect("preallocate");
    assert_eq!(
        io.file_size_bytes(file).expect("size"),
        8,
        "preallocate keeps the size"
    );
    io.close(file).expect("close");
}

/// `Op::Fallocate`, the ring's `preallocate`: completes with 0, keeps the size and the bytes,
/// and a read-only handle refuses it.
fn fallocate_through_the_ring(io: &mut impl Io, root: &Path) {
    let path = root.join("reserved");
    let file = io.open(&path, CREATE).expect("open");
    write(io, file, 0, b"0123456789");
    let done = run_one(
        io,
        Op::Fallocate {
            file,
            offset: 4096,
            len_bytes: 1 << 20,
        },
    );
    assert_eq!(done.result.expect("fallocate"), 0);
    assert!(done.buf.is_none());
    assert_eq!(
        io.file_size_bytes(file).expect("size"),
        10,
        "a reservation keeps the size"
    );
    assert_eq!(read(io, file, 0, 100), b"0123456789");
    io.close(file).expect("close");
    let reader = io.open(&path, READ_ONLY).expect("open read-only");
    let refused = run_one(
        io,
        Op::Fallocate {
            file: reader,
            offset: 0,
            len_bytes: 4096,
        },
    );
    assert_eq!(errno_of(&refused), Some(libc::EBADF));
    io.close(reader).expect("close");
}

fn directory_operations(io: &mut impl Io, root: &Path) {
    let dir = root.join("topic-0").join("checkpoints");
    io.create_dir_all(&dir).expect("mkdir -p");
    io.create_dir_all(&dir).expect("mkdir -p is idempotent");
    for name in ["b", "a", "c.part"] {
        let f = io.open(&dir.join(name), CREATE).expect("create");
        io.close(f).expect("close");
    }
    assert_eq!(io.list_dir(&dir).expect("list"), vec!["a", "b", "c.part"]);
    assert_eq!(
        io.list_dir(&root.join("topic-0")).expect("list"),
        vec!["checkpoints"]
    );

    let f = io.open(&dir.join("c.part"), EXISTING).expect("open");
    write(io, f, 0, b"snapshot");
    io.close(f).expect("close");
    io.rename(&dir.join("c.part"), &dir.join("a"))
        .expect("rename over an existing file");
    assert_eq!(io.list_dir(&dir).expect("list"), vec!["a", "b"]);
    let f = io.open(&dir.join("a"), READ_ONLY).expect("open renamed");
    assert_eq!(read(io, f, 0, 100), b"snapshot");
    io.close(f).expect("close");

    io.remove_file(&dir.join("b")).expect("remove");
    assert!(!io.exists(&dir.join("b")));
    let gone = io
        .remove_file(&dir.join("b"))
        .expect_err("remove a missing file");
    assert_eq!(gone.raw_os_error(), Some(libc::ENOENT));
    assert_eq!(gone.path, dir.join("b"));
    let rename_missing = io
        .rename(&dir.join("nope"), &dir.join("x"))
        .expect_err("rename a missing file");
    assert_eq!(rename_missing.raw_os_error(), Some(libc::ENOENT));
    io.sync_dir(&dir).expect("sync dir");
    assert!(io.sync_dir(&root.join("no-such-dir")).is_err());
    assert!(io.list_dir(&root.join("no-such-dir")).is_err());
    assert_eq!(io.list_dir(&dir).expect("list"), vec!["a"]);
}

/// A directory handle takes an fdatasync through the ring (the quorum-state's rename is made
/// durable that way without blocking) and refuses data operations.
fn directory_handle_syncs_through_the_ring(io: &mut impl Io, root: &Path) {
    let dir = root.join("handle");
    io.create_dir_all(&dir).expect("mkdir");
    let handle = io.open_dir(&dir).expect("open_dir");
    let synced = run_one(io, Op::Fdatasync { file: handle });
    assert_eq!(synced.result.expect("fsync of a directory"), 0);
    let read = run_one(
        io,
        Op::Read {
            file: handle,
            offset: 0,
            len: 16,
        },
    );
    assert!(read.result.is_err(), "a directory handle is not readable");
    io.close(handle).expect("close");
    let missing = io
        .open_dir(&root.join("no-such-dir"))
        .expect_err("open_dir of a missing folder");
    assert_eq!(missing.raw_os_error(), Some(libc::ENOENT));
    let file = io.open(&dir.join("f"), CREATE).expect("create");
    io.close(file).expect("close");
    let not_dir = io.open_dir(&dir.join("f")).expect_err("open_dir of a file");
    assert_eq!(not_dir.raw_os_error(), Some(libc::ENOTDIR));
}

fn linked_write_then_fdatasync(io: &mut impl Io, root: &Path) {
    let file = io
        .open(&root.join("chain.log"), CREATE_DIRECT)
        .expect("open");
    let buf = block_buf(io, 1, 0xAB);
    let (ids, out) = run(
        io,
        vec![
            Op::Write {
                file,
                offset: 0,
                buf,
            },
            Op::Fdatasync { file },
        ],
        true,
    );
    assert_eq!(ids.len(), 2);
    assert!(ids[0] < ids[1], "ids increase in submission order");
    let order: Vec<OpId> = out.iter().map(|c| c.op_id).collect();
    assert_eq!(
        order, ids,
        "the fdatasync of a chain completes after its write"
    );
    assert_eq!(
        *out[0].result.as_ref().expect("write"),
        io.block_size_bytes()
    );
    assert_eq!(*out[1].result.as_ref().expect("fdatasync"), 0);
    assert!(out[1].buf.is_none());
    io.close(file).expect("close");
}

fn failed_link_cancels_the_rest(io: &mut impl Io, root: &Path) {
    let file = io
        .open(&root.join("chain.log"), CREATE_DIRECT)
        .expect("open");
    // Offset 1 is unaligned on a direct file: the write fails, so the fdatasync must not run.
    let buf = block_buf(io, 1, 1);
    let (ids, out) = run(
        io,
        vec![
            Op::Write {
                file,
                offset: 1,
                buf,
            },
            Op::Fdatasync { file },
        ],
        true,
    );
    let of = |id: OpId| {
        out.iter()
            .find(|c| c.op_id == id)
            .expect("completion for every id")
    };
    assert_eq!(errno_of(of(ids[0])), Some(libc::EINVAL));
    assert!(
        of(ids[0]).buf.is_some(),
        "a failed write still gives its buffer back"
    );
    assert_eq!(errno_of(of(ids[1])), Some(libc::ECANCELED));
    assert_eq!(io.file_size_bytes(file).expect("size"), 0);
    io.close(file).expect("close");
}

fn completion_ids_match_submissions(io: &mut impl Io, root: &Path) {
    let block = io.block_size_bytes();
    let file = io
        .open(&root.join("many.log"), CREATE_DIRECT)
        .expect("open");
    let mut ops = Vec::new();
    for i in 0..20u64 {
        ops.push(Op::Write {
            file,
            offset: i * block as u64,
            buf: block_buf(io, 1, i as u8),
        });
    }
    let (ids, out) = run(io, ops, false);
    let mut seen: Vec<OpId> = out.iter().map(|c| c.op_id).collect();
    seen.sort();
    assert_eq!(seen, ids, "exactly one completion per submission");
    for pair in ids.windows(2) {
        assert!(pair[0] < pair[1]);
    }
    for c in &out {
        let index = ids.iter().position(|id| *id == c.op_id).expect("known id") as u8;
        assert!(
            c.buf
                .as_ref()
                .expect("buffer back")
                .as_slice()
                .iter()
                .all(|&b| b == index),
            "each buffer comes back with its own op"
        );
    }
    let sync = run_one(io, Op::Fdatasync { file });
    assert!(sync.result.is_ok());
    for i in 0..20u64 {
        assert_eq!(
            read(io, file, i * block as u64, block),
            vec![i as u8; block]
        );
    }
    io.close(file).expect("close");
}

fn errors_carry_path_and_offset(io: &mut impl Io, root: &Path) {
    let path = root.join("ro");
    let f = io.open(&path, CREATE).expect("create");
    io.close(f).expect("close");
    let reader = io.open(&path, READ_ONLY).expect("open");
    let c = run_one(
        io,
        Op::Write {
            file: reader,
            offset: 12345,
            buf: AlignedBuf::from_slice(b"abc", 8),
        },
    );
    let e = c.result.expect_err("write to read-only");
    assert_eq!(
        (e.operation, e.path.as_path(), e.offset),
        ("write", path.as_path(), 12345)
    );
    assert!(
        e.to_string().contains("12345"),
        "the message names the offset: {e}"
    );
    io.close(reader).expect("close");
    let c = run_one(
        io,
        Op::Read {
            file: FileId(u64::MAX),
            offset: 7,
            len: 1,
        },
    );
    assert_eq!(
        errno_of(&c),
        Some(libc::EBADF),
        "an unknown file id is EBADF, not a panic"
    );
    assert_eq!(c.result.expect_err("bad id").offset, 7);
    let reader = io.open(&path, READ_ONLY).expect("open");
    let huge = ringlog_engine::io::TRANSFER_BYTES_MAX + 1;
    let c = run_one(
        io,
        Op::Read {
            file: reader,
            offset: 0,
            len: huge,
        },
    );
    assert_eq!(
        errno_of(&c),
        Some(libc::EINVAL),
        "an oversized read is EINVAL, not a giant allocation"
    );
    io.close(reader).expect("close");
}

fn drain_without_wait(io: &mut impl Io, root: &Path) {
    let file = io.open(&root.join("lazy"), CREATE).expect("open");
    let mut out = Vec::new();
    io.drain_completions(&mut out);
    assert!(out.is_empty(), "nothing submitted, nothing to drain");
    let id = io.submit(Op::Write {
        file,
        offset: 0,
        buf: AlignedBuf::from_slice(b"data", 8),
    });
    assert_eq!(io.in_flight(), 1);
    io.drain_completions(&mut out);
    // A backend may or may not have run it yet; whatever it hands out must be that op.
    assert!(out.iter().all(|c| c.op_id == id));
    io.submit_and_wait(100)
        .expect("a minimum above in_flight does not hang");
    io.drain_completions(&mut out);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].op_id, id);
    assert_eq!(io.in_flight(), 0);
    io.submit_and_wait(1)
        .expect("waiting with nothing in flight returns");
    io.drain_completions(&mut out);
    assert_eq!(out.len(), 1, "no phantom completions");
    io.close(file).expect("close");
}

fn alignment_enforced_on_direct_files(io: &mut impl Io, root: &Path) {
    let block = io.block_size_bytes();
    let file = io
        .open(&root.join("direct.log"), CREATE_DIRECT)
        .expect("open");
    // Unaligned offset.
    let c = run_one(
        io,
        Op::Write {
            file,
            offset: 512 + 1,
            buf: block_buf(io, 1, 1),
        },
    );
    assert_eq!(errno_of(&c), Some(libc::EINVAL));
    // Unaligned length.
    let mut short = block_buf(io, 1, 1);
    short.set_len(block - 1);
    let c = run_one(
        io,
        Op::Write {
            file,
            offset: 0,
            buf: short,
        },
    );
    assert_eq!(errno_of(&c), Some(libc::EINVAL));
    // Unaligned buffer address (aligned to 1 only, and deliberately offset by one byte).
    let mut odd = AlignedBuf::with_capacity(block + 1, 1);
    if odd.is_aligned_to(block) {
        odd = AlignedBuf::with_capacity(block + 1, 2);
    }
    odd.set_len(block);
    if !odd.is_aligned_to(block) {
        let c = run_one(
            io,
            Op::Write {
                file,
                offset: 0,
                buf: odd,
            },
        );
        assert_eq!(errno_of(&c), Some(libc::EINVAL));
    }
    // Unaligned read.
    let c = run_one(
        io,
        Op::Read {
            file,
            offset: 3,
            len: block,
        },
    );
    assert_eq!(errno_of(&c), Some(libc::EINVAL));
    let c = run_one(
        io,
        Op::Read {
            file,
            offset: 0,
            len: 100,
        },
    );
    assert_eq!(errno_of(&c), Some(libc::EINVAL));
    assert_eq!(
        io.file_size_bytes(file).expect("size"),
        0,
        "nothing was written"
    );
    // The same unaligned write on a buffered file is fine.
    let buffered = io.open(&root.join("meta"), CREATE).expect("open");
    write(io, buffered, 3, b"abc");
    io.close(buffered).expect("close");
    io.close(file).expect("close");
}

/// One test per check per backend.
macro_rules! conformance_suite {
    ($backend:ident, $make:expr) => {
        mod $backend {
            use super::*;
            conformance_suite!(@tests $make;
                open_create_semantics, write_read_round_trip_direct, write_dsync_round_trip_direct,
                short_read_at_eof, recycled_read_buffers,
                set_len_and_preallocate, fallocate_through_the_ring, directory_operations, linked_write_then_fdatasync,
                failed_link_cancels_the_rest, completion_ids_match_submissions,
                errors_carry_path_and_offset, drain_without_wait, alignment_enforced_on_direct_files,
                directory_handle_syncs_through_the_ring);
        }
    };
    (@tests $make:expr; $($check:ident),*) => {
        $(
            #[test]
            fn $check() {
                if let Some((mut io, root)) = $make {
                    super::$check(&mut io, &root.path);
                }
            }
        )*
    };
}

conformance_suite!(memory, {
    let mut io = ringlog_engine::io::MemoryIo::with_seed(1);
    let root = memory_root(&mut io);
    Some((io, root))
});

conformance_suite!(memory_reordered, {
    // Reordering and delays must not change anything a correct caller can observe.
    let faults = ringlog_engine::io::memory::FaultConfig {
        reorder_completions: true,
        delay_probability: 0.5,
        ..Default::default()
    };
    let config = ringlog_engine::io::MemoryConfig {
        seed: 9,
        faults,
        ..Default::default()
    };
    let mut io = ringlog_engine::io::MemoryIo::new(config);
    let root = memory_root(&mut io);
    Some((io, root))
});

conformance_suite!(syscall, {
    let root = real_root();
    Some((ringlog_engine::io::SyscallIo::for_dir(&root.path), root))
});

/// io_uring, unless the host forbids it (EPERM/ENOSYS from a seccomp profile, or disabled by
/// sysctl): then say so on stderr. Any other setup failure fails the tests.
fn uring_backend() -> Option<(ringlog_engine::io::UringIo, Root)> {
    let root = real_root();
    match ringlog_engine::io::UringIo::for_dir(&root.path) {
        Ok(io) => Some((io, root)),
        Err(e) if matches!(e.raw_os_error(), Some(libc::EPERM) | Some(libc::ENOSYS)) => {
            eprintln!(
                "io_uring is not permitted on this host ({e}); its conformance run is skipped"
            );
            None
        }
        Err(e) => panic!("io_uring setup failed: {e}"),
    }
}

conformance_suite!(uring, uring_backend());
