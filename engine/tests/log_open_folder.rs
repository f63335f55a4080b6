//! What an open makes durable of the log's folder, and `LogConfig::folder_durable_before_open`:
//! a caller that has made the folder durable itself (a node's `folder-prep` thread, many
//! folders in one sync) spares the open its syncs; a folder that is not there yet is synced
//! whatever the caller says.

use std::path::Path;

use ringlog_engine::io::{Io, MemoryConfig, MemoryIo};
use ringlog_engine::log::{LogConfig, PartitionLog};

fn io() -> MemoryIo {
    let mut io = MemoryIo::new(MemoryConfig::default());
    io.create_dir_all(Path::new("/data")).expect("mkdir");
    for d in ["/", "/data"] {
        io.sync_dir(Path::new(d)).expect("sync dir");
    }
    io
}

fn config(folder_durable_before_open: bool) -> LogConfig {
    LogConfig {
        folder_durable_before_open,
        ..LogConfig::default()
    }
}

#[test]
fn an_open_makes_a_new_folder_durable() {
    let mut io = io();
    let dir = Path::new("/data/t-0");
    let (log, _) = PartitionLog::open(&mut io, dir, config(false)).expect("open");
    drop(log);
    io.crash();
    assert!(io.exists(dir), "the open synced the folder's entry");
}

#[test]
fn a_folder_its_caller_made_durable_is_not_synced_again() {
    let mut io = io();
    // Made by the caller and synced: it survives, and the log opens in it.
    let made = Path::new("/data/t-0");
    io.create_dir_all(made).expect("mkdir");
    io.sync_dir(made).expect("sync");
    io.sync_dir(Path::new("/data")).expect("sync");
    // Made by the caller and, against the contract, not synced: the open relies on the
    // caller, so power loss takes it (this is how the test sees that the open skipped it).
    let unsynced = Path::new("/data/t-1");
    io.create_dir_all(unsynced).expect("mkdir");
    for dir in [made, unsynced] {
        let (log, _) = PartitionLog::open(&mut io, dir, config(true)).expect("open");
        drop(log);
    }
    io.crash();
    assert!(io.exists(made));
    assert!(
        !io.exists(unsynced),
        "the open left the folder to its caller"
    );
    let (log, report) = PartitionLog::open(&mut io, made, config(false)).expect("reopen");
    assert_eq!(log.log_end_offset(), 0);
    assert!(report.files_removed.is_empty());
}

#[test]
fn a_folder_that_is_not_there_is_synced_whatever_the_caller_says() {
    let mut io = io();
    let dir = Path::new("/data/t-0");
    let (log, _) = PartitionLog::open(&mut io, dir, config(true)).expect("open");
    drop(log);
    io.crash();
    assert!(io.exists(dir), "created by the open, so synced by it");
}
