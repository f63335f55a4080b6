//! Partitions joining and leaving the host: recovered ahead of their start (`preopen`), added
//! at runtime (a topic's), removed (a deleted topic, a storage error), their settings changed
//! while they run, and every one closed at shutdown.

use std::path::PathBuf;

use ringlog_engine::io::Io;
use ringlog_engine::log::LogConfig;

use super::{Host, HostError, PartitionSpec, PartitionStore, StorageError};
use crate::types::{PartitionId, QuorumConfig, RecoveredState};

impl<I: Io> Host<I> {
    /// Recovers a partition's files now, ahead of [`Host::add_partition`] for the same folder
    /// (which then only starts its core): a runtime opens at start-up, before it serves, the
    /// partitions it knows it held, so their recovery (a scan of the active segment, up to its
    /// size) never holds its event loop.
    pub fn preopen(&mut self, dir: PathBuf, log_config: LogConfig) -> Result<(), StorageError> {
        if self.preopened.contains_key(&dir) || self.stores.values().any(|s| s.dir == dir) {
            return Ok(());
        }
        let (store, recovered) = PartitionStore::open(
            &mut self.io,
            &dir,
            log_config,
            &self.config.cluster_id,
            &self.config.voters,
            false,
            // Damage is repaired when the partition starts, where its replicas are known
            // (`add_partition`): a topic partition with one replica has no peer to repair from.
            false,
        )?;
        self.preopened.insert(dir, (store, recovered));
        Ok(())
    }

    /// A preopened partition's log bounds (start, end) and recovered high-watermark.
    pub fn preopened_bounds(&self, dir: &std::path::Path) -> Option<(u64, u64, u64)> {
        self.preopened.get(dir).map(|(store, _)| {
            (
                store.log.log_start_offset().max(0) as u64,
                store.log.log_end_offset().max(0) as u64,
                store.high_watermark,
            )
        })
    }

    /// A preopened partition's store (its recovered snapshots, say).
    pub fn preopened_store(&self, dir: &std::path::Path) -> Option<&PartitionStore> {
        self.preopened.get(dir).map(|(store, _)| store)
    }

    /// Closes what [`Host::preopen`] opened and no partition started with (a folder about to be
    /// removed, or every one once the runtime knows its partitions).
    pub fn discard_preopened(&mut self, dir: Option<&std::path::Path>) {
        let dirs: Vec<PathBuf> = match dir {
            Some(dir) => vec![dir.to_path_buf()],
            None => self.preopened.keys().cloned().collect(),
        };
        for dir in dirs {
            if let Some((store, _)) = self.preopened.remove(&dir)
                && let Err(error) = store.log.close(&mut self.io)
            {
                tracing::warn!(dir = %dir.display(), %error, "closing a preopened partition");
            }
        }
    }

    /// Opens a partition created after the start (a topic's) and starts its core; a partition
    /// recovered by [`Host::preopen`] with the same log settings is taken as it is.
    pub fn add_partition(
        &mut self,
        quorum: &QuorumConfig,
        spec: PartitionSpec,
        seed: u64,
        now_ms: u64,
    ) -> Result<RecoveredState, HostError> {
        self.now_ms = now_ms;
        if self.offline.contains_key(&spec.id) {
            return Err(StorageError::NotHosted(spec.id).into());
        }
        let preopened = match self.preopened.remove(&spec.dir) {
            Some((store, recovered)) if store.opened_with(&spec.log_config) => {
                Some((store, recovered))
            }
            Some((store, _)) => {
                store.log.close(&mut self.io).map_err(StorageError::from)?;
                None
            }
            None => None,
        };
        let (mut store, recovered) = match preopened {
            Some(found) => found,
            None => PartitionStore::open(
                &mut self.io,
                &spec.dir,
                spec.log_config,
                &self.config.cluster_id,
                &quorum.voters,
                spec.keeps_snapshots,
                quorum.voters.len() > 1,
            )?,
        };
        store.keeps_snapshots = spec.keeps_snapshots;
        // The partition's own voters (a topic partition's replicas), not the configured ones,
        // go into its quorum-state file.
        store.set_voters(&quorum.voters);
        if spec.keeps_snapshots && !store.voter_records_scanned {
            // Preopened as a partition without snapshots: its log was not scanned for voter
            // set records yet.
            store.scan_voter_records(&mut self.io)?;
        }
        self.multi.add_partition_recovered(
            quorum,
            spec.id,
            &recovered,
            store.recovered_snapshots,
            store.recovered_voter_entries.clone(),
            seed,
            now_ms,
        )?;
        if store.repair_pending {
            self.repairing.insert(spec.id);
        }
        // Its chunks count against the node's budget from the start (none kept for lagging
        // voters before its core says who lags).
        store.keep_for_lagging_voters(&self.lagging_tail, None);
        self.stores.insert(spec.id, store);
        Ok(recovered)
    }

    /// Takes a partition out: its core, its queued reports and held messages, and its log
    /// (closed after its in-flight I/O; other logs' completions stay in the ring). Returns the
    /// partition's folder. Call it between host calls, so no work of it is half executed.
    pub fn remove_partition(&mut self, id: PartitionId) -> Option<PathBuf> {
        self.multi.remove_partition(id);
        self.persisted.retain(|(p, _)| *p != id);
        self.held.retain(|h| h.partition != id);
        for held in &mut self.held {
            held.targets.retain(|t| t.partition != id);
        }
        self.repairing.remove(&id);
        self.retired_snapshots.remove(&id);
        self.confirmations.forget(id);
        let mut store = self.stores.remove(&id)?;
        let dir = store.dir.clone();
        if let Err(error) = store.finish_quorum_state(&mut self.io) {
            tracing::warn!(partition = id, %error, "finishing a removed partition's quorum-state");
        }
        if let Err(error) = store.log.close(&mut self.io) {
            tracing::warn!(partition = id, %error, "closing a removed partition");
        }
        Some(dir)
    }

    /// A topic's `segment.bytes` changed at runtime: the partition's next segment takes it
    /// (`PartitionLog::set_segment_size_bytes`).
    pub fn set_segment_size_bytes(&mut self, partition: PartitionId, segment_size_bytes: u64) {
        if let Some(store) = self.stores.get_mut(&partition) {
            store.log.set_segment_size_bytes(segment_size_bytes);
        }
    }

    /// Flushes and closes every log (shutdown).
    pub fn close(mut self) {
        for (partition, mut store) in std::mem::take(&mut self.stores) {
            // A vote or an epoch asked for before the shutdown is on disk when we stop.
            if let Err(error) = store.finish_quorum_state(&mut self.io) {
                tracing::warn!(partition, %error, "finishing the quorum-state write");
            }
            if let Err(error) = store.log.close(&mut self.io) {
                tracing::warn!(partition, %error, "closing the log");
            }
        }
    }
}
