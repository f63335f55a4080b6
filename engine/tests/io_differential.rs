//! Random operation sequences run on every backend must agree with each other and with a trivial
//! model (a `Vec<u8>` per file). For the memory backend, the durable image after a crash must equal
//! the model's image at the last successful fdatasync: that pins the dirty-range bookkeeping that
//! lets fdatasync copy only what changed.

use std::path::Path;

use ringlog_engine::io::memory::SimRng;
use ringlog_engine::io::{
    AlignedBuf, Completion, FileId, Io, MemoryIo, Op, OpenOptions, SyscallIo, UringIo,
};

const CREATE: OpenOptions = OpenOptions {
    create: true,
    create_new: false,
    read_only: false,
    direct: false,
};

fn wait_all(io: &mut impl Io, expected: usize) -> Vec<Completion> {
    let mut out = Vec::new();
    while out.len() < expected {
        io.submit_and_wait(expected - out.len()).expect("wait");
        io.drain_completions(&mut out);
    }
    out
}

#[derive(Clone, Debug)]
enum Step {
    Write { offset: u64, data: Vec<u8> },
    SetLen(u64),
    Read { offset: u64, len: usize },
    Sync,
}

fn random_steps(rng: &mut SimRng, count: usize) -> Vec<Step> {
    (0..count)
        .map(|_| match rng.below(10) {
            0..=4 => {
                let len = rng.below(300) as usize + 1;
                let fill = rng.below(256) as u8;
                let data = (0..len).map(|i| fill.wrapping_add(i as u8)).collect();
                Step::Write {
                    offset: rng.below(2000),
                    data,
                }
            }
            5 => Step::SetLen(rng.below(2200)),
            6 | 7 => Step::Read {
                offset: rng.below(2300),
                len: rng.below(400) as usize,
            },
            _ => Step::Sync,
        })
        .collect()
}

/// Apply `steps` to `io` and return what reads returned plus the final size.
fn run_steps(io: &mut impl Io, path: &Path, steps: &[Step]) -> (Vec<Vec<u8>>, u64) {
    let file: FileId = io.open(path, CREATE).expect("open");
    let mut reads = Vec::new();
    for step in steps {
        match step {
            Step::Write { offset, data } => {
                io.submit(Op::Write {
                    file,
                    offset: *offset,
                    buf: AlignedBuf::from_slice(data, 8),
                });
                assert_eq!(
                    wait_all(io, 1)[0].result.as_ref().expect("write"),
                    &data.len()
                );
            }
            Step::SetLen(len) => io.set_len(file, *len).expect("set_len"),
            Step::Read { offset, len } => {
                io.submit(Op::Read {
                    file,
                    offset: *offset,
                    len: *len,
                });
                let c = wait_all(io, 1).pop().expect("one");
                let n = c.result.expect("read");
                let bytes = c.buf.expect("buf").as_slice().to_vec();
                assert_eq!(bytes.len(), n);
                reads.push(bytes);
            }
            Step::Sync => {
                io.submit(Op::Fdatasync { file });
                wait_all(io, 1)
                    .pop()
                    .expect("one")
                    .result
                    .expect("fdatasync");
            }
        }
    }
    let size = io.file_size_bytes(file).expect("size");
    io.close(file).expect("close");
    (reads, size)
}

/// The model: the file as a Vec, and its image at the last sync.
fn model(steps: &[Step]) -> (Vec<Vec<u8>>, Vec<u8>, Vec<u8>) {
    let mut image: Vec<u8> = Vec::new();
    let mut synced = Vec::new();
    let mut reads = Vec::new();
    for step in steps {
        match step {
            Step::Write { offset, data } => {
                let start = *offset as usize;
                if image.len() < start + data.len() {
                    image.resize(start + data.len(), 0);
                }
                image[start..start + data.len()].copy_from_slice(data);
            }
            Step::SetLen(len) => image.resize(*len as usize, 0),
            Step::Read { offset, len } => {
                let start = (*offset as usize).min(image.len());
                let end = (start + len).min(image.len());
                reads.push(image[start..end].to_vec());
            }
            Step::Sync => synced = image.clone(),
        }
    }
    (reads, image, synced)
}

#[test]
fn memory_matches_the_model_and_keeps_exactly_the_last_synced_image() {
    for seed in 0..300 {
        let steps = random_steps(&mut SimRng::new(seed), 60);
        let (expected_reads, expected_image, expected_synced) = model(&steps);
        let mut io = MemoryIo::with_seed(seed);
        io.create_dir_all(Path::new("/d")).expect("mkdir");
        let path = Path::new("/d/f");
        let (reads, size) = run_steps(&mut io, path, &steps);
        assert_eq!(reads, expected_reads, "seed {seed}: reads");
        assert_eq!(size, expected_image.len() as u64, "seed {seed}: size");
        assert_eq!(
            io.visible_bytes(path).expect("visible"),
            expected_image,
            "seed {seed}: visible image"
        );
        // Make the names durable (never the data: sync_dir does not touch file contents).
        io.sync_dir(Path::new("/d")).expect("sync dir");
        io.sync_dir(Path::new("/")).expect("sync root");
        assert_eq!(
            io.durable_bytes(path).expect("durable"),
            expected_synced,
            "seed {seed}: durable image"
        );
        io.crash();
        assert_eq!(
            io.durable_bytes(path).expect("after crash"),
            expected_synced,
            "seed {seed}: after crash"
        );
    }
}

#[test]
fn real_backends_match_the_model() {
    let tmp = tempfile::tempdir().expect("tmp");
    let uring = match UringIo::new() {
        Ok(io) => Some(io),
        Err(e) if matches!(e.raw_os_error(), Some(libc::EPERM) | Some(libc::ENOSYS)) => {
            eprintln!(
                "io_uring is not permitted on this host ({e}); only the syscall backend is compared"
            );
            None
        }
        Err(e) => panic!("io_uring setup failed: {e}"),
    };
    let mut syscall = SyscallIo::new();
    let mut uring = uring;
    for seed in 0..40 {
        // Fewer syncs on real disks: each one is a real fdatasync.
        let steps: Vec<Step> = random_steps(&mut SimRng::new(seed), 60)
            .into_iter()
            .filter(|s| !matches!(s, Step::Sync) || seed % 8 == 0)
            .collect();
        let (expected_reads, expected_image, _) = model(&steps);
        let path = tmp.path().join(format!("syscall-{seed}"));
        let (reads, size) = run_steps(&mut syscall, &path, &steps);
        assert_eq!(
            (reads, size),
            (expected_reads.clone(), expected_image.len() as u64),
            "syscall seed {seed}"
        );
        assert_eq!(
            std::fs::read(&path).expect("read back"),
            expected_image,
            "syscall seed {seed}: file"
        );
        if let Some(io) = uring.as_mut() {
            let path = tmp.path().join(format!("uring-{seed}"));
            let (reads, size) = run_steps(io, &path, &steps);
            assert_eq!(
                (reads, size),
                (expected_reads, expected_image.len() as u64),
                "uring seed {seed}"
            );
            assert_eq!(
                std::fs::read(&path).expect("read back"),
                expected_image,
                "uring seed {seed}: file"
            );
        }
    }
}
