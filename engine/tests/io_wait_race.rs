//! A blocking wait on a shared ring (`io::wait_for_any`) whose completion is posted between its
//! own two looks at the ring: the kernel posts completions at any moment, so the count of ready
//! completions can reap the very operation the take just before did not find. Until 2026-12-02
//! the wait then judged nothing of it in flight and panicked ("waiting for operations [..] that
//! are not in flight"): seen twice in librdkafka's test suite, in a follower's blocking
//! leader-epoch-checkpoint write (docs/clients.md).

#[macro_use]
mod io_forward;

use std::path::Path;

use ringlog_engine::io::{AlignedBuf, Io, MemoryIo, Op, OpenOptions, wait_for_all};

/// `MemoryIo` whose in-flight operations all complete the moment anyone counts the ready
/// ones, as a ring's completions can land between two reaps.
struct LateIo {
    inner: MemoryIo,
}

impl Io for LateIo {
    forward_io!(inner; block_size_bytes, open, close, file_size_bytes, set_len, preallocate, create_dir_all, list_dir, exists, rename, remove_file, sync_dir, open_dir, raw_fd, submit, submit_linked, submit_and_wait, drain_completions, take_completions, in_flight);
    fn ready_count(&mut self) -> usize {
        let in_flight = self.inner.in_flight();
        self.inner
            .submit_and_wait(in_flight)
            .expect("the memory backend completes what is in flight");
        self.inner.ready_count()
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
