//! The double-write slots of a segment: a fixed *slot region* at the end of the segment's own
//! `.log` file.
//!
//! With O_DIRECT the last, partial block of a segment would have to be written again at every
//! flush, and a torn rewrite would destroy records that an earlier flush already acknowledged.
//! So the partial block never goes to the data area: each flush writes it into one of two slots
//! of the region, alternating, and only a *full* block is ever written to the data area (once,
//! at a position never written before). A torn slot write damages only the slot being written;
//! the other slot still holds the previous flush's tail. Region and data share one file so a
//! flush's writes all go to one file (docs/log.md, "The slot region").
//!
//! Where the region is: the segment file is created with length `region_offset + 5·B`, where
//! `region_offset = round_up(segment_size_bytes at creation, B)`, and never changes length
//! afterwards; so the region is always the file's last `5·B` bytes, whatever the configuration
//! of a later run. Data never reaches `region_offset` (asserted by every write).
//!
//! Layout of the region (block size B, O_DIRECT): slot `i` (0 or 1) occupies region bytes
//! `[2·i·B, 2·(i+1)·B)`:
//!
//! ```text
//! header block:  magic "RLTS" u32 | version u16 (3) | reserved u16 | block_size_bytes u32
//!                | sequence u64 | block_index u64 | valid_length_bytes u32 | data_crc32c u32
//!                | flush_start_position u64 | flush_blocks_crc32c u32 | data_end_position u64
//!                | header_crc32c u32 (over the 56 bytes before it) | zeros to B
//! data block:    the segment's bytes [block_index·B, block_index·B + valid_length_bytes), zeros to B
//! ```
//!
//! All integers big-endian. Sequence numbers increase by one per slot write; slot `seq % 2` is
//! written. `flush_start_position..block_index·B` are the full blocks the same flush wrote to
//! the data area (in the same flush), `flush_blocks_crc32c` their CRC32C: recovery
//! trusts a slot only when those blocks match it. `data_end_position` is the *durable mark*:
//! where the segment's batches end. It is `block_index·B + valid_length_bytes` except in the
//! slot a seal writes, which vouches for the zero-padded final block too (block_index·B is the
//! padded end, valid length 0) while the batches end inside that block.
//!
//! Region block 4 holds the *confirmation record*, written after a flush completed, off the
//! caller's critical path:
//!
//! ```text
//! confirmation:  magic "RLTC" u32 | version u16 (1) | reserved u16 | sequence u64
//!                | slot_header_crc32c u32 | record_crc32c u32 (over the 20 bytes before it) | zeros to B
//! ```
//!
//! It says "the flush that wrote slot `sequence` (the slot whose header CRC32C is
//! `slot_header_crc32c`) completed": its blocks and its slot were durable. Recovery uses it to
//! tell a completed flush damaged afterwards (refuse to open) from a flush that never finished
//! (fall back to the previous slot).

use crate::io::AlignedBuf;

pub(crate) const TAIL_SLOT_MAGIC: u32 = u32::from_be_bytes(*b"RLTS");
const TAIL_SLOT_VERSION: u16 = 3;
const HEADER_BYTES: usize = 60;
/// Blocks in the slot region: two slots of two blocks, and the confirmation record.
pub(crate) const REGION_BLOCKS: u64 = 5;
pub(crate) const CONFIRMATION_MAGIC: u32 = u32::from_be_bytes(*b"RLTC");
const CONFIRMATION_VERSION: u16 = 1;
const CONFIRMATION_BYTES: usize = 24;

/// A decoded, CRC-checked confirmation record: the flush of slot `sequence` completed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Confirmation {
    pub sequence: u64,
    pub slot_header_crc32c: u32,
}

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
    /// Where the segment's batches end (the durable mark).
    pub data_end_position: u64,
    /// The slot's own header CRC32C: names this exact slot in a confirmation record.
    pub header_crc32c: u32,
}

impl TailSlot {
    /// The segment position this slot says everything before is durable.
    pub fn durable_mark(&self) -> u64 {
        self.data_end_position
    }

    /// The end of what this slot covers: its flush's blocks and its data block's valid bytes.
    pub fn covered_end(&self, block_size_bytes: usize) -> u64 {
        // Saturating: a crafted slot must yield an absurd end (rejected), not an overflow.
        self.block_start(block_size_bytes)
            .saturating_add(self.data.len() as u64)
    }

    /// Whether `confirmation` confirms exactly this slot.
    pub fn confirmed_by(&self, confirmation: Option<Confirmation>) -> bool {
        confirmation.is_some_and(|c| {
            c.sequence == self.sequence && c.slot_header_crc32c == self.header_crc32c
        })
    }

    pub fn block_start(&self, block_size_bytes: usize) -> u64 {
        self.block_index.saturating_mul(block_size_bytes as u64)
    }

    /// Whether the full blocks this slot's flush wrote are in `bytes`, the `.log`'s bytes from
    /// position `bytes_start` on.
    pub fn flushed_blocks_present(
        &self,
        bytes: &[u8],
        bytes_start: u64,
        block_size_bytes: usize,
    ) -> bool {
        let end = self.block_start(block_size_bytes);
        let start = self.flush_start_position;
        start >= bytes_start
            && start <= end
            && end <= bytes_start + bytes.len() as u64
            && crate::crc::crc32c(
                &bytes[(start - bytes_start) as usize..(end - bytes_start) as usize],
            ) == self.flush_blocks_crc32c
    }
}

/// Where the slot region of a new segment starts: past any data a segment of
/// `segment_size_bytes` can hold (its zero-padded final block included).
pub(crate) fn region_offset_for(segment_size_bytes: u64, block_size_bytes: usize) -> u64 {
    super::segment::round_up(segment_size_bytes, block_size_bytes)
}

/// Size of the slot region (both slots and the confirmation record).
pub(crate) fn region_size_bytes(block_size_bytes: usize) -> u64 {
    REGION_BLOCKS * block_size_bytes as u64
}

/// Where the region of a segment file of `file_len` bytes starts, if that length can hold one.
pub(crate) fn region_offset_of_file(file_len: u64, block_size_bytes: usize) -> Option<u64> {
    let region = region_size_bytes(block_size_bytes);
    (file_len >= region && file_len.is_multiple_of(block_size_bytes as u64))
        .then(|| file_len - region)
}

/// Byte offset of slot `sequence % 2` in the region.
pub(crate) fn slot_offset(sequence: u64, block_size_bytes: usize) -> u64 {
    (sequence % 2) * 2 * block_size_bytes as u64
}

/// Byte offset of the confirmation record in the region.
pub(crate) fn confirmation_offset(block_size_bytes: usize) -> u64 {
    4 * block_size_bytes as u64
}

/// The header CRC32C of an encoded slot (what a confirmation record names).
pub(crate) fn encoded_slot_header_crc32c(slot: &[u8]) -> u32 {
    u32::from_be_bytes(slot[56..60].try_into().expect("a slot has a header"))
}

/// Encode a confirmation record (one block) for slot `sequence` with header CRC `slot_header_crc32c`.
pub(crate) fn encode_confirmation(
    sequence: u64,
    slot_header_crc32c: u32,
    block_size_bytes: usize,
) -> AlignedBuf {
    let mut buf = AlignedBuf::zeroed(block_size_bytes, block_size_bytes);
    let bytes = buf.as_mut_slice();
    bytes[0..4].copy_from_slice(&CONFIRMATION_MAGIC.to_be_bytes());
    bytes[4..6].copy_from_slice(&CONFIRMATION_VERSION.to_be_bytes());
    bytes[8..16].copy_from_slice(&sequence.to_be_bytes());
    bytes[16..20].copy_from_slice(&slot_header_crc32c.to_be_bytes());
    let crc = crate::crc::crc32c(&bytes[..20]);
    bytes[20..24].copy_from_slice(&crc.to_be_bytes());
    buf
}

/// The confirmation record of a region's bytes, if one is there and intact (a missing,
/// torn or damaged record only means "nothing confirmed").
pub(crate) fn decode_confirmation(file: &[u8], block_size_bytes: usize) -> Option<Confirmation> {
    let start = confirmation_offset(block_size_bytes) as usize;
    let bytes = file.get(start..start + CONFIRMATION_BYTES)?;
    let u32_at = |at: usize| u32::from_be_bytes(bytes[at..at + 4].try_into().unwrap());
    if u32_at(0) != CONFIRMATION_MAGIC
        || u16::from_be_bytes([bytes[4], bytes[5]]) != CONFIRMATION_VERSION
        || u32_at(20) != crate::crc::crc32c(&bytes[..20])
    {
        return None;
    }
    Some(Confirmation {
        sequence: u64::from_be_bytes(bytes[8..16].try_into().unwrap()),
        slot_header_crc32c: u32_at(16),
    })
}

/// Encode one slot (two blocks) into an aligned buffer ready for an O_DIRECT write.
/// `flushed_blocks` are the bytes the same flush writes to the segment, ending at the block
/// `block_index` and starting at `flush_start_position`; the batches end at
/// `data_end_position` (`block_index·B + data.len()`, or inside the last flushed block for a
/// seal's zero-padded final block).
pub(crate) fn encode_slot(
    sequence: u64,
    block_index: u64,
    data: &[u8],
    block_size_bytes: usize,
    flush_start_position: u64,
    flushed_blocks: &[u8],
    data_end_position: u64,
) -> AlignedBuf {
    encode_slot_for_blocks(
        sequence,
        block_index,
        data,
        block_size_bytes,
        flush_start_position,
        (flushed_blocks.len(), crate::crc::crc32c(flushed_blocks)),
        data_end_position,
    )
}

/// [`encode_slot`] given the flushed blocks' (length, CRC32C) instead of their bytes: a flush
/// knows the CRC already (`WriteTail` keeps it as blocks fill), so no second pass over them
/// runs between one flush's completion and the next.
pub(crate) fn encode_slot_for_blocks(
    sequence: u64,
    block_index: u64,
    data: &[u8],
    block_size_bytes: usize,
    flush_start_position: u64,
    (flushed_blocks_len, flushed_blocks_crc32c): (usize, u32),
    data_end_position: u64,
) -> AlignedBuf {
    assert!(
        data.len() < block_size_bytes,
        "a tail slot holds a partial block"
    );
    assert_eq!(
        flush_start_position + flushed_blocks_len as u64,
        block_index * block_size_bytes as u64,
        "the flushed blocks end where the slot's block starts"
    );
    let covered_end = block_index * block_size_bytes as u64 + data.len() as u64;
    assert!(
        data_end_position <= covered_end
            && covered_end - data_end_position < block_size_bytes as u64,
        "the batches end inside the last block the slot covers"
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
    header[32..36].copy_from_slice(&crate::crc::crc32c(data).to_be_bytes());
    header[36..44].copy_from_slice(&flush_start_position.to_be_bytes());
    header[44..48].copy_from_slice(&flushed_blocks_crc32c.to_be_bytes());
    header[48..56].copy_from_slice(&data_end_position.to_be_bytes());
    let header_crc = crate::crc::crc32c(&header[..56]);
    header[56..60].copy_from_slice(&header_crc.to_be_bytes());
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
        || u32_at(56) != crate::crc::crc32c(&bytes[..56])
        || u32_at(8) as usize != block_size_bytes
    {
        return None;
    }
    let valid_length = u32_at(28) as usize;
    if valid_length >= block_size_bytes || bytes.len() < block_size_bytes + valid_length {
        return None;
    }
    let data = &bytes[block_size_bytes..block_size_bytes + valid_length];
    if crate::crc::crc32c(data) != u32_at(32) {
        return None;
    }
    let slot = TailSlot {
        sequence: u64_at(12),
        block_index: u64_at(20),
        data: data.to_vec(),
        flush_start_position: u64_at(36),
        flush_blocks_crc32c: u32_at(44),
        data_end_position: u64_at(48),
        header_crc32c: u32_at(56),
    };
    // What encode_slot asserts; a crafted header that breaks it is no slot of ours.
    let covered_end = slot.covered_end(block_size_bytes);
    if slot.data_end_position > covered_end
        || covered_end - slot.data_end_position >= block_size_bytes as u64
        || slot.flush_start_position > slot.block_start(block_size_bytes)
    {
        return None;
    }
    Some(slot)
}

/// The valid slots of a region's bytes, newest first.
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

/// What a tool sees at the end of a segment file (`ringlog dump`): the region and the newest
/// valid slot's mark. Recovery decides with more care (which slot to trust); this only tells a
/// reader where the batches end without reading the (sparse) space up to the region.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SegmentEnd {
    pub block_size_bytes: usize,
    pub region_offset: u64,
    pub newest_slot_sequence: u64,
    /// Where the newest valid slot says the batches end.
    pub durable_mark: u64,
}

/// A segment file's batches as a tool reads them: the data area up to the newest valid slot's
/// mark, with that slot's copy of the partial last block laid over it (the data area does not
/// hold that block until the segment is sealed). `Ok(None)`: no slot region with a valid slot.
pub fn read_segment_data(path: &std::path::Path) -> std::io::Result<Option<(SegmentEnd, Vec<u8>)>> {
    use std::io::{Read, Seek, SeekFrom};
    let Some(end) = read_segment_end(path)? else {
        return Ok(None);
    };
    let mut file = std::fs::File::open(path)?;
    let mut region = vec![0u8; region_size_bytes(end.block_size_bytes) as usize];
    file.seek(SeekFrom::Start(end.region_offset))?;
    file.read_exact(&mut region)?;
    let slot = valid_slots_newest_first(&region, end.block_size_bytes)
        .into_iter()
        .next()
        .expect("read_segment_end found it");
    let mut data = vec![0u8; slot.covered_end(end.block_size_bytes) as usize];
    file.seek(SeekFrom::Start(0))?;
    let block_start = slot.block_start(end.block_size_bytes) as usize;
    file.read_exact(&mut data[..block_start])?;
    data[block_start..].copy_from_slice(&slot.data);
    data.truncate(end.durable_mark as usize);
    Ok(Some((end, data)))
}

/// Find the slot region of the segment file at `path` (trying the block sizes a device may
/// have) and its newest valid slot. `Ok(None)`: no region with a valid slot (not a segment of
/// this layout, or damaged).
pub fn read_segment_end(path: &std::path::Path) -> std::io::Result<Option<SegmentEnd>> {
    use std::io::{Read, Seek, SeekFrom};
    let mut file = std::fs::File::open(path)?;
    let file_len = file.metadata()?.len();
    for block_size_bytes in [512usize, 1024, 2048, 4096, 8192, 16384, 32768, 65536] {
        let Some(region_offset) = region_offset_of_file(file_len, block_size_bytes) else {
            continue;
        };
        let mut region = vec![0u8; region_size_bytes(block_size_bytes) as usize];
        file.seek(SeekFrom::Start(region_offset))?;
        file.read_exact(&mut region)?;
        if let Some(newest) = valid_slots_newest_first(&region, block_size_bytes).first() {
            return Ok(Some(SegmentEnd {
                block_size_bytes,
                region_offset,
                newest_slot_sequence: newest.sequence,
                durable_mark: newest.durable_mark(),
            }));
        }
    }
    Ok(None)
}

/// A whole segment file as the log leaves it after a cut (or a recovery) at `durable_mark`:
/// `data` in the data area (zero padded up to the region), slot 0 as created, and the newest
/// slot (sequence 1, vouching for no blocks of its own) holding `data`'s partial block at the
/// mark; or, `sealed`, as a seal leaves it: the newest slot holds no data and vouches for the
/// final block `[round_down(mark), round_up(mark))` of the data area. For tests and tools that
/// make segment files by hand; `durable_mark` may lie past `data` (the missing bytes read as
/// zeros, as a lost write would leave them).
pub fn segment_file_image(
    data: &[u8],
    durable_mark: u64,
    region_offset: u64,
    block_size_bytes: usize,
    sealed: bool,
) -> Vec<u8> {
    assert!(data.len() as u64 <= region_offset && durable_mark <= region_offset);
    assert_eq!(
        region_offset % block_size_bytes as u64,
        0,
        "the region is block aligned"
    );
    let mut file = vec![0u8; (region_offset + region_size_bytes(block_size_bytes)) as usize];
    file[..data.len()].copy_from_slice(data);
    let block_start = super::segment::round_down(durable_mark, block_size_bytes);
    let partial = file[block_start as usize..durable_mark as usize].to_vec();
    let region = region_offset as usize;
    let first = encode_slot(0, 0, &[], block_size_bytes, 0, &[], 0);
    file[region..region + first.len()].copy_from_slice(first.as_slice());
    let block_end = super::segment::round_up(durable_mark, block_size_bytes);
    let newest = if sealed {
        encode_slot(
            1,
            block_end / block_size_bytes as u64,
            &[],
            block_size_bytes,
            block_start,
            &file[block_start as usize..block_end as usize],
            durable_mark,
        )
    } else {
        encode_slot(
            1,
            block_start / block_size_bytes as u64,
            &partial,
            block_size_bytes,
            block_start,
            &[],
            durable_mark,
        )
    };
    let at = region + slot_offset(1, block_size_bytes) as usize;
    file[at..at + newest.len()].copy_from_slice(newest.as_slice());
    file
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slot_round_trips_and_rejects_any_damage() {
        let block = 512;
        let data: Vec<u8> = (0..300u32).map(|i| i as u8).collect();
        let flushed = vec![7u8; 1024];
        let encoded = encode_slot(7, 3, &data, block, 512, &flushed, 3 * 512 + 300);
        let slot = decode_slot(encoded.as_slice(), block).unwrap();
        assert_eq!(
            slot,
            TailSlot {
                sequence: 7,
                block_index: 3,
                data: data.clone(),
                flush_start_position: 512,
                flush_blocks_crc32c: ::crc32c::crc32c(&flushed),
                data_end_position: 3 * 512 + 300,
                header_crc32c: encoded_slot_header_crc32c(encoded.as_slice()),
            }
        );
        assert_eq!(slot.durable_mark(), 3 * 512 + 300);
        let mut segment = vec![0u8; 512];
        segment.extend_from_slice(&flushed);
        assert!(slot.flushed_blocks_present(&segment, 0, block));
        segment[700] ^= 1;
        assert!(
            !slot.flushed_blocks_present(&segment, 0, block),
            "a torn segment write"
        );
        assert!(
            !slot.flushed_blocks_present(&segment[..1000], 0, block),
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
    fn a_seal_slot_vouches_for_the_padded_block_and_marks_the_batch_end() {
        let block = 512;
        let flushed = vec![9u8; 1024];
        // Batches end at 1500, inside the final block [1024, 1536) that the seal pads.
        let encoded = encode_slot(3, 3, &[], block, 512, &flushed, 1500);
        let slot = decode_slot(encoded.as_slice(), block).unwrap();
        assert_eq!(slot.durable_mark(), 1500);
        assert_eq!(slot.covered_end(block), 1536);
        // A header claiming an end a whole block before what it covers is not ours.
        let mut crafted = encoded.as_slice().to_vec();
        crafted[48..56].copy_from_slice(&1000u64.to_be_bytes());
        let crc = ::crc32c::crc32c(&crafted[..56]);
        crafted[56..60].copy_from_slice(&crc.to_be_bytes());
        assert_eq!(decode_slot(&crafted, block), None);
    }

    #[test]
    fn the_region_is_the_last_five_blocks_of_the_file() {
        assert_eq!(region_offset_for(1 << 20, 4096), 1 << 20);
        assert_eq!(region_offset_for(1000, 512), 1024);
        assert_eq!(region_offset_of_file(1024 + 5 * 512, 512), Some(1024));
        assert_eq!(region_offset_of_file(4 * 512, 512), None, "too short");
        assert_eq!(
            region_offset_of_file(5 * 512 + 7, 512),
            None,
            "not whole blocks"
        );
    }

    #[test]
    fn confirmation_round_trips_names_one_slot_and_rejects_damage() {
        let block = 512;
        let slot_bytes = encode_slot(9, 2, b"tail", block, 0, &[1u8; 1024], 1028);
        let slot = decode_slot(slot_bytes.as_slice(), block).unwrap();
        let mut file = vec![0u8; region_size_bytes(block) as usize];
        assert_eq!(
            decode_confirmation(&file, block),
            None,
            "zeros confirm nothing"
        );
        let record = encode_confirmation(9, slot.header_crc32c, block);
        let at = confirmation_offset(block) as usize;
        file[at..at + block].copy_from_slice(record.as_slice());
        let confirmation = decode_confirmation(&file, block);
        assert!(slot.confirmed_by(confirmation));
        let other = decode_slot(
            encode_slot(9, 2, b"tall", block, 0, &[1u8; 1024], 1028).as_slice(),
            block,
        )
        .unwrap();
        assert!(
            !other.confirmed_by(confirmation),
            "same sequence, other slot"
        );
        for byte in 0..CONFIRMATION_BYTES {
            let mut damaged = file.clone();
            damaged[at + byte] ^= 0x04;
            assert_eq!(decode_confirmation(&damaged, block), None, "flip at {byte}");
        }
        assert_eq!(
            decode_confirmation(&file[..at + 10], block),
            None,
            "short file"
        );
    }

    #[test]
    fn slots_come_newest_first_and_torn_ones_drop_out() {
        let block = 512;
        let mut file = vec![0u8; 4 * block];
        let a = encode_slot(4, 1, b"old", block, 512, &[], 515);
        let b = encode_slot(5, 1, b"older-and-newer", block, 512, &[], 527);
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
