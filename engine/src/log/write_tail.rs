//! The active segment's unwritten bytes, block aligned for O_DIRECT, with the CRC32C of their
//! full blocks kept up to date as the blocks fill.
//!
//! A flush's slot vouches for the full blocks it writes by their CRC32C (`tail_slot`). Computing
//! that CRC when the flush starts put a pass over the whole group commit (1 MiB and more) on the
//! critical path between one flush's completion and the next chain's submission, while the
//! disk idled. Here each byte is checksummed once, when its block fills during `append`, while
//! the bytes are still hot in the cache from the copy, and a flush reads the result.

use crate::io::AlignedBuf;

/// The piece of an append copied and then checksummed while in the cache (L2 holds it).
const COPY_PIECE_BYTES: usize = 256 * 1024;

#[derive(Debug)]
pub(crate) struct WriteTail {
    buf: AlignedBuf,
    block_size_bytes: usize,
    /// `buf[..full_blocks_len]` are whole blocks; `full_blocks_crc32c` is their CRC32C.
    full_blocks_len: usize,
    full_blocks_crc32c: u32,
}

impl WriteTail {
    pub fn new(block_size_bytes: usize) -> WriteTail {
        WriteTail::with_buffer(
            AlignedBuf::with_capacity_in_huge_pages(block_size_bytes, block_size_bytes),
            block_size_bytes,
        )
    }

    /// A tail holding `partial` (less than one block: what recovery or a truncation leaves).
    pub fn from_partial(partial: &[u8], block_size_bytes: usize) -> WriteTail {
        assert!(
            partial.len() < block_size_bytes,
            "a tail starts with at most a partial block"
        );
        let mut tail = WriteTail::new(block_size_bytes);
        tail.extend_from_slice(partial);
        tail
    }

    /// An empty tail writing into `buf` (a spare buffer handed back by a completed write).
    fn with_buffer(mut buf: AlignedBuf, block_size_bytes: usize) -> WriteTail {
        assert!(
            buf.align() >= block_size_bytes,
            "the tail goes to O_DIRECT writes"
        );
        buf.clear();
        WriteTail {
            buf,
            block_size_bytes,
            full_blocks_len: 0,
            full_blocks_crc32c: 0,
        }
    }

    pub fn as_slice(&self) -> &[u8] {
        self.buf.as_slice()
    }

    pub fn len(&self) -> usize {
        self.buf.len()
    }

    /// Append bytes; checksum every block they complete. A large append (a follower's fetched
    /// run, MiBs) is copied and checksummed a piece at a time, so the CRC reads each piece from
    /// the cache the copy just filled instead of from memory.
    pub fn extend_from_slice(&mut self, bytes: &[u8]) {
        // One allocation for the whole append, as a single copy would make.
        self.buf.reserve(bytes.len());
        for piece in bytes.chunks(COPY_PIECE_BYTES) {
            self.buf.extend_from_slice(piece);
            let full = self.buf.len() / self.block_size_bytes * self.block_size_bytes;
            if full > self.full_blocks_len {
                self.full_blocks_crc32c = crate::crc::crc32c_append(
                    self.full_blocks_crc32c,
                    &self.buf.as_slice()[self.full_blocks_len..full],
                );
                self.full_blocks_len = full;
            }
        }
        debug_assert_eq!(
            self.full_blocks_len,
            self.buf.len() / self.block_size_bytes * self.block_size_bytes
        );
    }

    /// (length, CRC32C) of the whole blocks at the tail's start.
    pub fn full_blocks(&self) -> (usize, u32) {
        debug_assert_eq!(
            self.full_blocks_crc32c,
            crate::crc::crc32c(&self.buf.as_slice()[..self.full_blocks_len]),
            "the running CRC covers exactly the full blocks"
        );
        (self.full_blocks_len, self.full_blocks_crc32c)
    }

    /// (length, CRC32C) of the whole tail zero padded to the next block boundary: what a seal
    /// writes.
    pub fn padded_blocks(&self) -> (usize, u32) {
        let (full_len, full_crc32c) = self.full_blocks();
        let rest = &self.buf.as_slice()[full_len..];
        if rest.is_empty() {
            return (full_len, full_crc32c);
        }
        let padding = vec![0u8; self.block_size_bytes - rest.len()];
        let crc32c =
            crate::crc::crc32c_append(crate::crc::crc32c_append(full_crc32c, rest), &padding);
        (full_len + self.block_size_bytes, crc32c)
    }

    /// Hand out the full blocks for a write (their buffer), keeping the partial block in
    /// `spare` (which becomes this tail's buffer).
    pub fn take_full_blocks(&mut self, spare: AlignedBuf) -> AlignedBuf {
        let full = self.full_blocks_len;
        let mut next = WriteTail::with_buffer(spare, self.block_size_bytes);
        next.extend_from_slice(&self.buf.as_slice()[full..]);
        let mut taken = std::mem::replace(self, next).buf;
        taken.set_len(full);
        taken
    }

    /// Hand out everything, zero padded to a block boundary (a seal), leaving the tail empty
    /// in `spare`.
    pub fn take_padded(&mut self, spare: AlignedBuf) -> AlignedBuf {
        let padded_len = self.buf.len().div_ceil(self.block_size_bytes) * self.block_size_bytes;
        let next = WriteTail::with_buffer(spare, self.block_size_bytes);
        let mut taken = std::mem::replace(self, next).buf;
        taken.set_len(padded_len); // set_len zero-fills what it adds
        taken
    }

    pub fn clear(&mut self) {
        self.buf.clear();
        self.full_blocks_len = 0;
        self.full_blocks_crc32c = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_running_crc_is_the_crc_of_the_full_blocks_whatever_the_append_sizes() {
        let block = 512;
        let bytes: Vec<u8> = (0..5000u32).map(|i| (i * 7 + i / 13) as u8).collect();
        for step in [1, 100, 511, 512, 513, 1500, 5000] {
            let mut tail = WriteTail::new(block);
            for piece in bytes.chunks(step) {
                tail.extend_from_slice(piece);
                let full = tail.len() / block * block;
                assert_eq!(
                    tail.full_blocks(),
                    (full, ::crc32c::crc32c(&tail.as_slice()[..full]))
                );
            }
            let mut padded = bytes.clone();
            padded.resize(bytes.len().div_ceil(block) * block, 0);
            assert_eq!(
                tail.padded_blocks(),
                (padded.len(), ::crc32c::crc32c(&padded))
            );
        }
    }

    #[test]
    fn an_append_larger_than_a_copy_piece_is_checksummed_whole() {
        // A follower's fetched run: MiBs in one append, copied and checksummed in pieces.
        let block = 4096;
        let len = 2 * COPY_PIECE_BYTES + 3 * block + 123;
        let bytes: Vec<u8> = (0..len as u32).map(|i| (i * 13 + i / 7) as u8).collect();
        for lead in [0, 1, 4095] {
            let mut tail = WriteTail::from_partial(&bytes[..lead], block);
            tail.extend_from_slice(&bytes[lead..]);
            assert_eq!(tail.as_slice(), &bytes[..]);
            let full = len / block * block;
            assert_eq!(tail.full_blocks(), (full, ::crc32c::crc32c(&bytes[..full])));
        }
    }

    #[test]
    fn taking_the_full_blocks_keeps_the_partial_block_and_restarts_the_crc() {
        let block = 512;
        let mut tail = WriteTail::from_partial(&[1u8; 300], block);
        tail.extend_from_slice(&[2u8; 1000]);
        let taken = tail.take_full_blocks(AlignedBuf::with_capacity(block, block));
        assert_eq!(taken.len(), 1024);
        assert_eq!(&taken.as_slice()[..300], &[1u8; 300][..]);
        assert_eq!(tail.as_slice(), &[2u8; 276][..]);
        assert_eq!(tail.full_blocks(), (0, 0));
        tail.extend_from_slice(&[3u8; 236]);
        let mut expected = vec![2u8; 276];
        expected.extend_from_slice(&[3u8; 236]);
        assert_eq!(tail.full_blocks(), (512, ::crc32c::crc32c(&expected)));
    }

    #[test]
    fn a_seal_takes_everything_zero_padded() {
        let block = 512;
        let mut tail = WriteTail::new(block);
        tail.extend_from_slice(&[9u8; 700]);
        let (padded_len, padded_crc) = tail.padded_blocks();
        let taken = tail.take_padded(AlignedBuf::with_capacity(block, block));
        assert_eq!(taken.len(), padded_len);
        assert_eq!(::crc32c::crc32c(taken.as_slice()), padded_crc);
        assert_eq!(&taken.as_slice()[700..], &[0u8; 324][..]);
        assert_eq!(tail.len(), 0);
    }
}
