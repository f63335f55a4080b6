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
//! header block:  magic "RLTS" u32 | version u16 (2) | reserved u16 | block_size_bytes u32
//!                | sequence u64 | block_index u64 | valid_length_bytes u32 | data_crc32c u32
//!                | flush_start_position u64 | flush_blocks_crc32c u32
//!                | header_crc32c u32 (over the 48 bytes before it) | zeros to B
//! data block:    the segment's bytes [block_index·B, block_index·B + valid_length_bytes), zeros to B
//! ```
//!
//! All integers big-endian. Sequence numbers increase by one per slot write; slot `seq % 2` is
//! written. `flush_start_position..block_index·B` are the full blocks the same flush wrote to
//! the `.log` file (and fdatasynced before the slot was written), `flush_blocks_crc32c` their
//! CRC32C, checked at recovery. The newest valid slot gives the *durable mark* of the segment,
//! `block_index·B + valid_length_bytes`.

use crate::io::AlignedBuf;

pub(crate) const TAIL_SLOT_MAGIC: u32 = u32::from_be_bytes(*b"RLTS");
const TAIL_SLOT_VERSION: u16 = 2;
const HEADER_BYTES: usize = 52;

/// One decoded, CRC-checked slot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct TailSlot {
    pub sequence: u64,
    pub block_index: u64,
    /// The valid prefix of the block (`valid_length_bytes` bytes).
    pub data: Vec<u8>,
    /// First byte of the full blocks written to the segment by the same flush.
    pub flush_start_position: u64,
    /// CRC32C of the segment's bytes `[flush_start_position, block_index·B)`.
    pub flush_blocks_crc32c: u32,
}

impl TailSlot {
    /// The segment position this slot says everything before is durable.
    pub fn durable_mark(&self, block_size_bytes: usize) -> u64 {
        // Saturating: a crafted slot must yield an absurd mark (rejected), not an overflow.
        self.block_start(block_size_bytes)
            .saturating_add(self.data.len() as u64)
    }

    pub fn block_start(&self, block_size_bytes: usize) -> u64 {
        self.block_index.saturating_mul(block_size_bytes as u64)
    }

    /// Whether the full blocks this slot's flush wrote are in `segment` (the `.log` image).
    pub fn flushed_blocks_present(&self, segment: &[u8], block_size_bytes: usize) -> bool {
        let end = self.block_start(block_size_bytes);
        let start = self.flush_start_position;
        start <= end
            && end <= segment.len() as u64
            && crc32c::crc32c(&segment[start as usize..end as usize]) == self.flush_blocks_crc32c
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
/// `flushed_blocks` are the bytes the same flush writes to the segment, ending at the block
/// `block_index` and starting at `flush_start_position`.
pub(crate) fn encode_slot(
    sequence: u64,
    block_index: u64,
    data: &[u8],
    block_size_bytes: usize,
    flush_start_position: u64,
    flushed_blocks: &[u8],
) -> AlignedBuf {
    assert!(
        data.len() < block_size_bytes,
        "a tail slot holds a partial block"
    );
    assert_eq!(
        flush_start_position + flushed_blocks.len() as u64,
        block_index * block_size_bytes as u64,
        "the flushed blocks end where the slot's block starts"
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
    header[36..44].copy_from_slice(&flush_start_position.to_be_bytes());
    header[44..48].copy_from_slice(&crc32c::crc32c(flushed_blocks).to_be_bytes());
    let header_crc = crc32c::crc32c(&header[..48]);
    header[48..52].copy_from_slice(&header_crc.to_be_bytes());
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
        || u32_at(48) != crc32c::crc32c(&bytes[..48])
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
        flush_start_position: u64_at(36),
        flush_blocks_crc32c: u32_at(44),
    })
}

/// The valid slots of a tail file's bytes, newest first.
pub(crate) fn valid_slots_newest_first(file: &[u8], block_size_bytes: usize) -> Vec<TailSlot> {
    let stride = 2 * block_size_bytes;
    let mut slots: Vec<TailSlot> = (0..2)
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
        .collect();
    slots.sort_by_key(|slot| std::cmp::Reverse(slot.sequence));
    slots
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slot_round_trips_and_rejects_any_damage() {
        let block = 512;
        let data: Vec<u8> = (0..300u32).map(|i| i as u8).collect();
        let flushed = vec![7u8; 1024];
        let encoded = encode_slot(7, 3, &data, block, 512, &flushed);
        let slot = decode_slot(encoded.as_slice(), block).unwrap();
        assert_eq!(
            slot,
            TailSlot {
                sequence: 7,
                block_index: 3,
                data: data.clone(),
                flush_start_position: 512,
                flush_blocks_crc32c: crc32c::crc32c(&flushed),
            }
        );
        assert_eq!(slot.durable_mark(block), 3 * 512 + 300);
        let mut segment = vec![0u8; 512];
        segment.extend_from_slice(&flushed);
        assert!(slot.flushed_blocks_present(&segment, block));
        segment[700] ^= 1;
        assert!(
            !slot.flushed_blocks_present(&segment, block),
            "a torn segment write"
        );
        assert!(
            !slot.flushed_blocks_present(&segment[..1000], block),
            "a short segment"
        );
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
    fn slots_come_newest_first_and_torn_ones_drop_out() {
        let block = 512;
        let mut file = vec![0u8; 4 * block];
        let a = encode_slot(4, 1, b"old", block, 512, &[]);
        let b = encode_slot(5, 1, b"older-and-newer", block, 512, &[]);
        file[..2 * block].copy_from_slice(a.as_slice());
        file[2 * block..].copy_from_slice(b.as_slice());
        let sequences = |file: &[u8]| -> Vec<u64> {
            valid_slots_newest_first(file, block)
                .iter()
                .map(|s| s.sequence)
                .collect()
        };
        assert_eq!(sequences(&file), vec![5, 4]);
        file[2 * block + 3] ^= 1; // tear the newer one
        assert_eq!(sequences(&file), vec![4]);
        file[3] ^= 1;
        assert_eq!(sequences(&file), Vec::<u64>::new());
    }
}
