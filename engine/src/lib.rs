//! ringlog-engine: files, record batches, segments, snapshots, quorum-state and io_uring.
//! Knows nothing of Raft roles.
pub mod batch;
pub mod crc;
pub mod epoch_cache;
pub mod io;
pub mod log;
pub mod offset_checkpoint;
pub mod quorum_state;
pub mod quorum_state_writer;
pub mod snapshot;
