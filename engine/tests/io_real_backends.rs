//! Behaviour of the real backends beyond the shared conformance suite: io_uring under load (more
//! submissions than the SQ and CQ hold), drop with operations in flight, the backend choice, the
//! buffered fallback where O_DIRECT is refused, and block-size discovery.

use std::path::Path;

use ringlog_engine::io::{
    AlignedBuf, AnyIo, BackendChoice, BackendChoiceError, Completion, FileId, Io, Op, OpenOptions,
    SyscallIo, UringIo,
};

const CREATE_DIRECT: OpenOptions = OpenOptions {
    create: true,
    create_new: false,
    read_only: false,
    direct: true,
};

/// io_uring, unless this host forbids it (see io_conformance.rs); other failures fail the test.
fn uring(dir: &Path) -> Option<UringIo> {
    match UringIo::for_dir(dir) {
        Ok(io) => Some(io),
        Err(e) if matches!(e.raw_os_error(), Some(libc::EPERM) | Some(libc::ENOSYS)) => {
            eprintln!("io_uring is not permitted on this host ({e}); skipped");
            None
        }
        Err(e) => panic!("io_uring setup failed: {e}"),
    }
}

fn wait_all(io: &mut impl Io, expected: usize) -> Vec<Completion> {
    let mut out = Vec::new();
    while out.len() < expected {
        io.submit_and_wait(expected - out.len()).expect("wait");
        io.drain_completions(&mut out);
    }
    out
}

fn block_of(io: &impl Io, value: u8) -> AlignedBuf {
    let block = io.block_size_bytes();
    AlignedBuf::from_slice(&vec![value; block], block)
}

fn read_block(io: &mut impl Io, file: FileId, index: u64) -> Vec<u8> {
    let block = io.block_size_bytes();
    io.submit(Op::Read {
        file,
        offset: index * block as u64,
        len: block,
    });
    let c = wait_all(io, 1).pop().expect("one");
    assert_eq!(c.result.expect("read"), block);
    c.buf.expect("buffer").as_slice().to_vec()
}

/// More operations than the SQ (256) and the CQ (512) hold, mixed with linked chains, submitted
/// without waiting: every one must complete exactly once with its own buffer.
#[test]
fn uring_survives_more_submissions_than_the_rings_hold() {
    let tmp = tempfile::tempdir().expect("tmp");
    let Some(mut io) = uring(tmp.path()) else {
        return;
    };
    let block = io.block_size_bytes() as u64;
    let file = io
        .open(&tmp.path().join("big.log"), CREATE_DIRECT)
        .expect("open");
    let mut ids = Vec::new();
    for i in 0..1500u64 {
        if i % 100 == 99 {
            let chain = vec![
                Op::Write {
                    file,
                    offset: i * block,
                    buf: block_of(&io, i as u8),
                },
                Op::Fdatasync { file },
            ];
            ids.extend(io.submit_linked(chain));
        } else {
            ids.push(io.submit(Op::Write {
                file,
                offset: i * block,
                buf: block_of(&io, i as u8),
            }));
        }
    }
    assert_eq!(io.in_flight(), ids.len());
    let out = wait_all(&mut io, ids.len());
    let mut seen: Vec<_> = out.iter().map(|c| c.op_id).collect();
    seen.sort();
    assert_eq!(seen, ids, "each submission completes exactly once");
    for c in &out {
        c.result.as_ref().expect("every op succeeds");
    }
    for i in [0u64, 99, 255, 256, 511, 512, 1499] {
        assert_eq!(
            read_block(&mut io, file, i),
            vec![i as u8; block as usize],
            "block {i}"
        );
    }
    io.close(file).expect("close");
}

/// Dropping the backend with writes in the kernel must wait for them (their buffers are freed
/// afterwards), so every write lands and nothing crashes.
#[test]
fn uring_drop_waits_for_operations_in_flight() {
    let tmp = tempfile::tempdir().expect("tmp");
    let path = tmp.path().join("dropped.log");
    {
        let Some(mut io) = uring(tmp.path()) else {
            return;
        };
        let block = io.block_size_bytes() as u64;
        let file = io.open(&path, CREATE_DIRECT).expect("open");
        for i in 0..600u64 {
            io.submit(Op::Write {
                file,
                offset: i * block,
                buf: block_of(&io, (i % 200) as u8),
            });
        }
        io.submit_and_wait(0)
            .expect("push to the kernel without waiting");
    }
    let bytes = std::fs::read(&path).expect("read back");
    let block = bytes.len() / 600;
    assert_eq!(bytes.len() % 600, 0);
    for i in 0..600 {
        assert!(
            bytes[i * block..(i + 1) * block]
                .iter()
                .all(|&b| b == (i % 200) as u8),
            "block {i}"
        );
    }
}

#[test]
fn uring_close_with_an_operation_in_flight_is_refused() {
    let tmp = tempfile::tempdir().expect("tmp");
    let Some(mut io) = uring(tmp.path()) else {
        return;
    };
    let file = io.open(&tmp.path().join("f"), CREATE_DIRECT).expect("open");
    io.submit(Op::Write {
        file,
        offset: 0,
        buf: block_of(&io, 1),
    });
    let refused = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| io.close(file)));
    assert!(
        refused.is_err(),
        "closing a descriptor the kernel may still use must be refused"
    );
    // The file is still open and usable: finish the write and close properly.
    assert_eq!(
        wait_all(&mut io, 1)
            .pop()
            .expect("one")
            .result
            .expect("write"),
        io.block_size_bytes()
    );
    io.close(file).expect("close after completion");
}

#[test]
fn backend_choice_parses_and_rejects_unknown_names() {
    assert_eq!(
        "syscall".parse::<BackendChoice>().expect("syscall"),
        BackendChoice::Syscall
    );
    assert_eq!(
        "URING".parse::<BackendChoice>().expect("uring"),
        BackendChoice::Uring
    );
    assert_eq!(
        "auto".parse::<BackendChoice>().expect("auto"),
        BackendChoice::Auto
    );
    assert_eq!(
        "".parse::<BackendChoice>().expect("empty"),
        BackendChoice::Auto
    );
    let err = "epoll".parse::<BackendChoice>().expect_err("unknown");
    assert!(matches!(err, BackendChoiceError::UnknownChoice(ref s) if s == "epoll"));
    assert!(
        err.to_string().contains("RINGLOG_IO"),
        "the error names the variable: {err}"
    );
}

#[test]
fn any_io_opens_the_requested_backend_and_auto_prefers_uring() {
    let tmp = tempfile::tempdir().expect("tmp");
    let mut syscall =
        AnyIo::open(BackendChoice::Syscall, Some(tmp.path())).expect("syscall never fails");
    assert_eq!(syscall.backend_name(), "syscall");
    let auto = AnyIo::open(BackendChoice::Auto, Some(tmp.path())).expect("auto never fails");
    let uring_works = UringIo::new().is_ok();
    assert_eq!(
        auto.backend_name(),
        if uring_works { "uring" } else { "syscall" }
    );
    // The enum dispatches every call: a full write + fdatasync + read round trip through it.
    let file = syscall
        .open(&tmp.path().join("any"), CREATE_DIRECT)
        .expect("open");
    let ids = syscall.submit_linked(vec![
        Op::Write {
            file,
            offset: 0,
            buf: block_of(&syscall, 5),
        },
        Op::Fdatasync { file },
    ]);
    assert_eq!(ids.len(), 2);
    for c in wait_all(&mut syscall, 2) {
        c.result.expect("ok");
    }
    assert_eq!(
        read_block(&mut syscall, file, 0),
        vec![5u8; syscall.block_size_bytes()]
    );
    assert!(syscall.raw_fd(file).is_some());
    syscall.close(file).expect("close");
}

/// tmpfs refused O_DIRECT before Linux 6.6 (the backends then fall back to buffered I/O); either
/// way a direct file there must work and keep enforcing the alignment rule.
#[test]
fn direct_files_on_tmpfs_work_and_keep_the_alignment_rule() {
    let shm = Path::new("/dev/shm");
    if !shm.is_dir() {
        eprintln!("no /dev/shm on this host; the fallback is covered only where tmpfs exists");
        return;
    }
    let tmp = tempfile::tempdir_in(shm).expect("tmp in /dev/shm");
    let mut backends: Vec<AnyIo> = vec![AnyIo::Syscall(SyscallIo::new())];
    if let Some(io) = uring(tmp.path()) {
        backends.push(AnyIo::Uring(io));
    }
    for (n, mut io) in backends.into_iter().enumerate() {
        let file = io
            .open(&tmp.path().join(format!("direct-{n}")), CREATE_DIRECT)
            .expect("open falls back");
        io.submit(Op::Write {
            file,
            offset: 0,
            buf: block_of(&io, 7),
        });
        assert_eq!(
            wait_all(&mut io, 1)
                .pop()
                .expect("one")
                .result
                .expect("write"),
            io.block_size_bytes()
        );
        assert_eq!(
            read_block(&mut io, file, 0),
            vec![7u8; io.block_size_bytes()]
        );
        io.submit(Op::Write {
            file,
            offset: 1,
            buf: block_of(&io, 7),
        });
        let c = wait_all(&mut io, 1).pop().expect("one");
        assert_eq!(
            c.result.expect_err("still enforced").raw_os_error(),
            Some(libc::EINVAL)
        );
        io.close(file).expect("close");
    }
}

#[test]
fn block_size_discovery_returns_a_safe_power_of_two() {
    let tmp = tempfile::tempdir().expect("tmp");
    let discovered = ringlog_engine::io::discover_block_size_bytes(tmp.path());
    assert!(discovered.is_power_of_two());
    assert!(discovered >= ringlog_engine::io::BLOCK_SIZE_BYTES_MIN);
    assert_eq!(
        SyscallIo::for_dir(tmp.path()).block_size_bytes(),
        discovered
    );
    assert_eq!(
        ringlog_engine::io::discover_block_size_bytes(Path::new("/no/such/path")),
        ringlog_engine::io::BLOCK_SIZE_BYTES_MIN,
        "unknown paths fall back to the minimum"
    );
}

/// Waits (no timeout: a lost signal hangs the test, which then fails by the harness's limit)
/// until `fd` is readable.
fn poll_readable(fd: std::os::fd::RawFd) {
    let mut pollfd = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd on the stack.
    let ready = unsafe { libc::poll(&mut pollfd, 1, -1) };
    assert_eq!(ready, 1, "poll: {}", std::io::Error::last_os_error());
    assert!(pollfd.revents & libc::POLLIN != 0);
}

/// An event loop waits on the ring's readiness fd instead of polling the ring on a timer: a
/// write + fdatasync chain signals it when its completions arrive, the signal clears, and a
/// later completion signals it again. Nothing here blocks in the ring (`submit_and_wait(0)`
/// only pushes the submissions): the fd alone says when to drain.
#[test]
fn uring_signals_its_readiness_fd_for_each_completion() {
    let dir = tempfile::tempdir().unwrap();
    let Some(mut io) = uring(dir.path()) else {
        return;
    };
    let fd = io.readiness_fd().expect("io_uring has a readiness fd");
    let file = io.open(&dir.path().join("ready"), CREATE_DIRECT).unwrap();
    let mut completions = Vec::new();
    for round in 0..3u8 {
        io.clear_readiness();
        io.submit_linked(vec![
            Op::Write {
                file,
                offset: u64::from(round) * io.block_size_bytes() as u64,
                buf: block_of(&io, round),
            },
            Op::Fdatasync { file },
        ]);
        io.submit_and_wait(0).unwrap();
        let before = completions.len();
        while completions.len() < before + 2 {
            poll_readable(fd);
            io.clear_readiness();
            io.drain_completions(&mut completions);
        }
        assert!(completions[before..].iter().all(|c| c.result.is_ok()));
        assert_eq!(io.in_flight(), 0);
    }
    // Cleared and nothing in flight: the fd is not readable.
    io.clear_readiness();
    let mut pollfd = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd on the stack; a zero timeout never blocks.
    assert_eq!(
        unsafe { libc::poll(&mut pollfd, 1, 0) },
        0,
        "no stale signal"
    );
    io.close(file).unwrap();
}

/// The backends that run operations inside `submit_and_wait` have nothing to wait for.
#[test]
fn syscall_backend_has_no_readiness_fd() {
    let dir = tempfile::tempdir().unwrap();
    let io = SyscallIo::for_dir(dir.path());
    assert!(io.readiness_fd().is_none());
}
