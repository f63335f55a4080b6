//! Pieces every backend shares: operation accessors, the alignment rule, error construction.

use std::path::Path;

use super::{AlignedBuf, Completion, FileId, IoError, Op, OpId};

/// An `std::io::Error` for a raw errno, so tests and callers can match on `raw_os_error()`.
pub(crate) fn errno(code: i32) -> std::io::Error {
    std::io::Error::from_raw_os_error(code)
}

/// The path used in errors for a `FileId` that no backend knows (never opened, or closed).
pub(crate) const UNKNOWN_FILE_PATH: &str = "<unknown file>";

impl Op {
    /// The name used in errors (`IoError::operation`).
    pub fn operation_name(&self) -> &'static str {
        match self {
            Op::Write { .. } => "write",
            Op::WriteDsync { .. } => "write (dsync)",
            Op::Read { .. } => "read",
            Op::Fdatasync { .. } => "fdatasync",
            Op::Fallocate { .. } => "fallocate",
        }
    }

    pub fn file(&self) -> FileId {
        match self {
            Op::Write { file, .. }
            | Op::WriteDsync { file, .. }
            | Op::Read { file, .. }
            | Op::Fdatasync { file }
            | Op::Fallocate { file, .. } => *file,
        }
    }

    /// The file offset the operation starts at (0 for fdatasync).
    pub fn offset(&self) -> u64 {
        match self {
            Op::Write { offset, .. }
            | Op::WriteDsync { offset, .. }
            | Op::Read { offset, .. }
            | Op::Fallocate { offset, .. } => *offset,
            Op::Fdatasync { .. } => 0,
        }
    }

    /// The number of bytes the operation transfers (0 for fdatasync and fallocate).
    pub fn len_bytes(&self) -> usize {
        match self {
            Op::Write { buf, .. } | Op::WriteDsync { buf, .. } => buf.len(),
            Op::Read { len, .. } => *len,
            Op::Fdatasync { .. } | Op::Fallocate { .. } => 0,
        }
    }

    /// Give back the buffer an operation owns (only writes own one at submission).
    pub(crate) fn into_buf(self) -> Option<AlignedBuf> {
        match self {
            Op::Write { buf, .. } | Op::WriteDsync { buf, .. } => Some(buf),
            Op::Read { .. } | Op::Fdatasync { .. } | Op::Fallocate { .. } => None,
        }
    }

    /// Whether the operation changes the file (a read-only handle refuses it).
    pub fn is_write(&self) -> bool {
        matches!(
            self,
            Op::Write { .. } | Op::WriteDsync { .. } | Op::Fallocate { .. }
        )
    }
}

/// The O_DIRECT rule, enforced identically by every backend on files opened with `direct`
/// (even where the kernel would accept less, e.g. after the buffered fallback on tmpfs), so an
/// alignment bug fails the same way in the memory backend's tests and in production.
///
/// Worked example with a 4096-byte block: a write of 8192 bytes at offset 12288 from an
/// `AlignedBuf` allocated with align 4096 is fine; the same write at offset 12300, or of 8000
/// bytes, or from a `Vec`-backed slice at an odd address, is EINVAL.
pub(crate) fn check_direct_alignment(
    op: &Op,
    block_size_bytes: usize,
) -> Result<(), std::io::Error> {
    let block = block_size_bytes as u64;
    let aligned = match op {
        Op::Write { offset, buf, .. } | Op::WriteDsync { offset, buf, .. } => {
            offset.is_multiple_of(block)
                && (buf.len() as u64).is_multiple_of(block)
                && buf.is_aligned_to(block_size_bytes)
        }
        Op::Read { offset, len, .. } => {
            offset.is_multiple_of(block) && (*len as u64).is_multiple_of(block)
        }
        Op::Fdatasync { .. } | Op::Fallocate { .. } => true,
    };
    if aligned {
        Ok(())
    } else {
        Err(errno(libc::EINVAL))
    }
}

/// The most one read or write may transfer: Linux's MAX_RW_COUNT (2 GiB - 4 KiB). Larger requests
/// complete with EINVAL on every backend instead of a giant allocation (or an SQE length overflow).
pub const TRANSFER_BYTES_MAX: usize = 0x7fff_f000;

pub(crate) fn check_transfer_len(op: &Op) -> Result<(), std::io::Error> {
    if op.len_bytes() > TRANSFER_BYTES_MAX {
        Err(errno(libc::EINVAL))
    } else {
        Ok(())
    }
}

/// A completion that failed before reaching the device, giving the write buffer back.
pub(crate) fn failed_completion(
    op_id: OpId,
    op: Op,
    path: &Path,
    source: std::io::Error,
) -> Completion {
    let error = IoError::new(op.operation_name(), path, op.offset(), source);
    Completion {
        op_id,
        result: Err(error),
        buf: op.into_buf(),
    }
}

/// The buffer for a read of `len` bytes: the recycled one if it is large and aligned enough,
/// else a new zeroed one.
pub(crate) fn take_read_buf(
    spare: &mut Option<AlignedBuf>,
    len: usize,
    block_size_bytes: usize,
) -> AlignedBuf {
    match spare.take() {
        Some(mut buf) if buf.capacity() >= len && buf.align() >= block_size_bytes => {
            buf.reuse_for_read(len);
            buf
        }
        _ => AlignedBuf::zeroed(len, block_size_bytes),
    }
}
