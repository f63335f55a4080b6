//! Blocking helpers over the completion-based `Io` trait for snapshot files (off the hot path).
//!
//! Several users may share one `Io`: a wait takes only its own completions and leaves the rest in
//! the backend for their owners.

use std::path::Path;

use bytes::{Bytes, BytesMut};

use crate::io::{AlignedBuf, Completion, FileId, Io, IoError, Op, OpenOptions};

/// Largest single write or read submitted; bounds the aligned buffer a chunk needs.
pub(crate) const IO_CHUNK_BYTES: usize = 4 * 1024 * 1024;

/// Submit `op` and block until it completes; returns the completion. Other owners'
/// completions stay in the backend for them (`io::wait_for_all`).
pub(crate) fn run_op<I: Io>(io: &mut I, op: Op) -> Result<Completion, IoError> {
    let id = io.submit(op);
    let mut completions = crate::io::wait_for_all(io, &[id])?;
    Ok(completions.pop().expect("one completion per op"))
}

/// Write all of `data` at `offset` (in chunks), blocking; short writes are errors.
pub(crate) fn write_all_at<I: Io>(
    io: &mut I,
    file: FileId,
    path: &Path,
    offset: u64,
    data: &[u8],
) -> Result<(), IoError> {
    let align = io.block_size_bytes();
    let mut written = 0usize;
    while written < data.len() {
        let chunk = &data[written..(written + IO_CHUNK_BYTES).min(data.len())];
        let at = offset + written as u64;
        let buf = AlignedBuf::from_slice(chunk, align);
        let completion = run_op(
            io,
            Op::Write {
                file,
                offset: at,
                buf,
            },
        )?;
        let n = completion.result?;
        if n != chunk.len() {
            return Err(IoError::new(
                "write",
                path,
                at,
                std::io::ErrorKind::WriteZero.into(),
            ));
        }
        written += chunk.len();
    }
    Ok(())
}

pub(crate) fn fdatasync<I: Io>(io: &mut I, file: FileId) -> Result<(), IoError> {
    run_op(io, Op::Fdatasync { file })?.result.map(|_| ())
}

/// Read `[offset, offset + len_bytes)`, blocking, stopping early at the end of the file.
pub(crate) fn read_range<I: Io>(
    io: &mut I,
    file: FileId,
    offset: u64,
    len_bytes: u64,
) -> Result<Bytes, IoError> {
    let mut out = BytesMut::with_capacity(usize::try_from(len_bytes).unwrap_or(0).min(1 << 30));
    let mut position = offset;
    let end = offset.saturating_add(len_bytes);
    while position < end {
        let len = (end - position).min(IO_CHUNK_BYTES as u64) as usize;
        let completion = run_op(
            io,
            Op::Read {
                file,
                offset: position,
                len,
            },
        )?;
        let n = completion.result?;
        let Some(buf) = completion.buf else { break };
        out.extend_from_slice(&buf.as_slice()[..n.min(buf.len())]);
        if n < len {
            break; // end of file
        }
        position += n as u64;
    }
    Ok(out.freeze())
}

/// Create `path` (which must not exist), write `data`, fdatasync, close. Tests and fuzzing use
/// it to place arbitrary bytes; the folder entry is the caller's to sync.
pub(crate) fn write_new_file<I: Io>(io: &mut I, path: &Path, data: &[u8]) -> Result<(), IoError> {
    let file = io.open(
        path,
        OpenOptions {
            create: true,
            create_new: true,
            ..Default::default()
        },
    )?;
    let result = write_all_at(io, file, path, 0, data).and_then(|()| fdatasync(io, file));
    let closed = io.close(file);
    result.and(closed)
}

/// Create `dir` and any missing ancestors, durably: each new folder's parent is fsynced, or a
/// crash could take the whole `checkpoints/` folder (and every snapshot in it) away.
pub(crate) fn create_dir_durable<I: Io>(io: &mut I, dir: &Path) -> Result<(), IoError> {
    let mut missing = Vec::new();
    let mut at = Some(dir);
    while let Some(path) = at {
        if path.as_os_str().is_empty() || io.exists(path) {
            break;
        }
        missing.push(path.to_path_buf());
        at = path.parent();
    }
    if missing.is_empty() {
        return Ok(());
    }
    io.create_dir_all(dir)?;
    // Outermost first, so each entry is durable before the folder inside it is.
    for path in missing.iter().rev() {
        io.sync_dir(parent_dir(path))?;
    }
    Ok(())
}

pub(crate) fn parent_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    }
}
