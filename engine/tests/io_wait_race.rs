//! A blocking wait on a shared ring (`io::wait_for_any`) whose completion is posted between its
//! own two looks at the ring: the kernel posts completions at any moment, so the count of ready
//! completions can reap the very operation the take just before did not find. Until 2026-12-02
//! the wait then judged nothing of it in flight and panicked ("waiting for operations [..] that
//! are not in flight"): seen twice in librdkafka's test suite, in a follower's blocking
//! leader-epoch-checkpoint write (docs/clients.md).

use std::path::Path;

use ringlog_engine::io::{
    AlignedBuf, Completion, FileId, Io, IoError, MemoryIo, Op, OpId, OpenOptions, wait_for_all,
};

/// `MemoryIo` whose in-flight operations all complete the moment anyone counts the ready
/// ones, as a ring's completions can land between two reaps.
struct LateIo {
    inner: MemoryIo,
}

impl Io for LateIo {
    fn block_size_bytes(&self) -> usize {
        self.inner.block_size_bytes()
    }
    fn open(&mut self, path: &Path, options: OpenOptions) -> Result<FileId, IoError> {
        self.inner.open(path, options)
    }
    fn close(&mut self, file: FileId) -> Result<(), IoError> {
        self.inner.close(file)
    }
    fn file_size_bytes(&mut self, file: FileId) -> Result<u64, IoError> {
        self.inner.file_size_bytes(file)
    }
    fn set_len(&mut self, file: FileId, len_bytes: u64) -> Result<(), IoError> {
        self.inner.set_len(file, len_bytes)
    }
    fn preallocate(&mut self, file: FileId, len_bytes: u64) -> Result<(), IoError> {
        self.inner.preallocate(file, len_bytes)
    }
    fn create_dir_all(&mut self, path: &Path) -> Result<(), IoError> {
        self.inner.create_dir_all(path)
    }
    fn list_dir(&mut self, path: &Path) -> Result<Vec<String>, IoError> {
        self.inner.list_dir(path)
    }
    fn exists(&mut self, path: &Path) -> bool {
        self.inner.exists(path)
    }
    fn rename(&mut self, from: &Path, to: &Path) -> Result<(), IoError> {
        self.inner.rename(from, to)
    }
    fn remove_file(&mut self, path: &Path) -> Result<(), IoError> {
        self.inner.remove_file(path)
    }
    fn sync_dir(&mut self, path: &Path) -> Result<(), IoError> {
        self.inner.sync_dir(path)
    }
    fn open_dir(&mut self, path: &Path) -> Result<FileId, IoError> {
        self.inner.open_dir(path)
    }
    fn raw_fd(&self, file: FileId) -> Option<std::os::fd::RawFd> {
        self.inner.raw_fd(file)
    }
    fn submit(&mut self, op: Op) -> OpId {
        self.inner.submit(op)
    }
    fn submit_linked(&mut self, ops: Vec<Op>) -> Vec<OpId> {
        self.inner.submit_linked(ops)
    }
    fn submit_and_wait(&mut self, min_completions: usize) -> Result<(), IoError> {
        self.inner.submit_and_wait(min_completions)
    }
    fn drain_completions(&mut self, out: &mut Vec<Completion>) {
        self.inner.drain_completions(out)
    }
    fn take_completions(&mut self, ids: &[OpId], out: &mut Vec<Completion>) {
        self.inner.take_completions(ids, out)
    }
    fn ready_count(&mut self) -> usize {
        let in_flight = self.inner.in_flight();
        self.inner
            .submit_and_wait(in_flight)
            .expect("the memory backend completes what is in flight");
        self.inner.ready_count()
    }
    fn in_flight(&self) -> usize {
        self.inner.in_flight()
    }
}

#[test]
fn a_completion_posted_between_the_take_and_the_count_is_returned() {
    let mut io = LateIo {
        inner: MemoryIo::with_seed(11),
    };
    let dir = Path::new("/race");
    io.create_dir_all(dir).unwrap();
    let file = io
        .open(
            &dir.join("f"),
            OpenOptions {
                create: true,
                ..OpenOptions::default()
            },
        )
        .unwrap();
    let block = io.block_size_bytes();
    // Another owner's operation in flight too, whose completion must stay for it.
    let others = io.submit(Op::Fdatasync { file });
    let ids = io.submit_linked(vec![
        Op::Write {
            file,
            offset: 0,
            buf: AlignedBuf::from_slice(&[7u8; 100], block),
        },
        Op::Fdatasync { file },
    ]);
    let done = wait_for_all(&mut io, &ids).expect("no I/O error is injected");
    assert_eq!(
        done.iter().map(|c| c.op_id).collect::<Vec<_>>(),
        ids,
        "both completions, in the order asked"
    );
    let mut left = Vec::new();
    io.drain_completions(&mut left);
    assert_eq!(
        left.iter().map(|c| c.op_id).collect::<Vec<_>>(),
        vec![others],
        "the other owner's completion stays in the backend"
    );
}
