//! Blocking helpers over the completion-based [`Io`] trait, for the rare, off-hot-path work:
//! recovery reads, small metadata files (leader-epoch-checkpoint, quorum-state, indexes), close.
//!
//! Several logs may share one `Io` (one ring). A blocking wait takes only its own completions
//! (`io::wait_for_all`); everyone else's stay in the backend for their owners.

use std::path::{Path, PathBuf};

use crate::io::{AlignedBuf, Completion, FileId, Io, IoError, Op, OpId, OpenOptions};

/// Submit `ops` (as one linked chain when `linked`) and block until each of them completed.
/// Returns the completions in the order of `ops`; every other completion stays in the backend
/// for its owner (`io::wait_for_all`).
pub(crate) fn run_ops<I: Io>(
    io: &mut I,
    ops: Vec<Op>,
    linked: bool,
) -> Result<Vec<Completion>, IoError> {
    let ids: Vec<OpId> = if linked {
        io.submit_linked(ops)
    } else {
        ops.into_iter().map(|op| io.submit(op)).collect()
    };
    crate::io::wait_for_all(io, &ids)
}

/// Turn a completion's result into `Ok(bytes)` or its error.
pub(crate) fn completion_result(completion: &mut Completion) -> Result<usize, IoError> {
    std::mem::replace(&mut completion.result, Ok(0))
}

/// Read a whole (small, buffered) file. `Ok(None)` if it does not exist.
pub(crate) fn read_whole_file<I: Io>(io: &mut I, path: &Path) -> Result<Option<Vec<u8>>, IoError> {
    if !io.exists(path) {
        return Ok(None);
    }
    let file = io.open(
        path,
        OpenOptions {
            read_only: true,
            ..Default::default()
        },
    )?;
    let result = read_range(io, file, 0, None);
    io.close(file)?;
    result.map(Some)
}

/// Read `[offset, offset + len)` of an open file (to its end when `len` is `None`), honouring
/// O_DIRECT alignment: the read is widened to whole blocks and the answer sliced back.
/// Returns fewer bytes if the file ends first.
pub(crate) fn read_range<I: Io>(
    io: &mut I,
    file: FileId,
    offset: u64,
    len: Option<u64>,
) -> Result<Vec<u8>, IoError> {
    let size = io.file_size_bytes(file)?;
    let end = match len {
        Some(len) => (offset + len).min(size),
        None => size,
    };
    if offset >= end {
        return Ok(Vec::new());
    }
    let block = io.block_size_bytes() as u64;
    let aligned_start = offset / block * block;
    let aligned_end = end.div_ceil(block) * block;
    let mut out = Vec::with_capacity((end - offset) as usize);
    // Read in chunks so a 1 GiB segment does not need a 1 GiB buffer at once.
    const CHUNK_BYTES: u64 = 8 << 20;
    let mut position = aligned_start;
    while position < aligned_end {
        let chunk_len = CHUNK_BYTES.min(aligned_end - position);
        let mut completions = run_ops(
            io,
            vec![Op::Read {
                file,
                offset: position,
                len: chunk_len as usize,
            }],
            false,
        )?;
        let mut completion = completions.pop().expect("one completion per op");
        let read = completion_result(&mut completion)?;
        let buf = completion
            .buf
            .unwrap_or_else(|| AlignedBuf::zeroed(0, block as usize));
        let data = &buf.as_slice()[..read.min(buf.len())];
        let from = offset.saturating_sub(position) as usize;
        let to = ((end - position) as usize).min(data.len());
        if from < to {
            out.extend_from_slice(&data[from..to]);
        }
        if (read as u64) < chunk_len {
            break; // end of file
        }
        position += chunk_len;
    }
    Ok(out)
}

/// Write a whole file with an arbitrary length and make it durable (buffered file, not O_DIRECT).
/// Not atomic: use [`write_file_atomically`] where a torn file must not be seen.
pub(crate) fn write_whole_file<I: Io>(io: &mut I, path: &Path, data: &[u8]) -> Result<(), IoError> {
    let file = open_emptied(io, path)?;
    let ids = submit_write_and_sync(io, file, data);
    let result = crate::io::wait_for_all(io, &ids).and_then(|completions| {
        for mut completion in completions {
            completion_result(&mut completion)?;
        }
        Ok(())
    });
    let closed = io.close(file);
    result.and(closed)
}

/// `path` created or emptied, open for buffered writes; no file is left open if emptying fails.
/// The first step of [`write_whole_file`], and of the writes that wait for the ring instead
/// (the log's chain preparation, the quorum-state writer).
pub(crate) fn open_emptied<I: Io>(io: &mut I, path: &Path) -> Result<FileId, IoError> {
    let file = io.open(
        path,
        OpenOptions {
            create: true,
            ..Default::default()
        },
    )?;
    if let Err(error) = io.set_len(file, 0) {
        let _ = io.close(file);
        return Err(error);
    }
    Ok(file)
}

/// Submits `data` written at the start of `file` (an emptied buffered file) and an fdatasync,
/// as one linked chain: the second step of [`write_whole_file`], without the wait.
pub(crate) fn submit_write_and_sync<I: Io>(io: &mut I, file: FileId, data: &[u8]) -> Vec<OpId> {
    let mut ops = Vec::new();
    if !data.is_empty() {
        let buf = AlignedBuf::from_slice(data, io.block_size_bytes());
        ops.push(Op::Write {
            file,
            offset: 0,
            buf,
        });
    }
    ops.push(Op::Fdatasync { file });
    io.submit_linked(ops)
}

/// Replace `path` atomically: write `path.tmp`, fdatasync it, rename it over `path`, fsync the
/// folder. A crash leaves either the old or the new content, never a mix.
pub(crate) fn write_file_atomically<I: Io>(
    io: &mut I,
    path: &Path,
    data: &[u8],
) -> Result<(), IoError> {
    let tmp = tmp_path(path);
    if io.exists(&tmp) {
        io.remove_file(&tmp)?;
    }
    write_whole_file(io, &tmp, data)?;
    io.rename(&tmp, path)?;
    io.sync_dir(parent_dir(path))
}

pub(crate) fn tmp_path(path: &Path) -> PathBuf {
    let mut name = path
        .file_name()
        .map(|n| n.to_os_string())
        .unwrap_or_default();
    name.push(".tmp");
    path.with_file_name(name)
}

pub(crate) fn parent_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    }
}
