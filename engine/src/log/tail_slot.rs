//! The double-write slots of the `<base>.tail` sidecar file.
//!
//! With O_DIRECT the last, partial block of a segment would have to be written again at every
//! flush, and a torn rewrite would destroy records that an earlier flush already acknowledged.
//! So the partial block never goes to the segment: each flush writes it into one of two slots
//! of the tail file, alternating, and only a *full* block is ever written to the segment (once,
//! at a position never written before). A torn slot write damages only the slot being written;
//! the other slot still holds the previous flush's tail.
//!
//! Layout (block size B, O_DIRECT): slot `i` (0 or 1) occupies bytes `[2·i·B, 2·(i+1)·B)`:
//!
//! ```text
//! header block:  magic "RLTS" u32 | version u16 (1) | reserved u16 | block_size_bytes u32
//!                | sequence u64 | block_index u64 | valid_length_bytes u32 | data_crc32c u32
//!                | header_crc32c u32 (over the 40 bytes before it)  | zeros to B
//! data block:    the segment's bytes [block_index·B, block_index·B + valid_length_bytes), zeros to B
//! ```
//!
//! All integers big-endian. Sequence numbers increase by one per slot write; slot `seq % 2` is
//! written. The slot with the highest valid sequence describes the *durable mark* of the segment:
//! `block_index·B + valid_length_bytes`, the end of the last flush whose slot reached the disk.

use crate::io::AlignedBuf;

pub(crate) const TAIL_SLOT_MAGIC: u32 = u32::from_be_bytes(*b"RLTS");
const TAIL_SLOT_VERSION: u16 = 1;
const HEADER_BYTES: usize = 44;

/// One decoded, CRC-checked slot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct TailSlot {
    pub sequence: u64,
    pub block_index: u64,
    /// The valid prefix of the block (`valid_length_bytes` bytes).
    pub data: Vec<u8>,
}

impl TailSlot {
    /// The segment position this slot says everything before is durable.
    pub fn durable_mark(&self, block_size_bytes: usize) -> u64 {
        // Saturating: a crafted slot must yield an absurd mark (rejected), not an overflow.
        self.block_index
            .saturating_mul(block_size_bytes as u64)
            .saturating_add(self.data.len() as u64)
    }
}

/// Byte offset of slot `sequence % 2` in the tail file.
pub(crate) fn slot_offset(sequence: u64, block_size_bytes: usize) -> u64 {
    (sequence % 2) * 2 * block_size_bytes as u64
}

/// Size of a tail file holding both slots.
pub(crate) fn tail_file_size_bytes(block_size_bytes: usize) -> u64 {
    4 * block_size_bytes as u64
}

/// Encode one slot (two blocks) into an aligned buffer ready for an O_DIRECT write.
pub(crate) fn encode_slot(
    sequence: u64,
    block_index: u64,
    data: &[u8],
    block_size_bytes: usize,
) -> AlignedBuf {
    assert!(
        data.len() < block_size_bytes,
        "a tail slot holds a partial block"
    );
    let mut buf = AlignedBuf::zeroed(2 * block_size_bytes, block_size_bytes);
    let bytes = buf.as_mut_slice();
    let header = &mut bytes[..HEADER_BYTES];
    header[0..4].copy_from_slice(&TAIL_SLOT_MAGIC.to_be_bytes());
    header[4..6].copy_from_slice(&TAIL_SLOT_VERSION.to_be_bytes());
    header[8..12].copy_from_slice(&(block_size_bytes as u32).to_be_bytes());
    header[12..20].copy_from_slice(&sequence.to_be_bytes());
    header[20..28].copy_from_slice(&block_index.to_be_bytes());
    header[28..32].copy_from_slice(&(data.len() as u32).to_be_bytes());
    header[32..36].copy_from_slice(&crc32c::crc32c(data).to_be_bytes());
    let header_crc = crc32c::crc32c(&header[..40]);
    header[40..44].copy_from_slice(&header_crc.to_be_bytes());
    bytes[block_size_bytes..block_size_bytes + data.len()].copy_from_slice(data);
    buf
}

/// Decode slot bytes (`2·B` of them, fewer if the file is short). `None` when the slot is
/// empty, torn or corrupt: the caller falls back to the other slot.
pub(crate) fn decode_slot(bytes: &[u8], block_size_bytes: usize) -> Option<TailSlot> {
    if bytes.len() < HEADER_BYTES {
        return None;
    }
    let u32_at = |at: usize| u32::from_be_bytes(bytes[at..at + 4].try_into().unwrap());
    let u64_at = |at: usize| u64::from_be_bytes(bytes[at..at + 8].try_into().unwrap());
    if u32_at(0) != TAIL_SLOT_MAGIC
        || u16::from_be_bytes([bytes[4], bytes[5]]) != TAIL_SLOT_VERSION
        || u32_at(40) != crc32c::crc32c(&bytes[..40])
        || u32_at(8) as usize != block_size_bytes
    {
        return None;
    }
    let valid_length = u32_at(28) as usize;
    if valid_length >= block_size_bytes || bytes.len() < block_size_bytes + valid_length {
        return None;
    }
    let data = &bytes[block_size_bytes..block_size_bytes + valid_length];
    if crc32c::crc32c(data) != u32_at(32) {
        return None;
    }
    Some(TailSlot {
        sequence: u64_at(12),
        block_index: u64_at(20),
        data: data.to_vec(),
    })
}

/// The newest valid slot of a tail file's bytes, if any.
pub(crate) fn newest_valid_slot(file: &[u8], block_size_bytes: usize) -> Option<TailSlot> {
    let stride = 2 * block_size_bytes;
    (0..2)
        .filter_map(|index| {
            let start = index * stride;
            let end = (start + stride).min(file.len());
            if start >= end {
                None
            } else {
                decode_slot(&file[start..end], block_size_bytes)
            }
            // A slot found at the other index was not written there by us: ignore it.
            .filter(|slot| slot.sequence % 2 == index as u64)
        })
        .max_by_key(|slot| slot.sequence)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slot_round_trips_and_rejects_any_damage() {
        let block = 512;
        let data: Vec<u8> = (0..300u32).map(|i| i as u8).collect();
        let encoded = encode_slot(7, 3, &data, block);
        let slot = decode_slot(encoded.as_slice(), block).unwrap();
        assert_eq!(
            slot,
            TailSlot {
                sequence: 7,
                block_index: 3,
                data: data.clone()
            }
        );
        assert_eq!(slot.durable_mark(block), 3 * 512 + 300);
        // Every single-bit flip in the meaningful bytes and every torn length is rejected.
        for byte in (0..HEADER_BYTES).chain(block..block + data.len()) {
            let mut damaged = encoded.as_slice().to_vec();
            damaged[byte] ^= 0x10;
            assert_eq!(decode_slot(&damaged, block), None, "flip at {byte}");
        }
        for len in [0, 10, HEADER_BYTES, block, block + 299] {
            assert_eq!(
                decode_slot(&encoded.as_slice()[..len], block),
                None,
                "torn at {len}"
            );
        }
        assert_eq!(
            decode_slot(encoded.as_slice(), 4096),
            None,
            "other block size"
        );
    }

    #[test]
    fn newest_valid_slot_prefers_the_higher_sequence_and_falls_back() {
        let block = 512;
        let mut file = vec![0u8; 4 * block];
        let a = encode_slot(4, 1, b"old", block);
        let b = encode_slot(5, 1, b"older-and-newer", block);
        file[..2 * block].copy_from_slice(a.as_slice());
        file[2 * block..].copy_from_slice(b.as_slice());
        assert_eq!(newest_valid_slot(&file, block).unwrap().sequence, 5);
        file[2 * block + 3] ^= 1; // tear the newer one
        assert_eq!(newest_valid_slot(&file, block).unwrap().sequence, 4);
        file[3] ^= 1;
        assert_eq!(newest_valid_slot(&file, block), None);
    }
}
