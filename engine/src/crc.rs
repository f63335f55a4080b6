//! CRC32C (Castagnoli, the CRC of Kafka's RecordBatch v2 and of every ringlog file format), one
//! implementation for the whole node.
//!
//! `crc-fast` folds 64-byte lanes with (V)PCLMULQDQ where the CPU has it and falls back to the
//! SSE4.2 `crc32` instruction or a table elsewhere; the `crc32c` crate, used before 2026-12-05,
//! runs three `crc32` streams. On this machine (Xeon with AVX-512 VPCLMULQDQ) the fold checks
//! cached data at 26-119 GB/s against 14-20 GB/s (1 KiB to 1 MiB); data beyond the cache is
//! bound by memory either way. The checks of a replica catching up, and of every produced batch,
//! are on cached bytes (docs/benchmarks.md, "CRC32C at memory speed"). The tests cross-check
//! against the `crc32c` crate, an independent implementation.

use crc_fast::{CrcAlgorithm, Digest};

/// CRC32C of `data`.
#[inline]
pub fn crc32c(data: &[u8]) -> u32 {
    crc_fast::checksum(CrcAlgorithm::Crc32Iscsi, data) as u32
}

/// CRC32C of the bytes whose CRC32C is `crc`, followed by `data`.
#[inline]
pub fn crc32c_append(crc: u32, data: &[u8]) -> u32 {
    // The register holds the CRC before its final inversion.
    let mut digest = Digest::new_with_init_state(CrcAlgorithm::Crc32Iscsi, u64::from(!crc));
    digest.update(data);
    digest.finalize() as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_crc32c_crate_at_every_length_offset_and_start() {
        let bytes: Vec<u8> = (0..70_000u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        for start in [0, 1, 3, 7, 13, 64] {
            for len in [
                0, 1, 5, 20, 21, 56, 63, 64, 65, 255, 512, 4095, 4096, 4097, 65_537,
            ] {
                let data = &bytes[start..start + len];
                assert_eq!(crc32c(data), ::crc32c::crc32c(data), "{start} {len}");
                for init in [0, 1, 0xdead_beef, u32::MAX] {
                    assert_eq!(
                        crc32c_append(init, data),
                        ::crc32c::crc32c_append(init, data),
                        "{start} {len} {init:#x}"
                    );
                }
            }
        }
        // The RecordBatch v2 check value (CRC-32C of "123456789").
        assert_eq!(crc32c(b"123456789"), 0xe306_9283);
    }

    #[test]
    fn appending_in_pieces_is_the_crc_of_the_whole() {
        let bytes: Vec<u8> = (0..10_000u32).map(|i| (i * 31 + 7) as u8).collect();
        for cut in [0, 1, 100, 4096, 9_999, 10_000] {
            let (a, b) = bytes.split_at(cut);
            assert_eq!(crc32c_append(crc32c(a), b), crc32c(&bytes), "cut {cut}");
        }
    }
}
