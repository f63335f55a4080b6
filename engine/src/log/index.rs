//! The sparse offset index, `<base>.index`, in Kafka's layout: 8-byte entries of
//! `relative offset u32 | position u32`, big-endian, one entry each time more than
//! `index_interval_bytes` of batches were appended since the previous entry (Kafka's
//! `index.interval.bytes`, 4096). An entry names a batch's base offset (relative to the segment's
//! base offset) and that batch's byte position in the `.log` file.
//!
//! The index is advisory: recovery rebuilds it from the scanned batches and rewrites the file if
//! it is missing, truncated, garbage or disagrees.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IndexEntry {
    pub relative_offset: u32,
    pub position: u32,
}

pub(crate) const INDEX_ENTRY_BYTES: usize = 8;

/// Builds the sparse entries as batches are appended (Kafka's `bytesSinceLastIndexEntry`).
#[derive(Clone, Debug, Default)]
pub(crate) struct SparseIndex {
    pub entries: Vec<IndexEntry>,
    bytes_since_last_entry: u64,
}

impl SparseIndex {
    pub fn on_batch_appended(
        &mut self,
        segment_base_offset: i64,
        base_offset: i64,
        position: u64,
        size_bytes: u64,
        index_interval_bytes: u64,
    ) {
        if self.bytes_since_last_entry > index_interval_bytes {
            self.entries.push(IndexEntry {
                relative_offset: u32::try_from(base_offset - segment_base_offset)
                    .expect("a segment spans fewer than 2^32 offsets"),
                position: u32::try_from(position).expect("a segment is smaller than 4 GiB"),
            });
            self.bytes_since_last_entry = 0;
        }
        self.bytes_since_last_entry += size_bytes;
    }

    /// The entry of the largest indexed offset ≤ `offset`, or position 0.
    pub fn lookup(&self, segment_base_offset: i64, offset: i64) -> IndexEntry {
        let relative = offset - segment_base_offset;
        let after = self
            .entries
            .partition_point(|entry| i64::from(entry.relative_offset) <= relative);
        if after == 0 {
            IndexEntry {
                relative_offset: 0,
                position: 0,
            }
        } else {
            self.entries[after - 1]
        }
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(self.entries.len() * INDEX_ENTRY_BYTES);
        for entry in &self.entries {
            bytes.extend_from_slice(&entry.relative_offset.to_be_bytes());
            bytes.extend_from_slice(&entry.position.to_be_bytes());
        }
        bytes
    }

    /// Decode an index file. `None` if its length is not a multiple of 8 (torn or garbage).
    pub fn decode_entries(bytes: &[u8]) -> Option<Vec<IndexEntry>> {
        if !bytes.len().is_multiple_of(INDEX_ENTRY_BYTES) {
            return None;
        }
        Some(
            bytes
                .chunks_exact(INDEX_ENTRY_BYTES)
                .map(|chunk| IndexEntry {
                    relative_offset: u32::from_be_bytes(chunk[..4].try_into().unwrap()),
                    position: u32::from_be_bytes(chunk[4..].try_into().unwrap()),
                })
                .collect(),
        )
    }

    /// Drop entries at or after `position` (the segment was truncated there).
    pub fn truncate_to_position(&mut self, position: u64, size_bytes_after: u64) {
        self.entries
            .retain(|entry| u64::from(entry.position) < position);
        let last_indexed = self
            .entries
            .last()
            .map_or(0, |entry| u64::from(entry.position));
        // Approximate what Kafka would have counted: bytes since the last entry.
        self.bytes_since_last_entry = size_bytes_after.saturating_sub(last_indexed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_every_interval_and_lookup() {
        let mut index = SparseIndex::default();
        // 10 batches of 1000 bytes, 5 offsets each, interval 2048.
        for i in 0..10u64 {
            index.on_batch_appended(100, 100 + 5 * i as i64, 1000 * i, 1000, 2048);
        }
        let positions: Vec<u32> = index.entries.iter().map(|e| e.position).collect();
        assert_eq!(positions, vec![3000, 6000, 9000]);
        assert_eq!(index.lookup(100, 100).position, 0);
        assert_eq!(index.lookup(100, 114).position, 0);
        assert_eq!(index.lookup(100, 115).position, 3000);
        assert_eq!(index.lookup(100, 149).position, 9000);
        let bytes = index.encode();
        assert_eq!(&bytes[..8], &[0, 0, 0, 15, 0, 0, 0x0b, 0xb8]);
        assert_eq!(SparseIndex::decode_entries(&bytes).unwrap(), index.entries);
        assert_eq!(SparseIndex::decode_entries(&bytes[..7]), None);
    }
}
