//! Group sync on the io_uring backend (engine/src/io/group_sync.rs, docs/io.md "Group sync"):
//! fdatasyncs of several files submitted together complete one by one, each with its own op id
//! and result, and on ext4 one `syncfs` stands for them; a lone fdatasync, a directory's
//! and a file on another filesystem go to the ring as before; blocking waits see the group's
//! completions.

use std::path::{Path, PathBuf};

use ringlog_engine::io::{AlignedBuf, FileId, Io, Op, OpId, OpenOptions, UringIo, wait_for_all};

const CREATE_DIRECT: OpenOptions = OpenOptions {
    create: true,
    create_new: false,
    read_only: false,
    direct: true,
};

/// A folder on the filesystem of the build (the target dir), not `/tmp`, which is tmpfs on some
/// hosts.
fn build_fs_dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("test folder");
    dir
}

/// Whether `dir` is on ext4, the filesystem whose fdatasyncs are grouped.
fn groups_here(dir: &Path) -> bool {
    let path = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()).expect("path");
    // SAFETY: statfs writes into a zeroed struct on the stack; the path is a valid C string.
    let mut fs: libc::statfs = unsafe { std::mem::zeroed() };
    assert_eq!(unsafe { libc::statfs(path.as_ptr(), &mut fs) }, 0, "statfs");
    fs.f_type as i64 == 0xEF53
}

/// io_uring with group sync on whatever the dirty page cache (tests must not depend on what else
/// the machine writes), unless this host forbids io_uring.
fn uring() -> Option<UringIo> {
    uring_with(Some(u64::MAX))
}

/// io_uring with the given group sync (`UringIo::with_options`), unless this host forbids
/// io_uring.
fn uring_with(group_sync: Option<u64>) -> Option<UringIo> {
    match UringIo::with_options(4096, group_sync) {
        Ok(io) => Some(io),
        Err(e) if matches!(e.raw_os_error(), Some(libc::EPERM) | Some(libc::ENOSYS)) => {
            eprintln!("io_uring is not permitted on this host ({e}); skipped");
            None
        }
        Err(e) => panic!("io_uring setup failed: {e}"),
    }
}

/// `count` files, each with one block written (so each fdatasync has something to make durable).
fn written_files(io: &mut UringIo, dir: &Path, count: usize) -> Vec<FileId> {
    let files: Vec<FileId> = (0..count)
        .map(|i| {
            let file = io
                .open(&dir.join(format!("f{i}.log")), CREATE_DIRECT)
                .expect("open");
            io.set_len(file, 1 << 20).expect("set_len");
            file
        })
        .collect();
    let writes: Vec<OpId> = files
        .iter()
        .enumerate()
        .map(|(i, &file)| {
            io.submit(Op::Write {
                file,
                offset: 0,
                buf: AlignedBuf::from_slice(&[i as u8 + 1; 4096], 4096),
            })
        })
        .collect();
    for completion in wait_for_all(io, &writes).expect("writes") {
        assert_eq!(completion.result.expect("write"), 4096);
    }
    files
}

fn fdatasyncs(io: &mut UringIo, files: &[FileId]) -> Vec<OpId> {
    files
        .iter()
        .map(|&file| io.submit(Op::Fdatasync { file }))
        .collect()
}

#[test]
fn fdatasyncs_submitted_together_complete_each_and_share_one_syncfs() {
    let Some(mut io) = uring() else { return };
    let dir = build_fs_dir("group-sync-together");
    let files = written_files(&mut io, &dir, 8);
    let ids = fdatasyncs(&mut io, &files);
    // Blocking: the group's batch completes on the sync thread, not in the ring.
    let completions = wait_for_all(&mut io, &ids).expect("fdatasyncs");
    assert_eq!(
        completions.iter().map(|c| c.op_id).collect::<Vec<_>>(),
        ids,
        "every op completes, in the order asked for"
    );
    for completion in completions {
        assert!(completion.result.is_ok(), "{:?}", completion.result);
        assert!(completion.buf.is_none());
    }
    assert_eq!(io.in_flight(), 0);
    let grouped = io.grouped_syncs();
    if groups_here(&dir) {
        assert_eq!(grouped, 1, "eight fdatasyncs at once are one syncfs");
    } else {
        assert_eq!(grouped, 0, "not ext4: each its own fdatasync");
    }
    // Again, through the non-blocking path the node's loop uses: submit, then drain.
    let ids = fdatasyncs(&mut io, &files);
    let mut done = Vec::new();
    while done.len() < ids.len() {
        io.submit_and_wait(0).expect("submit");
        io.drain_completions(&mut done);
    }
    let mut done_ids: Vec<OpId> = done.iter().map(|c| c.op_id).collect();
    done_ids.sort();
    assert_eq!(done_ids, ids);
    assert!(done.iter().all(|c| c.result.is_ok()));
    if groups_here(&dir) {
        assert_eq!(io.grouped_syncs(), 2);
    }
    for file in files {
        io.close(file).expect("close: nothing in flight");
    }
}

#[test]
fn a_lone_fdatasync_and_a_folders_go_to_the_ring() {
    let Some(mut io) = uring() else { return };
    let dir = build_fs_dir("group-sync-lone");
    let files = written_files(&mut io, &dir, 1);
    let folder = io.open_dir(&dir).expect("open_dir");
    // A file and a folder together: the folder's entries need a full fsync, so it never joins
    // a group, and the file alone does not make one.
    let ids = vec![
        io.submit(Op::Fdatasync { file: files[0] }),
        io.submit(Op::Fdatasync { file: folder }),
    ];
    for completion in wait_for_all(&mut io, &ids).expect("syncs") {
        assert!(completion.result.is_ok(), "{:?}", completion.result);
    }
    assert_eq!(io.grouped_syncs(), 0);
    io.close(folder).expect("close");
    io.close(files[0]).expect("close");
}

#[test]
fn files_on_tmpfs_are_not_grouped() {
    let Some(mut io) = uring() else { return };
    let shm = Path::new("/dev/shm");
    assert!(shm.is_dir(), "this test needs /dev/shm (tmpfs)");
    let tmp = tempfile::tempdir_in(shm).expect("tmp in /dev/shm");
    assert!(!groups_here(tmp.path()));
    let buffered = OpenOptions {
        direct: false,
        ..CREATE_DIRECT
    };
    let files: Vec<FileId> = (0..4)
        .map(|i| {
            io.open(&tmp.path().join(format!("f{i}")), buffered)
                .expect("open")
        })
        .collect();
    let ids = fdatasyncs(&mut io, &files);
    for completion in wait_for_all(&mut io, &ids).expect("fdatasyncs") {
        assert!(completion.result.is_ok(), "{:?}", completion.result);
    }
    assert_eq!(
        io.grouped_syncs(),
        0,
        "tmpfs files each get their own fdatasync"
    );
    for file in files {
        io.close(file).expect("close");
    }
}

#[test]
fn group_sync_off_sends_every_fdatasync_to_the_ring() {
    let Some(mut io) = uring_with(None) else {
        return;
    };
    let dir = build_fs_dir("group-sync-off");
    let files = written_files(&mut io, &dir, 4);
    let ids = fdatasyncs(&mut io, &files);
    for completion in wait_for_all(&mut io, &ids).expect("fdatasyncs") {
        assert!(completion.result.is_ok(), "{:?}", completion.result);
    }
    assert_eq!(io.grouped_syncs(), 0);
}

#[test]
fn dropping_the_backend_with_a_batch_outstanding_returns() {
    let Some(mut io) = uring() else { return };
    let dir = build_fs_dir("group-sync-drop");
    let files = written_files(&mut io, &dir, 6);
    let _ids = fdatasyncs(&mut io, &files);
    // Start the batch and drop at once: the sync thread finishes it and the drop returns.
    io.submit_and_wait(0).expect("submit");
    drop(io);
}

/// `sync_together`, for a thread of the caller's own (a node's new partition folders): each
/// descriptor gets its own outcome, in order, whether the batch was grouped or not.
#[test]
fn sync_together_answers_each_descriptor_in_order() {
    use std::os::fd::AsRawFd;
    let dir = build_fs_dir("sync-together");
    let files: Vec<std::fs::File> = (0..3)
        .map(|n| std::fs::File::create(dir.join(format!("f{n}"))).expect("create"))
        .collect();
    let folder = std::fs::File::open(&dir).expect("open folder");
    let mut fds: Vec<i32> = files.iter().map(|f| f.as_raw_fd()).collect();
    fds.push(folder.as_raw_fd());
    assert_eq!(ringlog_engine::io::sync_together(&fds), vec![0; 4]);
    // A descriptor that is not open gets its own error; the others still succeed.
    fds.insert(1, -1);
    let results = ringlog_engine::io::sync_together(&fds);
    assert_eq!(results.len(), 5);
    assert_eq!(results[1], libc::EBADF);
    assert!(results.iter().enumerate().all(|(n, &r)| n == 1 || r == 0));
}
