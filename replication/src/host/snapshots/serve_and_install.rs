//! KIP-630 FetchSnapshot in the host: the leader's answers read from the snapshot file (a file
//! range for sendfile), and the follower's download into a `.part` and its install.

use super::*;

impl<I: Io> Host<I> {
    /// Leader: fills a FetchSnapshot answer from the snapshot file. Returns the file range to
    /// send with sendfile (the answer's bytes then stay empty), carrying the reader of the
    /// snapshot the partition serves (opened at its first answer and kept, [`ServedSnapshot`]);
    /// `None` when the answer is an error.
    pub(in crate::host) fn fill_fetch_snapshot_response(
        &mut self,
        partition: PartitionId,
        response: &mut FetchSnapshotResponse,
        max_bytes: u32,
    ) -> Option<FileRange> {
        if response.error_code != ErrorCode::None {
            return None;
        }
        let store = self.stores.get_mut(&partition).expect("hosted partition");
        let limit = u64::from(max_bytes).min(u64::from(self.config.fetch_snapshot_max_bytes));
        let id = engine_id(response.snapshot_id);
        let served = match store.snapshots.serving.take() {
            Some(served) if served.snapshot_id == id => Ok(served),
            // Another snapshot's reader (an older one, or none yet): this one replaces it.
            _ => ServedSnapshot::open(&mut self.io, &store.dir, id),
        };
        let read = served.and_then(|served| {
            let range = served.range(response.position, limit);
            let size = served.size_bytes;
            store.snapshots.serving = Some(served);
            Ok((size, range?))
        });
        match read {
            Ok((size, range)) => {
                response.size = size;
                Some(range)
            }
            Err(SnapshotError::NotFound { .. } | SnapshotError::InvalidId { .. }) => {
                response.error_code = ErrorCode::SnapshotNotFound;
                None
            }
            Err(SnapshotError::PositionOutOfRange { .. }) => {
                response.error_code = ErrorCode::PositionOutOfRange;
                None
            }
            Err(error) => {
                tracing::error!(%error, "reading a snapshot for FetchSnapshot");
                response.error_code = ErrorCode::UnknownServerError;
                None
            }
        }
    }

    /// Follower: a chunk of the snapshot being fetched goes into its `.part`.
    pub(in crate::host) fn write_snapshot_chunk(
        &mut self,
        partition: PartitionId,
        snapshot_id: OffsetAndEpoch,
        size_bytes: u64,
        position: u64,
        bytes: Bytes,
    ) -> Result<(), StorageError> {
        let store = self.stores.get_mut(&partition).expect("hosted partition");
        let id = engine_id(snapshot_id);
        let current = store
            .snapshots
            .fetching
            .as_ref()
            .is_some_and(|w| w.snapshot_id() == id && w.expected_size_bytes() == size_bytes);
        if position == 0 || !current {
            if let Some(old) = store.snapshots.fetching.take() {
                old.abort(&mut self.io)?;
            }
            let writer =
                RawSnapshotWriter::create(&mut self.io, &store.dir, id, size_bytes, false)?;
            store.snapshots.fetching = Some(writer);
        }
        let writer = store.snapshots.fetching.as_mut().expect("created above");
        writer.write_at(&mut self.io, position, &bytes)?;
        Ok(())
    }

    /// Follower: every byte arrived: freeze, load into the state machine, truncate the log
    /// fully to start at the snapshot's end offset, drop older snapshots.
    pub(in crate::host) fn install_snapshot(
        &mut self,
        partition: PartitionId,
        snapshot_id: OffsetAndEpoch,
    ) -> Result<Option<VoterSet>, StorageError> {
        let store = self.stores.get_mut(&partition).expect("hosted partition");
        let Some(writer) = store
            .snapshots
            .fetching
            .take()
            .filter(|w| w.snapshot_id() == engine_id(snapshot_id))
        else {
            return Err(StorageError::Inconsistent {
                path: store.dir.display().to_string(),
                reason: format!("installing snapshot {snapshot_id:?} that was not fetched"),
            });
        };
        let contents = writer.freeze(&mut self.io)?;
        let voters = voters_of_snapshot(&contents)?;
        let producer_state = producer_state_of_snapshot(&contents);
        store
            .snapshots
            .state_machine
            .load_snapshot(&contents)
            .map_err(|e| state_machine_error(&store.dir, e))?;
        let offset = snapshot_id.offset;
        store
            .log
            .truncate_fully_and_start_at(&mut self.io, offset as i64)?;
        store.truncations += 1;
        store.flush_target = offset;
        store.reported_durable_end_offset = offset;
        store.snapshots.latest_snapshot_id = Some(snapshot_id);
        store.snapshots.producer_state = producer_state.map(|state| (snapshot_id, state));
        store.snapshots.last_snapshot_ms = self.now_ms;
        store.snapshots.fetched_total += 1;
        // A reader kept for an older snapshot must not outlive its file's deletion.
        store.snapshots.serving = None;
        delete_snapshots_before(&mut self.io, &store.dir, engine_id(snapshot_id))?;
        tracing::info!(partition, snapshot = ?snapshot_id, ?voters, "snapshot installed; log starts at its end offset");
        Ok(voters)
    }
}
