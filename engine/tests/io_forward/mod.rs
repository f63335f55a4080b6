//! `forward_io!(field; method, …)`: inside an `impl Io for Wrapper`, the named methods of `Io`
//! handed unchanged to `self.field`, so a test's wrapper writes out only the methods it changes.
//! Methods with a default body in `Io` are not listed here: a wrapper that does not override them
//! gets the defaults, as a hand-written forwarder did.

macro_rules! forward_io {
    ($field:ident; $($method:ident),+ $(,)?) => {
        $( forward_io!(@one $field $method); )+
    };
    (@one $f:ident block_size_bytes) => {
        fn block_size_bytes(&self) -> usize {
            self.$f.block_size_bytes()
        }
    };
    (@one $f:ident open) => {
        fn open(
            &mut self,
            path: &std::path::Path,
            options: ringlog_engine::io::OpenOptions,
        ) -> Result<ringlog_engine::io::FileId, ringlog_engine::io::IoError> {
            self.$f.open(path, options)
        }
    };
    (@one $f:ident close) => {
        fn close(&mut self, file: ringlog_engine::io::FileId) -> Result<(), ringlog_engine::io::IoError> {
            self.$f.close(file)
        }
    };
    (@one $f:ident file_size_bytes) => {
        fn file_size_bytes(
            &mut self,
            file: ringlog_engine::io::FileId,
        ) -> Result<u64, ringlog_engine::io::IoError> {
            self.$f.file_size_bytes(file)
        }
    };
    (@one $f:ident set_len) => {
        fn set_len(
            &mut self,
            file: ringlog_engine::io::FileId,
            len_bytes: u64,
        ) -> Result<(), ringlog_engine::io::IoError> {
            self.$f.set_len(file, len_bytes)
        }
    };
    (@one $f:ident preallocate) => {
        fn preallocate(
            &mut self,
            file: ringlog_engine::io::FileId,
            len_bytes: u64,
        ) -> Result<(), ringlog_engine::io::IoError> {
            self.$f.preallocate(file, len_bytes)
        }
    };
    (@one $f:ident create_dir_all) => {
        fn create_dir_all(&mut self, path: &std::path::Path) -> Result<(), ringlog_engine::io::IoError> {
            self.$f.create_dir_all(path)
        }
    };
    (@one $f:ident list_dir) => {
        fn list_dir(
            &mut self,
            path: &std::path::Path,
        ) -> Result<Vec<String>, ringlog_engine::io::IoError> {
            self.$f.list_dir(path)
        }
    };
    (@one $f:ident exists) => {
        fn exists(&mut self, path: &std::path::Path) -> bool {
            self.$f.exists(path)
        }
    };
    (@one $f:ident rename) => {
        fn rename(
            &mut self,
            from: &std::path::Path,
            to: &std::path::Path,
        ) -> Result<(), ringlog_engine::io::IoError> {
            self.$f.rename(from, to)
        }
    };
    (@one $f:ident remove_file) => {
        fn remove_file(&mut self, path: &std::path::Path) -> Result<(), ringlog_engine::io::IoError> {
            self.$f.remove_file(path)
        }
    };
    (@one $f:ident sync_dir) => {
        fn sync_dir(&mut self, path: &std::path::Path) -> Result<(), ringlog_engine::io::IoError> {
            self.$f.sync_dir(path)
        }
    };
    (@one $f:ident open_dir) => {
        fn open_dir(
            &mut self,
            path: &std::path::Path,
        ) -> Result<ringlog_engine::io::FileId, ringlog_engine::io::IoError> {
            self.$f.open_dir(path)
        }
    };
    (@one $f:ident raw_fd) => {
        fn raw_fd(&self, file: ringlog_engine::io::FileId) -> Option<std::os::fd::RawFd> {
            self.$f.raw_fd(file)
        }
    };
    (@one $f:ident submit) => {
        fn submit(&mut self, op: ringlog_engine::io::Op) -> ringlog_engine::io::OpId {
            self.$f.submit(op)
        }
    };
    (@one $f:ident submit_linked) => {
        fn submit_linked(
            &mut self,
            ops: Vec<ringlog_engine::io::Op>,
        ) -> Vec<ringlog_engine::io::OpId> {
            self.$f.submit_linked(ops)
        }
    };
    (@one $f:ident submit_and_wait) => {
        fn submit_and_wait(
            &mut self,
            min_completions: usize,
        ) -> Result<(), ringlog_engine::io::IoError> {
            self.$f.submit_and_wait(min_completions)
        }
    };
    (@one $f:ident drain_completions) => {
        fn drain_completions(&mut self, out: &mut Vec<ringlog_engine::io::Completion>) {
            self.$f.drain_completions(out)
        }
    };
    (@one $f:ident take_completions) => {
        fn take_completions(
            &mut self,
            ids: &[ringlog_engine::io::OpId],
            out: &mut Vec<ringlog_engine::io::Completion>,
        ) {
            self.$f.take_completions(ids, out)
        }
    };
    (@one $f:ident ready_count) => {
        fn ready_count(&mut self) -> usize {
            self.$f.ready_count()
        }
    };
    (@one $f:ident in_flight) => {
        fn in_flight(&self) -> usize {
            self.$f.in_flight()
        }
    };
}
