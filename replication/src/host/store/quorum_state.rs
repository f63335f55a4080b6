//! The partition's `quorum-state` file, written through the ring, and its durability reports.

use super::*;

impl PartitionStore {
    /// The voters written into the quorum-state file from now on.
    pub fn set_voters(&mut self, voters: &[i32]) {
        self.voters = voters.to_vec();
    }

    /// Starts writing the quorum-state file (tmp + fdatasync + rename + folder fsync, through the
    /// ring). What the core sends after it waits (`Host`'s held messages) for
    /// [`PartitionStore::take_durable_quorum_state`] to report it.
    pub fn write_quorum_state<I: Io>(
        &mut self,
        io: &mut I,
        state: ElectionState,
    ) -> Result<(), StorageError> {
        let mut data = QuorumStateData::initial(&self.cluster_id, &self.voters);
        data.applied_offset = self.applied_offset() as i64;
        data.leader_epoch = state.epoch as i32;
        data.leader_id = state.leader_id.unwrap_or(-1);
        data.voted_id = state.voted_for.unwrap_or(-1);
        self.quorum_state_issued += 1;
        // Requested first: a write that meets ENOSPC waits and is retried under this ticket,
        // and its state is reported when that retry is durable.
        self.quorum_state_requested
            .push_back((self.quorum_state_issued, state));
        self.quorum_state
            .write(io, self.quorum_state_issued, &data)?;
        Ok(())
    }

    /// KIP-595's quorum-state `appliedOffset`: the offset from which a restart would scan the
    /// log forward (everything below it is applied): the end offset of what the partition's
    /// state machine has applied (`last_applied_offset() + 1`) where it runs one, else the
    /// high-watermark (a `delete` topic's records are applied by being served once committed).
    /// Written only with the quorum-state writes elections make anyway, never per commit, so it
    /// trails; it is informative: recovery reads every voter set record from the log start
    /// (`scan_voter_records`) and does not trust it.
    pub fn applied_offset(&self) -> u64 {
        if self.keeps_snapshots {
            use crate::state_machine::StateMachine;
            (self.snapshots.state_machine.last_applied_offset() + 1).max(0) as u64
        } else {
            self.high_watermark
        }
    }

    /// The ticket of the latest quorum-state write issued (held messages wait for it).
    pub fn quorum_state_issued(&self) -> u64 {
        self.quorum_state_issued
    }

    /// The ticket of the latest quorum-state write that is durable.
    pub fn quorum_state_durable(&self) -> u64 {
        self.quorum_state.durable_ticket()
    }

    /// The newest state that became durable since the last call, if any: writes asked for while
    /// one was in flight were replaced by the newest, which covers them.
    pub fn take_durable_quorum_state(&mut self) -> Option<ElectionState> {
        let durable = self.quorum_state.durable_ticket();
        let mut newest = None;
        while let Some(&(ticket, state)) = self.quorum_state_requested.front() {
            if ticket > durable {
                break;
            }
            self.quorum_state_requested.pop_front();
            newest = Some(state);
        }
        newest
    }

    /// Whether [`PartitionStore::take_durable_quorum_state`] would return a state now.
    pub fn has_durable_quorum_state(&self) -> bool {
        let durable = self.quorum_state.durable_ticket();
        self.quorum_state_requested
            .front()
            .is_some_and(|(ticket, _)| *ticket <= durable)
    }

    /// Waits for the quorum-state writes in flight (the partition is being closed).
    pub fn finish_quorum_state<I: Io>(&mut self, io: &mut I) -> Result<(), StorageError> {
        Ok(self.quorum_state.finish_blocking(io)?)
    }
}
