//! A checkpoint file holding one offset, for a partition folder (Kafka keeps such offsets in
//! per-log-directory checkpoint files: `log-start-offset-checkpoint`, `recovery-point-offset-checkpoint`).
//!
//! ```text
//! 0\n              version
//! <offset>\n       decimal
//! <crc32c>\n       decimal CRC32C of the two lines above
//! ```
//!
//! Replaced atomically (tmp, fdatasync, rename, folder fsync), so a crash leaves the old or the
//! new offset. A file that does not parse or whose checksum does not match is a typed error
//! ([`OffsetCheckpointError::Malformed`]): the caller decides what an untrusted offset means,
//! and is never handed a silently changed one (a flipped digit is caught by the checksum).

use std::path::Path;

use crate::io::{Io, IoError};
use crate::log::blocking;

const VERSION: &str = "0";

#[derive(Debug, thiserror::Error)]
pub enum OffsetCheckpointError {
    #[error("malformed offset checkpoint {path}: {reason}")]
    Malformed { path: String, reason: &'static str },
    #[error(transparent)]
    Io(#[from] IoError),
}

/// The file's bytes for `offset`.
pub fn encode(offset: u64) -> String {
    let body = format!("{VERSION}\n{offset}\n");
    let crc = crate::crc::crc32c(body.as_bytes());
    format!("{body}{crc}\n")
}

/// The offset a file's bytes hold.
pub fn decode(bytes: &[u8]) -> Result<u64, &'static str> {
    let text = std::str::from_utf8(bytes).map_err(|_| "not UTF-8")?;
    let mut lines = text.split_inclusive('\n');
    let (Some(version), Some(offset), Some(crc), None) =
        (lines.next(), lines.next(), lines.next(), lines.next())
    else {
        return Err("not three lines");
    };
    if version != "0\n" {
        return Err("unknown version");
    }
    let crc: u32 = crc
        .strip_suffix('\n')
        .ok_or("no final newline")?
        .parse()
        .map_err(|_| "checksum is not a number")?;
    let body_len = version.len() + offset.len();
    if crate::crc::crc32c(&bytes[..body_len]) != crc {
        return Err("checksum mismatch");
    }
    offset
        .strip_suffix('\n')
        .and_then(|o| o.parse().ok())
        .ok_or("offset is not a number")
}

/// Reads the checkpoint at `path`: `None` if there is no file.
pub fn load<I: Io>(io: &mut I, path: &Path) -> Result<Option<u64>, OffsetCheckpointError> {
    match blocking::read_whole_file(io, path)? {
        None => Ok(None),
        Some(bytes) => {
            decode(&bytes)
                .map(Some)
                .map_err(|reason| OffsetCheckpointError::Malformed {
                    path: path.display().to_string(),
                    reason,
                })
        }
    }
}

/// Replaces the checkpoint at `path` with `offset`, durably; returns after the folder fsync.
pub fn persist<I: Io>(io: &mut I, path: &Path, offset: u64) -> Result<(), OffsetCheckpointError> {
    blocking::write_file_atomically(io, path, encode(offset).as_bytes())?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::memory::MemoryIo;

    #[test]
    fn an_offset_reads_back_and_a_missing_file_is_none() {
        let mut io = MemoryIo::with_seed(1);
        let path = Path::new("/p/log-start-offset-checkpoint");
        io.create_dir_all(Path::new("/p")).unwrap();
        assert_eq!(load(&mut io, path).unwrap(), None);
        for offset in [0, 1, 57, u64::MAX] {
            persist(&mut io, path, offset).unwrap();
            assert_eq!(load(&mut io, path).unwrap(), Some(offset));
        }
    }

    #[test]
    fn every_flipped_bit_and_every_truncation_is_detected() {
        let good = encode(1_234_567).into_bytes();
        assert_eq!(decode(&good), Ok(1_234_567));
        for byte in 0..good.len() {
            for bit in 0..8 {
                let mut flipped = good.clone();
                flipped[byte] ^= 1 << bit;
                assert!(decode(&flipped).is_err(), "byte {byte} bit {bit}");
            }
        }
        for len in 0..good.len() {
            assert!(decode(&good[..len]).is_err(), "truncated to {len}");
        }
        let mut longer = good.clone();
        longer.extend_from_slice(b"9\n");
        assert!(decode(&longer).is_err());
    }
}
