//! KIP-853: the voter set records of a partition's log, read at open.

use super::*;

/// How much of the log one read of the voter set scan takes.
const SCAN_CHUNK_BYTES: u32 = 1 << 20;

impl PartitionStore {
    /// KIP-853: reads the whole log, from its start, for voter set records (the core acts on
    /// the newest one, committed or not, and reverts if it is truncated), after the log-start
    /// snapshot's set. Only partitions with snapshots are read: their log is bounded by them,
    /// and only the metadata partition changes voters (a topic partition's log may be large and
    /// its voters are its replicas).
    pub fn scan_voter_records<I: Io>(&mut self, io: &mut I) -> Result<(), StorageError> {
        let mut entries: Vec<VoterSetEntry> =
            self.snapshots.recovered_voters.iter().cloned().collect();
        let end = self.log.log_end_offset().max(0) as u64;
        let mut offset = self.log.log_start_offset().max(0) as u64;
        let mut kraft_version = self.snapshots.recovered_kraft_version;
        while offset < end {
            let bytes = self.read(io, offset, SCAN_CHUNK_BYTES)?;
            let headers =
                batch_headers(&bytes).map_err(|error| self.inconsistent(offset, error))?;
            let Some(last) = headers.last() else {
                return Err(self.inconsistent(offset, "no batch where the log holds one"));
            };
            let next = last.last_offset + 1;
            for (record_offset, voters) in
                voter_sets_in(&bytes).map_err(|error| self.inconsistent(offset, error))?
            {
                entries.push(VoterSetEntry {
                    offset: record_offset,
                    voters,
                });
            }
            if let Some(&(at, version)) = kraft_versions_in(&bytes)
                .map_err(|error| self.inconsistent(offset, error))?
                .last()
            {
                kraft_version = Some(version);
                self.kraft_version_offset = Some(at);
            }
            assert!(next > offset, "the scan moves forward");
            offset = next;
        }
        if !entries.is_empty() {
            tracing::info!(dir = %self.dir.display(), records = entries.len(), latest = ?entries.last().map(|e| e.voters.ids()), "voter set records recovered");
        }
        // A voter set written before KRaftVersionRecords were (this node's earlier versions)
        // still means kraft.version 1.
        self.kraft_version = kraft_version.unwrap_or(if entries.is_empty() {
            0
        } else {
            crate::voters::KRAFT_VERSION_DYNAMIC
        });
        if self.kraft_version > 0 {
            tracing::info!(dir = %self.dir.display(), kraft_version = self.kraft_version, "kraft.version read back");
        }
        self.recovered_voter_entries = entries;
        self.voter_records_scanned = true;
        Ok(())
    }

    fn inconsistent(&self, offset: u64, error: impl std::fmt::Display) -> StorageError {
        StorageError::Inconsistent {
            path: self.dir.display().to_string(),
            reason: format!("reading voter set records at offset {offset}: {error}"),
        }
    }
}
